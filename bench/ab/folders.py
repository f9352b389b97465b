"""several notes folders: one index for all (A), one index per folder merged by RRF (B), one folder of subfolders (C)

`python -m bench ab folders`: a fixed, seeded sub-corpus (bench/subcorpus.py) of SciFact (English) and
JaQuAD (Japanese), each with the judged train queries whose relevant documents it holds, written as
Markdown notes in two folders: `en/` (the SciFact notes) and `ja/` (the JaQuAD notes), or with
`--split random` two folders `a/` and `b/` each holding a seeded random half of all the notes (both
languages in each). Then, with the default model loaded once and shared by every build and search:

- (A) groove's design: ONE index over both folders (`kb_path = ["en = ...", "ja = ..."]`), notes
  answered as `en/<id>.md`; a query is one search;
- (B) ONE INDEX PER FOLDER: each folder indexed alone into its own file; a query is a search of each
  (limit 10) and the two lists fused by reciprocal rank fusion (k = 60; a tie, which disjoint lists
  make at every rank, goes to the hit with the higher score of its own search) into one top 10;
- (C) ONE FOLDER: the parent of the two folders (it holds `en/` and `ja/`, or `a/` and `b/`) as the one
  notes folder (`kb_path = ".../folders"`), so its notes have exactly A's paths (`en/<id>.md`): C
  against A is what the several-folders layer itself costs (C/A columns); a query is one search.

Figures, side by side in one run: build wall and CPU seconds (this process's, `time.process_time`:
the embedder runs in-process) of A, B (the two builds summed) and C, after one untimed warm-up build,
`--build-rounds` times (default 2) in alternating order (A B C, then C B A, then other orders), the
median kept; the bytes of each index's folder (B: both);
search p50 / p95 over the judged queries, the sides alternating query by query (the order rotates and
flips query by query), `--rounds` rounds, the first a warm-up: A one search, B two searches one after
the other plus the merge ("B") and the same two at once ("B_par"), C one search; each through
sqlite-vec's scan (a one-shot `groove search`) and through the in-memory copy of the vectors (the
daemon, `groove eval`). Query vectors are computed once up front and shared by every side (B's two
searches use one vector), so latency is the index's work, not the model's. Quality: nDCG@10,
recall@10 and MRR per query language, scored by groove's own metrics (groove/evaluate/metrics.py), a
note relevant when it is a judged document's note; the share of the top 10 in the query's own
language; and the number of queries whose top 10 (note paths, in order; and as a set) differs from
A's, for B and for C. With `--keep DIR` each side's top 10 per query is left in DIR/tops.json.

    python -m bench ab folders                      # 300 + 300 notes, 100 + 100 queries
    python -m bench ab folders --docs 150 --queries 50 --keep /tmp/groove-folders-ab
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Report, data_dir, percentile, ratio
from bench.subcorpus import build as build_subcorpus

RRF_K = 60
LIMIT = 10
LANGS = {"en": "scifact", "ja": "jaquad"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--docs", type=int, default=300, help="documents per language (relevant + seeded others; default 300)"
    )
    p.add_argument("--queries", type=int, default=100, help="judged train queries per language (default 100)")
    p.add_argument("--en-docs", type=int, default=None, help="SciFact documents (default: --docs)")
    p.add_argument("--ja-docs", type=int, default=None, help="JaQuAD documents (default: --docs)")
    p.add_argument("--en-queries", type=int, default=None, help="SciFact queries (default: --queries)")
    p.add_argument("--ja-queries", type=int, default=None, help="JaQuAD queries (default: --queries)")
    p.add_argument(
        "--split",
        choices=("lang", "random"),
        default="lang",
        help="lang: en/ = SciFact, ja/ = JaQuAD (default); random: a/ and b/, a seeded random half each",
    )
    p.add_argument("--seed", type=int, default=20261201, help="the sub-corpus and split seed")
    p.add_argument(
        "--rounds", type=int, default=3, help="search rounds over the queries, the first a warm-up (default 3)"
    )
    p.add_argument(
        "--build-rounds", type=int, default=2, help="builds of each side, order alternating; median kept (default 2)"
    )
    p.add_argument(
        "--vectors",
        choices=("scan", "memory", "both"),
        default="both",
        help="the vector leg through sqlite-vec's scan, the in-memory copy, or both (default)",
    )
    p.add_argument(
        "--keep", type=Path, default=None, help="keep the notes and the indexes in DIR (else a temporary folder)"
    )


def say(msg: str) -> None:
    sys.stderr.write(f"[ab folders] {msg}\n")
    sys.stderr.flush()


def run(args: argparse.Namespace) -> Report:
    import anyio

    data = data_dir(getattr(args, "data", None))
    report = Report(
        "ab folders",
        "one index for several folders (A) vs one index per folder + RRF (B) "
        "vs one folder holding them as subfolders (C)",
    )
    t0 = time.perf_counter()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="groove-folders-ab-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        anyio.run(measure, args, data, work, report)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report.seconds = time.perf_counter() - t0
    print_table(report)
    return report


# --- the corpus ---------------------------------------------------------------------------------


def make_corpus(
    args: argparse.Namespace, data: Path, work: Path
) -> tuple[dict[str, Path], list[dict[str, Any]], dict[str, Any]]:
    """The two notes folders (both in one parent folder, C's), the judged queries (text, language, relevant
    note paths as A and C name them)."""
    sizes = {
        "en": (args.en_docs or args.docs, args.en_queries or args.queries),
        "ja": (args.ja_docs or args.docs, args.ja_queries or args.queries),
    }
    src = work / "subcorpus"
    info = {}
    for lang, name in LANGS.items():
        docs, queries = sizes[lang]
        if not (src / name / "queries.jsonl").is_file():
            info[lang] = build_subcorpus(data, name, src / name, queries=queries, docs=docs, seed=args.seed)
        else:
            info[lang] = {"set": name, "reused": str(src / name)}
    notes = {lang: sorted((src / name / "notes").glob("*.md")) for lang, name in LANGS.items()}
    folders_dir = work / "folders"
    if folders_dir.exists():
        shutil.rmtree(folders_dir)
    if args.split == "lang":
        folders = {lang: folders_dir / lang for lang in LANGS}
        where = {(lang, p.stem): lang for lang in LANGS for p in notes[lang]}
    else:
        folders = {f: folders_dir / f for f in ("a", "b")}
        everything = [(lang, p.stem) for lang in LANGS for p in notes[lang]]
        rng = random.Random(args.seed)
        rng.shuffle(everything)
        half = len(everything) // 2
        where = {key: ("a" if i < half else "b") for i, key in enumerate(everything)}
    for folder in folders.values():
        folder.mkdir(parents=True)
    for lang in LANGS:
        for p in notes[lang]:
            shutil.copyfile(p, folders[where[(lang, p.stem)]] / p.name)

    judged = []
    for lang, name in LANGS.items():
        qrels: dict[str, set[str]] = {}
        with open(src / name / "qrels" / "train.tsv", encoding="utf-8") as f:
            next(f)
            for line in f:
                q, d, s = line.rstrip("\n").split("\t")
                if int(s) > 0:
                    qrels.setdefault(q, set()).add(d)
        with open(src / name / "queries.jsonl", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    rel = sorted(qrels[str(row["_id"])])
                    judged.append(
                        {
                            "id": str(row["_id"]),
                            "lang": lang,
                            "text": row["text"],
                            "expected": [f"{where[(lang, d)]}/{d}.md" for d in rel],
                        }
                    )
    doc_lang = {f"{where[(lang, p.stem)]}/{p.name}": lang for lang in LANGS for p in notes[lang]}
    counts = {f: len(list(path.glob("*.md"))) for f, path in folders.items()}
    return folders, judged, {"subcorpus": info, "notes_per_folder": counts, "doc_lang": doc_lang, "parent": folders_dir}


# --- builds -------------------------------------------------------------------------------------


def folder_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def index_counts(path: Path) -> dict[str, int]:
    from groove.store.sqlite import connection

    con = connection.connect_sync(path, readonly=True)
    try:
        notes, chunks = con.execute("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks)").fetchone()
    finally:
        con.close()
    return {"notes": notes, "chunks": chunks}


async def timed_build(settings, embedder) -> dict[str, Any]:
    from tests.support.oneshot import index_once

    index_dir = settings.resolved_index_path().parent
    if index_dir.exists():
        shutil.rmtree(index_dir)
    index_dir.mkdir(parents=True)
    w, c = time.perf_counter(), time.process_time()
    rep = await index_once(settings, embedder=embedder)
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "bytes": folder_bytes(index_dir),
        "chunks_embedded": rep.chunks_embedded,
        "full_text_merged": rep.full_text_merged,
        **index_counts(settings.resolved_index_path()),
    }


# --- searching ----------------------------------------------------------------------------------


def rrf(lists: list[tuple[str, list[Any]]], limit: int = LIMIT, k: int = RRF_K) -> list[tuple[str, float]]:
    """(folder, hits) per index -> the fused top `limit` as (path as A names it, hit score).
    Ties (every rank, for disjoint lists) go to the higher score of the hit's own search."""
    fused: dict[tuple[str, Any], list[Any]] = {}
    for folder, hits in lists:
        for rank, h in enumerate(hits, 1):
            key = (folder, h.chunk_id if h.chunk_id is not None else (h.path, h.start_line))
            entry = fused.setdefault(key, [0.0, h.score, f"{folder}/{h.path}"])
            entry[0] += 1.0 / (k + rank)
    order = sorted(fused.values(), key=lambda e: (-e[0], -e[1]))
    return [(path, score) for _, score, path in order[:limit]]


def score_side(runs: dict[str, list[str]], judged: list[dict[str, Any]], doc_lang: dict[str, str]) -> dict[str, Any]:
    from groove.evaluate.metrics import aggregate, first_ranks, score_query

    out: dict[str, Any] = {}
    for lang in ("all", *LANGS):
        qs = [q for q in judged if lang == "all" or q["lang"] == lang]
        scores, own = [], []
        for q in qs:
            paths = runs[q["id"]]
            ranks = first_ranks(paths, q["expected"], lambda h, e: h == e)
            scores.append(score_query(ranks, len(q["expected"])))
            if paths:
                own.append(sum(doc_lang.get(p) == q["lang"] for p in paths) / len(paths))
        m = aggregate(scores)
        out[lang] = {
            "queries": len(qs),
            "ndcg@10": m["ndcg@10"],
            "recall@10": m["recall@10"],
            "mrr": m["mrr"],
            "own_lang_share_top10": round(statistics.mean(own), 4) if own else float("nan"),
        }
    return out


async def measure(args: argparse.Namespace, data: Path, work: Path, report: Report) -> None:
    import anyio

    from groove.config import load_settings
    from groove.embed.embedder import make_embedder
    from groove.index import Index
    from groove.logs import configure
    from groove.search.compiler import QueryError, compile_query
    from groove.search.pipeline import Searcher
    from groove.search.request import SearchRequest
    from groove.store.memory import VectorMatrix
    from groove.store.sqlite.store import load_all

    say(f"load {os.getloadavg()}; work folder {work}")
    folders, judged, corpus = make_corpus(args, data, work)
    say(f"notes per folder {corpus['notes_per_folder']}; {len(judged)} judged queries")

    config = work / "groove.toml"
    config.write_text("# benchmark: groove defaults\n", encoding="utf-8")
    configure(os.environ.get("GROOVE_BENCH_LOG", "warning"))
    names = list(folders)
    s_a = load_settings(config, kb_path=[f"{n}={folders[n]}" for n in names], index_path=work / "A" / "index.sqlite")
    s_b = {
        n: load_settings(config, kb_path=str(folders[n]), index_path=work / f"B-{n}" / "index.sqlite") for n in names
    }
    s_c = load_settings(config, kb_path=str(corpus["parent"]), index_path=work / "C" / "index.sqlite")
    assert s_a.folders().named and [f.name for f in s_a.folders()] == names
    assert not s_c.folders().named and sorted(p.name for p in corpus["parent"].iterdir()) == sorted(names)

    t = time.perf_counter()
    embedder = make_embedder(s_a.embedding)
    await anyio.to_thread.run_sync(embedder.embed_documents, ["warm up the model", "モデルを温める"])
    await anyio.to_thread.run_sync(embedder.embed_queries, ["warm up"])
    say(f"model {embedder.identity} loaded and warmed in {time.perf_counter() - t:.1f} s")

    # an untimed warm-up build (two folders of a few notes each): the first index a process builds pays
    # one-time costs (imports, the tokenizer's first calls) that neither side should carry
    warm = work / "warm-up"
    for n in names:
        (warm / n).mkdir(parents=True, exist_ok=True)
        for p in sorted(folders[n].glob("*.md"))[:3]:
            shutil.copyfile(p, warm / n / p.name)
    t = time.perf_counter()
    await timed_build(
        load_settings(config, kb_path=[f"{n}={warm / n}" for n in names], index_path=warm / "index" / "index.sqlite"),
        embedder,
    )
    say(f"warm-up build {time.perf_counter() - t:.1f} s")

    # builds: A, B (both folders) and C, the order changing round by round (A B C, C B A, B C A, A C B, ...)
    builds: dict[str, list[dict[str, Any]]] = {"A": [], "B": [], "C": []}
    for r in range(args.build_rounds):
        order = ["A", "B", "C"]
        order = order[(r // 2) % 3 :] + order[: (r // 2) % 3]
        if r % 2:
            order.reverse()
        for side in order:
            if side in ("A", "C"):
                got = await timed_build(s_a if side == "A" else s_c, embedder)
                got["load_after"] = round(os.getloadavg()[0], 2)
                builds[side].append(got)
            else:
                parts = {n: await timed_build(s_b[n], embedder) for n in names}
                got = {
                    k: sum(p[k] for p in parts.values())
                    for k in ("wall_s", "cpu_s", "bytes", "chunks_embedded", "notes", "chunks")
                }
                got["per_folder"] = parts
                got["load_after"] = round(os.getloadavg()[0], 2)
                builds["B"].append(got)
            say(
                f"build round {r} {side}: {got['wall_s']:.1f} s wall, {got['cpu_s']:.1f} CPU-s, "
                f"{got['bytes'] / 2**20:.2f} MiB, {got['chunks']} chunks, load {got['load_after']}"
            )
    build = {
        side: {k: statistics.median(b[k] for b in bs) for k in ("wall_s", "cpu_s")}
        | {k: int(statistics.median(b[k] for b in bs)) for k in ("bytes", "chunks", "notes", "chunks_embedded")}
        for side, bs in builds.items()
    }

    # query vectors, once, shared by every side
    texts = []
    for q in judged:
        try:
            texts.append(compile_query(q["text"]).vector_text)
        except QueryError:
            pass
    texts = list(dict.fromkeys(t for t in texts if t.strip()))
    cache = dict(zip(texts, await anyio.to_thread.run_sync(embedder.embed_queries, texts), strict=True))

    async def embed_query(text: str):
        if text not in cache:
            cache[text] = (await anyio.to_thread.run_sync(embedder.embed_queries, [text]))[0]
        return cache[text]

    modes = ("scan", "memory") if args.vectors == "both" else (args.vectors,)
    sides = ("A", "B", "B_par", "C")
    ms: dict[str, dict[str, list[float]]] = {m: {s: [] for s in sides} for m in modes}
    tops: dict[str, dict[str, dict[str, list[str]]]] = {m: {"A": {}, "B": {}, "C": {}} for m in modes}
    async with (
        Index.open(s_a, readonly=True, embedder=embedder) as ia,
        Index.open(s_b[names[0]], readonly=True, embedder=embedder) as ib0,
        Index.open(s_b[names[1]], readonly=True, embedder=embedder) as ib1,
        Index.open(s_c, readonly=True, embedder=embedder) as ic,
    ):
        opened = {"A": ia, names[0]: ib0, names[1]: ib1, "C": ic}

        def searcher(ix, mode):
            vectors = (
                VectorMatrix(load_all(ix.path), ix.settings.search.vector_memory_mb * 2**20)
                if mode == "memory"
                else None
            )
            return Searcher(
                ix.settings.search,
                embed_query=embed_query,
                reranker=ix.searcher.reranker,
                vectors=vectors,
                quality=ix.settings.quality_filter,
            )

        searchers = {m: {k: searcher(ix, m) for k, ix in opened.items()} for m in modes}

        async def one(key, mode, req):
            return await opened[key].search(req, searcher=searchers[mode][key])

        async def fetch(got: dict[str, Any], n: str, mode: str, req: SearchRequest) -> None:
            got[n] = (await one(n, mode, req)).results

        for rnd in range(args.rounds):
            for i, q in enumerate(judged):
                req = SearchRequest(query=q["text"], limit=LIMIT)
                for mode in modes:
                    order = list(sides[i % 4 :] + sides[: i % 4])
                    if (i // 4 + rnd) % 2:
                        order.reverse()
                    for side in order:
                        t = time.perf_counter()
                        if side in ("A", "C"):
                            ans = await one(side, mode, req)
                            merged = [h.path for h in ans.results[:LIMIT]]
                        elif side == "B":
                            lists = [(n, (await one(n, mode, req)).results) for n in names]
                            merged = [p for p, _ in rrf(lists)]
                        else:
                            per_folder: dict[str, Any] = {}
                            async with anyio.create_task_group() as tg:
                                for n in names:
                                    tg.start_soon(fetch, per_folder, n, mode, req)
                            merged = [p for p, _ in rrf([(n, per_folder[n]) for n in names])]
                        took = (time.perf_counter() - t) * 1000
                        if rnd:
                            ms[mode][side].append(took)
                        if rnd == args.rounds - 1 and side in ("A", "B", "C"):
                            tops[mode][side][q["id"]] = merged
            say(f"search round {rnd} done{' (warm-up)' if rnd == 0 else ''}, load {os.getloadavg()[0]:.2f}")
        centres = {
            k: (s.centres.describe() if s.centres is not None else None) for k, s in searchers[modes[-1]].items()
        }

    quality_mode = modes[-1]
    (work / "tops.json").write_text(json.dumps({"judged": judged, "tops": tops}, ensure_ascii=False), encoding="utf-8")
    quality = {side: score_side(tops[quality_mode][side], judged, corpus["doc_lang"]) for side in ("A", "B", "C")}
    same_modes = None
    if len(modes) == 2:
        same_modes = round(
            statistics.mean(
                tops["scan"][s][q["id"]] == tops["memory"][s][q["id"]] for s in ("A", "B", "C") for q in judged
            ),
            4,
        )
    # queries whose top 10 differs from A's: the note paths in order, and as a set (the same notes, reordered)
    differ = {
        m: {
            s: {
                "ordered": sum(tops[m][s][q["id"]] != tops[m]["A"][q["id"]] for q in judged),
                "as_set": sum(set(tops[m][s][q["id"]]) != set(tops[m]["A"][q["id"]]) for q in judged),
                "of": len(judged),
            }
            for s in ("B", "C")
        }
        for m in modes
    }
    latency = {
        m: {
            s: {"p50_ms": round(percentile(v, 50), 2), "p95_ms": round(percentile(v, 95), 2), "n": len(v)}
            for s, v in ms[m].items()
        }
        for m in modes
    }

    report.params = {
        "split": args.split,
        "folders": ",".join(names),
        "notes": corpus["notes_per_folder"],
        "queries": {lang: sum(q["lang"] == lang for q in judged) for lang in LANGS},
        "seed": args.seed,
        "rounds": args.rounds,
        "build_rounds": args.build_rounds,
        "vectors": ",".join(modes),
        "model": embedder.identity,
        "rrf_k": RRF_K,
        "limit": LIMIT,
    }
    ratios = report.ratios
    ratios["build_wall_B/A"] = ratio(build["B"]["wall_s"], build["A"]["wall_s"])
    ratios["build_cpu_B/A"] = ratio(build["B"]["cpu_s"], build["A"]["cpu_s"])
    ratios["index_bytes_B/A"] = ratio(build["B"]["bytes"], build["A"]["bytes"])
    ratios["build_wall_C/A"] = ratio(build["C"]["wall_s"], build["A"]["wall_s"])
    ratios["build_cpu_C/A"] = ratio(build["C"]["cpu_s"], build["A"]["cpu_s"])
    ratios["index_bytes_C/A"] = ratio(build["C"]["bytes"], build["A"]["bytes"])
    for m in modes:
        for s in ("B", "B_par", "C"):
            ratios[f"search_p50_{m}_{s}/A"] = ratio(latency[m][s]["p50_ms"], latency[m]["A"]["p50_ms"])
            ratios[f"search_p95_{m}_{s}/A"] = ratio(latency[m][s]["p95_ms"], latency[m]["A"]["p95_ms"])
    for lang in ("all", *LANGS):
        for k in ("ndcg@10", "recall@10", "mrr"):
            for s in ("B", "C"):
                ratios[f"{k}_{lang}_{s}/A"] = ratio(quality[s][lang][k], quality["A"][lang][k])
    report.raw = {
        "build": {s: {k: (round(v, 2) if isinstance(v, float) else v) for k, v in b.items()} for s, b in build.items()},
        "search": latency,
        "quality": quality,
        "quality_from": quality_mode,
        "top10_same_scan_memory": same_modes,
        "top10_differ_from_A": differ,
        "centres": {k: str(v) for k, v in centres.items()},
        "builds_all_rounds": builds,
        "subcorpus": corpus["subcorpus"],
    }
    report.notes.append(
        "B = two index files, each searched with limit 10, fused by RRF k=60 (ties: the hit's own score); "
        "B_par = the same two searches at once"
    )
    report.notes.append(
        "C = one notes folder, the parent of the two (its notes have A's paths): C/A is the cost of "
        "the several-folders layer; top10_differ_from_A counts queries whose top 10 differs from A's"
    )
    report.notes.append(
        "query vectors computed once up front and shared (latency excludes the model); "
        "nDCG/recall/MRR from groove.evaluate.metrics over note paths"
    )
    report.notes.append(
        "CPU = time.process_time() of this process (the embedder runs in it); builds include "
        "each index's own off-topic calibration"
    )


def print_table(report: Report) -> None:
    raw, r = report.raw, report.ratios
    if not raw:
        return
    rows: list[tuple[str, str, str, str, str, str]] = []

    def fmt(v: Any, unit: str = "") -> str:
        if isinstance(v, float):
            return f"{v:.3f}{unit}" if abs(v) < 100 else f"{v:.1f}{unit}"
        return f"{v}{unit}"

    b = raw["build"]
    for name, k, key in (
        ("build wall (s)", "wall_s", "build_wall"),
        ("build CPU (s)", "cpu_s", "build_cpu"),
        ("index bytes", "bytes", "index_bytes"),
    ):
        in_a, in_b, in_c = (fmt(int(b[s][k])) if k == "bytes" else fmt(b[s][k]) for s in ("A", "B", "C"))
        rows.append((name, in_a, in_b, fmt(r[f"{key}_B/A"]), in_c, fmt(r[f"{key}_C/A"])))
    rows.append(("chunks", fmt(int(b["A"]["chunks"])), fmt(int(b["B"]["chunks"])), "", fmt(int(b["C"]["chunks"])), ""))
    for m, sides in raw["search"].items():
        for s in ("B", "B_par"):
            for p in ("p50", "p95"):
                c = (fmt(sides["C"][f"{p}_ms"]), fmt(r[f"search_{p}_{m}_C/A"])) if s == "B" else ("", "")
                rows.append(
                    (
                        f"search {p} ms ({m}, {s})",
                        fmt(sides["A"][f"{p}_ms"]),
                        fmt(sides[s][f"{p}_ms"]),
                        fmt(r[f"search_{p}_{m}_{s}/A"]),
                        *c,
                    )
                )
    for m, d in raw["top10_differ_from_A"].items():
        for how in ("ordered", "as_set"):
            rows.append(
                (
                    f"top 10 differs from A's ({m}, {how}, of {d['C']['of']})",
                    "",
                    fmt(d["B"][how]),
                    "",
                    fmt(d["C"][how]),
                    "",
                )
            )
    q = raw["quality"]
    for lang in q["A"]:
        for k in ("ndcg@10", "recall@10", "mrr", "own_lang_share_top10"):
            a, bb, cc = q["A"][lang][k], q["B"][lang][k], q["C"][lang][k]
            rows.append(
                (
                    f"{k} {lang} (n={q['A'][lang]['queries']})",
                    fmt(a),
                    fmt(bb),
                    fmt(ratio(bb, a)),
                    fmt(cc),
                    fmt(ratio(cc, a)),
                )
            )
    w = max(len(x[0]) for x in rows)
    print(f"{'':<{w}}  {'A: one index':>14}  {'B: per folder':>14}  {'B/A':>7}  {'C: one folder':>14}  {'C/A':>7}")
    for name, a, bb, rb, cc, rc in rows:
        print(f"{name:<{w}}  {a:>14}  {bb:>14}  {rb:>7}  {cc:>14}  {rc:>7}")
    sys.stdout.flush()
