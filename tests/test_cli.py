"""The command line as a person meets it: real `groove` subprocesses on real notes and index files.

serve refuses without a folder; errors under --format json; ISO-8601 times; one result shape for
`index` and the MCP `reindex`; help on every flag; progress and the drained line; and the
local endpoint: `search`, `related` and `status` ask a running daemon instead of loading the model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pty
import re
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from groove.cli import build_parser
from groove.serve.process.local import socket_path
from groove.sync.report import IndexReport
from tests.support.common import GROOVE, note, write
from tests.support.server import free_port, server_env

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
NOTES = {
    "cooking/teriyaki.md": note("Chicken teriyaki", "Soy sauce, mirin and sugar glaze the chicken thighs in a hot pan."),
    "garden/tomatoes.md": note("Growing tomatoes", "Tomato plants want full sun, deep watering and a stake to climb."),
    "work/retrieval.md": note("Hybrid retrieval", "Fusing full-text search with vector search improves recall on notes."),
}


def groove(spawn, *argv: str, cwd: Path, env: dict[str, str] | None = None, stderr: Any = subprocess.PIPE,
           timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return spawn.run([*GROOVE, *argv], cwd=cwd, env=env or server_env(cwd), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=timeout)


def make_notes(root: Path) -> Path:
    kb = root / "notes"
    for rel, text in NOTES.items():
        write(kb / rel, text)
    return kb


def parse_iso(text: str) -> dt.datetime:
    assert ISO.match(text), f"not ISO-8601 UTC: {text!r}"
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)


# --- serve needs a folder (issue 12, item 4) ------------------------------------------------------

def test_serve_without_a_notes_folder_refuses_and_names_the_examples_flag(spawn, tmp_path):
    done = groove(spawn, "serve", "--transport", "http", "--bind", f"127.0.0.1:{free_port()}",
                  "--index", str(tmp_path / "i.sqlite"), cwd=tmp_path, timeout=60)
    index = groove(spawn, "index", "--index", str(tmp_path / "i.sqlite"), cwd=tmp_path, timeout=60)
    assert done.returncode == index.returncode == 2, done.stderr  # a configuration error, as index says it
    assert "no notes folder configured" in done.stderr and "groove serve --examples" in done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "i.sqlite").exists()


def test_serve_refuses_examples_together_with_a_folder_of_ones_own(spawn, tmp_path):
    done = groove(spawn, "serve", "--examples", "--kb", str(make_notes(tmp_path)), cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "pass one of them" in done.stderr


def test_make_serve_passes_examples_when_no_folder_is_given_and_the_folder_when_one_is(spawn):
    from tests.support.common import ROOT

    dry = spawn.run(["make", "-n", "serve"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert " serve --examples --transport http" in dry
    own = spawn.run(["make", "-n", "serve", "KB=/somewhere/notes"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert ' serve --kb "/somewhere/notes" --transport http' in own and "--examples" not in own


def test_make_serve_installs_only_what_serving_needs_and_make_test_adds_the_extras_in_either_order(spawn, tmp_path):
    from tests.support.common import ROOT

    venv = tmp_path / "venv"

    def dry(target: str) -> str:
        return spawn.run(["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout

    serve = dry("serve")
    assert "pip install --quiet -c constraints.txt -e .\n" in serve and "[test" not in serve
    for target in ("test", "test-fast", "bench"):
        assert "pip install --quiet -c constraints.txt -e '.[test,bench,lint]'" in dry(target)
    assert f"touch {venv / '.installed-serve'} {venv / '.installed-test'}" in dry("test")  # a superset: both stamps
    venv.mkdir()
    (venv / ".installed-serve").touch()  # after `make serve`: make test still installs the extras
    assert "pip install" not in dry("serve") and "[test,bench,lint]" in dry("test")
    (venv / ".installed-serve").unlink()
    (venv / ".installed-test").touch()  # after `make test` alone: make serve installs what it needs (a no-op)
    assert "-e .\n" in dry("serve") and "pip install" not in dry("test")


# --- consistent output (item 9) -------------------------------------------------------------------

def test_every_flag_of_every_command_has_help_text():
    seen: list[str] = []
    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, where: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{where} {name}")
                continue
            if isinstance(action, argparse._HelpAction):
                continue
            label = f"{where} {'/'.join(action.option_strings) or action.dest}"
            seen.append(label)
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(label)

    walk(build_parser(), "groove")
    assert "groove index --format" in seen and "groove eval --mmr-lambda" in seen and "groove search QUERY" not in missing
    assert len(seen) > 60
    assert not missing, f"flags without help text: {missing}"


def test_an_error_under_format_json_is_json_on_stdout_with_the_exit_code(spawn, tmp_path):
    kb = make_notes(tmp_path)
    done = groove(spawn, "status", "--kb", str(kb), "--index", str(tmp_path / "none.sqlite"), "--format", "json",
                  cwd=tmp_path, timeout=60)
    assert done.returncode == 1
    error = json.loads(done.stdout)
    assert error == {"error": f"no index at {tmp_path / 'none.sqlite'}; run `groove index` first", "exit_code": 1}
    assert "groove: error: no index at" in done.stderr

    text = groove(spawn, "status", "--kb", str(kb), "--index", str(tmp_path / "none.sqlite"), cwd=tmp_path, timeout=60)
    assert text.returncode == 1 and text.stdout == "" and "run `groove index` first" in text.stderr


def test_a_command_line_argparse_cannot_read_is_a_json_error_with_exit_2_under_format_json(spawn, tmp_path):
    done = groove(spawn, "search", "tomatoes", "--format", "json", "--limit", "many", cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    error = json.loads(done.stdout)
    assert error["exit_code"] == 2 and "--limit" in error["error"] and "invalid int value" in error["error"]
    assert done.stderr.startswith("usage: groove search")

    plain = groove(spawn, "search", "tomatoes", "--limit", "many", cwd=tmp_path, timeout=60)
    assert plain.returncode == 2 and plain.stdout == "" and "groove: error: argument --limit" in plain.stderr


def test_eval_of_a_missing_golden_file_says_the_file_does_not_exist(spawn, tmp_path):
    done = groove(spawn, "eval", "missing.yaml", "--kb", str(make_notes(tmp_path)), "--index", str(tmp_path / "i.sqlite"),
                  cwd=tmp_path, timeout=60)
    assert done.returncode == 1
    assert "groove: error: missing.yaml does not exist: the golden set is missing" in done.stderr


def test_index_shows_progress_the_model_line_and_the_drained_line_on_stderr_and_a_clean_summary(spawn, tmp_path):
    kb = make_notes(tmp_path)
    index = tmp_path / "i.sqlite"
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    done = groove(spawn, "index", "--kb", str(kb), "--index", str(index), cwd=tmp_path)
    after = dt.datetime.now(dt.timezone.utc)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "groove: loading model intfloat/multilingual-e5-small ..." in err
    assert re.search(r"^scanning notes: 3/3, [\d.,]+/s$", err, re.M), err
    assert re.search(r"^embedding chunks: 3/3, [\d.,]+/s$", err, re.M), err
    assert "groove: embedding queue drained: every note is searchable by meaning" in err
    assert err.index("loading model") < err.index("scanning notes") < err.index("embedding chunks") < err.index("drained")
    lines = done.stdout.splitlines()  # the summary alone: no log line mixed in
    assert len(lines) == 3, done.stdout
    assert lines[0] == f"indexed {kb.resolve()} -> {index}"
    assert lines[1] == "files: 3 added, 0 changed, 0 renamed, 0 deleted, 0 unchanged, 0 skipped"
    finished = re.search(r"finished (\S+)$", lines[2])
    assert lines[2].startswith("chunks: 3 written, 3 embedded; 0 pending;") and finished
    assert before <= parse_iso(finished.group(1)) <= after

    status = groove(spawn, "status", "--kb", str(kb), "--index", str(index), "--format", "json", "--no-daemon", cwd=tmp_path)
    st = json.loads(status.stdout)
    assert before <= parse_iso(st["last_indexed_at"]) <= after
    text = groove(spawn, "status", "--kb", str(kb), "--index", str(index), "--no-daemon", cwd=tmp_path)
    assert f"last indexed: {st['last_indexed_at']}" in text.stdout


def test_on_a_terminal_index_draws_bars_with_a_rate_and_the_time_left(spawn, tmp_path):
    kb = make_notes(tmp_path)
    for i in range(12):
        write(kb / f"more/n{i}.md", note(f"Note {i}", f"Paragraph {i} about lanterns, rivers and harbours number {i}."))
    master, slave = pty.openpty()
    captured = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            captured.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        done = groove(spawn, "index", "--kb", str(kb), "--index", str(tmp_path / "i.sqlite"), cwd=tmp_path,
                      env={**server_env(tmp_path), "COLUMNS": "140"}, stderr=slave)
    finally:
        os.close(slave)
    reader.join(10)
    os.close(master)
    screen = captured.decode("utf-8", errors="replace")
    assert done.returncode == 0, screen
    assert "scanning notes" in screen and "embedding chunks" in screen
    assert "15/15" in screen and "ETA" in screen and re.search(r"[\d.]+/s", screen), screen
    assert "━" in screen  # rich's bar, not a hand-drawn one
    assert done.stdout.startswith("indexed ")


# --- a daemon on the same index (items 5, 6 and 9) ------------------------------------------------

@pytest.fixture(scope="module")
def daemon(spawn, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("daemon")
    kb = make_notes(root)
    index = root / "index.sqlite"
    server = spawn.server(kb, index, root)
    try:
        server.wait_healthy()
        server.wait_indexed(len(NOTES))
        yield server, kb, index, root
    finally:
        server.terminate()


def test_search_asks_the_running_daemon_and_loads_no_model(spawn, daemon):
    server, kb, index, root = daemon
    # A model that could not even open this index: in process this command must fail, so an answer is the daemon's.
    env = {**server_env(root), "GROOVE_EMBEDDING__MODEL": "all-MiniLM-L6-v2"}
    done = groove(spawn, "search", "glaze the chicken", "--kb", str(kb), "--index", str(index), "--format", "json",
                  cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"][0]["path"] == "cooking/teriyaki.md"
    assert f"asked the running groove serve (pid {server.proc.pid})" in done.stderr
    assert "loading model" not in done.stderr

    alone = groove(spawn, "search", "glaze the chicken", "--kb", str(kb), "--index", str(index), "--no-daemon",
                   cwd=root, env=env)
    assert alone.returncode == 1 and "all-MiniLM-L6-v2" in alone.stderr and "loading model" in alone.stderr


# `groove search --format json` and `groove related --format json` are script interfaces: their keys are
# pinned here, asked of the running service and answered in process alike (docs/search.md).
# off_topic joined in issue 21 (a deliberate addition, docs/search.md).
SEARCH_KEYS = {"results", "low_confidence", "off_topic", "filter_applied", "pending_chunks", "vectors_degraded"}
HIT_KEYS = {"chunk_id", "doc_id", "path", "title", "heading", "level", "context", "content", "tags", "date",
            "start_line", "end_line", "ordinal", "token_count", "score", "position", "fts_rank", "vec_rank",
            "expanded_from", "match_spans"}
RELATED_KEYS = {"source", "related", "bounded_by", "elapsed_ms", "params"}
RELATED_NOTE_KEYS = {"path", "title", "score", "depth", "via", "chunk"}
PASSAGE_KEYS = {"chunk_id", "heading", "start_line", "end_line", "similarity"}


def test_the_json_of_search_and_related_keeps_its_keys_from_the_service_and_in_process(spawn, daemon):
    server, kb, index, root = daemon
    for how in ((), ("--no-daemon",)):
        done = groove(spawn, "search", "glaze the chicken", "--kb", str(kb), "--index", str(index), "--format", "json",
                      *how, cwd=root)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert set(answer) == SEARCH_KEYS, (how, set(answer) ^ SEARCH_KEYS)
        assert answer["results"] and all(set(hit) == HIT_KEYS for hit in answer["results"]), how
        assert isinstance(answer["results"][0]["chunk_id"], int) and isinstance(answer["results"][0]["match_spans"], list)
        explained = json.loads(groove(spawn, "search", "glaze the chicken", "--kb", str(kb), "--index", str(index), "--format",
                                      "json", "--explain", *how, cwd=root).stdout)
        assert set(explained) == SEARCH_KEYS | {"explain"} and "timings_ms" in explained["explain"], how

        found = groove(spawn, "related", str(kb / "work/retrieval.md"), "--kb", str(kb), "--index", str(index), "--format",
                       "json", *how, cwd=root)
        assert found.returncode == 0, found.stderr
        related = json.loads(found.stdout)
        assert set(related) == RELATED_KEYS and set(related["source"]) == {"path", "title"}, how
        assert related["related"] and all(set(n) == RELATED_NOTE_KEYS and set(n["chunk"]) == PASSAGE_KEYS
                                          for n in related["related"]), how


# `groove eval --format json` and `groove tune --format json` are script interfaces too (docs/evaluation.md).
EVAL_KEYS = {"metrics", "ks", "confidence", "answerable", "unanswerable", "queries", "count", "retriever",
             "index_path", "source", "leaks", "history", "fingerprint"}
EVAL_ROW_KEYS = {"id", "query", "unanswerable", "top", "low_confidence", "off_topic", "off_topic_evidence"}
EVAL_SCORE_KEYS = {"ranks", "recall@10", "rr", "ndcg@10"}
HISTORY_KEYS = {"status", "exit_code", "baseline", "deltas", "regressions", "differs", "path", "recorded"}
TUNE_KEYS = {"metric", "settings_tried", "cv", "current", "best", "recommend", "block", "source", "index_path",
             "count", "skipped", "limit", "refine_stages_ignored", "off_topic"}
OFF_TOPIC_TUNING_KEYS = {"answerable", "unanswerable", "current_offset", "offset", "now", "held_out", "recommend",
                         "reason", "block"}
GOLDEN = """queries:
  - id: glaze
    query: glaze the chicken
    expected: [cooking/teriyaki.md]
  - id: sun
    query: plants that want full sun
    expected: [garden/tomatoes.md]
  - id: nowhere
    query: the tax rules for a sailing boat
    expected: []
"""


def test_the_json_of_eval_and_tune_keeps_its_keys(spawn, daemon):
    server, kb, index, root = daemon
    golden = write(root / "golden.yaml", GOLDEN)
    done = groove(spawn, "eval", str(golden), "--kb", str(kb), "--index", str(index), "--format", "json", "--no-record",
                  cwd=root)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == EVAL_KEYS, set(report) ^ EVAL_KEYS
    rows = {row["id"]: row for row in report["queries"]}
    assert set(rows["glaze"]) == EVAL_ROW_KEYS | EVAL_SCORE_KEYS and rows["glaze"]["ranks"] == [1]
    assert set(rows["nowhere"]) == EVAL_ROW_KEYS  # an unanswerable query has no ranks or scores
    assert (report["answerable"], report["unanswerable"], report["count"]) == (2, 1, 3)
    assert set(report["confidence"]) == {"flagged_share", "top1_flagged", "top1_unflagged"}
    assert set(report["history"]) == HISTORY_KEYS and report["history"]["status"] == "no-history"
    assert {"recall@1", "mrr", "ndcg@10", "off_topic_answerable", "off_topic_unanswerable"} <= set(report["metrics"])

    tuned = groove(spawn, "tune", str(golden), "--kb", str(kb), "--index", str(index), "--format", "json", cwd=root)
    assert tuned.returncode == 0, tuned.stderr
    result = json.loads(tuned.stdout)
    assert set(result) == TUNE_KEYS, set(result) ^ TUNE_KEYS
    assert {"best", "heldout", "gain", "interval", "wins", "losses", "sign_p"} <= set(result["cv"])
    # the unanswerable query places the off_topic line (too few to recommend one); it is not a skipped query
    assert result["skipped"] == [] and result["count"] == 2
    assert set(result["off_topic"]) == OFF_TOPIC_TUNING_KEYS
    assert (result["off_topic"]["answerable"], result["off_topic"]["unanswerable"]) == (2, 1)
    assert result["off_topic"]["recommend"] is False and "at least 10 answerable" in result["off_topic"]["reason"]


def test_the_text_of_a_search_is_the_one_rendering_mcp_shows_with_passages_cut_for_a_terminal(spawn, daemon):
    from groove.search.answers import search_answer, search_text

    server, kb, index, root = daemon
    as_json = json.loads(groove(spawn, "search", "glaze the chicken", "--kb", str(kb), "--index", str(index), "--format", "json",
                                cwd=root).stdout)
    text = groove(spawn, "search", "glaze the chicken", "--kb", str(kb), "--index", str(index), cwd=root).stdout
    assert text == search_text(search_answer(as_json, include_ids=True), passage_chars=200) + "\n"
    assert text.startswith(f"{len(as_json['results'])} passage(s) from ") and "[1] cooking/teriyaki.md" in text


def test_status_from_the_daemon_has_its_live_fields_and_iso_times(spawn, daemon):
    server, kb, index, root = daemon
    done = groove(spawn, "status", "--kb", str(kb), "--index", str(index), "--format", "json", cwd=root)
    st = json.loads(done.stdout)
    assert st["documents"] == 3 and st["watcher"] == "watching" and st["startup_reconcile_done"] is True
    assert ISO.match(st["last_indexed_at"]) and ISO.match(st["last_reconcile"]["at"])
    text = groove(spawn, "status", "--kb", str(kb), "--index", str(index), cwd=root)
    assert f"served by:    groove serve, pid {server.proc.pid}, up " in text.stdout and "(watcher: watching)" in text.stdout
    assert f"last indexed: {st['last_indexed_at']}" in text.stdout


def test_related_asks_the_daemon_and_an_unknown_note_names_no_mcp_tool(spawn, daemon):
    server, kb, index, root = daemon
    found = groove(spawn, "related", str(kb / "work/retrieval.md"), "--kb", str(kb), "--index", str(index), "--format", "json",
                   cwd=root)
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)
    assert result["source"]["path"] == "work/retrieval.md" and len(result["related"]) == 2
    assert f"(pid {server.proc.pid})" in found.stderr

    for extra in ((), ("--no-daemon",)):
        bad = groove(spawn, "related", "nope.md", "--kb", str(kb), "--index", str(index), *extra, cwd=root)
        assert bad.returncode == 1, bad.stderr
        assert "groove: error: no indexed note at 'nope.md'; give the note's path relative to the notes folder" in bad.stderr
        assert not re.search(r"list_documents|get_document|\btool", bad.stderr)
        as_json = groove(spawn, "related", "nope.md", "--kb", str(kb), "--index", str(index), "--format", "json", *extra,
                         cwd=root)
        assert as_json.returncode == 1 and json.loads(as_json.stdout)["error"].startswith("no indexed note at 'nope.md'")


def test_index_and_the_mcp_reindex_report_the_same_fields(spawn, daemon):
    server, kb, index, root = daemon

    async def reindex() -> dict[str, Any]:
        async with Client(server.url) as client:
            return (await client.call_tool("reindex", {})).structured_content

    over_mcp = anyio.run(reindex)
    other = root / "other.sqlite"  # the daemon owns its index's writer: `groove index` writes another one
    on_cli = json.loads(groove(spawn, "index", "--kb", str(kb), "--index", str(other), "--format", "json", cwd=root).stdout)
    assert set(over_mcp) == set(on_cli) == set(IndexReport.model_fields)
    assert (over_mcp["unchanged"], over_mcp["added"], over_mcp["chunks_embedded"]) == (3, 0, 0)
    assert (on_cli["added"], on_cli["chunks_embedded"], on_cli["pending_chunks"]) == (3, 3, 0)
    assert over_mcp["index_path"] == str(index) and on_cli["index_path"] == str(other)
    assert ISO.match(over_mcp["finished_at"]) and ISO.match(on_cli["finished_at"])


def test_the_daemon_logs_once_when_every_note_is_searchable_by_meaning(daemon):
    server, *_ = daemon
    log = server.log()
    assert log.count("embedding queue drained: every note is searchable by meaning") == 1, log[-2000:]
    assert "documents=3" in log.split("embedding queue drained")[1].splitlines()[0]


def test_the_local_endpoint_is_private_to_its_user_and_answers_one_json_line(daemon):
    server, kb, index, root = daemon
    path = socket_path(index)
    assert path == index.with_name("index.sqlite.sock")
    st = path.lstat()
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(b'{"op": "drop_tables"}\n')
        answer = json.loads(sock.makefile("rb").readline())
    assert answer["ok"] is False and answer["exit_code"] == 2 and "search, related, status" in answer["error"]
    assert answer["pid"] == server.proc.pid and answer["index_path"] == str(index)


def test_after_the_daemon_stops_its_socket_is_gone_and_the_cli_loads_the_model_itself(spawn, tmp_path):
    kb = make_notes(tmp_path)
    index = tmp_path / "index.sqlite"
    server = spawn.server(kb, index, tmp_path)
    try:
        server.wait_healthy()
        server.wait_indexed(len(NOTES))
        assert socket_path(index).exists()
    finally:
        rc, _ = server.terminate()
    assert rc == 0
    assert not socket_path(index).exists()

    # A socket file left by a daemon that was killed (nobody listens): the CLI falls back, it does not fail.
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(socket_path(index)))
    stale.close()
    done = groove(spawn, "search", "tomato plants", "--kb", str(kb), "--index", str(index), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "groove: loading model intfloat/multilingual-e5-small (no groove serve answers for this index" in done.stderr
    assert json.loads(done.stdout)["results"][0]["path"] == "garden/tomatoes.md"
    # A full-text search embeds nothing: in process it loads no model and says none (issue 37, point 7).
    words = groove(spawn, "search", "tomato plants", "--retriever", "fts", "--kb", str(kb), "--index", str(index),
                   "--format", "json", cwd=tmp_path)
    assert words.returncode == 0 and "loading model" not in words.stderr, words.stderr
    assert json.loads(words.stdout)["results"][0]["path"] == "garden/tomatoes.md"


def test_a_socket_path_too_long_for_the_platform_moves_to_a_private_temp_folder(tmp_path):
    deep = tmp_path / ("x" * 60) / ("y" * 60) / "index.sqlite"
    path = socket_path(deep)
    assert len(os.fsencode(path)) <= 100 and path.parent.name == f"groove-{os.getuid()}"
    assert socket_path(deep) == path and socket_path(deep.with_name("other.sqlite")) != path


def test_the_temp_folder_of_long_socket_paths_is_made_private_and_a_shared_one_is_refused(tmp_path, monkeypatch):
    import tempfile

    from groove.serve.process.local import _claim

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = socket_path(tmp_path / ("x" * 60) / ("y" * 60) / "index.sqlite")
    assert _claim(path) and path.parent.stat().st_mode & 0o777 == 0o700
    path.parent.chmod(0o755)  # made by someone else's mkdir, or a umask: others could reach the socket
    with pytest.raises(OSError, match="is not a private folder of this user"):
        _claim(path)
    beside = tmp_path / "data" / "stores" / "postgresql-0123"  # a shared store's local name: its folder is made
    assert _claim(socket_path(beside)) and beside.parent.is_dir()


# --- a new user's first hour (issue 23, item 6) ---------------------------------------------------

def test_examples_means_the_shipped_example_notes_for_every_read_command(spawn, tmp_path):
    from groove.cli import EXAMPLE_NOTES
    from groove.serve.process.main import EXAMPLE_NOTES as SERVED
    from tests.support.common import EXAMPLES

    assert EXAMPLE_NOTES == SERVED == EXAMPLES.resolve()  # the same folder `groove serve --examples` serves
    index = str(tmp_path / "i.sqlite")
    built = groove(spawn, "index", "--examples", "--index", index, "--format", "json", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["kb_path"] == str(EXAMPLES.resolve())
    found = groove(spawn, "search", "--examples", "WAL", "--index", index, "--format", "json", "--no-daemon", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["path"] == "reference/sqlite-wal.md"
    status = groove(spawn, "status", "--examples", "--index", index, "--format", "json", "--no-daemon", cwd=tmp_path)
    assert status.returncode == 0 and json.loads(status.stdout)["documents"] == 13, status.stderr
    for command in ("search", "status", "doctor"):
        argv = [command, "--examples", "--kb", str(tmp_path)] + (["WAL"] if command == "search" else [])
        both = groove(spawn, *argv, cwd=tmp_path, timeout=60)
        assert both.returncode == 2 and "--examples means the shipped example notes" in both.stderr, (command, both.stderr)


@pytest.mark.parametrize("argv,wrong,right", [
    (["search", "--limt", "3", "WAL"], "--limt", "--limit"),
    (["search", "WAL", "--lim", "3"], "--lim", "--limit"),  # no abbreviations: a new flag cannot change their meaning
    (["related", "--depht=2", "a.md"], "--depht", "--depth"),
    (["index", "--rebuidl"], "--rebuidl", "--rebuild"),
    (["eval", "g.yaml", "--max-querys", "3"], "--max-querys", "--max-queries"),
    (["doctor", "--fxi"], "--fxi", "--fix"),
    (["serve", "--transprot", "http"], "--transprot", "--transport"),
    (["service", "install", "--dryrun"], "--dryrun", "--dry-run"),
])
def test_an_unknown_flag_is_refused_with_exit_2_naming_the_closest_known_flag(spawn, tmp_path, argv, wrong, right):
    done = groove(spawn, *argv, cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"groove: error: unknown option {wrong}: did you mean {right}?" in done.stderr
    assert "loading model" not in done.stderr and done.stdout == ""
    as_json = groove(spawn, *argv, "--format", "json", cwd=tmp_path, timeout=60)
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["exit_code"] == 2


def test_kb_given_twice_for_a_folder_and_one_inside_it_is_refused_before_anything_is_indexed(spawn, tmp_path):
    kb = make_notes(tmp_path)
    for argv in (["search", "tea"], ["index"], ["serve", "--transport", "stdio"]):
        done = groove(spawn, *argv, "--kb", str(kb), "--kb", str(tmp_path), cwd=tmp_path, timeout=60)
        assert done.returncode == 2, (argv, done.stderr)
        assert f"the notes folder {kb} is inside the notes folder {tmp_path}" in done.stderr, done.stderr
        assert "indexed twice" in done.stderr
    assert not (tmp_path / "data").exists()  # nothing indexed


def test_service_install_with_kb_writes_a_unit_that_serves_that_folder(spawn, tmp_path):
    kb = make_notes(tmp_path)
    env = {**server_env(tmp_path), "HOME": str(tmp_path / "home")}
    done = groove(spawn, "service", "install", "--platform", "linux", "--dry-run", "--kb", "notes",
                  "--index", "i.sqlite", cwd=tmp_path, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    [exec_start] = [line for line in done.stdout.splitlines() if line.startswith("ExecStart=")]
    assert exec_start.endswith(f" serve --transport http --kb {kb} --index {tmp_path / 'i.sqlite'}")
    assert "--config" not in exec_start  # no config file here, and none needed with --kb

    missing = groove(spawn, "service", "install", "--platform", "linux", "--dry-run", "--kb", "gone", cwd=tmp_path,
                     env=env, timeout=60)
    assert missing.returncode == 2 and "the notes folder" in missing.stderr and "(--kb) does not exist" in missing.stderr


def test_after_a_note_is_added_and_deleted_under_the_daemon_doctor_finds_no_unused_vector(spawn, tmp_path):
    import time

    kb = make_notes(tmp_path)
    index = tmp_path / "index.sqlite"
    server = spawn.server(kb, index, tmp_path)
    try:
        server.wait_healthy()
        server.wait_indexed(len(NOTES))
        write(kb / "drafts" / "tea.md", note("Green tea", "Steep sencha at seventy degrees for a minute, no longer."))
        assert server.wait_indexed(len(NOTES) + 1)["pending_chunks"] == 0  # its vector is stored
        (kb / "drafts" / "tea.md").unlink()
        server.wait_indexed(len(NOTES))
        deadline = time.monotonic() + 20  # the write and what follows it, with no full reconcile in between
        while True:
            done = groove(spawn, "doctor", "--kb", str(kb), "--index", str(index), "--format", "json", cwd=tmp_path)
            found = {f["check"]: f for f in json.loads(done.stdout)["findings"]}
            if "vectors_unused" not in found or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert "vectors_unused" not in found, found["vectors_unused"]
        assert done.returncode == 0, done.stdout
    finally:
        server.terminate()


# What `groove --help`, a usage error and a command the running service answers import (issue 37, point 7): the
# CLI's own modules and the settings, not the evaluation code, numpy, the installer or the search pipeline, which
# the commands that need them import when they run (0.46 s of CPU for --help before, 0.25 s after, here).
HEAVY = ("numpy", "anyio", "groove.evaluate.tune", "groove.evaluate.report", "groove.autostart.install",
         "groove.search.pipeline", "groove.search.request", "groove.index", "groove.embed.embedder")


def test_the_command_line_starts_without_the_modules_only_some_commands_need(spawn, tmp_path):
    probe = ("import sys\nfrom groove.cli import build_parser\nbuild_parser()\n"
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n")
    done = spawn.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    helped = spawn.run([sys.executable, "-m", "groove.cli", "--help"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert helped.returncode == 0 and "usage: groove" in helped.stdout
