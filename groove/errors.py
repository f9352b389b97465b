"""The one error base of groove.

Every failure a person can act on is a `GrooveError`: its `str()` is a one-line
message that says what happened and what to do, and `exit_code` is what the
command line exits with. The CLI maps it to `groove: error: ...` on stderr in
one place (`groove.cli.main`). Its `kind` says what sort of failure it is
(`invalid`: the request cannot be answered as given; `not_found`; `busy`;
`failed`: anything else), and `groove.serve.errors` turns each kind into each
front end's error in one table (MCP, the web view, the local socket).
Anything else that escapes is a bug.

This module sits beside every layer (like `config` and `logs`): it imports
nothing from groove.
"""

from __future__ import annotations


class GrooveError(Exception):
    """A failure with a message for a person and the exit code the CLI uses."""

    exit_code: int = 1
    kind: str = "failed"  # invalid | not_found | busy | failed (groove.serve.errors maps it per front end)

    def __init__(self, message: str = "", *, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self)


class ConfigError(GrooveError):
    """A configuration problem a person can fix; the message says how."""

    exit_code = 2


class UsageError(GrooveError):
    """Bad command-line input (exit 2)."""

    exit_code = 2
    kind = "invalid"


class NotFoundError(GrooveError):
    """A note or a resource that is not in the index."""

    kind = "not_found"


class BusyError(GrooveError):
    """The work asked for is already running (a second reindex)."""

    kind = "busy"


class EmbedderError(GrooveError):
    """A model that cannot load, or an embedding backend (in-process or remote) that failed."""


__all__ = ["BusyError", "ConfigError", "EmbedderError", "GrooveError", "NotFoundError", "UsageError"]
