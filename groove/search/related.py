"""Related notes: the notes nearest in meaning to a given note, optionally a few hops out.

A note's vector is the normalised mean of its chunk vectors. One hop asks the
vector index for the chunks nearest that vector and groups them by note (a
note scores by its best chunk; cosine similarity). The walk is breadth-first
from the source, each visited note expanding to its `fan_out` nearest unseen
notes; a note reached over several hops scores the product of the hop
similarities along its path. It is bounded whatever the note: depth <= 3,
fan-out <= 20, a node budget and a time budget, and says when a bound cut it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import aiosqlite
import numpy as np

from groove.errors import GrooveError
from groove.search import retrievers
from groove.store.vectors import VectorMatrix

MAX_DEPTH = 3
MAX_FAN_OUT = 20
MAX_NODES = 200
MAX_CHUNKS_PER_NOTE = 256


class RelatedError(GrooveError, ValueError):
    pass


@dataclass
class Neighbour:
    path: str
    similarity: float
    chunk: dict[str, Any]


@dataclass
class Node:
    path: str
    score: float
    depth: int
    via: list[str]
    chunk: dict[str, Any] = field(default_factory=dict)


def validate(limit: int, depth: int, fan_out: int, max_nodes: int) -> None:
    if not 1 <= limit <= 100:
        raise RelatedError(f"limit must be between 1 and 100, got {limit}")
    if not 1 <= depth <= MAX_DEPTH:
        raise RelatedError(f"depth must be between 1 and {MAX_DEPTH}, got {depth}")
    if not 1 <= fan_out <= MAX_FAN_OUT:
        raise RelatedError(f"fan_out must be between 1 and {MAX_FAN_OUT}, got {fan_out}")
    if not 1 <= max_nodes <= MAX_NODES:
        raise RelatedError(f"max_nodes must be between 1 and {MAX_NODES}, got {max_nodes}")


async def walk(
    source: str,
    neighbours: Callable[[str, set[str]], Awaitable[list[Neighbour]]],
    *,
    depth: int,
    fan_out: int,
    max_nodes: int,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[Node], dict[str, Any]]:
    """Breadth-first walk (pure over the `neighbours` callable). Returns nodes and what bounded it."""
    seen = {source}
    frontier = [Node(source, 1.0, 0, [source])]
    found: list[Node] = []
    cut: dict[str, Any] = {"node_budget": False, "time_budget": False}
    for level in range(1, depth + 1):
        nxt: list[Node] = []
        for node in frontier:
            if clock() > deadline:
                cut["time_budget"] = True
                break
            for nb in (await neighbours(node.path, seen))[:fan_out]:
                if nb.path in seen:
                    continue
                if len(found) >= max_nodes:
                    cut["node_budget"] = True
                    break
                seen.add(nb.path)
                child = Node(nb.path, node.score * max(nb.similarity, 0.0), level, node.via + [nb.path], nb.chunk)
                found.append(child)
                nxt.append(child)
            if cut["node_budget"]:
                break
        if cut["node_budget"] or cut["time_budget"] or not nxt:
            break
        frontier = sorted(nxt, key=lambda n: -n.score)
    found.sort(key=lambda n: (-n.score, n.depth, n.path))
    return found, cut


async def note_vector(conn: aiosqlite.Connection, path: str) -> np.ndarray | None:
    cur = await conn.execute(
        "SELECT v.embedding FROM chunks c JOIN documents d ON d.id = c.doc_id"
        " JOIN vec_embeddings v ON v.rowid = c.embedding_id WHERE d.path = ? ORDER BY c.ordinal LIMIT ?",
        (path, MAX_CHUNKS_PER_NOTE),
    )
    rows = await cur.fetchall()
    if not rows:
        return None
    mean = np.mean([np.frombuffer(r[0], dtype=np.float32) for r in rows], axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm).astype(np.float32) if norm > 0 else None


async def nearest_notes(conn: aiosqlite.Connection, vector: np.ndarray, exclude: set[str], fan_out: int,
                        matrix: VectorMatrix | None = None) -> list[Neighbour]:
    """The `fan_out` notes (not in `exclude`) whose best chunk is nearest `vector` (from the
    daemon's in-memory vectors when it has them, else sqlite-vec's scan)."""
    k = fan_out * 8 + 32
    nearest = await matrix.nearest(conn, vector, k) if matrix is not None else None
    if nearest is None:
        nearest = await retrievers.nearest_embeddings(conn, vector, k)
    if not nearest:
        return []
    dist = {emb: d for emb, d in nearest}
    cur = await conn.execute(
        "SELECT c.id, c.embedding_id, d.path, c.heading, c.start_line, c.end_line FROM chunks c"
        " JOIN documents d ON d.id = c.doc_id WHERE c.embedding_id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(dist)),),
    )
    best: dict[str, Neighbour] = {}
    for cid, emb, path, heading, start, end in await cur.fetchall():
        if path in exclude:
            continue
        sim = 1.0 - float(dist[emb]) ** 2 / 2.0  # unit vectors: cosine from L2 distance
        if path not in best or sim > best[path].similarity:
            best[path] = Neighbour(path, sim, {"chunk_id": cid, "heading": heading, "start_line": start, "end_line": end, "similarity": round(sim, 4)})
    return sorted(best.values(), key=lambda n: (-n.similarity, n.path))[:fan_out]


async def related_notes(
    conn: aiosqlite.Connection,
    path: str,
    *,
    limit: int = 10,
    depth: int = 1,
    fan_out: int = 10,
    max_nodes: int = 100,
    time_budget_s: float = 2.0,
    matrix: VectorMatrix | None = None,
) -> dict[str, Any]:
    validate(limit, depth, fan_out, max_nodes)
    cur = await conn.execute("SELECT title FROM documents WHERE path = ?", (path,))
    row = await cur.fetchone()
    if row is None:
        raise RelatedError(
            f"no indexed note at {path!r}; give the note's path relative to the notes folder, as search results show it"
        )
    if await note_vector(conn, path) is None:
        raise RelatedError(f"{path!r} has no vectors yet (still being embedded); try again shortly")
    vectors: dict[str, np.ndarray | None] = {}

    async def neighbours(p: str, seen: set[str]) -> list[Neighbour]:
        if p not in vectors:
            vectors[p] = await note_vector(conn, p)
        vec = vectors[p]
        return [] if vec is None else await nearest_notes(conn, vec, seen, fan_out, matrix)

    started = time.monotonic()
    nodes, cut = await walk(path, neighbours, depth=depth, fan_out=fan_out, max_nodes=max_nodes,
                            deadline=started + time_budget_s)
    nodes = nodes[:limit]
    titles: dict[str, str] = {}
    if nodes:
        cur = await conn.execute(
            "SELECT path, title FROM documents WHERE path IN (SELECT value FROM json_each(?))",
            (json.dumps([n.path for n in nodes]),),
        )
        titles = dict(await cur.fetchall())
    return {
        "source": {"path": path, "title": row[0]},
        "related": [
            {"path": n.path, "title": titles.get(n.path, ""), "score": round(n.score, 4), "depth": n.depth,
             "via": n.via, "chunk": n.chunk}
            for n in nodes
        ],
        "bounded_by": [k for k, v in cut.items() if v],
        "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
        "params": {"limit": limit, "depth": depth, "fan_out": fan_out, "max_nodes": max_nodes},
    }
