"""Related notes: the notes nearest in meaning to a given note, or linked to it, optionally a few hops out.

A note's vector is the normalised mean of its chunk vectors. One hop asks the
vector index for the chunks nearest that vector and groups them by note (a
note scores by its best chunk; cosine similarity). The walk is breadth-first
from the source, each visited note expanding to its `fan_out` nearest unseen
notes; a note reached over several hops scores the product of the hop
similarities along its path. It is bounded whatever the note: depth <= 3,
fan-out <= 20, a node budget and a time budget, and says when a bound cut it.

`by` chooses the edges (`BY`): `meaning` (the default, as above), `links` (the
notes a note links to and the notes that link to it, both ways, most links
first; a link counts as similarity 1.0: the author tied the notes), or `both`
(a note expands to up to `fan_out` linked notes and up to `fan_out` nearest
ones; a note both linked and near is reached by both). The graph controls:
`min_similarity` drops meaning edges below it (a link is kept whatever the
notes' similarity), `exclude_paths` (gitignore-style globs) and `filters` (the
search filters) keep notes out of the graph: a note they leave out is neither
returned nor walked through.

`seed_strategy` says what a note asks the vectors with (as GrooveSeek's graph does): `centroid` (the default:
the normalised mean of its first `max_seed_chunks` chunk vectors, all of them (up to 256) when not given, one
nearest-vector query) or `all_chunks` (each of its first `max_seed_chunks` chunk vectors, 32 when not given, a
query each; a note scores by its best match with any of them: a long note whose sections each touch another
note finds them, where the mean of its sections may lie near none).

With `min_quality` (`[quality_filter]`, decision 0020) the chunks scoring under it take no part in the
meaning edges: they neither make a note's vector (a template pasted into many notes would pull them all
together) nor lead to a note; a source note with no other chunks keeps its own.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from groove.errors import GrooveError, NotFoundError
from groove.search.filters import Filters, allowed_documents
from groove.store.memory import VectorMatrix
from groove.store.protocols import Reads

MAX_DEPTH = 3
MAX_FAN_OUT = 20
MAX_NODES = 200
MAX_CHUNKS_PER_NOTE = 256
BY = ("meaning", "links", "both")
SEED_STRATEGIES = ("centroid", "all_chunks")
ALL_CHUNKS_SEEDS = 32  # all_chunks' default max_seed_chunks (GrooveSeek's)
LINK_SIMILARITY = 1.0  # a link's weight as an edge of the walk


class RelatedError(GrooveError, ValueError):
    """An argument of `related` out of bounds, or a note without vectors yet."""

    kind = "invalid"


class UnknownNote(RelatedError, NotFoundError):
    """The source note is not in the index."""

    kind = "not_found"


@dataclass
class Neighbour:
    path: str
    similarity: float
    chunk: dict[str, Any] | None
    by: str = "meaning"  # meaning, links or both
    link: dict[str, Any] | None = None  # the link joining the notes (by links or both)


@dataclass
class Node:
    path: str
    score: float
    depth: int
    via: list[str]
    chunk: dict[str, Any] | None = field(default_factory=dict)
    by: str = "meaning"
    link: dict[str, Any] | None = None


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
                child = Node(
                    nb.path, node.score * max(nb.similarity, 0.0), level, node.via + [nb.path], nb.chunk, nb.by, nb.link
                )
                found.append(child)
                nxt.append(child)
            if cut["node_budget"]:
                break
        if cut["node_budget"] or cut["time_budget"] or not nxt:
            break
        frontier = sorted(nxt, key=lambda n: -n.score)
    found.sort(key=lambda n: (-n.score, n.depth, n.path))
    return found, cut


async def note_vector(
    reads: Reads,
    path: str,
    min_quality: float | None = None,
    *,
    fallback: bool = False,
    max_chunks: int = MAX_CHUNKS_PER_NOTE,
) -> np.ndarray | None:
    """The normalised mean of the note's (first `max_chunks`) chunk vectors, of those scoring `min_quality` or
    more (of all of them with `fallback` when none does); None without vectors."""
    rows = await note_seeds(reads, path, min_quality, fallback=fallback, max_chunks=max_chunks)
    if not rows:
        return None
    mean = np.mean(rows, axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm).astype(np.float32) if norm > 0 else None


async def note_seeds(
    reads: Reads,
    path: str,
    min_quality: float | None = None,
    *,
    fallback: bool = False,
    max_chunks: int = MAX_CHUNKS_PER_NOTE,
) -> list[np.ndarray]:
    """The vectors of the note's first `max_chunks` chunks scoring `min_quality` or more (of all its chunks with
    `fallback` when none does)."""
    rows = await reads.note_vectors(path, min_quality, max_chunks)
    if not rows and min_quality and fallback:
        rows = await reads.note_vectors(path, None, max_chunks)
    return list(rows)


async def nearest_notes(
    reads: Reads,
    vector: np.ndarray,
    exclude: set[str],
    fan_out: int,
    matrix: VectorMatrix | None = None,
    *,
    admit: Callable[[str], bool] | None = None,
    min_similarity: float | None = None,
    min_quality: float | None = None,
) -> list[Neighbour]:
    """The `fan_out` notes (not in `exclude`, and `admit`ted) whose best chunk is nearest `vector` (from the
    daemon's in-memory vectors when it has them, else sqlite-vec's scan), none below `min_similarity`; with
    `min_quality`, by their chunks that score that or more (the KNN asks for as many more vectors as the others
    hold)."""
    k = fan_out * 8 + 32 + (await reads.hidden_vector_count(min_quality) if min_quality else 0)
    nearest = await matrix.nearest(reads, vector, k) if matrix is not None else None
    if nearest is None:
        nearest = await reads.nearest_vectors(vector, k)
    if not nearest:
        return []
    dist = {emb: d for emb, d in nearest}
    best: dict[str, Neighbour] = {}
    for cid, emb, path, heading, start, end in await reads.passages_of_vectors(list(dist), min_quality):
        if path in exclude or (admit is not None and not admit(path)):
            continue
        sim = 1.0 - float(dist[emb]) ** 2 / 2.0  # unit vectors: cosine from L2 distance
        if min_similarity is not None and sim < min_similarity:
            continue
        if path not in best or sim > best[path].similarity:
            best[path] = Neighbour(
                path,
                sim,
                {
                    "chunk_id": cid,
                    "heading": heading,
                    "start_line": start,
                    "end_line": end,
                    "similarity": round(sim, 4),
                },
            )
    return sorted(best.values(), key=lambda n: (-n.similarity, n.path))[:fan_out]


async def link_neighbours(
    reads: Reads,
    path: str,
    exclude: set[str],
    fan_out: int,
    *,
    admit: Callable[[str], bool] | None = None,
) -> list[Neighbour]:
    """The `fan_out` notes (not in `exclude`, and `admit`ted) that `path` links to or is linked from, most links
    first, each an edge of similarity 1.0."""
    out = []
    for note in await reads.linked_notes(path):
        if note["path"] in exclude or (admit is not None and not admit(note["path"])):
            continue
        link = {k: note[k] for k in ("direction", "links", "line", "heading", "alias")}
        out.append(Neighbour(note["path"], LINK_SIMILARITY, None, "links", link))
        if len(out) >= fan_out:
            break
    return out


def _both(linked: list[Neighbour], near: list[Neighbour]) -> list[Neighbour]:
    """Linked notes first, then the nearest in meaning; a note in both is one neighbour reached by both, with
    its nearest passage."""
    nearest = {n.path: n for n in near}
    out = [
        Neighbour(n.path, n.similarity, nearest[n.path].chunk, "both", n.link) if n.path in nearest else n
        for n in linked
    ]
    seen = {n.path for n in linked}
    return out + [n for n in near if n.path not in seen]


async def _graph(reads: Reads, exclude_paths: Sequence[str], filters: Filters | None) -> Callable[[str], bool] | None:
    """Which notes the graph may hold (None: every note): `exclude_paths` globs out, `filters` in."""
    excluded = Filters.build(path_globs=[f"!{g}" for g in exclude_paths]) if exclude_paths else None
    allowed: set[str] | None = None
    if filters is not None and not filters.empty:
        ids = await allowed_documents(reads, filters) or []
        allowed = set((await reads.paths_of(ids)).values())
    if excluded is None and allowed is None:
        return None
    return lambda p: (allowed is None or p in allowed) and (excluded is None or excluded.path_matches(p))


async def related_notes(
    reads: Reads,
    path: str,
    *,
    limit: int = 10,
    depth: int = 1,
    fan_out: int = 10,
    max_nodes: int = 100,
    time_budget_s: float = 2.0,
    matrix: VectorMatrix | None = None,
    by: str = "meaning",
    min_similarity: float | None = None,
    exclude_paths: Sequence[str] = (),
    filters: Filters | None = None,
    min_quality: float | None = None,
    seed_strategy: str = "centroid",
    max_seed_chunks: int | None = None,
) -> dict[str, Any]:
    validate(limit, depth, fan_out, max_nodes)
    seed_strategy = seed_strategy.replace("-", "_")  # GrooveSeek's all-chunks too
    if seed_strategy not in SEED_STRATEGIES:
        raise RelatedError(f"seed_strategy must be one of {', '.join(SEED_STRATEGIES)}, got {seed_strategy!r}")
    if max_seed_chunks is not None and not 1 <= max_seed_chunks <= MAX_CHUNKS_PER_NOTE:
        raise RelatedError(f"max_seed_chunks must be between 1 and {MAX_CHUNKS_PER_NOTE}, got {max_seed_chunks}")
    seeds_per_note = max_seed_chunks or (ALL_CHUNKS_SEEDS if seed_strategy == "all_chunks" else MAX_CHUNKS_PER_NOTE)
    if by not in BY:
        raise RelatedError(f"by must be one of {', '.join(BY)}, got {by!r}")
    if min_similarity is not None and not -1.0 <= min_similarity <= 1.0:
        raise RelatedError(f"min_similarity must be between -1 and 1, got {min_similarity}")
    if any(g.startswith("!") for g in exclude_paths):
        raise RelatedError("exclude_paths takes the globs of the notes to leave out, without '!'")
    title = await reads.note_title(path)
    if title is None:
        raise UnknownNote(
            f"no indexed note at {path!r}; give the note's path relative to the notes folder, as search results show it"
        )
    if by == "meaning" and await note_vector(reads, path, min_quality, fallback=True) is None:
        raise RelatedError(
            f"{path!r} has no vectors yet (still being embedded); try again shortly, or walk its links (by: links)"
        )
    admit = await _graph(reads, exclude_paths, filters)
    seeds: dict[str, list[np.ndarray]] = {}

    async def seeds_of(p: str) -> list[np.ndarray]:
        if seed_strategy == "all_chunks":
            return await note_seeds(reads, p, min_quality, fallback=p == path, max_chunks=seeds_per_note)
        vec = await note_vector(reads, p, min_quality, fallback=p == path, max_chunks=seeds_per_note)
        return [] if vec is None else [vec]

    async def nearest(p: str, seen: set[str]) -> list[Neighbour]:
        if p not in seeds:
            seeds[p] = await seeds_of(p)
        best: dict[str, Neighbour] = {}
        for vec in seeds[p]:  # a note scores by its best match with any seed
            for nb in await nearest_notes(
                reads, vec, seen, fan_out, matrix, admit=admit, min_similarity=min_similarity, min_quality=min_quality
            ):
                if nb.path not in best or nb.similarity > best[nb.path].similarity:
                    best[nb.path] = nb
        return sorted(best.values(), key=lambda n: (-n.similarity, n.path))[:fan_out]

    async def neighbours(p: str, seen: set[str]) -> list[Neighbour]:
        if by == "meaning":
            return await nearest(p, seen)
        linked = await link_neighbours(reads, p, seen, fan_out, admit=admit)
        return linked if by == "links" else _both(linked, await nearest(p, seen))

    started = time.monotonic()
    nodes, cut = await walk(
        path,
        neighbours,
        depth=depth,
        fan_out=fan_out * (2 if by == "both" else 1),
        max_nodes=max_nodes,
        deadline=started + time_budget_s,
    )
    nodes = nodes[:limit]
    titles = await reads.note_titles([n.path for n in nodes]) if nodes else {}
    params: dict[str, Any] = {"limit": limit, "depth": depth, "fan_out": fan_out, "max_nodes": max_nodes, "by": by}
    if min_similarity is not None:
        params["min_similarity"] = min_similarity
    if exclude_paths:
        params["exclude_paths"] = list(exclude_paths)
    if filters is not None and not filters.empty:
        params["filters"] = filters.to_dict()
    if seed_strategy != "centroid" or max_seed_chunks is not None:
        params["seed_strategy"] = seed_strategy
        params["max_seed_chunks"] = seeds_per_note
    return {
        "source": {"path": path, "title": title},
        "related": [
            {
                "path": n.path,
                "title": titles.get(n.path, ""),
                "score": round(n.score, 4),
                "depth": n.depth,
                "via": n.via,
                "chunk": n.chunk,
                **({"by": n.by, "link": n.link} if by != "meaning" else {}),
            }
            for n in nodes
        ],
        "bounded_by": [k for k, v in cut.items() if v],
        "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
        "params": params,
    }
