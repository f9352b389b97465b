"""Late interaction (MaxSim over e5's token states) as an `off_topic` signal (issue 21, decision 0017): measured, not adopted.

A single vector per passage averages away the one detail a claim turns on. ColBERT-style late
interaction keeps every token: each query token finds its best match among a passage's tokens,
and the mean of those best matches says how much of the query the passage covers, word by word
in context. A claim whose abstract is missing might match its topic's neighbours on most tokens
but not on the finding; this measures whether that separates it better than today's score.

e5 is not trained for late interaction, but its last hidden states are contextual token vectors:
this builds groove's own float32 graph of the default model (groove/embed/e5graph.py) with the
last layer's states as a second output, and per query, against the vector leg's top 3 passages
(the text groove embedded, first 510 tokens), records:

- `ms_mean`, `ms_p25`, `ms_min`: over the query's tokens (prefix left out), the mean, 25th
  percentile and minimum of the best cosine with one passage's tokens, for the passage with the
  highest mean; `ms_first`: the mean against the vector leg's first passage;
- `ms_union_mean`, `ms_union_p25`: the same against the three passages' tokens together.

    python -m bench.abstention scifact /tmp/abst/en
    groove index --kb /tmp/abst/en/notes --index /tmp/abst/en/index.sqlite
    python -m bench.abstention_maxsim collect /tmp/abst/en    # ROOT/maxsim.{tune,test}.jsonl (~0.5 s a query)
    python -m bench.abstention_maxsim analyze /tmp/abst/en

`analyze` prints each feature's AUROC (all unanswerable / held-out claims only) and, for today's
score plus one MaxSim feature (a logistic fit on the tune half, the threshold leaving at most 5%
of tune's answerable flagged), the test half's rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

FEATURES = ("ms_mean", "ms_p25", "ms_min", "ms_first", "ms_union_mean", "ms_union_p25")
COMBOS = ((), ("ms_mean",), ("ms_p25",), ("ms_union_mean",), ("ms_mean", "ms_min"))
DEPTH = 3  # the vector leg's top passages read


class TokenStates:
    """The default model's last hidden states of one text (float32 graph, one window)."""

    def __init__(self) -> None:
        import onnxruntime as ort
        from onnx import TensorProto, helper

        from groove.embed.e5graph import build_float32
        from groove.embed.e5onnx import load_engine

        self.engine = load_engine()
        cfg = self.engine.weights.config
        model = build_float32(self.engine.weights)
        model.graph.output.append(helper.make_tensor_value_info(f"layer{cfg.layers - 1}_out", TensorProto.FLOAT,
                                                                ["batch", "length", cfg.hidden]))
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def __call__(self, text: str, prefix: str) -> np.ndarray:
        """L2-normalised states of `text`'s tokens, without `<s>`, `</s>` and the prefix's tokens."""
        eng = self.engine
        vocab, hidden = eng.weights.vocabulary, eng.weights.config.hidden
        skip = len(eng.tokenizer.content_ids([prefix])[0])
        content = eng.tokenizer.content_ids([prefix + text])[0][: eng.window]
        ids = np.array([[vocab.bos, *content, vocab.eos]], dtype=np.int64)
        words = eng.weights.word_rows(ids.reshape(-1)).reshape(1, ids.shape[1], hidden)
        _, states = self.session.run(None, {"words": words, "valid": np.ones_like(ids, dtype=bool)})
        t = states[0, 1 + skip: -1] if len(content) > skip else states[0, 1:-1]
        return t / np.linalg.norm(t, axis=1, keepdims=True)


def maxsim(query: np.ndarray, passages: list[np.ndarray]) -> dict[str, float]:
    """The features above from the query's and the passages' token states (pure)."""
    if not passages:
        return {}
    per = [(query @ p.T).max(axis=1) for p in passages]
    best = max(per, key=lambda m: float(m.mean()))
    union = (query @ np.concatenate(passages).T).max(axis=1)
    return {"ms_mean": float(best.mean()), "ms_p25": float(np.percentile(best, 25)), "ms_min": float(best.min()),
            "ms_first": float(per[0].mean()), "ms_union_mean": float(union.mean()),
            "ms_union_p25": float(np.percentile(union, 25))}


async def collect(root: Path) -> None:
    from groove.index import Index
    from groove.config import load_settings
    from groove.search import offtopic
    from groove.search.pipeline import Searcher, SearchRequest
    from groove.search.retrievers import SqliteSearchReads

    settings = load_settings(None, kb_path=root / "notes", index_path=root / "index.sqlite")

    class Capturing(Searcher):
        last_run: Any = None

        async def _fuse_and_refine(self, store, run):  # noqa: ANN001 - keep the run for its vector leg
            self.last_run = run
            return await super()._fuse_and_refine(store, run)

    states = TokenStates()
    async with Index.open(settings, readonly=True) as index:
        searcher = Capturing(settings.search, embed_query=index.queries.embed, reranker=index.searcher.reranker,
                             vectors=index._vector_matrix(), quality=settings.quality_filter)
        for part in ("tune", "test"):
            with open(root / part / "queries.jsonl", encoding="utf-8") as f:
                qs = [r for r in map(json.loads, filter(str.strip, f)) if r["kind"] != "held_out_covered"]
            t0 = time.perf_counter()
            with open(root / f"maxsim.{part}.jsonl", "w", encoding="utf-8") as out:
                async with index.reading() as conn:
                    store = SqliteSearchReads(conn, None, None)
                    for q in qs:
                        resp = await searcher.search(conn, SearchRequest(query=q["text"]))
                        run = searcher.last_run
                        vec = run.raw_vector if run.raw_vector is not None else run.legs.get("vector", [])
                        top = [c for c, _ in vec[:DEPTH]]
                        texts = await store.fetch_texts(top)
                        f = maxsim(states(q["text"], "query: "),
                                   [states(texts[c], "passage: ") for c in top if texts.get(c)])
                        f["score"] = offtopic.score(resp["off_topic_evidence"])
                        out.write(json.dumps({"id": q["_id"], "kind": q["kind"], "unanswerable": q["kind"] != "answerable",
                                              "flag": bool(resp["off_topic"]), "f": f}) + "\n")
            print(json.dumps({"part": part, "queries": len(qs),
                              "ms_a_query": round((time.perf_counter() - t0) * 1000 / max(1, len(qs)), 1)}), file=sys.stderr)


def analyze(roots: list[Path]) -> None:
    from bench.abstention_analysis import beside_score

    for root in roots:
        sets = {p: [json.loads(line) for line in open(root / f"maxsim.{p}.jsonl", encoding="utf-8")] for p in ("tune", "test")}
        tune = sets["tune"]
        print(json.dumps({"root": str(root), "corr(score, ms_mean) tune": round(float(np.corrcoef(
            [r["f"]["score"] for r in tune], [r["f"]["ms_mean"] for r in tune])[0, 1]), 3)}))
        beside_score(root, sets, FEATURES, COMBOS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.abstention_maxsim", description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=("collect", "analyze"))
    p.add_argument("roots", type=Path, nargs="+")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if a.step == "collect":
        for root in a.roots:
            asyncio.run(collect(root))
    else:
        analyze(a.roots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
