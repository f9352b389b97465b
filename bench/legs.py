"""Dump every retrieval leg's ranked list (with scores) for a judged query set, and score fusion rules on them.

Fusion rules are pure functions of the legs' lists, so once the lists are
dumped (one FTS statement per table and one query embedding per query) a
rule can be scored on hundreds of queries in well under a second: this is how
the default fusion was chosen (docs/decisions/0007).

    python -m bench.legs dump BEIR_DIR --kb NOTES --index INDEX.sqlite --out legs.json [--model M]
    python -m bench.legs score legs.json [legs2.json ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench.common import DEFAULT_DATA  # noqa: F401  (sets HF_HUB_OFFLINE before any model import)
from groove.config import load_settings
import anyio

from groove.corpus.cjk import cjk_query
from groove.embed.embedder import make_embedder
from groove.evaluate.golden import load
from groove.evaluate.metrics import aggregate, first_ranks, score_query
from groove.search import fusion, retrievers
from groove.search.compiler import QueryError, compile_query
from groove.search.pipeline import FULL_TEXT_LEGS, full_text_plan, leg_evidence
from groove.store import db

DEPTH = 100


def dump(source: Path, kb: Path, index: Path, out: Path, model: str | None) -> None:
    anyio.run(_dump, source, kb, index, out, model)


async def _dump(source: Path, kb: Path, index: Path, out: Path, model: str | None) -> None:
    overrides = {"kb_path": kb, "index_path": index}
    if model:
        overrides["embedding.model"] = model
    settings = load_settings(None, **overrides)
    embedder = make_embedder(settings.embedding)
    beir = source.is_dir()
    queries = load(source, "train" if beir else None)
    conn = await db.connect(index, readonly=True)
    reads_ = retrievers.SqliteSearchReads(conn)
    cur = await conn.execute("SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id")
    stem = {cid: (Path(p).stem if beir else p) for cid, p in await cur.fetchall()}
    compiled = []
    for q in queries:
        try:
            compiled.append(compile_query(q.query))
        except QueryError:
            compiled.append(None)
    texts = [c.vector_text if c else q.query for c, q in zip(compiled, queries)]
    vecs = embedder.embed_queries(texts)
    rows = []
    for q, cq, vec in zip(queries, compiled, vecs):
        legs: dict[str, list] = {}
        evidence: dict[str, float] = {}
        plan = full_text_plan(cq, cjk_query(q.query)) if cq else []
        for name, table, expr, terms in plan:
            scored = await retrievers.fts_scored(conn, expr, DEPTH, table=table)
            legs[name] = [[cid, sc] for cid, sc in scored]
            evidence[name] = await leg_evidence(reads_, table, terms, scored) or 0.0
        ids = await retrievers.vector_search(conn, vec, DEPTH)
        vmap = await retrievers.fetch_vectors(conn, ids)
        legs["vector"] = [[cid, float(np.linalg.norm(vmap[cid] - vec))] for cid in ids if cid in vmap]
        for lst in legs.values():
            for r in lst:
                r.append(stem[r[0]])
        rows.append({"id": q.id, "query": q.query, "expected": [e.stem if beir else e.path for e in q.expected],
                     "legs": legs, "evidence": evidence})
    await conn.close()
    out.write_text(json.dumps({"source": str(source), "index": str(index), "model": embedder.identity, "queries": rows}, ensure_ascii=False))
    print(f"{len(rows)} queries -> {out}", file=sys.stderr)


def evaluate(rows: list[dict], ranker) -> dict[str, float]:
    scores = []
    for r in rows:
        ranked = ranker(r)[:10]
        ranks = first_ranks(ranked, r["expected"], lambda s, e: s == e)
        scores.append(score_query(ranks, len(r["expected"])))
    return aggregate(scores)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.legs")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("source", type=Path)
    d.add_argument("--kb", type=Path, required=True)
    d.add_argument("--index", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--model")
    s = sub.add_parser("score")
    s.add_argument("files", type=Path, nargs="+")
    a = p.parse_args(argv)
    if a.cmd == "dump":
        dump(a.source, a.kb, a.index, a.out, a.model)
        return 0
    for f in a.files:
        data = json.loads(f.read_text())
        print(f"== {f} ({data['model']}, {len(data['queries'])} queries)")
        for name, ranker in fusion_rules().items():
            print(f"  {name:28s} {evaluate(data['queries'], ranker)}")
    return 0


def fusion_rules():
    """name -> function(legs) -> ranked stems (chunk level, as groove eval counts)."""
    def leg(name):
        return lambda q: [r[2] for r in q["legs"].get(name, [])]

    def rrf_of(*names, weights=None):
        def rank(q):
            legs = q["legs"]
            lists = {n: [r[0] for r in legs.get(n, [])] for n in names}
            stems = {r[0]: r[2] for n in names for r in legs.get(n, [])}
            fused = fusion.rrf(lists) if weights is None else fusion.weighted_rrf(lists, weights)
            return [stems[c] for c, _ in fused]
        return rank

    def sim(name, r):
        # higher is better: -bm25 for FTS; cosine = 1 - d^2 / 2 for unit vectors under L2
        return 1.0 - r[1] * r[1] / 2.0 if name == "vector" else -r[1]

    def norm_fuse(names, how="z", weights=None, floor="min", depth=DEPTH):
        def rank(q):
            legs = q["legs"]
            total: dict[int, float] = {}
            stems = {}
            present = [n for n in names if legs.get(n)]
            for n in present:
                lst = legs[n][:depth]
                vals = np.array([sim(n, r) for r in lst])
                if how == "z":
                    sd = vals.std() or 1.0
                    z = (vals - vals.mean()) / sd
                elif how == "minmax":
                    span = (vals.max() - vals.min()) or 1.0
                    z = (vals - vals.min()) / span
                else:
                    raise ValueError(how)
                w = (weights or {}).get(n, 1.0)
                low = z.min()
                seen = set()
                for r, v in zip(lst, z):
                    stems[r[0]] = r[2]
                    if r[0] in seen:
                        continue
                    seen.add(r[0])
                    total[r[0]] = total.get(r[0], 0.0) + w * (v - low)
            order = sorted(total, key=lambda c: -total[c])
            return [stems[c] for c in order]
        return rank

    def ev_weight(q, n, lo, hi):
        """0 below lo, 1 above hi, linear between."""
        if n == "vector":
            return 1.0
        c = q["evidence"].get(n, 0.0)
        return min(1.0, max(0.0, (c - lo) / (hi - lo)))

    def wrrf(names, lo, hi, k=60.0):
        def rank(q):
            legs = q["legs"]
            total: dict[int, float] = {}
            stems = {}
            for n in names:
                w = ev_weight(q, n, lo, hi)
                seen = set()
                for pos, r in enumerate(legs.get(n, []), 1):
                    stems[r[0]] = r[2]
                    if r[0] in seen:
                        continue
                    seen.add(r[0])
                    total[r[0]] = total.get(r[0], 0.0) + w / (k + pos)
            order = sorted(total, key=lambda c: -total[c])
            return [stems[c] for c in order]
        return rank

    def wz(names, lo, hi):
        def rank(q):
            return norm_fuse(names, weights={n: ev_weight(q, n, lo, hi) for n in names})(q)
        return rank

    rules = {
        "trigram": leg("trigram"),
        "words": leg("words"),
        "bigram": leg("bigram"),
        "vector": leg("vector"),
        "rrf(trigram,vector)": rrf_of("trigram", "vector"),
        "rrf(full text)": rrf_of(*FULL_TEXT_LEGS),
        "rrf(all)": rrf_of(*FULL_TEXT_LEGS, "vector"),
        "z(trigram,vector)": norm_fuse(["trigram", "vector"]),
        "z(bigram,vector)": norm_fuse(["bigram", "vector"]),
        "z(all three)": norm_fuse([*FULL_TEXT_LEGS, "vector"]),
        "z(full text)": norm_fuse(list(FULL_TEXT_LEGS)),
        "minmax(all three)": norm_fuse([*FULL_TEXT_LEGS, "vector"], how="minmax"),
        "z(all) d=20": norm_fuse([*FULL_TEXT_LEGS, "vector"], depth=20),
        **{f"wrrf(all) {lo},{hi}": wrrf([*FULL_TEXT_LEGS, "vector"], lo, hi) for lo, hi in [(0.0, 0.3), (0.1, 0.3), (0.1, 0.4), (0.15, 0.35), (0.2, 0.4), (0.2, 0.5)]},
        **{f"wz(all) {lo},{hi}": wz([*FULL_TEXT_LEGS, "vector"], lo, hi) for lo, hi in [(0.0, 0.3), (0.1, 0.3), (0.1, 0.4), (0.15, 0.35), (0.2, 0.4), (0.2, 0.5)]},
        **{f"wz(all) {lo},{hi}": wz([*FULL_TEXT_LEGS, "vector"], lo, hi) for lo, hi in [(0.25, 0.5), (0.3, 0.6), (0.3, 0.5), (0.25, 0.6), (0.35, 0.6)]},
        "wz(full text) 0.25,0.5": wz(list(FULL_TEXT_LEGS), 0.25, 0.5),
        "z(all) d=50": norm_fuse([*FULL_TEXT_LEGS, "vector"], depth=50),
    }
    return rules


if __name__ == "__main__":
    sys.exit(main())
