"""`groove serve`: the daemon and one MCP transport in one anyio task group.

    serve(settings, "stdio" | "http", "HOST:PORT")

- stdio: MCP on stdin/stdout for one client that started groove itself.
  From the start, file descriptor 1 points at stderr and the MCP stream
  writes to a private duplicate of the real stdout, so nothing but JSON-RPC
  ever reaches the client (not a stray print, not a library's progress
  bar). When stdin closes the process exits: no orphaned servers.
- http: Streamable HTTP via uvicorn, run as a task of the same task group
  (see `groove.serve.http.server`). Once it listens, the URL and client
  configuration snippets are printed on stderr and systemd is told READY=1.

SIGTERM / SIGINT: stop accepting (uvicorn stops listening, or stdin is let
go), give open responses a moment, stop the daemon (its close takes the write
lock, so the current transaction commits or rolls back whole), exit 0. A
second signal, or 2.5 s without finishing, cancels whatever is left; a
worker thread busy in a model call cannot keep the process past 4 s.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import httpx2
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

from groove import EXAMPLE_NOTES  # `--examples`: the checkout's examples/notes, or the wheel's copy
from groove.config import ConfigError, Settings, replace_settings
from groove.daemon import Daemon
from groove.folders import Folders
from groove.logs import get_logger
from groove.serve.http.server import (
    BIND_KNOB,
    MCP_PATH,
    Allowed,
    BindError,
    HTTPService,
    build_app,
    client_snippets,
    format_host,
    open_listener,
    parse_bind,
    require_token_off_loopback,
    resolve_token,
)
from groove.serve.mcp import sdk
from groove.serve.mcp.server import build_server
from groove.serve.process.attach import run_bridge
from groove.serve.process.local import ANSWER_TIMEOUT_S, DaemonError, http_endpoint, raise_fd_limit, serve_local
from groove.serve.process.sdnotify import notify
from groove.store.address import anchor_of

log = get_logger(__name__)

SHUTDOWN_DEADLINE_S = 2.5  # then cancel whatever is left
HARD_EXIT_S = 4.0  # then leave anyway: a thread stuck in a model call must not keep us past 5 s


# --- helpers --------------------------------------------------------------------------


def example_notes() -> Path | None:
    """The example notes shipped with groove (the checkout's examples/notes, or the wheel's copy), if there."""
    return EXAMPLE_NOTES if EXAMPLE_NOTES.is_dir() else None


def with_example_notes(settings: Settings) -> Settings:
    """Settings that serve the shipped example notes (`groove serve --examples`, `make serve`).
    Settings are frozen: this returns a validated copy, it never changes `settings`."""
    folder = example_notes()
    if folder is None:
        raise ConfigError(
            "--examples serves the example notes shipped with groove, and this installation has none; "
            "pass --kb PATH with your notes folder instead"
        )
    return replace_settings(settings, kb_path=folder)


def _sd_notify(state: str) -> None:
    try:
        notify(state)
    except Exception as exc:  # noqa: BLE001 - telling systemd must never take the server down
        log.debug("sd_notify_failed", error=repr(exc))


def _exit_watchdog(seconds: float) -> None:
    """After a stop signal: if the process is still here in `seconds`, exit 0 now.

    Only a worker thread inside a long model call can keep shutdown that long,
    and the index is safe to leave at any point (the database is the queue and
    SQLite's WAL is crash-safe), so leaving beats overstaying a service manager's
    stop timeout.
    """

    def run() -> None:
        time.sleep(seconds)
        try:
            sys.stderr.write(f"groove: shutdown took over {seconds:.1f} s; exiting now ({time.time():.3f})\n")
            sys.stderr.flush()
        finally:
            os._exit(0)

    threading.Thread(target=run, name="groove-exit-watchdog", daemon=True).start()


def stdio_command(settings: Settings) -> list[str]:
    """The command line an MCP client would use to start this same server over stdio."""
    exe = shutil.which("groove")
    beside = Path(sys.executable).with_name("groove")
    if beside.exists():
        exe = str(beside)
    cmd = [exe or "groove", "serve", "--transport", "stdio"]
    if settings.config_file:
        cmd += ["--config", str(settings.config_file)]
    if settings.kb_path:  # resolved when loaded; several: each with its name
        for flag in Folders(settings.kb_path).kb_flags():
            cmd += ["--kb", flag]
    if settings.index_path:
        cmd += ["--index", str(settings.index_path)]
    return cmd


def _unwrap(group: BaseExceptionGroup) -> BaseException:
    """The one real error inside a task group's exception group, else the group."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        elif not isinstance(exc, anyio.get_cancelled_exc_class()):
            leaves.append(exc)

    walk(group)
    return leaves[0] if len(leaves) == 1 else group


# --- stdio --------------------------------------------------------------------------


class _StdinLines:
    """The MCP input as an async iterator of lines, read by a daemon thread.

    The thread reads a private descriptor with os.read (no Python buffer lock
    to hold at interpreter exit), and a blocked read never holds up shutdown:
    the daemon thread is simply left behind, unlike a worker-thread readline
    that cancellation would have to wait for.
    """

    def __init__(self, fd: int):
        self._send, self._recv = anyio.create_memory_object_stream[str](16)
        token = anyio.lowlevel.current_token()
        threading.Thread(target=self._pump, args=(fd, token), name="groove-stdin", daemon=True).start()

    def _pump(self, fd: int, token: Any) -> None:
        pending = b""
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    anyio.from_thread.run(self._send.send, line.decode("utf-8", errors="replace") + "\n", token=token)
            if pending.strip():
                anyio.from_thread.run(self._send.send, pending.decode("utf-8", errors="replace"), token=token)
        except Exception:  # noqa: BLE001 - the loop is gone, or stdin broke: either way this is EOF
            pass
        finally:
            try:
                anyio.from_thread.run_sync(self._send.close, token=token)
            except Exception:  # noqa: BLE001 - the loop is gone: nothing is left to tell
                pass

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        try:
            return await self._recv.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


class StdioWire:
    """The MCP wire: private duplicates of the real stdin and stdout.

    From here on, descriptor 0 reads /dev/null and descriptor 1 writes to
    stderr, so nothing else in the process (a library's print, a progress
    bar, a child process) can read from or write to the MCP stream.
    """

    def __init__(self) -> None:
        sys.stdout.flush()
        self.stdin_fd = os.dup(0)
        self.stdout_fd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        self.stdout = os.fdopen(self.stdout_fd, "wb", buffering=0, closefd=False)

    def release(self) -> None:
        """Put the descriptors back (the stdin duplicate stays open: the reader thread may still use it)."""
        try:
            sys.stdout.flush()
            os.dup2(self.stdout_fd, 1)
            os.dup2(self.stdin_fd, 0)
        except OSError:
            pass


async def run_stdio(server: MCPServer, wire: StdioWire) -> None:
    """MCPServer.run_stdio_async, on groove's own stdin reader and the claimed stdout."""
    async with stdio_streams(wire) as (read_stream, write_stream):
        await sdk.run_streams(server, read_stream, write_stream)


def stdio_streams(wire: StdioWire) -> Any:
    """The SDK's stdio streams over groove's own stdin reader and the claimed stdout (serving, or bridging)."""
    stdin = _StdinLines(wire.stdin_fd)
    stdout = anyio.wrap_file(io.TextIOWrapper(wire.stdout, encoding="utf-8", newline="\n", write_through=True))
    return stdio_server(stdin=stdin, stdout=stdout)  # type: ignore[arg-type]  # our stdin reader: the SDK only iterates it


# --- attaching to a running service ----------------------------------------------------------


def running_service(settings: Settings) -> tuple[str, str | None, int] | None:
    """(url, token, pid) of the groove serve that writes this index and serves HTTP, when one answers on the
    local endpoint; None when none runs (then this process serves the index itself). A service that serves no
    HTTP endpoint is an error: this process could neither attach to it nor open the index beside it."""
    index = anchor_of(settings.store.url, settings.resolved_index_path)  # as the service keys its socket
    try:
        found = http_endpoint(index, timeout=ANSWER_TIMEOUT_S)
    except DaemonError as exc:  # an older groove serve that has no endpoint to give: open the index as before
        log.info("stdio_cannot_attach", error=str(exc))
        return None
    if found is None:
        return None
    if not found.url:
        raise ConfigError(
            f"a groove serve (pid {found.pid}) writes the index {index} and serves no HTTP endpoint "
            "a stdio client could attach to; run the service with --transport http (the service unit does), "
            "or stop it and let this client serve the index"
        )
    return found.url, found.token, found.pid


async def _attach(wire: StdioWire, url: str, token: str | None, pid: int) -> None:
    """Bridge this process's stdio client to the running service until stdin closes or a signal arrives."""
    log.info("stdio_attached", url=url, pid=pid, note="no index or model opened here; the service answers")
    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("shutting_down", signal=signal.Signals(signum).name)
                    tg.cancel_scope.cancel()

        tg.start_soon(watch_signals)
        try:
            async with stdio_streams(wire) as (read_stream, write_stream):
                forwarded = await run_bridge(url, token, read_stream, write_stream)
            log.info("stdin_closed", forwarded=forwarded)
        except httpx2.HTTPError as exc:
            log.error("service_unreachable", url=url, error=str(exc))
        tg.cancel_scope.cancel()
    log.info("serve_stopped")


# --- serve --------------------------------------------------------------------------------


def _busy_port(settings: Settings, error: BindError) -> BindError:
    """A busy port's error, saying so when the process holding it is the groove serve of these very notes (a second
    `make serve`): then there is nothing to start, its URL is the one to use."""
    try:
        found = http_endpoint(anchor_of(settings.store.url, settings.resolved_index_path), timeout=2.0)
    except (ConfigError, DaemonError, OSError):
        return error
    if found is None or not found.url:
        return error
    return BindError(
        f"{error}; a groove serve (pid {found.pid}) already serves these notes at {found.url}: "
        "use it (groove client-config CLIENT --transport http prints each client's entry for it), or stop it first"
    )


async def serve(settings: Settings, transport: str, bind: str, bind_knob: str = BIND_KNOB) -> None:
    """Run groove until stdin closes (stdio) or a signal arrives. Raises BindError, ConfigError, ...

    `bind_knob`: how the address was given (`--bind HOST:PORT`, `make serve BIND=...`, a config file's
    `[serve] bind`), named by the error of a port already in use."""
    if transport not in ("stdio", "http"):
        raise ValueError(f"transport must be stdio or http, got {transport!r}")
    sock = None
    host, port = "127.0.0.1", 0
    if transport == "http":
        host, port = parse_bind(bind)
        http = settings.serve.http
        require_token_off_loopback(host, port, resolve_token(http), http.token_env)  # before listening at all
        try:
            sock = open_listener(host, port, bind_knob)  # before loading anything: a busy port fails fast
        except BindError as exc:
            said = await anyio.to_thread.run_sync(_busy_port, settings, exc) if exc.busy else exc
            if said is exc:
                raise
            raise said from exc
    wire = StdioWire() if transport == "stdio" else None
    try:
        if wire is not None:
            running = await anyio.to_thread.run_sync(running_service, settings)
            if running is not None:
                await _attach(wire, *running)
                return
            log.info(
                "stdio_serves_the_index",
                index=str(anchor_of(settings.store.url, settings.resolved_index_path)),
                reason="no groove serve answers for this index",
            )
        limits = raise_fd_limit()  # an idle-connection flood must meet groove's own caps before the fd limit
        if limits is not None:
            before, soft, hard = limits
            http = settings.serve.http
            caps = settings.serve.local.max_connections + (http.max_connections if transport == "http" else 0)
            log.info("fd_limit", soft=soft, hard=hard, **({"raised_from": before} if soft != before else {}))
            if 0 < soft < caps + 64:
                log.warning(
                    "fd_limit_low",
                    soft=soft,
                    connection_caps=caps,
                    hint="[serve.local] max_connections and [serve.http] max_connections together come near the "
                    "open-file limit; a flood then meets the limit first (survived, but new connections wait): "
                    "raise LimitNOFILE (systemd) or ulimit -n, or lower the caps",
                )
        daemon = Daemon(settings)
        server = build_server(daemon, settings.serve.http)
        log.info("serve_start", transport=transport, kb=daemon.index.describe(), index=str(daemon.index.path))
        try:
            await _run(settings, daemon, server, transport, sock, host, wire)
        except BaseExceptionGroup as group:
            raise _unwrap(group) from None
    finally:
        if sock is not None:
            sock.close()
        if wire is not None:
            wire.release()


async def _run(
    settings: Settings, daemon: Daemon, server: MCPServer, transport: str, sock: Any, host: str, wire: StdioWire | None
) -> None:
    service: HTTPService | None = None
    if sock is not None:
        port = int(sock.getsockname()[1])
        http = settings.serve.http
        allowed = Allowed.for_bind(host, port, http.allowed_hosts, http.allowed_origins)
        token = resolve_token(http)
        app = build_app(server, daemon, settings, allowed, token)
        service = HTTPService(app, sock, mcp=server, debug=settings.log.level == "debug", http=http)

    daemon_done = anyio.Event()

    async def run_daemon(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            await daemon.run_background(task_status=task_status)
        finally:
            daemon_done.set()

    async with anyio.create_task_group() as tg:
        await tg.start(run_daemon)
        await tg.start(serve_local, daemon)  # the command line's way in (groove.serve.process.local); gone on cancel
        front = anyio.CancelScope()  # the transport
        watcher = anyio.CancelScope()  # the signal watcher

        async def deadline() -> None:
            await anyio.sleep(SHUTDOWN_DEADLINE_S)
            log.warning("shutdown_deadline", seconds=SHUTDOWN_DEADLINE_S)
            tg.cancel_scope.cancel()

        async def watch_signals() -> None:
            with watcher, anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                count = 0
                async for signum in signals:
                    count += 1
                    if count == 1:
                        log.info("shutting_down", signal=signal.Signals(signum).name)
                        _sd_notify("STOPPING=1")
                        _exit_watchdog(HARD_EXIT_S)
                        tg.start_soon(deadline)
                        if service is not None:
                            tg.start_soon(service.shutdown)
                        else:
                            front.cancel()
                    else:
                        front.cancel()
                        tg.cancel_scope.cancel()

        tg.start_soon(watch_signals)
        with front:
            if service is not None:
                await _serve_http(settings, service, host, daemon)
            else:
                assert wire is not None
                await run_stdio(server, wire)
                log.info("stdin_closed")
        daemon.stop()  # run_background closes the index (after the current transaction) and returns
        watcher.cancel()
        await daemon_done.wait()
        tg.cancel_scope.cancel()  # the deadline task, if a signal started one
    log.info("serve_stopped")


async def _serve_http(settings: Settings, service: HTTPService, host: str, daemon: Daemon) -> None:
    async with anyio.create_task_group() as tg:
        await tg.start(service.run)
        bound = str(service.sock.getsockname()[0])  # the address actually bound (0.0.0.0 stays 0.0.0.0)
        url = f"http://{format_host(bound)}:{service.port}{MCP_PATH}"
        token = bool(resolve_token(settings.serve.http))
        # Where a stdio client of this user attaches instead of opening the index (serve/process/attach.py).
        local_host = "127.0.0.1" if bound in ("0.0.0.0", "::") else format_host(bound)
        daemon.http_url = f"http://{local_host}:{service.port}{MCP_PATH}"
        daemon.http_token = resolve_token(settings.serve.http)
        log.info("http_listening", url=url, token_required=token)
        sys.stderr.write(client_snippets(url, stdio_command(settings), token=token))
        if bound in ("0.0.0.0", "::"):
            sys.stderr.write(
                f"  (listening on every interface: clients use this machine's name or address "
                f"in place of {format_host(bound)}, listed in [serve.http] allowed_hosts)\n"
            )
        sys.stderr.flush()
        _sd_notify("READY=1")
