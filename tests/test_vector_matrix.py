"""The in-memory vectors (groove/store/memory.py, decision 0012): sqlite-vec is the oracle.

Real SQLite files with sqlite-vec. Every check compares what the matrix answers with what
sqlite-vec's own KNN (or the exact filtered scan in SQL) answers on the same file, after the
index changed in each way it can: vectors added, vectors removed, the highest id removed and
a new vector stored, the model swapped for one of another dimension.
"""

from __future__ import annotations

import hashlib
import json

import anyio
import numpy as np
import pytest
from structlog.testing import capture_logs

from groove.config import load_settings
from groove.index import Index
from groove.search.pipeline import pool_size
from groove.search.request import SearchRequest
from groove.store.memory import Snapshot, VectorMatrix
from groove.store.sqlite import connection, schema, search, writer
from groove.store.sqlite.schema import VECTOR_TABLE
from groove.store.sqlite.search import VectorRows
from groove.store.sqlite.store import load_all
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once

DIM = 16


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def hashes(prefix: str, n: int) -> list[str]:
    return [hashlib.sha256(f"{prefix}{i}".encode()).hexdigest() for i in range(n)]


@pytest.fixture
async def conn(tmp_path):
    path = tmp_path / "v.sqlite"
    con = connection.connect_sync(path)
    schema.init_sync(con, model="m", dimension=DIM, kb_path="/kb")
    con.close()
    c = await connection.connect(path)
    c.path = path  # where the matrix reads its first load from
    yield c
    await c.close()


async def sqlite_vec_knn(conn, q: np.ndarray, k: int) -> list[tuple[int, float]]:
    return await search.nearest_embeddings(conn, q, k)


async def assert_same_as_sqlite_vec(conn, matrix: VectorMatrix, queries: np.ndarray, k: int = 10) -> None:
    for q in queries:
        got = await matrix.nearest(VectorRows(conn), q, k)
        want = await sqlite_vec_knn(conn, q, k)
        assert got is not None and len(got) == len(want)
        assert np.allclose([d for _, d in got], [d for _, d in want], atol=1e-5)
        # The same ids in the same order, but for neighbours whose distances tie within float32
        # rounding (the two sum in different orders).
        for (gi, gd), (wi, wd) in zip(got, want):
            assert gi == wi or abs(gd - wd) < 1e-5, (gi, gd, wi, wd)
        assert sum(gi == wi for (gi, _), (wi, _) in zip(got, want)) >= 0.9 * len(got)


async def stored_ids(conn) -> list[int]:
    cur = await conn.execute("SELECT id FROM embeddings ORDER BY id")
    return [r[0] for r in await cur.fetchall()]


async def test_the_in_memory_knn_returns_what_sqlite_vec_returns(conn):
    rng = np.random.default_rng(1)
    await writer.store_vectors(conn, hashes("a", 400), unit(rng, 400))
    matrix = VectorMatrix(load_all(conn.path), 2**20)
    await assert_same_as_sqlite_vec(conn, matrix, unit(rng, 25), k=10)
    await assert_same_as_sqlite_vec(conn, matrix, unit(rng, 3), k=400)   # k = every vector
    await assert_same_as_sqlite_vec(conn, matrix, unit(rng, 3), k=1000)  # k past them


async def test_vectors_stored_or_removed_after_the_first_load_are_seen_by_the_next_search(conn):
    rng = np.random.default_rng(2)
    await writer.store_vectors(conn, hashes("a", 200), unit(rng, 200))
    matrix = VectorMatrix(load_all(conn.path), 2**20)
    first = await matrix.current(VectorRows(conn))
    assert first is not None and len(first.ids) == 200

    added = unit(rng, 30)
    await writer.store_vectors(conn, hashes("b", 30), added)
    # The nearest vector to a new one is itself, at distance 0.
    got = await matrix.nearest(VectorRows(conn), added[7], 1)
    assert got[0][1] == pytest.approx(0.0, abs=1e-5) and got[0][0] > first.max_id
    assert list(matrix.snapshot.ids) == await stored_ids(conn)
    # A snapshot taken before is unchanged by the rows written after it (a search computing on it).
    assert len(first.ids) == 200 and first.max_id < int(matrix.snapshot.ids[-1])
    assert all(i <= first.max_id for i, _ in first.nearest(added[7], 50))

    # No chunk uses any of these vectors: garbage collection removes them all.
    removed = await writer.collect_garbage(conn)
    assert removed == 230
    assert await matrix.nearest(VectorRows(conn), added[7], 5) == []
    await writer.store_vectors(conn, hashes("c", 50), unit(rng, 50))
    assert list(matrix.snapshot.ids) != await stored_ids(conn)  # the next search refreshes it
    await assert_same_as_sqlite_vec(conn, matrix, unit(rng, 10))
    assert list(matrix.snapshot.ids) == await stored_ids(conn)


async def test_a_vector_id_is_never_reused_so_a_new_vector_is_never_taken_for_a_removed_one(conn):
    rng = np.random.default_rng(3)
    old = unit(rng, 20)
    await writer.store_vectors(conn, hashes("a", 20), old)
    matrix = VectorMatrix(load_all(conn.path), 2**20)
    assert len((await matrix.current(VectorRows(conn))).ids) == 20
    top = max(await stored_ids(conn))
    # Remove the highest id, as doctor --fix or garbage collection can, then store a new text.
    await conn.execute("BEGIN")
    await conn.execute(f"DELETE FROM {VECTOR_TABLE} WHERE rowid = ?", (top,))
    await conn.execute("DELETE FROM embeddings WHERE id = ?", (top,))
    await conn.execute("COMMIT")
    new = unit(rng, 1)
    await writer.store_vectors(conn, hashes("b", 1), new)
    assert max(await stored_ids(conn)) == top + 1
    got = await matrix.nearest(VectorRows(conn), new[0], 1)
    assert got[0][0] == top + 1 and got[0][1] == pytest.approx(0.0, abs=1e-5)
    assert top not in set(matrix.snapshot.ids.tolist())
    await assert_same_as_sqlite_vec(conn, matrix, unit(rng, 5))


async def test_a_swapped_model_of_another_dimension_is_loaded_again_whole(conn):
    rng = np.random.default_rng(4)
    await writer.store_vectors(conn, hashes("a", 50), unit(rng, 50))
    matrix = VectorMatrix(load_all(conn.path), 2**20)
    assert (await matrix.current(VectorRows(conn))).matrix.shape == (50, DIM)
    # What a switch's swap does (store/sqlite/shadow.py): same ids, new vectors, another dimension.
    ids = await stored_ids(conn)
    new = unit(rng, 50, dim=8)
    await conn.execute("BEGIN")
    await conn.execute(f"DROP TABLE {VECTOR_TABLE}")
    await conn.execute(f"CREATE VIRTUAL TABLE {VECTOR_TABLE} USING vec0(embedding float[8])")
    await conn.executemany(f"INSERT INTO {VECTOR_TABLE}(rowid, embedding) VALUES (?, ?)",
                           [(i, v.tobytes()) for i, v in zip(ids, new)])
    await conn.execute("UPDATE meta SET value = 'other' WHERE key = 'model'")
    await conn.execute("UPDATE meta SET value = '8' WHERE key = 'dimension'")
    await conn.execute("COMMIT")
    await assert_same_as_sqlite_vec(conn, matrix, unit(rng, 5, dim=8))
    assert matrix.snapshot.matrix.shape == (50, 8)


async def test_over_its_memory_budget_sqlite_vec_answers_and_it_is_said_once(conn):
    rng = np.random.default_rng(5)
    await writer.store_vectors(conn, hashes("a", 100), unit(rng, 100))
    matrix = VectorMatrix(load_all(conn.path), 100 * DIM * 4 - 1)  # one byte short
    q = unit(rng, 1)[0]
    with capture_logs() as logs:
        assert await matrix.nearest(VectorRows(conn), q, 5) is None
        assert await matrix.nearest(VectorRows(conn), q, 5) is None
        # The search itself still answers, from sqlite-vec.
        got = await search.vector_scored(conn, q, 5, matrix=matrix)
    assert [e["event"] for e in logs].count("vectors_not_in_memory") == 1
    assert "vector_memory_mb" in next(e for e in logs if e["event"] == "vectors_not_in_memory")["message"]
    assert got == await search.vector_scored(conn, q, 5)
    assert await VectorMatrix(load_all(conn.path), 0).nearest(VectorRows(conn), q, 5) is None  # 0: never kept


def test_an_index_of_schema_3_keeps_its_vectors_and_ids_and_never_reuses_them_after(tmp_path):
    path = tmp_path / "old.sqlite"
    con = connection.connect_sync(path)
    schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    # Make it look like schema 3: embeddings without AUTOINCREMENT, no delete trigger.
    con.execute("DROP TRIGGER embeddings_ad")
    con.execute("DROP TABLE embeddings")
    con.execute("CREATE TABLE embeddings (id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, created_at REAL NOT NULL)")
    con.executemany("INSERT INTO embeddings(id, hash, created_at) VALUES (?, ?, 0)", [(1, "h1"), (5, "h5")])
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.close()

    con = connection.connect_sync(path)
    schema.init_sync(con, model="m", dimension=4, kb_path="/kb")
    assert schema.get_meta_sync(con, "schema_version") == str(schema.SCHEMA_VERSION)
    assert con.execute("SELECT id, hash FROM embeddings ORDER BY id").fetchall() == [(1, "h1"), (5, "h5")]
    assert "AUTOINCREMENT" in con.execute("SELECT sql FROM sqlite_master WHERE name = 'embeddings'").fetchone()[0]
    con.execute("DELETE FROM embeddings WHERE id = 5")
    assert schema.get_meta_sync(con, "vectors_removed") == "1"
    new_id = con.execute("INSERT INTO embeddings(hash, created_at) VALUES ('h6', 0) RETURNING id").fetchone()[0]
    assert new_id == 6
    con.close()


@pytest.fixture(scope="module")
def tagged(tmp_path_factory):
    """120 notes of shared words, one in ten tagged `rare`, indexed with the bag-of-words fake."""
    kb = tmp_path_factory.mktemp("vm-notes")
    for i in range(120):
        tag = "rare" if i % 10 == 3 else "common"
        write(kb / f"n{i:03d}.md", f"---\ntags: [{tag}]\n---\n# Note {i}\n\nvectors in memory {i} ranking"
                                   f" {'twice ranking' if i % 7 == 0 else 'once'} notes.\n\n## More {i}\n\nsqlite scan {i % 13}.\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path_factory.mktemp("vm-idx") / "i.sqlite")
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    return settings


@pytest.mark.parametrize("filters", [{}, {"tags_any": ["rare"]}], ids=["unfiltered", "filtered"])
async def test_a_daemon_search_answers_from_memory_exactly_as_sqlite_vec_does(tagged, filters):
    queries = ["vectors ranking", "sqlite scan 4", "twice notes", "memory 17 once"]
    async with Index.open(tagged, pool=True, embedder=BagOfWordsEmbedder()) as index:
        assert index.searcher.vectors is not None
        await index.warm_vectors()
        assert index.searcher.vectors.snapshot is not None
        from_memory = [await index.search(SearchRequest(query=q, retriever="vector", limit=20, **filters)) for q in queries]
        index.searcher.vectors = None
        from_sqlite_vec = [await index.search(SearchRequest(query=q, retriever="vector", limit=20, **filters)) for q in queries]
    for a, b in zip(from_memory, from_sqlite_vec):
        assert [h.path + h.heading for h in a.results] == [h.path + h.heading for h in b.results]
        assert [h.score for h in a.results] == pytest.approx([h.score for h in b.results], abs=1e-5)
        assert a.results, "each query finds something"
        if filters:
            assert all("rare" in h.tags for h in a.results)


async def test_the_daemon_loads_the_vectors_into_memory_when_it_starts_not_at_the_first_search(tagged):
    from groove.daemon import Daemon
    from tests.support.common import eventually

    daemon = Daemon(tagged, embedder=BagOfWordsEmbedder())
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)

        async def loaded() -> bool:
            return daemon.index.searcher.vectors.snapshot is not None

        await eventually(loaded, "the vectors in memory")
        assert daemon.index.queries.calls == 0  # no search has been made
        snap = daemon.index.searcher.vectors.snapshot
        shown = (await daemon.service.status()).vectors_in_memory
        daemon.stop()
    assert (shown.vectors, shown.mib) == (len(snap.ids), round(len(snap.ids) * snap.matrix.shape[1] * 4 / 2**20, 1))
    con = connection.connect_sync(tagged.resolved_index_path(), readonly=True)
    assert snap.ids.tolist() == [r[0] for r in con.execute("SELECT id FROM embeddings ORDER BY id")]
    con.close()


async def test_a_copy_that_cannot_be_brought_up_to_date_lets_sqlite_vec_answer_and_is_said_once(conn, tmp_path):
    rng = np.random.default_rng(6)
    await writer.store_vectors(conn, hashes("a", 40), unit(rng, 40))
    matrix = VectorMatrix(load_all(tmp_path / "gone" / "v.sqlite"), 2**20)  # its first load cannot open the file
    q = unit(rng, 1)[0]
    with capture_logs() as logs:
        for _ in range(3):
            got = await search.vector_scored(conn, q, 5, matrix=matrix)
            assert got == await search.vector_scored(conn, q, 5)
    assert [e["event"] for e in logs].count("vectors_in_memory_failed") == 1


async def test_index_status_counts_the_vectors_embedded_since_the_copy_was_loaded(kb, make_settings):
    from groove.daemon import Daemon
    from tests.support.common import eventually

    for i in range(12):
        write(kb / f"n{i}.md", f"# Note {i}\n\nfresh words {i} about vectors.\n")
    daemon = Daemon(make_settings(kb), embedder=BagOfWordsEmbedder())
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)

        async def embedded() -> bool:
            st = await daemon.service.status()
            return st.startup_reconcile_done and st.pending_chunks == 0

        await eventually(embedded, "every chunk embedded")
        shown = (await daemon.service.status()).vectors_in_memory
        vectors = (await daemon.service.status()).vectors
        daemon.stop()
    assert vectors > 0 and shown.vectors == vectors  # no search ran: the status brought the copy up to date


async def test_related_notes_from_memory_are_the_ones_sqlite_vec_finds(tagged):
    async with Index.open(tagged, pool=True, embedder=BagOfWordsEmbedder()) as index:
        await index.warm_vectors()
        from_memory = [await index.related(f"n{i:03d}.md", depth=2, limit=15) for i in (0, 3, 50)]
        index.searcher.vectors = None
        from_sqlite_vec = [await index.related(f"n{i:03d}.md", depth=2, limit=15) for i in (0, 3, 50)]
    for a, b in zip(from_memory, from_sqlite_vec):
        assert a.related, "each note has neighbours"
        assert [(r.path, r.depth) for r in a.related] == [(r.path, r.depth) for r in b.related]
        assert [r.score for r in a.related] == pytest.approx([r.score for r in b.related], abs=1e-4)


def test_several_queries_in_one_pass_find_what_each_finds_alone():
    rng = np.random.default_rng(11)
    ids = np.arange(3, 3 + 500, dtype=np.int64) * 2  # ids with gaps, ascending
    m = unit(rng, 500)
    snap = Snapshot((), ids, m, np.einsum("ij,ij->i", m, m))
    queries, ks = list(unit(rng, 3)), [7, 30, 0]
    rows = np.arange(0, 500, 3)
    for subset in (None, rows):
        together = snap.nearest_many(queries, ks, subset)
        alone = [snap.nearest(q, k, subset) for q, k in zip(queries, ks)]
        assert together == alone and [len(t) for t in together] == ks
        pool = m if subset is None else m[subset]
        by_hand = np.linalg.norm(pool - queries[1], axis=1)  # the oracle: every distance, sorted
        assert [d for _, d in together[1]] == pytest.approx(sorted(by_hand)[:30], abs=1e-6)
    got = snap.vectors_of([ids[4], ids[0]])
    assert got is not None and np.array_equal(got[int(ids[4])], m[4]) and np.array_equal(got[int(ids[0])], m[0])
    assert snap.vectors_of([int(ids[0]) + 1]) is None  # an id the snapshot does not hold


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A mixed-language index (120 English, 120 Japanese notes; language centres apply) with 60 low-quality stubs,
    the quality filter on, indexed with the bag-of-words fake."""
    kb = tmp_path_factory.mktemp("vm-mixed")
    for i in range(120):
        write(kb / f"en{i:03d}.md", f"---\ntags: [{'rare' if i % 5 == 0 else 'common'}]\n---\n# Tides {i}\n\n"
                                    f"The moon pulls the ocean {i % 7} into tides, ranking vectors {i % 11} in memory"
                                    f" {'twice' if i % 3 else 'once'} over the sqlite scan.\n")
        write(kb / f"ja{i:03d}.md", f"---\ntags: [{'rare' if i % 5 == 1 else 'common'}]\n---\n# 潮の満ち引き {i}\n\n"
                                    f"月が海を引き寄せて潮が満ちる。ベクトル {i % 9} を記憶の中で順位付けする"
                                    f"{'二度' if i % 4 else '一度'}。\n")
    for i in range(60):  # stubs (quality under 0.3) named like the notes: the floor hides them from every leg
        write(kb / f"stub{i}.md", f"# Tides ocean {i}\n\nTODO\n" if i % 2 else f"# 潮の満ち引き {i}\n\n詳細は後述\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path_factory.mktemp("vm-mixed-idx") / "i.sqlite",
                             **{"quality_filter.enabled": True})
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    return settings


@pytest.mark.parametrize(
    "extra",
    [{}, {"tags_any": ["rare"]}, {"include_low_quality": True}, {"min_quality": 0.9}, {"retriever": "vector"}],
    ids=["floor", "filtered", "no-floor", "high-floor", "vector-only"],
)
async def test_a_mixed_language_search_answers_the_same_from_memory_as_from_sqlite_vec(mixed, extra):
    # The raw and centred KNN in one pass over the copy and the candidates' vectors read from it: the same
    # ids, order and scores as two sqlite-vec scans and the vectors read back from sqlite-vec.
    queries = ["ocean tides ranking", "潮が満ちる ベクトル 3", "vectors in memory twice -once", "月 memory 7"]
    async with Index.open(mixed, pool=True, embedder=BagOfWordsEmbedder()) as index:
        await index.warm_vectors()
        assert index.searcher.vectors is not None and index.searcher.vectors.snapshot is not None
        assert await index.language_centres() is not None  # the centred leg runs
        from_memory = [await index.search(SearchRequest(query=q, limit=20, explain=True, **extra)) for q in queries]
        index.searcher.vectors = None
        from_sqlite_vec = [await index.search(SearchRequest(query=q, limit=20, explain=True, **extra)) for q in queries]
    for a, b in zip(from_memory, from_sqlite_vec):
        assert a.results, "each query finds something"
        assert [h.chunk_id for h in a.results] == [h.chunk_id for h in b.results]
        assert [h.score for h in a.results] == pytest.approx([h.score for h in b.results], rel=1e-6, abs=1e-9)
        assert a.explain["candidates"] == b.explain["candidates"]
        assert a.explain["quality_filter"] == b.explain["quality_filter"]
        assert a.off_topic == b.off_topic


@pytest.fixture(scope="module")
def english(tmp_path_factory):
    """One language (no centres: the vector leg is the raw KNN), 120 notes and 40 low-quality stubs."""
    kb = tmp_path_factory.mktemp("vm-english")
    for i in range(120):
        write(kb / f"en{i:03d}.md", f"---\ntags: [{'rare' if i % 5 == 0 else 'common'}]\n---\n# Tides {i}\n\n"
                                    f"The moon pulls the ocean {i % 7} into tides, ranking vectors {i % 11}.\n")
    for i in range(40):
        write(kb / f"stub{i}.md", f"# Tides ocean {i}\n\nTODO\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path_factory.mktemp("vm-english-idx") / "i.sqlite",
                             **{"quality_filter.enabled": True})
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    return settings


@pytest.mark.parametrize("which", ["mixed", "english"])
@pytest.mark.parametrize("memory", [True, False], ids=["in-memory", "sqlite-vec"])
async def test_explain_names_what_the_floor_hid_from_one_search_and_answers_as_a_plain_search(
    mixed, english, which, memory
):
    # Explain runs the legs once over every chunk and applies the floor itself (no second search): its answer is
    # the plain search's, and the results it says the floor hid are those a search with include_low_quality
    # shows that score under the floor, at the same ranks.
    settings = mixed if which == "mixed" else english
    con = connection.connect_sync(settings.resolved_index_path(), readonly=True)
    rows = con.execute("SELECT c.id, c.quality, d.tags FROM chunks c JOIN documents d ON d.id = c.doc_id").fetchall()
    con.close()
    quality = {cid: q for cid, q, _ in rows}
    rare = {cid for cid, _, tags in rows if "rare" in json.loads(tags)}
    queries = ["ocean tides ranking", "潮が満ちる ベクトル 3", "tides twice -once", "月 memory 7 潮"]
    variants = [{}, {"tags_any": ["rare"]}, {"min_quality": 0.9}, {"retriever": "vector"}, {"retriever": "fts"}]
    hid_any = 0
    async with Index.open(settings, pool=True, embedder=BagOfWordsEmbedder()) as index:
        assert (await index.language_centres() is None) == (which == "english")
        if memory:
            await index.warm_vectors()
        else:
            index.searcher.vectors = None
        for q, limit in [(q, limit) for q in queries for limit in (3, 20)]:  # legs of 50 and of 100 candidates
            for extra in variants:
                explained = await index.search(SearchRequest(query=q, limit=limit, explain=True, **extra))
                plain = await index.search(SearchRequest(query=q, limit=limit, **extra))
                everything = await index.search(
                    SearchRequest(query=q, limit=limit, **{**extra, "include_low_quality": True, "min_quality": None})
                )
                assert [h.chunk_id for h in explained.results] == [h.chunk_id for h in plain.results], (q, extra)
                assert [h.score for h in explained.results] == pytest.approx([h.score for h in plain.results])
                assert (explained.off_topic, explained.low_confidence) == (plain.off_topic, plain.low_confidence)
                floor = extra.get("min_quality", 0.3)
                want = [(i, h.chunk_id) for i, h in enumerate(everything.results, 1) if quality[h.chunk_id] < floor]
                hidden = explained.explain["quality_filter"]["hidden_results"]
                assert [(h["rank"], h["chunk_id"]) for h in hidden] == want, (q, extra)
                hid_any += bool(want)
                if "-" not in q and extra.get("retriever") != "fts":  # the vector leg is as deep as without explain
                    kept = [c for c in quality if quality[c] >= floor and ("tags_any" not in extra or c in rare)]
                    assert explained.explain["candidates"]["vector"] == min(pool_size(limit), len(kept)), (q, extra)
    assert hid_any >= 4  # the floor hid something from several of these searches
