"""`stores`: the SQLite file and the PostgreSQL store side by side: a first index's cost, and eval on both.

    python -m bench stores index --docs 1000 [--rounds 2] [--postgres-url URL]
    python -m bench stores eval /work/eq/jaquad /work/eq/scifact [--postgres-url URL]

`index`: the first N SciFact docs (Markdown notes, ../shared/data/to_markdown.py) indexed from nothing into
each store by `groove index`'s own path (`index_once`), in one process with one model loaded and warmed up
before any timing, so that both stores get the same embedding work and the difference is the store. Rounds
alternate the order (round 1 SQLite first, round 2 PostgreSQL first, ...), each into a new SQLite file or
a new database. Per store: wall seconds, this process's CPU seconds (every thread: the model's included),
and, when the PostgreSQL server runs on this machine, the server's CPU seconds over the same span (all its
processes, read from /proc; with a server of the bench's own that is only the bench's work). Then the same
with a hash-seeded embedder (`text pass`: bench/scale.py's CheapVectors, the real model's identity, token
counts estimated, document vectors from the text's hash): scan, parse, chunk, write and the vectors' rows,
with almost no model work, so the store's own cost is not lost in the model's.

`eval`: each FOLDER is a BEIR folder with its notes in FOLDER/notes and an index groove built of them in
FOLDER/index.sqlite (`python -m bench.subcorpus`, then `groove index`). The index is copied to the workdir
(and brought to this groove's schema version there: the folder is never written), then into a new
database (`groove.store.copy.copy_store`, ids and vectors: nothing embedded again; timed), and `groove eval
FOLDER --retriever R --format json --no-record` runs per retriever (fts and vector, the two halves, and
hybrid) on the SQLite index and on the database (a search node: `--store URL`, no notes folder). Printed:
nDCG@10 (and recall@1, MRR) per set, retriever and store, and the queries whose ranks of the judged notes
differ, whose top three differ (paths compared after the `notes/` the shared store leads them with), and
whose off_topic flag differs.

The PostgreSQL server: `--postgres-url` (an administrator's URL: the bench creates and drops
`bench_stores_...` databases there), else one started by `pgserver` under `--workdir` (bench/postgres.py).
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from bench.common import BenchError, Report, convert_scifact, data_dir, make_settings, ratio, settings_summary
from bench.postgres import PostgresServer

STORES = ("sqlite", "postgresql")
RETRIEVERS = ("fts", "vector", "hybrid")
FOLDER = "notes"  # the name the copy leads every path with in the database


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="what", metavar="STEP", required=True)
    p = sub.add_parser("index", help="a first index of N SciFact docs into each store: wall and CPU seconds")
    p.add_argument("--docs", type=int, default=1000, help="first N SciFact docs (default 1000)")
    p.add_argument("--rounds", type=int, default=1, help="index into each store this many times, alternating the order")
    p.add_argument("--no-text-pass", action="store_true", help="skip the pass with the hash-seeded embedder")
    p.add_argument("--no-model", action="store_true", help="skip the pass with the real model (text pass only)")
    _common(p)
    p = sub.add_parser("eval", help="groove eval per retriever on an index and on its PostgreSQL copy")
    p.add_argument("folders", type=Path, nargs="+", metavar="FOLDER", help="BEIR folder with notes/ and index.sqlite")
    p.add_argument(
        "--retrievers", default=",".join(RETRIEVERS), help=f"comma separated (default {','.join(RETRIEVERS)})"
    )
    _common(p)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json", type=Path, metavar="PATH", default=argparse.SUPPRESS, help="also write the results as JSON to PATH"
    )
    p.add_argument(
        "--postgres-url",
        default=None,
        metavar="URL",
        help="an administrator's URL of the PostgreSQL server to use; default: one started with pgserver",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/groove-stores"),
        help="scratch folder: notes, SQLite files, the pgserver data (default /tmp/groove-stores)",
    )


def _fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


# --- index ------------------------------------------------------------------------------------------------


async def _index_one(pg: PostgresServer, store: str, work: Path, kb: Path, embedder: Any, tag: str) -> dict[str, Any]:
    """One first index of `kb` into a new SQLite file or a new database; what it took."""
    from tests.support.oneshot import index_once

    side = _fresh(work / tag)
    overrides: dict[str, Any] = {}
    name = None
    if store == "postgresql":
        name = f"bench_stores_{tag}"
        overrides["store.url"] = pg.database(name)
    settings = make_settings(side, kb, side / "index.sqlite", **overrides)
    server0, cpu0 = pg.cpu_s(), time.process_time()
    t = time.perf_counter()
    done = await index_once(settings, embedder=embedder)
    wall = time.perf_counter() - t
    cpu, server1 = time.process_time() - cpu0, pg.cpu_s()
    out: dict[str, Any] = {
        "wall_s": wall,
        "cpu_s": cpu,
        "chunks": done.chunks_written,
        "embedded": done.chunks_embedded,
        "notes": done.added,
    }
    if store == "postgresql" and server0 is not None and server1 is not None:
        out["server_cpu_s"] = server1 - server0
    if name is not None:
        out["store_mb"] = pg.size_mb(name)
        pg.drop(name)
    else:
        out["store_mb"] = round(sum(p.stat().st_size for p in side.glob("index.sqlite*")) / 2**20, 1)
    return out


def _side(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs of one store: means of the seconds, the counts (the same every run)."""
    n = len(runs)
    out: dict[str, Any] = {"runs": n}
    for key in ("wall_s", "cpu_s", "server_cpu_s"):
        values = [r[key] for r in runs if key in r]
        if values:
            out[key] = round(sum(values) / len(values), 2)
    if "server_cpu_s" in out:
        out["cpu_with_server_s"] = round(out["cpu_s"] + out["server_cpu_s"], 2)
    for key in ("chunks", "embedded", "notes", "store_mb"):
        out[key] = runs[-1][key]
    out["wall_each_s"] = [round(r["wall_s"], 2) for r in runs]
    return out


async def run_index(args: argparse.Namespace, pg: PostgresServer, report: Report) -> None:
    from bench.scale import CheapVectors
    from groove.embed.embedder import make_embedder

    data = data_dir(getattr(args, "data", None))
    work = args.workdir
    kb = _fresh(work / "notes")
    docs = convert_scifact(data, kb, args.docs, scratch=work / "scratch")
    settings = make_settings(work, kb, work / "index.sqlite")
    real = make_embedder(settings.embedding)
    real.embed_documents(["warm up the model"] * settings.embedding.batch_size)  # load and warm up: untimed
    report.params.update({"docs": docs, "rounds": args.rounds, **settings_summary(settings)})
    passes = []
    if not args.no_model:
        passes.append(("model", real))
    if not args.no_text_pass:
        passes.append(("text", CheapVectors(real)))
    if not passes:
        raise BenchError("--no-model and --no-text-pass leave nothing to measure")
    for label, embedder in passes:
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in STORES}
        for r in range(args.rounds):
            for store in STORES if r % 2 == 0 else tuple(reversed(STORES)):
                got = await _index_one(pg, store, work, kb, embedder, f"{label}_{store}_{r}")
                runs[store].append(got)
                sys.stderr.write(f"stores index: {label} pass, {store}, round {r + 1}: {got['wall_s']:.1f} s\n")
        sides = {s: _side(runs[s]) for s in STORES}
        report.raw[label] = sides
        lite, pgs = sides["sqlite"], sides["postgresql"]
        report.ratios[f"{label}_wall_postgresql_over_sqlite"] = ratio(pgs["wall_s"], lite["wall_s"])
        report.ratios[f"{label}_cpu_postgresql_over_sqlite"] = ratio(pgs["cpu_s"], lite["cpu_s"])
        if "cpu_with_server_s" in pgs:
            report.ratios[f"{label}_cpu_with_server_postgresql_over_sqlite"] = ratio(
                pgs["cpu_with_server_s"], lite["cpu_s"]
            )
        if (lite["chunks"], lite["embedded"]) != (pgs["chunks"], pgs["embedded"]):
            report.notes.append(
                f"WARNING: the {label} pass wrote {lite['chunks']} / embedded {lite['embedded']} chunks on SQLite but"
                f" {pgs['chunks']} / {pgs['embedded']} on PostgreSQL: not the same work"
            )
    report.notes.append(
        "cpu_s: this process (every thread, the model's included); server_cpu_s: the PostgreSQL server's processes"
        " over the same span; the SQLite store has no server (cpu_with_server ratio: PostgreSQL's both over SQLite's)"
    )
    report.notes.append(
        "text pass: the hash-seeded embedder (real model identity, estimated token counts): the store's own work"
    )


# --- eval -------------------------------------------------------------------------------------------------


def _eval(config: Path, folder: Path, retriever: str, where: list[str]) -> tuple[dict[str, Any], float]:
    """`groove eval FOLDER --retriever R --format json --no-record` in a process of its own; its JSON, seconds."""
    cmd = [sys.executable, "-m", "groove.cli", "eval", str(folder), "--config", str(config), *where]
    cmd += ["--retriever", retriever, "--format", "json", "--no-record", "--log-level", "warning"]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=3600)
    seconds = time.perf_counter() - t
    if done.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    return json.loads(done.stdout), seconds


def working_copy(index: Path, dest: Path) -> dict[str, int]:
    """The index copied to `dest` (SQLite's backup: what its WAL holds included) and brought to this groove's
    schema version (`migrate_sync`: a step of the schema, nothing embedded again), so that an index an older
    groove built is evaluated without writing to it; the schema versions before and after."""
    from groove.store.sqlite import connection, schema

    dest.parent.mkdir(parents=True, exist_ok=True)
    src = connection.connect_sync(index, readonly=True)
    dst = connection.connect_sync(dest)
    try:
        src.backup(dst)
        before = int(schema.get_meta_sync(dst, "schema_version", "0") or 0)
        after = schema.migrate_sync(dst, before)
    finally:
        src.close()
        dst.close()
    return {"schema_before": before, "schema_after": after}


def _unprefixed(path: str) -> str:
    return path[len(FOLDER) + 1 :] if path.startswith(FOLDER + "/") else path


def compare_queries(lite: dict[str, Any], pgs: dict[str, Any]) -> dict[str, int]:
    """Queries (matched by id) whose ranks of the judged notes, top three or off_topic flag differ."""
    a = {q["id"]: q for q in lite["queries"]}
    b = {q["id"]: q for q in pgs["queries"]}
    both = sorted(set(a) & set(b))
    return {
        "queries": len(both),
        "missing": len(set(a) ^ set(b)),
        "ranks_differ": sum(1 for q in both if a[q].get("ranks") != b[q].get("ranks")),
        "top3_differ": sum(1 for q in both if a[q]["top"] != [_unprefixed(p) for p in b[q]["top"]]),
        "off_topic_differ": sum(1 for q in both if a[q].get("off_topic") != b[q].get("off_topic")),
    }


def _metrics(result: dict[str, Any], seconds: float) -> dict[str, Any]:
    m = result["metrics"]
    return {"ndcg@10": m["ndcg@10"], "recall@1": m["recall@1"], "mrr": m["mrr"], "seconds": round(seconds, 1)}


async def run_eval(args: argparse.Namespace, pg: PostgresServer, report: Report) -> None:
    from groove.store.address import address
    from groove.store.copy import copy_store

    retrievers = [r.strip() for r in str(args.retrievers).split(",") if r.strip()]
    if not retrievers or any(r not in RETRIEVERS for r in retrievers):
        raise BenchError(f"--retrievers takes {', '.join(RETRIEVERS)}, not {args.retrievers!r}")
    work = _fresh(args.workdir / "eval")
    config = work / "groove.toml"
    config.write_text("# benchmark: groove defaults\n", encoding="utf-8")
    report.params["retrievers"] = retrievers
    report.params["folders"] = [str(f) for f in args.folders]
    for folder in args.folders:
        source, notes = folder / "index.sqlite", folder / "notes"
        if not source.is_file() or not notes.is_dir():
            raise BenchError(f"{folder} needs notes/ and index.sqlite (an index groove built of those notes)")
        name = folder.resolve().name
        index = work / name / "index.sqlite"
        schema = await anyio.to_thread.run_sync(working_copy, source, index)
        db = "bench_stores_eval_" + "".join(c if c.isalnum() else "_" for c in name.lower())
        url = pg.database(db)
        t = time.perf_counter()
        copied = await anyio.to_thread.run_sync(
            functools.partial(copy_store, address(None, index), address(url, Path()), folder=FOLDER)
        )
        out: dict[str, Any] = {
            "copy_s": round(time.perf_counter() - t, 1),
            "chunks": copied.rows.get("chunks"),
            **schema,
        }
        for retriever in retrievers:
            lite, s_lite = await anyio.to_thread.run_sync(
                _eval, config, folder, retriever, ["--kb", str(notes), "--index", str(index)]
            )
            pgs, s_pg = await anyio.to_thread.run_sync(_eval, config, folder, retriever, ["--store", url])
            out[retriever] = {
                "sqlite": _metrics(lite, s_lite),
                "postgresql": _metrics(pgs, s_pg),
                **compare_queries(lite, pgs),
            }
            report.ratios[f"{name}_{retriever}_ndcg10_postgresql_over_sqlite"] = ratio(
                pgs["metrics"]["ndcg@10"], lite["metrics"]["ndcg@10"]
            )
            line = (
                f"{name} {retriever}: nDCG@10 sqlite {lite['metrics']['ndcg@10']:.4f},"
                f" postgresql {pgs['metrics']['ndcg@10']:.4f}; ranks differ on"
                f" {out[retriever]['ranks_differ']} of {out[retriever]['queries']} queries"
            )
            report.notes.append(line)
            sys.stderr.write(f"stores eval: {line}\n")
        report.raw[name] = out
        pg.drop(db)
    report.notes.append(
        "ranks_differ: queries whose ranks of the judged notes differ; top3_differ: whose three best paths differ"
        f" (the database's paths without their leading '{FOLDER}/')"
    )


async def run(args: argparse.Namespace) -> Report:
    t = time.perf_counter()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.what == "index":
        report = Report("stores", "a first index into the SQLite file and into PostgreSQL, side by side")
    else:
        report = Report("stores", "groove eval per retriever on an SQLite index and on its PostgreSQL copy")
    report.params["step"] = args.what
    with PostgresServer(args.postgres_url, args.workdir) as pg:
        report.params["postgres"] = pg.settings()
        if args.what == "index":
            await run_index(args, pg, report)
        else:
            await run_eval(args, pg, report)
    report.seconds = time.perf_counter() - t
    return report


def main_async(args: argparse.Namespace) -> Report:
    return anyio.run(run, args)
