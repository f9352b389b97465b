"""Schema migrations (issue 20 point 9): each step of `schema.MIGRATIONS` runs in its own transaction, so a step
that fails halfway is rolled back whole: the index stays at the version before it, with its tables and rows as
they were, and one line says which step failed, why, and what to do. The next open migrates it. Real SQLite
files; faults are injected steps (monkeypatch) or a real step whose SQL function raises."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from groove.store.sqlite import connection, schema
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once


def new_index(path: Path) -> None:
    """An index at the current schema with one note, one chunk (with a vector record) and its full-text rows."""
    con = connection.connect_sync(path)
    schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    con.execute("INSERT INTO documents(id, path, title, size, mtime_ns, hash, indexed_at) VALUES (1, 'a.md', 'a', 1, 1, 'h', 0)")
    con.execute("INSERT INTO embeddings(id, hash, created_at) VALUES (3, 'x', 0)")
    con.execute("INSERT INTO chunks(id, doc_id, ordinal, heading, level, context, content, start_line, end_line, hash,"
                " embedding_id, queued_at) VALUES (7, 1, 0, 'Ranking', 2, '', 'Rerankers reorder the candidates 首都', 1, 2,"
                " 'x', 3, 0)")
    con.close()


def without_quality_scores(con) -> None:
    """What an index before schema 8 looked like: chunks without their quality scores (decision 0020)."""
    con.execute("DROP INDEX chunks_quality")
    con.execute("ALTER TABLE chunks DROP COLUMN quality")
    con.execute("ALTER TABLE chunks DROP COLUMN text_quality")


def as_schema_4(path: Path) -> None:
    """What an index of schema 4 looked like: no word table and no triggers filling it."""
    con = connection.connect_sync(path)
    without_quality_scores(con)
    for name in ("chunks_words_ai", "chunks_words_ad", "chunks_words_au"):
        con.execute(f"DROP TRIGGER {name}")
    con.execute("DROP TABLE fts_words")
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    con.close()


def snapshot(path: Path) -> dict:
    """Everything a step could change: the schema (every table, index and trigger with its SQL), meta and the rows."""
    con = connection.connect_sync(path, readonly=True)
    try:
        return {
            "schema": sorted(con.execute("SELECT type, name, sql FROM sqlite_master").fetchall(), key=str),
            "meta": dict(con.execute("SELECT key, value FROM meta").fetchall()),
            "documents": con.execute("SELECT * FROM documents").fetchall(),
            "chunks": con.execute("SELECT * FROM chunks").fetchall(),
            "embeddings": con.execute("SELECT * FROM embeddings").fetchall(),
            "trigram": con.execute("SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH '\"candidates\"'").fetchall(),
        }
    finally:
        con.close()


def version(path: Path) -> int:
    con = connection.connect_sync(path, readonly=True)
    try:
        return int(schema.get_meta_sync(con, "schema_version"))
    finally:
        con.close()


def has_table(path: Path, name: str) -> bool:
    con = connection.connect_sync(path, readonly=True)
    try:
        return schema._has_table(con, name)
    finally:
        con.close()


def open_index(path: Path) -> None:
    """What a writer does as it opens the index (`reads.prepare_index`): create or check it, migrating."""
    con = connection.connect_sync(path)
    try:
        schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    finally:
        con.close()


def fault(con) -> None:
    raise RuntimeError("the disk controller caught fire")


@pytest.fixture
def a_next_version(monkeypatch):
    """`a_next_version(sql)`: from now on groove is one schema newer, reached by the step `sql` (called again:
    the step replaced, e.g. fixed). Returns the version the step starts from (this groove's)."""
    current = schema.SCHEMA_VERSION

    def step(sql: str) -> int:
        monkeypatch.setattr(schema, "SCHEMA_VERSION", current + 1)
        monkeypatch.setitem(schema.MIGRATIONS, current, sql)
        return current
    return step


# One real DDL statement, a write to the rows, then the step fails: in SQL, or in Python (a SQL function raising).
HALFWAY = {
    "a statement that fails": "INSERT INTO no_such_table VALUES (1);",
    "python code that raises": "SELECT groove_test_fault();",
}


@pytest.mark.parametrize("how", list(HALFWAY))
def test_a_step_that_fails_halfway_leaves_the_index_at_the_previous_version_with_its_tables_intact(
        tmp_path, a_next_version, how):
    path = tmp_path / "index.sqlite"
    new_index(path)
    before = snapshot(path)
    old = a_next_version("CREATE TABLE half_done (x INTEGER);\n"
                         "DELETE FROM chunks;\n"
                         "UPDATE meta SET value = 'gone' WHERE key = 'model';\n" + HALFWAY[how] + "\n")
    con = connection.connect_sync(path)
    con.create_function("groove_test_fault", 0, fault)
    with pytest.raises(schema.MigrationError) as failed:
        schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    assert not con.in_transaction  # rolled back, not left open for whoever writes next on this connection
    con.close()
    message = str(failed.value)
    assert "\n" not in message
    assert f"from schema version {old} to {old + 1}" in message and f"(migration step {old})" in message
    assert ("no such table: no_such_table" in message if how == "a statement that fails"
            else "user-defined function raised exception" in message)
    assert f"the index is unchanged at schema version {old}" in message
    assert "run `groove index`" in message and "`groove index --rebuild`" in message and str(path) in message
    # Nothing of the step is kept: no table, the rows and meta as they were, the same version.
    assert snapshot(path) == before and version(path) == old and not has_table(path, "half_done")


def test_after_a_failed_step_the_next_open_without_the_fault_migrates(tmp_path, a_next_version):
    path = tmp_path / "index.sqlite"
    new_index(path)
    old = a_next_version("CREATE TABLE half_done (x INTEGER);\nINSERT INTO no_such_table VALUES (1);\n")
    with pytest.raises(schema.MigrationError, match=f"unchanged at schema version {old}"):
        open_index(path)
    before = snapshot(path)
    a_next_version("CREATE TABLE half_done (x INTEGER);\n")  # the step, fixed
    open_index(path)
    assert version(path) == old + 1 and has_table(path, "half_done")
    after = snapshot(path)
    assert {k: after[k] for k in ("documents", "chunks", "embeddings", "trigram")} == \
        {k: before[k] for k in ("documents", "chunks", "embeddings", "trigram")}


def test_the_steps_before_a_failing_one_stay_done_each_in_its_own_transaction(tmp_path, a_next_version):
    path = tmp_path / "index.sqlite"
    new_index(path)
    as_schema_4(path)
    old = a_next_version("CREATE TABLE half_done (x INTEGER);\nINSERT INTO no_such_table VALUES (1);\n")
    with pytest.raises(schema.MigrationError, match=f"from schema version {old} to {old + 1}"):
        open_index(path)
    # Step 4 -> 5 (the word table) committed; the failing step after it did not.
    # (a_next_version made this groove one schema newer: the real steps all ran, up to `old`)
    assert version(path) == old == schema.SCHEMA_VERSION - 1 and has_table(path, "fts_words") and not has_table(path, "half_done")
    con = connection.connect_sync(path, readonly=True)
    assert con.execute("SELECT rowid FROM fts_words WHERE fts_words MATCH 'candidate'").fetchall() == [(7,)]
    con.close()


def test_a_real_step_that_fails_halfway_is_rolled_back_whole_and_runs_again_on_the_next_open(tmp_path):
    """Step 4 -> 5 creates the word table and its triggers, then fills it from the chunks through
    groove_word_text: when that raises, the new virtual table and triggers are gone again."""
    path = tmp_path / "index.sqlite"
    new_index(path)
    as_schema_4(path)
    before = snapshot(path)
    con = connection.connect_sync(path)
    con.create_function("groove_word_text", 1, lambda text: fault(None), deterministic=True)
    with pytest.raises(schema.MigrationError, match="from schema version 4 to 5 .*unchanged at schema version 4"):
        schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    con.close()
    assert snapshot(path) == before and not has_table(path, "fts_words")
    open_index(path)
    assert version(path) == schema.SCHEMA_VERSION
    con = connection.connect_sync(path, readonly=True)
    assert con.execute("SELECT rowid FROM fts_words WHERE fts_words MATCH 'candidate'").fetchall() == [(7,)]
    assert con.execute("SELECT embedding_id FROM chunks WHERE id = 7").fetchone() == (3,)  # nothing re-queued
    con.close()


@pytest.mark.parametrize("statement", ["COMMIT;", "BEGIN;", "VACUUM;", "PRAGMA foreign_keys = OFF;"])
def test_a_step_holding_a_statement_that_cannot_run_in_its_transaction_is_refused_before_anything_runs(
        tmp_path, a_next_version, statement):
    path = tmp_path / "index.sqlite"
    new_index(path)
    before = snapshot(path)
    old = a_next_version(f"CREATE TABLE half_done (x INTEGER);\n{statement}\nCREATE TABLE other_half (x INTEGER);\n")
    with pytest.raises(schema.MigrationError, match=f"holds `{statement.split()[0].rstrip(';')}`.*a bug in groove"):
        open_index(path)
    assert snapshot(path) == before and version(path) == old


def test_an_index_of_the_oldest_schema_migrates_step_by_step_to_the_schema_of_a_new_index(tmp_path):
    """Every existing step, run as before (one transaction each), gives what a new index has."""
    fresh = tmp_path / "fresh.sqlite"
    new_index(fresh)
    path = tmp_path / "old.sqlite"
    new_index(path)
    con = connection.connect_sync(path)
    # Schema 1: no CJK bigram or word tables (nor their triggers, nor the trigram vocabulary), embeddings
    # without AUTOINCREMENT and without the delete trigger, tags as written.
    for name in ("chunks_cjk_ai", "chunks_cjk_ad", "chunks_cjk_au", "chunks_words_ai", "chunks_words_ad",
                 "chunks_words_au", "embeddings_ad"):
        con.execute(f"DROP TRIGGER {name}")
    for name in ("fts_cjk_vocab", "fts_chunks_vocab", "fts_cjk", "fts_words", "embeddings"):
        con.execute(f"DROP TABLE {name}")
    con.execute("CREATE TABLE embeddings (id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, created_at REAL NOT NULL)")
    con.execute("INSERT INTO embeddings(id, hash, created_at) VALUES (3, 'x', 0)")
    without_quality_scores(con)
    for name in ("links", "note_names"):  # schema 7 added the links between notes
        con.execute(f"DROP TABLE {name}")
    con.execute("UPDATE documents SET tags = '[\"Topic\"]'")
    con.execute("INSERT INTO doc_tags(doc_id, tag) VALUES (1, 'Topic')")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()

    open_index(path)
    assert version(path) == schema.SCHEMA_VERSION

    def objects(p: Path) -> list[tuple[str, str]]:
        con = connection.connect_sync(p, readonly=True)
        try:
            return sorted(con.execute("SELECT type, name FROM sqlite_master").fetchall())
        finally:
            con.close()
    assert objects(path) == objects(fresh)
    con = connection.connect_sync(path, readonly=True)
    assert con.execute("SELECT id, hash FROM embeddings").fetchall() == [(3, "x")]  # nothing re-embedded
    assert con.execute("SELECT tag FROM doc_tags").fetchall() == [("topic",)]
    assert con.execute("SELECT mtime_ns, hash FROM documents").fetchall() == [(-1, "")]  # rewritten by the next reconcile
    assert con.execute("SELECT rowid FROM fts_words WHERE fts_words MATCH 'candidate'").fetchall() == [(7,)]
    assert "AUTOINCREMENT" in con.execute("SELECT sql FROM sqlite_master WHERE name = 'embeddings'").fetchone()[0]
    assert con.execute("SELECT name, alias FROM note_names").fetchall() == [("a", 0)]  # filled from the documents
    con.close()


def test_groove_index_on_an_index_whose_upgrade_fails_says_so_and_the_next_run_upgrades_it(
        kb, make_settings, a_next_version):
    write(kb / "a.md", "# Tides\n\nNotes about the spring tides and the moon.\n")
    settings = make_settings(kb)
    embedder = BagOfWordsEmbedder()
    anyio.run(lambda: index_once(settings, embedder=embedder))
    path = settings.resolved_index_path()
    old = a_next_version("CREATE TABLE half_done (x INTEGER);\nINSERT INTO no_such_table VALUES (1);\n")
    with pytest.raises(schema.MigrationError, match=f"unchanged at schema version {old}"):
        anyio.run(lambda: index_once(settings, embedder=embedder))
    assert version(path) == old and not has_table(path, "half_done")
    a_next_version("CREATE TABLE half_done (x INTEGER);\n")
    # The failed open gave the writer lock back: the next run goes ahead and upgrades.
    assert anyio.run(lambda: index_once(settings, embedder=embedder)).unchanged == 1
    assert version(path) == old + 1 and has_table(path, "half_done")
