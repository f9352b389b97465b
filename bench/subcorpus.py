"""A fixed, seeded sub-corpus of a BEIR set, for iterating on quality on 2 cores.

Every relevant document of a seeded sample of queries, plus a seeded random
sample of the other documents, written as a BEIR folder (corpus.jsonl,
queries.jsonl, qrels/<split>.tsv) and as Markdown notes (one <_id>.md per
row, the data folder's own to_markdown.py format), so that

    groove index --kb OUT/notes --index OUT/index.sqlite
    groove eval OUT --kb OUT/notes --index OUT/index.sqlite

measures the same pipeline as the full corpus, in a fraction of the time.

    python -m bench.subcorpus jaquad /tmp/sub/jaquad --queries 300 --docs 1000
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from pathlib import Path

from bench.common import DEFAULT_DATA


def build(
    data: Path, name: str, out: Path, *, queries: int, docs: int, seed: int = 20261201, split: str = "train"
) -> dict:
    src = data / name
    qrels: dict[str, set[str]] = {}
    with open(src / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if int(row["score"]) > 0:
                qrels.setdefault(row["query-id"], set()).add(row["corpus-id"])
    qrows = {}
    with open(src / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            if q["_id"] in qrels:
                qrows[q["_id"]] = line
    rng = random.Random(seed)
    picked = rng.sample(sorted(qrows), min(queries, len(qrows)))
    relevant = set().union(*(qrels[q] for q in picked))
    corpus = {}
    with open(src / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                corpus[json.loads(line)["_id"]] = line
    others = sorted(set(corpus) - relevant)
    extra = rng.sample(others, max(0, min(len(others), docs - len(relevant))))
    keep = sorted(relevant | set(extra))

    (out / "qrels").mkdir(parents=True, exist_ok=True)
    notes = out / "notes"
    notes.mkdir(exist_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for doc_id in keep:
            f.write(corpus[doc_id])
            doc = json.loads(corpus[doc_id])
            title = doc.get("title") or doc["_id"]
            (notes / f"{doc['_id']}.md").write_text(f"# {title}\n\n{doc['text']}\n", encoding="utf-8")
    with open(out / "queries.jsonl", "w", encoding="utf-8") as f:
        for q in picked:
            f.write(qrows[q])
    with open(out / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q in picked:
            for d in sorted(qrels[q]):
                f.write(f"{q}\t{d}\t1\n")
    return {"set": name, "queries": len(picked), "docs": len(keep), "relevant": len(relevant), "seed": seed}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.subcorpus", description=__doc__.split("\n\n")[0])
    p.add_argument("set", help="a BEIR folder name under the data folder: scifact, jaquad")
    p.add_argument("out", type=Path, help="where to write the sub-corpus")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    p.add_argument("--queries", type=int, default=300, help="queries sampled (their relevant documents are all kept)")
    p.add_argument("--docs", type=int, default=1000, help="documents in all (relevant + random others)")
    p.add_argument("--seed", type=int, default=20261201)
    a = p.parse_args(argv)
    info = build(a.data, a.set, a.out, queries=a.queries, docs=a.docs, seed=a.seed)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
