"""`abstention`: the query sets behind `off_topic` (decision 0017), built and scored: the flag's rates on them.

    python -m bench abstention build jaquad /tmp/abst/ja       # notes/, tune/ and test/ (BEIR folders)
    python -m bench abstention build scifact /tmp/abst/en
    python -m bench abstention build docs /tmp/abst/docs       # the docs vault (bench/abstention_docs.py)
    python -m bench abstention build ps /tmp/abst/ps           # the PowerShell docs (bench/abstention_ps.py)
    python -m bench abstention build scifact-full /tmp/abst/sf # every SciFact train claim, the whole corpus
    groove index --kb /tmp/abst/ja/notes --index /tmp/abst/ja/index.sqlite
    python -m bench abstention score /tmp/abst/ja --part test  # the rates and AUROCs of one half
    python -m bench abstention tasks /tmp/abst/docs-tasks      # the docs vault's pages to write questions for
    python -m bench abstention rescore /tmp/abst/ja/test.hybrid.rows.json --golden /tmp/abst/ja/test

`build jaquad|scifact`: for one BEIR set of the shared data folder, a sub-corpus of at most
`--docs` notes (default 1,000, seed 20261202) and three kinds of judged queries:

- answerable: the query's relevant documents are in the notes;
- held out (unanswerable): the query's relevant documents are left out of the notes, and for
  JaQuAD every paragraph of their article (`jaquad-<article>-<paragraph>`), so no neighbouring
  paragraph of the same article answers it either; one that a reader found answered by another
  note after all (bench/data/abstention_judgments_<set>.jsonl, default set only) is
  `held_out_covered`, neither answerable nor unanswerable;
- cross-language (unanswerable): queries of the other set (SciFact's against JaQuAD's notes and
  the reverse).

`build docs`: a vault of tldr-pages with questions people wrote for it (bench/abstention_docs.py);
`build ps`: the PowerShell reference in Japanese with questions written blind (bench/abstention_ps.py);
`build scifact-full`: SciFact's whole corpus (5,183 abstracts) as notes, every train claim (all 809 have
judged abstracts, so all are answerable) and 100 JaQuAD questions (unanswerable, `cross_language`).
Each set is written as one notes folder and two BEIR folders, `tune/` (choose on it) and `test/`
(report on it), split by a seeded shuffle; an unanswerable query is a queries.jsonl row with
`"unanswerable": true` and no qrels row (docs/evaluation.md).

`score ROOT`: every query of ROOT/PART (or `--golden`) through groove's search on ROOT's index, as
`groove eval` runs it (`Service.evaluate`, nothing recorded): the two rates of the flag, the rates
per kind of unanswerable query and per language, and the AUROC (unanswerable below answerable) of
the flag's score against that of the top cosine alone. The rows go to ROOT/PART.RETRIEVER.rows.json.

`rescore ROWS`: the same figures from rows `score` wrote, the flag decided again by groove/search/offtopic.py
as it is now, from the signals each row kept (nothing embedded or searched again): how a change of the
weights or the decision was measured (decision 0017).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.common import DEFAULT_DATA, BenchError

OTHER = {"jaquad": "scifact", "scifact": "jaquad"}
SEED = 20261202
DOCS = 1000
JUDGMENTS = Path(__file__).resolve().parent / "data"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="step", metavar="STEP", required=True)
    b = sub.add_parser("build", help="a set's notes/, tune/ and test/ folders")
    b.add_argument("set", choices=(*sorted(OTHER), "docs", "ps", "scifact-full"))
    b.add_argument("out", type=Path)
    b.add_argument("--docs", type=int, default=DOCS, help=f"notes of a BEIR set at most (default {DOCS})")
    b.add_argument("--answerable", type=int, default=200, help="answerable queries of a BEIR set (default 200)")
    b.add_argument("--held-out", type=int, default=150, help="held-out queries of a BEIR set (default 150)")
    b.add_argument("--cross", type=int, default=100, help="queries of the other BEIR set (default 100)")
    b.add_argument("--seed", type=int, default=SEED, help=f"a BEIR set's seed (default {SEED})")
    b.add_argument(
        "--corpus",
        type=int,
        default=0,
        metavar="N",
        help="scifact-full: keep N abstracts, every judged one and a seeded sample of the rest (default all)",
    )
    b.add_argument(
        "--no-judgments",
        action="store_true",
        help="keep the held-out queries another note was judged to answer as unanswerable",
    )
    t = sub.add_parser("tasks", help="the docs vault's pages to write questions for, in four files")
    t.add_argument("out", type=Path)
    t.add_argument("--set", dest="tasks_set", default="docs", choices=("docs", "ps"), help="which vault (default docs)")
    s = sub.add_parser("score", help="the flag's rates and AUROCs on one half of a built and indexed set")
    s.add_argument("root", type=Path, help="a folder `build` wrote and `groove index` indexed (ROOT/index.sqlite)")
    s.add_argument("--part", default="test", choices=("tune", "test"))
    s.add_argument("--retriever", default="hybrid", choices=("fts", "vector", "hybrid"))
    s.add_argument(
        "--golden",
        type=Path,
        default=None,
        metavar="PATH",
        help="another set's half on this index (default ROOT/PART; e.g. a mixed index's)",
    )

    r = sub.add_parser("rescore", help="the rates again from the rows `score` wrote, decided by today's offtopic.py")
    r.add_argument("rows", type=Path, help="a PART.RETRIEVER.rows.json `score` wrote")
    r.add_argument(
        "--golden",
        type=Path,
        default=None,
        metavar="PATH",
        help="the BEIR folder the rows came from (for kinds, languages)",
    )
    r.add_argument("--offset", type=float, default=0.0, help="[search.off_topic] threshold_offset (default 0)")


def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """The registry's entry: one step, its figures printed as JSON and returned."""
    data = Path(args.data or os.environ.get("GROOVE_BENCH_DATA") or DEFAULT_DATA)
    if args.step == "score":
        out = score(args.root, args.part, args.retriever, args.golden)
    elif args.step == "rescore":
        out = rescore(args.rows, args.golden, args.offset)
    elif args.step == "tasks" and args.tasks_set == "ps":
        from bench import abstention_ps

        out = abstention_ps.tasks(_needs(data, "powershell-docs-ja"), args.out)
    elif args.step == "tasks":
        from bench import abstention_docs

        out = abstention_docs.tasks(_needs(data, "tldr-pages"), args.out)
    elif args.set == "ps":
        from bench import abstention_ps

        out = abstention_ps.build(_needs(data, "powershell-docs-ja"), args.out)
    elif args.set == "scifact-full":
        out = build_full(
            _needs(data, "scifact", "jaquad"), args.out, cross=args.cross, seed=args.seed, corpus=args.corpus
        )
    elif args.set == "docs":
        from bench import abstention_docs

        out = abstention_docs.build(_needs(data, "tldr-pages"), args.out, judged=not args.no_judgments)
    else:
        _needs(data, args.set, OTHER[args.set])
        out = build(
            data,
            args.set,
            args.out,
            answerable=args.answerable,
            held_out=args.held_out,
            cross=args.cross,
            docs=args.docs,
            seed=args.seed,
            judged=not args.no_judgments,
        )
    print(json.dumps(out, ensure_ascii=False))
    return out


def _needs(data: Path, *names: str) -> Path:
    for name in names:
        if not (data / name).is_dir():
            raise BenchError(f"no {data / name}; pass --data DIR (the shared data folder)")
    return data


# --- the BEIR sets -------------------------------------------------------------------------------


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


def judged_covered(name: str) -> set[str]:
    """Held-out queries a reader found answered by another note of the default set after all.

    `bench/data/abstention_judgments_<set>.jsonl`: every held-out query of the default set (1,000
    notes, seed 20261202) judged by reading it beside the three notes groove's hybrid search shows
    first, blind to the flag: `covered` when one of them answers the question (JaQuAD) or reports
    evidence for or against the claim (SciFact)."""
    path = JUDGMENTS / f"abstention_judgments_{name}.jsonl"
    if not path.exists():
        return set()
    with open(path, encoding="utf-8") as f:
        return {r["id"] for r in map(json.loads, filter(str.strip, f)) if r["covered"]}


def build(
    data: Path,
    name: str,
    out: Path,
    *,
    answerable: int = 200,
    held_out: int = 150,
    cross: int = 100,
    docs: int = DOCS,
    seed: int = SEED,
    judged: bool = True,
) -> dict:
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
    rows = (
        [{"_id": q, "text": texts[q], "kind": "answerable"} for q in ans]
        + [{"_id": q, "text": texts[q], "kind": "held_out", "unanswerable": True} for q in unans]
        + [{"_id": f"x-{q}", "text": other_texts[q], "kind": "cross_language", "unanswerable": True} for q in cross_ids]
    )
    rng.shuffle(rows)
    # The judgments were made on the default set: another size or seed holds other held-out queries.
    default = (docs, seed, answerable, held_out, cross) == (DOCS, SEED, 200, 150, 100)
    covered = judged_covered(name) if judged and default else set()
    for r in rows:
        if r["kind"] == "held_out" and r["_id"] in covered:  # another note answers it after all: not unanswerable
            r["kind"] = "held_out_covered"
            del r["unanswerable"]
    counts = {
        part: {
            k: sum(1 for r in chunk if r["kind"] == k)
            for k in ("answerable", "held_out", "held_out_covered", "cross_language")
        }
        for part, chunk in write_halves(out, rows, lambda r: sorted(qrels[r["_id"]])).items()
    }
    return {"set": name, "docs": len(keep), "left_out_groups": len(gone), "seed": seed, **counts}


def build_full(data: Path, out: Path, *, cross: int = 100, seed: int = SEED, corpus: int = 0) -> dict:
    """SciFact as it comes: every abstract a note (or `corpus` of them: every judged one and a seeded
    sample of the rest), every train claim answerable (each has judged abstracts in the corpus), and
    `cross` JaQuAD questions as the unanswerable ones."""
    src = data / "scifact"
    qrels, texts = _qrels(src), _queries(src)
    notes = out / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    with open(src / "corpus.jsonl", encoding="utf-8") as f:
        all_docs = [json.loads(line) for line in f if line.strip()]
    keep = {d["_id"] for d in all_docs}
    if corpus:
        judged = set().union(*qrels.values())
        rest = sorted(keep - judged)
        keep = judged | set(random.Random(seed).sample(rest, max(0, min(len(rest), corpus - len(judged)))))
    docs = 0
    for doc in all_docs:
        if doc["_id"] in keep:
            docs += 1
            (notes / f"{doc['_id']}.md").write_text(
                f"# {doc.get('title') or doc['_id']}\n\n{doc['text']}\n", encoding="utf-8"
            )
    rng = random.Random(seed)
    other = _queries(data / "jaquad")
    rows: list[dict[str, Any]] = [
        {"_id": q, "text": texts[q], "kind": "answerable", "lang": "en"} for q in sorted(qrels) if q in texts
    ]
    rows += [
        {"_id": f"x-{q}", "text": other[q], "kind": "cross_language", "lang": "ja", "unanswerable": True}
        for q in rng.sample(sorted(other), cross)
    ]
    rng.shuffle(rows)
    parts = write_halves(out, rows, lambda r: sorted(qrels[r["_id"]]))
    counts = {
        part: {k: sum(1 for r in chunk if r["kind"] == k) for k in ("answerable", "cross_language")}
        for part, chunk in parts.items()
    }
    return {"set": "scifact-full", "docs": docs, "seed": seed, **counts}


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


# --- the rates -----------------------------------------------------------------------------------


def score(root: Path, part: str = "test", retriever: str = "hybrid", golden: Path | None = None) -> dict:
    import anyio

    from groove.api.service import EvalRequest, Service
    from groove.config import load_settings
    from groove.evaluate.report import to_json
    from groove.index import Index

    source = golden or root / part
    if not (root / "index.sqlite").is_file():
        raise BenchError(
            f"no index at {root / 'index.sqlite'}: run `groove index --kb {root / 'notes'} "
            f"--index {root / 'index.sqlite'}` first"
        )
    settings = load_settings(None, kb_path=root / "notes", index_path=root / "index.sqlite")

    async def run() -> dict:
        async with Index.open(settings, readonly=True) as index:
            return to_json(await Service(index).evaluate(EvalRequest(source=source, retriever=retriever, record=False)))

    res = anyio.run(run)
    (root / f"{part}.{retriever}.rows.json").write_text(json.dumps(res["queries"], ensure_ascii=False))
    return {
        "golden": str(source),
        "retriever": retriever,
        "metrics": res["metrics"],
        **report(res["queries"], _kinds(source)),
    }


def rescore(rows_path: Path, golden: Path | None = None, offset: float = 0.0) -> dict:
    """`report` on rows `score` wrote, each query's flag decided again from its kept signals."""
    from groove.search import offtopic

    if not rows_path.is_file():
        raise BenchError(f"no rows at {rows_path}: run `python -m bench abstention score` first")
    rows = json.loads(rows_path.read_text(encoding="utf-8"))
    for r in rows:
        r["off_topic"] = offtopic.is_off_topic(r["off_topic_evidence"], has_results=bool(r["top"]), offset=offset)
    return {"rows": str(rows_path), "offset": offset, **report(rows, _kinds(golden) if golden else {})}


def _kinds(source: Path) -> dict[str, dict]:
    """Each query's row in a BEIR folder `build` wrote (its kind and language), {} for any other golden set."""
    path = source / "queries.jsonl"
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8") as f:
        return {str(r["_id"]): r for r in map(json.loads, filter(str.strip, f))}


def report(rows: list[dict], kinds: dict[str, dict] | None = None) -> dict:
    """The two rates of the flag (per language too, when the set says), the share flagged of each kind of
    unanswerable query, and AUROC (unanswerable vs answerable) of the flag's score and of the top vector
    cosine alone (lower = more likely unanswerable, so both negated)."""
    from groove.evaluate.metrics import abstention, auroc
    from groove.search import offtopic

    kinds = kinds or {}

    def kind(r: dict) -> str:
        if r["id"] in kinds:
            return str(kinds[r["id"]]["kind"])
        return "answerable" if not r["unanswerable"] else ("cross_language" if r["id"].startswith("x-") else "held_out")

    def sc(f: dict) -> float:
        s = offtopic.score(f)
        return s if s is not None else -9.0

    def aurocs(rows: list[dict]) -> dict:
        ans = [r["off_topic_evidence"] for r in rows if not r["unanswerable"]]
        un = [r["off_topic_evidence"] for r in rows if r["unanswerable"]]

        def top(f: dict) -> float:
            return -(f["vector_top"] or 0)

        return {
            "auroc_signal": auroc([-sc(f) for f in un], [-sc(f) for f in ans]),
            "auroc_top_cosine": auroc([top(f) for f in un], [top(f) for f in ans]),
        }

    def count(rows: list[dict], unanswerable: bool) -> str:
        mine = [r for r in rows if r["unanswerable"] == unanswerable]
        return f"{sum(r['off_topic'] for r in mine)} / {len(mine)}"

    out: dict = dict(abstention([(r["unanswerable"], r["off_topic"]) for r in rows]))
    for group in ("held_out", "cross_language"):
        members = [r for r in rows if kind(r) == group]
        if members:
            out[f"flagged_{group}"] = round(sum(r["off_topic"] for r in members) / len(members), 4)
    langs = sorted({str(kinds[r["id"]]["lang"]) for r in rows if "lang" in kinds.get(r["id"], {})})
    for lang in langs:  # a set that says each query's language (the docs vault): its figures per language
        mine = [r for r in rows if kinds.get(r["id"], {}).get("lang") == lang]
        out[f"flagged_{lang}"] = {"answerable": count(mine, False), "unanswerable": count(mine, True), **aurocs(mine)}
    out.update(aurocs(rows))
    unanswerable = sum(r["unanswerable"] for r in rows)
    out["counts"] = {"answerable": len(rows) - unanswerable, "unanswerable": unanswerable}
    return out
