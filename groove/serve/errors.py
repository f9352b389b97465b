"""The one place a `GrooveError` becomes each front end's error.

A `GrooveError` carries a `kind` (groove.errors): `invalid` (the request cannot be answered as
given: an empty query, a bad date or cursor, a value out of range), `not_found` (a note that is not
indexed), `busy` (a reindex already running) or `failed` (anything else). Each front end's error
for each kind is in the table below; front ends call these functions and nothing else.

| kind      | MCP tool call                | MCP request (resources, prompts) | web view | local socket / CLI        |
|-----------|------------------------------|----------------------------------|----------|---------------------------|
| invalid   | tool error (`isError: true`) | JSON-RPC -32602, one line        | 400      | the error's exit code (2) |
| not_found | tool error                   | JSON-RPC -32602, one line        | 404      | exit code 1               |
| busy      | tool error                   | JSON-RPC -32603                  | 409      | exit code 1               |
| failed    | tool error                   | JSON-RPC -32603                  | 500      | exit code 1               |

A tool call's every failure is a tool error (MCP 2025-11-25, SEP-1303: input validation errors are
tool execution errors, so the model reads the message and can correct its call); only an unknown
tool stays a JSON-RPC error (`guard.py`).
"""

from __future__ import annotations

from typing import Any

from groove.errors import GrooveError

HTTP_STATUS = {"invalid": 400, "not_found": 404, "busy": 409, "failed": 500}


def http_status(exc: GrooveError) -> int:
    """The web view's status code for an error."""
    return HTTP_STATUS.get(exc.kind, 500)


def tool_error(message: str) -> Any:
    """What a tool call answers for any failure: a result with `isError: true` and the one-line message as
    its text, nothing else (no SDK prefix, no structured content). The guard answers argument errors with
    it before a tool runs, the tools' wrapper every GrooveError a tool raises. (The SDK is imported here,
    not above: the command line imports this module for `local_error`.)"""
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def request_error(exc: GrooveError, data: dict[str, Any] | None = None) -> Exception:
    """A non-tool request's error (resources, prompts, completion): invalid and not_found are JSON-RPC -32602
    with the one-line message (SEP-2164: an unknown resource is invalid params), the rest -32603."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

    code = INVALID_PARAMS if exc.kind in ("invalid", "not_found") else INTERNAL_ERROR
    return MCPError(code=code, message=str(exc), data=data)


def local_error(exc: GrooveError) -> dict[str, Any]:
    """The local socket's answer for an error; the command line exits with `exit_code`."""
    return {"ok": False, "error": str(exc), "exit_code": exc.exit_code}


__all__ = ["HTTP_STATUS", "http_status", "local_error", "request_error", "tool_error"]
