"""a whole search with KNN by sqlite-vec's scan against the in-memory copy, per leg, on a large index

`python -m bench ab knn-scale DIR [--queries N]`: DIR is a size folder of `python -m bench scale`
(e.g. /tmp/groove-scale/1000000, with its groove.toml, notes/ and index.sqlite). One read-only
`Index` (the legs run one after another on its one connection), the scale bench's queries embedded
by the real model, `explain` timings per leg, p50: first with sqlite-vec's scan (as over
`vector_memory_mb`), then with the process's in-memory copy of the vectors (its load time and size
reported). The off_topic calibration is left out (measured apart). The second side runs with a
warmer page cache: its vector leg is the comparison, not its full-text legs. docs/scale-out.md's
1M figures were measured with it.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import anyio


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="a size folder of the scale bench (e.g. /tmp/groove-scale/1000000)")
    p.add_argument("--queries", type=int, default=8, help="scale queries per side (default 8)")


async def _measure(root: Path, n: int, data: Path) -> dict[str, Any]:
    from bench.common import make_settings
    from bench.scale import scale_queries
    from groove.index import Index
    from groove.search.request import SearchRequest
    from groove.store.memory import VectorMatrix
    from groove.store.sqlite.store import load_all

    settings = make_settings(root, root / "notes", root / "index.sqlite")
    queries = scale_queries(data, n)
    out: dict[str, Any] = {}
    async with Index.open(settings, readonly=True) as index:

        async def no_calibration(source: Any, state: Any = None) -> None:
            return None

        # The off_topic calibration is measured apart, not in these timings, and no setting leaves it out.
        index.searcher.calibration_for = no_calibration  # type: ignore[method-assign]  # on this Index only
        for side in ("sqlite-vec", "memory"):
            if side == "memory":
                index.searcher.vectors = VectorMatrix(load_all(index.path), 1 << 40)
                t = time.perf_counter()
                async with index.reading() as reads:
                    snap = await index.searcher.vectors.usable(reads)
                out["memory_load_s"] = round(time.perf_counter() - t, 1)
                out["memory_mib"] = round(snap.matrix.nbytes / 2**20) if snap is not None else None
            rows = []
            for q in queries:
                answer = await index.search(SearchRequest(query=q, limit=10, explain=True))
                assert answer.explain is not None  # asked for (explain=True)
                rows.append(answer.explain["timings_ms"])
            keys = sorted({k for r in rows for k in r})
            out[side] = {k: round(statistics.median([r[k] for r in rows if k in r]), 1) for k in keys}
        out["chunks"] = (await index.status()).chunks
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.common import data_dir

    out = anyio.run(_measure, args.dir, args.queries, data_dir(getattr(args, "data", None)))
    for side in ("sqlite-vec", "memory"):
        print(side, out[side])
    print(
        f"chunks {out['chunks']}; in-memory copy {out['memory_mib']} MiB loaded in {out['memory_load_s']} s; "
        f"peak RSS {out['peak_rss_mb']} MB; vector leg sqlite-vec / memory "
        f"{out['sqlite-vec'].get('vector_ms', 0) / max(out['memory'].get('vector_ms', 1e-9), 1e-9):.1f}x"
    )
    return out
