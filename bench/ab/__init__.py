"""ab VARIANT: one A/B behind a decision (docs/decisions), run again by name; `python -m bench ab --help` lists them.

Each variant measures two ways of doing one thing side by side in one run, the sides alternating
query by query, and prints its figures; `python -m bench --json PATH ab VARIANT ...` also writes
them. Most need an index the scale bench built (`python -m bench scale`), some another checkout;
none runs in `python -m bench` with no name. Each variant is a module of this package with
`add_arguments(parser)` and `run(args) -> dict`.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

VARIANTS = {
    "dense": "bench.ab.dense",
    "engine": "bench.ab.engine",
    "engine-index": "bench.ab.engine_index",
    "centres": "bench.ab.centres",
    "folders": "bench.ab.folders",
    "fts": "bench.ab.fts",
    "knn-scale": "bench.ab.knn_scale",
    "merge": "bench.ab.merge",
    "parts": "bench.ab.parts",
    "serve": "bench.ab.serve",
    "sessions": "bench.ab.sessions",
    "tokenizer": "bench.ab.tokenizer",
    "vectors": "bench.ab.vectors",
    "words": "bench.ab.words",
}


def variant(name: str) -> ModuleType:
    return importlib.import_module(VARIANTS[name])


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="variant", metavar="VARIANT", required=True)
    for name in VARIANTS:
        doc = (variant(name).__doc__ or "").strip()
        v = sub.add_parser(
            name,
            help=doc.splitlines()[0].replace("%", "%%"),
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        v.add_argument(
            "--json",
            type=Path,
            metavar="PATH",
            default=argparse.SUPPRESS,
            help="also write the figures as JSON to PATH",
        )
        v.add_argument(
            "--data",
            type=Path,
            metavar="DIR",
            default=argparse.SUPPRESS,
            help="the folder holding scifact/ and jaquad/",
        )
        variant(name).add_arguments(v)


def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """The registry's entry (`python -m bench ab VARIANT`): the variant prints its figures and returns them."""
    return variant(args.variant).run(args)
