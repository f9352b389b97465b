"""Streamable HTTP: the SDK's Starlette app at /mcp, /healthz, and uvicorn inside our task group.

One endpoint serves every protocol version the SDK speaks: the handshake
versions (stateful sessions, `Mcp-Session-Id`) and stateless 2026-07-28
requests (routed by their `MCP-Protocol-Version` header).

This module composes the front end; each gate or limit is its own module,
one middleware a module (docs/mcp.md, "Limits", lists each with its setting):

- `access.GuardMiddleware`: Host, then Origin, then the bearer token (with a
  per-peer backoff after failed tokens), on every route; refusals counted.
- `bodies.BodyDeadline` (the outermost ASGI layer, added by `HTTPService`):
  the whole body within `body_timeout_s`, at most `max_bodies_per_client`
  bodies arriving per peer address, and a client gone mid-body ends quietly.
- `streams.StreamGuard`: event streams (`GET /mcp`, 2026 listen streams)
  bounded per peer and in all, and ended after `stream_idle_s` of silence.
- `sessions.SessionGuard`: at most `max_sessions` handshake-era sessions; at
  the cap a new handshake ends the session idle the longest.
- `connections.GuardedH11Protocol`: at most `max_connections` connections and
  a timeout for the request headers, inside uvicorn.
- `storm.StormLog`: every one of them logs counts once per interval, never a
  line (or a client's header, or a traceback) per request.

    GuardMiddleware -> RequestBodyLimitMiddleware -> StreamGuard -> SessionGuard -> Starlette (/mcp, /healthz, /ui)
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import json
import logging
import shlex
import socket
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.abc
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from groove.config import HTTPSettings, Settings
from groove.daemon import Daemon
from groove.errors import GrooveError
from groove.logs import get_logger
from groove.serve.http.access import (
    Allowed,
    GuardMiddleware,
    format_host,
    is_loopback,
    require_token_off_loopback,
    resolve_token,
)
from groove.serve.http.bodies import BodyDeadline
from groove.serve.http.connections import GuardedH11Protocol, guarded_protocol
from groove.serve.http.sessions import MCP_PATH, SessionGuard
from groove.serve.http.storm import StormFilter, StormLog
from groove.serve.http.streams import StreamGuard, StreamLimits
from groove.serve.http.ui import UI_PATH, mount_ui
from groove.serve.mcp import sdk

log = get_logger(__name__)

HEALTH_PATH = "/healthz"
SHUTDOWN_GRACE_S = 1  # uvicorn waits this long for open responses (SSE streams never end) before cancelling
# Loggers that write a line per connection or per hung-up client; StormFilter turns those into counts.
NOISY_LOGGERS = ("asyncio", "uvicorn.error", "mcp.server.streamable_http")


class BindError(GrooveError):
    """The HTTP server cannot listen where asked (`busy`: another process holds the port)."""

    busy = False


# --- --bind -----------------------------------------------------------------------------


def parse_bind(value: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets: `[::1]:3100`) -> (host, port). ValueError with a clear message."""
    text = (value or "").strip()
    example = "expected HOST:PORT, e.g. 127.0.0.1:3100 or [::1]:3100"
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"invalid bind address {value!r}: {example}")
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"invalid bind address {value!r}: {host!r} is not an IPv6 address") from None
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or not host or ":" in host:
            raise ValueError(f"invalid bind address {value!r}: {example}")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"invalid bind address {value!r}: the port must be a number from 0 to 65535")
    return host, int(port_text)


BIND_KNOB = "--bind HOST:PORT"


def open_listener(host: str, port: int, knob: str = BIND_KNOB) -> socket.socket:
    """A listening TCP socket, or BindError saying why not; a busy port's message says to pick another with `knob`
    (how this groove was given its address: `--bind`, `make serve BIND=`, `[serve] bind` in a file)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BindError(f"cannot listen on {format_host(host)}:{port}: unknown host ({exc.strerror})") from exc
    family, type_, proto, _, address = infos[0]
    sock = socket.socket(family, type_, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        busy = exc.errno == errno.EADDRINUSE
        hint = f"; another process uses that port: pick another with {knob}" if busy else ""
        error = BindError(f"cannot listen on {format_host(host)}:{port}: {exc.strerror}{hint}")
        error.busy = busy
        raise error from exc
    return sock


# --- the app ----------------------------------------------------------------------------------


def build_app(server: MCPServer, daemon: Daemon, settings: Settings, allowed: Allowed, token: str = "") -> ASGIApp:
    """The whole HTTP app: gate (Host, Origin, token) -> body limit -> event streams -> sessions -> Starlette
    (/mcp, /healthz, /ui). Refusals at the gate, streams ended and sessions ended are each counted in
    their own storm log."""
    http = settings.serve.http
    max_body = http.max_body_bytes

    @server.custom_route(HEALTH_PATH, methods=["GET"], include_in_schema=False)
    async def healthz(request: Request) -> Response:
        try:
            with anyio.fail_after(5):
                pending = await daemon.index.pending()
        except Exception as exc:  # noqa: BLE001 - any failure to read the index is an unhealthy answer, not a crash
            return JSONResponse({"ok": False, "error": str(exc) or type(exc).__name__}, status_code=503)
        alive, reasons = daemon.health()  # the watcher watches, the writer runs and its last write went through
        if not alive:
            return JSONResponse({"ok": False, "error": "; ".join(reasons), "pending": pending}, status_code=503)
        return JSONResponse({"ok": True, "pending": pending})

    mount_ui(server, daemon)  # /ui and /ui/api/*: custom routes of the same app, so the same guard as /mcp

    starlette_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        max_request_body_size=max_body,
        transport_security=allowed.sdk_settings(),
        session_idle_timeout=http.session_idle_s,
        max_sessions=http.max_sessions + 1,  # SessionGuard makes room first; the SDK's 503 is the last resort
    )
    sessions = SessionGuard(
        starlette_app, server, http.max_sessions, StormLog("mcp_sessions_ended", http.storm_log_interval_s)
    )
    limits = StreamLimits.of(http)
    streams = StreamGuard(
        sessions,
        limits,
        StormLog(
            "http_event_streams",
            http.storm_log_interval_s,
            max_streams=limits.max_streams,
            per_client=limits.per_client,
        ),
    )
    return GuardMiddleware(
        RequestBodyLimitMiddleware(streams, max_body),
        allowed,
        token,
        refused=StormLog("http_refused", http.storm_log_interval_s),
    )


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: groove's task group owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HTTPService:
    """uvicorn serving `app` on an already-listening socket, run as a task of our task group.

    The transport's own limits live here, beside the connections they protect: the connection cap and
    header timeout (`GuardedH11Protocol`), idle keep-alive, and the body limits (`BodyDeadline` around
    `app`: the deadline, the bodies per peer, a client gone mid-body), all counted in one storm log."""

    def __init__(
        self,
        app: ASGIApp,
        sock: socket.socket,
        *,
        mcp: MCPServer | None = None,
        debug: bool = False,
        http: HTTPSettings | None = None,
    ):
        self.sock = sock
        self.mcp = mcp
        http = http or HTTPSettings()
        self.storm = StormLog("http_connections_shed", http.storm_log_interval_s, max_connections=http.max_connections)
        config = uvicorn.Config(
            BodyDeadline(
                app,
                http.body_timeout_s,
                self.storm,
                per_client=max(1, min(http.max_bodies_per_client, http.max_connections // 2)),
            ),
            log_config=None,
            access_log=False,
            log_level="debug" if debug else "warning",
            lifespan="on",
            ws="none",
            http=guarded_protocol(http, self.storm),
            timeout_keep_alive=http.keep_alive_s,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            server_header=False,
        )
        self.server = _Uvicorn(config)
        self._storm_filter = StormFilter(self.storm)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()`; `task_status.started()` once connections are accepted."""
        async with anyio.create_task_group() as tg:
            done = anyio.Event()

            async def serve() -> None:
                noisy = [logging.getLogger(name) for name in NOISY_LOGGERS]
                for logger in noisy:
                    logger.addFilter(self._storm_filter)
                try:
                    await self.server.serve(sockets=[self.sock])
                finally:
                    for logger in noisy:
                        logger.removeFilter(self._storm_filter)
                    self.storm.flush()
                    done.set()

            tg.start_soon(serve)
            while not self.server.started and not done.is_set():  # noqa: ASYNC110 - uvicorn's flag has no event
                await anyio.sleep(0.02)
            if not self.server.started:
                raise BindError("the HTTP server stopped during startup (see the log above)")
            task_status.started()

    def stop(self) -> None:
        """Stop accepting, let responses finish (SHUTDOWN_GRACE_S at most), then return from run()."""
        self.server.should_exit = True

    async def shutdown(self) -> None:
        """`stop()`, and end the streams that would otherwise keep their responses open until the grace
        runs out: 2026-07-28 listen streams close gracefully, handshake sessions are terminated."""
        self.stop()
        if self.mcp is None:
            return
        sdk.close_listen_streams(self.mcp)
        await sdk.terminate_sessions(self.mcp, SHUTDOWN_GRACE_S)


def client_snippets(url: str, stdio_command: list[str], *, token: bool = False) -> str:
    """What to paste into an MCP client's configuration (printed on stderr at startup; never the token).

    The HTTP entry is Cursor's shape (a bare `url`): Claude Desktop's config file refuses it, and the other
    clients have shapes of their own, which `groove client-config` prints (groove/clients.py)."""
    entry: dict[str, Any] = {"url": url}
    if token:
        entry["headers"] = {"Authorization": "Bearer <your token>"}
    http = {"mcpServers": {"groove": entry}}
    stdio = {"mcpServers": {"groove": {"command": stdio_command[0], "args": stdio_command[1:]}}}
    client_config = [stdio_command[0], "client-config", "CLIENT", *_folder_args(stdio_command)]
    return (
        f"groove is serving MCP at {url}\n"
        f"  health: {url.rsplit('/', 1)[0]}{HEALTH_PATH}\n"
        f"  web view: {url.rsplit('/', 1)[0]}{UI_PATH}\n"
        "MCP client configuration for Cursor (~/.cursor/mcp.json; Streamable HTTP):\n"
        f"{json.dumps(http, indent=2, ensure_ascii=False)}\n"
        "or let the client start groove itself (stdio; Claude Desktop, Cursor and Gemini CLI read this shape):\n"
        f"{json.dumps(stdio, indent=2, ensure_ascii=False)}\n"
        "for Claude Desktop over HTTP (through mcp-remote), Claude Code, VS Code, Codex CLI and Gemini CLI:\n"
        f"  {' '.join(shlex.quote(x) for x in client_config)}"
        " [--transport http] prints that client's own entry (docs/clients.md)\n"
    )


def _folder_args(command: list[str]) -> list[str]:
    """The --config / --kb / --index arguments of a `groove serve` command line, for another command of it."""
    out: list[str] = []
    for i, arg in enumerate(command[:-1]):
        if arg in ("--config", "--kb", "--index"):
            out += [arg, command[i + 1]]
    return out


__all__ = [
    "HEALTH_PATH",
    "MCP_PATH",
    "Allowed",
    "BindError",
    "BodyDeadline",
    "GuardMiddleware",
    "GuardedH11Protocol",
    "HTTPService",
    "SessionGuard",
    "StormLog",
    "StreamGuard",
    "build_app",
    "client_snippets",
    "format_host",
    "guarded_protocol",
    "is_loopback",
    "open_listener",
    "parse_bind",
    "require_token_off_loopback",
    "resolve_token",
]
