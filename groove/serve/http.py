"""Streamable HTTP: the SDK's Starlette app at /mcp, /healthz, and uvicorn inside our task group.

One endpoint serves every protocol version the SDK speaks: the handshake
versions (stateful sessions, `Mcp-Session-Id`) and stateless 2026-07-28
requests (routed by their `MCP-Protocol-Version` header).

Security defaults, on every route (the SDK's own Host/Origin check covers
only /mcp, and turns itself on only for loopback binds):

- Host must be a loopback name with the bound port (`127.0.0.1:PORT`,
  `localhost:PORT`, `[::1]:PORT`), the bound address itself when it is a
  specific one, or a value listed in `[serve.http] allowed_hosts`;
  otherwise 421.
- Origin, when present, must be `http://` + one of the loopback names with
  the bound port, or listed in `[serve.http] allowed_origins`; otherwise
  403. A browser page on another site can therefore never reach the server
  (DNS rebinding), while non-browser clients send no Origin.
- Request bodies larger than `[serve.http] max_body_bytes` get 413.

Patterns ending in `:*` match any port (`myhost:*`, `https://notes.lan:*`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import ipaddress
import socket
from dataclasses import dataclass
from typing import Iterator

import anyio
import anyio.abc
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from groove.errors import GrooveError
from groove.config import Settings
from groove.logs import get_logger
from groove.serve import sdk
from groove.serve.daemon import Daemon
from groove.serve.ui import UI_PATH, mount_ui

log = get_logger(__name__)

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SHUTDOWN_GRACE_S = 1  # uvicorn waits this long for open responses (SSE streams never end) before cancelling


class BindError(GrooveError):
    """The HTTP server cannot listen where asked."""


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


def format_host(host: str) -> str:
    """A host as it appears in a URL or a Host header (IPv6 in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def open_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket, or BindError saying why not."""
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
        hint = "; another process uses that port: pick another with --bind HOST:PORT" if exc.errno == errno.EADDRINUSE else ""
        raise BindError(f"cannot listen on {format_host(host)}:{port}: {exc.strerror}{hint}") from exc
    return sock


# --- Host / Origin --------------------------------------------------------------------------

@dataclass(frozen=True)
class Allowed:
    hosts: tuple[str, ...]
    origins: tuple[str, ...]

    @classmethod
    def for_bind(cls, host: str, port: int, extra_hosts: list[str] | tuple[str, ...] = (),
                 extra_origins: list[str] | tuple[str, ...] = ()) -> "Allowed":
        names = list(LOOPBACK_NAMES)
        bound = format_host(host)
        if host not in ("0.0.0.0", "::", "") and bound.lower() not in names:
            names.append(bound.lower())
        suffix = f":{port}"
        hosts = [n + suffix for n in names] + [h.strip().lower() for h in extra_hosts if h.strip()]
        origins = [f"http://{n}{suffix}" for n in LOOPBACK_NAMES] + [o.strip().lower().rstrip("/") for o in extra_origins if o.strip()]
        return cls(tuple(dict.fromkeys(hosts)), tuple(dict.fromkeys(origins)))

    def host_ok(self, host: str | None) -> bool:
        return bool(host) and _matches(host.lower(), self.hosts)

    def origin_ok(self, origin: str | None) -> bool:
        return not origin or _matches(origin.lower().rstrip("/"), self.origins)

    def sdk_settings(self) -> TransportSecuritySettings:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=list(self.hosts), allowed_origins=list(self.origins)
        )


def _matches(value: str, patterns: tuple[str, ...]) -> bool:
    for pattern in patterns:
        if value == pattern:
            return True
        if pattern.endswith(":*") and value.startswith(pattern[:-1]) and value[len(pattern) - 1:].isdigit():
            return True
    return False


class GuardMiddleware:
    """Host and Origin validation for every HTTP route, in front of everything else."""

    def __init__(self, app: ASGIApp, allowed: Allowed):
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.allowed.host_ok(host):
            log.warning("http_refused", reason="host", host=host, path=scope.get("path"))
            await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
            return
        origin = headers.get("origin")
        if not self.allowed.origin_ok(origin):
            log.warning("http_refused", reason="origin", origin=origin, path=scope.get("path"))
            await PlainTextResponse("Invalid Origin header", status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)


# --- the app ----------------------------------------------------------------------------------

def build_app(server: MCPServer, daemon: Daemon, settings: Settings, allowed: Allowed) -> ASGIApp:
    """The whole HTTP app: guard -> body limit -> Starlette (/mcp, /healthz)."""
    max_body = settings.serve.http.max_body_bytes

    @server.custom_route(HEALTH_PATH, methods=["GET"], include_in_schema=False)
    async def healthz(request: Request) -> Response:
        try:
            with anyio.fail_after(5):
                pending = await daemon.pending()
        except Exception as exc:  # noqa: BLE001
            return JSONResponse({"ok": False, "error": str(exc) or type(exc).__name__}, status_code=503)
        return JSONResponse({"ok": True, "pending": pending})

    mount_ui(server, daemon)  # /ui and /ui/api/*: custom routes of the same app, so the same guard as /mcp

    starlette_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        max_request_body_size=max_body,
        transport_security=allowed.sdk_settings(),
    )
    return GuardMiddleware(RequestBodyLimitMiddleware(starlette_app, max_body), allowed)


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: groove's task group owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HTTPService:
    """uvicorn serving `app` on an already-listening socket, run as a task of our task group."""

    def __init__(self, app: ASGIApp, sock: socket.socket, *, mcp: MCPServer | None = None, debug: bool = False):
        self.sock = sock
        self.mcp = mcp
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            log_level="debug" if debug else "warning",
            lifespan="on",
            ws="none",
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            server_header=False,
        )
        self.server = _Uvicorn(config)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()`; `task_status.started()` once connections are accepted."""
        async with anyio.create_task_group() as tg:
            done = anyio.Event()

            async def serve() -> None:
                try:
                    await self.server.serve(sockets=[self.sock])
                finally:
                    done.set()

            tg.start_soon(serve)
            while not self.server.started and not done.is_set():
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


def client_snippets(url: str, stdio_command: list[str]) -> str:
    """What to paste into an MCP client's configuration (printed on stderr at startup)."""
    http = {"mcpServers": {"groove": {"url": url}}}
    stdio = {"mcpServers": {"groove": {"command": stdio_command[0], "args": stdio_command[1:]}}}
    return (
        f"groove is serving MCP at {url}\n"
        f"  health: {url.rsplit('/', 1)[0]}{HEALTH_PATH}\n"
        f"  web view: {url.rsplit('/', 1)[0]}{UI_PATH}\n"
        "MCP client configuration (Streamable HTTP):\n"
        f"{json.dumps(http, indent=2, ensure_ascii=False)}\n"
        "or let the client start groove itself (stdio):\n"
        f"{json.dumps(stdio, indent=2, ensure_ascii=False)}\n"
    )


__all__ = [
    "HEALTH_PATH", "MCP_PATH", "Allowed", "BindError", "GuardMiddleware", "HTTPService", "build_app",
    "client_snippets", "format_host", "open_listener", "parse_bind",
]
