"""python -m bench [NAME] [options] [--json PATH]; NAME: index, stages, freshness, http, throughput, phrases, switch,
killnine, load, cli, scale, answers, report, ab, hostile, abstention, quality, stores (the BENCHES table below).

With no name, runs every benchmark but `scale`, `report`, `ab`, `hostile`, `abstention`, `quality` and `stores`
(ON_DEMAND) with its default sizes, one after the other.
`hostile` runs bad files through `groove index`, or with `--http` hostile clients against `groove serve`.
`report` (what `make bench` runs) measures a pass and writes docs/benchmarks.md and its charts from it.
`ab VARIANT` runs one of the A/Bs behind the decision records (bench/ab/; `python -m bench ab --help` lists them).
`abstention STEP` builds the off_topic flag's query sets and scores the flag on them (decision 0017);
`quality STEP` measures the quality filter (decision 0020);
`stores STEP` puts the SQLite file and the PostgreSQL store side by side (a first index, eval per retriever);
`scale --stores sqlite,postgresql` serves each size from both.

Every module under bench/ is a bench of this table (or a variant of `ab`'s) or a helper one of them
imports (tests/test_architecture.py checks it), and none uses a private name of groove.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from pathlib import Path

from bench.common import BenchError, Report, emit, write_json

BENCHES = {
    "index": "bench.index",
    "stages": "bench.stages",
    "freshness": "bench.freshness",
    "http": "bench.http",
    "throughput": "bench.throughput",
    "phrases": "bench.phrases",
    "switch": "bench.switch",
    "killnine": "bench.killnine",
    "load": "bench.load",
    "cli": "bench.cli",
    "scale": "bench.scale",
    "answers": "bench.answers",
    "report": "bench.run_report",
    "ab": "bench.ab",
    "hostile": "bench.hostile",
    "abstention": "bench.abstention",
    "quality": "bench.quality",
    "stores": "bench.stores",
}
# scale builds 100k-chunk indexes, report runs the others itself and rewrites docs/benchmarks.md, an A/B needs
# its index or another checkout, hostile builds a corpus of bad files or floods a server, abstention and quality
# are steps over folders and indexes named on their command line, stores needs a PostgreSQL server: by name only.
ON_DEMAND = {"scale", "report", "ab", "hostile", "abstention", "quality", "stores"}


def _module(name: str):
    return importlib.import_module(BENCHES[name])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="groove benchmarks: ratios measured side by side in one run"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument(
        "--data", type=Path, metavar="DIR", help="the folder holding scifact/ (default: ../shared/data)"
    )
    sub = parser.add_subparsers(dest="bench", metavar="BENCH")
    for name in BENCHES:
        mod = _module(name)
        # argparse %-formats help strings: a percent sign in a docstring ("a 1% tag filter") must be doubled.
        p = sub.add_parser(name, help=(mod.__doc__ or "").strip().splitlines()[0].replace("%", "%%"))
        p.add_argument(
            "--json",
            type=Path,
            metavar="PATH",
            default=argparse.SUPPRESS,
            help="also write the results as JSON to PATH",
        )
        p.add_argument(
            "--data", type=Path, metavar="DIR", default=argparse.SUPPRESS, help="the folder holding scifact/"
        )
        mod.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    names = [args.bench] if args.bench else [n for n in BENCHES if n not in ON_DEMAND]
    results: dict[str, dict] = {}
    failed = 0
    for name in names:
        mod = _module(name)
        if args.bench is None:  # every bench with its defaults
            bargs = parser.parse_args([name] + (["--data", str(args.data)] if args.data else []))
        else:
            bargs = args
        try:
            report = mod.main_async(bargs)
        except BenchError as exc:
            sys.stderr.write(f"bench {name}: skipped: {exc}\n")
            results[name] = {"bench": name, "skipped": str(exc)}
            failed += 1 if args.bench else 0
            continue
        except Exception:  # noqa: BLE001 - one broken bench must not hide the others' numbers
            traceback.print_exc()
            results[name] = {"bench": name, "error": traceback.format_exc(limit=3)}
            failed += 1
            continue
        if isinstance(report, Report):
            emit(report)
            results[name] = report.to_dict()
        else:  # an A/B's figures, which it printed itself
            results[name] = report
    if args.json:
        write_json(args.json, results[names[0]] if args.bench else results)
        sys.stderr.write(f"results written to {args.json}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
