"""A groove.toml found in the current folder may be anyone's (issue 22, point 7).

It may choose what is indexed and how it is searched; it may not choose where note text goes (an
embedding server, a listening address off this machine, who may connect) until the user approves
that file, as it is, with `groove trust`. The real `groove` command runs in a folder whose
groove.toml names a real embeddings server on this machine under a name that is not loopback's, so
"nothing was sent" is counted by the server itself.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from groove import trust
from groove.config import ConfigError, load_settings, user_config_file
from tests.support.common import GROOVE, write
from tests.support.server import server_env

DIM = 8


class EmbeddingsServer:
    """An OpenAI-compatible /v1/embeddings on every interface, counting the texts it was sent."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                server.texts += body["input"]
                data = [{"object": "embedding", "index": i, "embedding": [1.0 + (len(t) % 3)] + [0.5] * (DIM - 1)}
                        for i, t in enumerate(body["input"])]
                payload = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def embeddings() -> Iterator[EmbeddingsServer]:
    server = EmbeddingsServer()
    yield server
    server.close()


def machine_name() -> str:
    """This machine by a name groove cannot tell from another machine's (it does not resolve names)."""
    name = socket.gethostname()
    try:
        socket.getaddrinfo(name, None)
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    if trust.is_loopback_host(name):
        pytest.skip("this machine is called localhost")
    return name


def groove(spawn, *argv: str, cwd: Path, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return spawn.run([*GROOVE, *argv], cwd=cwd, env={**server_env(home), **(env or {})}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)


def repository(root: Path, endpoint: str) -> Path:
    """A cloned repository: notes, and a groove.toml that sends them to `endpoint`."""
    repo = root / "repo"
    write(repo / "notes" / "secret.md", "# Plans\n\nThe quokka migration starts on Tuesday.\n")
    write(repo / "groove.toml", 'kb_path = "notes"\nindex_path = ".groove/index.sqlite"\n\n'
          f'[embedding]\nbackend = "openai"\n\n[embedding.openai]\nendpoint = "{endpoint}"\n'
          f'model = "fake"\ndimension = {DIM}\n')
    return repo


# --- the command line, end to end ---------------------------------------------------------------------

def test_a_local_groove_toml_that_sends_note_text_away_is_refused_until_trusted_and_again_once_edited(spawn, 
        tmp_path, embeddings):
    endpoint = f"http://{machine_name()}:{embeddings.port}/v1"
    repo = repository(tmp_path, endpoint)
    config = (repo / "groove.toml").resolve()

    refused = groove(spawn, "index", cwd=repo, home=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f'groove: error: groove.toml in {config.parent} sets [embedding.openai] endpoint = "{endpoint}" '
        f"(note text would be sent there); run `groove trust {config}` to allow it"]
    assert embeddings.texts == [] and not (repo / ".groove" / "index.sqlite").exists()

    allowed = groove(spawn, "trust", cwd=repo, home=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert f"trusted {config}" in allowed.stdout and "[embedding.openai] endpoint" in allowed.stdout
    record = json.loads((tmp_path / "data" / "groove" / "trusted.json").read_text())
    assert list(record["files"]) == [str(config)]

    done = groove(spawn, "index", cwd=repo, home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert any("quokka" in text for text in embeddings.texts)
    sent = len(embeddings.texts)

    config.write_text(config.read_text() + "batch_size = 4\n")  # under [embedding.openai]: a changed file
    again = groove(spawn, "index", cwd=repo, home=tmp_path)
    assert again.returncode == 2
    assert "(it changed since it was trusted); run `groove trust" in again.stderr
    assert len(embeddings.texts) == sent

    assert groove(spawn, "trust", str(config), cwd=tmp_path, home=tmp_path).returncode == 0  # by path, from elsewhere
    assert groove(spawn, "index", cwd=repo, home=tmp_path).returncode == 0


def test_trust_list_says_whether_each_trusted_file_is_unchanged_and_revoke_forgets_it(spawn, tmp_path):
    repo = repository(tmp_path, "https://embeddings.example/v1")
    config = (repo / "groove.toml").resolve()
    assert groove(spawn, "trust", "--list", cwd=repo, home=tmp_path).stdout == "no groove.toml is trusted\n"
    assert groove(spawn, "trust", str(repo), cwd=tmp_path, home=tmp_path).returncode == 0  # a folder means its groove.toml

    assert groove(spawn, "trust", "--list", cwd=repo, home=tmp_path).stdout.startswith(f"ok       {config}  (trusted ")
    config.write_text(config.read_text() + "# edited\n")
    assert groove(spawn, "trust", "--list", cwd=repo, home=tmp_path).stdout.startswith(f"changed  {config}")

    revoked = groove(spawn, "trust", "--revoke", "groove.toml", cwd=repo, home=tmp_path)
    assert revoked.returncode == 0 and revoked.stdout == f"no longer trusted: {config}\n"
    unknown = groove(spawn, "trust", "--revoke", "groove.toml", cwd=repo, home=tmp_path)
    assert unknown.returncode == 2 and "is not trusted" in unknown.stderr


def test_trusting_a_file_groove_cannot_load_is_refused_and_records_nothing(spawn, tmp_path):
    write(tmp_path / "groove.toml", "[serve]\nbnid = \"0.0.0.0:80\"\n")
    done = groove(spawn, "trust", cwd=tmp_path, home=tmp_path)
    assert done.returncode == 2 and "unknown key `serve.bnid`" in done.stderr
    assert not (tmp_path / "data" / "groove" / "trusted.json").exists()
    (tmp_path / "empty").mkdir()
    missing = groove(spawn, "trust", cwd=tmp_path / "empty", home=tmp_path)
    assert missing.returncode == 2 and "there is no" in missing.stderr


# --- which files are asked about, and for what -------------------------------------------------------

def test_the_same_file_named_by_config_or_groove_config_or_in_the_user_config_folder_is_used_without_asking(
        tmp_path, monkeypatch):
    text = '[embedding.openai]\nendpoint = "https://embeddings.example/v1"\n'
    here = write(Path.cwd() / "groove.toml", text)
    with pytest.raises(ConfigError, match="run `groove trust"):
        load_settings(None)
    assert load_settings(here).embedding.openai.endpoint == "https://embeddings.example/v1"
    monkeypatch.setenv("GROOVE_CONFIG", str(here))
    assert load_settings(None).embedding.openai.endpoint == "https://embeddings.example/v1"
    monkeypatch.delenv("GROOVE_CONFIG")
    here.unlink()
    write(user_config_file(), text)
    assert load_settings(None).embedding.openai.endpoint == "https://embeddings.example/v1"


def test_the_environment_may_send_note_text_away_while_a_local_file_chooses_only_search_settings(monkeypatch):
    write(Path.cwd() / "groove.toml", "[search]\ndefault_limit = 7\n\n[index]\nsplit_levels = 2\n")
    monkeypatch.setenv("GROOVE_EMBEDDING__OPENAI__ENDPOINT", "https://embeddings.example/v1")
    monkeypatch.setenv("GROOVE_SERVE__BIND", "0.0.0.0:3100")
    settings = load_settings(None)
    assert settings.search.default_limit == 7 and settings.serve.bind == "0.0.0.0:3100"


def test_a_local_kb_path_alone_applies_but_not_with_your_own_settings_sending_note_text_off_the_machine(
        tmp_path, monkeypatch):
    write(Path.cwd() / "groove.toml", f'kb_path = "{tmp_path}"\n')
    assert load_settings(None).kb_path[0].path == tmp_path.resolve()
    monkeypatch.setenv("GROOVE_EMBEDDING__BACKEND", "openai")
    monkeypatch.setenv("GROOVE_EMBEDDING__OPENAI__ENDPOINT", "https://my-gpu.example/v1")
    monkeypatch.setenv("GROOVE_EMBEDDING__OPENAI__MODEL", "m")
    monkeypatch.setenv("GROOVE_EMBEDDING__OPENAI__DIMENSION", "8")
    with pytest.raises(ConfigError) as err:
        load_settings(None)
    assert f'sets kb_path = "{tmp_path}" (its files would go to "https://my-gpu.example/v1", which your own ' \
           "settings name)" in str(err.value)


def test_a_local_kb_path_is_refused_while_your_own_settings_name_a_shared_store(tmp_path, monkeypatch):
    write(Path.cwd() / "groove.toml", f'kb_path = "{tmp_path}"\n')
    monkeypatch.setenv("GROOVE_STORE__URL", "postgresql://groove:hunter2@db.example/groove")
    with pytest.raises(ConfigError) as err:
        load_settings(None)
    assert "(its files would go to \"the store your settings name\"" in str(err.value)
    assert "hunter2" not in str(err.value)


def test_an_index_path_outside_the_files_own_folder_needs_trust_and_one_inside_it_does_not(tmp_path):
    project = Path.cwd()
    for inside in ("index.sqlite", ".groove/index.sqlite", str(project / "sub" / "i.sqlite")):
        write(project / "groove.toml", f'index_path = "{inside}"\n')
        assert load_settings(None).index_path == (project / inside).resolve(), inside
    for outside in ("../elsewhere.sqlite", str(tmp_path / "synced" / "i.sqlite"), "~/Dropbox/notes.sqlite"):
        write(project / "groove.toml", f'index_path = "{outside}"\n')
        with pytest.raises(ConfigError) as err:
            load_settings(None)
        assert (f'sets index_path = "{outside}" (a full copy of every note would be written there, outside this '
                "folder)") in str(err.value), outside


@pytest.mark.parametrize("text, said", [
    ('[serve]\nbind = "0.0.0.0:3100"\n', '[serve] bind = "0.0.0.0:3100" (the server would answer other machines)'),
    ('[serve.http]\ntoken = "hunter2hunter2hunter2"\n', "[serve.http] token = \"...\" (whoever wrote the file knows"),
    ('[serve.http]\ntoken_env = "USER"\n', '[serve.http] token_env = "USER" (the file would choose which variable'),
    ('[serve.http]\nallowed_origins = ["https://evil.example"]\n',
     '[serve.http] allowed_origins = ["https://evil.example"] (web pages from there could reach the server'),
    ('[serve.http]\nallowed_hosts = ["evil.example"]\n', '[serve.http] allowed_hosts = ["evil.example"]'),
    ('[store]\nurl = "postgresql://groove:hunter2@db.example/groove"\n',
     '[store] url = "..." (every note\'s text would be written into that database)'),
    ('[store]\nurl = "postgresql://localhost/groove"\n', '[store] url = "..." (every note\'s text would be written'),
    ('[best_practice]\npath_templates = ["~/.ssh/{target}"]\n',
     '[best_practice] path_templates = ["~/.ssh/{target}"] (an MCP client could read files there, outside the notes'),
])
def test_a_local_file_that_opens_the_server_to_others_is_refused_saying_what_it_would_do(text, said):
    write(Path.cwd() / "groove.toml", text)
    with pytest.raises(ConfigError) as err:
        load_settings(None)
    assert said in str(err.value) and "hunter2" not in str(err.value) and "\n" not in str(err.value)


def test_loopback_endpoints_and_binds_need_no_trust_and_names_that_only_look_local_do():
    safe = {"embedding": {"openai": {"endpoint": "http://127.0.0.1:8080/v1"}}, "serve": {"bind": "[::1]:3100"}}
    assert trust.risks(safe) == []
    assert trust.risks({"embedding": {"openai": {"endpoint": "http://localhost:11434/v1"}}}) == []
    for endpoint in ("http://localhost@evil.example/v1", "http://127.0.0.1.evil.example/v1", "http://0.0.0.0/v1",
                     "http://[::ffff:10.0.0.1]/v1", "https://gpu-box:8080/v1"):
        assert [r.key for r in trust.risks({"embedding": {"openai": {"endpoint": endpoint}}})] == \
            ["[embedding.openai] endpoint"], endpoint
    assert [r.key for r in trust.risks({"serve": {"bind": "192.0.2.1:3100"}})] == ["[serve] bind"]


def test_a_trusted_file_is_used_as_it_was_trusted_and_refused_once_a_byte_changes(tmp_path):
    config = write(Path.cwd() / "groove.toml", '[serve]\nbind = "0.0.0.0:3100"\n').resolve()
    store = trust.TrustStore()
    store.approve(config, trust.digest(config.read_bytes()))
    assert load_settings(None).serve.bind == "0.0.0.0:3100"
    config.write_text(config.read_text() + " ")
    with pytest.raises(ConfigError, match=r"it changed since it was trusted"):
        load_settings(None)
    assert store.path == Path(os.environ["XDG_DATA_HOME"]) / "groove" / "trusted.json"


def test_a_damaged_trust_record_is_an_error_naming_it(tmp_path):
    write(Path.cwd() / "groove.toml", '[serve]\nbind = "0.0.0.0:3100"\n')
    record = write(trust.default_store_path(), "{not json")
    with pytest.raises(ConfigError, match=f"the trust record {record} is damaged"):
        load_settings(None)
