"""Bad notes: a hostile folder (tests/support/hostile.py) indexes everything it can and reports the rest.

One `groove index` run (the real command line in a subprocess, with the
bag-of-words fake embedder: these tests are about files, not the model) over
the whole hostile corpus; then one test per case: the good notes are indexed,
and the bad file is skipped with its reason, or indexed with a warning saying
what was cut, in the JSON output and in the log, logged once. Faults that need
help (a file that vanishes between scan and read, an unreadable file or
folder) are injected through `groove.corpus.scan.open_fd` and `os.scandir`,
and tried for real with chmod when the tests do not run as root.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from groove.corpus import scan as scan_mod
from groove.store.sqlite import connection
from tests.support import hostile
from tests.support.common import ROOT, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, read_status
from tests.support.server import FAKE_GROOVE

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def run_cli(spawn, kb: Path, index: Path, *extra: str, fmt: str = "json", timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return spawn.run(FAKE_GROOVE + ["index", "--kb", str(kb), "--index", str(index), "--format", fmt, *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def db_rows(index: Path, sql: str, *args) -> list[tuple]:
    con = connection.connect_sync(index)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def log_events(stderr: str, event: str) -> list[dict]:
    """The structlog lines of one event (key=value or JSON), as dicts of their raw text."""
    return [{"line": line} for line in stderr.splitlines() if re.search(rf"\b{event}\b", line)]


@pytest.fixture(scope="module")
def hostile_run(spawn, tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    kb = hostile.build(base / "notes")
    index = base / "index.sqlite"
    config = base / "groove.toml"
    config.write_text(hostile.CONFIG, encoding="utf-8")
    done = run_cli(spawn, kb, index, "--config", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    return kb, index, json.loads(done.stdout), done.stderr


def _good_notes_are_indexed(index: Path) -> None:
    paths = {p for (p,) in db_rows(index, "SELECT path FROM documents")}
    for rel, word in hostile.GOOD_WORDS.items():
        assert rel in paths
        assert db_rows(index, "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id"
                              " WHERE d.path = ? AND c.content LIKE ?", rel, f"%{word}%") == [(1,)]


@pytest.mark.parametrize("case", hostile.CASES, ids=[c.name for c in hostile.CASES])
def test_each_hostile_file_is_reported_with_its_reason_and_the_rest_of_the_folder_indexes(hostile_run, case):
    kb, index, summary, stderr = hostile_run
    _good_notes_are_indexed(index)
    documents = {p for (p,) in db_rows(index, "SELECT path FROM documents")}
    skipped = {x["path"]: x["reason"] for x in summary["skipped_files"]}
    warned = {x["path"]: x["warnings"] for x in summary["note_warnings"]}
    shown = json.dumps(case.path)[1:-1]  # how the path appears inside a log line
    if case.outcome == "skipped":
        assert case.path not in documents
        assert hostile.matches(case, skipped[case.path]), skipped[case.path]
        lines = [e["line"] for e in log_events(stderr, "note_skipped") if shown in e["line"] or case.path in e["line"]]
        assert len(lines) == 1, lines  # logged once, with its reason
        stored = dict(db_rows(index, "SELECT path, reason FROM skipped"))
        assert stored[case.path] == skipped[case.path]  # `groove status` shows the same reason
    elif case.outcome == "warned":
        assert case.path in documents and case.path not in skipped
        assert any(hostile.matches(case, w) for w in warned[case.path]), warned[case.path]
        lines = [e["line"] for e in log_events(stderr, "note_warning") if case.path in e["line"]]
        assert len(lines) == len(warned[case.path])  # each warning logged once
    else:
        assert case.outcome == "indexed"
        assert case.path in documents and case.path not in skipped
    if case.word:
        hits = db_rows(index, "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id"
                              " WHERE d.path = ? AND c.content LIKE ?", case.path, f"%{case.word}%")
        assert hits == [(1,)], f"{case.word} is not searchable in {case.path}"


def test_the_text_output_of_a_second_run_lists_every_skipped_file_and_logs_none_again(spawn, hostile_run):
    kb, index, summary, _ = hostile_run
    again = run_cli(spawn, kb, index, "--config", str(kb.parent / "groove.toml"), fmt="text")
    assert again.returncode == 0, again.stderr[-2000:]
    for case in hostile.CASES:
        if case.outcome == "skipped":
            line = next(l for l in again.stdout.splitlines() if l.startswith(f"skipped {case.path}: "))
            assert hostile.matches(case, line), line
    assert log_events(again.stderr, "note_skipped") == []  # reported already, not logged every run


def test_a_note_of_long_words_under_the_size_cap_is_cut_at_the_chunk_cap_and_says_which_lines(hostile_run):
    kb, index, summary, _ = hostile_run
    (n_chunks, max_tokens), = db_rows(index, "SELECT count(*), max(token_count) FROM chunks c JOIN documents d"
                                             " ON d.id = c.doc_id WHERE d.path = 'long-words.md'")
    assert n_chunks == 1000 and max_tokens <= 256
    warning = next(x for x in summary["note_warnings"] if x["path"] == "long-words.md")["warnings"][0]
    last_line = len((kb / "long-words.md").read_text("utf-8").splitlines())
    assert re.search(rf"lines \d+-{last_line} \(\d+ bytes\) are not searchable", warning), warning


def test_huge_files_are_never_read(hostile_run, monkeypatch):
    """A 50 MB note is refused from its size alone: open is never called for it."""
    kb, index, summary, _ = hostile_run
    opened: list[str] = []
    real = scan_mod.open_fd
    monkeypatch.setattr(scan_mod, "open_fd", lambda p, f: (opened.append(str(p)), real(p, f))[1])
    result = scan_mod.scan(kb, scan_mod.Ignore(kb), 2_000_000)
    assert "too large" in result.skipped["huge.md"]
    for rel, info in result.files.items():
        if rel in ("good/alpha.md",):
            scan_mod.read_note(info, 2_000_000)
    assert not any(p.endswith("huge.md") for p in opened)


@pytest.mark.parametrize("case", hostile.REFUSING, ids=[c.name for c in hostile.REFUSING])
def test_an_ignore_file_that_is_not_a_regular_file_refuses_the_run_at_once_instead_of_hanging(spawn, tmp_path, case):
    kb = hostile.build(tmp_path / "notes", [case])
    done = run_cli(spawn, kb, tmp_path / "index.sqlite", timeout=120)
    assert done.returncode != 0
    # Under --format json the error is the only thing on stdout (no summary), and stderr says it too.
    assert json.loads(done.stdout)["exit_code"] == done.returncode
    assert re.search(case.reason, json.loads(done.stdout)["error"])
    assert re.search(case.reason, done.stderr), done.stderr[-2000:]


# --- faults injected in process ------------------------------------------------------------------

FAKE = BagOfWordsEmbedder()


def index(settings):
    # the report as `groove index --format json` prints it
    return anyio.run(lambda: index_once(settings, embedder=FAKE)).model_dump(mode="json")


def status(settings):
    return anyio.run(lambda: read_status(settings, embedder=FAKE))


def documents(settings) -> set[str]:
    return {p for (p,) in db_rows(settings.resolved_index_path(), "SELECT path FROM documents")}


def test_a_file_that_vanishes_between_scan_and_read_is_left_out_and_the_rest_indexes(kb, make_settings, monkeypatch):
    write(kb / "stays.md", "# Stays\n\nstaysword\n")
    write(kb / "vanishes.md", "# Vanishes\n\nvanishword\n")
    real = scan_mod.open_fd

    def vanishing(path, flags):
        if str(path).endswith("vanishes.md"):
            os.unlink(path)  # deleted after the scan saw it, before it is read
        return real(path, flags)

    monkeypatch.setattr(scan_mod, "open_fd", vanishing)
    summary = index(make_settings(kb))
    assert documents(make_settings(kb)) == {"stays.md"}
    assert summary["skipped_files"] == []  # gone is not a fault: nothing to report


def test_an_unreadable_file_is_skipped_with_the_reason_through_an_injected_open(kb, make_settings, monkeypatch):
    write(kb / "good.md", "# Good\n\ngoodword\n")
    write(kb / "locked.md", "# Locked\n\nlockedword\n")
    real = scan_mod.open_fd

    def denying(path, flags):
        if str(path).endswith("locked.md"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, flags)

    monkeypatch.setattr(scan_mod, "open_fd", denying)
    settings = make_settings(kb)
    summary = index(settings)
    assert documents(settings) == {"good.md"}
    assert summary["skipped_files"] == [{"path": "locked.md", "reason": "unreadable: Permission denied"}]


@pytest.mark.skipif(IS_ROOT, reason="root reads a chmod 000 file anyway; the injected-open test covers it")
def test_an_unreadable_file_is_skipped_with_the_reason_for_real(kb, make_settings):
    write(kb / "good.md", "# Good\n\ngoodword\n")
    locked = write(kb / "locked.md", "# Locked\n\nlockedword\n")
    locked.chmod(0)
    try:
        settings = make_settings(kb)
        summary = index(settings)
    finally:
        locked.chmod(0o644)
    assert documents(settings) == {"good.md"}
    assert summary["skipped_files"] == [{"path": "locked.md", "reason": "unreadable: Permission denied"}]


def _lock_folder(kb: Path, monkeypatch, real_chmod: bool):
    """Make kb/locked unlistable: chmod 000 (not root) or an injected os.scandir fault (root)."""
    folder = kb / "locked"
    if real_chmod:
        folder.chmod(0)
        return lambda: folder.chmod(0o755)
    real = os.scandir

    def denying(path="."):
        if Path(path).name == "locked":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(scan_mod.os, "scandir", denying)
    return lambda: monkeypatch.setattr(scan_mod.os, "scandir", real)


@pytest.mark.parametrize("real_chmod", [False, pytest.param(True, marks=pytest.mark.skipif(
    IS_ROOT, reason="root lists a chmod 000 folder anyway; the injected variant covers it"))],
    ids=["injected", "chmod"])
def test_an_unreadable_folder_keeps_its_indexed_notes_with_a_warning_until_readable_or_gone(
        kb, make_settings, monkeypatch, real_chmod):
    write(kb / "top.md", "# Top\n\ntopword\n")
    write(kb / "locked" / "inside.md", "# Inside\n\ninsideword\n")
    settings = make_settings(kb)
    index(settings)
    assert documents(settings) == {"top.md", "locked/inside.md"}

    unlock = _lock_folder(kb, monkeypatch, real_chmod)
    try:
        write(kb / "new.md", "# New\n\nnewword\n")
        summary = index(settings)
    finally:
        unlock()
    assert documents(settings) == {"top.md", "locked/inside.md", "new.md"}  # kept, not deleted
    assert summary["deleted"] == 0
    kept = {x["path"]: x["reason"] for x in summary["kept_unreadable"]}
    assert kept == {"locked/": "folder cannot be read: Permission denied; kept its 1 indexed note(s) "
                               "until it is readable again or gone"}
    assert {x.path for x in status(settings).skipped} == {"locked/"}

    summary = index(settings)  # readable again: the warning goes, the note is still there
    assert summary["kept_unreadable"] == [] and status(settings).skipped == []
    assert documents(settings) == {"top.md", "locked/inside.md", "new.md"}

    (kb / "locked" / "inside.md").unlink()
    (kb / "locked").rmdir()
    index(settings)  # gone: its notes go
    assert documents(settings) == {"top.md", "new.md"}


def test_a_utf16_note_is_decoded_and_a_broken_one_says_utf16(kb, make_settings):
    (kb / "le.md").write_bytes("# LE\n\nリトルエンディアン littleword\n".encode("utf-16"))
    (kb / "be.md").write_bytes(b"\xfe\xff" + "# BE\n\nbigword\n".encode("utf-16-be"))
    (kb / "broken.md").write_bytes(b"\xff\xfe" + "# x".encode("utf-16-le") + b"\x00\xd8")  # a lone surrogate
    settings = make_settings(kb)
    summary = index(settings)
    assert documents(settings) == {"le.md", "be.md"}
    (reason,) = [x["reason"] for x in summary["skipped_files"]]
    assert reason.startswith("UTF-16 text") and "save it as UTF-8" in reason
    contents = " ".join(c for (c,) in db_rows(settings.resolved_index_path(), "SELECT content FROM chunks"))
    assert "littleword" in contents and "bigword" in contents and "リトルエンディアン" in contents


# --- the daemon's watcher -------------------------------------------------------------------------

async def test_a_file_name_that_is_not_utf8_never_stops_the_watcher_and_is_reported(kb, make_settings):
    from tests.support.common import eventually
    from tests.support.daemon import fast, paths_for, running

    write(kb / "base.md", "# Base\n\nA note about basaltword.\n")
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        # watchfiles fails the whole batch holding this name ("Unable to decode path")
        (kb / os.fsdecode(b"bad\xff.md")).write_bytes(b"# Bad\n\nbadnameword\n")
        write(kb / "same-batch.md", "# Same batch\n\nsamebatchword\n")

        async def reported() -> bool:
            return ("bad\\xff.md",) in db_rows(daemon.index.path, "SELECT path FROM skipped")

        await eventually(reported, "the undecodable name to be reported as skipped")

        async def found(word: str, path: str):
            async def check() -> bool:
                return path in await paths_for(daemon, word, retriever="fts")
            return check

        await eventually(await found("samebatchword", "same-batch.md"), "the note of the lost batch to be indexed")
        write(kb / "later.md", "# Later\n\nlaterword\n")  # the watcher still runs
        await eventually(await found("laterword", "later.md"), "a note written afterwards to be indexed")
        assert daemon.watcher_state == "watching"


async def test_a_small_note_in_the_same_batch_as_a_huge_one_is_written_first(kb, make_settings):
    from groove.index import Index

    write(kb / "big.md", hostile.long_words_note(1_500_000))
    write(kb / "small.md", "# Small\n\nsmallword\n")
    settings = make_settings(kb)
    async with Index.open(settings, embedder=FAKE) as idx:
        await idx.reconcile(["big.md", "small.md"])
    ids = dict(db_rows(settings.resolved_index_path(), "SELECT path, id FROM documents"))
    assert ids["small.md"] < ids["big.md"]


# --- chunking cost -------------------------------------------------------------------------------

def test_a_note_of_long_words_under_the_size_cap_is_counted_about_once_not_nine_times():
    """The tokenizer sees each character of a 1.9 MB note of long words about once (9-14 times before)."""
    from groove.corpus.markdown import parse_note

    text = hostile.long_words_note(1_900_000)
    seen = {"calls": 0, "chars": 0}

    def counting(t: str) -> int:  # a tokenizer that is slow on long words: every character is read
        seen["calls"] += 1
        seen["chars"] += len(t)
        return len(t.split())

    note = parse_note(text, stem="x", max_tokens=512, count_tokens=counting, max_chunks=2000)
    made = int(re.search(r"the note makes (\d+) chunks", note.warnings[0]).group(1))
    assert len(note.chunks) == 2000 < made
    assert seen["chars"] <= len(text) * 1.5
    assert seen["calls"] <= made * 8  # a few counts per chunk, each of a short text
    assert all(c.token_count <= 512 for c in note.chunks)
    assert text.startswith("".join(c.content for c in note.chunks))  # the cut keeps the start, whole


def test_a_single_word_of_a_megabyte_is_cut_into_chunks_that_each_carry_their_size():
    from groove.corpus.markdown import parse_note

    word = "q" * 1_000_000
    note = parse_note(word + "\n", stem="x", max_tokens=256, count_tokens=lambda t: len(t.split()), max_chunks=5000)
    assert len(note.chunks) == -(-1_000_000 // 256)
    assert [c.token_count for c in note.chunks[:-1]] == [256] * (len(note.chunks) - 1)  # not "1 token"
    assert "".join(c.content for c in note.chunks) == word + "\n"


def test_ten_thousand_tiny_sections_are_merged_without_recounting_each_growing_chunk():
    """Merging tiny sections sums their sizes: the counter reads the note about twice, not once per merge."""
    from groove.corpus.markdown import parse_note

    text = "".join(f"# Heading {i}\n\nline {i}\n\n" for i in range(10_000))
    seen = {"chars": 0}

    def counting(t: str) -> int:
        seen["chars"] += len(t)
        return len(t.split())

    note = parse_note(text, stem="x", max_tokens=256, count_tokens=counting)
    assert seen["chars"] <= len(text) * 3
    assert all(c.token_count == len(c.content.split()) <= 256 for c in note.chunks)
    assert "".join(c.content for c in note.chunks) == text


def test_the_hostile_bench_prints_a_row_with_outcome_reason_and_peak_memory(spawn, tmp_path):
    out = spawn.run([sys.executable, "-m", "bench.hostile", "--case", "a FIFO named x.md",
                          "--json", str(tmp_path / "rows.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    rows = json.loads((tmp_path / "rows.json").read_text("utf-8"))["rows"]
    assert [r["case"] for r in rows] == ["baseline", "a FIFO named x.md"]
    assert rows[1]["outcome"] == "skipped" and rows[1]["reason"] == "not a regular file (a FIFO)"
    assert all(r["peak_rss_mb"] > 10 for r in rows)  # the child's own peak, read from wait4
    assert "| `x.md` | a FIFO named x.md | skipped | not a regular file (a FIFO) |" in out.stdout


def test_a_note_far_beyond_the_chunk_cap_is_parsed_only_as_far_as_the_cap_can_reach():
    """With a raised max_file_bytes, a huge note costs what its first max_chunks chunks cost."""
    from groove.corpus.markdown import parse_note

    text = "A line of an enormous note, over and over again.\n" * 400_000  # 20 MB
    seen = {"chars": 0}

    def counting(t: str) -> int:
        seen["chars"] += len(t)
        return len(t.split())

    note = parse_note(text, stem="x", max_tokens=64, count_tokens=counting, max_chunks=10)
    assert len(note.chunks) == 10
    assert seen["chars"] <= 10 * 64 * 16 * 3  # the head the cap can reach, not 20 MB
    (warning,) = note.warnings
    assert warning.startswith("cut: the note makes more than ") and "lines 61-400000 (19597060 bytes)" in warning  # 6 lines a chunk


def test_a_head_that_cannot_fill_the_chunk_cap_falls_back_to_the_whole_note():
    from groove.corpus.markdown import parse_note

    text = "word\n" + " " * 50_000 + "\nlast words here\n"  # whitespace: the head holds one chunk only
    note = parse_note(text, stem="x", max_tokens=8, min_chunk_tokens=0, count_tokens=lambda t: len(t.split()),
                      max_chunks=2)
    assert "".join(c.content for c in note.chunks) == text and note.warnings == ()


def test_a_folder_whose_name_is_not_utf8_is_reported_and_the_rest_indexes(kb, make_settings):
    write(kb / "top.md", "# Top\n\ntopword\n")
    bad = kb / os.fsdecode(b"dir\xfe")
    bad.mkdir()
    (bad / "inside.md").write_text("# Inside\n\ninsideword\n", encoding="utf-8")
    settings = make_settings(kb)
    summary = index(settings)
    assert documents(settings) == {"top.md"}
    assert summary["kept_unreadable"] == [{"path": "dir\\xfe/", "reason": "folder name is not valid UTF-8; rename "
                                           "the folder to index what it holds; nothing under it is indexed"}]
