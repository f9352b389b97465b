"""`phrases`: what a 32-phrase FTS OR costs next to a single phrase (the seeds' cost guard, as a ratio).

One FTS5 trigram table of N rows in which every phrase matches every row (the
worst case for an OR of phrases), queried the way the FTS leg queries
(`MATCH ? ORDER BY bm25(...) LIMIT 50`). The two queries alternate, and the
best of the repeats is kept for each, so load on the machine falls on both
alike. The seeds measured about 10x; a blow-up (a plan that scans once per
phrase and sorts the union) shows as a ratio near 32 or above.

Needs no data folder. Lives here, not in tests/, because tests never assert timings.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import Report, ratio

DEFAULT_ROWS = 4000
DEFAULT_REPEATS = 7
SEEDS_RATIO = 10.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=DEFAULT_ROWS, help=f"rows in the FTS table (default {DEFAULT_ROWS})")
    p.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_REPEATS,
        help=f"runs of each query; the best counts (default {DEFAULT_REPEATS})",
    )


def main_async(args: argparse.Namespace) -> Report:
    from groove.search.compiler import compile_query
    from groove.store.sqlite import connection

    t_start = time.perf_counter()
    words = [f"w{i:02d}{'abcdefghij'[i % 10]}x" for i in range(32)]
    one = compile_query(words[0]).match_expr
    many = compile_query(" ".join(words)).match_expr
    assert many is not None and many.count(" OR ") == 31, many
    sql = "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t, 2.0, 1.0, 1.0) LIMIT 50"
    best = {"one": float("inf"), "many": float("inf")}
    with tempfile.TemporaryDirectory(prefix="groove-bench-phrases-") as tmp:
        con = connection.connect_sync(Path(tmp) / "cost.sqlite")
        try:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(heading, context, content, tokenize='trigram')")
            row = " ".join(words) + " filler text " * 20
            con.execute("BEGIN")
            con.executemany("INSERT INTO t(heading, context, content) VALUES (?, ?, ?)", [("h", "c", row)] * args.rows)
            con.execute("COMMIT")
            for _ in range(args.repeats):
                for name, expr in (("one", one), ("many", many)):
                    t = time.perf_counter()
                    con.execute(sql, (expr,)).fetchall()
                    best[name] = min(best[name], time.perf_counter() - t)
        finally:
            con.close()
    report = Report(
        bench="phrases",
        title="a 32-phrase FTS OR against a single phrase, every phrase matching every row",
        params={"rows": args.rows, "repeats": args.repeats},
        ratios={"or32_over_one_phrase": ratio(best["many"], best["one"])},
        raw={"one_phrase_ms": round(best["one"] * 1000, 3), "or32_ms": round(best["many"] * 1000, 3)},
        notes=[f"the seeds measured ~{SEEDS_RATIO:.0f}x; near 32x or above means one scan per phrase"],
    )
    report.seconds = time.perf_counter() - t_start
    return report
