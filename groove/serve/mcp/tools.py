"""The MCP tools: each a thin call into the service API (groove.api.service), answering a `CallToolResult`
typed by a model of `groove.api.answers` (search's: `groove.search.answers`; the SDK advertises its schema as
`outputSchema` and validates the `structuredContent` against it; the text content is the model's text rendering).
A failure becomes a tool error (`isError: true`, one line) in one place (`groove.serve.errors.tool_error`)."""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, WithJsonSchema

from groove.api import answers
from groove.api.answers import (
    ChangesAnswer,
    DocumentAnswer,
    DocumentPage,
    LinksAnswer,
    RelatedAnswer,
    StatusAnswer,
    TopicsAnswer,
)
from groove.api.service import (
    MAX_CHANGES,
    ChangesRequest,
    LinksRequest,
    ListRequest,
    RelatedRequest,
    Service,
    TopicsRequest,
)
from groove.corpus.best_practice import MAX_SECTION_CHARS, MAX_TARGET_CHARS, BestPracticeAnswer, best_practice_text
from groove.errors import GrooveError, NotFoundError, UsageError
from groove.index import MAX_LINKS, MAX_PAGE
from groove.search.answers import SearchAnswer, search_text
from groove.search.filters import MAX_PATH_GLOBS
from groove.search.related import MAX_CHUNKS_PER_NOTE, MAX_DEPTH, MAX_FAN_OUT, MAX_NODES
from groove.search.request import (
    MAX_DOCUMENT_CHARS,
    MAX_FILTER_ITEMS,
    MAX_HEADING_CHARS,
    MAX_LIMIT,
    MAX_QUERY_BYTES,
    MIN_BUDGET_CHARS,
    DocumentRequest,
    FilterArgs,
    LineRange,
    SearchRequest,
    tool_fields,
)
from groove.serve.errors import tool_error
from groove.serve.mcp.guard import ToolCallGuard, bounded
from groove.serve.mcp.paths import check_note_path
from groove.sync.report import IndexReport


def tool_result(answer: BaseModel, render: Callable[[Any], str]) -> CallToolResult:
    """The structured answer (as the output schema describes it) and its text for a model to read.
    Optional fields the answer did not set (a hit's ids without include_ids, a search's explain without
    explain) are left out rather than sent as null."""
    return CallToolResult(
        content=[TextContent(type="text", text=render(answer))],
        structured_content=answer.model_dump(mode="json", exclude_unset=not isinstance(answer, IndexReport)),
    )


def _groove_errors_as_tool_errors(fn):
    """Every failure a tool reports becomes a tool error in one place (`groove.serve.errors`): a GrooveError,
    and a note path refused by `check_note_path` (a JSON-RPC -32602 where resources and prompts use it);
    anything else stays a crash the SDK reports without its details."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except GrooveError as exc:
            return tool_error(str(exc))
        except MCPError as exc:
            if exc.error.code != INVALID_PARAMS:
                raise
            return tool_error(exc.error.message)

    return call


def _search_signature() -> inspect.Signature:
    """The search tool's parameters, generated from `SearchRequest` (the filters at the top level).

    Each parameter carries the model's JSON schema for clients, and (but `query`) is typed Any for the
    SDK, so that the SDK passes the values through as given and the request model alone checks them:
    one set of bounds, groove's one-line messages, no coercion of "5" into 5."""
    params = []
    for name, (default, schema) in tool_fields().items():
        base: Any = str if name == "query" else Any  # a str parameter is never JSON-pre-parsed by the SDK
        annotation = Annotated[base, WithJsonSchema(schema)]
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if default is ... else default,
                annotation=annotation,
            )
        )
    params.append(
        inspect.Parameter(
            "include_ids",
            inspect.Parameter.KEYWORD_ONLY,
            default=False,
            annotation=Annotated[
                bool,
                Field(description="Add internal ids."),
            ],
        )
    )
    return inspect.Signature(params, return_annotation=Annotated[CallToolResult, SearchAnswer])


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

# Keywords whose value is one schema, a list of schemas, or a map of names to schemas (the names are kept as given).
_ONE_SCHEMA = ("items", "additionalProperties", "not", "contains", "propertyNames")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "$defs", "patternProperties")
_NULL = {"type": "null"}
_DEFS = "#/$defs/"


def lean_schema(schema: dict[str, Any], *, output: bool) -> dict[str, Any]:
    """A tool's input or output schema as clients get it: what pydantic generates, less what costs every
    conversation characters and tells a model nothing (docs/mcp.md, "What the tool definitions cost"):

    - no `title` (pydantic's "Max Chars" for max_chars), no model docstring (the field holding the model says
      what it is), no `additionalProperties: true` and no `items: {}` (both the default; `{}` is also what the
      Inspector's strict mode flags as an untyped schema);
    - a definition used once is written where it is used, not in `$defs` behind a `$ref`;
    - an optional input argument has no `null` branch, and no `default` of null or false (a model leaves it out;
      the tool still takes null); an integer's floor of 1 (a count) goes without saying: checked, not
      advertised; an output field that may be null keeps its `anyOf` with `{"type": "null"}` (a `type`
      array would be shorter, and is what the Inspector flags as unportable), and no default (an answer
      carries every field its schema requires).

    The schema accepts the same answers and arguments as before (tests/test_mcp_answers.py validates each
    tool's structured content against its own)."""
    lean = _lean(schema, output=output)
    defs = lean.pop("$defs", {})
    uses = Counter(_refs([lean, defs]))
    once = {name for name in defs if uses[name] == 1}
    lean = _inline(lean, defs, once)
    kept = {name: _inline(sub, defs, once) for name, sub in defs.items() if name not in once}
    return {**lean, "$defs": kept} if kept else lean


def _lean(node: Any, *, output: bool) -> Any:
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _lean(sub, output=output) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_lean(sub, output=output) for sub in value]
        elif key in _ONE_SCHEMA:
            out[key] = _lean(value, output=output)
        else:
            out[key] = value
    if out.get("additionalProperties") is True:
        del out["additionalProperties"]
    if out.get("items") == {}:
        del out["items"]
    if out.get("type") == "object" and isinstance(out.get("properties"), dict):
        out.pop("description", None)  # a model's docstring
    branches = out.get("anyOf")
    if not output and isinstance(branches, list) and len(branches) == 2 and _NULL in branches:
        (kept,) = [b for b in branches if b != _NULL]
        del out["anyOf"]
        out = {**kept, **out}
    if not output and out.get("type") == "integer" and out.get("minimum") == 1:
        del out["minimum"]
    default = out.get("default", ...)
    if output or default is None or default is False:
        out.pop("default", None)
    return out


def _refs(node: Any) -> Iterator[str]:
    """The names of the definitions `node` refers to, once per reference."""
    if isinstance(node, list):
        for sub in node:
            yield from _refs(sub)
    elif isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS):
            yield ref.removeprefix(_DEFS)
        for value in node.values():
            yield from _refs(value)


def _inline(node: Any, defs: dict[str, Any], once: set[str]) -> Any:
    """`node` with each `$ref` to a definition in `once` replaced by the definition (its siblings kept)."""
    if isinstance(node, list):
        return [_inline(sub, defs, once) for sub in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS) and ref.removeprefix(_DEFS) in once:
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**defs[ref.removeprefix(_DEFS)], **siblings}, defs, once)
    return {key: _inline(value, defs, once) for key, value in node.items()}


# get_document's arguments are described once, on the request model (groove/search/request.py).
_DOC_FIELDS = {name: field.description or "" for name, field in DocumentRequest.model_fields.items()}


def _heading(text: str) -> str:
    """A `##` section's heading as a call may name it: without the #'s and spaces around it, in any case."""
    return text.strip().lstrip("#").strip().casefold()


def tools_for(service: Service, guard: ToolCallGuard) -> list[Tool]:
    """The tools of the service (for `MCPServer(tools=...)`), each with its argument model on `guard` and its
    schemas made lean (`lean_schema`)."""
    tools: list[Tool] = []

    def tool(**kwargs: Any):
        """The SDK's tool for `fn`: its docstring dedented into the description clients show, its schemas lean.
        (The SDK reads `fn_metadata.output_schema` live; `Tool.output_schema` is first read when listed.)"""

        def register(fn):
            made = Tool.from_function(
                _groove_errors_as_tool_errors(fn), description=inspect.cleandoc(fn.__doc__ or ""), **kwargs
            )
            made.parameters = lean_schema(made.parameters, output=False)
            if made.fn_metadata.output_schema is not None:
                made.fn_metadata.output_schema = lean_schema(made.fn_metadata.output_schema, output=True)
            tools.append(made)
            guard.add(fn.__name__, fn)
            return fn

        return register

    # index_status is listed first: a client (or the conformance suite) that probes "the first tool" with no
    # arguments gets an answer, not an invalid-params error for search's required query.
    @tool(annotations=READ_ONLY)
    async def index_status() -> Annotated[CallToolResult, StatusAnswer]:
        """Counts, pending work, model, skipped files, watcher."""
        return tool_result(await service.status(), answers.status_text)

    async def search(**arguments: Any) -> Annotated[CallToolResult, SearchAnswer]:
        """Passages that best answer a query (full-text and semantic), to cite by path. off_topic: the notes
        most likely do not answer; say so, do not answer from them (false is no promise). With max_chars,
        read on with get_document."""
        include_ids = arguments.pop("include_ids", False)
        answer = await service.search(SearchRequest.from_arguments(arguments))
        return tool_result(answer.for_client(include_ids=include_ids), search_text)

    search.__signature__ = _search_signature()  # type: ignore[attr-defined]  # the SDK reads the tool's parameters here
    tool(annotations=READ_ONLY)(search)

    @tool(annotations=READ_ONLY)
    async def get_document(
        path: Annotated[
            str,
            Field(description="As search returned it."),
        ],
        heading: Annotated[str | None, Field(description=_DOC_FIELDS["heading"], max_length=MAX_HEADING_CHARS)] = None,
        lines: Annotated[LineRange | None, Field(description=_DOC_FIELDS["lines"])] = None,
        max_chars: Annotated[
            int | None, bounded(ge=MIN_BUDGET_CHARS, le=MAX_DOCUMENT_CHARS, description=_DOC_FIELDS["max_chars"])
        ] = None,
    ) -> Annotated[CallToolResult, DocumentAnswer]:
        """Read a note or a document's text; for a part, pass heading (a hit's context) or lines, and max_chars."""
        try:
            req = DocumentRequest(
                path=check_note_path(path, lenient=True), heading=heading, lines=lines, max_chars=max_chars
            )
            doc = await service.get_document(req if not req.whole else req.path)
        except NotFoundError as exc:
            if not str(exc).startswith("no heading"):
                check_note_path(path)  # not a note: a backslash or an encoded separator is refused as such
            raise
        return tool_result(doc, answers.document_text)

    @tool(annotations=READ_ONLY)
    async def list_documents(
        cursor: Annotated[str | None, Field(description="The previous page's next_cursor.")] = None,
        limit: Annotated[int, bounded(ge=1, le=MAX_PAGE, description="Notes per page.")] = 50,
        folder: Annotated[
            str | None,
            Field(
                description="Only this folder's notes.",
                max_length=MAX_QUERY_BYTES,
            ),
        ] = None,
        tags: Annotated[
            list[str] | None,
            Field(description="Notes with any of these tags.", max_length=MAX_FILTER_ITEMS),
        ] = None,
    ) -> Annotated[CallToolResult, DocumentPage]:
        """Page through the indexed notes in path order."""
        if folder and folder.rstrip("/"):
            check_note_path(folder.rstrip("/"), name="folder")
        page = await service.list_documents(ListRequest(cursor=cursor, limit=limit, folder=folder, tags=tags))
        return tool_result(page, answers.document_page_text)

    @tool(annotations=READ_ONLY)
    async def topics(
        depth: Annotated[int, bounded(ge=1, le=6, description="Folder levels (1: top only).")] = 2,
        limit: Annotated[int, bounded(ge=1, le=MAX_PAGE, description="Folders and tags, at most.")] = 100,
    ) -> Annotated[CallToolResult, TopicsAnswer]:
        """Folders and tags by note count, each with its search filter."""
        return tool_result(await service.topics(TopicsRequest(depth=depth, limit=limit)), answers.topics_text)

    # A search node of a shared store has no notes folder to rescan (each folder's own groove does): not listed.
    if getattr(service, "indexes_notes", True):

        @tool(
            annotations=ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
            ),
        )
        async def reindex(
            force: Annotated[bool, Field(description="Reparse all.")] = False,
        ) -> Annotated[CallToolResult, IndexReport]:
            """Rescan now; the notes are watched."""
            # One at a time; answers what `groove index --format json` prints; new text is embedded afterwards.
            # Without force, an incremental reconcile (unchanged files skipped); with it, GrooveSeek's rebuild_index
            # force: every file parsed again by the settings now (its vectors kept where its text is the same).
            return tool_result(await service.reindex(force=force), answers.reindex_text)

    @tool(annotations=READ_ONLY)
    async def related(
        path: Annotated[str, Field(description="As search returned it.")],
        limit: Annotated[int, bounded(ge=1, le=MAX_LIMIT, description="Notes to return.")] = 10,
        depth: Annotated[int, bounded(ge=1, le=MAX_DEPTH, description="Hops from the note.")] = 1,
        fan_out: Annotated[int, bounded(ge=1, le=MAX_FAN_OUT, description="Notes per note per hop.")] = 5,
        max_nodes: Annotated[int, bounded(ge=1, le=MAX_NODES, description="Node budget.")] = 100,
        by: Annotated[
            Literal["meaning", "links", "both"],
            Field(description="Meaning, links (either way) or both."),
        ] = "meaning",
        min_similarity: Annotated[
            float | None,
            bounded(ge=-1, le=1, description="Cosine floor (links kept)."),
        ] = None,
        exclude_paths: Annotated[
            list[str] | None,
            Field(description="Globs of notes to skip (daily/**).", max_length=MAX_PATH_GLOBS),
        ] = None,
        filters: Annotated[
            FilterArgs | None,
            WithJsonSchema({"type": "object"}),  # search's filters: its input schema describes each, once
            Field(description="search's: path_globs, tags_any, tags_all, date_from, date_to, fields."),
        ] = None,
        seed_strategy: Annotated[
            Literal["centroid", "all_chunks"] | None, Field(description="The chunks' mean (default), or each.")
        ] = None,
        max_seed_chunks: Annotated[
            int | None, bounded(ge=1, le=MAX_CHUNKS_PER_NOTE, description="Chunks per note (all_chunks: 32).")
        ] = None,
    ) -> Annotated[CallToolResult, RelatedAnswer]:
        """Notes near a note in meaning, linked either way (by: links), or both; depth > 1 walks on."""
        try:
            found = await service.related(
                RelatedRequest(
                    path=check_note_path(path, lenient=True),
                    limit=limit,
                    depth=depth,
                    fan_out=fan_out,
                    max_nodes=max_nodes,
                    by=by,
                    min_similarity=min_similarity,
                    exclude_paths=exclude_paths,
                    filters=filters,
                    seed_strategy=seed_strategy or "centroid",
                    max_seed_chunks=max_seed_chunks,
                )
            )
        except GrooveError as exc:
            if exc.kind == "not_found":  # not a note: a backslash or an encoded separator is refused as such
                check_note_path(path)
            raise
        return tool_result(found.for_client(), answers.related_text)

    @tool(annotations=READ_ONLY)
    async def links(
        path: Annotated[str, Field(description="As search returned it.")],
        limit: Annotated[int, bounded(ge=1, le=MAX_LINKS, description="Per kind, at most.")] = 100,
    ) -> Annotated[CallToolResult, LinksAnswer]:
        """A note's links ([[wiki]], embeds, Markdown): outgoing, backlinks, unresolved."""
        try:
            found = await service.links(LinksRequest(path=check_note_path(path, lenient=True), limit=limit))
        except NotFoundError:
            check_note_path(path)  # not a note: a backslash or an encoded separator is refused as such
            raise
        return tool_result(found, answers.links_text)

    @tool(annotations=READ_ONLY)
    async def changes(
        since: Annotated[str, Field(description="ISO time, or span back: 7d, 24h.", max_length=64)] = "7d",
        limit: Annotated[int, bounded(ge=1, le=MAX_CHANGES, description="Notes, at most.")] = 50,
    ) -> Annotated[CallToolResult, ChangesAnswer]:
        """Notes added, edited (which sections), renamed or deleted since a time; call it as a session starts."""
        return tool_result(await service.changes(ChangesRequest(since=since, limit=limit)), answers.changes_text)

    # Opt-in ([best_practice] path_templates): not configured, the tool is not listed at all (rather than listed
    # and failing). A stand-in service without the method (tests) offers none either.
    best_practices = getattr(service, "best_practices", None)
    if callable(best_practices) and best_practices() is not None:

        @tool(annotations=READ_ONLY)
        async def get_best_practice(
            target: Annotated[
                str,
                Field(
                    description="A language, framework or tool: python, react, docker, ...",
                    max_length=MAX_TARGET_CHARS,
                ),
            ],
            section: Annotated[
                str | None,
                Field(description="Only this ## section (e.g. Testing).", max_length=MAX_SECTION_CHARS),
            ] = None,
            category: Annotated[
                str | None, Field(description="Old name of section.", max_length=MAX_SECTION_CHARS)
            ] = None,
        ) -> Annotated[CallToolResult, BestPracticeAnswer]:
            """The user's best practices for a target, or one ## section: read them before writing or reviewing
            work on it; follow them over general habits."""
            # An unknown target's error names the targets that have a document ([best_practice] path_templates).
            # `category` is GrooveSeek's name for `section` (issue 38): either, or both when they agree.
            same = section is None or category is None or _heading(section) == _heading(category)
            if not same:
                raise UsageError(
                    f"give section or category (its old name), not both: section {section!r}, category {category!r}"
                )
            part = section if section is not None else category
            return tool_result(await service.best_practice(target, part), best_practice_text)

    return tools


__all__ = ["READ_ONLY", "lean_schema", "tool_result", "tools_for"]
