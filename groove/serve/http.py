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
- A bearer token (`[serve.http] token`, or the environment variable named by
  `token_env`, GROOVE_TOKEN by default), when set, is required on every
  route, compared in constant time; without it: 401 with
  `WWW-Authenticate: Bearer realm="groove"`. Binding an address that is not
  loopback without a token refuses to start.

Limits against hostile or broken clients:

- Connections (`GuardedH11Protocol`): at most `max_connections` open; past
  it a new connection closes the oldest one that has not sent a request yet
  (or, when every connection is busy, is closed itself). A connection that
  has not sent its request headers within `header_timeout_s` is closed, and
  idle keep-alive connections after `keep_alive_s`. Closed and refused
  connections are logged once per interval with a count (`StormLog`),
  never once per connection.
- Request bodies (`BodyDeadline`, the outermost ASGI layer, added by
  `HTTPService`): the whole body must arrive within `body_timeout_s` of the
  request's headers, or the request gets 408 and its connection is closed
  (a client trickling its body a byte at a time would otherwise hold a
  connection slot and a task forever). Requests without a body (GET, the
  event stream) are never cut; a long response is not a body. Counted in
  the same storm log as `body_timeout`.
- Sessions (`SessionGuard`): at most `max_sessions` handshake-era sessions,
  each closed after `session_idle_s` without a request; at the cap a new
  handshake closes the session idle the longest instead of being refused.

Patterns ending in `:*` match any port (`myhost:*`, `https://notes.lan:*`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import json
import ipaddress
import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import anyio
import anyio.abc
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from uvicorn.protocols.http.h11_impl import H11Protocol
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from groove.errors import GrooveError
from groove.config import ConfigError, HTTPSettings, Settings
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


# --- the bearer token ------------------------------------------------------------------------

def is_loopback(host: str) -> bool:
    """Whether a bind host only accepts connections from this machine."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def resolve_token(http: HTTPSettings, environ: Mapping[str, str] | None = None) -> str:
    """The bearer token: `[serve.http] token`, else the variable `token_env` names; "" = none."""
    if http.token:
        return http.token
    env = os.environ if environ is None else environ
    return env.get(http.token_env, "").strip() if http.token_env else ""


def require_token_off_loopback(host: str, port: int, token: str, token_env: str) -> None:
    """ConfigError (exit 2) when binding an address other machines can reach without a token."""
    if token or is_loopback(host):
        return
    where = f"{format_host(host)}:{port}"
    env = token_env or "GROOVE_TOKEN"
    raise ConfigError(
        f"refusing to serve on {where} without a token: any machine that reaches this address could read "
        f"every note. Set one (e.g. `export {env}=$(openssl rand -hex 32)`, or [serve.http] token) and give "
        f"it to your clients, or bind 127.0.0.1 instead"
    )


def _bearer(headers: Headers) -> str | None:
    value = headers.get("authorization")
    if not value:
        return None
    scheme, _, credentials = value.strip().partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


def _unauthorized(error: str | None, message: str) -> Response:
    challenge = 'Bearer realm="groove"' + (f', error="{error}"' if error else "")
    return JSONResponse(
        {"error": "unauthorized", "message": message}, status_code=401, headers={"WWW-Authenticate": challenge}
    )


# The web view's page itself holds no note data (only markup and script): a browser can load it without
# the token, and its script then sends the token (from the URL fragment, never sent to the server, or
# typed in) on every /ui/api call. Host and Origin are checked for it as for every route.
TOKEN_FREE_PAGES = frozenset({"/ui"})


class GuardMiddleware:
    """Host and Origin validation, then the bearer token, for every HTTP route, in front of everything else."""

    def __init__(self, app: ASGIApp, allowed: Allowed, token: str = ""):
        self.app = app
        self.allowed = allowed
        self._token = token.encode()

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
        if self._token and not (scope.get("method") == "GET" and scope.get("path") in TOKEN_FREE_PAGES):
            given = _bearer(headers)
            if given is None:
                log.info("http_refused", reason="no_token", path=scope.get("path"))
                await _unauthorized(None, "this server needs a bearer token: send the header "
                                    "'Authorization: Bearer <token>' (docs/mcp.md shows it for each client)")(scope, receive, send)
                return
            if not hmac.compare_digest(given.encode(), self._token):
                log.warning("http_refused", reason="bad_token", path=scope.get("path"))
                await _unauthorized("invalid_token", "the bearer token is not the one this server was started "
                                    "with; check [serve.http] token or the token environment variable")(scope, receive, send)
                return
        await self.app(scope, receive, send)


# --- storms are logged once -------------------------------------------------------------------

class StormLog:
    """A count of repeated events, logged at most once per `interval_s` (the first at once)."""

    def __init__(self, event: str, interval_s: float = 10.0, **fields: Any):
        self.event = event
        self.interval_s = interval_s
        self.fields = fields
        self.pending: dict[str, int] = {}
        self.total = 0
        self._last = -float("inf")
        self._timer: asyncio.TimerHandle | None = None

    def count(self, reason: str) -> None:
        self.total += 1
        self.pending[reason] = self.pending.get(reason, 0) + 1
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            self.flush()
        elif self._timer is None:
            with contextlib.suppress(RuntimeError):  # no running loop: the next count flushes
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(self.interval_s - (now - self._last), self.flush)

    def flush(self) -> None:
        self._timer = None
        if not self.pending:
            return
        self._last = time.monotonic()
        counts, self.pending = self.pending, {}
        log.warning(self.event, **counts, total=self.total, interval_s=self.interval_s, **self.fields)


class _StormFilter(logging.Filter):
    """Lines other libraries log once per connection, counted into the storm log instead: asyncio's
    traceback for every failed accept() (EMFILE), uvicorn's warning for every malformed request."""

    REASONS = (("out of system resource", "accept_failed"), ("Invalid HTTP request received", "invalid_request"))

    def __init__(self, storm: StormLog):
        super().__init__()
        self.storm = storm

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        for needle, reason in self.REASONS:
            if needle in text:
                self.storm.count(reason)
                return False
        return True


# --- connections ----------------------------------------------------------------------------------

class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a cap on open connections and a timeout for the request headers.

    Subclassed per server by `guarded_protocol` (class attributes carry the limits and the storm log).
    A connection is idle while it has no request in progress: before its first request's headers are
    complete, or between requests on a kept-alive connection.
    """

    max_connections = 256
    header_timeout_s = 10.0
    storm: StormLog = StormLog("http_connections_shed")

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._idle_since = time.monotonic()
        self._arm_header_timer()
        if len(self.connections) > self.max_connections:
            victim = min(
                (c for c in self.connections if c is not self and isinstance(c, GuardedH11Protocol) and c._idle()),
                key=lambda c: c._idle_since, default=None,
            )
            if victim is not None:
                victim._close("idle_closed_at_cap")
            else:
                self._close("refused_at_cap")

    def _idle(self) -> bool:
        return (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing()

    def _arm_header_timer(self) -> None:
        expected = self.cycle
        self.loop.call_later(self.header_timeout_s, self._header_deadline, expected)

    def _header_deadline(self, expected: Any) -> None:
        # Still the same (finished or absent) request: nothing complete arrived in time.
        if self.cycle is expected and self._idle():
            self._close("header_timeout")

    def _close(self, reason: str) -> None:
        self.storm.count(reason)
        if not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._idle_since = time.monotonic()
        self._arm_header_timer()


class _BodyTimedOut(Exception):
    """Raised from `BodyDeadline`'s receive when the body missed its deadline; `BodyDeadline` catches it."""


class BodyDeadline:
    """The whole request body must arrive within `timeout_s` of the request's headers; past it, 408 and close.

    Wraps `receive` with an anyio deadline that starts when uvicorn hands the request over (its headers are
    complete) and ends once the last body chunk (`more_body` false) has arrived; after that `receive` is
    untouched, so an SSE stream waiting for the disconnect is never cut. A request that declares no body
    (no Content-Length, or 0, and no Transfer-Encoding: GET, the event stream) is passed through as is.
    The SDK's body-limit middleware inside reads the whole body before the app runs, so the deadline
    always falls before a response has started: the answer is a one-line 408 with `Connection: close`,
    which makes uvicorn's h11 protocol close the connection (and free its slot under `max_connections`).
    """

    def __init__(self, app: ASGIApp, timeout_s: float, storm: StormLog):
        self.app = app
        self.timeout_s = timeout_s
        self.storm = storm

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _declares_body(scope):
            await self.app(scope, receive, send)
            return
        deadline = anyio.current_time() + self.timeout_s
        body_done = False
        started = False

        async def timed_receive() -> Any:
            nonlocal body_done
            if body_done:
                return await receive()
            try:
                with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                    message = await receive()
            except TimeoutError:
                raise _BodyTimedOut from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def watched_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except _BodyTimedOut:
            if started:  # not reached behind the body-limit middleware; nothing sensible left to answer
                raise
            self.storm.count("body_timeout")
            text = (f"request body not received within [serve.http] body_timeout_s = {self.timeout_s:g} s of its "
                    "headers; send the whole body at once, or raise body_timeout_s for very slow links\n")
            await PlainTextResponse(text, status_code=408, headers={"Connection": "close"})(scope, receive, send)


def _declares_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"0", b"")):
            return True
    return False


def guarded_protocol(http: HTTPSettings, storm: StormLog) -> type[GuardedH11Protocol]:
    """A GuardedH11Protocol class carrying this server's limits."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "max_connections": http.max_connections, "header_timeout_s": http.header_timeout_s, "storm": storm,
    })


# --- sessions ------------------------------------------------------------------------------------

class SessionGuard:
    """Keeps room for new handshakes: at `max_sessions` open sessions, the one idle the longest is ended.

    Tracks, per `Mcp-Session-Id`, when it was last used and how many of its requests are in flight
    (an open GET stream counts as in flight, so a listening client is never the one ended). The SDK's
    own cap (set one above ours) only answers 503 when every session is busy.
    """

    def __init__(self, app: ASGIApp, server: MCPServer, max_sessions: int):
        self.app = app
        self.server = server
        self.max_sessions = max_sessions
        self.last_used: dict[str, float] = {}
        self.in_flight: dict[str, int] = {}
        self.ended = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != MCP_PATH:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        sid = headers.get("mcp-session-id")
        if sid is None:
            if scope.get("method") == "POST" and headers.get("mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS:
                await self._make_room()
            await self.app(scope, receive, self._watch(send))
            return
        if sid not in sdk.open_sessions(self.server):  # unknown or ended: the SDK answers 404; nothing to track
            await self.app(scope, receive, send)
            return
        self.in_flight[sid] = self.in_flight.get(sid, 0) + 1
        self.last_used[sid] = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            left = self.in_flight.get(sid, 1) - 1
            if left > 0:
                self.in_flight[sid] = left
            else:
                self.in_flight.pop(sid, None)
            if sid in sdk.open_sessions(self.server):
                self.last_used[sid] = time.monotonic()
            else:
                self.last_used.pop(sid, None)

    def _watch(self, send: Send) -> Send:
        async def watching(message: Any) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        self.last_used[value.decode("latin-1")] = time.monotonic()
            await send(message)
        return watching

    async def _make_room(self) -> None:
        sessions = sdk.open_sessions(self.server)
        if len(self.last_used) > 2 * self.max_sessions:  # forget sessions that ended on their own
            for sid in [s for s in self.last_used if s not in sessions]:
                self.last_used.pop(sid, None)
        if len(sessions) < self.max_sessions:
            return
        idle = [sid for sid in sessions if not self.in_flight.get(sid)]
        if not idle:
            return  # every session is busy: the SDK answers 503
        oldest = min(idle, key=lambda sid: self.last_used.get(sid, 0.0))
        await sdk.end_session(self.server, oldest)
        self.last_used.pop(oldest, None)
        self.ended += 1
        SESSION_STORM.count("idle_session_ended_at_cap")
        with anyio.move_on_after(1.0):  # the SDK forgets it once its server task has wound down
            while oldest in sessions:
                await anyio.sleep(0.005)


SESSION_STORM = StormLog("mcp_sessions_ended")


# --- the app ----------------------------------------------------------------------------------

def build_app(server: MCPServer, daemon: Daemon, settings: Settings, allowed: Allowed, token: str = "") -> ASGIApp:
    """The whole HTTP app: guard (Host, Origin, token) -> body limit -> sessions -> Starlette (/mcp, /healthz)."""
    http = settings.serve.http
    max_body = http.max_body_bytes

    @server.custom_route(HEALTH_PATH, methods=["GET"], include_in_schema=False)
    async def healthz(request: Request) -> Response:
        try:
            with anyio.fail_after(5):
                pending = await daemon.pending()
        except Exception as exc:  # noqa: BLE001
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
    sessions = SessionGuard(starlette_app, server, http.max_sessions)
    return GuardMiddleware(RequestBodyLimitMiddleware(sessions, max_body), allowed, token)


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: groove's task group owns SIGTERM/SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HTTPService:
    """uvicorn serving `app` on an already-listening socket, run as a task of our task group.

    The transport's own limits live here, beside the connections they protect: the connection cap and
    header timeout (`GuardedH11Protocol`), idle keep-alive, and the body deadline (`BodyDeadline` around
    `app`), all counted in one storm log."""

    def __init__(self, app: ASGIApp, sock: socket.socket, *, mcp: MCPServer | None = None, debug: bool = False,
                 http: HTTPSettings | None = None):
        self.sock = sock
        self.mcp = mcp
        http = http or HTTPSettings()
        self.storm = StormLog("http_connections_shed", max_connections=http.max_connections)
        config = uvicorn.Config(
            BodyDeadline(app, http.body_timeout_s, self.storm),
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
        self._storm_filter = _StormFilter(self.storm)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()`; `task_status.started()` once connections are accepted."""
        async with anyio.create_task_group() as tg:
            done = anyio.Event()

            async def serve() -> None:
                noisy = [logging.getLogger("asyncio"), logging.getLogger("uvicorn.error")]
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


def client_snippets(url: str, stdio_command: list[str], *, token: bool = False) -> str:
    """What to paste into an MCP client's configuration (printed on stderr at startup; never the token)."""
    entry: dict[str, Any] = {"url": url}
    if token:
        entry["headers"] = {"Authorization": "Bearer <your token>"}
    http = {"mcpServers": {"groove": entry}}
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
    "HEALTH_PATH", "MCP_PATH", "Allowed", "BindError", "BodyDeadline", "GuardMiddleware",
    "GuardedH11Protocol", "HTTPService", "SessionGuard", "StormLog", "build_app", "client_snippets", "format_host",
    "is_loopback", "open_listener", "parse_bind", "require_token_off_loopback", "resolve_token",
]
