"""Every place groove reaches past the public API of the `mcp` SDK (pinned: mcp==2.3.0).

An SDK upgrade that removes or changes one of these breaks here, in one
visible place, and `tests/test_sdk_contract.py` names the reach that broke.
The reaches, and why each is needed:

1. `MCPServer._lowlevel_server` (`lowlevel`): the low-level registry. MCPServer
   has no public hook to register handlers for `resources/*` methods whose set
   of resources is dynamic (the index's notes), nor to run the server over
   caller-made streams (groove's own stdio wire).
2. `Server.add_request_handler(method, params_type, handler)` on it
   (`add_request_handler`): the note resources and resource subscriptions.
3. A wrapped `Server.create_initialization_options` (`advertise_resources_list_changed`):
   every transport asks the server for its capabilities there, and MCPServer
   offers no setting for `resources.listChanged` on the handshake protocol era.
4. `ServerSession._connection` (`connection_of`): the per-request session wraps
   the connection; the SDK exposes it to MCPServer tools as `Context.connection`
   but not on the low-level `ServerRequestContext` that middleware and
   low-level handlers get. groove needs it to deliver notifications later.
5. `Server.get_request_handler("subscriptions/listen").handler.close()`
   (`close_listen_streams`): ends 2026-07-28 listen streams at shutdown, which
   would otherwise keep their responses open until uvicorn's grace runs out.
6. `StreamableHTTPSessionManager._server_instances` (`terminate_sessions`): the
   SDK has no public "end every session"; at shutdown each handshake-era
   session's transport is terminated so its open stream ends.
7. `Server.run(read, write, options)` (`run_streams`): runs the server on
   groove's stdio streams (MCPServer.run_stdio_async would read the process's
   real stdin/stdout, which groove has claimed for itself).
8. `StreamableHTTPSessionManager._server_instances` again (`open_sessions`,
   `end_session`): the SDK's session cap answers 503 to every new handshake
   until a session ends or expires; groove instead ends the session idle the
   longest to make room (`groove.serve.http.server.SessionGuard`), which needs the
   live session IDs and a way to terminate one of them.

groove's own per-server state (the note events) is kept in a weak map here
(`attach_events` / `events_of`) instead of an attribute injected into the
SDK's object.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import MCPServer

SDK_VERSION = "2.3.0"

_EVENTS: weakref.WeakKeyDictionary[MCPServer, Any] = weakref.WeakKeyDictionary()


def lowlevel(server: MCPServer) -> Any:
    """Reach 1: the low-level server inside MCPServer."""
    return server._lowlevel_server


def add_request_handler(server: MCPServer, method: str, params_type: type, handler: Callable[..., Any]) -> None:
    """Reach 2: a handler for a JSON-RPC method MCPServer has no decorator for."""
    lowlevel(server).add_request_handler(method, params_type, handler)


def advertise_resources_list_changed(server: MCPServer) -> None:
    """Reach 3: `resources.listChanged` in the handshake-era capabilities (the SDK derives
    `subscribe` from the handler, and both flags from subscriptions/listen on 2026-07-28)."""
    low = lowlevel(server)
    plain_options = low.create_initialization_options

    def create_initialization_options(
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ):
        return plain_options(
            notification_options or NotificationOptions(resources_changed=True), experimental_capabilities, extensions
        )

    low.create_initialization_options = create_initialization_options


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """Reach 4: the connection a low-level request came in on (None when there is none)."""
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def close_listen_streams(server: MCPServer) -> None:
    """Reach 5: end every 2026-07-28 `subscriptions/listen` stream gracefully."""
    entry = lowlevel(server).get_request_handler("subscriptions/listen")
    if entry is not None and callable(getattr(entry.handler, "close", None)):
        entry.handler.close()


async def terminate_sessions(server: MCPServer, timeout: float) -> None:  # noqa: ASYNC109 - the reach's own bound
    """Reach 6: terminate every live handshake-era HTTP session (within `timeout` seconds)."""
    try:
        manager = server.session_manager
    except RuntimeError:  # no HTTP app was built
        return
    sessions = getattr(manager, "_server_instances", {})
    with anyio.move_on_after(timeout):
        for transport in list(sessions.values()):
            await transport.terminate()


def open_sessions(server: MCPServer) -> dict[str, Any]:
    """Reach 8: the live handshake-era sessions, session ID -> transport ({} before the HTTP app runs)."""
    try:
        manager = server.session_manager
    except RuntimeError:  # no HTTP app was built
        return {}
    return manager._server_instances


async def end_session(server: MCPServer, session_id: str) -> bool:
    """Reach 8: terminate one session (its ID answers 404 from then on); False when it is not open."""
    transport = open_sessions(server).get(session_id)
    if transport is None:
        return False
    await transport.terminate()
    return True


async def run_streams(server: MCPServer, read_stream: Any, write_stream: Any) -> None:
    """Reach 7: serve one client over the given streams with the server's own options."""
    low = lowlevel(server)
    await low.run(read_stream, write_stream, low.create_initialization_options())


def attach_events(server: MCPServer, events: Any) -> None:
    """groove's note events for this server (for the transports and tests); no SDK attribute is added."""
    _EVENTS[server] = events


def events_of(server: MCPServer) -> Any:
    return _EVENTS[server]


__all__ = [
    "SDK_VERSION",
    "add_request_handler",
    "advertise_resources_list_changed",
    "attach_events",
    "close_listen_streams",
    "connection_of",
    "end_session",
    "events_of",
    "lowlevel",
    "open_sessions",
    "run_streams",
    "terminate_sessions",
]
