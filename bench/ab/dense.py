"""groove's vector half on SciFact against the model alone on the same queries (issue 21 point 5)

`python -m bench ab dense INDEX`: INDEX is a groove index of every SciFact abstract (one note each,
the data folder's to_markdown.py format: `# Title` then the abstract), built by `groove index`.
Two rankings of the SciFact train queries, one scorer (groove's own nDCG@10, recall@k, MRR):

- "engine": the default model alone, the way the model's own benchmark scores it: each
  abstract embedded whole as `title + " " + abstract` (e5's `passage: ` added by the engine,
  its 512-token window), no chunking, no heading text; every query embedded once; exact cosine
  over all 5,183 abstracts;
- "groove": `groove eval` of the vector retriever on INDEX: groove's chunks, what it embeds,
  its KNN and how it ranks a note's chunks.

Prints both figures, their difference, and groove's chunks per note. The engine's document
vectors are kept in `--keep DIR` (`engine-docs.npy`), so a second run embeds only the queries.

    python -m bench ab dense /tmp/scifull/index.sqlite --keep /tmp/scifull
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path
from typing import Any

from bench.common import data_dir, show_ab


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", type=Path, help="a groove index of every SciFact abstract")
    p.add_argument("--keep", type=Path, default=None, help="keep the engine's document vectors here (and reuse them)")
    p.add_argument("--split", default="train", help="the qrels split (default train)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    import anyio

    return show_ab(anyio.run(measure, args.index, data_dir(args.data), args.keep, args.split))


def _corpus(data: Path) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    with open(data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                ids.append(str(row["_id"]))
                texts.append(f"{row.get('title', '')} {row.get('text', '')}".strip())
    return ids, texts


def _judged(data: Path, split: str) -> list[tuple[str, str, set[str]]]:
    qrels: dict[str, set[str]] = {}
    with open(data / "scifact" / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    out = []
    with open(data / "scifact" / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                q = json.loads(line)
                if str(q["_id"]) in qrels:
                    out.append((str(q["_id"]), q["text"], qrels[str(q["_id"])]))
    return out


async def measure(index: Path, data: Path, keep: Path | None, split: str) -> dict[str, Any]:
    import anyio
    import numpy as np

    from groove.config import load_settings
    from groove.embed.embedder import make_embedder
    from groove.evaluate.metrics import aggregate, score_query
    from groove.store.sqlite import connection
    from tests.support.oneshot import eval_once

    settings = load_settings(None, kb_path=index.parent / "notes", index_path=index)
    embedder = make_embedder(settings.embedding)
    ids, texts = _corpus(data)
    judged = _judged(data, split)

    def doc_vectors() -> np.ndarray:  # kept in keep/ when it is given, read back from it by the next run
        if keep is None:
            return embedder.embed_documents(texts)
        cached = keep / "engine-docs.npy"
        if cached.is_file():
            return np.load(cached)
        docs = embedder.embed_documents(texts)
        keep.mkdir(parents=True, exist_ok=True)
        np.save(cached, docs)
        return docs

    t = time.perf_counter()
    docs = await anyio.to_thread.run_sync(doc_vectors)
    doc_s = time.perf_counter() - t
    queries = await anyio.to_thread.run_sync(embedder.embed_queries, [q for _, q, _ in judged])
    scores = []
    for (_, _, relevant), q in zip(judged, queries, strict=True):
        order = np.argsort(-(docs @ q), kind="stable")[:10]
        ranks = [next((i + 1 for i, d in enumerate(order) if ids[d] == r), None) for r in sorted(relevant)]
        scores.append(score_query(ranks, len(relevant)))
    engine = aggregate(scores)

    beir = data / "scifact"
    report = await eval_once(settings, beir, retriever="vector", split=split, record=False, embedder=embedder)
    conn = connection.connect_sync(index, readonly=True)
    try:
        chunks, notes = conn.execute(
            "SELECT (SELECT count(*) FROM chunks), (SELECT count(*) FROM documents)"
        ).fetchone()
    finally:
        conn.close()
    return {
        "queries": len(judged),
        "engine_ndcg@10": engine["ndcg@10"],
        "groove_vector_ndcg@10": report.metrics["ndcg@10"],
        "engine_recall@1": engine["recall@1"],
        "groove_vector_recall@1": report.metrics["recall@1"],
        "engine_mrr": engine["mrr"],
        "groove_vector_mrr": report.metrics["mrr"],
        "groove_minus_engine_ndcg@10": round(report.metrics["ndcg@10"] - engine["ndcg@10"], 4),
        "groove_chunks_per_note": round(chunks / max(1, notes), 3),
        "engine_doc_embedding_s": round(doc_s, 1),
        "model": embedder.identity,
    }
