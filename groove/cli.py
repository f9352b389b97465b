"""The `groove` command line: serve, index, search, related, status, eval, service.

Results go to stdout; progress, logs and errors to stderr. Every subcommand
accepts `--config PATH`, `--kb PATH` and `--index PATH`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import anyio

from groove import __version__, service
from groove.app import eval_once, index_once, read_status, related_once, search_once
from groove.config import Settings, load_settings, user_config_file
from groove.errors import GrooveError, UsageError
from groove.logs import configure as configure_logs
from groove.logs import get_logger
from groove.search.request import SearchRequest

__all__ = ["UsageError", "build_parser", "main"]


# --- helpers ---------------------------------------------------------------------

def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("common options")
    g.add_argument("--config", type=Path, metavar="PATH", help="groove.toml to use (default: ./groove.toml, then the user config dir)")
    g.add_argument("--kb", type=Path, metavar="PATH", help="the notes folder (kb_path)")
    g.add_argument("--index", type=Path, metavar="PATH", dest="index_path", help="the SQLite index file (index_path)")
    g.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="log level (stderr)")


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    overrides: dict[str, Any] = {
        "kb_path": args.kb,
        "index_path": args.index_path,
        "log.level": args.log_level,
    }
    overrides.update(extra)
    settings = load_settings(args.config, **overrides)
    configure_logs(settings.log.level, settings.log.format)
    return settings


def _emit(obj: Any, fmt: str, text: Callable[[Any], str]) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(text(obj))
    sys.stdout.flush()


class ProgressBar:
    """A bar on a terminal, plain lines otherwise (both on stderr)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0
        self.phase = ""

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if self.tty:
            if done != total and now - self.last_line < 0.1:
                return
            width = 30
            filled = int(width * done / total) if total else width
            sys.stderr.write(f"\r{phase:>5} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()
        else:
            if phase != self.phase or done == total or now - self.last_line >= 5.0:
                sys.stderr.write(f"{phase}: {done}/{total}\n")
                sys.stderr.flush()
            else:
                return
        self.phase = phase
        self.last_line = now


# --- index / status -----------------------------------------------------------------

def cmd_index(args: argparse.Namespace) -> int:
    settings = _settings(args)
    summary = anyio.run(lambda: index_once(settings, rebuild=args.rebuild, progress=ProgressBar()))

    def text(s: dict) -> str:
        return (
            f"indexed {s['kb_path']} -> {s['index_path']}\n"
            f"files: {s['added']} added, {s['changed']} changed, {s['renamed']} renamed, "
            f"{s['deleted']} deleted, {s['unchanged']} unchanged, {s['skipped']} skipped\n"
            f"chunks: {s['chunks_written']} written, {s['chunks_embedded']} embedded; "
            f"{s['pending_chunks']} pending; {s['seconds']:.1f} s\n"
        )

    _emit(summary, args.format, text)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    st = anyio.run(lambda: read_status(settings))

    def text(s: dict) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s["last_indexed_at"])) if s["last_indexed_at"] else "never"
        lines = [
            f"notes:        {s['kb_path']}",
            f"index:        {s['index_path']}",
            f"model:        {s['model']} ({s['dimension']} dims)",
            f"documents:    {s['documents']}",
            f"chunks:       {s['chunks']} ({s['pending_chunks']} waiting for a vector)",
            f"embeddings:   {s['embeddings_computed']} computed in total, {s['vectors']} stored",
            f"last indexed: {when}",
        ]
        fit = s.get("model_fit") or {}
        if fit.get("warning"):
            lines.append(f"model fit:    warning: {fit['warning']}")
        if s["skipped"]:
            lines.append(f"skipped:      {len(s['skipped'])} file(s)")
            lines += [f"  {x['path']}: {x['reason']}" for x in s["skipped"]]
        if s["warnings"]:
            lines.append(f"warnings:     {len(s['warnings'])} note(s)")
            lines += [f"  {x['path']}: {w}" for x in s["warnings"] for w in x["warnings"]]
        return "\n".join(lines) + "\n"

    _emit(st, args.format, text)
    return 0


# --- search ---------------------------------------------------------------------------

def _add_search_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=None, help="how many results (1..100, default [search] default_limit)")
    p.add_argument("--retriever", choices=["hybrid", "fts", "vector"], default="hybrid", help="score one half alone")
    g = p.add_argument_group("refine stages")
    g.add_argument("--reranker", metavar="MODEL", help="rerank with this cross-encoder (name or path); applies unconditionally")
    g.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=None, help="use the configured reranker")
    g.add_argument("--mmr", action=argparse.BooleanOptionalAction, default=None, help="MMR diversity re-rank")
    g.add_argument("--mmr-lambda", type=float, default=None, metavar="L", help="MMR relevance weight, 0..1")
    g.add_argument("--mmr-same-doc-penalty", type=float, default=None, metavar="P", help="MMR same-document penalty, >= 0")
    g.add_argument("--parent-retriever", action=argparse.BooleanOptionalAction, default=None, help="expand small hits")
    f = p.add_argument_group("filters")
    f.add_argument("--path", action="append", dest="path_globs", metavar="GLOB", help="only paths matching (gitignore-style; !GLOB excludes); repeatable")
    f.add_argument("--tag", action="append", dest="tags_any", metavar="TAG", help="notes with any of these tags; repeatable")
    f.add_argument("--all-tags", action="append", dest="tags_all", metavar="TAG", help="notes with all of these tags; repeatable")
    f.add_argument("--date-from", metavar="YYYY-MM-DD", help="frontmatter date on or after")
    f.add_argument("--date-to", metavar="YYYY-MM-DD", help="frontmatter date on or before")
    f.add_argument("--field", action="append", dest="fields", metavar="KEY=VALUE", help="frontmatter KEY equals VALUE; repeatable")


def _request_from_args(args: argparse.Namespace, settings: Settings, query: str) -> SearchRequest:
    fields: dict[str, str] = {}
    for item in args.fields or []:
        if "=" not in item:
            raise UsageError(f"--field takes KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        fields[key.strip()] = value
    return SearchRequest(
        query=query,
        limit=args.limit if args.limit is not None else settings.search.default_limit,
        retriever=args.retriever,
        filters={
            "path_globs": args.path_globs, "tags_any": args.tags_any, "tags_all": args.tags_all,
            "date_from": args.date_from, "date_to": args.date_to, "fields": fields or None,
        },
        rerank=args.rerank,
        mmr=args.mmr,
        mmr_lambda=args.mmr_lambda,
        mmr_same_doc_penalty=args.mmr_same_doc_penalty,
        parent_retriever=args.parent_retriever,
        explain=getattr(args, "explain", False),
    )


def _position_text(position: dict | None) -> str:
    """' (page 3)', ' (slide 2)', ' (sheet Budget, rows 2-40)' for a document hit; '' for a note."""
    if not position:
        return ""
    if "sheet" in position:
        rows = position.get("rows") or []
        span = f", rows {rows[0]}-{rows[1]}" if len(rows) == 2 else ""
        return f" (sheet {position['sheet']}{span})"
    return "".join(f" ({k} {v})" for k, v in position.items())


def format_results_text(resp: dict) -> str:
    out = []
    for i, r in enumerate(resp["results"], 1):
        where = f"{r['path']}:{r['start_line']}-{r['end_line']}{_position_text(r.get('position'))}"
        out.append(f"{i:>2}. {r['score']:.4f}  {where}  {r['context'] or r['title']}")
        snippet = " ".join(r["content"].split())
        out.append(f"    {snippet[:200]}{'…' if len(snippet) > 200 else ''}")
    if not resp["results"]:
        out.append("no results")
    notes = []
    if resp.get("low_confidence"):
        notes.append("low confidence: no result stands out")
    if resp.get("pending_chunks"):
        notes.append(f"{resp['pending_chunks']} chunk(s) still waiting for vectors")
    if resp.get("vectors_degraded"):
        notes.append("vectors degraded: the query could not be embedded, so these results come from full text alone")
    for w in resp.get("warnings", []):
        notes.append(f"warning: {w}")
    if resp.get("filter_applied"):
        notes.append(f"filter: {json.dumps(resp['filter_applied'], ensure_ascii=False)}")
    out += [f"({n})" for n in notes]
    if "explain" in resp:
        e = resp["explain"]
        out.append("explain:")
        out.append(f"  MATCH expression: {e['match_expr'] if e['match_expr'] else '(none: vector-only)'}")
        if e["excluded_terms"]:
            out.append(f"  excluded terms:   {e['excluded_terms']} ({e['excluded_chunks']} chunk(s) match them)")
        out.append(f"  bigram expression: {e['bigram_expr'] or '(none: no Japanese / Chinese text)'}")
        out.append(f"  embedded text:    {e['vector_text']!r}")
        f = e["fusion"]
        legs = ", ".join(
            f"{name} {w:g}" + (f" (evidence {f['evidence'][name]:.2f})" if name in f["evidence"] else "")
            for name, w in f["weights"].items()
        )
        out.append(f"  fusion:           {f['method']}; leg weights: {legs or '(no leg returned anything)'}")
        out.append(f"  candidates:       fts {e['candidates']['fts']}, vector {e['candidates']['vector']}, fused {e['candidates']['fused']} (pool {e['pool_per_retriever']} per retriever)")
        out.append(f"  vector-only:      {e['vector_only']}   whole-query fallback: {e['fallback']}")
        out.append(f"  stages:           {e['stages']}")
        out.append(f"  timings (ms):     {e['timings_ms']}")
        for i, r in enumerate(resp["results"], 1):
            out.append(f"  #{i}: fts rank {r['fts_rank'] or '-'}, vector rank {r['vec_rank'] or '-'}  {r['path']}")
    return "\n".join(out) + "\n"


def cmd_search(args: argparse.Namespace) -> int:
    settings = _settings(args)
    req = _request_from_args(args, settings, args.query)
    resp = anyio.run(lambda: search_once(settings, req, reranker_model=args.reranker))
    _emit(resp, args.format, format_results_text)
    return 0


def cmd_related(args: argparse.Namespace) -> int:
    settings = _settings(args)
    result = anyio.run(lambda: related_once(
        settings, args.path, limit=args.limit, depth=args.depth, fan_out=args.fan_out, max_nodes=args.max_nodes,
    ))

    def text(r: dict) -> str:
        lines = [f"notes related to {r['source']['path']} ({r['source']['title']}):"]
        for i, n in enumerate(r["related"], 1):
            via = " -> ".join(n["via"][1:-1])
            hop = f"  via {via}" if via else ""
            lines.append(f"{i:>2}. {n['score']:.3f}  {n['path']}  [{n['chunk'].get('heading', '')}] depth {n['depth']}{hop}")
        if not r["related"]:
            lines.append("  (none)")
        if r["bounded_by"]:
            lines.append(f"(stopped early: {', '.join(r['bounded_by'])})")
        return "\n".join(lines) + "\n"

    _emit(result, args.format, text)
    return 0


# --- eval -----------------------------------------------------------------------------

def cmd_eval(args: argparse.Namespace) -> int:
    settings = _settings(args)
    options = {
        "rerank": args.rerank, "mmr": args.mmr, "mmr_lambda": args.mmr_lambda,
        "mmr_same_doc_penalty": args.mmr_same_doc_penalty, "parent_retriever": args.parent_retriever,
    }
    result = anyio.run(lambda: eval_once(
        settings, args.golden, retriever=args.retriever, split=args.split, limit=args.limit,
        max_queries=args.max_queries, request_options=options, reranker_model=args.reranker,
    ))

    def text(r: dict) -> str:
        m = r["metrics"]
        c = r["confidence"]

        def acc(v: float | None) -> str:
            return "-" if v is None else f"{v:.4f}"

        return (
            f"{r['count']} queries from {r['source']} ({r['retriever']})\n"
            + "".join(f"  {k:<10} {v:.4f}\n" for k, v in m.items())
            + f"  low_confidence on {c['flagged_share']:.0%} of queries; top-1 right {acc(c['top1_flagged'])} "
            f"when flagged, {acc(c['top1_unflagged'])} when not\n"
        )

    _emit(result, args.format, text)
    return 0


# --- serve ----------------------------------------------------------------------------

def cmd_serve(args: argparse.Namespace) -> int:
    # Lazy: the MCP SDK, Starlette and uvicorn take most of a second to import, and only
    # `serve` needs them (the other commands, `--help` and config errors stay fast).
    from groove.serve.http import parse_bind
    from groove.serve.main import serve, with_example_notes_if_unset

    settings = _settings(args)
    transport = args.transport or settings.serve.transport
    bind = args.bind or settings.serve.bind
    if transport == "http" or args.bind:
        try:
            parse_bind(bind)
        except ValueError as exc:
            raise UsageError(f"--bind: {exc}" if args.bind else f"serve.bind: {exc}") from exc
    examples = with_example_notes_if_unset(settings)
    if examples is not None:
        settings = examples
        get_logger("groove.serve").info("no notes folder configured; serving the shipped example notes", kb=str(settings.kb_path))
    anyio.run(serve, settings, transport, bind)  # BindError is a GrooveError: exit 1, see main()
    # The index is closed and every log line written: leave now instead of waiting
    # 1-2 s for the interpreter to tear torch down, so a stop stays well within 5 s.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# --- service --------------------------------------------------------------------------

def _add_service_parser(subparsers: Any) -> None:
    """`groove service install|uninstall|status`."""
    p = subparsers.add_parser("service", help="run groove in the background (systemd user unit / launchd agent)")
    actions = p.add_subparsers(dest="service_action", required=True, metavar="ACTION")
    platform_help = "linux (systemd) or macos (launchd); default: this machine"

    a = actions.add_parser("install", help="write the unit or plist for the config file and start it")
    _common(a)
    a.add_argument("--dry-run", action="store_true", help="print the file and where it would go; change nothing")
    a.add_argument("--no-start", action="store_true", help="write and enable it, start at next login")
    a.add_argument("--platform", choices=service.PLATFORMS, help=platform_help)
    a.set_defaults(func=cmd_service_install)

    a = actions.add_parser("uninstall", help="stop the service and remove its file")
    _common(a)
    a.add_argument("--platform", choices=service.PLATFORMS, help=platform_help)
    a.set_defaults(func=cmd_service_uninstall)

    a = actions.add_parser("status", help="is the service installed and running (exit 0 running, 3 not, 4 unknown)")
    _common(a)
    a.add_argument("--platform", choices=service.PLATFORMS, help=platform_help)
    a.add_argument("--format", choices=["text", "json"], default="text")
    a.set_defaults(func=cmd_service_status)


def _emit_report(report: service.Report, fmt: str = "text") -> int:
    if fmt == "json":
        sys.stdout.write(json.dumps(report.data, ensure_ascii=False, indent=2) + "\n")
    elif report.out:
        sys.stdout.write("\n".join(report.out) + "\n")
    sys.stdout.flush()
    for line in report.err:
        sys.stderr.write(f"groove: warning: {line}\n")
    return report.exit_code


def _platform(args: argparse.Namespace) -> service.Platform:
    return args.platform or service.detect_platform()


def cmd_service_install(args: argparse.Namespace) -> int:
    given = [flag for flag, value in (("--kb", args.kb), ("--index", args.index_path)) if value is not None]
    if given:
        raise service.ServiceError(
            f"the service reads its config file only, so {' and '.join(given)} would be forgotten; "
            "set kb_path / index_path in the config file instead"
        )
    platform = _platform(args)
    settings = _settings(args)
    config = service.check_config(settings.config_file, user_config_file())
    if not args.dry_run:
        sys.stderr.write(f"config: {config} (groove will listen on {settings.serve.bind})\n")
    report = service.install(platform, args.dry_run, config=config, start=not args.no_start)
    return _emit_report(report)


def cmd_service_uninstall(args: argparse.Namespace) -> int:
    return _emit_report(service.uninstall(_platform(args)))


def cmd_service_status(args: argparse.Namespace) -> int:
    return _emit_report(service.status(_platform(args)), args.format)



# --- parser ---------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groove", description="Local hybrid search over Markdown notes, served over MCP.")
    parser.add_argument("--version", action="version", version=f"groove {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="keep the index live and serve it over MCP (stdio or Streamable HTTP)")
    _common(p)
    p.add_argument("--transport", choices=["stdio", "http"], default=None,
                   help="stdio: one client that starts groove itself; http: Streamable HTTP at /mcp (default: [serve] transport, stdio)")
    p.add_argument("--bind", metavar="HOST:PORT", default=None,
                   help="where the HTTP server listens (default: [serve] bind, 127.0.0.1:3100)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("index", help="index the notes folder (incremental)")
    _common(p)
    p.add_argument("--rebuild", action="store_true", help="delete the index and start over")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("status", help="what is in the index")
    _common(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("search", help="hybrid search over the index")
    _common(p)
    p.add_argument("query", metavar="QUERY")
    _add_search_options(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--explain", action="store_true", help="show the MATCH expression, candidates and per-retriever ranks")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("related", help="notes nearest in meaning to a note")
    _common(p)
    p.add_argument("path", metavar="PATH", help="a note: its path relative to the notes folder, or a file path")
    p.add_argument("--limit", type=int, default=10, help="how many notes (1..100)")
    p.add_argument("--depth", type=int, default=1, help="hops to walk (1..3)")
    p.add_argument("--fan-out", type=int, default=5, help="neighbours per note per hop (1..20)")
    p.add_argument("--max-nodes", type=int, default=100, help="node budget (1..200)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_related)

    p = sub.add_parser("eval", help="measure retrieval quality on judged queries")
    _common(p)
    p.add_argument("golden", type=Path, metavar="GOLDEN", help="a golden YAML file or a BEIR folder")
    p.add_argument("--retriever", choices=["hybrid", "fts", "vector"], default="hybrid", help="score one half alone")
    p.add_argument("--split", help="BEIR qrels split (default: every qrels/*.tsv)")
    p.add_argument("--limit", type=int, default=10, help="results per query (1..100)")
    p.add_argument("--max-queries", type=int, default=None, help="only the first N queries")
    g = p.add_argument_group("refine stages")
    g.add_argument("--reranker", metavar="MODEL")
    g.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--mmr", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--mmr-lambda", type=float, default=None)
    g.add_argument("--mmr-same-doc-penalty", type=float, default=None)
    g.add_argument("--parent-retriever", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_eval)

    _add_service_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except GrooveError as exc:  # the one place groove's errors become stderr + an exit code
        sys.stderr.write(f"groove: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("groove: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
