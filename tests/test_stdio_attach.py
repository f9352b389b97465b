"""`groove serve --transport stdio` beside a running service attaches to it (groove/serve/process/attach.py).

Real processes: a `groove serve --transport http` subprocess owns the index; an MCP client starts
`groove serve --transport stdio` as Claude Desktop would, over real pipes, with the MCP Python SDK.
The bag-of-words embedder (tests/support/fake_groove.py) stands in for the model: these are about the
wiring, not the model (tests/test_mcp_stdio.py runs the stdio server with the real model)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import mcp_types as types
from mcp import Client, StdioServerParameters

from groove.serve.process.local import socket_path
from tests.support.common import eventually, note, write
from tests.support.server import FAKE_GROOVE, serve_argv, server_env


def _notes(root: Path) -> Path:
    kb = root / "notes"
    write(kb / "garden/tomatoes.md", note("Tomatoes", "Pinch the side shoots of the tomatoes every week."))
    write(kb / "日本語/庭.md", note("庭", "トマトの脇芽は毎週摘む。"))
    return kb


def _stdio(spawn, kb: Path, index: Path, root: Path, errlog: Path) -> StdioServerParameters:
    """The stdio server as a client starts it, its stderr (the log) kept in `errlog`."""
    argv = serve_argv(kb, index, "--transport", "stdio", command=FAKE_GROOVE)
    env = {**server_env(root), "ERRLOG_PATH": str(errlog)}
    return spawn.stdio(command="/bin/sh", args=["-c", 'exec "$@" 2>>"$ERRLOG_PATH"', "sh", *argv],
                                 env=env, cwd=str(root))


def test_a_stdio_client_beside_the_running_service_attaches_searches_and_hears_its_notes_change(spawn, tmp_path):
    kb = _notes(tmp_path)
    index = tmp_path / "index.sqlite"
    service = spawn.server(kb, index, tmp_path, command=FAKE_GROOVE)
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(message)

    errlog = tmp_path / "stdio.err"
    got: dict[str, Any] = {}

    async def session() -> None:
        async with Client(_stdio(spawn, kb, index, tmp_path, errlog), mode="legacy", message_handler=on_message) as client:
            got["tools"] = {t.name for t in (await client.list_tools()).tools}
            got["found"] = await client.call_tool("search", {"query": "tomatoes side shoots", "retriever": "fts"})
            got["ja"] = await client.call_tool("search", {"query": "脇芽", "retriever": "fts"})
            got["bad"] = await client.call_tool("search", {"query": ""})  # errors come through as the service made them
            got["status"] = (await client.call_tool("index_status", {})).structured_content
            uri = "groove://note/garden/tomatoes.md"
            await client.subscribe_resource(uri)

            async def updated() -> bool:
                return any(m.params.uri == uri for m in heard)

            # The session's event stream opens after the handshake; edit until an edit is heard.
            for attempt in range(6):
                write(kb / "garden/tomatoes.md", note("Tomatoes", f"Edited ({attempt}): the marigold companions."))
                try:
                    await eventually(updated, "resources/updated through the stdio bridge", timeout=10)
                    break
                except AssertionError:
                    if attempt == 5:
                        raise

            async def live() -> bool:
                hit = await client.call_tool("search", {"query": "marigold companions", "retriever": "fts"})
                return bool(hit.structured_content["results"])

            await eventually(live, "the edit searchable through the bridge", timeout=30)

    try:
        service.wait_healthy()
        service.wait_indexed(2)
        anyio.run(session)
    finally:
        service.terminate()
    tools, found, ja, bad, status = got["tools"], got["found"], got["ja"], got["bad"], got["status"]
    assert {"search", "get_document", "index_status"} <= tools
    assert found.structured_content["results"][0]["path"] == "garden/tomatoes.md"
    assert ja.structured_content["results"][0]["path"] == "日本語/庭.md"
    assert bad.is_error and "the query is empty" in bad.content[0].text
    assert status["watcher"] == "watching"  # the service's own status: it is the one that answered
    log = errlog.read_text()
    assert "stdio_attached" in log and f"pid={service.proc.pid}" in log
    # No index or model of its own: nothing here opened the index, loaded a model or took the writer lock.
    assert "serve_start" not in log and "model_loaded" not in log and "being written by another" not in log


def test_an_auto_client_falls_back_to_the_handshake_through_the_bridge(spawn, tmp_path):
    kb = _notes(tmp_path)
    index = tmp_path / "index.sqlite"
    service = spawn.server(kb, index, tmp_path, command=FAKE_GROOVE)

    async def session() -> Any:
        async with Client(_stdio(spawn, kb, index, tmp_path, tmp_path / "stdio.err"), mode="auto") as client:
            return await client.call_tool("search", {"query": "tomatoes", "retriever": "fts"})

    try:
        service.wait_healthy()
        service.wait_indexed(2)
        found = anyio.run(session)
    finally:
        service.terminate()
    assert found.structured_content["results"][0]["path"] == "garden/tomatoes.md"
    assert "stdio_attached" in (tmp_path / "stdio.err").read_text()


async def test_with_no_service_running_stdio_serves_the_index_itself_and_says_so(spawn, tmp_path):
    kb = _notes(tmp_path)
    index = tmp_path / "index.sqlite"
    async with Client(_stdio(spawn, kb, index, tmp_path, tmp_path / "stdio.err"), mode="legacy") as client:
        async def indexed() -> bool:
            hit = await client.call_tool("search", {"query": "tomatoes", "retriever": "fts"})
            return bool(hit.structured_content["results"])

        await eventually(indexed, "the stdio server's own index", timeout=60)
    log = (tmp_path / "stdio.err").read_text()
    assert "stdio_serves_the_index" in log and "stdio_attached" not in log


def test_a_service_that_serves_no_http_endpoint_is_a_clear_error_for_a_second_stdio_client(spawn, tmp_path):
    kb = _notes(tmp_path)
    index = tmp_path / "index.sqlite"
    env = server_env(tmp_path)
    first = spawn.popen(serve_argv(kb, index, "--transport", "stdio", command=FAKE_GROOVE), env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        sock = socket_path(index)
        deadline = time.monotonic() + 60
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sock.exists(), "the first stdio server's local endpoint"
        second = spawn.run(serve_argv(kb, index, "--transport", "stdio", command=FAKE_GROOVE), env=env,
                                input=b"", capture_output=True, timeout=60, cwd=tmp_path)
    finally:
        first.stdin.close()  # type: ignore[union-attr]
        first.wait(timeout=30)
    err = second.stderr.decode()
    assert second.returncode != 0
    assert f"a groove serve (pid {first.pid}) writes the index" in err and "serves no HTTP endpoint" in err, err
    assert "Traceback" not in err
    assert os.path.exists(index)


@pytest.mark.parametrize(("service_by", "client_by"), [("kb", "kb"), ("config", "kb"), ("kb", "config")])
def test_a_stdio_client_attaches_however_either_names_the_notes_with_the_default_index(spawn, tmp_path, service_by,
                                                                                       client_by):
    """As docs/clients.md shows them: `groove serve --kb DIR` (or --config FILE) as the service, and the stdio entry
    `groove client-config` prints (`--kb DIR`), neither naming the index: both find the default one."""
    kb = _notes(tmp_path)
    config = write(tmp_path / "conf" / "groove.toml", f'kb_path = "{kb}"\n')
    named = {"kb": ("--kb", str(kb)), "config": ("--config", str(config))}
    service = spawn.server(None, None, tmp_path, extra=named[service_by], command=FAKE_GROOVE)
    errlog = tmp_path / "stdio.err"
    argv = [*FAKE_GROOVE, "serve", *named[client_by], "--transport", "stdio"]
    env = {**server_env(tmp_path), "ERRLOG_PATH": str(errlog)}
    params = spawn.stdio(command="/bin/sh", args=["-c", 'exec "$@" 2>>"$ERRLOG_PATH"', "sh", *argv], env=env,
                         cwd=str(tmp_path))

    async def session() -> Any:
        async with Client(params, mode="legacy") as client:
            return await client.call_tool("search", {"query": "tomatoes side shoots", "retriever": "fts"})

    try:
        service.wait_healthy()
        service.wait_indexed(2)
        found = anyio.run(session)
    finally:
        service.terminate()
    assert found.structured_content["results"][0]["path"] == "garden/tomatoes.md"
    log = errlog.read_text()
    assert "stdio_attached" in log and "being written by another" not in log and "serve_start" not in log
