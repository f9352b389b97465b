"""Issue 36, point 9: the local endpoint (the Unix socket beside the index that `groove search`, `get`, `status`
and an attaching stdio client ask; groove/serve/process/local.py) is bounded and survives the fd limit.

Before: under an open-file limit of 1024 (systemd's default soft limit), 1,100 idle connections to the socket
ended `groove serve` with an `anyio.BrokenResourceError` traceback from `accept`; at a normal limit idle
connections were held forever. Now a cap (`[serve.local] max_connections`, 64) closes the oldest connection
still waiting for its request, an idle timeout (`[serve.local] idle_timeout_s`) closes a silent one, and a
failed accept() (EMFILE) is counted in a storm line, backs off and goes on.

Real processes and sockets: `groove serve --transport http` with the fake embedder (tests/support/fake_groove.py)
under `prlimit --nofile=256:256` (or setrlimit before exec where there is no prlimit), a real `groove search`
that asks it over the socket, and raw AF_UNIX connections that never send a byte.
"""

from __future__ import annotations

import errno
import json
import re
import socket
import time
from pathlib import Path

import anyio
import httpx
import pytest

from groove.serve.http.storm import StormLog
from groove.serve.process.local import LocalGuard, accept_loop, socket_path
from tests.support.common import note, write
from tests.support.local_socket import closed as _closed
from tests.support.local_socket import flood as _flood
from tests.support.local_socket import limited
from tests.support.server import FAKE_GROOVE

FD_LIMIT = 256
pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix-domain sockets on this platform")


def _limited(command: list[str], limit: int = FD_LIMIT) -> list[str]:
    return limited(command, limit)


def _notes(root: Path) -> Path:
    kb = root / "notes"
    write(kb / "garden/tomatoes.md", note("Tomatoes", "Pinch the side shoots of the tomatoes every week."))
    return kb


def _serve(spawn, tmp_path: Path, env: dict[str, str], limit: int | None = FD_LIMIT):
    kb, index = _notes(tmp_path), tmp_path / "index.sqlite"
    command = _limited(FAKE_GROOVE, limit) if limit else FAKE_GROOVE
    service = spawn.server(kb, index, tmp_path, command=command, env=env)
    service.wait_healthy()
    return service, kb, index


def _search(spawn, tmp_path: Path, kb: Path, index: Path):
    got = spawn.groove("search", "--kb", str(kb), "--index", str(index), "tomatoes", home=tmp_path,
                       command=FAKE_GROOVE, timeout=120)
    assert got.returncode == 0, got.stderr
    assert "tomatoes.md" in got.stdout
    assert "asked the running groove serve" in got.stderr, got.stderr  # the daemon answered, not a fresh process
    return got


def _counts(log: str, event: str) -> dict[str, int]:
    """The counts of every `event` storm line in the log, summed per reason."""
    total: dict[str, int] = {}
    for line in log.splitlines():
        if event in line:
            for reason, n in re.findall(r"\b([a-z_]+)=(\d+)\b", line):
                if reason not in ("total", "interval_s", "pid"):
                    total[reason] = total.get(reason, 0) + int(n)
    return total


def _no_traceback(service) -> None:
    log = service.log()
    assert "Traceback" not in log and "BrokenResourceError" not in log, log[-3000:]


def test_more_idle_local_connections_than_the_fd_limit_are_shed_at_the_cap_and_the_daemon_keeps_answering(
    spawn, tmp_path
):
    service, kb, index = _serve(spawn, tmp_path, {"GROOVE_SERVE__HTTP__STORM_LOG_INTERVAL_S": "0.5"})
    try:
        held = _flood(socket_path(index), FD_LIMIT + 44)  # 300 > the 256 files the daemon may open
        try:
            deadline = time.monotonic() + 30
            while sum(not _closed(s) for s in held) > 64 and time.monotonic() < deadline:
                time.sleep(0.2)
            still_open = sum(not _closed(s) for s in held)
            assert still_open <= 64, f"{still_open} idle connections held past the cap of 64"
            assert service.proc.poll() is None, service.log()[-3000:]
            assert httpx.get(f"{service.base}/healthz", timeout=10).status_code == 200  # during the flood
            _search(spawn, tmp_path, kb, index)  # its connection sheds the oldest idle one
        finally:
            for s in held:
                s.close()
        assert httpx.get(f"{service.base}/healthz", timeout=10).status_code == 200
        _search(spawn, tmp_path, kb, index)
        assert service.proc.poll() is None
    finally:
        service.terminate()
    log = service.log()
    assert re.search(r"fd_limit .*soft=256", log), log[-3000:]
    counts = _counts(log, "local_connections_shed")
    assert counts.get("idle_closed_at_cap", 0) >= FD_LIMIT + 44 - 64, counts
    shed_lines = [line for line in log.splitlines() if "local_connections_shed" in line]
    assert len(shed_lines) < 40, "a storm line per interval, not a line per connection"
    _no_traceback(service)


def test_at_the_fd_limit_accept_failures_are_counted_and_the_daemon_keeps_serving_http_and_the_command_line(
    spawn, tmp_path
):
    # A cap above the fd limit: the flood meets EMFILE at accept() before the cap.
    env = {"GROOVE_SERVE__LOCAL__MAX_CONNECTIONS": "1000", "GROOVE_SERVE__HTTP__STORM_LOG_INTERVAL_S": "0.5"}
    service, kb, index = _serve(spawn, tmp_path, env)
    try:
        held = _flood(socket_path(index), FD_LIMIT + 144)
        try:
            deadline = time.monotonic() + 30
            while "accept_failed_fd_limit" not in service.log() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert service.proc.poll() is None, service.log()[-3000:]
            assert httpx.get(f"{service.base}/healthz", timeout=30).status_code == 200
        finally:
            for s in held:
                s.close()
        time.sleep(1.0)
        assert service.proc.poll() is None, service.log()[-3000:]
        assert httpx.get(f"{service.base}/healthz", timeout=10).status_code == 200
        _search(spawn, tmp_path, kb, index)
    finally:
        service.terminate()
    log = service.log()
    counts = _counts(log, "local_connections_shed")
    assert counts.get("accept_failed_fd_limit", 0) >= 1, log[-3000:]
    assert "accept_failed_fd_limit_sample=EMFILE" in log
    assert counts.get("idle_closed_at_fd_limit", 0) >= 1, counts  # the oldest waiting ones gave their files back
    assert len([line for line in log.splitlines() if "local_connections_shed" in line]) < 60
    _no_traceback(service)


def test_a_silent_local_connection_is_closed_after_the_idle_timeout_while_a_prompt_request_is_answered(
    spawn, tmp_path
):
    env = {"GROOVE_SERVE__LOCAL__IDLE_TIMEOUT_S": "1", "GROOVE_SERVE__HTTP__STORM_LOG_INTERVAL_S": "0.5"}
    service, kb, index = _serve(spawn, tmp_path, env, limit=None)
    try:
        path = socket_path(index)
        silent, half = _flood(path, 2)
        half.sendall(b'{"op": "status"')  # a request line that never ends
        time.sleep(0.5)
        prompt = _flood(path, 1)[0]
        prompt.sendall(json.dumps({"op": "status"}).encode() + b"\n")
        answer = json.loads(prompt.makefile("rb").readline())
        assert answer["ok"] and answer["result"]["documents"] == 1
        for s in (silent, half):
            s.settimeout(10.0)
            t0 = time.monotonic()
            assert s.recv(1) == b"", "the daemon closed the silent connection"
            assert time.monotonic() - t0 < 8.0
        for s in (silent, half, prompt):
            s.close()
        _search(spawn, tmp_path, kb, index)  # a real command sends at once: never cut
        time.sleep(1.0)
    finally:
        service.terminate()
    assert _counts(service.log(), "local_connections_shed").get("idle_timeout") == 2, service.log()[-3000:]
    _no_traceback(service)


def test_past_the_local_cap_the_oldest_waiting_connection_is_closed_and_counted_in_one_line(spawn, tmp_path):
    env = {"GROOVE_SERVE__LOCAL__MAX_CONNECTIONS": "4", "GROOVE_SERVE__LOCAL__IDLE_TIMEOUT_S": "600",
           "GROOVE_SERVE__HTTP__STORM_LOG_INTERVAL_S": "60"}
    service, kb, index = _serve(spawn, tmp_path, env, limit=None)
    try:
        held = []
        for _ in range(10):
            held += _flood(socket_path(index), 1)
            time.sleep(0.05)  # accepted in this order: the oldest is the first
        deadline = time.monotonic() + 10
        while sum(_closed(s) for s in held) < 6 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [_closed(s) for s in held] == [True] * 6 + [False] * 4
        _search(spawn, tmp_path, kb, index)  # the command's connection closes the oldest of the four, not itself
        assert [_closed(s) for s in held] == [True] * 7 + [False] * 3
        for s in held:
            s.close()
    finally:
        service.terminate()  # flushes the counts not yet logged
    log = service.log()
    assert "max_connections=4" in log
    lines = [line for line in log.splitlines() if "local_connections_shed" in line]
    assert _counts(log, "local_connections_shed") == {"idle_closed_at_cap": 7}, lines
    assert len(lines) == 2, lines  # the first at once, the rest in one line (at exit: the interval is 60 s)
    _no_traceback(service)


class _FailingListener:
    """A listener whose accept() fails with `errors` in turn (as anyio raises them), then is closed."""

    def __init__(self, errors: list[BaseException]):
        self.errors = errors
        self.calls = 0

    async def accept(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        raise anyio.ClosedResourceError


def _broken(code: int) -> anyio.BrokenResourceError:
    exc = anyio.BrokenResourceError()
    exc.__cause__ = OSError(code, "Too many open files")
    return exc


def test_an_accept_loop_at_the_fd_limit_counts_backs_off_and_closes_the_oldest_waiting_connection():
    storm = StormLog("local_connections_shed", interval_s=60.0)
    guard = LocalGuard(max_connections=8, idle_timeout_s=10.0, storm=storm)
    listener = _FailingListener([_broken(errno.EMFILE), _broken(errno.ENFILE), _broken(errno.ECONNABORTED)])

    async def main():
        oldest, newer = guard.admit(), guard.admit()
        assert oldest is not None and newer is not None
        newer.answering = True  # being answered: never the one closed
        t0 = anyio.current_time()
        await accept_loop(listener, guard, handler=None)  # returns when the listener closes, never raises
        return oldest, newer, anyio.current_time() - t0

    oldest, newer, took = anyio.run(main)
    assert listener.calls == 4
    assert took >= 0.05 + 0.1 + 0.2 - 0.01  # backed off, doubling
    assert oldest.scope.cancel_called and not newer.scope.cancel_called
    assert guard.live == [newer]
    assert storm.total == 4  # two failures at the fd limit, one other failure, one connection closed
    # The first was logged at once; the rest wait for the interval's line.
    assert storm.pending == {"idle_closed_at_fd_limit": 1, "accept_failed_fd_limit": 1, "accept_failed": 1}
