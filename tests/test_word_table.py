"""The word table (decision 0014): what routes there, what it finds, and how it is kept current.

Real SQLite files built from real notes; the full-text searches are FTS5's own. The speed the
table buys is measured by `python -m bench ab words` (bench/ab/words.py), never here.
"""

from __future__ import annotations

import anyio
import pytest

from groove.config import load_settings
from groove.corpus.words import word_text
from groove.search.answers import SearchAnswer
from groove.search.compiler import compile_query
from groove.search.pipeline import SearchRequest
from groove.store.sqlite import connection, schema
from groove.store.sqlite.search import doc_freq
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, search_once

# --- routing (pure) ---------------------------------------------------------------------------

def test_english_words_search_the_word_table_and_nothing_is_left_for_the_trigram_table():
    cq = compile_query("0-dimensional biomaterials lack inductive properties.")
    assert cq.words == ("dimensional", "biomaterials", "lack", "inductive", "properties")
    assert cq.word_expr == '"dimensional" OR "biomaterials" OR "lack" OR "inductive" OR "properties"'
    assert cq.trigram_expr is None
    assert cq.match_expr == cq.word_expr  # the seeds' phrases are unchanged


def test_japanese_phrases_stay_with_the_trigram_table_exactly_as_the_seeds_compile_them():
    cq = compile_query("再ランキングの評価について")
    assert cq.words == () and cq.word_expr is None
    # (in the folded spelling of decision 0018: の評価 -> ノ評価)
    assert cq.trigram_expr == cq.match_expr == '"再ランキング" OR "ランキング" OR "ノ評価" OR "ニツイテ"'


def test_a_query_with_japanese_in_it_searches_its_english_words_in_the_trigram_table_too():
    # One bm25 ranking over all of its phrases, as the seeds compile it: split over two tables,
    # "1855" alone would rank the notes of a Japanese question by the year (decision 0014).
    for query in ("AIの設定 SQLite3の設定", "1855年のカナダ", "『Undertale』は誰が開発したの?"):
        cq = compile_query(query)
        assert cq.words == () and cq.word_expr is None and cq.trigram_expr == cq.match_expr


def test_a_quoted_region_keeps_the_whole_query_a_verbatim_trigram_search():
    cq = compile_query('"Foundry Local" setup')
    assert cq.trigram_expr == cq.match_expr == '"Foundry Local" OR "setup"' and cq.words == ()


def test_two_letter_words_are_searched_and_exclusions_stay_with_the_trigram_table():
    # The seeds fall back to "AI ML" verbatim (both words under the trigram floor); the word table can search them.
    cq = compile_query("AI ML")
    assert cq.words == ("ai", "ml") and cq.trigram_expr is None
    rust = compile_query("rust -async")
    assert rust.words == ("rust",) and rust.trigram_expr is None and rust.negative_expr == '"async"'


def test_full_width_latin_is_folded_and_scripts_written_without_spaces_stay_trigram():
    assert compile_query("ＡＩ and Go").words == ("ai", "and", "go")
    thai = compile_query("ภาษาไทย")
    assert thai.words == () and thai.trigram_expr == '"ภาษาไทย"'
    single = compile_query("a b c")  # no word of two letters: the seeds' verbatim fallback
    assert single.words == () and single.trigram_expr == '"a b c"'


def test_a_query_under_three_characters_stays_vector_only():
    cq = compile_query("AI")
    assert cq.vector_only and cq.words == () and cq.word_expr is None


def test_the_word_text_of_a_note_leaves_out_its_japanese():
    assert word_text("SQLiteの設定はWALモード、ＡＰＩ") == "SQLite WAL 、API"


# --- the table in a real index ----------------------------------------------------------------

NOTES = {
    "prop.md": "# Materials\n\nEach property of the biomaterial was measured twice.\n",
    "pg.md": "# Databases\n\nPostgreSQL keeps its write-ahead log in pg_wal.\n",
    "ja.md": "# 設定\n\nSQLiteの設定はWALモードにする。\n",
    "other.md": "# Bread\n\nKnead the dough and bake it.\n",
}


@pytest.fixture(scope="module")
def vault(tmp_path_factory) -> object:
    kb = tmp_path_factory.mktemp("words")
    for name, text in NOTES.items():
        write(kb / name, text)
    settings = load_settings(None, kb_path=kb, index_path=tmp_path_factory.mktemp("idx") / "words.sqlite")
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    return settings


def _fts(settings, query: str, **kw) -> SearchAnswer:
    req = SearchRequest(query=query, retriever="fts", explain=True, **kw)
    return anyio.run(lambda: search_once(settings, req, embedder=BagOfWordsEmbedder()))


def _paths(resp: SearchAnswer) -> list[str]:
    return [r.path for r in resp.results]


def test_an_english_word_finds_its_other_forms_through_the_stem(vault):
    got = _fts(vault, "properties biomaterials")
    assert _paths(got) == ["prop.md"]  # it says "property" and "biomaterial"
    # Evidence counts what the hit holds literally (decision 0014): neither spelling.
    assert got.explain["fusion"]["evidence"]["words"] == 0.0


def test_an_unquoted_word_matches_whole_words_and_a_quoted_one_any_substring(vault):
    assert _paths(_fts(vault, "greSQL")) == []  # a word of its own: no substring match
    assert _paths(_fts(vault, '"greSQL"')) == ["pg.md"]  # quoted: the trigram table, verbatim


def test_english_words_inside_japanese_notes_are_found_and_japanese_never_reaches_the_word_table(vault):
    assert "ja.md" in _paths(_fts(vault, "WAL"))  # a three-letter word, under the seeds' rules too
    con = connection.connect_sync(vault.resolved_index_path(), readonly=True)
    try:
        ja = con.execute("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = 'ja.md'").fetchall()
        assert ja
        for (cid,) in ja:
            assert con.execute("SELECT count(*) FROM fts_words WHERE fts_words MATCH '設定' AND rowid = ?", (cid,)).fetchone() == (0,)
    finally:
        con.close()


def test_a_two_letter_word_is_found_though_the_trigram_floor_drops_it(vault):
    got = _fts(vault, "pg log")  # neither word reaches the trigram floor: the seeds search "pg log" verbatim
    assert got.explain["words"] == ["pg", "log"]
    assert _paths(got)[0] == "pg.md"


def test_the_word_leg_keeps_exclusions_and_filters(vault):
    got = _fts(vault, "measured twice -biomaterial")
    assert "prop.md" not in _paths(got)
    assert got.explain["excluded_chunks"] == 1


async def test_a_words_chunk_count_is_what_fts5_matches_for_its_stem(vault):
    conn = await connection.connect(vault.resolved_index_path(), readonly=True)
    try:
        n_chunks = (await (await conn.execute("SELECT count(*) FROM chunks")).fetchone())[0]
        df, n = await doc_freq(conn, "words", ["properties", "biomaterial", "zzz"])
        assert df == {"properties": 1, "biomaterial": 1, "zzz": 0} and n == n_chunks
    finally:
        await conn.close()


def test_the_word_table_follows_edits_and_deletions(tmp_path):
    kb = tmp_path / "kb"
    write(kb / "a.md", "# A\n\nThe quokka naps.\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "i.sqlite")
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    assert _paths(_fts(settings, "quokkas")) == ["a.md"]
    write(kb / "a.md", "# A\n\nThe wombat naps.\n")
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    assert _paths(_fts(settings, "quokkas")) == [] and _paths(_fts(settings, "wombats")) == ["a.md"]
    (kb / "a.md").unlink()
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    con = connection.connect_sync(settings.resolved_index_path(), readonly=True)
    assert con.execute("SELECT count(*) FROM fts_words").fetchone() == (0,)
    con.close()


def test_an_index_of_schema_4_gains_the_word_table_from_its_chunks_without_re_embedding(tmp_path):
    path = tmp_path / "old.sqlite"
    con = connection.connect_sync(path)
    schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    con.execute("INSERT INTO documents(id, path, title, size, mtime_ns, hash, indexed_at) VALUES (1, 'a.md', 'a', 1, 1, 'h', 0)")
    con.execute("INSERT INTO chunks(id, doc_id, ordinal, heading, level, context, content, start_line, end_line, hash,"
                " embedding_id, queued_at) VALUES (7, 1, 0, 'Ranking', 2, '', 'Rerankers reorder the candidates', 1, 2, 'x', 3, 0)")
    # Make it look like schema 4: no word table, no triggers.
    for name in ("chunks_words_ai", "chunks_words_ad", "chunks_words_au"):
        con.execute(f"DROP TRIGGER {name}")
    con.execute("DROP TABLE fts_words")
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    con.close()

    con = connection.connect_sync(path)
    schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    assert schema.get_meta_sync(con, "schema_version") == str(schema.SCHEMA_VERSION)
    assert con.execute("SELECT rowid FROM fts_words WHERE fts_words MATCH 'candidate'").fetchall() == [(7,)]
    assert con.execute("SELECT embedding_id FROM chunks WHERE id = 7").fetchone() == (3,)  # nothing re-queued
    con.execute("UPDATE chunks SET content = 'Wombats dig' WHERE id = 7")
    assert con.execute("SELECT rowid FROM fts_words WHERE fts_words MATCH 'wombat'").fetchall() == [(7,)]
    assert con.execute("SELECT count(*) FROM fts_words WHERE fts_words MATCH 'candidate'").fetchone() == (0,)
    con.close()
