"""`groove serve --transport stdio`: spawned by real clients (the Python SDK, the MCP Inspector CLI) and by hand.

The index is built once for the module, so each server starts on an
up-to-date index and answers at once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from groove.serve.mcp.server import note_uri
from tests.support.common import note, write
from tests.support.server import serve_argv, server_env

JAPANESE = "旅/北海道の旅程.md"


@pytest.fixture(scope="module")
def stdio_setup(real_model, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("mcp-stdio")
    kb = root / "notes"
    write(kb / "projects/zephyrine-plan.md", note(
        "Zephyrine rollout", "The zephyrine migration moves the quokka cluster to the new storage tier.", tags=["infra"],
    ))
    write(kb / JAPANESE, note("北海道の旅程", "札幌から小樽へ。運河沿いの倉庫群を夕方に歩く。", tags=["旅行"]))
    for i in range(12):
        write(kb / f"misc/note-{i:02d}.md", note(f"Misc {i}", f"Miscellaneous paragraph {i} about daily chores."))
    index = root / "index.sqlite"
    with pytest.MonkeyPatch.context() as mp:  # the module fixture runs before conftest's per-test isolation
        for name in [n for n in os.environ if n.startswith("GROOVE_")]:
            mp.delenv(name)
        mp.setenv("XDG_CONFIG_HOME", str(root / "config"))
        mp.setenv("XDG_DATA_HOME", str(root / "data"))
        mp.chdir(root)
        from groove.config import load_settings
        from tests.support.oneshot import index_once

        anyio.run(lambda: index_once(load_settings(None, kb_path=kb, index_path=index)))
    return root, kb, index


def _params(spawn, root: Path, kb: Path, index: Path) -> StdioServerParameters:
    argv = serve_argv(kb, index, "--transport", "stdio")
    return spawn.stdio(command=argv[0], args=argv[1:], env=server_env(root), cwd=str(root))


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_the_python_sdk_client_uses_every_tool_over_stdio(spawn, stdio_setup):
    # The SDK client speaks 2026-07-28 over stdio; the raw test below speaks the 2025-11-25 handshake.
    root, kb, index = stdio_setup
    with anyio.fail_after(120):
        async with Client(_params(spawn, root, kb, index)) as client:
            assert client.protocol_version == "2026-07-28"
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"search", "get_document", "list_documents", "index_status", "reindex", "related", "topics", "links",
                          "changes"}

            found = await client.call_tool("search", {"query": "zephyrine", "limit": 3})
            assert not found.is_error, _text(found)
            assert found.structured_content["results"][0]["path"] == "projects/zephyrine-plan.md"
            assert "pending_chunks" in found.structured_content

            doc = await client.call_tool("get_document", {"path": JAPANESE})
            assert "運河沿いの倉庫群" in doc.structured_content["content"]

            paths: list[str] = []
            cursor = None
            while True:
                page = (await client.call_tool("list_documents", {"limit": 5, **({"cursor": cursor} if cursor else {})})).structured_content
                paths += [d["path"] for d in page["documents"]]
                cursor = page["next_cursor"]
                if not cursor:
                    break
            assert len(paths) == 14 == len(set(paths))

            status = (await client.call_tool("index_status", {})).structured_content
            assert status["documents"] == 14 and status["kb_path"] == str(kb.resolve())

            for bad, message in (({"query": ""}, "the query is empty"), ({"query": "-foo"}, "only excludes terms"),
                                 ({"query": "zephyrine", "limit": 0}, "limit must be between 1 and 100")):
                refused = await client.call_tool("search", bad)  # invalid arguments: a tool error, one line
                assert refused.is_error and message in refused.content[0].text
            again = await client.call_tool("search", {"query": "小樽", "limit": 1})
            assert again.structured_content["results"][0]["path"] == JAPANESE

            read = await client.read_resource(note_uri(JAPANESE))
            assert "札幌から小樽へ" in read.contents[0].text


def _rpc(proc: subprocess.Popen, message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message, ensure_ascii=False) + "\n").encode())
    proc.stdin.flush()


def _read_until(proc: subprocess.Popen, lines: list[str], wanted_id: int, timeout: float = 60.0) -> dict[str, Any]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raw = proc.stdout.readline()
        if not raw:
            raise AssertionError(f"stdout closed before the response to {wanted_id}")
        line = raw.decode("utf-8")
        lines.append(line)
        message = json.loads(line)
        if message.get("id") == wanted_id:
            return message
    raise AssertionError(f"no response to {wanted_id} within {timeout} s")


def test_stdout_carries_only_json_rpc_and_the_server_exits_when_stdin_closes(spawn, stdio_setup):
    root, kb, index = stdio_setup
    proc = spawn.popen(
        serve_argv(kb, index, "--transport", "stdio", "--log-level", "debug"),
        cwd=root, env=server_env(root), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    lines: list[str] = []
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        init = _read_until(proc, lines, 1)
        assert init["result"]["serverInfo"]["name"] == "groove"
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        # A hybrid search loads the model (the chattiest moment of the process) before answering.
        _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "search", "arguments": {"query": "quokka cluster storage"}}})
        found = _read_until(proc, lines, 2)
        assert found["result"]["structuredContent"]["results"][0]["path"] == "projects/zephyrine-plan.md"
        _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search", "arguments": {"query": ""}}})
        bad = _read_until(proc, lines, 3)  # invalid arguments: a tool error the model reads (SEP-1303), one line
        assert bad["result"]["isError"] is True and bad["result"]["content"][0]["text"].startswith("the query is empty")
        _rpc(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "get_document", "arguments": {"path": "nowhere.md"}}})
        assert _read_until(proc, lines, 4)["result"]["isError"] is True  # a note that is not there: a tool error
        t0 = time.monotonic()
        assert proc.stdin is not None
        proc.stdin.close()  # the client goes away
        rc = proc.wait(timeout=15)
        assert rc == 0
        assert time.monotonic() - t0 < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stdout is not None and proc.stderr is not None
    rest = proc.stdout.read().decode("utf-8")
    lines += rest.splitlines(keepends=True)
    stderr = proc.stderr.read().decode("utf-8", errors="replace")
    for line in lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0", line
        assert "id" in message or "method" in message, line
    assert "serve_start" in stderr and "stdin_closed" in stderr  # the logs went to stderr, as they should


def test_the_mcp_inspector_cli_lists_tools_and_searches_over_stdio(spawn, npm_tools, stdio_setup, tmp_path):
    root, kb, index = stdio_setup
    tools = npm_tools
    env = tools.env(server_env(root))
    env["HOME"] = str(tmp_path)  # the Inspector keeps a catalog under ~
    server = serve_argv(kb, index, "--transport", "stdio")
    inspector = [str(tools.bin / "mcp-inspector"), "--cli"]

    listed = spawn.run([*inspector, "--strict", "--method", "tools/list", "--", *server],
                            env=env, cwd=root, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr[-3000:]
    # --strict lints every input and output schema and prints each finding (none: it prints nothing of it)
    findings = re.findall(r"(?:Warning|Error): tool .*|\d+ errors?, \d+ warnings? across .*", listed.stderr)
    assert not findings, listed.stderr[-3000:]
    listed_tools = {t["name"]: t for t in json.loads(listed.stdout)["tools"]}
    assert set(listed_tools) == {"search", "get_document", "list_documents", "index_status", "reindex", "related", "topics", "links",
                          "changes"}
    assert listed_tools["search"]["description"].startswith("Passages that best answer a query")
    assert "\n    " not in listed_tools["search"]["description"]  # dedented for display

    called = spawn.run(
        [*inspector, "--method", "tools/call", "--tool-name", "search", "--tool-arg", "query=小樽 運河", "limit=2",
         "--", *server],
        env=env, cwd=root, capture_output=True, text=True, timeout=120,
    )
    assert called.returncode == 0, called.stderr[-3000:]
    result = json.loads(called.stdout)
    assert not result.get("isError")
    top = result["structuredContent"]["results"][0]
    assert top["path"] == JAPANESE and top["uri"] == note_uri(JAPANESE) and "chunk_id" not in top
    text = result["content"][0]["text"]  # the compact rendering: the hit's path and score, not JSON
    assert text.splitlines()[2].startswith(f"[1] {JAPANESE}") and f"score {top['score']:.4g}" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
