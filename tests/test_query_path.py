"""The query path and the embedding queue at speed: what must hold, asserted without a clock.

Real SQLite indexes built from real files (with the bag-of-words fake: these tests
are about the plumbing, not about meaning). The speed these buy is measured in
`bench/scale.py` and `bench/index.py`, never here.
"""

from __future__ import annotations

import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

import anyio
import numpy as np
import pytest

from groove.embed.pool import QueryBatcher
from groove.index import Index
from groove.search.compiler import compile_query
from groove.search.pipeline import Searcher, SearchRequest
from groove.store.protocols import TextQuery
from groove.store.sqlite import connection, search
from groove.store.sqlite.pool import ReaderPool
from groove.store.sqlite.store import SqliteReads
from groove.sync import embedding as embedding_mod
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def tagged(tmp_path_factory) -> object:
    """300 notes about the same words; one in ten is tagged `rare`."""
    from groove.config import load_settings

    kb = tmp_path_factory.mktemp("tagged")
    for i in range(300):
        tag = "rare" if i % 10 == 3 else "common"
        write(kb / f"n{i:03d}.md", f"---\ntags: [{tag}]\n---\n# Note {i}\n\nsearch engines rank notes; note {i} "
                                   f"mentions ranking {'twice ranking' if i % 7 == 0 else 'once'}.\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path_factory.mktemp("idx") / "tagged.sqlite")
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    return settings


def _phrases(query: str) -> TextQuery:
    """The trigram leg of `query`: the seeds' phrases, with its exclusions."""
    cq = compile_query(query)
    return TextQuery("phrases", cq.positives, excluded=cq.negatives)


async def test_a_filtered_full_text_leg_ranks_exactly_as_the_unfiltered_leg_restricted_to_the_allowed_notes(tagged):
    conn = await connection.connect(tagged.resolved_index_path(), readonly=True)
    try:
        cur = await conn.execute("SELECT d.id FROM documents d JOIN doc_tags t ON t.doc_id = d.id WHERE t.tag = 'rare'")
        allowed = sorted(r[0] for r in await cur.fetchall())
        cur = await conn.execute("SELECT id FROM chunks WHERE doc_id IN (%s)" % ",".join(map(str, allowed)))
        allowed_chunks = {r[0] for r in await cur.fetchall()}
        leg = _phrases("ranking notes")
        everything = await search.text_scored(conn, leg, 10_000)
        filtered = await search.text_scored(conn, leg, 12, allowed_docs=allowed)
    finally:
        await conn.close()
    assert len(allowed) == 30 and len(everything) == 300
    assert filtered == [row for row in everything if row[0] in allowed_chunks][:12]


async def test_the_filtered_full_text_statement_hands_fts5_no_rowid_constraint(tagged):
    """A rowid constraint on the FTS table makes SQLite run the MATCH (and bm25) once per allowed
    id (the plan's index string starts with '='): 12.6 s at 100k chunks. The plan must show one MATCH."""
    conn = await connection.connect(tagged.resolved_index_path(), readonly=True)
    statements: list[str] = []
    try:
        await conn.set_trace_callback(statements.append)
        await search.text_scored(conn, _phrases("ranking"), 10, allowed_docs=[1, 2, 3])
        await conn.set_trace_callback(None)
        fts = [s for s in statements if "MATCH" in s]
        assert len(fts) == 1
        cur = await conn.execute("EXPLAIN QUERY PLAN " + fts[0])
        plan = [r[3] for r in await cur.fetchall() if "fts_chunks VIRTUAL TABLE" in r[3]]
    finally:
        await conn.close()
    assert len(plan) == 1 and plan[0].split("INDEX ")[1].split(":")[1].startswith("M"), plan


@asynccontextmanager
async def pooled(settings, size: int) -> AsyncIterator[Index]:
    async with Index.open(settings, pool=True, embedder=BagOfWordsEmbedder()) as index:
        await index.store.readers.close()
        index.store.readers = ReaderPool(index.path, size=size)
        yield index


async def test_a_search_gives_its_reader_back_while_it_waits_for_its_query_vector(tagged):
    """One reader in the pool: a search waiting for its embedding must not starve another search."""
    release = anyio.Event()
    waiting = anyio.Event()

    async def slow_embed(text: str) -> np.ndarray:
        waiting.set()
        await release.wait()
        return BagOfWordsEmbedder().embed_query(text)

    async with pooled(tagged, size=1) as index:
        blocked = Searcher(tagged.search, embed_query=slow_embed)
        results: dict[str, Any] = {}

        async def first() -> None:
            results["hybrid"] = await index.search(SearchRequest(query="ranking notes"), searcher=blocked)

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await waiting.wait()
                results["fts"] = await index.search(SearchRequest(query="ranking notes", retriever="fts"))
                release.set()
    assert results["fts"].results and results["hybrid"].results
    assert results["hybrid"].vectors_degraded is False


class _Watched:
    """Reads (and the SearchReads a search takes of them) that say when the full-text leg has run."""

    def __init__(self, inner: Any, seen: anyio.Event):
        self.inner, self.seen = inner, seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def searching(self, matrix: Any = None, min_quality: float | None = None) -> Any:
        return _Watched(self.inner.searching(matrix, min_quality), self.seen)

    async def text_scored(self, *args: Any, **kw: Any) -> list[tuple[int, float]]:
        out = await self.inner.text_scored(*args, **kw)
        self.seen.set()
        return out


async def test_the_full_text_half_runs_while_the_query_is_being_embedded(tagged):
    """The embedding finishes only after the full-text leg has run: run one after the other, this deadlocks."""
    fts_seen = anyio.Event()

    async def embed_after_fts(text: str) -> np.ndarray:
        await fts_seen.wait()
        return BagOfWordsEmbedder().embed_query(text)

    conn = await connection.connect(tagged.resolved_index_path(), readonly=True)

    @asynccontextmanager
    async def reading() -> AsyncIterator[Any]:
        yield _Watched(SqliteReads(conn), fts_seen)

    try:
        with anyio.fail_after(TIMEOUT):
            resp = await Searcher(tagged.search, embed_query=embed_after_fts).search(
                reading, SearchRequest(query="ranking notes", explain=True))
    finally:
        await conn.close()
    assert resp["explain"]["candidates"]["vector"] > 0 and resp["explain"]["candidates"]["words"] > 0


class _Rendezvous:
    """Reads (and the SearchReads a search takes of them) whose full-text legs each wait until the other
    leg has started: they can only both finish if they run at the same time."""

    def __init__(self, inner: Any, started: dict[str, anyio.Event]):
        self.inner, self.started = inner, started

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def searching(self, matrix: Any = None, min_quality: float | None = None) -> Any:
        return _Rendezvous(self.inner.searching(matrix, min_quality), self.started)

    async def text_scored(self, query: TextQuery, limit: int, weights: Any, allowed: Any, exclude: Any) -> Any:
        me, other = ("trigram", "bigram") if query.kind == "phrases" else ("bigram", "trigram")
        self.started[me].set()
        await self.started[other].wait()
        return await self.inner.text_scored(query, limit, weights, allowed, exclude)


MIXED = "ranking 検索 notes"  # with Japanese in it: a trigram leg and a bigram leg


@pytest.mark.parametrize("with_spare", [True, False], ids=["a-spare-reader", "no-spare-reader"])
async def test_the_trigram_and_bigram_legs_run_at_once_on_two_readers_when_a_second_is_free(tagged, with_spare):
    """With a spare reader each leg waits for the other to start, and both finish; without one,
    the legs run one after the other and the same rendezvous can never complete."""
    async with pooled(tagged, size=2) as index:
        started = {"trigram": anyio.Event(), "bigram": anyio.Event()}

        @asynccontextmanager
        async def reading() -> AsyncIterator[Any]:
            async with index.store.readers.connection() as conn:
                yield _Rendezvous(SqliteReads(conn), started)

        @asynccontextmanager
        async def spare() -> AsyncIterator[Any]:
            async with index.store.readers.spare() as conn:
                yield None if conn is None else _Rendezvous(SqliteReads(conn), started)

        searcher = Searcher(tagged.search, embed_query=lambda t: anyio.to_thread.run_sync(BagOfWordsEmbedder().embed_query, t))
        req = SearchRequest(query=MIXED, retriever="fts", explain=True)
        if with_spare:
            with anyio.fail_after(TIMEOUT):
                resp = await searcher.search(reading, req, spare=spare)
            assert resp["explain"]["candidates"]["trigram"] > 0
        else:
            with pytest.raises(TimeoutError), anyio.fail_after(2):
                await searcher.search(reading, req)


async def test_a_search_finding_no_free_second_reader_runs_its_legs_one_after_the_other_and_answers_the_same(tagged):
    async with pooled(tagged, size=1) as index:
        with anyio.fail_after(TIMEOUT):
            alone = await index.search(SearchRequest(query=MIXED, limit=20))
    async with pooled(tagged, size=3) as index:
        together = await index.search(SearchRequest(query=MIXED, limit=20))
        sequential = await index.searcher.search(index.reading, SearchRequest(query=MIXED, limit=20))
    assert alone.results, "the query finds notes"
    keys = [[(h.path, h.score) for h in r.results] for r in (alone, together)]
    keys.append([(h["path"], h["score"]) for h in sequential["results"]])  # the pipeline's own response (a dict)
    assert keys[0] == keys[1] == keys[2]


async def test_a_filtered_hybrid_search_returns_only_allowed_notes_from_both_legs(tagged):
    async with pooled(tagged, size=2) as index:
        req = SearchRequest(query="ranking notes", limit=20, filters={"tags_any": ["rare"]}, explain=True)
        resp = await index.search(req)
    assert len(resp.results) == 20
    assert all(r.tags == ["rare"] for r in resp.results)
    assert resp.explain["candidates"]["vector"] == 30 and resp.explain["candidates"]["words"] == 30


class _Unloaded(BagOfWordsEmbedder):
    """A fake that, like the in-process models, says whether it is loaded."""

    def __init__(self) -> None:
        super().__init__()
        self.query_calls: list[list[str]] = []
        self.threads: set[int] = set()

    @property
    def loaded(self) -> bool:
        return bool(self.query_calls)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.query_calls.append(list(texts))
        self.threads.add(threading.get_ident())
        return super().embed_queries(texts)


async def test_warm_up_loads_an_unloaded_model_once_and_leaves_a_loaded_or_remote_one_alone():
    model = _Unloaded()
    batcher = QueryBatcher(model)
    assert await batcher.warm_up() is True
    assert await batcher.warm_up() is False  # loaded now
    assert len(model.query_calls) == 1 and batcher.calls == 0  # not counted as a query
    remote = BagOfWordsEmbedder()  # no `loaded`: nothing to load in process (a remote backend)
    assert await QueryBatcher(remote).warm_up() is False


async def test_the_daemon_loads_the_model_when_it_starts_not_at_the_first_search(make_settings, kb: Path):
    from groove.daemon import Daemon

    write(kb / "a.md", "# A\n\nsome words to index\n")
    model = _Unloaded()
    daemon = Daemon(make_settings(kb), embedder=model)
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        with anyio.fail_after(TIMEOUT):
            while not model.query_calls:
                await anyio.sleep(0.02)
        assert daemon.index.queries.calls == 0  # no search has been made
        daemon.stop()
    assert model.query_calls == [["groove"]]


class _Recording(BagOfWordsEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return super().embed_documents(texts)


def test_groove_index_feeds_the_model_batches_of_similar_length_and_embeds_everything(make_settings, kb: Path,
                                                                                      monkeypatch):
    monkeypatch.setattr(embedding_mod, "LENGTH_WINDOW", 4)
    for i in range(40):  # in note order the lengths alternate: short, long, short, ...
        words = 3 if i % 2 else 60
        write(kb / f"n{i:02d}.md", f"# N{i}\n\n" + " ".join(f"w{i}x{j}" for j in range(words)) + "\n")
    settings = make_settings(kb, **{"embedding.batch_size": 5})
    model = _Recording()
    summary = anyio.run(lambda: index_once(settings, embedder=model))
    assert summary.pending_chunks == 0 and summary.chunks_embedded == 40
    assert sorted(len(b) for b in model.batches) == [5] * 8
    windows = [model.batches[i : i + 4] for i in range(0, 8, 4)]  # 4 batches of 5 per window
    for window in windows:
        for a, b in zip(window, window[1:]):
            assert max(map(len, a)) <= min(map(len, b)), [list(map(len, x)) for x in window]
    # Each batch is all short or all long: nothing is padded to a text 20 times its length.
    assert all(max(map(len, b)) < 3 * min(map(len, b)) for b in model.batches)


def test_a_text_the_model_cannot_take_is_set_aside_and_the_rest_of_its_window_is_stored(make_settings, kb: Path):
    for i in range(12):
        write(kb / f"n{i:02d}.md", f"# N{i}\n\n" + ("poison " if i == 5 else "") + f"plain words number{i}\n")
    settings = make_settings(kb, **{"embedding.batch_size": 4})
    model = BagOfWordsEmbedder()
    model.fail_on.add("poison")
    summary = anyio.run(lambda: index_once(settings, embedder=model))
    assert summary.chunks_embedded == 11 and summary.pending_chunks == 1
