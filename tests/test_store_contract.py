"""One contract for every store (groove/store/protocols.py): the same tests on the SQLite file and on a real
PostgreSQL server with pgvector (`backend`: its postgresql side is marked `postgres`, outside `make test-fast`).

The notes go in through the indexer and come back through the service API, as every front end reads them:
counts, notes, parts, links and backlinks, tags and folders, each full-text leg (phrases, Japanese bigrams,
stemmed words) and the vector leg, filters, exclusions, edits, renames that embed nothing, deletions, the
embedding queue. What only the shared store does (claims, its queue across processes, changes heard by other
processes, a copy between the stores, refusals) is tests/test_postgres.py's.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from groove.api.answers import changes_text
from groove.api.service import ChangesRequest, LinksRequest, ListRequest, Service, TopicsRequest
from groove.config import load_settings
from groove.errors import GrooveError
from groove.index import Index
from groove.search.answers import search_text
from groove.search.request import DocumentRequest, SearchRequest
from groove.store.protocols import DocumentFilter
from tests.support.common import note, section_text, write
from tests.support.fakes import BagOfWordsEmbedder

NOTES = {
    "reference/sqlite-wal.md": note(
        "SQLite WAL mode",
        "Write-ahead logging lets readers run beside one writer.\n\n## Checkpoints\n\n"
        "A checkpoint copies the WAL pages back into the database file. See [[日本語の全文検索]].",
        tags=["sqlite", "databases"],
        date="2024-03-14",
    ),
    "reference/日本語の全文検索.md": note(
        "日本語の全文検索",
        "トライグラムとバイグラムで日本語を検索する。首都は東京です。\n\n## 関連\n\n[[sqlite-wal]] と同じファイル。",
        tags=["search", "日本語"],
        date="2024-05-01",
    ),
    "projects/reranking.md": note(
        "Reranking evaluation",
        "We evaluated cross-encoder rerankers on sixty questions. The rerankers helped the properties queries.",
        tags=["search"],
        date="2024-06-10",
    ),
    "journal/draft.md": note("Draft", "A draft about checkpoints and latency, not finished.", tags=["draft"]),
}


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_settings(backend: str, request: pytest.FixtureRequest, tmp_path: Path):
    """Settings for an index of `kb` in this test's store (a new SQLite file, or a new database)."""
    url = request.getfixturevalue("postgres") if backend == "postgresql" else None

    def make(kb: Path, **overrides: Any):
        if url:
            overrides.setdefault("store.url", url)
        overrides.setdefault("index_path", tmp_path / "index.sqlite")
        return load_settings(None, kb_path=kb, **overrides)

    return make


def vault(kb: Path, notes: dict[str, str] = NOTES) -> Path:
    for rel, text in notes.items():
        write(kb / rel, text)
    return kb


async def index(settings: Any, embedder: BagOfWordsEmbedder) -> Any:
    async with Index.open(settings, embedder=embedder) as ix:
        return await Service(ix).reindex()


def run(settings: Any, call: Any, embedder: BagOfWordsEmbedder | None = None) -> Any:
    async def go() -> Any:
        async with Index.open(settings, readonly=True, embedder=embedder or BagOfWordsEmbedder()) as ix:
            return await call(Service(ix))

    return anyio.run(go)


def paths(answer: Any, prefix: str) -> list[str]:
    """Result paths without the folder name a shared store leads them with."""
    return [h.path.removeprefix(prefix) for h in answer.results]


def prefix_of(backend: str, kb: Path) -> str:
    return f"{kb.name}/" if backend == "postgresql" else ""


def test_a_store_holds_what_the_indexer_wrote_and_answers_every_read(backend, store_settings, kb):
    settings = store_settings(vault(kb))
    embedder = BagOfWordsEmbedder()
    report = anyio.run(index, settings, embedder)
    assert (report.added, report.pending_chunks) == (4, 0)
    pre = prefix_of(backend, kb)

    status = run(settings, lambda s: s.status())
    assert (status.documents, status.pending_chunks, status.vectors) == (4, 0, status.chunks)
    assert status.chunks >= 4
    doc = run(settings, lambda s: s.get_document(f"{pre}reference/sqlite-wal.md"))
    assert doc.title == "SQLite WAL mode" and "checkpoint copies the WAL pages" in doc.content
    assert doc.tags == ["sqlite", "databases"] and doc.backlinks == 1
    part = run(settings, lambda s: s.get_document(DocumentRequest(path=f"{pre}reference/sqlite-wal.md", heading="Checkpoints")))
    assert part.content.startswith("## Checkpoints") and part.part is not None
    links = run(settings, lambda s: s.links(LinksRequest(path=f"{pre}reference/sqlite-wal.md")))
    assert [x.path for x in links.outgoing] == [f"{pre}reference/日本語の全文検索.md"]
    assert [x.path for x in links.backlinks] == [f"{pre}reference/日本語の全文検索.md"]
    page = run(settings, lambda s: s.list_documents(ListRequest(tags=["search"])))
    assert sorted(d.path for d in page.documents) == [f"{pre}projects/reranking.md", f"{pre}reference/日本語の全文検索.md"]
    topics = run(settings, lambda s: s.topics(TopicsRequest(depth=2)))
    assert {t.tag: t.notes for t in topics.tags}["search"] == 2
    assert run(settings, lambda s: s.complete("tag", "data"))[0] == ["databases"]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("checkpoint WAL pages", "reference/sqlite-wal.md"),  # words (stemmed)
        ("首都", "reference/日本語の全文検索.md"),  # bigrams: a two-kanji word inside a sentence
        ("トライグラムとバイグラム", "reference/日本語の全文検索.md"),  # phrases and bigrams
        ("property", "projects/reranking.md"),  # the stem of "properties"
    ],
)
def test_each_full_text_leg_finds_the_note_that_holds_the_words(backend, store_settings, kb, query, first):
    settings = store_settings(vault(kb))
    anyio.run(index, settings, BagOfWordsEmbedder())
    found = run(settings, lambda s: s.search(SearchRequest(query=query, retriever="fts")))
    assert paths(found, prefix_of(backend, kb))[0] == first


def test_filters_exclusions_and_the_vector_leg_answer_alike_on_every_store(backend, store_settings, kb):
    settings = store_settings(vault(kb))
    anyio.run(index, settings, BagOfWordsEmbedder())
    pre = prefix_of(backend, kb)
    tagged = run(settings, lambda s: s.search(SearchRequest(query="checkpoint", tags_any=["draft"])))
    assert paths(tagged, pre) == ["journal/draft.md"]
    dated = run(settings, lambda s: s.search(SearchRequest(query="checkpoint", date_from="2024-03-01", date_to="2024-03-31")))
    assert set(paths(dated, pre)) == {"reference/sqlite-wal.md"}
    excluded = run(settings, lambda s: s.search(SearchRequest(query="checkpoint -draft", retriever="fts")))
    assert "journal/draft.md" not in paths(excluded, pre) and paths(excluded, pre)
    by_meaning = run(settings, lambda s: s.search(SearchRequest(query="cross-encoder rerankers", retriever="vector")))
    assert paths(by_meaning, pre)[0] == "projects/reranking.md"


@pytest.mark.parametrize("memory", [True, False], ids=["in-memory", "store"])
def test_several_knn_queries_at_once_rank_as_the_stored_vectors_do_and_bring_their_vectors_on_every_store(
    backend, store_settings, kb, memory
):
    settings = store_settings(vault(kb))
    anyio.run(index, settings, BagOfWordsEmbedder())
    rng = np.random.default_rng(3)

    async def go() -> None:
        async with Index.open(settings, pool=True, embedder=BagOfWordsEmbedder()) as ix:
            if memory:
                await ix.warm_vectors()
            matrix = ix.searcher.vectors if memory else None
            async with ix.reading() as view:
                reads = view.searching(matrix, None)
                probe = np.zeros(BagOfWordsEmbedder().dimension, dtype=np.float32)
                (every,), _ = await reads.vector_legs([(probe, 10_000)], None, None)
                stored = await reads.fetch_vectors([cid for cid, _ in every])  # read from the store itself
                assert stored.keys() == {cid for cid, _ in every} and len(every) >= 4  # every chunk of the vault
                queries = [v / np.linalg.norm(v) for v in rng.standard_normal((2, len(probe))).astype(np.float32)]
                legs, vectors = await reads.vector_legs([(queries[0], 2), (queries[1], 3)], None, None)
            for (q, k), leg in zip([(queries[0], 2), (queries[1], 3)], legs, strict=True):
                # The oracle: every stored vector against the query, by hand.
                by_hand = sorted((float(np.linalg.norm(stored[c] - q)), c) for c in stored)[:k]
                assert [c for c, _ in leg] == [c for _, c in by_hand]
                assert [d for _, d in leg] == pytest.approx([d for d, _ in by_hand], abs=1e-5)
            assert vectors.keys() == {c for leg in legs for c, _ in leg}
            assert all(np.array_equal(vectors[c], stored[c]) for c in vectors)

    anyio.run(go)


# Chunks under a quality floor of 0.3 (groove/corpus/quality.py): a heading and a placeholder.
STUBS = {
    "journal/stub-wal.md": "# WAL checkpoints\n\nTODO\n",
    "journal/stub-rerank.md": "# Rerankers\n\nTBD\n",
    "reference/stub-fts.md": "# 全文検索\n\n詳細は後述\n",
}


class Statements:
    """A store's connection that keeps the text of every statement it runs, and runs it."""

    def __init__(self, conn: Any):
        self.conn, self.sql = conn, list[str]()

    async def execute(self, sql: Any, *args: Any, **kw: Any) -> Any:
        self.sql.append(str(sql))
        return await self.conn.execute(sql, *args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def reads_vectors(sql: str) -> bool:
    """Whether a statement reads the stored vectors themselves (the `embedding` column of sqlite-vec's table and
    of PostgreSQL's `embeddings`), not only their ids (`embedding_id`, `max(id) FROM embeddings`)."""
    return re.search(r"\bembedding\b", sql) is not None


async def vector_answers(settings: Any, memory: bool, prefix: str) -> tuple[list[Any], list[str]]:
    """`vector_legs` of two queries at once (a search's raw and centred ones) with no filter, an exclusion, a
    tag filter and both, without and under a quality floor: each leg as (path, ordinal, distance) and each
    returned chunk's vector by (path, ordinal) (chunk ids differ between stores); and the statements run."""
    embedder = BagOfWordsEmbedder()
    queries = [(embedder.embed_query("checkpoint WAL pages"), 3), (embedder.embed_query("rerankers 全文検索"), 5)]
    answers: list[Any] = []
    ran: list[str] = []
    async with Index.open(settings, pool=True, embedder=embedder) as ix:
        if memory:
            await ix.warm_vectors()
        matrix = ix.searcher.vectors if memory else None
        assert matrix is None or matrix.snapshot is not None
        async with ix.reading() as view:
            for floor in (None, 0.3):
                reads = view.searching(matrix, floor)
                tagged = [d for d, *_ in await reads.documents_matching(DocumentFilter(tags_any=("search",)))]
                (nearest,), _ = await reads.vector_legs([(queries[0][0], 1)], None, None)
                for exclude, docs in ((None, None), ({nearest[0][0]}, None), (None, tagged), ({nearest[0][0]}, tagged)):
                    recorder = reads.conn = Statements(reads.conn)
                    legs, vectors = await reads.vector_legs(queries, exclude, docs)
                    ran += recorder.sql
                    reads.conn = recorder.conn
                    hits = await reads.fetch_hits(list(vectors))
                    key = {c: (h["path"].removeprefix(prefix), h["ordinal"]) for c, h in hits.items()}
                    ranked = [[(*key[c], d) for c, d in leg] for leg in legs]
                    answers.append((ranked, {key[c]: v for c, v in vectors.items()}))
    return answers, ran


def same_answers(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want) == 8
    for (legs, vectors), (legs_w, vectors_w) in zip(got, want, strict=True):
        assert [[(p, o) for p, o, _ in leg] for leg in legs] == [[(p, o) for p, o, _ in leg] for leg in legs_w]
        assert [d for leg in legs for *_, d in leg] == pytest.approx([d for leg in legs_w for *_, d in leg], abs=1e-5)
        assert vectors.keys() == vectors_w.keys() == {(p, o) for leg in legs for p, o, _ in leg}
        assert all(np.array_equal(vectors[k], vectors_w[k]) for k in vectors)


def test_vector_legs_from_the_in_memory_copy_read_no_vector_from_the_store_and_answer_as_the_store_on_every_store(
    backend, store_settings, kb
):
    settings = store_settings(vault(kb, {**NOTES, **STUBS}))
    anyio.run(index, settings, BagOfWordsEmbedder())
    pre = prefix_of(backend, kb)
    from_memory, ran_memory = anyio.run(vector_answers, settings, True, pre)
    from_store, ran_store = anyio.run(vector_answers, settings, False, pre)
    same_answers(from_memory, from_store)
    stubs = {(p, o) for legs, _ in from_memory for leg in legs for p, o, _ in leg if p in STUBS}
    assert stubs and not {(p, o) for legs, _ in from_memory[4:] for leg in legs for p, o, _ in leg} & stubs  # the floor
    assert ran_memory and not [s for s in ran_memory if reads_vectors(s)]  # ids to chunks only
    assert [s for s in ran_store if reads_vectors(s)]  # the check sees a vector read when there is one


def test_postgresqls_vector_legs_from_memory_answer_as_sqlites_on_the_same_notes(postgres, tmp_path, kb):
    folder = vault(kb, {**NOTES, **STUBS})
    lite = load_settings(None, kb_path=folder, index_path=tmp_path / "index.sqlite")
    shared = load_settings(None, kb_path=folder, index_path=tmp_path / "unused.sqlite", **{"store.url": postgres})
    for settings in (lite, shared):
        anyio.run(index, settings, BagOfWordsEmbedder())
    from_sqlite, _ = anyio.run(vector_answers, lite, True, "")
    from_postgresql, _ = anyio.run(vector_answers, shared, True, f"{kb.name}/")
    same_answers(from_postgresql, from_sqlite)


def test_sections_under_an_excluded_heading_are_left_out_by_every_leg_on_every_store(backend, store_settings, kb):
    settings = store_settings(vault(kb), **{"index.min_chunk_tokens": 0})  # each section a chunk of its own
    anyio.run(index, settings, BagOfWordsEmbedder())
    for retriever in ("fts", "vector", "hybrid"):
        asked = SearchRequest(query="checkpoint copies the WAL pages", retriever=retriever)
        plain = run(settings, lambda s, asked=asked: s.search(asked))
        assert "Checkpoints" in [h.heading for h in plain.results], retriever
        left_out = asked.model_copy(update={"exclude_headings": ["CHECKPOINTS"]})
        kept = run(settings, lambda s, left_out=left_out: s.search(left_out))
        assert kept.results and "Checkpoints" not in [h.heading for h in kept.results], retriever


def test_an_edit_a_rename_and_a_deletion_reach_the_store_and_a_rename_embeds_nothing(backend, store_settings, kb):
    settings = store_settings(vault(kb))
    embedder = BagOfWordsEmbedder()
    anyio.run(index, settings, embedder)
    pre = prefix_of(backend, kb)
    computed = run(settings, lambda s: s.status()).embeddings_computed

    write(kb / "journal/draft.md", note("Draft", "Now about zeppelins instead.", tags=["draft"]))
    (kb / "projects/reranking.md").rename(kb / "projects/rerankers.md")
    (kb / "reference/日本語の全文検索.md").unlink()
    report = anyio.run(index, settings, embedder)
    assert (report.changed, report.renamed, report.deleted) == (1, 1, 1)

    status = run(settings, lambda s: s.status())
    assert status.documents == 3
    # the renamed note's texts kept their vectors: only the edited note's new text was embedded
    assert status.embeddings_computed == computed + report.chunks_embedded
    assert report.chunks_embedded == 1
    old = run(settings, lambda s: s.search(SearchRequest(query="checkpoints latency", retriever="fts")))
    assert "journal/draft.md" not in paths(old, pre)
    new = run(settings, lambda s: s.search(SearchRequest(query="zeppelins", retriever="fts")))
    assert paths(new, pre) == ["journal/draft.md"]
    moved = run(settings, lambda s: s.search(SearchRequest(query="rerankers", retriever="fts")))
    assert paths(moved, pre) == ["projects/rerankers.md"]
    gone = run(settings, lambda s: s.search(SearchRequest(query="首都", retriever="fts")))
    assert paths(gone, pre) == []
    links = run(settings, lambda s: s.links(LinksRequest(path=f"{pre}reference/sqlite-wal.md")))
    assert links.backlinks == [] and [u.target for u in links.unresolved] == ["日本語の全文検索"]


def test_the_embedding_queue_is_the_store_and_a_batch_that_fails_is_kept_for_later(backend, store_settings, kb):
    settings = store_settings(vault(kb))
    failing = BagOfWordsEmbedder()
    failing.fail_on = {"zeppelin"}
    write(kb / "journal/zeppelin.md", note("Zeppelin", "A zeppelin note the model fails on."))
    report = anyio.run(index, settings, failing)
    assert report.pending_chunks == 1  # the failing text waits in the store's queue; the others are embedded
    report = anyio.run(index, settings, BagOfWordsEmbedder())
    assert report.pending_chunks == 0 and report.chunks_embedded == 1


def test_a_filter_that_leaves_no_note_says_which_part_and_what_exists_near_it_and_is_not_off_topic(
        backend, store_settings, kb):
    settings = store_settings(vault(kb))
    anyio.run(index, settings, BagOfWordsEmbedder())
    pre = prefix_of(backend, kb)

    def search(**filters: Any) -> Any:
        return run(settings, lambda s: s.search(SearchRequest(query="checkpoint WAL pages", **filters)))

    typo = search(tags_any=["sqlit"])
    assert typo.results == [] and typo.off_topic is False
    [part] = typo.filter_matched_nothing.parts
    assert (part.filter, part.value, part.did_you_mean) == ("tags_any", "sqlit", ["sqlite"])
    assert typo.filter_matched_nothing.message == (
        'the filter leaves no note to search: tags_any "sqlit" matches no note (did you mean sqlite?)')
    shown = search_text(typo)  # what the CLI prints and an MCP client reads
    assert 'filter_matched_nothing: the filter leaves no note to search: tags_any "sqlit"' in shown
    assert "off_topic" not in shown

    folder = search(path_globs=[f"{pre}refernce/**"])
    [part] = folder.filter_matched_nothing.parts
    assert part.filter == "path_globs" and part.did_you_mean == [f"{pre}reference/**"]

    both = search(tags_all=["sqlite", "draft"])  # each tag is on a note, no note has both
    assert both.filter_matched_nothing.parts == [] and both.off_topic is False
    assert both.filter_matched_nothing.message.endswith("each part of the filter matches notes, but no note matches "
                                                        "them all")
    found = search(tags_any=["sqlite"])  # a filter that leaves notes: no such field
    assert found.filter_matched_nothing is None and paths(found, pre)[0] == "reference/sqlite-wal.md"
    assert "filter_matched_nothing" not in found.model_dump(exclude_none=True)


def test_a_note_that_comes_back_under_another_name_later_takes_its_vectors_back_instead_of_being_embedded(
        backend, store_settings, kb):
    settings = store_settings(vault(kb))
    embedder = BagOfWordsEmbedder()
    anyio.run(index, settings, embedder)
    pre = prefix_of(backend, kb)
    before = run(settings, lambda s: s.status())
    text = (kb / "projects/reranking.md").read_text(encoding="utf-8")

    (kb / "projects/reranking.md").unlink()  # one run sees it gone (a rename the watcher split in two) ...
    gone = anyio.run(index, settings, embedder)
    assert gone.deleted == 1
    assert run(settings, lambda s: s.status()).vectors < before.vectors  # its vectors left the index and search
    found = run(settings, lambda s: s.search(SearchRequest(query="cross-encoder rerankers", retriever="vector")))
    assert "projects/reranking.md" not in paths(found, pre)

    write(kb / "archive/reranking.md", text)  # ... a later one sees it back under another name
    back = anyio.run(index, settings, embedder)
    assert (back.added, back.chunks_embedded) == (1, 0)
    after = run(settings, lambda s: s.status())
    assert (after.vectors, after.embeddings_computed) == (before.vectors, before.embeddings_computed)
    found = run(settings, lambda s: s.search(SearchRequest(query="cross-encoder rerankers", retriever="vector")))
    assert paths(found, pre)[0] == "archive/reranking.md"

    async def expire(settings: Any) -> None:  # past the grace period a parked vector is gone for good
        async with Index.open(settings, embedder=embedder) as ix:
            await ix.store.writes.collect_garbage(grace_s=0)

    (kb / "archive/reranking.md").unlink()
    anyio.run(index, settings, embedder)
    anyio.run(expire, settings)
    write(kb / "old/reranking.md", text)
    assert anyio.run(index, settings, embedder).chunks_embedded == 1


def exact(at: float) -> str:
    """An ISO time to the microsecond (iso_time stops at the second, which the first run's writes share)."""
    return dt.datetime.fromtimestamp(at, tz=dt.UTC).isoformat()


def plan(sections: dict[str, int]) -> str:
    """A note of long sections (each its own chunk): heading -> which text it holds."""
    return "# Plan\n\n" + "".join(section_text(i, 60).replace(f"## Section {i}", f"## {h}") for h, i in sections.items())


def test_changes_lists_each_note_and_section_added_edited_renamed_or_deleted_since_a_time(backend, store_settings, kb):
    write(kb / "projects/plan.md", plan({"Goals": 1, "Risks": 2, "Budget": 3}))
    settings = store_settings(vault(kb))
    embedder = BagOfWordsEmbedder()
    anyio.run(index, settings, embedder)
    pre = prefix_of(backend, kb)
    since = time.time()
    time.sleep(0.05)

    write(kb / "projects/plan.md", plan({"Goals": 4, "Timeline": 5, "Budget": 3}))  # Goals edited, Risks gone
    (kb / "projects/reranking.md").rename(kb / "projects/rerankers.md")
    (kb / "reference/日本語の全文検索.md").unlink()
    write(kb / "journal/new.md", note("New", "A note written today about ferries."))
    write(kb / "journal/draft.md", note("Draft", "A draft about checkpoints and latency, not finished.", tags=["x"]))
    anyio.run(index, settings, embedder)
    (kb / "archive").mkdir()
    (kb / "journal/new.md").rename(kb / "archive/new.md")  # moved after a run: still one note added
    anyio.run(index, settings, embedder)

    found = run(settings, lambda s: s.changes(ChangesRequest(since=exact(since))))
    got = {n.path.removeprefix(pre): (n.change, n.old_path.removeprefix(pre) or None) for n in found.notes}
    assert got == {
        "projects/plan.md": ("edited", None),
        "projects/rerankers.md": ("renamed", "projects/reranking.md"),
        "reference/日本語の全文検索.md": ("deleted", None),
        "archive/new.md": ("added", None),
        "journal/draft.md": ("edited", None),  # its frontmatter only: no section changed
    }
    by_path = {n.path.removeprefix(pre): n for n in found.notes}
    assert [(s.heading, s.change) for s in by_path["projects/plan.md"].sections] == [
        ("Goals", "edited"),
        ("Timeline", "added"),
        ("Risks", "deleted"),
    ]
    assert by_path["journal/draft.md"].sections == [] and by_path["projects/rerankers.md"].sections == []
    assert found.notes[0].path.removeprefix(pre) == "archive/new.md"  # the most recent change first
    assert by_path["archive/new.md"].uri and by_path["reference/日本語の全文検索.md"].uri is None
    assert found.more == 0 and found.history_from <= found.since
    shown = changes_text(found)
    assert f"~ {pre}projects/plan.md (edited " in shown and ": ~ Goals; + Timeline; - Risks" in shown
    assert f"from {pre}projects/reranking.md" in shown

    first = run(settings, lambda s: s.changes(ChangesRequest(since=exact(since), limit=2)))
    assert [n.path for n in first.notes] == [n.path for n in found.notes[:2]] and first.more == 3
    assert run(settings, lambda s: s.changes(ChangesRequest(since="1m"))).notes  # a span back from now
    later = run(settings, lambda s: s.changes(ChangesRequest(since=exact(time.time() + 1))))
    assert later.notes == [] and changes_text(later).startswith("0 note(s) changed since")


def test_a_rename_the_index_saw_as_a_deletion_then_an_addition_is_listed_as_one_rename(backend, store_settings, kb):
    settings = store_settings(vault(kb))
    embedder = BagOfWordsEmbedder()
    anyio.run(index, settings, embedder)
    pre = prefix_of(backend, kb)
    since = time.time()
    text = (kb / "projects/reranking.md").read_text(encoding="utf-8")
    (kb / "projects/reranking.md").unlink()
    anyio.run(index, settings, embedder)
    write(kb / "archive/reranking.md", text)
    anyio.run(index, settings, embedder)
    found = run(settings, lambda s: s.changes(ChangesRequest(since=exact(since))))
    assert [(n.path, n.change, n.old_path) for n in found.notes] == [
        (f"{pre}archive/reranking.md", "renamed", f"{pre}projects/reranking.md")
    ]


@pytest.mark.parametrize(
    "since, says",
    [
        ("yesterday", "is neither a span back from now nor an ISO date/time (e.g. 7d, 24h"),
        ("2999-01-01", "is in the future"),
        ("", "since is empty"),
        ("7 days", "is neither a span"),
    ],
)
def test_changes_refuses_a_time_it_cannot_read_in_one_line_with_examples(backend, store_settings, kb, since, says):
    settings = store_settings(vault(kb))
    anyio.run(index, settings, BagOfWordsEmbedder())
    with pytest.raises(GrooveError) as err:
        run(settings, lambda s: s.changes(ChangesRequest(since=since)))
    assert says in str(err.value) and err.value.kind == "invalid" and "\n" not in str(err.value)


def test_a_history_longer_than_one_answer_reads_answers_its_most_recent_changes_and_says_it_is_cut(
        backend, store_settings, kb, monkeypatch):
    import groove.index

    settings = store_settings(vault(kb))
    embedder = BagOfWordsEmbedder()
    anyio.run(index, settings, embedder)
    pre = prefix_of(backend, kb)
    since = time.time()
    for rel, words in (("journal/draft.md", "ferries"), ("projects/reranking.md", "zeppelins"),
                       ("reference/sqlite-wal.md", "lighthouses")):  # one run each: three rows, in this order
        write(kb / rel, note(rel, f"Now about {words}."))
        anyio.run(index, settings, embedder)
    monkeypatch.setattr(groove.index, "HISTORY_ROWS", 2)
    found = run(settings, lambda s: s.changes(ChangesRequest(since=exact(since))))
    assert found.cut and [n.path for n in found.notes] == [f"{pre}reference/sqlite-wal.md", f"{pre}projects/reranking.md"]
    assert "these are its most recent changes" in changes_text(found)
