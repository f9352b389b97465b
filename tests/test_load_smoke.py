"""The load bench at its smallest: a few MCP clients search over real Streamable HTTP (loopback) while
a burst of edits is indexed; no request fails and every edit ends findable by its own word. No timing
is asserted: `python -m bench load` reports p50 / p95 (docs/benchmarks.md)."""

from __future__ import annotations

from pathlib import Path

import anyio

from bench import load


def test_clients_searching_during_an_edit_burst_see_no_failure_and_no_edit_is_lost(spawn, tmp_path: Path):
    # bench.load starts the `groove serve` it loads: `spawn` marks the test.
    out = anyio.run(lambda: load.run_load(tmp_path / "work", clients=4, edits=20, seconds=4.0, notes=10, settle=90.0))
    assert out["requests"] > 0 and out["edits"] == 20
    assert out["failed"] == 0, out["failures"]
    assert out["lost_edits"] == 0, out["lost"]
    assert out["p50_ms"] > 0 and out["p95_ms"] >= out["p50_ms"]
