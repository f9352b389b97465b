"""The daemon's local endpoint: `groove search`, `related`, `get`, `links` and `status` ask a running `groove serve`.

Whatever its transport, `groove serve` also listens on a Unix-domain socket
beside its index file (`<index>.sock`, mode 0600, removed on exit). A
command that finds a daemon there asks it instead of loading the model
(about 25 s in process, a few milliseconds here); one that finds none, or
finds a stale socket, says "loading model ..." and runs in process.

The protocol is one JSON line each way per connection:

    -> {"op": "search", "args": {"request": {...SearchRequest...}}}
    <- {"ok": true, "result": {...}, "index_path": "...", "pid": 1234}
    <- {"ok": false, "error": "...", "exit_code": 1, "index_path": "...", "pid": 1234}

Ops: `search`, `related`, `get_document` (`groove get`), `status`, `links`. Only the socket's owner may connect:
the file is 0600 and, where the platform tells (Linux `SO_PEERCRED`), a peer
of another user is turned away. A path too long for a socket address
(about 100 bytes) moves to `$TMPDIR/groove-<uid>/<hash of the index path>.sock`
(folder 0700). Without `AF_UNIX` there is no endpoint and the commands load
the model.

Every connection is short: one request line, one answer, closed (an attaching stdio client asks `endpoint` once
and then speaks HTTP; serve/process/attach.py). So the daemon bounds them as `[serve.local]` says
(`LocalGuard`): at most `max_connections` open at once (64; one more closes the oldest connection still
waiting for its request line, else is closed itself), and `idle_timeout_s` (10 s) for the request line to
arrive and for the client to take its answer; the time the daemon spends answering is never cut (a first
query may wait for the model). At the fd limit (EMFILE, ENFILE at accept) the accept loop closes the oldest
waiting connection, backs off (50 ms, doubling to 1 s) and goes on. Each of these is counted in one storm
log line (`local_connections_shed`, serve/http/storm.py), never a line per connection.

The client half (`ask`) is plain blocking `socket`: the command line has no
event loop to share, and it must not import the MCP SDK to stay fast.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import struct
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from groove.errors import GrooveError
from groove.logs import get_logger
from groove.serve.errors import local_error
from groove.serve.http.storm import StormLog

log = get_logger(__name__)

SUFFIX = ".sock"
MAX_SOCKET_PATH = 100  # bytes; sun_path holds 104 (macOS) or 108 (Linux) with its NUL
MAX_REQUEST_BYTES = 1 << 20  # a search request is at most a few KiB
MAX_RESPONSE_BYTES = 64 << 20
CONNECT_TIMEOUT_S = 2.0
ANSWER_TIMEOUT_S = 120.0  # a daemon's first query may wait for its model to load
OPS = ("search", "related", "status", "get_document", "endpoint", "links", "changes")
ACCEPT_BACKOFF_S = 0.05  # after a failed accept(); doubles up to ACCEPT_BACKOFF_MAX_S while it keeps failing
ACCEPT_BACKOFF_MAX_S = 1.0
FD_LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


def supported() -> bool:
    return hasattr(socket, "AF_UNIX")


def socket_path(index_path: Path) -> Path:
    """Where the daemon of this index listens (the same rule on both sides)."""
    beside = index_path.with_name(index_path.name + SUFFIX)
    if len(os.fsencode(beside)) <= MAX_SOCKET_PATH:
        return beside
    digest = hashlib.sha256(os.fsencode(index_path)).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"groove-{os.getuid()}" / f"{digest}{SUFFIX}"


class DaemonError(GrooveError):
    """An error the daemon answered with (its message and exit code, as the command would have said them)."""


# --- the daemon's side -----------------------------------------------------------------------


FD_LIMIT_CEILING = 65_536  # the soft limit is raised this far at most (an "unlimited" hard limit means this)


def raise_fd_limit() -> tuple[int, int, int] | None:
    """Raise this process's soft limit of open files to its hard limit (at most FD_LIMIT_CEILING), as servers do:
    systemd's default soft limit is 1024 while its hard limit is 524288. Returns (soft before, soft now, hard), or
    None where the platform has no such limit; logged at start (`fd_limit`)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    want = FD_LIMIT_CEILING if hard == resource.RLIM_INFINITY else min(hard, FD_LIMIT_CEILING)
    before = soft
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (OSError, ValueError) as exc:  # macOS refuses above OPEN_MAX (10240) when hard is unlimited
            log.debug("fd_limit_not_raised", soft=soft, hard=hard, wanted=want, error=str(exc))
    unlimited = resource.RLIM_INFINITY
    return (
        -1 if before == unlimited else int(before),
        -1 if soft == unlimited else int(soft),
        -1 if hard == unlimited else int(hard),
    )


def _peer_uid(stream: anyio.abc.SocketStream) -> int | None:
    """The connecting process's user id, where the platform tells it (Linux); else None."""
    so_peercred = getattr(socket, "SO_PEERCRED", None)
    if so_peercred is None:
        return None
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    try:
        creds = raw.getsockopt(socket.SOL_SOCKET, so_peercred, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def _claim(path: Path) -> bool:
    """Make room for our socket: False when another daemon answers there, else True (a stale file removed)."""
    if path.parent.name == f"groove-{os.getuid()}" and path.parent.parent == Path(tempfile.gettempdir()):
        path.parent.mkdir(mode=0o700, exist_ok=True)
        st = path.parent.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise OSError(f"{path.parent} is not a private folder of this user")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)  # a database's local name lives under the user data folder
    if not path.exists() and not path.is_symlink():
        return True
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(CONNECT_TIMEOUT_S)
    try:
        probe.connect(str(path))
        return False
    except OSError:
        path.unlink(missing_ok=True)  # left by a daemon that was killed
        return True
    finally:
        probe.close()


async def serve_local(
    daemon: Any, *, task_status: anyio.abc.TaskStatus[Path | None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Listen beside the daemon's index until cancelled; never takes the daemon down."""
    if not supported():
        log.info("no local endpoint: this platform has no Unix-domain sockets; the command line loads the model")
        task_status.started(None)
        return
    path = socket_path(daemon.index.path)
    try:
        if not _claim(path):
            log.warning(
                "local_endpoint_taken",
                socket=str(path),
                hint="another groove serve answers for this index; the command line will ask that one",
            )
            task_status.started(None)
            return
        old_umask = os.umask(0o177)  # the socket is born 0600: no window in which another user can connect
        try:
            listener = await anyio.create_unix_listener(path, mode=0o600)
        finally:
            os.umask(old_umask)
        identity = path.stat().st_ino
    except OSError as exc:
        log.warning(
            "local_endpoint_failed",
            socket=str(path),
            error=str(exc),
            hint="the command line will load the model instead of asking this daemon",
        )
        task_status.started(None)
        return
    local = daemon.settings.serve.local
    guard = LocalGuard(
        local.max_connections,
        local.idle_timeout_s,
        StormLog("local_connections_shed", daemon.settings.serve.http.storm_log_interval_s, socket=str(path)),
    )
    log.info(
        "local_endpoint", socket=str(path), max_connections=guard.max_connections, idle_timeout_s=guard.idle_timeout_s
    )
    task_status.started(path)
    try:
        async with listener:
            await accept_loop(listener, guard, lambda stream, conn: _handle(daemon, stream, guard, conn))
    finally:
        guard.storm.flush()  # the counts not yet logged
        try:
            if path.stat().st_ino == identity:
                path.unlink()
        except OSError:
            pass


@dataclass(eq=False)
class Conn:
    """One open local connection as the guard sees it: when it was accepted, whether its request line has
    arrived (then it is being answered, and is never the one closed at the cap), and the scope that ends it."""

    since: float
    answering: bool = False
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class LocalGuard:
    """The local endpoint's bounds: `max_connections` open at once, `idle_timeout_s` for a request line to arrive
    (and an answer to be taken). What it closes is counted in `storm`, never logged one line per connection."""

    def __init__(self, max_connections: int, idle_timeout_s: float, storm: StormLog):
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.storm = storm
        self.live: list[Conn] = []

    def admit(self) -> Conn | None:
        """A slot for a connection just accepted, or None: every open one is being answered (close the newcomer).
        At the cap the oldest connection still waiting for its request line is closed to make room."""
        if len(self.live) >= self.max_connections and not self.shed("idle_closed_at_cap"):
            self.storm.count("refused_at_cap")
            return None
        conn = Conn(since=time.monotonic())
        self.live.append(conn)
        return conn

    def shed(self, reason: str) -> bool:
        """Close the oldest connection still waiting for its request line; False when there is none."""
        waiting = [c for c in self.live if not c.answering]
        if not waiting:
            return False
        victim = min(waiting, key=lambda c: c.since)
        self.live.remove(victim)
        victim.scope.cancel()  # its task closes the socket on its next turn
        self.storm.count(reason)
        return True

    def done(self, conn: Conn) -> None:
        if conn in self.live:
            self.live.remove(conn)


async def accept_loop(listener: Any, guard: LocalGuard, handler: Any) -> None:
    """Accept until the listener closes; a failed accept() never ends the loop (nor the daemon).

    At the fd limit (EMFILE, ENFILE) the oldest connection still waiting for its request is closed, to give its
    descriptor back, and the loop waits ACCEPT_BACKOFF_S, doubling to ACCEPT_BACKOFF_MAX_S while accept() keeps
    failing (the listener stays readable while the backlog holds connections: without a pause this would spin)."""
    backoff = ACCEPT_BACKOFF_S
    async with anyio.create_task_group() as tg:
        while True:
            try:
                stream = await listener.accept()
            except anyio.ClosedResourceError:
                return
            except (anyio.BrokenResourceError, OSError) as exc:
                cause = exc.__cause__ if isinstance(exc, anyio.BrokenResourceError) else exc
                code = getattr(cause, "errno", None)
                if code in FD_LIMIT_ERRNOS:
                    guard.storm.count("accept_failed_fd_limit", errno.errorcode.get(code, str(code)))
                    guard.shed("idle_closed_at_fd_limit")
                else:
                    guard.storm.count("accept_failed", repr(cause))
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, ACCEPT_BACKOFF_MAX_S)
                continue
            backoff = ACCEPT_BACKOFF_S
            conn = guard.admit()
            if conn is None:
                await stream.aclose()
                continue
            tg.start_soon(handler, stream, conn)


async def _handle(daemon: Any, stream: anyio.abc.SocketStream, guard: LocalGuard, conn: Conn) -> None:
    try:
        with conn.scope:
            async with stream:
                await _converse(daemon, stream, guard, conn)
    finally:
        guard.done(conn)


async def _converse(daemon: Any, stream: anyio.abc.SocketStream, guard: LocalGuard, conn: Conn) -> None:
    uid = _peer_uid(stream)
    if uid is not None and uid != os.getuid():
        log.warning("local_endpoint_refused", peer_uid=uid)
        return
    try:
        with anyio.fail_after(guard.idle_timeout_s):
            line = await BufferedByteReceiveStream(stream).receive_until(b"\n", MAX_REQUEST_BYTES)
    except TimeoutError:
        guard.storm.count("idle_timeout")
        return
    except (anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.EndOfStream, anyio.BrokenResourceError):
        return
    conn.answering = True  # from here on it is never closed at the cap: the daemon is answering it
    answer = await _answer(daemon, line)
    answer.update(index_path=str(daemon.index.path), pid=os.getpid())
    try:
        with anyio.fail_after(guard.idle_timeout_s):
            await stream.send(json.dumps(answer, ensure_ascii=False).encode("utf-8") + b"\n")
    except TimeoutError:
        guard.storm.count("answer_not_taken")
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the command gave up (Ctrl-C); nothing to tell


async def _answer(daemon: Any, line: bytes) -> dict[str, Any]:
    from groove.api.service import ChangesRequest, LinksRequest, RelatedRequest
    from groove.search.request import DocumentRequest, SearchRequest

    service = daemon.service
    try:
        message = json.loads(line)
        op = message.get("op") if isinstance(message, dict) else None
        args = message.get("args") or {} if isinstance(message, dict) else {}
        if op not in OPS or not isinstance(args, dict):
            return {
                "ok": False,
                "error": f"unknown request {op!r}; this daemon answers {', '.join(OPS)}",
                "exit_code": 2,
            }
        if (
            op == "endpoint"
        ):  # where a stdio client of this user can attach (serve/process/attach.py); 0600 socket, same uid
            return {"ok": True, "result": {"url": daemon.http_url, "token": daemon.http_token}}
        if op == "search":
            result = await service.search(SearchRequest(**args.get("request", {})))
        elif op == "related":
            result = await service.related(RelatedRequest(**args))
        elif op == "links":
            result = await service.links(LinksRequest(**args))
        elif op == "changes":
            result = await service.changes(ChangesRequest(**args))
        elif op == "get_document":
            req = DocumentRequest(**args.get("request", {}))
            result = await service.get_document(req.path if req.whole else req)
        else:
            result = await service.status()
        return {"ok": True, "result": result.model_dump(mode="json", exclude_unset=True)}
    except GrooveError as exc:
        return local_error(exc)
    except (ValueError, TypeError) as exc:
        return {"ok": False, "error": f"bad request: {exc}", "exit_code": 2}
    except Exception as exc:  # noqa: BLE001 - one bad request must not stop the endpoint
        log.error("local_request_failed", error=repr(exc))
        return {"ok": False, "error": f"the daemon failed on this request: {exc!r}", "exit_code": 1}


# --- the command line's side -----------------------------------------------------------------


class Answer:
    """What a daemon answered: the result and the process that answered."""

    def __init__(self, result: Any, pid: int, socket: Path):
        self.result, self.pid, self.socket = result, pid, socket


def ask(
    index_path: Path, op: str, args: dict[str, Any] | None = None, *, timeout: float = ANSWER_TIMEOUT_S
) -> Answer | None:
    """Ask the daemon serving `index_path`; None when none does (then run in process).

    Raises DaemonError with the daemon's own message and exit code when it answered with an error.
    """
    if not supported():
        return None
    path = socket_path(index_path)
    try:
        st = path.lstat()
    except OSError:
        return None
    if st.st_uid != os.getuid():
        return None  # not ours: never send a query to another user's socket
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(str(path))
        except OSError:
            return None  # a stale socket: its daemon is gone
        sock.settimeout(timeout)
        sock.sendall(json.dumps({"op": op, "args": args or {}}, ensure_ascii=False).encode("utf-8") + b"\n")
        data = bytearray()
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_RESPONSE_BYTES:
                raise DaemonError(f"the daemon at {path} answered more than {MAX_RESPONSE_BYTES} bytes")
    except TimeoutError:
        raise DaemonError(
            f"the daemon at {path} did not answer within {timeout:.0f} s; try again, or pass --no-daemon"
        ) from None
    except OSError:
        return None  # it went away mid-request: the caller runs in process
    finally:
        sock.close()
    try:
        answer = json.loads(bytes(data))
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("index_path") != str(index_path):
        return None  # not the daemon of this index
    if not answer.get("ok"):
        raise DaemonError(str(answer.get("error") or "the daemon failed"), exit_code=int(answer.get("exit_code") or 1))
    return Answer(answer.get("result"), int(answer.get("pid") or 0), path)


ENDPOINT_TIMEOUT_S = 10.0  # the endpoint op loads nothing: a service that takes longer is stuck


class Endpoint:
    """Where the groove serve of an index answers over HTTP: `url` (None when it serves stdio only), the bearer
    token it requires (None: none), and its process id."""

    def __init__(self, url: str | None, token: str | None, pid: int):
        self.url, self.token, self.pid = url, token, pid


def http_endpoint(index_path: Path, *, timeout: float = ENDPOINT_TIMEOUT_S) -> Endpoint | None:
    """The HTTP endpoint of the `groove serve` that writes `index_path`, asked over its local endpoint (stdlib
    sockets only: no MCP SDK); None when none runs. The one way a running service is found: a stdio client attaches
    to it (serve/process/main.py) and `groove client-config --transport http` prints its URL (cli.py).

    Raises DaemonError when a service answers without one (an older groove serve that has no `endpoint` op)."""
    answer = ask(index_path, "endpoint", timeout=timeout)
    if answer is None:
        return None
    result = answer.result if isinstance(answer.result, dict) else {}
    url = result.get("url")
    return Endpoint(str(url) if url else None, result.get("token") or None, answer.pid)


__all__ = [
    "Answer",
    "DaemonError",
    "Endpoint",
    "LocalGuard",
    "accept_loop",
    "ask",
    "http_endpoint",
    "raise_fd_limit",
    "serve_local",
    "socket_path",
    "supported",
]
