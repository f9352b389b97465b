"""`groove client-config CLIENT`: each MCP client's own configuration, with this machine's paths.

Every snippet is parsed the way its client reads it (JSON, TOML, a shell command line) and checked
against the shape that client documents (docs/clients.md cites the pages). One snippet is also run:
the stdio entry's command line, exactly as printed, started by the MCP SDK's stdio client.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

import groove.cli
from groove import clients
from groove.cli import main
from groove.config import user_config_file
from tests.support.common import note, write
from tests.support.server import FAKE_GROOVE, server_env

ALL = ("claude-desktop", "claude-code", "cursor", "vscode", "codex", "gemini")
TOKEN = "s3cret-token-value-0123456789abcdef"


def client_config(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["client-config", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def stdio_entry(name: str, out: str) -> tuple[str, list[str]]:
    """The command and arguments a client would start, read from its snippet as that client reads it."""
    if name == "claude-code":
        words = shlex.split(out)
        assert words[:9] == ["claude", "mcp", "add", "--transport", "stdio", "--scope", "user", "groove", "--"]
        return words[9], words[10:]
    if name == "codex":
        server = tomllib.loads(out)["mcp_servers"]["groove"]
        assert set(server) == {"command", "args"}
        return server["command"], server["args"]
    data = json.loads(out)
    if name == "vscode":
        assert set(data) == {"servers"}
        server = data["servers"]["groove"]
        assert server["type"] == "stdio"
    else:  # Claude Desktop, Cursor and Gemini CLI: `mcpServers`, `command` + `args`
        assert set(data) == {"mcpServers"}
        server = data["mcpServers"]["groove"]
        assert set(server) == {"command", "args"}
    return server["command"], server["args"]


def http_entry(name: str, out: str) -> dict[str, Any]:
    """The URL and the Authorization header a client would send, as written in its snippet."""
    if name == "claude-code":
        words = shlex.split(out)
        assert words[:9] == ["claude", "mcp", "add", "--transport", "http", "--scope", "user", "groove", words[8]]
        rest = words[9:]
        return {"url": words[8], "authorization": rest[1] if rest[:1] == ["--header"] else None, "extra": rest}
    if name == "codex":
        server = tomllib.loads(out)["mcp_servers"]["groove"]
        return {"url": server["url"], "token_env": server.get("bearer_token_env_var"), "keys": set(server)}
    data = json.loads(out)
    if name == "claude-desktop":
        server = data["mcpServers"]["groove"]
        assert server["command"] == "npx" and server["args"][:2] == ["-y", "mcp-remote"]
        args = server["args"]
        header = args[args.index("--header") + 1] if "--header" in args else None
        return {"url": args[2], "authorization": header, "env": server.get("env"), "args": args}
    if name == "vscode":
        server = data["servers"]["groove"]
        assert server["type"] == "http"
        return {"url": server["url"], "authorization": server.get("headers", {}).get("Authorization"),
                "inputs": data.get("inputs")}
    server = data["mcpServers"]["groove"]
    url_key = "httpUrl" if name == "gemini" else "url"  # Gemini CLI: `url` is its SSE transport
    assert set(server) <= {url_key, "headers"}
    return {"url": server[url_key], "authorization": server.get("headers", {}).get("Authorization")}


# --- stdio: the client starts groove itself ------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
def test_each_clients_stdio_snippet_starts_this_machines_groove_on_the_absolute_notes_folder(name, capsys, tmp_path, monkeypatch):
    (tmp_path / "notes").mkdir()
    monkeypatch.chdir(tmp_path)
    code, out, err = client_config(capsys, name, "--kb", "notes")  # relative here, absolute in the snippet
    assert code == 0, err
    command, args = stdio_entry(name, out)
    assert Path(command).is_absolute() and Path(command).is_file() and os.access(command, os.X_OK)
    assert Path(command).name == "groove"
    assert args == ["serve", "--transport", "stdio", "--kb", str((tmp_path / "notes").resolve())]
    assert clients.CLIENTS[name].title in err  # where the snippet goes, on stderr


def test_the_stdio_snippet_names_the_config_file_and_index_the_settings_came_from(capsys, tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "notes").mkdir(parents=True)
    write(project / "groove.toml", 'kb_path = "notes"\nindex_path = "idx/groove.sqlite"\n')
    monkeypatch.chdir(project)  # found as ./groove.toml: a client starting groove elsewhere would not find it
    code, out, err = client_config(capsys, "cursor")
    assert code == 0, err
    _, args = stdio_entry("cursor", out)
    assert args == ["serve", "--transport", "stdio", "--config", str((project / "groove.toml").resolve()),
                    "--kb", str((project / "notes").resolve()), "--index", str((project / "idx/groove.sqlite").resolve())]


def test_paths_with_spaces_quotes_and_japanese_survive_each_clients_format():
    odd = '/home/me/My Notes/"draft" \\ 日本語'
    target = clients.Target("stdio", command=("/opt/groove bin/groove", *clients.stdio_args(kb=odd)))
    for name in ALL:
        command, args = stdio_entry(name, clients.render(name, target))
        assert command == "/opt/groove bin/groove" and args[-1] == odd, name


def test_a_stdio_snippet_without_a_notes_folder_is_refused_like_groove_serve(capsys):
    code, out, err = client_config(capsys, "claude-desktop")
    assert code == 2 and out == ""
    assert "no notes folder configured" in err


def test_the_examples_flag_gives_the_entry_for_the_shipped_notes_make_serve_serves(capsys):
    from groove import EXAMPLE_NOTES

    code, out, err = client_config(capsys, "claude-desktop", "--examples")
    assert code == 0, err
    command, args = stdio_entry("claude-desktop", out)
    assert args[args.index("--kb") + 1] == str(EXAMPLE_NOTES.resolve())


def test_the_startup_lines_name_client_config_with_the_folder_being_served(tmp_path):
    from groove.serve.http.server import client_snippets

    kb = tmp_path / "my notes"
    text = client_snippets("http://127.0.0.1:3100/mcp", ["/x/groove", "serve", "--transport", "stdio", "--kb", str(kb)])
    line = next(ln for ln in text.splitlines() if "client-config" in ln)
    assert shlex.split(line.split(" [--transport")[0]) == ["/x/groove", "client-config", "CLIENT", "--kb", str(kb)]


# --- HTTP: the client connects to a running groove ------------------------------------------------

@pytest.mark.parametrize("name", ALL)
def test_each_clients_http_snippet_reaches_the_configured_bind_without_a_header_when_no_token_is_set(name, capsys):
    write(user_config_file(), '[serve]\nbind = "127.0.0.1:3200"\n')  # the user's own file: no trust needed
    code, out, err = client_config(capsys, name, "--transport", "http")
    assert code == 0, err
    entry = http_entry(name, out)
    assert entry["url"] == "http://127.0.0.1:3200/mcp"
    assert "Authorization" not in out and "Bearer" not in out and "--header" not in out and "token" not in out


@pytest.mark.parametrize("name", ALL)
def test_a_service_bound_for_other_machines_gets_a_header_on_loopback_even_before_the_token_is_exported(name, capsys):
    # Off loopback groove refuses to run without a token, so the client will need one.
    write(user_config_file(), '[serve]\nbind = "0.0.0.0:3200"\n\n[serve.http]\ntoken_env = "NOTES_TOKEN"\n')
    code, out, err = client_config(capsys, name, "--transport", "http")
    assert code == 0, err
    entry = http_entry(name, out)
    assert entry["url"] == "http://127.0.0.1:3200/mcp"  # every-interface bind: this machine's loopback
    assert "NOTES_TOKEN" in out


@pytest.mark.parametrize("name", ALL)
def test_each_clients_http_snippet_sends_the_bearer_token_from_its_variable_and_never_holds_the_token(name, capsys, monkeypatch):
    monkeypatch.setenv("GROOVE_TOKEN", TOKEN)  # the service's token ([serve.http] token_env's default)
    code, out, err = client_config(capsys, name, "--transport", "http")
    assert code == 0, err
    assert TOKEN not in out and TOKEN not in err
    entry = http_entry(name, out)
    assert entry["url"] == "http://127.0.0.1:3100/mcp"
    if name == "codex":  # Codex reads the token from the variable itself
        assert entry["token_env"] == "GROOVE_TOKEN" and entry["keys"] == {"url", "bearer_token_env_var"}
    elif name == "vscode":  # VS Code asks once and keeps it in its secret storage
        assert entry["authorization"] == "Bearer ${input:groove-token}"
        assert entry["inputs"] == [{"type": "promptString", "id": "groove-token", "password": True,
                                    "description": "groove bearer token (the value of GROOVE_TOKEN)"}]
    else:
        expected = {"claude-desktop": "Authorization: Bearer ${GROOVE_TOKEN}",  # mcp-remote expands it
                    "claude-code": "Authorization: Bearer $GROOVE_TOKEN",  # the shell expands it
                    "cursor": "Bearer ${env:GROOVE_TOKEN}",
                    "gemini": "Bearer ${GROOVE_TOKEN}"}[name]
        assert entry["authorization"] == expected
    if name == "claude-desktop":
        assert entry["env"] == {"GROOVE_TOKEN": clients.TOKEN_PLACEHOLDER}
    if name == "claude-code":
        assert entry["extra"][0] == "--header" and len(entry["extra"]) == 2  # last: it takes several values
        assert '"Authorization: Bearer $GROOVE_TOKEN"' in out  # double quotes: expanded when it runs


@pytest.mark.parametrize("name", ALL)
def test_a_token_variable_and_url_given_on_the_command_line_are_the_ones_written(name, capsys):
    code, out, err = client_config(capsys, name, "--transport", "http", "--url", "http://notes.lan:3100/mcp",
                                   "--token-env", "MY_GROOVE_TOKEN")
    assert code == 0, err
    entry = http_entry(name, out)
    assert entry["url"] == "http://notes.lan:3100/mcp"
    assert "MY_GROOVE_TOKEN" in out and "GROOVE_TOKEN" not in out.replace("MY_GROOVE_TOKEN", "")
    if name == "claude-desktop":  # plain http to another machine: mcp-remote wants --allow-http
        assert "--allow-http" in entry["args"] and entry["env"] == {"MY_GROOVE_TOKEN": clients.TOKEN_PLACEHOLDER}


def test_mcp_remote_is_told_to_allow_http_for_every_host_but_the_two_it_exempts():
    # mcp-remote lets plain http:// through to `localhost` and `127.0.0.1` only.
    for url, allowed in (("http://127.0.0.1:3100/mcp", False), ("http://localhost:3100/mcp", False),
                         ("http://[::1]:3100/mcp", True), ("http://notes.lan:3100/mcp", True),
                         ("https://notes.example.org/mcp", False)):
        out = clients.render("claude-desktop", clients.Target("http", url=url))
        assert ("--allow-http" in json.loads(out)["mcpServers"]["groove"]["args"]) is allowed, url


def test_the_url_for_a_bind_uses_loopback_for_every_interface_and_brackets_ipv6():
    assert clients.url_for_bind("127.0.0.1:3100") == "http://127.0.0.1:3100/mcp"
    assert clients.url_for_bind("0.0.0.0:3100") == "http://127.0.0.1:3100/mcp"
    assert clients.url_for_bind("[::]:3100") == "http://127.0.0.1:3100/mcp"
    assert clients.url_for_bind("[::1]:3200") == "http://[::1]:3200/mcp"
    assert clients.url_for_bind("mybox.local:3100") == "http://mybox.local:3100/mcp"


# --- HTTP: the URL of the service that runs (issue 37, point 4) ---------------------------------------

def _client_config(spawn, home: Path, *argv: str) -> tuple[int, str, str]:
    """`groove client-config ARGV` as a process, with the config and data folders of the services under `home`."""
    done = spawn.groove("client-config", *argv, home=home, cwd=home, timeout=120)
    return done.returncode, done.stdout, done.stderr


def test_the_http_entry_points_at_the_service_running_for_these_notes_on_whatever_port_it_took(spawn, tmp_path):
    # As `make serve KB=~/notes BIND=127.0.0.1:PORT` runs it: --kb, the default index, a port that is not 3100,
    # a token from GROOVE_TOKEN (which the shell running client-config does not have).
    kb = tmp_path / "notes"
    write(kb / "wal.md", note("Write-ahead log", "The WAL keeps the index safe across crashes."))
    service = spawn.server(None, None, tmp_path, extra=("--kb", str(kb)), command=FAKE_GROOVE,
                           env={"GROOVE_TOKEN": TOKEN}, token=TOKEN)
    try:
        service.wait_healthy()
        # A [serve] bind of the user's says another port: the running service's own URL wins.
        write(tmp_path / "config" / "groove" / "groove.toml", '[serve]\nbind = "127.0.0.1:3200"\n')
        for name in ALL:
            code, out, err = _client_config(spawn, tmp_path, name, "--transport", "http", "--kb", str(kb))
            assert code == 0, err
            assert http_entry(name, out)["url"] == service.url, (name, out)
            assert f"groove serve (pid {service.proc.pid}) that serves these notes: {service.url}" in err
            assert "GROOVE_TOKEN" in out and TOKEN not in out and TOKEN not in err  # it wants a token: the header
        code, out, err = _client_config(spawn, tmp_path, "cursor", "--transport", "http", "--kb", str(kb),
                                        "--url", "http://notes.lan:3100/mcp")
        assert http_entry("cursor", out)["url"] == "http://notes.lan:3100/mcp" and "pid" not in err  # --url wins
    finally:
        service.terminate()
    # None runs: the configured bind, said on stderr with where it came from.
    code, out, err = _client_config(spawn, tmp_path, "cursor", "--transport", "http", "--kb", str(kb))
    assert code == 0, err
    assert http_entry("cursor", out)["url"] == "http://127.0.0.1:3200/mcp"
    assert "no groove serve runs for these notes" in err
    assert f"[serve] bind (127.0.0.1:3200, set in {tmp_path / 'config' / 'groove' / 'groove.toml'})" in err
    assert "Authorization" not in out


def test_with_no_notes_folder_the_http_entry_points_at_the_example_notes_service_make_serve_runs(spawn, tmp_path):
    # `make serve BIND=127.0.0.1:PORT` without KB= serves the shipped example notes (--examples, default index);
    # `groove client-config cursor --transport http`, with no folder named, finds it.
    service = spawn.server(None, None, tmp_path, extra=("--examples",), command=FAKE_GROOVE)
    try:
        service.wait_healthy()
        code, out, err = _client_config(spawn, tmp_path, "cursor", "--transport", "http")
    finally:
        service.terminate()
    assert code == 0, err
    assert http_entry("cursor", out)["url"] == service.url
    assert f"(pid {service.proc.pid}) that serves the shipped example notes" in err
    code, out, err = _client_config(spawn, tmp_path, "cursor", "--transport", "http")
    assert http_entry("cursor", out)["url"] == "http://127.0.0.1:3100/mcp"
    assert "no groove serve runs for the shipped example notes" in err and "127.0.0.1:3100, the default" in err
    assert "pass --kb PATH" in err


def test_a_notes_folder_that_is_not_there_falls_back_to_the_bind_and_says_why(capsys, tmp_path):
    code, out, err = client_config(capsys, "gemini", "--transport", "http", "--kb", str(tmp_path / "gone"))
    assert code == 0, err
    assert http_entry("gemini", out)["url"] == "http://127.0.0.1:3100/mcp"
    assert f"the notes folder {tmp_path / 'gone'} does not exist" in err and "127.0.0.1:3100, the default" in err


# --- mistakes --------------------------------------------------------------------------------------

def test_an_unknown_client_is_a_usage_error_that_lists_the_known_ones(capsys):
    code, out, err = client_config(capsys, "notepad")
    assert code == 2 and out == ""
    assert "unknown MCP client 'notepad'" in err
    for name in ALL:
        assert name in err


def test_http_options_without_the_http_transport_are_refused(capsys, tmp_path):
    code, out, err = client_config(capsys, "cursor", "--kb", str(tmp_path), "--token-env", "X")
    assert code == 2 and out == "" and "--transport http" in err


def test_every_client_the_docs_page_covers_has_a_snippet_and_the_page_names_the_command():
    page = (Path(__file__).resolve().parent.parent / "docs" / "clients.md").read_text(encoding="utf-8")
    assert set(clients.CLIENTS) == set(ALL)
    for name in ALL:
        assert f"groove client-config {name}" in page, name
        assert clients.CLIENTS[name].title.split(" (")[0] in page


# --- the real check: the stdio entry, started exactly as printed ---------------------------------------

def test_the_claude_desktop_stdio_entry_as_printed_starts_a_server_that_lists_its_tools(spawn, capsys, tmp_path, monkeypatch):
    # The printed command is `groove` with the bag-of-words embedder (tests/support/fake_groove.py) in place of the
    # model: a real executable file, as the snippet's command always is.
    fake = tmp_path / "bin" / "groove"
    write(fake, "#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in FAKE_GROOVE) + ' "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(groove.cli, "_groove_executable", lambda: str(fake))
    project = tmp_path / "project"
    write(project / "notes" / "wal.md", note("Write-ahead log", "The WAL keeps the quokka index safe across crashes."))
    write(project / "groove.toml", 'kb_path = "notes"\nindex_path = "index.sqlite"\n')
    monkeypatch.chdir(project)
    code, out, err = client_config(capsys, "claude-desktop")
    assert code == 0, err
    server = json.loads(out)["mcpServers"]["groove"]
    assert server["command"] == str(fake)

    elsewhere = tmp_path / "elsewhere"  # a client starts groove from its own folder, not the project's
    elsewhere.mkdir()
    params = spawn.stdio(command=server["command"], args=server["args"], env=server_env(tmp_path),
                                   cwd=str(elsewhere))

    async def tools() -> set[str]:
        with anyio.fail_after(120):
            async with Client(params) as client:
                listed = {t.name for t in (await client.list_tools()).tools}
                status = (await client.call_tool("index_status", {})).structured_content
                assert status["kb_path"] == str((project / "notes").resolve())
                return listed

    assert {"search", "get_document", "index_status"} <= anyio.run(tools)


def test_the_examples_in_docs_clients_md_are_what_client_config_prints():
    docs = Path(__file__).resolve().parent.parent / "docs"
    stdio = clients.Target("stdio", command=("/home/me/groove/.venv/bin/groove", *clients.stdio_args(kb="/home/me/notes")))
    http = clients.Target("http", url="http://127.0.0.1:3100/mcp", token_env="GROOVE_TOKEN")
    for page in ("clients.md", "clients.ja.md"):
        text = (docs / page).read_text(encoding="utf-8")
        for name in ALL:
            for target in (stdio, http):
                assert clients.render(name, target) in text, (page, name, target.transport)
