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

The client half (`ask`) is plain blocking `socket`: the command line has no
event loop to share, and it must not import the MCP SDK to stay fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import tempfile
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from groove.errors import GrooveError
from groove.logs import get_logger
from groove.serve.errors import local_error

log = get_logger(__name__)

SUFFIX = ".sock"
MAX_SOCKET_PATH = 100  # bytes; sun_path holds 104 (macOS) or 108 (Linux) with its NUL
MAX_REQUEST_BYTES = 1 << 20  # a search request is at most a few KiB
MAX_RESPONSE_BYTES = 64 << 20
CONNECT_TIMEOUT_S = 2.0
ANSWER_TIMEOUT_S = 120.0  # a daemon's first query may wait for its model to load
OPS = ("search", "related", "status", "get_document", "endpoint", "links")


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
    log.info("local_endpoint", socket=str(path))
    task_status.started(path)
    try:
        async with listener:
            await listener.serve(lambda stream: _handle(daemon, stream))
    finally:
        try:
            if path.stat().st_ino == identity:
                path.unlink()
        except OSError:
            pass


async def _handle(daemon: Any, stream: anyio.abc.SocketStream) -> None:
    async with stream:
        uid = _peer_uid(stream)
        if uid is not None and uid != os.getuid():
            log.warning("local_endpoint_refused", peer_uid=uid)
            return
        try:
            line = await BufferedByteReceiveStream(stream).receive_until(b"\n", MAX_REQUEST_BYTES)
        except (anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.EndOfStream, anyio.BrokenResourceError):
            return
        answer = await _answer(daemon, line)
        answer.update(index_path=str(daemon.index.path), pid=os.getpid())
        try:
            await stream.send(json.dumps(answer, ensure_ascii=False).encode("utf-8") + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the command gave up (Ctrl-C); nothing to tell


async def _answer(daemon: Any, line: bytes) -> dict[str, Any]:
    from groove.api.service import LinksRequest, RelatedRequest
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


__all__ = ["Answer", "DaemonError", "Endpoint", "ask", "http_endpoint", "serve_local", "socket_path", "supported"]
