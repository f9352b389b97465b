"""At log level debug, other libraries keep their debug lines (which hold note text) to themselves
unless the user names them (issue 22, point 18).

aiosqlite logs every statement with its parameters at debug: the text of each chunk written, the
words of each query. Real `groove index` and `groove serve` processes run at debug on a note with
a word found nowhere else, and the word must not reach stderr unless `[log] debug_modules` names
the library.
"""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

import anyio
import pytest

from groove.config import ConfigError, load_settings
from tests.support.common import note, write
from tests.support.server import FAKE_GROOVE, server_env

SECRET = "quillfeather"


def notes(root: Path) -> Path:
    kb = root / "notes"
    write(kb / "vault.md", note("Vault", f"The zebracorn passphrase is {SECRET}, said once."))
    write(kb / "garden.md", note("Garden", "Tomatoes want sun and deep watering."))
    return kb


def index_at_debug(spawn, root: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`groove index --log-level debug` (the fake embedder: the model is not the point)."""
    return spawn.run([*FAKE_GROOVE, "index", "--kb", str(notes(root)), "--index", str(root / "index.sqlite"),
                           "--log-level", "debug", *extra], cwd=root, env={**server_env(root), **(env or {})},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)


def test_at_debug_other_libraries_write_no_note_text_to_stderr_while_groove_s_own_debug_lines_are_there(spawn, tmp_path):
    done = index_at_debug(spawn, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[debug    ] index_done" in done.stderr  # groove's own debug line
    assert SECRET not in done.stderr
    assert "DEBUG aiosqlite" not in done.stderr and "DEBUG markdown_it" not in done.stderr


def test_naming_a_library_in_the_environment_shows_its_debug_lines_and_only_its(spawn, tmp_path):
    done = index_at_debug(spawn, tmp_path, env={"GROOVE_LOG__DEBUG_MODULES": "aiosqlite,httpx"})
    assert done.returncode == 0, done.stderr
    assert "DEBUG aiosqlite" in done.stderr and SECRET in done.stderr
    assert "DEBUG markdown_it" not in done.stderr


def test_naming_a_library_in_the_config_file_shows_its_debug_lines(spawn, tmp_path):
    config = write(tmp_path / "conf" / "groove.toml", '[log]\ndebug_modules = ["markdown_it"]\n')
    done = index_at_debug(spawn, tmp_path, "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "DEBUG markdown_it.rules_block" in done.stderr  # a parent's name covers its children
    assert SECRET not in done.stderr and "DEBUG aiosqlite" not in done.stderr


def test_a_search_over_mcp_http_at_debug_leaves_no_note_text_in_the_servers_log(spawn, tmp_path):
    server = spawn.server(notes(tmp_path), tmp_path / "index.sqlite", tmp_path, extra=("--log-level", "debug"),
                           command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        server.wait_indexed(2)

        async def search() -> None:
            async with server.client() as client:
                found = await client.call_tool("search", {"query": "zebracorn passphrase"})
                assert SECRET in str(found.structured_content)
            from mcp import Client

            async with Client(server.url, mode="legacy") as client:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the SDK flags logging/setLevel as deprecated
                    await client.set_logging_level("debug")

        anyio.run(search)
    finally:
        server.terminate()
    log = server.log()
    assert "client_log_level" in log  # groove's own debug line, from the setLevel request
    assert SECRET not in log and "zebracorn" not in log
    assert "DEBUG uvicorn" not in log  # uvicorn sets its own loggers to debug; held back all the same


@pytest.mark.parametrize("value, expected", [("mcp,httpx", ["mcp", "httpx"]), ('["sse_starlette"]', ["sse_starlette"]),
                                             (" mcp , ", ["mcp"]), ("*", ["*"])])
def test_debug_modules_from_the_environment_is_a_comma_list_or_a_json_list(monkeypatch, value, expected):
    monkeypatch.setenv("GROOVE_LOG__DEBUG_MODULES", value)
    assert load_settings(None).log.debug_modules == expected


def test_debug_modules_refuses_what_is_not_a_logger_name(monkeypatch):
    monkeypatch.setenv("GROOVE_LOG__DEBUG_MODULES", "mcp;rm -rf")
    with pytest.raises(ConfigError, match="must be logger names"):
        load_settings(None)
