"""The `groove` command line: serve, index, search, related, links, get, status, eval, tune, doctor, validate,
service, trust, client-config.

Results go to stdout; progress, logs and errors to stderr. Every subcommand
but `trust` accepts `--config PATH`, `--kb PATH` and `--index PATH`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from groove import EXAMPLE_NOTES, __version__, trust  # EXAMPLE_NOTES: `--examples`
from groove.autostart import platforms
from groove.config import (
    ConfigError,
    FusionSettings,
    Settings,
    executable_config,
    git_ancestor_config,
    load_settings,
    read_config_file,
    read_config_text,
    user_config_file,
)
from groove.errors import GrooveError, UsageError
from groove.evaluate.metrics import TUNE_METRICS
from groove.folders import anchored_spec
from groove.logs import configure as configure_logs
from groove.logs import get_logger
from groove.progress import ProgressBar, say
from groove.store.protocols import StoreWriteError

if TYPE_CHECKING:
    from groove.autostart import install as installer
    from groove.evaluate.report import EvalReport, OffTopicTuning, TuneReport
    from groove.search.request import SearchRequest

# What a command needs beyond parsing its arguments is imported where it runs, so that `groove --help`, a
# usage error and a command a running service answers start at once (issue 37, point 7: 0.46 s of CPU for
# --help when every command's modules came at start, numpy and the evaluation code among them).

__all__ = ["UsageError", "build_parser", "main"]


# --- helpers ---------------------------------------------------------------------


class _Once(argparse.Action):
    """A flag given at most once: a second `--kb` is refused, not silently put in place of the first."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        before = getattr(namespace, self.dest, None)
        if before is not None:
            parser.error(
                f"{option_string} given twice ({before} and {values}): groove indexes one notes folder "
                f"at a time, so pass {option_string} once"
            )
        setattr(namespace, self.dest, values)


def _common(p: argparse.ArgumentParser, *, examples: bool = False) -> None:
    g = p.add_argument_group("common options")
    g.add_argument(
        "--config",
        type=Path,
        metavar="PATH",
        help="groove.toml to use (default: ./groove.toml, a .git ancestor's, beside the groove executable, then "
        "the user config dir; a GrooveSeek file is read as groove's)",
    )
    g.add_argument(
        "--kb",
        metavar="[NAME=]PATH",
        action="append",
        help="the notes folder (kb_path); repeat it for several, each answered under its name "
        "(NAME=PATH, else the folder's base name)",
    )
    if examples:
        g.add_argument(
            "--examples",
            action="store_true",
            help="the example notes shipped with groove (examples/notes) instead of a folder of your own",
        )
    g.add_argument("--index", type=Path, metavar="PATH", dest="index_path", help="the SQLite index file (index_path)")
    g.add_argument(
        "--store",
        metavar="URL",
        dest="store_url",
        help="a PostgreSQL database holding the index instead of the SQLite file ([store] url): "
        "postgresql://user@host/db, the password from PGPASSWORD or ~/.pgpass",
    )
    g.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="log level (stderr)")


def _format_option(p: argparse.ArgumentParser, *, more: tuple[str, ...] = (), more_help: str = "") -> None:
    p.add_argument(
        "--format",
        choices=["text", "json", *more],
        default="text",
        help='text for people, json for programs (errors too: {"error", "exit_code"} on stdout)' + more_help,
    )


def _folder_flags(given: list[str] | None) -> list[str] | None:
    """--kb values as folder specs with absolute paths (relative to where the command runs), or None."""
    if not given:
        return None
    return [str(anchored_spec(spec, Path.cwd())) for spec in given]


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    kb: list[str] | Path | None = _folder_flags(args.kb)
    if getattr(args, "examples", False):
        if kb is not None:
            raise UsageError("--examples means the shipped example notes, --kb your own folder: pass one of them")
        if not EXAMPLE_NOTES.is_dir():
            raise ConfigError(
                "--examples means the example notes shipped with groove, and this installation "
                "has none; pass --kb PATH with your notes folder instead"
            )
        kb = EXAMPLE_NOTES
    overrides: dict[str, Any] = {
        "kb_path": kb,
        "index_path": args.index_path,
        "store.url": getattr(args, "store_url", None),
        "log.level": args.log_level,
    }
    overrides.update(extra)
    settings = load_settings(args.config, **overrides)
    configure_logs(settings.log.level, settings.log.format, settings.log.debug_modules)
    if settings.config_notice:  # a GrooveSeek file read as groove's: said once, at info
        get_logger("groove.config").info("config_grooveseek", detail=settings.config_notice)
    return settings


def _emit(obj: Any, fmt: str, text: Callable[[Any], str]) -> None:
    """`obj` as JSON (a typed report as its model_dump by alias) or as `text(obj)` renders it."""
    if fmt == "json":
        data = obj.model_dump(mode="json", by_alias=True) if isinstance(obj, BaseModel) else obj
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(text(obj))
    sys.stdout.flush()


def _note_path(settings: Settings, given: str) -> str:
    """A note as the user named it (its path in the index, or a file in a notes folder) -> its path in the index;
    in a store several machines share, every note's path starts with its folder's name (a search node, with no
    folder here, takes the path as given)."""
    if settings.store.url and not settings.kb_path:
        return given
    folders = settings.folders()
    return (folders.shared() if settings.store.url else folders).relative(given)


def _anchor(settings: Settings) -> Path:
    """The local path that stands for the index: the SQLite file, or a name for the database (its service's socket)."""
    from groove.store.address import anchor_of

    return anchor_of(settings.store.url, settings.resolved_index_path)


def index_location(settings: Settings) -> str:
    """Where the index is, for a message: the SQLite file, or the database URL without its password."""
    if settings.store.url:
        from groove.store.address import address

        return address(settings.store.url, Path()).shown
    return str(settings.resolved_index_path())


def _in_process(settings: Settings, call: Callable[[Any], Awaitable[Any]], **open_options: Any) -> Any:
    """`call(service)` over the index opened in this process for one command: the service API every front end
    uses (`groove.api.service`), over an `Index` opened with `open_options` (readonly, rebuild, reranker_model,
    any_model). Imported here: the index brings numpy, SQLite, the parsers and the embedder (over a second on a
    busy machine), which a command answered by a running daemon never needs."""
    import anyio

    from groove.api.service import Service
    from groove.index import Index

    async def run() -> Any:
        async with Index.open(settings, **open_options) as index:
            return await call(Service(index))

    return anyio.run(run)


def _ask_daemon(args: argparse.Namespace, settings: Settings, op: str, payload: dict[str, Any]) -> Any:
    """The answer of the `groove serve` of this index over its local endpoint, or None (then run in process)."""
    if getattr(args, "no_daemon", False):
        return None
    from groove.serve.process.local import ask  # stdlib sockets only: no MCP SDK, no model

    answer = ask(_anchor(settings), op, payload)
    if answer is not None:
        say(f"asked the running groove serve (pid {answer.pid}) at {answer.socket}")
    return answer


def _loading_model(settings: Settings, why: str = "", *, reading: bool = True) -> None:
    """Say that the model loads, once the folder and (for a read command) the index are known to be there:
    a command about to fail on a missing folder or index loads nothing."""
    index = _anchor(settings)  # ConfigError on a missing notes folder, before anything is said
    if reading and not settings.store.url and not index.exists():
        return
    say(f"loading model {settings.embedding.model}{why} ...")


NO_DAEMON_HINT = " (no groove serve answers for this index; one that runs answers at once)"


# --- index / status -----------------------------------------------------------------


def cmd_index(args: argparse.Namespace) -> int:
    from groove.store.failures import describe_write_error, store_errors

    settings = _settings(args)
    if not args.quiet:
        _loading_model(settings, reading=False)
    bar = ProgressBar()
    progress = None if args.quiet else bar
    try:
        summary = _in_process(settings, lambda service: service.reindex(progress=progress), rebuild=args.rebuild)
    except store_errors() as exc:  # disk full, a read-only index: say so (what is written so far stays written)
        raise StoreWriteError(
            f"could not write the index {index_location(settings)}: {describe_write_error(exc, resumes=False)}"
        ) from exc
    finally:
        bar.close()
    if summary.pending_chunks:
        say(
            f"{summary.pending_chunks} chunk(s) still wait for a vector (searchable by text only); "
            "`groove index` again, or `groove serve`, embeds them"
        )
    elif not args.quiet:
        say("embedding queue drained: every note is searchable by meaning")

    def text(s: dict) -> str:
        return (
            f"indexed {s['kb_path']} -> {s['index_path']}\n"
            f"files: {s['added']} added, {s['changed']} changed, {s['renamed']} renamed, "
            f"{s['deleted']} deleted, {s['unchanged']} unchanged, {s['skipped']} skipped\n"
            f"chunks: {s['chunks_written']} written, {s['chunks_embedded']} embedded; "
            f"{s['pending_chunks']} pending; {s['seconds']:.1f} s; finished {s['finished_at']}\n"
            + (
                "full-text tables merged after the large write (faster full-text searches)\n"
                if s.get("full_text_merged")
                else ""
            )
            + "".join(f"skipped {x['path']}: {x['reason']}\n" for x in s.get("skipped_files", []))
            + "".join(f"kept {x['path']}: {x['reason']}\n" for x in s.get("kept_unreadable", []))
            + "".join(f"warning {x['path']}: {w}\n" for x in s.get("note_warnings", []) for w in x["warnings"])
        )

    _emit(summary.model_dump(mode="json"), args.format, text)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    answer = _ask_daemon(args, settings, "status", {})
    if answer is not None:
        st = answer.result  # the running service's StatusAnswer, as JSON
    else:
        st = _in_process(settings, lambda service: service.status(), readonly=True, any_model=True).model_dump(
            mode="json"
        )

    def _where(folder: dict) -> str:
        """A folder's path, with its machine's name in a shared store."""
        return f"{folder['host']}:{folder['path']}" if folder.get("host") else str(folder["path"])

    def text(s: dict) -> str:
        when = s["last_indexed_at"] or "never"
        folders = s.get("folders") or []
        lines = (
            [f"notes:        {s['kb_path']}"]
            if len(folders) < 2 and not any(f.get("host") for f in folders)
            else [f"folder:       {f['name']}/ = {_where(f)} ({f['notes']} notes)" for f in folders]
        )
        lines += [
            f"index:        {s['index_path']}",
            f"model:        {s['model']} ({s['dimension']} dims)",
            f"documents:    {s['documents']}",
            f"chunks:       {s['chunks']} ({s['pending_chunks']} waiting for a vector)",
            f"embeddings:   {s['embeddings_computed']} computed in total, {s['vectors']} stored",
            f"last indexed: {when}",
        ]
        switch = s.get("model_switch")
        if switch:
            share = switch["texts_done"] / switch["texts_total"] if switch["texts_total"] else 1.0
            lines.append(
                f"switching to: {switch['to']}: {switch['texts_done']} of {switch['texts_total']} texts "
                f"embedded ({share:.0%}); searches use {switch['from']} until it is done"
            )
        if answer is not None:
            lines.append(
                f"served by:    groove serve, pid {answer.pid}, up {s['uptime_s']:.0f} s (watcher: {s['watcher']})"
            )
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
    g.add_argument(
        "--reranker", metavar="MODEL", help="rerank with this cross-encoder (name or path); applies unconditionally"
    )
    g.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=None, help="use the configured reranker")
    g.add_argument("--mmr", action=argparse.BooleanOptionalAction, default=None, help="MMR diversity re-rank")
    g.add_argument("--mmr-lambda", type=float, default=None, metavar="L", help="MMR relevance weight, 0..1")
    g.add_argument(
        "--mmr-same-doc-penalty", type=float, default=None, metavar="P", help="MMR same-document penalty, >= 0"
    )
    g.add_argument("--parent-retriever", action=argparse.BooleanOptionalAction, default=None, help="expand small hits")
    f = p.add_argument_group("filters")
    f.add_argument(
        "--path",
        action="append",
        dest="path_globs",
        metavar="GLOB",
        help="only paths matching (gitignore-style; !GLOB excludes); repeatable",
    )
    f.add_argument(
        "--tag", action="append", dest="tags_any", metavar="TAG", help="notes with any of these tags; repeatable"
    )
    f.add_argument(
        "--all-tags", action="append", dest="tags_all", metavar="TAG", help="notes with all of these tags; repeatable"
    )
    f.add_argument("--date-from", metavar="YYYY-MM-DD", help="frontmatter date on or after")
    f.add_argument("--date-to", metavar="YYYY-MM-DD", help="frontmatter date on or before")
    f.add_argument(
        "--field", action="append", dest="fields", metavar="KEY=VALUE", help="frontmatter KEY equals VALUE; repeatable"
    )
    f.add_argument(
        "--exclude-heading",
        action="append",
        dest="exclude_headings",
        metavar="TEXT",
        help="leave out sections under this heading (any case; replaces [search] exclude_headings); repeatable",
    )
    f.add_argument(
        "--min-confidence-ratio",
        type=float,
        default=None,
        metavar="R",
        help="low_confidence when the top score / the mean of the top 10 is under R (> 0)",
    )
    q = p.add_argument_group("quality filter (docs/search.md)")
    q.add_argument(
        "--min-quality",
        type=float,
        default=None,
        metavar="Q",
        help="hide passages scoring under Q, 0..1 (default [quality_filter] threshold, 0.3)",
    )
    q.add_argument(
        "--include-low-quality",
        action="store_true",
        help="show low-quality passages too (stubs, headings or links only, templates)",
    )


def _request_from_args(args: argparse.Namespace, settings: Settings, query: str) -> SearchRequest:
    fields: dict[str, str] = {}
    for item in args.fields or []:
        if "=" not in item:
            raise UsageError(f"--field takes KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        fields[key.strip()] = value
    from groove.search.request import SearchRequest

    return SearchRequest(
        query=query,
        limit=args.limit if args.limit is not None else settings.search.default_limit,
        retriever=args.retriever,
        filters={
            "path_globs": args.path_globs,
            "tags_any": args.tags_any,
            "tags_all": args.tags_all,
            "date_from": args.date_from,
            "date_to": args.date_to,
            "fields": fields or None,
        },
        rerank=args.rerank,
        mmr=args.mmr,
        mmr_lambda=args.mmr_lambda,
        mmr_same_doc_penalty=args.mmr_same_doc_penalty,
        parent_retriever=args.parent_retriever,
        explain=getattr(args, "explain", False),
        max_chars=getattr(args, "max_chars", None),
        min_quality=args.min_quality,
        include_low_quality=args.include_low_quality,
        exclude_headings=args.exclude_headings,
        min_confidence_ratio=args.min_confidence_ratio,
    )


def cmd_search(args: argparse.Namespace) -> int:
    from groove.search.answers import search_answer, search_text

    settings = _settings(args)
    req = _request_from_args(args, settings, args.query)
    # A reranker named on the command line is loaded here: the daemon reranks with its own settings only.
    answer = None if args.reranker else _ask_daemon(args, settings, "search", {"request": req.model_dump(mode="json")})
    if answer is not None:
        result = search_answer(answer.result, include_ids=True)
    else:
        if req.retriever != "fts" or args.reranker:  # a full-text search embeds nothing: no model loads for it
            _loading_model(settings, "" if args.no_daemon else NO_DAEMON_HINT)
        if args.reranker and req.rerank is None:
            req = req.model_copy(update={"rerank": True})  # a model named on the command line applies unconditionally
        result = _in_process(settings, lambda service: service.search(req), readonly=True, reranker_model=args.reranker)
    if args.format == "json":
        _emit(result.script_json(), "json", str)
    else:
        # With --max-chars the budget decides how much of each passage shows; without, a snippet each.
        chars = None if req.max_chars is not None else SNIPPET_CHARS
        _emit(result, "text", lambda r: search_text(r, passage_chars=chars) + "\n")
    return 0


SNIPPET_CHARS = 200  # a hit's passage on a terminal, whitespace folded


def _line_range(text: str) -> dict[str, int]:
    """`--lines 12-40` (first-last, as search prints a hit's lines), `12+20` (from, count) or `12` (to the end)."""
    import re

    m = re.fullmatch(r"\s*(\d+)\s*(?:([-+])\s*(\d+)\s*)?", text)
    if m is None:
        raise UsageError(
            f"--lines takes FIRST-LAST (e.g. 12-40, as search prints a hit's lines), FIRST+COUNT "
            f"or FIRST (to the end), got {text!r}"
        )
    first = int(m.group(1))
    if m.group(2) is None:
        return {"from": first}
    other = int(m.group(3))
    if m.group(2) == "+":
        return {"from": first, "count": other}
    if other < first:
        raise UsageError(f"--lines {text}: the last line {other} is before the first {first}")
    return {"from": first, "count": other - first + 1}


def cmd_get(args: argparse.Namespace) -> int:
    from groove.api.answers import DocumentAnswer, document_text
    from groove.search.request import DocumentRequest

    settings = _settings(args)
    req = DocumentRequest(
        path=_note_path(settings, args.path),
        heading=args.heading,
        lines=_line_range(args.lines) if args.lines is not None else None,
        max_chars=args.max_chars,
    )
    answer = _ask_daemon(args, settings, "get_document", {"request": req.model_dump(mode="json", exclude_none=True)})
    if answer is not None:
        result = DocumentAnswer.model_validate(answer.result)
    else:  # no model loads: nothing is embedded to read a note
        result = _in_process(settings, lambda service: service.get_document(req), readonly=True, any_model=True)
    if args.format == "json":
        _emit(result.model_dump(mode="json", exclude_unset=True), "json", str)
    else:
        _emit(result, "text", lambda r: document_text(r) + ("" if r.content.endswith("\n") else "\n"))
    return 0


SVG_NEEDS_DOT = (
    "--format svg needs Graphviz's dot on PATH (apt install graphviz / brew install graphviz), "
    "or use --format dot and render it elsewhere"
)


def _svg(dot_text: str, dot: str) -> str:
    """The DOT text drawn as SVG by Graphviz's `dot` (the executable at `dot`)."""
    import subprocess

    drawn = subprocess.run([dot, "-Tsvg"], input=dot_text.encode("utf-8"), capture_output=True, check=False)
    if drawn.returncode != 0:
        why = drawn.stderr.decode("utf-8", "replace").strip() or f"exit status {drawn.returncode}"
        raise GrooveError(f"Graphviz's dot could not draw the graph: {why}")
    return drawn.stdout.decode("utf-8", "replace")


def cmd_related(args: argparse.Namespace) -> int:
    import shutil

    from groove.api.answers import RelatedAnswer, related_text
    from groove.api.graph import related_dot

    dot = shutil.which("dot") if args.format == "svg" else None
    if args.format == "svg" and dot is None:  # said before any model loads
        raise UsageError(SVG_NEEDS_DOT)
    settings = _settings(args)
    options: dict[str, Any] = {
        "limit": args.limit,
        "depth": args.depth,
        "fan_out": args.fan_out,
        "max_nodes": args.max_nodes,
        "by": args.by,
        "min_similarity": args.min_similarity,
        "exclude_paths": args.exclude_paths or [],
        "seed_strategy": args.seed_strategy,
        "max_seed_chunks": args.max_seed_chunks,
    }
    if args.path_globs or args.tags_any:
        options["filters"] = {"path_globs": args.path_globs, "tags_any": args.tags_any}
    path = _note_path(settings, args.path)
    from groove.api.service import RelatedRequest

    req = RelatedRequest(path=path, **options)  # a bound out of range is said before anything loads
    answer = _ask_daemon(args, settings, "related", {"path": path, **options})
    if answer is not None:
        result = RelatedAnswer.model_validate(answer.result)
    else:
        _loading_model(settings, "" if args.no_daemon else NO_DAEMON_HINT)
        result = _in_process(settings, lambda service: service.related(req), readonly=True)
    if args.format == "json":
        _emit(result.script_json(), "json", str)
    elif args.format == "dot":
        _emit(result, "text", related_dot)
    elif dot is not None:  # svg
        _emit(result, "text", lambda r: _svg(related_dot(r), dot))
    else:
        _emit(result, "text", lambda r: related_text(r) + "\n")
    return 0


def cmd_links(args: argparse.Namespace) -> int:
    from groove.api.answers import LinksAnswer, links_text

    settings = _settings(args)
    path = _note_path(settings, args.path)
    answer = _ask_daemon(args, settings, "links", {"path": path, "limit": args.limit})
    if answer is not None:
        result = LinksAnswer.model_validate(answer.result)
    else:  # no model to load: links are read from the index alone
        from groove.api.service import LinksRequest

        req = LinksRequest(path=path, limit=args.limit)
        result = _in_process(settings, lambda service: service.links(req), readonly=True, any_model=True)
    _emit(result, args.format, lambda r: links_text(r) + "\n")
    return 0


def cmd_changes(args: argparse.Namespace) -> int:
    from groove.api.answers import ChangesAnswer, changes_text
    from groove.api.service import ChangesRequest

    settings = _settings(args)
    import time

    from groove.sync.history import parse_since

    req = ChangesRequest(since=args.since, limit=args.limit)
    parse_since(req.since, time.time())  # a bad time or limit is refused before anything opens
    answer = _ask_daemon(args, settings, "changes", req.model_dump(mode="json"))
    if answer is not None:
        result = ChangesAnswer.model_validate(answer.result)
    else:  # no model to load: the history is read from the index alone
        result = _in_process(settings, lambda service: service.changes(req), readonly=True, any_model=True)
    _emit(result, args.format, lambda r: changes_text(r) + "\n")
    return 0


# --- eval, tune, doctor, validate (issue 11) ------------------------------------------------


def _ks(text: str) -> tuple[int, ...]:
    from groove.evaluate.metrics import parse_ks

    try:
        return parse_ks(text)
    except ValueError as exc:
        raise UsageError(f"--k: {exc}") from None


GOLDEN_FILE = ".groove-eval.yml"  # the golden set groove eval and tune read when none is named (GrooveSeek's)


def _golden(args: argparse.Namespace, settings: Settings) -> Path:
    """The golden set named on the command line, else <notes folder>/.groove-eval.yml (the first folder's)."""
    if args.golden is not None:
        return Path(args.golden)
    found = settings.folders().first.path / GOLDEN_FILE
    if not found.is_file():
        raise UsageError(
            f"name a golden set (a YAML file or a BEIR folder): there is no {found}, the one read when none is named"
        )
    return found


def cmd_eval(args: argparse.Namespace) -> int:
    if args.no_color:
        os.environ["NO_COLOR"] = "1"  # rich (the progress on a terminal) draws no colour then
    settings = _settings(args)
    args.golden = _golden(args, settings)
    options = {
        "rerank": args.rerank,
        "mmr": args.mmr,
        "mmr_lambda": args.mmr_lambda,
        "mmr_same_doc_penalty": args.mmr_same_doc_penalty,
        "parent_retriever": args.parent_retriever,
    }
    ks = _ks(args.k)
    from groove.api.service import EvalRequest
    from groove.evaluate.runner import judged_queries

    judged_queries(
        args.golden, args.split, args.max_queries
    )  # a golden set that cannot be read fails before the index opens
    req = EvalRequest(
        source=args.golden,
        retriever=args.retriever,
        split=args.split,
        limit=args.limit,
        max_queries=args.max_queries,
        request_options=options,
        ks=ks,
        record=not args.no_record,
    )
    result = _in_process(settings, lambda service: service.evaluate(req), readonly=True, reranker_model=args.reranker)
    _emit(result, args.format, lambda r: format_eval_text(r, diff=not args.no_diff))
    h = result.history
    for leak in result.leaks:
        sys.stderr.write(
            f"groove: warning: golden query {leak.id} is quoted verbatim in {', '.join(leak.paths[:3])}"
            " (a leaked answer: the score overstates quality)\n"
        )
    if not args.fail_on_regression:
        return 0
    if args.no_diff or h.status == "no-history":
        why = "--no-diff compares nothing" if args.no_diff else "no earlier run to compare with (a first run)"
        sys.stderr.write(
            f"groove: --fail-on-regression skipped: {why}"
            + ("; this run is the baseline\n" if h.recorded and h.status == "no-history" else "\n")
        )
        return 0
    if h.status == "changed":
        sys.stderr.write(
            "groove: error: not comparing: no earlier run has this configuration; the latest run differs in "
            f"{', '.join(h.differs)}. Run eval once with the new configuration to make it the baseline\n"
        )
    elif h.status == "regression":
        sys.stderr.write(
            "groove: error: regression: "
            + ", ".join(f"{k} {h.deltas[k]:+.4f}" for k in h.regressions)
            + f" (threshold {h.threshold}, against the run of {h.baseline.at if h.baseline else '-'})\n"
        )
    return int(h.exit_code)


def format_eval_text(r: EvalReport, *, diff: bool = True) -> str:
    """An eval report for people; `diff` False (`--no-diff`): no change since the last run is shown."""
    m = r.metrics
    c = r.confidence
    h = r.history if diff else r.history.model_copy(update={"deltas": {}})

    def acc(v: float | None) -> str:
        return "-" if v is None else f"{v:.4f}"

    lines = [
        f"{r.count} queries from {r.source} ({r.retriever})"
        + (f": {r.answerable} answerable, {r.unanswerable} unanswerable" if r.unanswerable else "")
    ]
    for k, v in m.items():
        if k.startswith("off_topic_"):
            continue
        delta = h.deltas.get(k)
        lines.append(f"  {k:<10} {v:.4f}" + (f"  ({delta:+.4f})" if delta is not None else ""))
    for k, what in (
        ("off_topic_answerable", "of answerable queries flagged off_topic (lower is better)"),
        ("off_topic_unanswerable", "of unanswerable queries flagged off_topic (higher is better)"),
    ):
        if k in m:
            delta = h.deltas.get(k)
            lines.append(f"  {m[k]:.1%} {what}" + (f"  ({delta:+.4f})" if delta is not None else ""))
    lines.append(
        f"  low_confidence on {c.flagged_share:.0%} of queries; top-1 right {acc(c.top1_flagged)} "
        f"when flagged, {acc(c.top1_unflagged)} when not"
    )
    if not diff:
        lines.append("history: not compared (--no-diff)" + ("; this run is recorded" if h.recorded else ""))
    elif h.status == "no-history":
        lines.append(
            "history: first run with this index; it is the baseline"
            if h.recorded
            else "history: none yet, and this run was not recorded"
        )
    elif h.status == "changed":
        lines.append(
            f"history: no earlier run with this configuration (changed: {', '.join(h.differs)}); nothing compared"
        )
    else:
        lines.append(
            f"history: (+/-) against the run of {h.baseline.at if h.baseline else '-'} with the same configuration"
            + (f"; REGRESSION in {', '.join(h.regressions)}" if h.regressions else "")
        )
    if r.leaks:
        lines.append(
            f"warning: {len(r.leaks)} judged quer{'y is' if len(r.leaks) == 1 else 'ies are'} quoted verbatim in a note"
        )
    return "\n".join(lines) + "\n"


def cmd_tune(args: argparse.Namespace) -> int:
    settings = _settings(args)
    args.golden = _golden(args, settings)
    from groove.api.service import TuneRequest
    from groove.evaluate.runner import judged_queries

    judged_queries(args.golden, args.split, args.max_queries, at_least=2)  # before the index opens
    req = TuneRequest(
        source=args.golden, split=args.split, limit=args.limit, max_queries=args.max_queries, metric=args.metric
    )

    def progress(stage: str, done: int, total: int) -> None:
        if done in (0, total):
            sys.stderr.write(f"tune: {stage} {done}/{total}\n")

    result = _in_process(settings, lambda service: service.tune(req, progress), readonly=True)
    _emit(result, args.format, format_tune_text)
    return 0


def format_tune_text(r: TuneReport) -> str:
    cv = r.cv
    low, high = cv.interval
    lines = [
        f"{r.count} queries from {r.source}; {r.settings_tried} fusion settings; metric {r.metric}",
        f"  current settings:            {cv.current:.4f}",
        f"  best on all queries:         {cv.best_in_sample:.4f} (in-sample, optimistic)",
        f"  held out (leave-one-out):    {cv.heldout:.4f}  gain {cv.gain:+.4f}, 95% bootstrap interval "
        f"[{low:+.4f}, {high:+.4f}]",
        f"  queries better / worse:      {cv.wins} / {cv.losses} (sign test p = {cv.sign_p:.3g}); "
        f"{cv.folds_choosing_best} of {cv.queries} folds chose the best setting",
    ]
    if r.skipped:
        lines.append(f"  skipped {len(r.skipped)} queries that do not compile: {', '.join(r.skipped[:5])}")
    if r.refine_stages_ignored:
        lines.append(
            f"  note: tuned on the fused list; {', '.join(r.refine_stages_ignored)} (on in your settings) not applied"
        )
    if r.recommend and r.block:
        lines.append("recommendation: the held-out gain is above its noise; paste this into groove.toml:")
        lines.append("")
        lines.append(r.block.rstrip("\n"))
    else:
        why = (
            "the current settings are already the best"
            if cv.best == 0
            else f"the held-out gain {cv.gain:+.4f} is not above its noise: its 95% interval reaches 0"
        )
        lines.append(
            f"recommendation: keep the defaults ({why})"
            if r.current == FusionSettings().model_dump()
            else f"recommendation: keep the current [search.fusion] settings ({why})"
        )
    if r.off_topic is not None:
        lines += [""] + _format_off_topic_tuning(r.off_topic)
    return "\n".join(lines) + "\n"


def _format_off_topic_tuning(t: OffTopicTuning) -> list[str]:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    lines = [
        f"off_topic: {t.answerable} answerable and {t.unanswerable} unanswerable queries; "
        f"threshold_offset now {t.current_offset:+.2f}",
        f"  flagged now:                 answerable {pct(t.now['answerable_flagged'])}, "
        f"unanswerable {pct(t.now['unanswerable_flagged'])}",
        f"  offset {t.offset:+.2f}, held out:     answerable {pct(t.held_out['answerable_flagged'])}, "
        f"unanswerable {pct(t.held_out['unanswerable_flagged'])} (leave-one-out; at most 5% of answerable on the "
        "others)",
    ]
    if t.recommend and t.block:
        lines += [f"recommendation: {t.reason}; paste this into groove.toml:", "", t.block.rstrip("\n")]
    else:
        lines.append(f"recommendation: keep threshold_offset = {t.current_offset:.2f} ({t.reason})")
    return lines


def cmd_doctor(args: argparse.Namespace) -> int:
    from groove.ops import doctor  # lazy: only this command needs it

    settings = _settings(args)
    report = doctor.diagnose(settings, fix=args.fix)
    _emit(report, args.format, doctor.format_text)
    return int(report["exit_code"])


def cmd_validate(args: argparse.Namespace) -> int:
    from groove.ops import validate  # lazy: only this command needs it

    settings = _settings(args)
    report = validate.validate(settings, fail_fast=args.fail_fast, schema=args.schema)
    text = {"text": validate.format_text, "github": validate.format_github}
    _emit(report, args.format, text.get(args.format, validate.format_text))
    return int(report["exit_code"])


def _add_eval_tools_parsers(sub: Any) -> None:
    """`groove eval`, `tune`, `doctor`, `validate` (their own block: one call each)."""
    p = sub.add_parser("eval", help="measure retrieval quality on judged queries")
    _common(p, examples=True)
    p.add_argument(
        "golden",
        type=Path,
        nargs="?",
        metavar="GOLDEN",
        help=f"a golden YAML file or a BEIR folder (default: {GOLDEN_FILE} in the notes folder)",
    )
    p.add_argument("--retriever", choices=["hybrid", "fts", "vector"], default="hybrid", help="score one half alone")
    p.add_argument("--split", metavar="NAME", help="BEIR qrels split (default: every qrels/*.tsv)")
    p.add_argument("--limit", type=int, default=10, help="results per query (1..100)")
    p.add_argument("--max-queries", type=int, default=None, metavar="N", help="only the first N queries")
    p.add_argument("--k", default="1,5,10", metavar="K,K,...", help="recall cut-offs (default 1,5,10; each <= --limit)")
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a metric fell by more than [eval] regression_threshold since the last run of "
        "the same configuration; exit 2 when the history has runs but none of this configuration; "
        "a first run (no history) or --no-diff skips the gate with one line",
    )
    p.add_argument("--no-record", "--no-history", action="store_true", help="do not add this run to the history file")
    p.add_argument(
        "--no-diff", action="store_true", help="show no change since the last run (the run is still recorded)"
    )
    p.add_argument("--no-color", action="store_true", help="no colour (eval prints none; sets NO_COLOR=1)")
    g = p.add_argument_group("refine stages")
    g.add_argument(
        "--reranker", metavar="MODEL", help="rerank with this cross-encoder (name or path); applies unconditionally"
    )
    g.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=None, help="use the configured reranker")
    g.add_argument("--mmr", action=argparse.BooleanOptionalAction, default=None, help="MMR diversity re-rank")
    g.add_argument("--mmr-lambda", type=float, default=None, metavar="L", help="MMR relevance weight, 0..1")
    g.add_argument(
        "--mmr-same-doc-penalty", type=float, default=None, metavar="P", help="MMR same-document penalty, >= 0"
    )
    g.add_argument("--parent-retriever", action=argparse.BooleanOptionalAction, default=None, help="expand small hits")
    _format_option(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser(
        "tune",
        help=(
            "sweep the fusion knobs on judged queries, and with unanswerable ones place the off_topic line "
            "(cross-validated); prints, never writes"
        ),
    )
    _common(p, examples=True)
    p.add_argument(
        "golden",
        type=Path,
        nargs="?",
        metavar="GOLDEN",
        help=f"a golden YAML file or a BEIR folder (default: {GOLDEN_FILE} in the notes folder)",
    )
    p.add_argument("--split", metavar="NAME", help="BEIR qrels split (default: every qrels/*.tsv)")
    p.add_argument("--limit", type=int, default=10, help="results per query (1..100)")
    p.add_argument("--max-queries", type=int, default=None, metavar="N", help="only the first N queries")
    p.add_argument("--metric", choices=list(TUNE_METRICS), default="ndcg@10", help="what to maximise (default nDCG@10)")
    _format_option(p)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser(
        "doctor", help="check the index against the notes folder and itself (exit 0 clean, 1 warnings, 2 errors)"
    )
    _common(p, examples=True)
    p.add_argument(
        "--fix",
        action="store_true",
        help="apply the safe repairs (gone notes, orphan rows, full-text rebuild), then check again",
    )
    _format_option(p)
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser(
        "validate", help="check every note's frontmatter against the [validate] schema (exit 1 on findings)"
    )
    _common(p, examples=True)
    p.add_argument("--fail-fast", action="store_true", help="stop at the first finding")
    p.add_argument(
        "--schema",
        type=Path,
        metavar="FILE",
        help="check against this schema file (TOML or YAML, the keys of [validate]) instead of the config's",
    )
    p.add_argument(
        "--format",
        choices=["text", "json", "github"],
        default="text",
        help="text for people, json for programs, github: CI annotations",
    )
    p.set_defaults(func=cmd_validate)


# --- serve ----------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    # Lazy: the MCP SDK, Starlette and uvicorn take most of a second to import, and only
    # `serve` needs them (the other commands, `--help` and config errors stay fast).
    from groove.serve.http.server import parse_bind
    from groove.serve.process.main import serve, with_example_notes
    from groove.serve.process.memory import tune_malloc

    # --examples: the shipped example notes (refused together with --kb); --no-watch: [watch] enabled = false
    settings = _settings(args, **serve_overrides(args))
    transport = args.transport or settings.serve.transport
    bind = args.bind or settings.serve.bind
    if transport == "http" or args.bind:
        try:
            parse_bind(bind)
        except ValueError as exc:
            raise UsageError(f"--bind: {exc}" if args.bind else f"serve.bind: {exc}") from exc
    if args.examples:
        settings = with_example_notes(settings)
        get_logger("groove.serve").info(
            "serving the shipped example notes (--examples)", kb=str(settings.kb_path[0].path)
        )
    elif not settings.kb_path and not settings.store.url:  # an MCP config that forgot --kb fails loudly
        raise ConfigError(
            "no notes folder configured: pass --kb PATH, set kb_path in groove.toml or GROOVE_KB_PATH; "
            "to try groove on the shipped example notes, run `groove serve --examples` (or `make serve`)"
        )
    tune_malloc()  # before the daemon's worker threads: bursts of searches and edits grew RSS (issue 36, point 5)
    # BindError is a GrooveError: exit 1, see main(); a busy port's message names the knob that set the address.
    import anyio

    anyio.run(serve, settings, transport, bind, _bind_knob(args, settings))
    # The index is closed and every log line written: leave now instead of waiting
    # 1-2 s for the interpreter to tear torch down, so a stop stays well within 5 s.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


MAX_DEBOUNCE_MS = 60_000  # [watch] debounce_ms at most (a minute)


def serve_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings `groove serve`'s flags set: --no-watch, --debounce-ms, --reranker (GrooveSeek's flags: a
    reranker named turns reranking on for every search, as its --rerank-by-default did; `none` turns it off)."""
    out: dict[str, Any] = {}
    if args.no_watch:
        out["watch.enabled"] = False
    if args.debounce_ms is not None:
        if not 0 <= args.debounce_ms <= MAX_DEBOUNCE_MS:
            raise UsageError(
                f"--debounce-ms must be between 0 and {MAX_DEBOUNCE_MS} (milliseconds), got {args.debounce_ms}"
            )
        out["watch.debounce_ms"] = args.debounce_ms
    if args.reranker is not None:
        name = args.reranker.strip()
        if not name:
            raise UsageError("--reranker needs a cross-encoder's name or path, or none for no reranker")
        off = name.casefold() == "none"
        out["search.reranker"] = "" if off else name
        out["search.rerank_by_default"] = not off
    return out


STARTED_BY_ENV = "GROOVE_STARTED_BY"  # `make serve` sets it to "make serve": its address comes from BIND=, not --bind
MAKE_SERVE = "make serve"


def _bind_origin(settings: Settings) -> tuple[str, str]:
    """Where `[serve] bind` came from: ("env", the GROOVE_* variable), ("file", the config file) or ("default", "")."""
    env = {name.upper() for name in os.environ}
    for name in ("GROOVE_SERVE__BIND", "GROOVE_SERVE"):
        if name in env:
            return "env", name
    if "bind" in settings.serve.model_fields_set and settings.config_file is not None:
        return "file", str(settings.config_file)
    return "default", ""


def _bind_said(settings: Settings) -> str:
    """`[serve] bind` and where it came from, for a message: `127.0.0.1:3100, the default`."""
    kind, where = _bind_origin(settings)
    origin = {"env": f"from {where}", "file": f"set in {where}"}.get(kind, "the default")
    return f"{settings.serve.bind}, {origin}"


def _bind_knob(args: argparse.Namespace, settings: Settings) -> str:
    """How to listen elsewhere, as groove was started: `make serve BIND=`, `--bind`, or the setting that gave the
    address (its file or variable)."""
    if args.bind:
        if os.environ.get(STARTED_BY_ENV) == MAKE_SERVE:
            return "make serve BIND=HOST:PORT (make serve passes it to groove serve --bind)"
        return "--bind HOST:PORT"
    kind, where = _bind_origin(settings)
    if kind == "env":
        return f"{where}=HOST:PORT, or --bind HOST:PORT"
    if kind == "file":
        return f"[serve] bind in {where}, or --bind HOST:PORT"
    return "--bind HOST:PORT, or [serve] bind in groove.toml (make serve BIND=HOST:PORT with make serve)"


# --- client-config --------------------------------------------------------------------


def _groove_executable() -> str | None:
    """The absolute path of the groove command in use: argv[0] when it is groove itself, else the groove
    beside this Python (`python -m groove.cli`, tests), else the one on PATH; None when there is none."""
    name = "groove.exe" if os.name == "nt" else "groove"
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == name and argv0.is_file():
        return os.path.abspath(argv0)
    beside = Path(sys.executable).with_name(name)
    if beside.is_file():
        return os.path.abspath(beside)
    import shutil

    found = shutil.which("groove")
    return os.path.abspath(found) if found else None


def _this_platform() -> str:
    return {"darwin": "macos", "win32": "windows"}.get(sys.platform, "linux")


def _running_http(settings: Settings) -> tuple[str, bool] | None:
    """(URL, whether it wants a token) of the `groove serve` that serves these notes over HTTP, found as a stdio
    client finds it to attach (its local endpoint: serve/process/local.py); None when none does, after saying on
    stderr that the URL comes from `[serve] bind` and why. Without a notes folder it looks for the service of the
    shipped example notes, what `make serve` serves without KB=."""
    from groove.serve.process.local import DaemonError, http_endpoint  # stdlib sockets only: no MCP SDK

    fallback = f"the URL is from [serve] bind ({_bind_said(settings)})"
    which, hint = "these notes", ""
    if not settings.kb_path and not settings.store.url:
        hint = "; pass --kb PATH (the notes the service serves) or --url"
        if not EXAMPLE_NOTES.is_dir():
            say(f"no notes folder given, so no running groove serve to ask: {fallback}{hint}")
            return None
        from groove.config import replace_settings

        settings = replace_settings(settings, kb_path=EXAMPLE_NOTES)
        which = "the shipped example notes (no notes folder given; make serve without KB=)"
    try:
        index = _anchor(settings)
    except ConfigError as exc:  # a notes folder that is not there: no service can serve it
        say(f"no running groove serve to ask ({exc}): {fallback}")
        return None
    try:
        found = http_endpoint(index)
    except DaemonError as exc:
        say(f"the groove serve of {which} did not say where it serves HTTP ({exc}): {fallback}")
        return None
    if found is None:
        say(f"no groove serve runs for {which}: {fallback}{hint or '; start the service, then run this again'}")
        return None
    if not found.url:
        say(f"the groove serve (pid {found.pid}) of {which} serves stdio only, no HTTP: {fallback}")
        return None
    say(f"using the URL of the groove serve (pid {found.pid}) that serves {which}: {found.url}")
    return found.url, bool(found.token)


def cmd_client_config(args: argparse.Namespace) -> int:
    from groove import clients

    client = clients.client(args.client)  # UnknownClient: a UsageError naming the known clients
    transport = args.transport or "stdio"
    if transport == "stdio" and (args.url or args.token_env):
        raise UsageError("--url and --token-env describe an HTTP connection: add --transport http")
    settings = _settings(args)
    if transport == "stdio":
        exe = _groove_executable()
        if exe is None:
            raise UsageError(
                "cannot find the groove command (not beside this Python, not on PATH): "
                "install groove, or run this from its venv's bin folder"
            )
        kb = settings.folders().kb_flags()  # the client's groove needs the notes folders, like `groove serve`
        target = clients.Target(
            "stdio",
            command=(
                exe,
                *clients.stdio_args(
                    config=str(settings.config_file) if settings.config_file else None,
                    kb=kb,
                    index=str(settings.index_path) if settings.index_path else None,
                ),
            ),
        )
    else:
        http = settings.serve.http
        # A token is set here, or the service binds an address other machines reach (it refuses to run without one).
        has_token = bool(
            http.token
            or (http.token_env and os.environ.get(http.token_env, "").strip())
            or not clients.bind_is_loopback(settings.serve.bind)
        )
        url = args.url
        if not url:
            running = _running_http(settings)
            if running is not None:
                url, has_token = running
            else:
                url = clients.url_for_bind(settings.serve.bind)
        token_env = args.token_env or ((http.token_env or clients.DEFAULT_TOKEN_ENV) if has_token else None)
        target = clients.Target("http", url=url, token_env=token_env)
    sys.stdout.write(clients.render(client.name, target))
    sys.stdout.flush()
    say(f"{client.title}: {clients.where(client.name, _this_platform())} (docs/clients.md)")
    if target.token_env and client.name == "claude-desktop":
        say(
            f"replace {clients.TOKEN_PLACEHOLDER} with the token: Claude Desktop passes no shell variables to "
            "mcp-remote"
        )
    elif target.token_env and client.name == "claude-code":
        say(f"export {target.token_env} first: the shell puts the token into the header when the command runs")
    elif target.token_env and client.name == "vscode":
        say(f"VS Code asks for the token once (the value of {target.token_env}) and keeps it in its secret storage")
    elif target.token_env:
        say(f"the client reads the token from {target.token_env}: set it where the client starts")
    return 0


# --- service --------------------------------------------------------------------------


# --- store: an index moved between stores ----------------------------------------------------------------


def cmd_store_copy(args: argparse.Namespace) -> int:
    from groove.store.address import address
    from groove.store.copy import copy_store

    settings = _settings(args)
    source = address(settings.store.url, Path() if settings.store.url else settings.resolved_index_path())
    to = args.to
    destination = address(to if "://" in to else None, Path(to).expanduser().resolve())
    if destination.kind == source.kind and destination.shown == source.shown:
        raise UsageError("--to names the index being copied: give another database or file")
    folder = args.folder
    if folder is None and settings.kb_path and len(settings.kb_path) == 1:
        folder = settings.kb_path[0].name

    def progress(stage: str, done: int, total: int) -> None:
        if done in (0, total) or done % 20_000 < 2_000:
            say(f"copy: {stage} {done}/{total}")

    history = Path(str(source.path) + ".eval.jsonl") if source.path is not None else None
    report = copy_store(source, destination, folder=folder, history=history, progress=progress)

    def text(r: Any) -> str:
        rows = ", ".join(f"{n} {table}" for table, n in r.rows.items())
        return (
            f"copied {r.source} -> {r.destination}: {rows}; {r.history_lines} eval history line(s); {r.seconds:g} s\n"
        )

    _emit(report.__dict__ if args.format == "json" else report, args.format, text)
    return 0


def _add_store_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("store", help="move an index to another store without embedding anything again")
    ssub = p.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    c = ssub.add_parser(
        "copy",
        help="copy the index (notes, chunks, vectors, links, eval history) into a new PostgreSQL database or "
        "SQLite file",
    )
    _common(c, examples=True)
    c.add_argument(
        "--to",
        required=True,
        metavar="URL_OR_PATH",
        help="the new store: postgresql://user@host/db (an empty database), or a new .sqlite file",
    )
    c.add_argument(
        "--folder",
        metavar="NAME",
        help="into a database: the name that leads the notes' paths (default: the notes folder's name)",
    )
    _format_option(c)
    c.set_defaults(func=cmd_store_copy)


def _add_service_parser(subparsers: Any) -> None:
    """`groove service install|uninstall|status|list` (systemd, launchd, Task Scheduler: groove/autostart/)."""
    p = subparsers.add_parser(
        "service", help="run groove in the background (systemd user unit / launchd agent / Windows scheduled task)"
    )
    actions = p.add_subparsers(dest="service_action", required=True, metavar="ACTION")
    platform_help = "linux (systemd), macos (launchd) or windows (Task Scheduler); default: this machine"
    name_help = (
        "a named instance beside the default one: its own unit (groove-NAME), notes folder, index and port "
        "(lowercase letters, digits, hyphens); default: the instance without a name"
    )

    a = actions.add_parser("install", help="write the unit or plist for the config file (or --kb PATH) and start it")
    _common(a)
    a.add_argument("--name", metavar="NAME", help=name_help)
    a.add_argument(
        "--port",
        type=int,
        metavar="N",
        help="the port it listens on (default: a named instance gets a free one from 3101, printed; "
        "the default instance the port of [serve] bind)",
    )
    a.add_argument("--dry-run", action="store_true", help="print the file and where it would go; change nothing")
    a.add_argument("--no-start", action="store_true", help="write and enable it, start at next login")
    a.add_argument("--platform", choices=platforms.PLATFORMS, help=platform_help)
    a.set_defaults(func=cmd_service_install)

    a = actions.add_parser("uninstall", help="stop the service and remove its file (--purge: its index too)")
    _common(a)
    a.add_argument("--name", metavar="NAME", help=name_help)
    a.add_argument(
        "--purge", action="store_true", help="also delete the instance's index (the notes are never touched)"
    )
    a.add_argument("--platform", choices=platforms.PLATFORMS, help=platform_help)
    a.set_defaults(func=cmd_service_uninstall)

    a = actions.add_parser("status", help="is the service installed and running (exit 0 running, 3 not, 4 unknown)")
    _common(a)
    a.add_argument("--name", metavar="NAME", help=name_help)
    a.add_argument("--platform", choices=platforms.PLATFORMS, help=platform_help)
    a.add_argument("--format", choices=["text", "json"], default="text", help="text for people, json for programs")
    a.set_defaults(func=cmd_service_status)

    a = actions.add_parser("list", help="the installed instances: name, notes folder, port, state")
    a.add_argument("--platform", choices=platforms.PLATFORMS, help=platform_help)
    a.add_argument("--format", choices=["text", "json"], default="text", help="text for people, json for programs")
    a.set_defaults(func=cmd_service_list)


def _emit_report(report: installer.Report, fmt: str = "text") -> int:
    if fmt == "json":
        sys.stdout.write(json.dumps(report.data, ensure_ascii=False, indent=2) + "\n")
    elif report.out:
        sys.stdout.write("\n".join(report.out) + "\n")
    sys.stdout.flush()
    for line in report.err:
        sys.stderr.write(f"groove: warning: {line}\n")
    return report.exit_code


def _platform(args: argparse.Namespace) -> platforms.Platform:
    return args.platform or platforms.detect_platform()


def cmd_service_install(args: argparse.Namespace) -> int:
    # --kb and --index go into the unit's own `groove serve` command, as absolute paths (the service starts
    # elsewhere); with --kb the config file is optional. A named instance gets --kb, --index and --bind always.
    from groove.autostart import install as installer
    from groove.autostart import instances

    name = platforms.check_name(args.name)
    platforms.check_port(args.port)
    kb = _folder_flags(args.kb)  # absolute, `name = path` kept
    platform = _platform(args)
    settings = _settings(args)
    config = instances.check_config(settings.config_file, user_config_file(), kb=kb)
    host = instances.split_bind(settings.serve.bind)[0]
    plan = instances.plan_install(
        platform,
        name=name,
        config=config,
        kb=kb,
        index=args.index_path,
        port=args.port,
        host=host,
        store=args.store_url,
    )
    if not args.dry_run:
        sys.stderr.write(
            f"config: {config or 'none (defaults)'}"
            + (f"; notes: {plan.folder}" if kb or name else "")
            + f" (groove will listen on {plan.bind})\n"
        )
    report = installer.install(
        platform, args.dry_run, config=config, start=not args.no_start, flags=plan.flags, name=name
    )
    if name is not None:
        report.data.update(folder=str(plan.folder), index=str(plan.index), bind=plan.bind, port=plan.port)
        from groove import clients

        url = clients.url_for_bind(plan.bind)
        report.out.append(f"instance {name}: notes {plan.folder}, index {plan.index}")
        report.out.append(
            f"port: {plan.port}"
            + (" (a free one, chosen)" if plan.port_chosen else "")
            + f"; clients connect to {url} "
            f"(`groove client-config CLIENT --transport http --url {url}`)"
        )
    return _emit_report(report)


def cmd_service_uninstall(args: argparse.Namespace) -> int:
    from groove.autostart import install as installer

    return _emit_report(installer.uninstall(_platform(args), name=platforms.check_name(args.name), purge=args.purge))


def cmd_service_status(args: argparse.Namespace) -> int:
    from groove.autostart import install as installer

    return _emit_report(installer.status(_platform(args), name=platforms.check_name(args.name)), args.format)


def cmd_service_list(args: argparse.Namespace) -> int:
    from groove.autostart import install as installer

    return _emit_report(installer.list_instances(_platform(args)), args.format)


# --- config migrate (issue 38, point 2) -------------------------------------------------


def cmd_config_migrate(args: argparse.Namespace) -> int:
    """GrooveSeek's groove.toml -> groove's own: printed, or written with --write (never over a file unasked)."""
    import datetime as dt
    import tomllib

    from groove import grooveseek

    source = _config_path(args.path)
    try:
        text = read_config_text(source)
    except FileNotFoundError:
        raise ConfigError(
            f"there is no {source} to migrate; name GrooveSeek's file: groove config migrate PATH"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not valid TOML: {exc}") from None
    if not grooveseek.looks_like_grooveseek(data):
        raise ConfigError(f"{source} holds no key only GrooveSeek writes: groove reads it as it is, nothing to migrate")
    found = grooveseek.translate(data)
    out = None if args.write is None else Path(os.path.abspath(Path(args.write or source).expanduser()))
    settings = found.data
    kb = settings.get("kb_path")
    if out is not None and out.parent != source.parent and kb:  # relative folders stay the same folders
        specs = [str(anchored_spec(k, source.parent)) for k in (kb if isinstance(kb, list) else [kb])]
        settings["kb_path"] = specs if isinstance(kb, list) else specs[0]
    header = (
        f"groove.toml written by `groove config migrate` from GrooveSeek's {source}\n"
        f'on {dt.date.today().isoformat()}; docs/configuration.md, "Coming from GrooveSeek", says what each key '
        "became."
    )
    body = grooveseek.render_toml(settings, header)
    if found.refused:
        body += "\n# GrooveSeek's keys groove has no twin for (left out above), each with what to write instead:\n"
        body += "".join(f"#   {r}\n" for r in found.refused)
    if out is None:
        sys.stdout.write(body)
    else:
        if out.exists() and not args.force:
            raise ConfigError(
                f"{out} exists; groove config migrate does not write over a file unless asked: add --force"
                + (f" (GrooveSeek's original is then kept as {out.name}.grooveseek)" if out == source else "")
                + ", or --write OTHER.toml"
            )
        if out == source:
            backup = source.with_name(source.name + ".grooveseek")
            if backup.exists():
                raise ConfigError(f"{backup} exists: move it away first (it would hold GrooveSeek's original)")
            backup.write_text(text, encoding="utf-8")
        out.write_text(body, encoding="utf-8")
        sys.stderr.write(f"groove: wrote {out} (groove's own settings from GrooveSeek's {source})\n")
    for refused in found.refused:
        sys.stderr.write(f"groove: not migrated: {refused}\n")
    return 1 if found.refused else 0


def _add_config_parser(sub: Any) -> None:
    p = sub.add_parser("config", help="groove.toml tools: migrate GrooveSeek's file to groove's")
    csub = p.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    m = csub.add_parser(
        "migrate",
        help="print (or --write) groove's own groove.toml from GrooveSeek's; exit 1 when a key has no twin",
    )
    m.add_argument(
        "path",
        nargs="?",
        type=Path,
        metavar="PATH",
        help="GrooveSeek's groove.toml (default: the one groove finds: ./groove.toml, a .git ancestor's, beside "
        "the executable)",
    )
    m.add_argument(
        "--write",
        nargs="?",
        const="",
        default=None,
        metavar="OUT",
        help="write the file instead of printing it: to OUT, else over PATH (GrooveSeek's kept as PATH.grooveseek)",
    )
    m.add_argument("--force", action="store_true", help="write over an existing OUT")
    m.set_defaults(func=cmd_config_migrate)


# --- trust ----------------------------------------------------------------------------


def _config_path(given: Path | None) -> Path:
    """The groove.toml a `trust` or `config migrate` command means: PATH, PATH/groove.toml for a folder, else the
    file groove would find by looking (./groove.toml, a .git ancestor's, beside the executable), else
    ./groove.toml (absolute)."""
    if given is None:
        found = (
            Path.cwd() / "groove.toml"
            if (Path.cwd() / "groove.toml").exists()
            else (git_ancestor_config() or executable_config())
        )
        given = found or Path("groove.toml")
    path = Path(os.path.abspath(given.expanduser()))
    if path.is_dir():
        path = path / "groove.toml"
    return path.resolve() if path.exists() else path


def cmd_trust(args: argparse.Namespace) -> int:
    store = trust.TrustStore()
    if args.path is not None and (args.list or args.revoke is not None):
        raise UsageError("give a PATH to trust, or --list, or --revoke PATH: one of them")
    if args.list:
        return _trust_list(store)
    if args.revoke is not None:
        path = _config_path(args.revoke)
        if not store.revoke(path):
            raise UsageError(f"{path} is not trusted (`groove trust --list` shows what is)")
        sys.stdout.write(f"no longer trusted: {path}\n")
        return 0
    path = _config_path(args.path)
    try:
        text = read_config_text(path)
    except FileNotFoundError:
        raise ConfigError(f"there is no {path} to trust; name the file: groove trust PATH") from None
    read_config_file(path, text)  # a file groove could not load is not worth approving
    data = tomllib.loads(text)
    found = trust.risks(data, folder=path.parent)
    approval = store.approve(path, trust.digest(text.encode("utf-8")))
    lines = [f"trusted {path} (sha256 {approval.sha256[:16]}); run `groove trust` again if the file changes"]
    lines += [f"  it sets {r}" for r in found]
    if data.get("kb_path") and not found:
        lines.append(
            f"  it sets kb_path = {json.dumps(str(data['kb_path']))}: where your own settings send note text, "
            "its files may go too"
        )
    elif not found:
        lines.append("  it sets nothing that needs trust")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _trust_list(store: trust.TrustStore) -> int:
    approvals = store.approvals()
    if not approvals:
        sys.stdout.write("no groove.toml is trusted\n")
    for name, approval in sorted(approvals.items()):
        try:
            state = "ok" if trust.digest(read_config_text(Path(name)).encode("utf-8")) == approval.sha256 else "changed"
        except FileNotFoundError:
            state = "gone"
        except GrooveError:  # not a regular file any more, too large, not UTF-8
            state = "changed"
        sys.stdout.write(f"{state:<8} {name}  (trusted {approval.trusted_at})\n")
    return 0


def _add_trust_parser(sub: Any) -> None:
    p = sub.add_parser(
        "trust", help="allow a groove.toml in a folder to set where note text goes (endpoint, bind, token)"
    )
    p.add_argument(
        "path",
        nargs="?",
        type=Path,
        metavar="PATH",
        help="the groove.toml (or its folder) to trust, as it is now (default: ./groove.toml)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--list", action="store_true", help="list the trusted files and whether each is unchanged")
    g.add_argument("--revoke", type=Path, metavar="PATH", help="stop trusting this groove.toml")
    p.set_defaults(func=cmd_trust)


# --- parser ---------------------------------------------------------------------------


class ArgumentError(UsageError):
    """A command line argparse could not read; carries the usage line of the command it was for."""

    def __init__(self, message: str, usage: str):
        super().__init__(message)
        self.usage = usage


class Parser(argparse.ArgumentParser):
    """argparse whose errors are GrooveErrors, so that `--format json` gets them as JSON too (exit 2).

    Flags are spelled out (no abbreviations, which a new flag could make ambiguous), and a flag a command
    does not know is an error naming the closest one it does (`--limt` -> "did you mean --limit?") instead
    of leaving what follows it to be read as the query."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        namespace, extras = super().parse_known_args(args, namespace)
        for arg in extras:
            if arg.startswith("-") and arg != "-" and not self._negative_number_matcher.match(arg):
                self.error(self._unknown_flag(arg))
        return namespace, extras

    def _unknown_flag(self, arg: str) -> str:
        import difflib

        flag = arg.split("=", 1)[0]
        known = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
        if close:
            return f"unknown option {flag}: did you mean {close[0]}?"
        return (
            f"unknown option {flag} (a query that starts with - goes after --: {self.prog} -- {arg})"
            if not arg.startswith("--") and any(a.dest == "query" for a in self._actions)
            else f"unknown option {flag}"
        )

    def error(self, message: str) -> Any:
        raise ArgumentError(f"{message} (see {self.prog} --help)", self.format_usage())


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="groove", description="Local hybrid search over Markdown notes, served over MCP.")
    parser.add_argument("--version", action="version", version=f"groove {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="keep the index live and serve it over MCP (stdio or Streamable HTTP)")
    _common(p, examples=True)
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default=None,
        help=(
            "stdio: one client that starts groove itself; http: Streamable HTTP at /mcp (default: [serve] transport, "
            "stdio)"
        ),
    )
    p.add_argument(
        "--bind",
        metavar="HOST:PORT",
        default=None,
        help="where the HTTP server listens (default: [serve] bind, 127.0.0.1:3100)",
    )
    p.add_argument(
        "--no-watch",
        action="store_true",
        help="do not watch the folder (one that changes only by deploy): index at start, then the periodic "
        "reconcile and reindex only ([watch] enabled = false)",
    )
    p.add_argument(
        "--debounce-ms",
        type=int,
        default=None,
        metavar="N",
        help=f"wait N ms after the last change before indexing it (0..{MAX_DEBOUNCE_MS}; [watch] debounce_ms, 300)",
    )
    p.add_argument(
        "--reranker",
        metavar="NAME",
        default=None,
        help="rerank every search with this cross-encoder (name or path; [search] reranker, rerank_by_default on); "
        "none: no reranker",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("index", help="index the notes folder (incremental)")
    _common(p, examples=True)
    p.add_argument(
        "--rebuild", "--force", action="store_true", help="delete the index and start over (--force: GrooveSeek's name)"
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress and no model line on stderr; warnings and the summary stay",
    )
    _format_option(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("status", help="what is in the index")
    _common(p, examples=True)
    _format_option(p)
    p.add_argument(
        "--no-daemon",
        action="store_true",
        help="do not ask a running groove serve of this index; open the index in this process",
    )
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("search", help="hybrid search over the index")
    _common(p, examples=True)
    p.add_argument("query", metavar="QUERY", help='words, "a quoted phrase", -word to exclude (docs/search.md)')
    _add_search_options(p)
    _format_option(p)
    p.add_argument(
        "--explain", action="store_true", help="show the MATCH expression, candidates and per-retriever ranks"
    )
    p.add_argument(
        "--max-chars",
        type=int,
        default=None,
        metavar="N",
        help="an answer budget: at most N characters of passages, best first, cut at sentence ends (100..1000000)",
    )
    p.add_argument(
        "--no-daemon",
        action="store_true",
        help="do not ask a running groove serve of this index; open the index in this process",
    )
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("related", help="notes related to a note: nearest in meaning, or linked")
    _common(p, examples=True)
    p.add_argument("path", metavar="PATH", help="a note: its path relative to the notes folder, or a file path")
    p.add_argument("--limit", type=int, default=10, help="how many notes (1..100)")
    p.add_argument("--depth", type=int, default=1, help="hops to walk (1..3)")
    p.add_argument("--fan-out", type=int, default=5, help="neighbours per note per hop (1..20)")
    p.add_argument("--max-nodes", type=int, default=100, help="node budget (1..200)")
    p.add_argument(
        "--by",
        choices=["meaning", "links", "both"],
        default="meaning",
        help="what relates notes: meaning (default), links (both ways) or both",
    )
    p.add_argument(
        "--min-similarity",
        type=float,
        default=None,
        metavar="S",
        help="leave out notes less similar than S (-1..1; linked notes are kept)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        dest="exclude_paths",
        metavar="GLOB",
        help="leave notes matching GLOB out of the walk (gitignore-style); repeatable",
    )
    p.add_argument(
        "--path",
        action="append",
        dest="path_globs",
        metavar="GLOB",
        help="keep only notes whose path matches GLOB in the graph (gitignore-style; !GLOB excludes); repeatable",
    )
    p.add_argument(
        "--tag",
        action="append",
        dest="tags_any",
        metavar="TAG",
        help="keep only notes with any of these tags in the graph; repeatable",
    )
    p.add_argument(
        "--seed-strategy",
        choices=["centroid", "all_chunks", "all-chunks"],
        default="centroid",
        help="what a note asks the vectors with: centroid, the mean of its chunks (default), or all_chunks, each "
        "chunk in turn (a note scores by its best match with any)",
    )
    p.add_argument(
        "--max-seed-chunks",
        type=int,
        default=None,
        metavar="N",
        help="a note's first N chunks seed it (1..256; default all for centroid, 32 for all_chunks)",
    )
    _format_option(
        p,
        more=("dot", "svg"),
        more_help="; dot: the graph in Graphviz DOT, svg: drawn by Graphviz's dot (on PATH)",
    )
    p.add_argument(
        "--no-daemon",
        action="store_true",
        help="do not ask a running groove serve of this index; open the index in this process",
    )
    p.set_defaults(func=cmd_related)

    p = sub.add_parser("links", help="a note's links, backlinks and unresolved links")
    _common(p, examples=True)
    p.add_argument("path", metavar="PATH", help="a note: its path relative to the notes folder, or a file path")
    p.add_argument("--limit", type=int, default=100, help="at most this many links of each kind (1..500)")
    _format_option(p)
    p.add_argument(
        "--no-daemon",
        action="store_true",
        help="do not ask a running groove serve of this index; open the index in this process",
    )
    p.set_defaults(func=cmd_links)

    p = sub.add_parser(
        "changes", help="the notes and sections added, edited, renamed or deleted since a time (docs/search.md)"
    )
    _common(p, examples=True)
    p.add_argument(
        "--since",
        default="7d",
        metavar="WHEN",
        help="an ISO date or date and time (2026-12-01, 2026-12-01T09:00+09:00; local time without a zone), "
        "or a span back from now: 30m, 24h, 7d, 2w (default 7d)",
    )
    p.add_argument(
        "--limit", type=int, default=50, help="at most this many notes, the most recently changed first (1..500)"
    )
    _format_option(p)
    p.add_argument(
        "--no-daemon",
        action="store_true",
        help="do not ask a running groove serve of this index; open the index in this process",
    )
    p.set_defaults(func=cmd_changes)

    p = sub.add_parser("get", help="print a note, or one section or range of lines of it")
    _common(p, examples=True)
    p.add_argument("path", metavar="PATH", help="a note: its path relative to the notes folder, or a file path")
    part = p.add_mutually_exclusive_group()
    part.add_argument(
        "--heading",
        metavar="HEADING",
        help="only this section: a heading path as search prints it ('Title > Parent > Heading') or the heading alone",
    )
    part.add_argument(
        "--lines",
        metavar="FIRST-LAST",
        help="only these lines, numbered as search numbers them: 12-40, 12+20 (from, count) or 12 (to the end)",
    )
    p.add_argument(
        "--max-chars",
        type=int,
        default=None,
        metavar="N",
        help="at most N characters, cut at a sentence end; the header says what was left out",
    )
    _format_option(p)
    p.add_argument(
        "--no-daemon",
        action="store_true",
        help="do not ask a running groove serve of this index; open the index in this process",
    )
    p.set_defaults(func=cmd_get)

    _add_eval_tools_parsers(sub)
    _add_service_parser(sub)
    _add_trust_parser(sub)
    _add_config_parser(sub)
    _add_store_parser(sub)

    p = sub.add_parser(
        "client-config", help="print an MCP client's configuration for groove, with this machine's paths"
    )
    _common(p, examples=True)
    p.add_argument(
        "client",
        metavar="CLIENT",
        help="claude-desktop, claude-code, cursor, vscode, codex or gemini (docs/clients.md)",
    )
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default=None,
        help="stdio: the client starts groove itself (default); http: it connects to a running groove",
    )
    p.add_argument(
        "--url",
        metavar="URL",
        help="the MCP endpoint for --transport http (default: the URL of the groove serve running for these "
        "notes, else from [serve] bind)",
    )
    p.add_argument(
        "--token-env",
        metavar="NAME",
        help="the environment variable holding the bearer token (default: [serve.http] token_env when a token is set)",
    )
    p.set_defaults(func=cmd_client_config)
    return parser


def wants_json(argv: list[str]) -> bool:
    """`--format json` anywhere on the command line (also when the rest of it could not be read)."""
    for i, arg in enumerate(argv):
        if arg == "--format=json" or (arg == "--format" and argv[i + 1 : i + 2] == ["json"]):
            return True
    return False


def report_error(exc: GrooveError, as_json: bool) -> int:
    """The one place a GrooveError becomes output: `groove: error: ...` on stderr, and under
    `--format json` also `{"error": ..., "exit_code": N}` on stdout; the exit code is N either way."""
    if isinstance(exc, ArgumentError):
        sys.stderr.write(exc.usage)
    sys.stderr.write(f"groove: error: {exc}\n")
    sys.stderr.flush()
    if as_json:
        sys.stdout.write(json.dumps({"error": str(exc), "exit_code": exc.exit_code}, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return exc.exit_code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = wants_json(argv)
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except GrooveError as exc:  # the one place groove's errors become stderr (+ JSON) and an exit code
        return report_error(exc, as_json)
    except KeyboardInterrupt:
        sys.stderr.write("groove: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
