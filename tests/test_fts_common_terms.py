"""Common terms in a full-text leg (decision 0010): what FTS5 is handed, and what still comes back.

A term found in most chunks ("the", "with") weighs next to nothing in bm25 but makes FTS5
walk and score most of the table, so the leg leaves it out of its MATCH when a rarer term of
the query is kept. Real SQLite indexes built from real files; the oracle is FTS5's own bm25
over the whole expression, run as plain SQL. The speed this buys is measured in
`bench/scale.py`, never here.
"""

from __future__ import annotations

import anyio
import pytest

from groove.corpus.cjk import cjk_query
from groove.index import Index
from groove.search import fulltext
from groove.search.compiler import compile_query
from groove.search.pipeline import SearchRequest
from groove.store.protocols import TextQuery
from groove.store.sqlite import connection, search
from groove.store.sqlite.search import SqliteSearchReads, match_expression
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, search_once

NOTES = 120


@pytest.fixture(autouse=True)
def prune_at_any_size(monkeypatch):
    """The rule is a share of the table; groove applies it from 5,000 chunks on (below that a leg
    is cheap whatever it matches), so these small indexes lower the floor."""
    monkeypatch.setattr(fulltext, "PRUNE_MIN_CHUNKS", 0)


def _body(i: int) -> str:
    words = ["the notes with words about note", f"n{i:03d}x"]
    if i % 10 < 3:
        words.append("between")  # 30% of the notes: common, but under half
    if i % 20 == 0:
        words.append("quasar")  # 5%
    if i < 10:
        words.append(" ".join(["zymurgy"] * (i + 1)))  # 10 notes, each a different count
    if i == 77:
        words.append("brewing zymurgy")
    return f"# Note {i}\n\n{' '.join(words)}.\n"


@pytest.fixture(scope="module")
def common(tmp_path_factory) -> object:
    from groove.config import load_settings

    kb = tmp_path_factory.mktemp("common")
    for i in range(NOTES):
        write(kb / f"n{i:03d}.md", _body(i))
    settings = load_settings(None, kb_path=kb, index_path=tmp_path_factory.mktemp("idx") / "common.sqlite")
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    return settings


async def _sql(conn, sql: str, *args) -> list[tuple]:
    return list(await (await conn.execute(sql, args)).fetchall())


async def _ranked_by_fts5(conn, expr: str) -> list[int]:
    """FTS5's own ranking of the whole expression: the oracle."""
    rows = await _sql(conn, "SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH ?"
                            " ORDER BY bm25(fts_chunks, 2.0, 1.0, 1.0), rowid", expr)
    return [r[0] for r in rows]


async def _doc_of(conn, chunk_ids) -> list[str]:
    rows = dict(await _sql(conn, "SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"))
    return [rows[c] for c in chunk_ids]


async def _statements(conn, run) -> list[str]:
    seen: list[str] = []
    await conn.set_trace_callback(seen.append)
    try:
        await run()
    finally:
        await conn.set_trace_callback(None)
    return [s for s in seen if " MATCH " in s and "bm25(" in s]


def _leg_query(query: str, table: str = "fts_chunks") -> TextQuery:
    """The leg of `query` over one table (the trigram table: the seeds' whole expression, exclusions
    included; the word table: its words)."""
    cq = compile_query(query)
    if table == "fts_chunks":
        return TextQuery("phrases", cq.positives, excluded=cq.negatives)
    return TextQuery("words", cq.words)


async def _leg(conn, query: TextQuery, limit: int, **kw) -> list[tuple[int, float]]:
    """One full-text leg as a search runs it: its common terms left out, then the rest scored."""
    kept = await fulltext.without_common_terms(SqliteSearchReads(conn), query)
    return await search.text_scored(conn, kept, limit, **kw)


async def _leg_statements(settings, query: str, table: str = "fts_chunks") -> tuple[str, list[str]]:
    """The expression of `query` for one table (the trigram table: the seeds' whole expression;
    the word table: its words), and the full-text statements one leg ran for it."""
    conn = await connection.connect(settings.resolved_index_path(), readonly=True)
    try:
        leg = _leg_query(query, table)
        return match_expression(leg), await _statements(conn, lambda: _leg(conn, leg, 10))
    finally:
        await conn.close()


async def test_the_full_text_statement_leaves_out_terms_found_in_most_chunks_when_a_rarer_term_is_kept(common):
    _, ran = await _leg_statements(common, "the zymurgy with quasar")
    assert len(ran) == 1
    assert "'\"zymurgy\" OR \"quasar\"'" in ran[0], ran[0]
    assert '"the"' not in ran[0] and '"with"' not in ran[0]


async def test_the_word_leg_leaves_out_its_common_words_too(common):
    _, ran = await _leg_statements(common, "the zymurgy with quasar", table="fts_words")
    assert len(ran) == 1 and "fts_words" in ran[0]
    assert "'\"zymurgy\" OR \"quasar\"'" in ran[0], ran[0]


async def test_explain_shows_the_expression_fts5_ran_and_the_common_terms_left_out(common):
    seeds, _ = await _leg_statements(common, "the zymurgy with quasar")
    words, ran = await _leg_statements(common, "the zymurgy with quasar", table="fts_words")
    req = SearchRequest(query="the zymurgy with quasar", retriever="fts", explain=True)
    got = (await search_once(common, req, embedder=BagOfWordsEmbedder())).explain
    assert got["match_expr"] == seeds  # the compiler's phrases, unchanged
    assert got["word_expr"] == words and got["trigram_expr"] is None  # English words: the word table alone
    assert f"'{got['sent_to_fts5']['words']}'" in ran[0]  # what the statement itself was handed
    assert got["common_terms_left_out"]["words"] == ['"the"', '"with"']


async def test_a_rare_word_beside_very_common_words_finds_the_rare_words_notes_first(common):
    req = SearchRequest(query="the zymurgy with", retriever="fts", limit=20)
    got = await search_once(common, req, embedder=BagOfWordsEmbedder())
    paths = [r.path for r in got.results]
    assert set(paths) == {f"n{i:03d}.md" for i in range(10)} | {"n077.md"}
    assert paths[0] == "n009.md"  # the note that says it ten times


async def test_leaving_out_a_term_in_more_than_half_the_chunks_keeps_fts5s_own_order_of_the_rare_terms_rows(common):
    """Past half the table FTS5 clamps a term's idf to almost 0: the pruned leg must rank the rows
    the rare terms match exactly as bm25 over the whole expression does."""
    conn = await connection.connect(common.resolved_index_path(), readonly=True)
    try:
        full = compile_query("the zymurgy with quasar notes").match_expr
        whole = await _ranked_by_fts5(conn, full)
        rare = {r[0] for r in await _sql(conn, "SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH ?",
                                         '"zymurgy" OR "quasar"')}
        got = [cid for cid, _ in await _leg(conn, _leg_query("the zymurgy with quasar notes"), 50)]
    finally:
        await conn.close()
    assert len(whole) == NOTES and len(rare) == 16
    assert got == [cid for cid in whole if cid in rare]


async def test_a_query_made_only_of_common_words_still_returns_the_notes_of_its_rarest_word(common):
    req = SearchRequest(query="the with between", retriever="fts", limit=50)
    got = await search_once(common, req, embedder=BagOfWordsEmbedder())
    paths = {r.path for r in got.results}
    assert paths == {f"n{i:03d}.md" for i in range(NOTES) if i % 10 < 3}  # "between": 30%, the rarest


async def test_a_filtered_leg_with_common_terms_returns_the_unfiltered_ids_restricted_to_the_allowed_notes(common):
    conn = await connection.connect(common.resolved_index_path(), readonly=True)
    try:
        allowed = [r[0] for r in await _sql(conn, "SELECT id FROM documents WHERE path < 'n050.md'")]
        chunks = {r[0] for r in await _sql(conn, "SELECT id FROM chunks WHERE doc_id IN (%s)" % ",".join(map(str, allowed)))}
        leg = _leg_query("the zymurgy with quasar")
        everything = await _leg(conn, leg, 10_000)
        filtered = await _leg(conn, leg, 8, allowed_docs=allowed)
    finally:
        await conn.close()
    assert len(filtered) == 8
    assert filtered == [row for row in everything if row[0] in chunks][:8]


async def test_an_excluded_term_still_excludes_when_common_terms_are_left_out(common):
    req = SearchRequest(query="the zymurgy with -brewing", retriever="fts", limit=50)
    got = await search_once(common, req, embedder=BagOfWordsEmbedder())
    paths = {r.path for r in got.results}
    assert paths == {f"n{i:03d}.md" for i in range(10)}  # n077 says brewing


async def test_terms_are_kept_rarest_first_while_they_weigh_enough_and_their_postings_fit_the_budget(tmp_path):
    from groove.config import load_settings

    kb = tmp_path / "kb"
    words = [f"w{k}{'q' * 3}" for k in range(8)]  # word k in the notes i with i % 8 <= k: 10, 20 ... 80 of 80
    for i in range(80):
        write(kb / f"m{i:02d}.md", "# M\n\n" + " ".join(w for k, w in enumerate(words) if i % 8 <= k) + "\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "mid.sqlite")
    await index_once(settings, embedder=BagOfWordsEmbedder())
    conn = await connection.connect(settings.resolved_index_path(), readonly=True)
    try:
        leg = _leg_query(" ".join(reversed(words)))
        expr = match_expression(leg)
        reads = SqliteSearchReads(conn)
        by_weight = match_expression(await fulltext.without_common_terms(reads, leg))
        by_budget = match_expression(
            await fulltext.without_common_terms(reads, leg, weight_share=0.0, postings_share=0.5))
        small = match_expression(await fulltext.without_common_terms(reads, leg, min_chunks=81))
        counts = {w: (await _sql(conn, "SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH ?", f'"{w}"'))[0][0]
                  for w in words}
    finally:
        await conn.close()
    assert [counts[w] for w in words] == [10 * (k + 1) for k in range(8)]
    # idf 1.90, 1.08, 0.50, then 0 from half the table on: under a tenth of 1.90 from the fourth word
    assert by_weight == " OR ".join(f'"{w}"' for w in reversed(words[:3]))
    # 10 + 20 postings fit in half of the 80 chunks; + 30 would not
    assert by_budget == " OR ".join(f'"{w}"' for w in reversed(words[:2]))
    assert small == expr  # an index under the floor runs every term


async def test_the_chunk_counts_follow_a_note_written_by_another_connection(tmp_path):
    """The counts are kept per connection while the index is unchanged; a commit elsewhere drops them."""
    from groove.config import load_settings

    kb = tmp_path / "kb"
    write(kb / "a.md", "# A\n\nzymurgy once\n")
    write(kb / "b.md", "# B\n\nnothing here\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "fresh.sqlite")
    await index_once(settings, embedder=BagOfWordsEmbedder())
    conn = await connection.connect(settings.resolved_index_path(), readonly=True)
    try:
        before = await search.doc_freq(conn, "phrases", ["zymurgy"])
        write(kb / "c.md", "# C\n\nzymurgy twice zymurgy\n")
        await index_once(settings, embedder=BagOfWordsEmbedder())
        after = await search.doc_freq(conn, "phrases", ["zymurgy"])
    finally:
        await conn.close()
    assert before == ({"zymurgy": 1}, 2)
    assert after == ({"zymurgy": 2}, 3)


async def test_the_chunk_counts_follow_a_note_written_through_the_same_connection(tmp_path):
    """A command that writes and searches on its one writer connection sees its own write."""
    from groove.config import load_settings

    kb = tmp_path / "kb"
    write(kb / "a.md", "# A\n\nzymurgy once\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "own.sqlite")
    async with Index.open(settings, embedder=BagOfWordsEmbedder()) as index:
        await index.reconcile()
        before = await search.doc_freq(index.store.wconn, "phrases", ["zymurgy"])
        write(kb / "b.md", "# B\n\nzymurgy again\n")
        await index.reconcile()
        after = await search.doc_freq(index.store.wconn, "phrases", ["zymurgy"])
    assert before == ({"zymurgy": 1}, 1)
    assert after == ({"zymurgy": 2}, 2)


@pytest.mark.parametrize(("expr", "query"), [
    ('"a b" OR "c"', TextQuery("phrases", ("a b", "c"))),
    ('("abc" OR "de""f") NOT ("xyz")', TextQuery("phrases", ("abc", 'de"f'), excluded=("xyz",))),
    ('"鶏" OR "首都"*', TextQuery("bigrams", ("鶏", "首都"), prefix=frozenset({"首都"}))),
])
def test_a_legs_terms_are_handed_to_fts5_as_every_expression_the_compilers_write(expr, query):
    """A leg keeps its terms, not an expression: FTS5 is handed them OR-ed as the compilers write them,
    with the exclusions as the `NOT (...)` tail and a prefix term starred."""
    assert match_expression(query) == expr


@pytest.mark.parametrize("text", ["notes \"a b\" c", 'abc "de""f" -xyz', "鶏 首都の人口", "データベース -索引 tuning"])
def test_the_legs_of_a_compiled_query_render_the_compilers_own_expressions(text):
    cq = compile_query(text)
    legs = {name: match_expression(q) for name, q, _ in fulltext.plan(cq, fulltext.bigram_query(cq.vector_text))}
    assert legs["trigram"] == cq.match_expr
    assert legs.get("bigram") == cjk_query(cq.vector_text)


@pytest.mark.parametrize("term", ['abc OR "d"', '"a" AND "b"', '("a") NOT ("b") OR "c"', 'NEAR("a" "b")'])
def test_a_term_that_reads_as_an_fts5_operator_is_handed_over_as_one_phrase(term):
    assert match_expression(TextQuery("phrases", (term,))) == '"' + term.replace('"', '""') + '"'
