"""Answerable and unanswerable query sets for `off_topic` (issue 21, docs/decisions/0017).

For one BEIR set (jaquad, scifact) of the shared data folder, a sub-corpus of at most `--docs`
notes and three kinds of judged queries:

- answerable: the query's relevant documents are in the notes;
- held out (unanswerable): the query's relevant documents are left out of the notes, and for
  JaQuAD every paragraph of their article (`jaquad-<article>-<paragraph>`), so no neighbouring
  paragraph of the same article answers it either;
- cross-language (unanswerable): queries of the other set (SciFact's against JaQuAD's notes and
  the reverse).

Written as one notes folder and two BEIR folders, `tune/` (calibrate on it) and `test/` (report
on it), split by a seeded shuffle; unanswerable queries are queries.jsonl rows with
`"unanswerable": true` and no qrels row (docs/evaluation.md).

    python -m bench.abstention jaquad /tmp/abst/ja
    groove index --kb /tmp/abst/ja/notes --index /tmp/abst/ja/index.sqlite
    groove eval /tmp/abst/ja/test --kb /tmp/abst/ja/notes --index /tmp/abst/ja/index.sqlite --no-record
    python -m bench.abstention score /tmp/abst/ja --part tune   # the rates, AUROCs, per-query features
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from bench.common import DEFAULT_DATA

OTHER = {"jaquad": "scifact", "scifact": "jaquad"}


def _qrels(src: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    with open(src / "qrels" / "train.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if int(row["score"]) > 0:
                out.setdefault(row["query-id"], set()).add(row["corpus-id"])
    return out


def _queries(src: Path) -> dict[str, str]:
    out = {}
    with open(src / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                q = json.loads(line)
                out[str(q["_id"])] = q["text"]
    return out


def _group(name: str, doc_id: str) -> str:
    """The unit left out with a document: its JaQuAD article, else the document itself."""
    if name == "jaquad" and doc_id.startswith("jaquad-"):
        return doc_id.rsplit("-", 1)[0]
    return doc_id


JUDGMENTS = Path(__file__).parent / "data"


def judged_covered(name: str) -> set[str]:
    """Held-out queries a reader found answered by another note of the default set after all.

    `bench/data/abstention_judgments_<set>.jsonl`: every held-out query of the default set (1,000
    notes, seed 20261202) judged by reading it beside the three notes groove's hybrid search shows
    first, blind to the flag: `covered` when one of them answers the question (JaQuAD) or reports
    evidence for or against the claim (SciFact). Those are left out of the unanswerable queries
    (as `held_out_covered`, no qrels, so `groove eval` skips them)."""
    path = JUDGMENTS / f"abstention_judgments_{name}.jsonl"
    if not path.exists():
        return set()
    with open(path, encoding="utf-8") as f:
        return {r["id"] for r in map(json.loads, filter(str.strip, f)) if r["covered"]}


def build(data: Path, name: str, out: Path, *, answerable: int = 200, held_out: int = 150, cross: int = 100,
          docs: int = 1000, seed: int = 20261202, judged: bool = True) -> dict:
    src = data / name
    rng = random.Random(seed)
    qrels, texts = _qrels(src), _queries(src)
    ids = sorted(q for q in qrels if q in texts)
    rng.shuffle(ids)
    # Held-out queries first: their groups leave the corpus; answerable queries must not need them.
    gone: set[str] = set()
    unans: list[str] = []
    for q in ids:
        if len(unans) >= held_out:
            break
        unans.append(q)
        gone |= {_group(name, d) for d in qrels[q]}
    ans = [q for q in ids if q not in unans and not ({_group(name, d) for d in qrels[q]} & gone)][:answerable]
    relevant = set().union(*(qrels[q] for q in ans))
    corpus = {}
    with open(src / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                doc = json.loads(line)
                corpus[doc["_id"]] = doc
    others = sorted(d for d in corpus if d not in relevant and _group(name, d) not in gone)
    keep = sorted(relevant | set(rng.sample(others, max(0, min(len(others), docs - len(relevant))))))
    notes = out / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    for doc_id in keep:
        doc = corpus[doc_id]
        (notes / f"{doc_id}.md").write_text(f"# {doc.get('title') or doc_id}\n\n{doc['text']}\n", encoding="utf-8")
    other_texts = _queries(data / OTHER[name])
    cross_ids = rng.sample(sorted(other_texts), cross)
    rows = ([{"_id": q, "text": texts[q], "kind": "answerable"} for q in ans]
            + [{"_id": q, "text": texts[q], "kind": "held_out", "unanswerable": True} for q in unans]
            + [{"_id": f"x-{q}", "text": other_texts[q], "kind": "cross_language", "unanswerable": True}
               for q in cross_ids])
    rng.shuffle(rows)
    covered = judged_covered(name) if judged and (docs, seed) == (1000, 20261202) else set()
    for r in rows:
        if r["kind"] == "held_out" and r["_id"] in covered:  # another note answers it after all: not unanswerable
            r["kind"] = "held_out_covered"
            del r["unanswerable"]
    counts = {part: {k: sum(1 for r in chunk if r["kind"] == k)
                     for k in ("answerable", "held_out", "held_out_covered", "cross_language")}
              for part, chunk in write_halves(out, rows, lambda r: sorted(qrels[r["_id"]])).items()}
    return {"set": name, "docs": len(keep), "left_out_groups": len(gone), "seed": seed, **counts}


def write_halves(out: Path, rows: list[dict], relevant: Callable[[dict], Iterable[str]]) -> dict[str, list[dict]]:
    """`rows` cut in a tune and a test half, each a BEIR folder under `out`: queries.jsonl (an
    unanswerable row says so) and qrels/train.tsv (each answerable row's `relevant` corpus ids)."""
    half = len(rows) // 2
    parts = {"tune": rows[:half], "test": rows[half:]}
    for part, chunk in parts.items():
        folder = out / part
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
        with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
            for r in chunk:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        with open(folder / "qrels" / "train.tsv", "w", encoding="utf-8") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for r in chunk:
                if r["kind"] == "answerable":
                    for d in relevant(r):
                        f.write(f"{r['_id']}\t{d}\t1\n")
    return parts


async def _rows(root: Path, part: str, retriever: str = "hybrid") -> dict:
    from tests.support.oneshot import eval_once
    from groove.evaluate.report import to_json
    from groove.config import load_settings

    settings = load_settings(None, kb_path=root / "notes", index_path=root / "index.sqlite")
    return to_json(await eval_once(settings, root / part, retriever=retriever, record=False))  # rows as the JSON has them


def report(rows: list[dict]) -> dict:
    """The two rates of the flag, and AUROC (unanswerable vs answerable) of the flag's score and
    of the top vector cosine alone (lower = more likely unanswerable, so both negated)."""
    from groove.evaluate.metrics import abstention, auroc
    from groove.search import offtopic

    def kind(r: dict) -> str:
        return "answerable" if not r["unanswerable"] else ("cross_language" if r["id"].startswith("x-") else "held_out")

    out: dict = dict(abstention([(r["unanswerable"], r["off_topic"]) for r in rows]))
    ans = [r["off_topic_evidence"] for r in rows if not r["unanswerable"]]
    for group in ("held_out", "cross_language"):
        un = [r["off_topic_evidence"] for r in rows if kind(r) == group]
        out[f"flagged_{group}"] = round(sum(r["off_topic"] for r in rows if kind(r) == group) / max(1, len(un)), 4)
    un = [r["off_topic_evidence"] for r in rows if r["unanswerable"]]
    sc = lambda f: offtopic.score(f) if offtopic.score(f) is not None else -9.0  # noqa: E731
    out["auroc_signal"] = auroc([-sc(f) for f in un], [-sc(f) for f in ans])
    out["auroc_top_cosine"] = auroc([-(f["vector_top"] or 0) for f in un], [-(f["vector_top"] or 0) for f in ans])
    out["counts"] = {"answerable": len(ans), "unanswerable": len(un)}
    return out


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "score":
        import asyncio
        p = argparse.ArgumentParser(prog="python -m bench.abstention score")
        p.add_argument("root", type=Path, help="a folder this script built and `groove index` indexed")
        p.add_argument("--part", default="test", choices=("tune", "test"))
        p.add_argument("--retriever", default="hybrid")
        a = p.parse_args(argv[1:])
        res = asyncio.run(_rows(a.root, a.part, a.retriever))
        (a.root / f"{a.part}.{a.retriever}.rows.json").write_text(json.dumps(res["queries"], ensure_ascii=False))
        print(json.dumps({"metrics": res["metrics"], **report(res["queries"])}))
        return 0
    p = argparse.ArgumentParser(prog="python -m bench.abstention", description=__doc__.split("\n\n")[0])
    p.add_argument("set", choices=sorted(OTHER))
    p.add_argument("out", type=Path)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--docs", type=int, default=1000)
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--no-judgments", action="store_true",
                   help="keep held-out queries another note was judged to answer as unanswerable")
    a = p.parse_args(argv)
    print(json.dumps(build(a.data, a.set, a.out, docs=a.docs, seed=a.seed, judged=not a.no_judgments)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
