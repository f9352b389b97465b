"""`groove serve` as a process: signals, stdin, bad --bind, busy ports, the example notes; and the pure helpers."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from starlette.responses import PlainTextResponse

from groove.serve.http.server import Allowed, GuardMiddleware, parse_bind
from groove.serve.mcp.server import note_path, note_uri
from tests.support.common import EXAMPLES, GROOVE, note, write
from tests.support.server import FAKE_GROOVE, ServerProcess, free_port, serve_argv, server_env

# --- the process ----------------------------------------------------------------------------

async def test_with_examples_it_serves_the_example_notes_and_sigterm_exits_0_within_5_s(spawn, tmp_path):
    port = free_port()
    argv = [*GROOVE, "serve", "--examples", "--transport", "http", "--bind", f"127.0.0.1:{port}", "--index", str(tmp_path / "i.sqlite")]
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = spawn.popen(argv, cwd=tmp_path, env=server_env(tmp_path), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)
    server = ServerProcess.__new__(ServerProcess)  # reuse the readiness helpers for a process started here
    server.proc, server.port, server.log_path = proc, port, log_path
    server.base, server.url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/mcp"
    try:
        await anyio.to_thread.run_sync(server.wait_healthy)
        examples = len(list(EXAMPLES.rglob("*.md")))
        status = await anyio.to_thread.run_sync(server.wait_indexed, examples)
        assert status["kb_path"] == str(EXAMPLES.resolve())
        async with Client(server.url) as client:
            found = await client.call_tool("search", {"query": "照り焼き", "limit": 1})
        assert found.structured_content["results"][0]["path"] == "life/鶏の照り焼き.md"
        text = log_path.read_text()
        assert "serving the shipped example notes" in text
        assert f"groove is serving MCP at http://127.0.0.1:{port}/mcp" in text
        assert '"url": "http://127.0.0.1:' in text and '"command":' in text  # the client config snippets

        # A handshake client holds its standalone stream open while the signal arrives.
        exited: list[float] = []

        def reap() -> None:
            proc.wait(15)
            exited.append(time.monotonic())

        try:
            async with Client(server.url, mode="legacy") as client:
                await client.call_tool("index_status", {})
                async with anyio.create_task_group() as tg:
                    t0, t_signal = time.monotonic(), time.time()
                    proc.send_signal(signal.SIGTERM)
                    tg.start_soon(anyio.to_thread.run_sync, reap)
        except Exception:  # noqa: BLE001 - the client may notice the server leaving
            pass
        assert exited, "the server did not exit"
        assert proc.returncode == 0
        assert exited[0] - t0 < 5.0, f"signal at {t_signal:.3f}, exit seen at {time.time():.3f}\n" + log_path.read_text()[-600:]
        assert_orderly_stop(log_path.read_text())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def assert_orderly_stop(log: str) -> None:
    """Shutdown took the orderly path: the stop was logged in order and the exit watchdog
    (which calls os._exit(0) after a few seconds, so the exit code alone proves nothing)
    never fired."""
    assert "shutdown took over" not in log, "the exit watchdog ended the process:\n" + log[-800:]
    assert "shutting_down" in log, log[-800:]
    assert "serve_stopped" in log, "no serve_stopped event: shutdown did not finish in order\n" + log[-800:]
    assert log.index("shutting_down") < log.rindex("serve_stopped")


def _rpc(proc: subprocess.Popen, message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _response(proc: subprocess.Popen, wanted: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "stdout closed"
        message = json.loads(line)
        if message.get("id") == wanted:
            return message


def test_sigterm_stops_a_stdio_server_with_exit_0_within_5_s(spawn, kb, tmp_path):
    write(kb / "a.md", note("A", "A short note about herons."))
    stderr_path = tmp_path / "stderr.log"
    stderr_log = open(stderr_path, "wb")  # noqa: SIM115 - closed in finally
    proc = spawn.popen(
        serve_argv(kb, tmp_path / "i.sqlite", "--transport", "stdio"),
        cwd=tmp_path, env=server_env(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_log,
    )
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
        _response(proc, 1)
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        deadline = time.monotonic() + 90
        n = 2
        while True:  # until the startup scan is done (the model is loaded by then)
            _rpc(proc, {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "index_status", "arguments": {}}})
            if _response(proc, n)["result"]["structuredContent"]["startup_reconcile_done"]:
                break
            assert time.monotonic() < deadline
            n += 1
            time.sleep(0.2)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(10)
        assert rc == 0 and time.monotonic() - t0 < 5.0
        stderr_log.close()
        assert_orderly_stop(stderr_path.read_text(encoding="utf-8", errors="replace"))
    finally:
        stderr_log.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("bind", ["nonsense", "127.0.0.1:99999"])
def test_a_bad_bind_address_is_a_usage_error_with_exit_2(spawn, kb, tmp_path, bind):
    proc = spawn.run(
        [*GROOVE, "serve", "--transport", "http", "--kb", str(kb), "--bind", bind],
        cwd=tmp_path, env=server_env(tmp_path), capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert f"groove: error: --bind: invalid bind address {bind!r}" in proc.stderr
    assert proc.stdout == ""


def test_a_port_already_in_use_is_a_clear_error_with_exit_1(spawn, kb, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = spawn.run(
            [*GROOVE, "serve", "--transport", "http", "--kb", str(kb), "--index", str(tmp_path / "i.sqlite"),
             "--bind", f"127.0.0.1:{port}"],
            cwd=tmp_path, env=server_env(tmp_path), capture_output=True, text=True, timeout=60,
        )
    assert proc.returncode == 1
    assert f"groove: error: cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "pick another with --bind" in proc.stderr
    assert not (tmp_path / "i.sqlite").exists()  # it failed before touching anything


def test_a_busy_port_under_make_serve_names_its_bind_variable_not_a_flag_it_does_not_take(spawn, kb, tmp_path):
    # The real `make serve KB=... BIND=...` (its install stamp made fresh, so make runs the recipe alone).
    from tests.support.common import ROOT

    stamp = tmp_path / "installed-serve"
    stamp.touch()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = spawn.run(["make", "--no-print-directory", "serve", f"KB={kb}", f"BIND=127.0.0.1:{port}",
                          f"STAMP_SERVE={stamp}"], cwd=ROOT, env=server_env(tmp_path), capture_output=True,
                         text=True, timeout=120)
    assert proc.returncode != 0
    assert f"groove: error: cannot listen on 127.0.0.1:{port}" in proc.stderr, proc.stderr
    assert "pick another with make serve BIND=HOST:PORT" in proc.stderr
    assert "pick another with --bind" not in proc.stderr


def test_a_busy_port_from_the_config_file_names_the_file(spawn, kb, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        config = write(tmp_path / "conf" / "groove.toml", f'[serve]\nbind = "127.0.0.1:{port}"\n')
        proc = spawn.run([*GROOVE, "serve", "--transport", "http", "--kb", str(kb), "--config", str(config)],
                         cwd=tmp_path, env=server_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert f"pick another with [serve] bind in {config}, or --bind HOST:PORT" in proc.stderr, proc.stderr


def test_a_port_held_by_the_service_of_the_same_notes_says_it_already_runs_there(spawn, kb, tmp_path):
    write(kb / "a.md", note("A", "Some text."))
    index = tmp_path / "index.sqlite"
    service = spawn.server(kb, index, tmp_path, command=FAKE_GROOVE)
    try:
        service.wait_healthy()
        proc = spawn.run([*FAKE_GROOVE, "serve", "--transport", "http", "--kb", str(kb), "--index", str(index),
                          "--bind", f"127.0.0.1:{service.port}"],
                         cwd=tmp_path, env=server_env(tmp_path), capture_output=True, text=True, timeout=60)
    finally:
        service.terminate()
    assert proc.returncode == 1
    assert "pick another with --bind HOST:PORT" in proc.stderr, proc.stderr
    assert f"a groove serve (pid {service.proc.pid}) already serves these notes at {service.url}" in proc.stderr


# --- the pure helpers ------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("127.0.0.1:3100", ("127.0.0.1", 3100)),
    ("localhost:0", ("localhost", 0)),
    ("0.0.0.0:8080", ("0.0.0.0", 8080)),
    ("[::1]:3100", ("::1", 3100)),
    (" 127.0.0.1:3100 ", ("127.0.0.1", 3100)),
])
def test_parse_bind_reads_host_and_port(value, expected):
    assert parse_bind(value) == expected


@pytest.mark.parametrize("value", ["", "3100", ":3100", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:65536",
                                   "::1:3100", "[::1]3100", "[nothost]:3100", "[::1]:"])
def test_parse_bind_rejects_what_is_not_host_and_port(value):
    with pytest.raises(ValueError, match="invalid bind address"):
        parse_bind(value)


@pytest.mark.parametrize("path", [
    "plain.md", "a/b/c.md", "日本語/京都の紅葉 2024.md", "odd/100% sure #1?.md", "spaces in/name with+plus.md",
])
def test_note_uris_are_ascii_and_round_trip(path):
    uri = note_uri(path)
    assert uri.startswith("groove://note/") and uri.isascii() and " " not in uri
    assert note_path(uri) == path


def test_note_path_accepts_unencoded_names_and_rejects_other_uris():
    assert note_path("groove://note/日本語/メモ.md") == "日本語/メモ.md"
    for uri in ("groove://note/", "groove://note//x.md", "file:///etc/passwd", "groove://other/x.md", "note.md"):
        assert note_path(uri) is None, uri


def test_the_loopback_names_with_the_port_are_allowed_and_extra_values_come_from_settings():
    allowed = Allowed.for_bind("127.0.0.1", 3100, ["notes.lan:3100", "box:*"], ["https://notes.lan"])
    for host in ("127.0.0.1:3100", "localhost:3100", "[::1]:3100", "LOCALHOST:3100", "notes.lan:3100", "box:4000"):
        assert allowed.host_ok(host), host
    for host in ("evil.example", "127.0.0.1:3101", "localhost", "notes.lan:3101", "box:", "box:x", "", None):
        assert not allowed.host_ok(host), host
    for origin in (None, "", "http://localhost:3100", "http://127.0.0.1:3100/", "https://notes.lan"):
        assert allowed.origin_ok(origin), origin
    for origin in ("http://evil.example", "http://localhost:3101", "https://localhost:3100", "null", "http://notes.lan"):
        assert not allowed.origin_ok(origin), origin
    specific = Allowed.for_bind("192.168.1.5", 3100)
    assert specific.host_ok("192.168.1.5:3100") and not Allowed.for_bind("0.0.0.0", 3100).host_ok("0.0.0.0:3100")


async def test_the_guard_answers_421_and_403_before_the_app_sees_the_request():
    seen: list[str] = []

    async def app(scope, receive, send):
        seen.append(scope["path"])
        await PlainTextResponse("ok")(scope, receive, send)

    guard = GuardMiddleware(app, Allowed.for_bind("127.0.0.1", 3100, ["notes.lan:*"]))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url="http://127.0.0.1:3100") as client:
        assert (await client.get("/anything")).status_code == 200
        assert (await client.get("/x", headers={"Host": "notes.lan:9"})).status_code == 200
        assert (await client.get("/x", headers={"Host": "evil.example"})).status_code == 421
        assert (await client.get("/x", headers={"Origin": "http://evil.example"})).status_code == 403
    assert seen == ["/anything", "/x"]


def test_examples_folder_is_where_serve_looks_for_it():
    from groove.serve.process.main import example_notes

    assert example_notes() == EXAMPLES.resolve()
    assert isinstance(example_notes(), Path)
