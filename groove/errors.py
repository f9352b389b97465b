"""The one error base of groove.

Every failure a person can act on is a `GrooveError`: its `str()` is a one-line
message that says what happened and what to do, and `exit_code` is what the
command line exits with. The CLI maps it to `groove: error: ...` on stderr in
one place (`groove.cli.main`); the MCP layer maps it to a tool error in one
place (`groove.serve.mcp_app`). Anything else that escapes is a bug.

This module sits beside every layer (like `config` and `logs`): it imports
nothing from groove.
"""

from __future__ import annotations


class GrooveError(Exception):
    """A failure with a message for a person and the exit code the CLI uses."""

    exit_code: int = 1

    def __init__(self, message: str = "", *, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self)


class UsageError(GrooveError):
    """Bad command-line input (exit 2)."""

    exit_code = 2


class NotFoundError(GrooveError):
    """A note or a resource that is not in the index."""


class BusyError(GrooveError):
    """The work asked for is already running (a second reindex)."""


__all__ = ["BusyError", "GrooveError", "NotFoundError", "UsageError"]
