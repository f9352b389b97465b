"""Candidate per-search signals for `off_topic` (issue 21, docs/decisions/0017), side by side with today's.

For the sets bench/abstention.py builds (and the bilingual fixture), every query of the tune and
test halves runs through groove's real search in process (a `Searcher` as `groove eval` builds it:
the index's stored calibration, the in-memory vectors, query vectors embedded in one batch per
half), and this script records today's features, score and flag plus candidate new features
computed from what the search had (its legs, the query vector, the stored vectors):

    python -m bench.abstention jaquad /tmp/abst/ja ; groove index --kb /tmp/abst/ja/notes --index /tmp/abst/ja/index.sqlite
    python -m bench.abstention scifact /tmp/abst/en ; groove index --kb /tmp/abst/en/notes --index /tmp/abst/en/index.sqlite
    groove index --kb tests/fixtures/bilingual/notes --index /tmp/abst/fx/index.sqlite
    python -m bench.abstention_features collect /tmp/abst/ja      # -> /tmp/abst/ja/features.{tune,test}.jsonl
    python -m bench.abstention_features collect /tmp/abst/en
    python -m bench.abstention_features collect /tmp/abst/fx --fixture tests/fixtures/bilingual
    python -m bench.abstention_features analyze /tmp/abst          # AUROCs, fits, rates (tune -> test)

Every feature is oriented "higher = more likely answerable" in the analysis (its AUROC is
P(answerable scores above unanswerable)).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

FTS = ("trigram", "words", "bigram")


# --- collection --------------------------------------------------------------------------------

def _queries(root: Path, part: str, fixture: Path | None) -> list[dict]:
    if fixture is not None:
        import yaml
        data = yaml.safe_load((fixture / "golden.yaml").read_text(encoding="utf-8"))
        return [{"_id": q["id"], "text": q["query"], "kind": "answerable" if q["expected"] else
                 ("cross_language" if False else "off_topic"), "lang": q.get("lang")} for q in data["queries"]]
    with open(root / part / "queries.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["kind"] != "held_out_covered"]  # another note answers it (bench/abstention.py)


def _z(top: float, rest: list[float]) -> float:
    if len(rest) < 3:
        return 0.0
    sd = float(np.std(rest))
    return (top - float(np.mean(rest))) / max(sd, 1e-6)


def _rbo(a: list, b: list, p: float = 0.9) -> float:
    """Rank-biased overlap of two rankings (truncated, not extrapolated)."""
    depth = max(len(a), len(b))
    if not depth:
        return 0.0
    sa, sb, s = set(), set(), 0.0
    for d in range(1, depth + 1):
        if d <= len(a):
            sa.add(a[d - 1])
        if d <= len(b):
            sb.add(b[d - 1])
        s += p ** (d - 1) * len(sa & sb) / d
    return (1 - p) * s


def _doc_list(scored: list[tuple[int, float]], doc_of: dict[int, int], k: int) -> list[int]:
    out: list[int] = []
    for cid, _ in scored:
        d = doc_of.get(cid)
        if d is not None and d not in out:
            out.append(d)
        if len(out) >= k:
            break
    return out


async def collect(root: Path, fixture: Path | None, sentences: bool = False) -> None:
    from groove.index import Index
    from groove.config import load_settings
    from groove.search import offtopic
    from groove.corpus.chunking import _split_sentences
    from groove.search.compiler import compile_query
    from groove.search.evidence import coverage, term_weights
    from groove.search.pipeline import Searcher, SearchRequest, full_text_plan
    from groove.search.retrievers import SqliteSearchReads

    notes = fixture / "notes" if fixture is not None else root / "notes"
    settings = load_settings(None, kb_path=notes, index_path=root / "index.sqlite")

    class Capturing(Searcher):
        last_run: Any = None

        async def _fuse_and_refine(self, store, run):  # noqa: ANN001 - keep the run for the features
            self.last_run = run
            return await super()._fuse_and_refine(store, run)

    async with Index.open(settings, readonly=True) as index:
        emb = index.embedder
        async with index.reading() as conn:
            cur = await conn.execute("SELECT id, doc_id FROM chunks")
            rows = await cur.fetchall()
            doc_of = {int(c): int(d) for c, d in rows}
            store = SqliteSearchReads(conn, None, None)
            vecs = await store.fetch_vectors(list(doc_of))
        cids = np.array(sorted(vecs), dtype=np.int64)
        M = np.stack([vecs[c] for c in cids]).astype(np.float32)
        M /= np.linalg.norm(M, axis=1, keepdims=True)
        row_of = {int(c): i for i, c in enumerate(cids)}
        docs_arr = np.array([doc_of[int(c)] for c in cids])
        # Per passage, its neighbourhood in the collection (other notes): the mean cosine of its 10
        # nearest passages of other notes (CSLS's r_p) and the cosine of the nearest one. An index-time
        # quantity (n x n here; at scale a KNN per passage, kept with the vectors).
        t = time.perf_counter()
        S = M @ M.T
        S[docs_arr[:, None] == docs_arr[None, :]] = -1.0
        part_S = -np.sort(-S, axis=1)[:, :10]
        r_p = part_S.mean(axis=1)
        nn1 = part_S[:, 0]
        precompute_ms = (time.perf_counter() - t) * 1000
        del S
        print(json.dumps({"root": str(root), "passages": len(cids), "precompute_ms": round(precompute_ms, 1)}),
              file=sys.stderr)

        for part in (("all",) if fixture is not None else ("tune", "test")):
            qs = _queries(root, part, fixture)
            texts = [compile_query(q["text"]).vector_text for q in qs]
            t = time.perf_counter()
            qv = emb.embed_queries(texts)  # one batch, as groove eval
            t_q = (time.perf_counter() - t) * 1000 / len(qs)
            t = time.perf_counter()
            pv = emb.embed_documents(texts)  # the query embedded as a passage
            t_p = (time.perf_counter() - t) * 1000 / len(qs)
            cache = {tx: v for tx, v in zip(texts, qv)}

            async def embed_query(text: str) -> np.ndarray:
                return cache[text] if text in cache else await index.queries.embed(text)

            searcher = Capturing(settings.search, embed_query=embed_query, reranker=index.searcher.reranker,
                                 vectors=index._vector_matrix(), quality=settings.quality_filter)
            out = []
            costs: dict[str, list[float]] = {}
            async with index.reading() as conn:
                store = SqliteSearchReads(conn, None, None)
                for q, text, qvec, pvec in zip(qs, texts, qv, pv):
                    t0 = time.perf_counter()
                    resp = await searcher.search(conn, SearchRequest(query=q["text"]))
                    search_ms = (time.perf_counter() - t0) * 1000
                    run = searcher.last_run
                    f = dict(resp["off_topic_evidence"])
                    f["score"] = offtopic.score(f)
                    f["flag"] = bool(resp["off_topic"])
                    cal = run.calibration
                    scale = (cal.answered - cal.unanswered) if cal else 1.0
                    vec = run.raw_vector if run.raw_vector is not None else run.legs.get("vector", [])
                    legs = {k: v for k, v in run.legs.items() if v}
                    q_n = np.asarray(qvec, dtype=np.float32)
                    q_n = q_n / np.linalg.norm(q_n)
                    p_n = np.asarray(pvec, dtype=np.float32)
                    p_n = p_n / np.linalg.norm(p_n)

                    # (a) standout of the best cosine against this query's own list
                    c0 = time.perf_counter()
                    cos = [s for _, s in vec]
                    if cos:
                        f["v_z50"] = _z(cos[0], cos[1:50])
                        f["v_z20"] = _z(cos[0], cos[1:20])
                        f["v_gap2"] = (cos[0] - cos[1]) / scale if len(cos) > 1 else 0.0
                        f["v_gap50"] = (cos[0] - cos[-1]) / scale
                        f["v_mean50_pos"] = (float(np.mean(cos)) - (cal.unanswered if cal else 0)) / scale
                    costs.setdefault("standout", []).append((time.perf_counter() - c0) * 1000)
                    # whole-collection z of the best cosine (one mat-vec)
                    c0 = time.perf_counter()
                    allcos = M @ q_n
                    f["v_zall"] = (float(allcos.max()) - float(allcos.mean())) / max(float(allcos.std()), 1e-6)
                    costs.setdefault("zall_matvec", []).append((time.perf_counter() - c0) * 1000)
                    # doc-level standout: best cosine per note over the top 50
                    dbest: dict[int, float] = {}
                    for cid, s in vec:
                        d = doc_of.get(cid)
                        if d is not None and d not in dbest:
                            dbest[d] = s
                    dl = list(dbest.values())
                    f["v_docgap2"] = (dl[0] - dl[1]) / scale if len(dl) > 1 else 0.0
                    f["v_docz"] = _z(dl[0], dl[1:]) if dl else 0.0

                    # (b) bm25 standout per full-text leg (the leg with most evidence, and the max)
                    c0 = time.perf_counter()
                    zs = {}
                    for name in FTS:
                        sc = [s for _, s in legs.get(name, [])]
                        if len(sc) >= 5:
                            zs[name] = _z(sc[0], sc[1:])
                    f["fts_z_max"] = max(zs.values()) if zs else 0.0
                    best_leg = max((n for n in FTS if n in run.evidence), key=lambda n: run.evidence[n], default=None)
                    f["fts_z_best"] = zs.get(best_leg, 0.0) if best_leg else 0.0
                    costs.setdefault("fts_standout", []).append((time.perf_counter() - c0) * 1000)

                    # (c) local density and hubness (r_p precomputed per passage)
                    c0 = time.perf_counter()
                    if vec:
                        top_rows = [row_of[c] for c, _ in vec if c in row_of]
                        r = top_rows[0]
                        r_q = float(np.mean(cos[:10]))
                        f["dens_r_top"] = -float(r_p[r])  # a crowded top passage: less telling (negated)
                        f["v_minus_rp"] = (cos[0] - float(r_p[r]))
                        f["v_minus_nn1"] = (cos[0] - float(nn1[r]))
                        csls = [2 * s - r_q - float(r_p[row_of[c]]) for c, s in vec if c in row_of]
                        f["csls_max"] = max(csls)
                        f["csls_top1"] = csls[0]
                        csls_s = sorted(csls, reverse=True)
                        f["csls_gap"] = csls_s[0] - csls_s[min(9, len(csls_s) - 1)]
                        # reverse rank: passages closer to the top passage than the query is (log)
                        rowsim = M @ M[r]
                        rr = int((rowsim[docs_arr != docs_arr[r]] > cos[0]).sum())
                        f["rev_rank_log"] = -math.log1p(rr)
                        f["rev_margin"] = cos[0] - float(nn1[r])
                    costs.setdefault("density_revrank", []).append((time.perf_counter() - c0) * 1000)

                    # (d) agreement of the legs at note level
                    c0 = time.perf_counter()
                    vdocs = _doc_list(vec, doc_of, 10)
                    fts_scored = sorted(((c, -r_) for n in FTS for r_, (c, _) in enumerate(legs.get(n, []))),
                                        key=lambda x: -x[1])
                    fdocs = _doc_list([(c, s) for c, s in fts_scored], doc_of, 10)
                    if best_leg:
                        fdocs_best = _doc_list(legs[best_leg], doc_of, 10)
                    else:
                        fdocs_best = []
                    f["overlap10"] = len(set(vdocs) & set(fdocs_best)) / 10.0
                    f["rbo"] = _rbo(vdocs, fdocs_best)
                    f["top_in_fts"] = 1.0 / (1 + fdocs_best.index(vdocs[0])) if vdocs and vdocs[0] in fdocs_best else 0.0
                    f["fts_top_in_vec"] = 1.0 / (1 + vdocs.index(fdocs_best[0])) if fdocs_best and fdocs_best[0] in vdocs else 0.0
                    f["same_top_doc"] = float(bool(vdocs and fdocs_best and vdocs[0] == fdocs_best[0]))
                    paths = [h["path"] for h in resp["results"][:10]]
                    f["distinct_notes_neg"] = -len(set(paths))
                    costs.setdefault("agreement", []).append((time.perf_counter() - c0) * 1000)

                    # (e) the query embedded as a passage
                    c0 = time.perf_counter()
                    if vec:
                        top50 = np.array([row_of[c] for c, _ in vec if c in row_of])
                        pc = M[top50] @ p_n
                        f["qp_top"] = float(pc.max())
                        f["qp_top1"] = float(pc[0])
                        f["qp_z"] = _z(float(pc.max()), sorted(pc.tolist(), reverse=True)[1:])
                        f["qp_minus_nn1"] = float(pc[0]) - float(nn1[top50[0]])
                        f["qp_revrank_log"] = -math.log1p(int((M[top50[0]] @ M.T)[docs_arr != docs_arr[top50[0]]].__gt__(pc[0]).sum()))
                        f["qq_sim"] = float(q_n @ p_n)
                    costs.setdefault("passage_prefix_use", []).append((time.perf_counter() - c0) * 1000)

                    # (f) lexical coverage of the vector leg's best passage(s) (idf-weighted, as the evidence)
                    c0 = time.perf_counter()
                    cov1 = cov3 = 0.0
                    plan = full_text_plan(run.cq, run.cjk_expr, run.cq.match_expr is not None)
                    if vec:
                        texts_ = await store.fetch_texts([c for c, _ in vec[:3]])
                        for name, table, _expr, terms in plan:
                            if not terms:
                                continue
                            df, n_ch = await store.term_doc_freq(table, terms)
                            w = term_weights(terms, df, n_ch)
                            t1 = texts_.get(vec[0][0])
                            if t1 is not None:
                                cov1 = max(cov1, coverage(terms, w, [t1]))
                            cov3 = max(cov3, coverage(terms, w, list(texts_.values())))
                    f["vcov1"] = cov1
                    f["vcov3"] = cov3
                    costs.setdefault("vector_top_coverage", []).append((time.perf_counter() - c0) * 1000)
                    # (g) a second look at sentences: the vector leg's top passages cut into sentences
                    # (and pairs of neighbouring ones), embedded as passages; the best cosine with the query
                    c0 = time.perf_counter()
                    if vec and sentences:
                        top3 = [c for c, _ in vec[:3]]
                        tx = await store.fetch_texts(top3)
                        singles: list[str] = []
                        pairs: list[str] = []
                        first_n = 0
                        for i_, c in enumerate(top3):
                            body = tx.get(c)
                            if not body:
                                continue
                            ss = [s_.strip() for _, s_ in _split_sentences(0, body) if s_.strip()]
                            singles += ss
                            pairs += [a_ + " " + b_ for a_, b_ in zip(ss, ss[1:])]
                            if i_ == 0:
                                first_n = len(ss)
                        if singles:
                            sv = np.asarray(emb.embed_documents(singles + pairs), dtype=np.float32)
                            sv /= np.linalg.norm(sv, axis=1, keepdims=True)
                            sc = sv @ q_n
                            n1 = len(singles)
                            base_u = cal.unanswered if cal else 0.0
                            f["sent_max"] = float(sc.max())
                            f["sent1_max"] = float(sc[:n1].max())
                            f["sent2_max"] = float(sc[n1:].max()) if len(sc) > n1 else float(sc[:n1].max())
                            f["sent_first_max"] = float(sc[:max(1, first_n)].max())
                            f["sent_pos"] = (float(sc.max()) - base_u) / scale
                            f["sent_minus_top"] = float(sc.max()) - cos[0]
                            f["sent_count"] = float(len(sc))
                    costs.setdefault("sentence_second_look", []).append((time.perf_counter() - c0) * 1000)
                    f["qlen_neg"] = -len(text)
                    f["search_ms"] = search_ms
                    out.append({"id": q["_id"], "kind": q["kind"], "lang": q.get("lang"),
                                "unanswerable": q["kind"] != "answerable", "f": f})
            path = root / f"features.{part}.jsonl"
            with open(path, "w", encoding="utf-8") as fh:
                for r in out:
                    fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            print(json.dumps({"part": part, "queries": len(out), "query_embed_ms_batched": round(t_q, 2),
                              "passage_embed_ms_batched": round(t_p, 2),
                              "cost_ms_median": {k: round(float(np.median(v)), 3) for k, v in costs.items()},
                              "search_ms_median": round(float(np.median([r["f"]["search_ms"] for r in out])), 2),
                              "written": str(path)}), file=sys.stderr)
        # single-query embedding cost, query vs passage prefix (the extra cost of (e))
        sample = [compile_query(q["text"]).vector_text for q in _queries(root, "all" if fixture else "tune", fixture)[:20]]
        t = time.perf_counter()
        for s in sample:
            emb.embed_queries([s])
        tq = (time.perf_counter() - t) * 1000 / len(sample)
        t = time.perf_counter()
        for s in sample:
            emb.embed_documents([s])
        tp = (time.perf_counter() - t) * 1000 / len(sample)
        print(json.dumps({"single_query_embed_ms": round(tq, 1), "single_passage_embed_ms": round(tp, 1)}),
              file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m bench.abstention_features")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("root", type=Path)
    c.add_argument("--fixture", type=Path, default=None)
    c.add_argument("--sentences", action="store_true",
                   help="also (g), the second look at sentences (embeds about 50 passages a query)")
    a_ = sub.add_parser("analyze")
    a_.add_argument("base", type=Path)
    a = p.parse_args(argv)
    if a.cmd == "collect":
        asyncio.run(collect(a.root, a.fixture, a.sentences))
        return 0
    from bench.abstention_analysis import analyze, analyze_more, ceilings
    analyze(a.base)
    print()
    analyze_more(a.base)
    print()
    ceilings(a.base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
