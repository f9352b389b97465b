"""`answers`: the bytes of a default 10-hit MCP search answer, the old shape beside the new one.

For each query, one search through groove's search path (`app.Index.search`,
what the daemon's `search` tool calls), then the same response in two shapes,
each as the JSON-RPC `result` the server sends (`CallToolResult` serialised
by its model, text content + structuredContent):

- before: what the tool answered until the typed answers: the response dict
  as indented JSON text (`pydantic_core.to_json(indent=2)`, the SDK's
  conversion of a `dict` return value) **and** the same dict again as
  structuredContent, internal ids included. Computed here from the old shape;
  no old server runs.
- after: `groove.search.answers` (the tool's answer now): the compact text
  rendering and the typed structuredContent with a `uri` per hit and no ids.

Corpora: the shipped example notes (indexed first, in a temporary folder),
and with `--notes DIR --index FILE` a bigger one (e.g. SciFact's notes and
its e5 index): both are **copied** to a temporary folder first and only the
copy is opened. Reported: the median bytes before and after, the ratio
after / before, and the passage bytes (the note text the hits carry) to show
what the overhead is relative to.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import pydantic_core

from bench.common import EXAMPLES, BenchError, Report, data_dir, make_settings, ratio, scifact_queries

EXAMPLE_QUERIES = [
    "照り焼きのたれ",
    "sqlite-vec migration",
    "京都旅行の計画",
    "WAL checkpoint",
    "再ランキングの評価",
    "how do readers and the writer share the database",
    "MMR diversity",
]
DEFAULT_QUERIES = 10  # from the bigger corpus's judged queries


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--notes", type=Path, metavar="DIR", help="a bigger notes folder (copied to a temporary folder first)"
    )
    p.add_argument(
        "--index", type=Path, metavar="FILE", help="its index (copied too; its model must be the configured one)"
    )
    p.add_argument(
        "--queries",
        type=int,
        default=DEFAULT_QUERIES,
        help=f"queries on the bigger corpus, from SciFact's queries.jsonl (default {DEFAULT_QUERIES})",
    )
    p.add_argument("--limit", type=int, default=10, help="hits per search (default 10, the tool's default)")
    p.add_argument("--no-examples", action="store_true", help="skip the example notes")
    p.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help="[embedding] model for the example notes' index (default: groove's; the bytes hardly depend on it)",
    )


def _old_result(response: dict[str, Any]):
    """The old tool answer: the dict as indented JSON text, and the dict again as structuredContent."""
    from mcp_types import CallToolResult, TextContent

    text = pydantic_core.to_json(response, fallback=str, indent=2).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=response)


def _new_result(answer: Any):
    from groove.search.answers import search_text
    from groove.serve.mcp.server import tool_result

    return tool_result(answer.for_client(), search_text)


def _wire_bytes(result: Any) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


async def _measure(settings: Any, queries: list[str], limit: int) -> dict[str, Any]:
    from groove.index import Index
    from groove.search.request import SearchRequest

    index = Index(settings)
    await index.open_reader()
    rows: list[dict[str, Any]] = []
    try:
        for q in queries:
            answer = await index.search(SearchRequest(query=q, limit=limit))
            response = answer.script_json()  # the pipeline's dict, as the old tool sent it
            response["startup_reconcile_done"] = True  # the tool adds it
            old, new = _old_result(response), _new_result(answer)
            rows.append(
                {
                    "query": q,
                    "hits": len(response["results"]),
                    "notes": len({r["path"] for r in response["results"]}),
                    "passage_bytes": sum(len(r["content"].encode()) for r in response["results"]),
                    "before_bytes": _wire_bytes(old),
                    "after_bytes": _wire_bytes(new),
                    "after_text_bytes": len(new.content[0].text.encode()),
                    "after_structured_bytes": len(json.dumps(new.structured_content, ensure_ascii=False).encode()),
                }
            )
    finally:
        await index.close()
    med = {
        k: statistics.median(r[k] for r in rows)
        for k in (
            "hits",
            "notes",
            "passage_bytes",
            "before_bytes",
            "after_bytes",
            "after_text_bytes",
            "after_structured_bytes",
        )
    }
    return {"median": med, "queries": rows}


async def run(args: argparse.Namespace) -> Report:
    if args.limit < 1 or args.queries < 1:
        raise BenchError("--limit and --queries must be at least 1")
    if (args.notes is None) != (args.index is None):
        raise BenchError("--notes and --index go together: a bigger notes folder and its index")
    started = time.perf_counter()
    report = Report(
        bench="answers",
        title="bytes of a default search answer: old JSON-twice shape vs typed + compact",
        params={"limit": args.limit},
    )
    with tempfile.TemporaryDirectory(prefix="groove-bench-answers-") as tmp_name:
        tmp = Path(tmp_name)
        corpora: list[tuple[str, Any, list[str]]] = []
        if not args.no_examples:
            from tests.support.oneshot import index_once

            kb = tmp / "examples" / "notes"
            shutil.copytree(EXAMPLES, kb)
            overrides = {"embedding.model": args.model} if args.model else {}
            settings = make_settings(tmp / "examples", kb, tmp / "examples" / "index.sqlite", **overrides)
            await index_once(settings)
            corpora.append(("examples", settings, EXAMPLE_QUERIES))
        if args.notes is not None:
            if not args.notes.is_dir() or not args.index.is_file():
                raise BenchError(f"{args.notes} must be a folder and {args.index} an index file")
            big = tmp / "big"
            big.mkdir()
            shutil.copytree(args.notes, big / "notes")
            shutil.copy2(args.index, big / "index.sqlite")
            settings = make_settings(big, big / "notes", big / "index.sqlite")
            corpora.append(("bigger", settings, scifact_queries(data_dir(getattr(args, "data", None)), args.queries)))
        if not corpora:
            raise BenchError("nothing to measure: --no-examples and no --notes/--index")
        for name, settings, queries in corpora:
            measured = await _measure(settings, queries, args.limit)
            m = measured["median"]
            report.ratios[f"{name}_after_over_before"] = ratio(m["after_bytes"], m["before_bytes"])
            report.raw[name] = measured
            report.notes.append(
                f"{name}: {len(queries)} queries, median {m['hits']:g} hits from {m['notes']:g} notes, "
                f"passages {m['passage_bytes']:,.0f} B; before {m['before_bytes']:,.0f} B, after "
                f"{m['after_bytes']:,.0f} B "
                f"(text {m['after_text_bytes']:,.0f} B + structured {m['after_structured_bytes']:,.0f} B)"
            )
    report.seconds = time.perf_counter() - started
    return report


def main_async(args: argparse.Namespace) -> Report:
    return anyio.run(run, args)
