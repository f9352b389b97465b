"""Request bodies that trickle in, against a real `groove serve --transport http` (real sockets, a real MCP client).

A client may send its headers promptly and then its body one byte every half second (slowloris on the body):
each such request holds a connection slot and a task. `[serve.http] body_timeout_s` bounds the whole body: past
it the request gets 408 naming the setting and its connection is closed, so trickling clients cannot keep real
ones out. Requests without a body (the event stream) are never cut.

One server for the module, with a 2 s body deadline and the smallest connection cap (4), so that a handful of
trickling sockets fill every slot. The tests check outcomes (status, closed or open sockets, a served search,
the log's counts), never how long anything took.
"""

from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest

from groove.config import ConfigError, load_settings
from tests.support.common import note, write
from tests.support.server import FAKE_GROOVE, ServerProcess

BODY_TIMEOUT_S = 2.0
# The storm log keeps its 10 s interval here: three waves of cut bodies take about as long, so a shorter one would
# save no wait and only crowd the "at most three lines" bound.
LIMITS = {"body_timeout_s": BODY_TIMEOUT_S, "max_connections": 4}
TRICKLE_S = 0.5  # one byte of body every half second
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}},
}


@pytest.fixture(scope="module")
def slow(spawn, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("slowbody")
    kb = root / "notes"
    write(kb / "a.md", note("Alpha", "The quokka migration plan, in three waves."))
    write(kb / "b.md", note("Beta", "Sourdough starter and levain."))
    config = root / "groove.toml"
    config.write_text("[serve.http]\n" + "".join(f"{k} = {v}\n" for k, v in LIMITS.items()), encoding="utf-8")
    server = spawn.server(kb, root / "index.sqlite", root, extra=("--config", str(config)), command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        server.wait_indexed(2)
        yield server
    finally:
        server.terminate()


def _head(port: int, *, method: str = "POST", length: int | None = None, chunked: bool = False,
          extra: dict[str, str] | None = None) -> bytes:
    headers = {"Host": f"127.0.0.1:{port}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", **(extra or {})}
    if chunked:
        headers["Transfer-Encoding"] = "chunked"
    elif length is not None:
        headers["Content-Length"] = str(length)
    return (f"{method} /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()


class Trickler(threading.Thread):
    """A POST to /mcp whose headers go out at once and whose body then comes one byte every TRICKLE_S, until the
    server answers or closes (or the test stops it). Keeps what the server answered and whether it closed."""

    def __init__(self, port: int, *, chunked: bool = False, length: int = 400):
        super().__init__(daemon=True)
        self.port, self.chunked, self.length = port, chunked, length
        self.sent = 0
        self.answer = b""
        self.closed_by_server = False
        self.holding = threading.Event()  # two bytes of body are out: the server is busy with this request
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                s.sendall(_head(self.port, length=self.length, chunked=self.chunked))
                while not self.stop.is_set() and self.sent < self.length:
                    if select.select([s], [], [], TRICKLE_S)[0]:
                        break  # the server answered (or closed)
                    try:
                        s.sendall(b"1\r\nx\r\n" if self.chunked else b"x")
                    except OSError:
                        break
                    self.sent += 1
                    if self.sent >= 2:
                        self.holding.set()
                if self.stop.is_set():
                    return
                s.settimeout(10)
                while True:
                    try:
                        chunk = s.recv(4096)
                    except socket.timeout:
                        return
                    except OSError:
                        self.closed_by_server = True
                        return
                    if not chunk:
                        self.closed_by_server = True
                        return
                    self.answer += chunk
        finally:
            self.holding.set()  # never leave a waiting test hanging


def _run_all(tricklers: list[Trickler]) -> None:
    for t in tricklers:
        t.start()
    for t in tricklers:
        t.join(60)


def _body_timeouts_logged(server: ServerProcess) -> list[int]:
    """The bodies cut in every storm line so far (one line per interval, each with its counts): at their
    deadline, or (a cap of 4 connections allows 2 arriving bodies per address) to make room for a newer one."""
    return [sum(int(n) for n in re.findall(r"(?:body_timeout|body_cut_per_client)=(\d+)", line))
            for line in server.log().splitlines() if "http_connections_shed" in line and "body_" in line]


async def _search_until_served(server: ServerProcess, within: float):
    """A real MCP client's search, tried again while its connections are refused; AssertionError if none is served."""
    deadline = time.monotonic() + within
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            with anyio.fail_after(5):
                async with server.client() as client:
                    return await client.call_tool("search", {"query": "quokka", "limit": 1, "retriever": "fts"})
        except Exception as exc:  # noqa: BLE001 - refused at the cap: the SDK reports a failed connection
            last = exc
            await anyio.sleep(0.2)
    raise AssertionError(f"no search was served within {within} s while trickling bodies held every connection "
                         f"slot; last failure: {last!r}")


# --- the deadline ---------------------------------------------------------------------------------

@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_post_whose_body_trickles_in_past_body_timeout_s_gets_408_naming_the_setting_and_a_closed_connection(
        slow, framing):
    trickler = Trickler(slow.port, chunked=framing == "chunked")
    _run_all([trickler])
    status, _, rest = trickler.answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout", trickler.answer
    head, _, body = rest.partition(b"\r\n\r\n")
    assert b"connection: close" in head.lower()
    text = body.decode()
    assert text.count("\n") == 1 and text.endswith("\n")  # one line of plain text
    assert "[serve.http] body_timeout_s = 2 s" in text
    assert trickler.closed_by_server
    assert 0 < trickler.sent < trickler.length  # cut while the body was still arriving
    assert "Traceback" not in slow.log()


async def test_trickling_bodies_on_every_connection_slot_are_cut_so_a_real_clients_search_is_served(slow):
    # As many trickling requests as there are connection slots: without a body deadline they would hold every
    # slot for the 200 s their bodies take, and each new connection (this client's) would be refused at the cap.
    tricklers = [Trickler(slow.port) for _ in range(LIMITS["max_connections"])]
    for t in tricklers:
        t.start()
    try:
        for t in tricklers:
            assert t.holding.wait(10)
        result = await _search_until_served(slow, within=10 * BODY_TIMEOUT_S)
        for t in tricklers:  # the ones still trickling (a cap of 4 lets 2 bodies arrive per address) meet their deadline
            t.join(30)
    finally:
        for t in tricklers:
            t.stop.set()
        for t in tricklers:
            t.join(30)
    assert not result.is_error
    assert result.structured_content["results"][0]["path"] == "a.md"
    # Each trickler is cut: 408 at its body deadline, or (stalled past the grace) closed to make room for the client's
    # connection at the cap (groove/serve/http/connections.py, the first to go), with nothing to answer.
    assert all((t.answer.startswith(b"HTTP/1.1 408") or t.answer == b"") and t.closed_by_server for t in tricklers), \
        [t.answer[:40] for t in tricklers]
    assert any(t.answer.startswith(b"HTTP/1.1 408") for t in tricklers)


def test_a_body_that_arrives_slowly_but_within_the_deadline_is_served_normally(slow):
    body = json.dumps(INIT).encode()
    pieces = [body[i:i + len(body) // 4 + 1] for i in range(0, len(body), len(body) // 4 + 1)]
    assert len(pieces) == 4
    with socket.create_connection(("127.0.0.1", slow.port), timeout=10) as s:
        s.sendall(_head(slow.port, length=len(body)))
        for piece in pieces:  # four separate writes, a tenth of the deadline apart: well within it
            time.sleep(BODY_TIMEOUT_S / 10)
            s.sendall(piece)
        answer = b""
        s.settimeout(10)
        while b"serverInfo" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b'"serverInfo"' in answer and b'"protocolVersion":"2025-11-25"' in answer.replace(b" ", b"")


def test_a_sessions_event_stream_without_a_body_stays_open_past_the_body_deadline(slow):
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(headers=headers, timeout=10) as http:
        sid = http.post(slow.url, json=INIT).headers["mcp-session-id"]
        session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        http.post(slow.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        with socket.create_connection(("127.0.0.1", slow.port), timeout=10) as s:
            s.sendall(_head(slow.port, method="GET", extra={"Accept": "text/event-stream", **session}))
            s.settimeout(10)
            head = s.recv(4096)
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
            assert b"text/event-stream" in head.lower()
            # Three deadlines later the stream is still open: the body deadline never ends a request without a body.
            deadline = time.monotonic() + 3 * BODY_TIMEOUT_S
            while (left := deadline - time.monotonic()) > 0:
                if select.select([s], [], [], left)[0]:
                    assert s.recv(4096) != b"", "the server closed an event stream that has no body"
            ping = http.post(slow.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=session)
            assert ping.status_code == 200  # and the session it listens for is alive


def test_timed_out_bodies_are_logged_as_a_count_per_interval_not_a_line_each(slow):
    lines_before = len(_body_timeouts_logged(slow))
    counted_before = sum(_body_timeouts_logged(slow))
    waves = 3
    for _ in range(waves):  # three waves of as many as there are slots: 12 requests cut within a few seconds
        tricklers = [Trickler(slow.port) for _ in range(LIMITS["max_connections"])]
        _run_all(tricklers)
        assert all(t.answer.startswith(b"HTTP/1.1 408") for t in tricklers)
    expected = waves * LIMITS["max_connections"]
    deadline = time.monotonic() + 30  # the pending count is written at most once per interval
    while time.monotonic() < deadline and sum(_body_timeouts_logged(slow)) - counted_before < expected:
        time.sleep(0.2)
    new = _body_timeouts_logged(slow)[lines_before:]
    assert sum(new) >= expected  # every cut request is in the counts
    assert 1 <= len(new) <= 3, new  # a count per interval, not a line per request
    assert "Traceback" not in slow.log()


# --- the setting ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-1", "0.0"])
def test_a_body_timeout_of_zero_or_less_is_refused_naming_the_key_and_the_file(tmp_path, value):
    cfg = write(tmp_path / "groove.toml", f"[serve.http]\nbody_timeout_s = {value}\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(Path(cfg))
    message = str(refused.value)
    assert "`serve.http.body_timeout_s`" in message
    assert "greater than 0" in message and "0 < body_timeout_s <= 600" in message
    assert str(cfg) in message


def _storm_logs(app: object) -> dict[str, float]:
    """The storm logs a server's middlewares hold (by event), and the interval of each."""
    from groove.serve.http.storm import StormLog

    found: dict[str, float] = {}
    todo, seen = [app], set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen or not hasattr(obj, "__dict__"):
            continue
        seen.add(id(obj))
        for name, value in vars(obj).items():
            if isinstance(value, StormLog):
                found[value.event] = value.interval_s
            elif name == "app" or type(value).__module__.startswith("groove."):  # the next middleware inward
                todo.append(value)
    return found


def test_every_storm_log_of_the_server_counts_per_the_interval_the_setting_gives(tmp_path):
    from groove.config import HTTPSettings
    from groove.serve.http.server import Allowed, HTTPService, build_app
    from groove.serve.mcp.server import build_server
    from tests.support.daemon import RecordingDaemon

    assert HTTPSettings().storm_log_interval_s == 10.0
    settings = load_settings(write(tmp_path / "groove.toml", "[serve.http]\nstorm_log_interval_s = 2.5\n"),
                             kb_path=tmp_path)
    daemon = RecordingDaemon()
    app = build_app(build_server(daemon), daemon, settings, Allowed.for_bind("127.0.0.1", 3999))  # type: ignore[arg-type]
    assert _storm_logs(app) == {"http_refused": 2.5, "http_event_streams": 2.5, "mcp_sessions_ended": 2.5}
    with socket.socket() as sock:
        assert HTTPService(app, sock, http=settings.serve.http).storm.interval_s == 2.5  # connections and bodies
    with pytest.raises(ConfigError) as refused:
        load_settings(write(tmp_path / "bad.toml", "[serve.http]\nstorm_log_interval_s = 0\n"))
    assert "`serve.http.storm_log_interval_s`" in str(refused.value)
