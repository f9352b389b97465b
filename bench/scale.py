"""`scale`: search at 10k and 100k chunks over HTTP: warm p50/p95, a 1% tag filter, the worst FTS query, RSS, start-up.

The notes are real text: SciFact abstracts and JaQuAD paragraphs from
`../shared/data`, each written as `--variants` notes (variant v rotates the
text's sentences by v and titles it "(v)"), so the index has the corpora's
own words, languages and lengths, and no two chunks are the same text. One
note in 100 carries the tag `scale-rare` (the 1% filter); every note carries
`scale-common`.

The index is built by groove itself (`groove.index.index_once`: scan, parse,
chunk with the real model's token counts, FTS rows) with one cheap part:
**document vectors come from a hash-seeded embedder** (a unit Gaussian vector
of the model's dimension seeded by the text's hash, in numpy), under the real
model's identity, so the daemon opens the index with the real model and embeds
its *queries* for real. KNN over these vectors costs what KNN over real ones
costs (sqlite-vec's scan is brute force); what they rank is meaningless, so
this bench measures speed only, never quality.

Then, for each size, `groove serve --transport http` runs as a subprocess on
the index (the default configuration: the multilingual model) and the bench
measures, with the Python SDK's client:

- start-up: seconds to `/healthz`, and to the first answered search;
- warm search p50 / p95 (SciFact and JaQuAD queries, after warm-up) and the
  server's CPU per search, read from /proc (CPU time does not depend on the
  other load of a shared machine the way wall time does);
- the same queries filtered to `scale-rare` (1% of notes);
- the worst FTS query: 32 common phrases (p50 over repeats);
- the daemon's RSS (VmRSS after the queries, VmHWM its peak).

Every timed search is a plain one, as a client sends it. The server's own
timings per part (full text, embedding, KNN) come from a pass of the same
queries with `explain` after the timed one, timed apart (`explained`, with its
own CPU per search: what `explain` costs on top).

Ratios: `filtered_over_unfiltered`, `worst_over_p50`, and the growth factor
`p50_100k_over_10k` when both sizes run. `--baseline DIR` also serves the
same index with another checkout's groove (its `.venv/bin/python`, e.g.
/work/main) in the same run, for before / after figures.

`--stores sqlite,postgresql` puts the two stores side by side: after the
SQLite index of a size is built (as above), `groove.store.copy.copy_store`
copies it, ids and vectors included, into a new PostgreSQL database (timed:
`copy`), and a search node (`groove serve --store URL`, no notes folder)
answers the same queries, measured the same way, right after the SQLite
server's turn. The server's own CPU per query (every backend, read from
/proc when the server runs here) is added to the search node's, and the
backends' private memory to its RSS. Ratios `<size>_postgresql_over_sqlite_*`:
warm p50 / p95, explained p50, filtered, worst, each leg's server p50 and the CPU
per query. The label `this` is the SQLite store served by this checkout.
`--stores postgresql` still builds the SQLite index (it is the copy's
source) but serves only the database: for sizes where the SQLite server is
not the question. The PostgreSQL server: `--postgres-url URL` (an
administrator's URL; the bench creates and drops `bench_scale_<size>`
there), else one the `pgserver` wheel starts under `--workdir` (bench/postgres.py).
With postgresql, `--nodes N` (default 2) then measures throughput: `--clients`
concurrent clients (default 8) on one search node, against the same clients
spread over N search nodes of the same database (`node_throughput`).

Build cost: about 2 minutes per 10k chunks on 2 shared cores (the build is
kept under `--workdir` and reused by the next run).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bench.common import BenchError, Report, data_dir, make_settings, ratio, summary
from bench.http import Server
from bench.postgres import PostgresServer, process_cpu_s

DEFAULT_SIZES = "10000,100000"
DEFAULT_VARIANTS = 6
DEFAULT_QUERIES = 40
RARE_TAG = "scale-rare"
COMMON_TAG = "scale-common"
# 32 common words of both corpora: a query the compiler turns into 32 phrases that match most chunks.
WORST_QUERY = (
    "the with that from this were which have been their these between after also other more"
    " than into during only both there about such some those when could would each most over"
)
_SENT = re.compile(r"(?<=[.!?。])\s*")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        help=f"chunk counts to build and measure, comma separated (default {DEFAULT_SIZES})",
    )
    p.add_argument(
        "--variants",
        type=int,
        default=DEFAULT_VARIANTS,
        help=f"notes written per source text at the largest size (default {DEFAULT_VARIANTS})",
    )
    p.add_argument(
        "--queries", type=int, default=DEFAULT_QUERIES, help=f"queries per latency pass (default {DEFAULT_QUERIES})"
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/groove-scale"),
        help="where the notes and indexes are built and kept (default /tmp/groove-scale)",
    )
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="DIR",
        help="also serve each index with the groove checkout in DIR (its .venv/bin/python)",
    )
    p.add_argument(
        "--build-max",
        type=int,
        default=20000,
        metavar="N",
        help="sizes above N are copies of the largest size at or below it (default 20000; see replicate())",
    )
    p.add_argument(
        "--baseline-filtered",
        type=int,
        default=6,
        metavar="N",
        help="filtered queries sent to the baseline (default 6: it can take seconds each)",
    )
    p.add_argument("--rebuild", action="store_true", help="build the notes and indexes again even if present")
    p.add_argument(
        "--stores",
        default="sqlite",
        help="the stores serving each size, comma separated: sqlite, postgresql (the index copied into a new"
        " database, served by a search node); default sqlite",
    )
    p.add_argument(
        "--postgres-url",
        default=None,
        metavar="URL",
        help="an administrator's URL of the PostgreSQL server to use (the bench creates its databases there);"
        " default: one started with pgserver under --workdir",
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=2,
        metavar="N",
        help="with postgresql: also measure throughput of --clients concurrent clients on one search node against"
        " N search nodes of the same database (default 2; 1 skips it)",
    )
    p.add_argument("--clients", type=int, default=8, help="concurrent clients of the throughput pass (default 8)")


# --- the notes -------------------------------------------------------------------------------


def _rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def source_texts(data: Path) -> list[tuple[str, str]]:
    """(title, text) of every SciFact abstract and JaQuAD paragraph, interleaved (both languages at every size)."""
    sci = [
        (r.get("title") or r["_id"], r["text"]) for r in _rows(data / "scifact" / "corpus.jsonl") if r["text"].strip()
    ]
    ja = [(r.get("title") or r["_id"], r["text"]) for r in _rows(data / "jaquad" / "corpus.jsonl") if r["text"].strip()]
    out: list[tuple[str, str]] = []
    for i in range(max(len(sci), len(ja))):
        if i < len(ja):
            out.append(ja[i])
        if i < len(sci):
            out.append(sci[i])
    return out


def variant(text: str, v: int) -> str:
    sents = [s for s in _SENT.split(text) if s]
    if len(sents) < 2 or v == 0:
        return text if v == 0 else f"{text}\n\n({v})"
    k = v % len(sents)
    return " ".join(sents[k:] + sents[:k]) + ("" if k else f"\n\n({v})")


def write_notes(kb: Path, texts: Sequence[tuple[str, str]], n_notes: int, variants: int) -> int:
    kb.mkdir(parents=True, exist_ok=True)
    written = 0
    for v in range(variants):
        for i, (title, text) in enumerate(texts):
            if written >= n_notes:
                return written
            tags = [COMMON_TAG] + ([RARE_TAG] if written % 100 == 0 else [])
            title_line = title.replace("\n", " ").strip()
            body = f"---\ntags: [{', '.join(tags)}]\n---\n# {title_line} ({v})\n\n{variant(text, v)}\n"
            (kb / f"v{v}").mkdir(exist_ok=True)
            (kb / f"v{v}" / f"n{i:06d}.md").write_text(body, encoding="utf-8")
            written += 1
    return written


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef]")
_WORDS = re.compile(r"[^\W_]+|[^\w\s]", re.UNICODE)


def estimate_tokens(text: str) -> int:
    """e5's word pieces, estimated: about 0.64 per CJK character, 1.42 per other word or sign (+2 specials).
    The real tokenizer, called by the chunker many times per chunk, would make the 100k build take
    an hour and a half here; the estimate moves a few chunk boundaries of the longest notes only."""
    cjk = len(_CJK.findall(text))
    other = len(_WORDS.findall(_CJK.sub(" ", text)))
    return int(0.64 * cjk + 1.42 * other) + 2


class CheapVectors:
    """The real model's identity and query vectors; token counts estimated; document vectors from the text's hash."""

    def __init__(self, real: Any):
        self.real = real

    identity = property(lambda self: self.real.identity)
    dimension = property(lambda self: self.real.dimension)
    max_tokens = property(lambda self: self.real.max_tokens)

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def embed_documents(self, texts: Sequence[str], dimension: int | None = None) -> np.ndarray:
        dim = dimension or self.dimension
        out = np.empty((len(texts), dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(), "little")
            out[i] = np.random.default_rng(seed).standard_normal(dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.real.embed_queries(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.real.embed_query(text)


def build(work: Path, data: Path, chunks: int, variants: int, rebuild: bool) -> dict[str, Any]:
    """Notes and index of about `chunks` chunks under work/<chunks>; reused when present."""
    from groove.embed.embedder import make_embedder
    from tests.support.oneshot import index_once

    root = work / str(chunks)
    kb, index = root / "notes", root / "index.sqlite"
    done = root / "build.json"
    if done.exists() and not rebuild:
        return json.loads(done.read_text())
    if root.exists():
        subprocess.run(["rm", "-rf", str(root)], check=True)
    root.mkdir(parents=True)
    texts = source_texts(data)
    # About 1.15 chunks per SciFact note and 1.0 per JaQuAD paragraph with the default model.
    n_notes = int(chunks / 1.07)
    if n_notes > len(texts) * variants:
        raise BenchError(f"{chunks} chunks need more than {variants} variants of {len(texts)} texts; pass --variants")
    t = time.perf_counter()
    notes = write_notes(kb, texts, n_notes, variants)
    write_s = time.perf_counter() - t
    settings = make_settings(root, kb, index)
    embedder = CheapVectors(make_embedder(settings.embedding))
    t = time.perf_counter()
    summary_ = anyio.run(lambda: index_once(settings, embedder=embedder))
    info = {
        "notes": notes,
        "chunks": summary_.chunks_written,  # a fresh index: every chunk (the count below replaces it)
        "write_s": round(write_s, 1),
        "index_s": round(time.perf_counter() - t, 1),
        "kb": str(kb),
        "index": str(index),
        "index_mb": round(index.stat().st_size / 2**20, 1),
        "summary": summary_,
    }
    import sqlite3

    con = sqlite3.connect(index)
    info["chunks"] = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    con.close()
    done.write_text(json.dumps(info, default=str))
    return info


def replicate(work: Path, base: dict[str, Any], chunks: int, rebuild: bool) -> dict[str, Any]:
    """An index of about `chunks` chunks made from a groove-built `base` and copies of it: the cheap
    pass for the largest size (groove's own indexer runs at 15-50 chunks/s on this loaded machine).

    Copy r of a note is `r<r>/<path>`: the note's file with a line `(r)` added, and its rows
    (document, tags, chunks with `(r)` added to each chunk's text, so every chunk is its own
    text with its own vector) written in groove's schema, through its FTS triggers. The files
    exist with the sizes and mtimes the rows record, so the daemon's startup reconcile finds
    the folder unchanged, as it would after `groove index`.
    """
    import hashlib as _hashlib
    import shutil

    from groove.store.sqlite import connection

    root = work / str(chunks)
    done = root / "build.json"
    if done.exists() and not rebuild:
        return json.loads(done.read_text())
    if root.exists():  # a half-built copy: out of the way at once, removed in the background
        aside = root.with_name(f"{root.name}.old-{time.time_ns()}")
        root.rename(aside)
        subprocess.Popen(["rm", "-rf", str(aside)])
    root.mkdir(parents=True)
    (root / "groove.toml").write_text("# benchmark: groove defaults\n", encoding="utf-8")
    kb, index = root / "notes", root / "index.sqlite"
    t = time.perf_counter()
    con = connection.connect_sync(base["index"])
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    shutil.copyfile(base["index"], index)
    shutil.copytree(base["kb"], kb)
    con = connection.connect_sync(index)
    docs = con.execute(
        "SELECT id, path, title, tags, date, frontmatter, warnings FROM documents ORDER BY id"
    ).fetchall()
    tags: dict[int, list[str]] = {}
    for doc_id, tag in con.execute("SELECT doc_id, tag FROM doc_tags"):
        tags.setdefault(doc_id, []).append(tag)
    rows: dict[int, list[tuple]] = {}
    for r in con.execute(
        "SELECT doc_id, ordinal, heading, level, context, content, start_line, end_line, token_count"
        " FROM chunks ORDER BY doc_id, ordinal"
    ):
        rows.setdefault(r[0], []).append(r[1:])
    have = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    vectors = CheapVectors(None)
    vectors_dim = int(con.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()[0])
    copy = 0
    while have < chunks:
        copy += 1
        now = time.time()
        con.execute("BEGIN")
        for doc_id, path, title, tags_json, date, front, warnings in docs:
            if have >= chunks:
                break
            rel = f"r{copy}/{path}"
            dest = kb / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            data = (kb / path).read_bytes() + f"\n({copy})\n".encode()
            dest.write_bytes(data)
            st = dest.stat()
            cur = con.execute(
                "INSERT INTO documents"
                "(path, title, tags, date, frontmatter, warnings, size, mtime_ns, hash, indexed_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rel,
                    title,
                    tags_json,
                    date,
                    front,
                    warnings,
                    st.st_size,
                    st.st_mtime_ns,
                    _hashlib.sha256(data).hexdigest(),
                    now,
                ),
            )
            new_doc = cur.lastrowid
            con.executemany(
                "INSERT INTO doc_tags(doc_id, tag) VALUES (?, ?)", [(new_doc, tg) for tg in tags.get(doc_id, [])]
            )
            texts = [f"{c[4]}\n({copy})" for c in rows.get(doc_id, [])]
            vecs = vectors.embed_documents(texts, vectors_dim)
            for c, text, vec in zip(rows.get(doc_id, []), texts, vecs, strict=True):
                h = _hashlib.sha256(text.encode()).hexdigest()
                row = con.execute("SELECT id FROM embeddings WHERE hash = ?", (h,)).fetchone()
                if row is not None:  # the same text twice in the corpus: one vector, as groove stores it
                    emb = row[0]
                else:
                    emb = con.execute("INSERT INTO embeddings(hash, created_at) VALUES (?, ?)", (h, now)).lastrowid
                    con.execute("INSERT INTO vec_embeddings(rowid, embedding) VALUES (?, ?)", (emb, vec.tobytes()))
                con.execute(
                    "INSERT INTO chunks(doc_id, ordinal, heading, level, context, content, start_line, end_line,"
                    " token_count, hash, embedding_id, queued_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (new_doc, c[0], c[1], c[2], c[3], text, c[5], c[6], c[7], h, emb, now),
                )
                have += 1
        con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    notes = con.execute("SELECT count(*) FROM documents").fetchone()[0]
    con.close()
    info = {
        "notes": notes,
        "chunks": have,
        "write_s": 0.0,
        "index_s": round(time.perf_counter() - t, 1),
        "kb": str(kb),
        "index": str(index),
        "index_mb": round(index.stat().st_size / 2**20, 1),
        "built_from": base["index"],
        "copies": copy,
    }
    done.write_text(json.dumps(info, default=str))
    return info


# --- measuring ---------------------------------------------------------------------------------


def scale_queries(data: Path, n: int) -> list[str]:
    sci = [r["text"] for r in _rows(data / "scifact" / "queries.jsonl")][: n // 2]
    ja = [r["text"] for r in _rows(data / "jaquad" / "queries.jsonl")][: n - n // 2]
    return [q for pair in zip(sci, ja, strict=False) for q in pair]  # pairs: an odd n leaves one JaQuAD query out


def _rss(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(line.split()[1]) / 1024, 1)
    return out


async def _search(client, query: str, filters: dict | None = None, explain: bool = False) -> tuple[float, dict]:
    args: dict[str, Any] = {"query": query, "limit": 10, "explain": explain}
    if filters:
        args.update(filters)  # the tool takes the filter keys at the top level
    t = time.perf_counter()
    result = await client.call_tool("search", args)
    ms = (time.perf_counter() - t) * 1000
    if result.is_error:
        raise BenchError(f"search tool error for {query!r}: {result.content}")
    sc = result.structured_content or {}
    body = sc.get("result", sc)
    return ms, body


# The memory figures also follow this many clients searching at once (each its own MCP session): a daemon's
# memory under concurrent searches is not its memory after sequential ones (issue 39).
CONCURRENT_CLIENTS = 8


async def _concurrent_rss(server: Server, queries: list[str]) -> dict[str, float]:
    """VmRSS / VmHWM after CONCURRENT_CLIENTS sessions, opened together, each sent every query once at the
    same time as the others (plain searches)."""
    from mcp import Client

    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(Client(server.url)) for _ in range(CONCURRENT_CLIENTS)]

        async def client(k: int) -> None:
            for q in queries[k:] + queries[:k]:  # each client its own order
                await _search(sessions[k], q)

        async with anyio.create_task_group() as tg:
            for k in range(CONCURRENT_CLIENTS):
                tg.start_soon(client, k)
    return _rss(server.proc.pid)


async def settled(client: Any) -> float:
    """Wait until the daemon's startup reconcile (a stat of every note: about 5 s of CPU at 100k)
    is done, so that warm searches do not share the cores with it; the seconds waited. /healthz
    does not say; the index_status tool does."""
    t = time.perf_counter()
    for _ in range(600):
        st = await client.call_tool("index_status", {})
        body = st.structured_content or {}
        body = body.get("result", body)
        if body.get("startup_reconcile_done") and not body.get("reindex_running"):
            return round(time.perf_counter() - t, 2)
        await anyio.sleep(0.5)
    raise BenchError("the daemon's startup reconcile did not finish within 300 s")


# The timings of the index's own work in a search's `explain`: every full-text leg
# (groove.search.pipeline.FULL_TEXT_LEGS: trigram, the English word table, CJK bigrams) and the KNN.
# Written out rather than imported (the pipeline costs most of a second to import, and every
# `python -m bench` imports this module); tests/test_bench_report.py checks it against FULL_TEXT_LEGS.
INDEX_WORK_TIMINGS = ("trigram_ms", "words_ms", "bigram_ms", "vector_ms")


def _server_parts(bodies: list[dict]) -> dict[str, float]:
    parts: dict[str, list[float]] = {}
    for b in bodies:
        timings = (b.get("explain") or {}).get("timings_ms") or {}
        for k, v in timings.items():
            parts.setdefault(k, []).append(v)
        # The index's own work: the full-text legs and the KNN (what the size of the index drives;
        # the query embedding is the model's, and on a loaded machine it is most of the noise), as the wall
        # of the whole: the full-text half (`fulltext_ms`: its legs run at once on two connections, so their
        # own walls overlap and summing them counted the overlap twice) and then the KNN. A server from
        # before `fulltext_ms` gives only the legs' own walls: their sum, kept apart as `index_work_sum_ms`.
        summed = sum(timings.get(k, 0.0) for k in INDEX_WORK_TIMINGS)
        if "fulltext_ms" in timings:
            parts.setdefault("index_work_ms", []).append(timings["fulltext_ms"] + timings.get("vector_ms", 0.0))
        else:
            parts.setdefault("index_work_sum_ms", []).append(summed)
    return {k: summary(v)["p50_ms"] for k, v in sorted(parts.items())}


async def measure(
    python: str,
    cwd: Path,
    build_info: dict,
    queries: list[str],
    label: str,
    log: Path,
    filtered_queries: int | None = None,
    store: tuple[PostgresServer, str, str] | None = None,
) -> dict[str, Any]:
    """One server on the index of `build_info` (module doc); with `store` (the PostgreSQL server, the database's
    name and URL), a search node of that database instead."""
    from mcp import Client

    root = Path(build_info["index"]).parent
    config = root / "groove.toml"
    if store is None:
        server = Server(config, Path(build_info["kb"]), Path(build_info["index"]), log, python=python, cwd=cwd)
    else:
        server = Server(config, None, None, log, python=python, cwd=cwd, store=store[2])
    pg = store[0] if store else None
    t0 = time.perf_counter()
    out: dict[str, Any] = {"label": label}
    try:
        await server.wait_ready()
        out["healthz_s"] = round(time.perf_counter() - t0, 2)
        async with Client(server.url) as client:
            await _search(client, queries[0])
            out["first_search_s"] = round(time.perf_counter() - t0, 2)
            out["startup_reconcile_s"] = await settled(client)
            for q in queries[:5]:
                await _search(client, q)

            async def timed(explain: bool) -> tuple[list[float], list[dict], dict[str, float]]:
                lat, bodies = [], []
                cpu0, pg0 = process_cpu_s(server.proc.pid), (pg.cpu_s() if pg else None)
                for q in queries:
                    ms, body = await _search(client, q, explain=explain)
                    lat.append(ms)
                    bodies.append(body)
                cpu1, pg1 = process_cpu_s(server.proc.pid), (pg.cpu_s() if pg else None)
                per_query = {"groove": round((cpu1 - cpu0) * 1000 / len(queries), 1)}
                if pg0 is not None and pg1 is not None:
                    per_query["postgres"] = round((pg1 - pg0) * 1000 / len(queries), 1)
                per_query["total"] = round(sum(per_query.values()), 1)
                return lat, bodies, per_query

            lat, _, out["warm_cpu_ms_per_query"] = await timed(explain=False)
            out["warm"] = summary(lat)
            lat, bodies, out["explained_cpu_ms_per_query"] = await timed(explain=True)
            out["explained"] = summary(lat)
            out["warm_server_p50_ms"] = _server_parts(bodies)
            flat, fbodies = [], []
            # The baseline's filtered search took 12.6 s p50 at 100k chunks: a few queries tell.
            for q in queries[: filtered_queries or len(queries)]:
                ms, body = await _search(client, q, {"tags_any": [RARE_TAG]})
                flat.append(ms)
                if any(RARE_TAG not in r.get("tags", []) for r in body.get("results", [])):
                    raise BenchError("a filtered search returned a note without the tag")
                fbodies.append((await _search(client, q, {"tags_any": [RARE_TAG]}, explain=True))[1])
            out["filtered"] = summary(flat)
            out["filtered_server_p50_ms"] = _server_parts(fbodies)
            worst = [(await _search(client, WORST_QUERY))[0] for _ in range(7)]
            wbodies = [(await _search(client, WORST_QUERY, explain=True))[1] for _ in range(3)]
            out["worst"] = summary(worst)
            out["worst_phrases"] = len((wbodies[0].get("explain") or {}).get("positives") or [])
            out["worst_server_p50_ms"] = _server_parts(wbodies)
        out["rss_mb"] = _rss(server.proc.pid)  # after the queries above, one client, one after another
        out["concurrent_clients"] = CONCURRENT_CLIENTS
        out["rss_concurrent_mb"] = await _concurrent_rss(server, queries)
        if store is not None:
            memory = store[0].backend_memory_mb(store[1])
            if memory is not None:
                out["postgres_memory"] = memory
    finally:
        server.stop()
    return out


async def node_throughput(
    python: str,
    cwd: Path,
    build_info: dict,
    queries: list[str],
    store: tuple[PostgresServer, str, str],
    nodes: int,
    clients: int,
    logs: Path,
    rounds: int = 2,
) -> dict[str, Any]:
    """`clients` concurrent MCP clients searching one database through 1 search node, then through `nodes` of them
    (client i on node i mod n), the order alternated each round; every client sends the same searches (the queries
    rotated by its number, no explain) in both. Per count of nodes: searches per second (wall) and CPU ms per
    search (every node's process and the PostgreSQL server's, from /proc), the median over the rounds."""
    from mcp import Client

    pg, _, url = store
    config = Path(build_info["index"]).parent / "groove.toml"
    servers = [
        Server(config, None, None, logs / f"node-{i}.log", python=python, cwd=cwd, store=url) for i in range(nodes)
    ]
    per_client = max(len(queries) // 2, 10)
    runs: dict[int, list[tuple[float, float]]] = {1: [], nodes: []}
    try:
        for server in servers:
            await server.wait_ready()
            async with Client(server.url) as client:
                await settled(client)
                for q in queries[:5]:
                    await _search(client, q, explain=False)

        async def one_client(i: int, n: int) -> None:
            async with Client(servers[i % n].url) as client:
                for k in range(per_client):
                    await _search(client, queries[(i * 7 + k) % len(queries)], explain=False)

        for r in range(rounds):
            for n in (1, nodes) if r % 2 == 0 else (nodes, 1):
                cpu0 = sum(process_cpu_s(s.proc.pid) for s in servers) + (pg.cpu_s() or 0.0)
                t = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for i in range(clients):
                        tg.start_soon(one_client, i, n)
                wall = time.perf_counter() - t
                cpu = sum(process_cpu_s(s.proc.pid) for s in servers) + (pg.cpu_s() or 0.0) - cpu0
                runs[n].append((clients * per_client / wall, cpu * 1000 / (clients * per_client)))
    finally:
        for server in servers:
            server.stop()
    out: dict[str, Any] = {"clients": clients, "searches_per_client": per_client, "rounds": rounds}
    for n, got in runs.items():
        out[f"{n}_node" + ("s" if n > 1 else "")] = {
            "searches_per_s": round(float(np.median([g[0] for g in got])), 1),
            "cpu_ms_per_search": round(float(np.median([g[1] for g in got])), 1),
        }
    return out


STORES = ("sqlite", "postgresql")
# What the two stores are compared on: (name, where it is in a measurement); each leg's server p50 below.
COMPARED = (
    ("warm_p50", ("warm", "p50_ms")),
    ("warm_p95", ("warm", "p95_ms")),
    ("explained_p50", ("explained", "p50_ms")),
    ("filtered_p50", ("filtered", "p50_ms")),
    ("worst_p50", ("worst", "p50_ms")),
    ("index_work", ("warm_server_p50_ms", "index_work_ms")),
    ("cpu_per_query", ("warm_cpu_ms_per_query", "total")),
)
LEGS = ("bigram_ms", "words_ms", "trigram_ms", "vector_ms", "embed_ms")


def parse_stores(text: str) -> list[str]:
    stores = [s.strip() for s in str(text).split(",") if s.strip()]
    unknown = [s for s in stores if s not in STORES]
    if unknown or not stores:
        raise BenchError(f"--stores takes {', '.join(STORES)} (comma separated), not {text!r}")
    return stores


def _at(m: dict[str, Any], where: tuple[str, str]) -> float:
    value = (m.get(where[0]) or {}).get(where[1])
    return float(value) if isinstance(value, (int, float)) else float("nan")


def copy_into(pg: PostgresServer, info: dict[str, Any], key: str) -> tuple[str, str, dict[str, Any]]:
    """The size's SQLite index copied into a new database `bench_scale_<key>` (copy_store: ids and vectors, no
    embedding); its name, URL and what the copy took (wall, this process's CPU, the server's CPU)."""
    from groove.store.address import address
    from groove.store.copy import copy_store

    name = f"bench_scale_{key}"
    url = pg.database(name)
    shown = {"at": 0.0}

    def progress(what: str, n: int, total: int) -> None:
        now = time.perf_counter()
        if now - shown["at"] >= 30 or (total and n >= total):
            shown["at"] = now
            sys.stderr.write(f"scale {key}: copy {what} {n}/{total}, {now - t:.0f} s\n")

    cpu, server = time.process_time(), pg.cpu_s()
    t = time.perf_counter()
    done = copy_store(address(None, Path(info["index"])), address(url, Path()), folder="notes", progress=progress)
    wall = time.perf_counter() - t
    server_after = pg.cpu_s()
    out: dict[str, Any] = {
        "seconds": round(wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
        "chunks_per_s": round(done.rows.get("chunks", 0) / wall, 1) if wall else float("nan"),
        "database_mb": pg.size_mb(name),
        "rows": done.rows,
    }
    if server is not None and server_after is not None:
        out["server_cpu_s"] = round(server_after - server, 1)
    return name, url, out


async def run(args: argparse.Namespace) -> Report:
    data = data_dir(getattr(args, "data", None))
    if not (data / "jaquad" / "corpus.jsonl").exists():
        raise BenchError(
            f"{data}/jaquad/corpus.jsonl is missing; --data must point at the folder holding scifact/ and jaquad/"
        )
    sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    stores = parse_stores(args.stores)
    report = Report("scale", "search at 10k and 100k chunks over HTTP (document vectors from a hash-seeded pass)")
    report.params = {
        "sizes": sizes,
        "variants": args.variants,
        "queries": args.queries,
        "baseline": str(args.baseline) if args.baseline else None,
        "stores": stores,
    }
    args.workdir.mkdir(parents=True, exist_ok=True)
    queries = scale_queries(data, args.queries)
    results: dict[str, Any] = {}
    built: dict[int, dict] = {}
    with contextlib.ExitStack() as stack:
        pg = None
        if "postgresql" in stores:
            pg = stack.enter_context(PostgresServer(args.postgres_url, args.workdir))
            report.params["postgres"] = pg.settings()
        for size in sizes:
            # The cheap pass: copies of the largest index groove itself built (never of a copy: a copy's
            # paths r<k>/... would collide with the copies made of it).
            smaller = [
                b for b in sorted(built) if b < size and size > args.build_max and not built[b].get("built_from")
            ]
            if smaller:
                info = await anyio.to_thread.run_sync(replicate, args.workdir, built[smaller[-1]], size, args.rebuild)
            else:
                info = await anyio.to_thread.run_sync(build, args.workdir, data, size, args.variants, args.rebuild)
            built[size] = info
            key = f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else str(size)
            results[key] = {"build": {k: info[k] for k in ("notes", "chunks", "write_s", "index_s", "index_mb")}}
            servers: list[tuple[str, str, Path]] = []
            if "sqlite" in stores:
                servers.append(("this", sys.executable, Path.cwd()))
                if args.baseline:
                    servers.insert(0, ("baseline", str(args.baseline / ".venv" / "bin" / "python"), args.baseline))
            if pg is not None:
                servers.append(("postgresql", sys.executable, Path.cwd()))
            for label, python, cwd in servers:
                store = None
                if label == "postgresql":
                    assert pg is not None
                    name, url, results[key]["copy"] = await anyio.to_thread.run_sync(copy_into, pg, info, key)
                    store = (pg, name, url)
                m = await measure(
                    python,
                    cwd,
                    info,
                    queries,
                    label,
                    args.workdir / f"serve-{key}-{label}.log",
                    args.baseline_filtered if label == "baseline" else None,
                    store,
                )
                if store is not None and args.nodes > 1:
                    results[key]["nodes"] = tp = await node_throughput(
                        python, cwd, info, queries, store, args.nodes, args.clients, args.workdir
                    )
                    many = f"{args.nodes}_nodes"
                    report.ratios[f"{key}_postgresql_{many}_over_1_node_searches_per_s"] = ratio(
                        tp[many]["searches_per_s"], tp["1_node"]["searches_per_s"]
                    )
                    report.ratios[f"{key}_postgresql_{many}_over_1_node_cpu_per_search"] = ratio(
                        tp[many]["cpu_ms_per_search"], tp["1_node"]["cpu_ms_per_search"]
                    )
                if store is not None:
                    assert pg is not None
                    pg.drop(store[1])  # the next size's copy needs the disk more than this one
                results[key][label] = m
                report.ratios[f"{key}_{label}_filtered_over_unfiltered"] = ratio(
                    m["filtered"]["p50_ms"], m["warm"]["p50_ms"]
                )
                report.ratios[f"{key}_{label}_worst_over_p50"] = ratio(m["worst"]["p50_ms"], m["warm"]["p50_ms"])
                report.ratios[f"{key}_{label}_filtered_over_unfiltered_index_work"] = ratio(
                    _at(m, ("filtered_server_p50_ms", "index_work_ms")), _at(m, ("warm_server_p50_ms", "index_work_ms"))
                )
                if label == "this" and args.baseline:
                    b = results[key]["baseline"]
                    report.ratios[f"{key}_p50_baseline_over_this"] = ratio(b["warm"]["p50_ms"], m["warm"]["p50_ms"])
                    report.ratios[f"{key}_filtered_baseline_over_this"] = ratio(
                        b["filtered"]["p50_ms"], m["filtered"]["p50_ms"]
                    )
                    report.ratios[f"{key}_filtered_index_work_baseline_over_this"] = ratio(
                        _at(b, ("filtered_server_p50_ms", "index_work_ms")),
                        _at(m, ("filtered_server_p50_ms", "index_work_ms")),
                    )
            if "this" in results[key] and "postgresql" in results[key]:
                lite, pgm = results[key]["this"], results[key]["postgresql"]
                for what, where in COMPARED:
                    report.ratios[f"{key}_postgresql_over_sqlite_{what}"] = ratio(_at(pgm, where), _at(lite, where))
                for leg in LEGS:
                    where = ("warm_server_p50_ms", leg)
                    report.ratios[f"{key}_postgresql_over_sqlite_{leg[:-3]}"] = ratio(_at(pgm, where), _at(lite, where))
    for label in ("this", "postgresql"):
        if label in results.get("10k", {}) and label in results.get("100k", {}):
            name = "" if label == "this" else "postgresql_"
            report.ratios[f"{name}p50_100k_over_10k"] = ratio(
                results["100k"][label]["warm"]["p50_ms"], results["10k"][label]["warm"]["p50_ms"]
            )
            report.ratios[f"{name}index_work_100k_over_10k"] = ratio(
                _at(results["100k"][label], ("warm_server_p50_ms", "index_work_ms")),
                _at(results["10k"][label], ("warm_server_p50_ms", "index_work_ms")),
            )
    report.raw = results
    report.notes.append("document vectors are hash-seeded (speed only); queries are embedded by the real default model")
    if pg is not None:
        report.notes.append(
            "postgresql: a search node (groove serve --store URL, no notes folder) over a copy of the same index;"
            " its cpu per query adds the PostgreSQL server's CPU (every backend) to the node's"
        )
    return report


def main_async(args: argparse.Namespace) -> Report:
    t = time.perf_counter()
    report = anyio.run(run, args)
    report.seconds = time.perf_counter() - t
    return report
