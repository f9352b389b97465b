"""The one place a `GrooveError` becomes each front end's error.

A `GrooveError` carries a `kind` (groove.errors): `invalid` (the request cannot be answered as
given: an empty query, a bad date or cursor, a value out of range), `not_found` (a note that is not
indexed), `busy` (a reindex already running) or `failed` (anything else). Each front end's error
for each kind is in the table below; front ends call these functions and nothing else.

| kind      | MCP tool call                | web view (HTTP) | local socket / CLI        |
|-----------|------------------------------|-----------------|---------------------------|
| invalid   | JSON-RPC -32602, one line    | 400             | the error's exit code (2) |
| not_found | tool error (`isError: true`) | 404             | exit code 1               |
| busy      | tool error                   | 409             | exit code 1               |
| failed    | tool error                   | 500             | exit code 1               |
"""

from __future__ import annotations

from typing import Any

from groove.errors import GrooveError

HTTP_STATUS = {"invalid": 400, "not_found": 404, "busy": 409, "failed": 500}


def http_status(exc: GrooveError) -> int:
    """The web view's status code for an error."""
    return HTTP_STATUS.get(exc.kind, 500)


def mcp_error(exc: GrooveError) -> Exception:
    """What a tool call raises for an error: invalid arguments are a JSON-RPC error -32602 with groove's
    one-line message; any other failure is a tool error (`isError: true`) with its message.
    (The SDK is imported here, not above: the command line imports this module for `local_error`.)"""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    if exc.kind == "invalid":
        return MCPError(code=INVALID_PARAMS, message=str(exc))
    return ToolError(str(exc))


def local_error(exc: GrooveError) -> dict[str, Any]:
    """The local socket's answer for an error; the command line exits with `exit_code`."""
    return {"ok": False, "error": str(exc), "exit_code": exc.exit_code}


__all__ = ["HTTP_STATUS", "http_status", "local_error", "mcp_error"]
