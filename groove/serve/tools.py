"""The MCP tools: each a thin call into the service API (groove.api), answering a `CallToolResult`
typed by a model of `groove.search.answers` (the SDK advertises its schema as `outputSchema` and
validates the `structuredContent` against it; the text content is the model's text rendering).
A failure becomes a tool error (`isError: true`, one line) in one place (`groove.serve.errors.tool_error`)."""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Any, Callable

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, WithJsonSchema

from groove.api import ListRequest, RelatedRequest, Service, TopicsRequest
from groove.app import MAX_PAGE
from groove.errors import GrooveError, NotFoundError
from groove.search import answers
from groove.search.answers import DocumentAnswer, DocumentPage, RelatedAnswer, SearchAnswer, StatusAnswer, TopicsAnswer
from groove.search.related import MAX_DEPTH, MAX_FAN_OUT
from groove.search.request import MAX_FILTER_ITEMS, MAX_LIMIT, MAX_QUERY_BYTES, SearchRequest, tool_fields
from groove.serve.errors import tool_error
from groove.serve.guard import ToolCallGuard, bounded
from groove.serve.paths import check_note_path
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
        base = str if name == "query" else Any  # a str parameter is never JSON-pre-parsed by the SDK
        annotation = Annotated[base, WithJsonSchema(schema)]
        params.append(inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if default is ... else default, annotation=annotation,
        ))
    params.append(inspect.Parameter(
        "include_ids", inspect.Parameter.KEYWORD_ONLY, default=False,
        annotation=Annotated[bool, Field(description=(
            "Add each hit's internal ids (chunk_id, doc_id, ordinal, token_count), e.g. to line hits up with "
            "explain or a debugging session; off by default."))],
    ))
    return inspect.Signature(params, return_annotation=Annotated[CallToolResult, SearchAnswer])


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def register_tools(server: MCPServer, service: Service, guard: ToolCallGuard) -> None:
    """The tools on `server`, each with its argument model on `guard`."""
    def tool(**kwargs: Any):
        """@server.tool with the docstring dedented into the description clients show."""

        def register(fn):
            wrapped = _groove_errors_as_tool_errors(fn)
            server.add_tool(wrapped, description=inspect.cleandoc(fn.__doc__ or ""), **kwargs)
            guard.add(fn.__name__, fn)
            return fn

        return register

    # index_status is listed first: a client (or the conformance suite) that probes "the first tool" with no
    # arguments gets an answer, not an invalid-params error for search's required query.
    @tool(title="Index status", annotations=READ_ONLY)
    async def index_status() -> Annotated[CallToolResult, StatusAnswer]:
        """What is indexed: notes, chunks, chunks still waiting for a vector (pending_chunks), the model,
        skipped files with reasons, the watcher's state and the last reconcile (times in ISO-8601 UTC)."""
        return tool_result(await service.status(), answers.status_text)

    async def search(**arguments: Any) -> Annotated[CallToolResult, SearchAnswer]:
        """Find the passages of the notes that best answer a query (hybrid full-text + semantic search).

        Returns results (uri: the note's resource, path, title, heading context, tags, score, start/end lines,
        content, match spans, and position: the page, slide or sheet rows for a hit in a PDF, PowerPoint or
        Excel file), off_topic (true when the notes most likely do not answer the query: the results are only
        the nearest passages; tell the user the notes do not cover it rather than answering from them, and do not
        present them as the answer), low_confidence (true when no note stands out from the next: several notes
        may be meant; read or compare the top few before choosing), filter_applied, pending_chunks (passages still waiting for their embedding:
        a note saved moments ago may be found by its words but not yet by meaning), vectors_degraded (true when
        the query could not be embedded, so the results come from full text alone) and startup_reconcile_done
        (false while the folder is still being scanned after a start). The text content is one block per hit:
        rank, path and heading, score, line range, the passage."""
        include_ids = arguments.pop("include_ids", False)
        answer = await service.search(SearchRequest.from_arguments(arguments))
        return tool_result(answer.for_client(include_ids=include_ids), answers.search_text)

    search.__signature__ = _search_signature()  # type: ignore[attr-defined]
    tool(title="Search the notes", annotations=READ_ONLY)(search)

    @tool(title="Read a whole note", annotations=READ_ONLY)
    async def get_document(
        path: Annotated[str, Field(description="The note's path relative to the notes folder, exactly as search or list_documents returned it.")],
    ) -> Annotated[CallToolResult, DocumentAnswer]:
        """Return one whole note: uri, path, title, tags, date, frontmatter, warnings, size and content (Markdown,
        or the text extracted from a PDF, Word, PowerPoint or Excel file). The text content is the note itself
        under a one-line header."""
        try:
            doc = await service.get_document(check_note_path(path, lenient=True))
        except NotFoundError:
            check_note_path(path)  # not a note: a backslash or an encoded separator is refused as such
            raise
        return tool_result(doc, answers.document_text)

    @tool(title="List the notes", annotations=READ_ONLY)
    async def list_documents(
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page; omit for the first page.")] = None,
        limit: Annotated[int, bounded(ge=1, le=MAX_PAGE, description="Notes per page.")] = 50,
        folder: Annotated[str | None, Field(description="Only notes inside this folder (relative path, e.g. projects/2024).",
                                            max_length=MAX_QUERY_BYTES)] = None,
        tags: Annotated[list[str] | None, Field(description="Only notes with at least one of these tags.",
                                                max_length=MAX_FILTER_ITEMS)] = None,
    ) -> Annotated[CallToolResult, DocumentPage]:
        """Page through the indexed notes in path order: documents (uri, path, title, tags, date) and next_cursor
        (null on the last page)."""
        if folder and folder.rstrip("/"):
            check_note_path(folder.rstrip("/"), name="folder")
        page = await service.list_documents(ListRequest(cursor=cursor, limit=limit, folder=folder, tags=tags))
        return tool_result(page, answers.document_page_text)

    @tool(title="Folders and tags of the notes", annotations=READ_ONLY)
    async def topics(
        depth: Annotated[int, bounded(ge=1, le=6, description="Folder levels to count (1: top-level folders only).")] = 2,
        limit: Annotated[int, bounded(ge=1, le=MAX_PAGE, description="At most this many folders and this many tags.")] = 100,
    ) -> Annotated[CallToolResult, TopicsAnswer]:
        """The vault at a glance: its folders and tags with how many notes each holds, most first, each with
        the search filter that selects it (`path_globs` for a folder, `tags_any` for a tag): pass that filter
        to `search` to stay inside one topic. Also a resource: groove://topics/all (or /folders, /tags)."""
        return tool_result(await service.topics(TopicsRequest(depth=depth, limit=limit)), answers.topics_text)

    @tool(
        title="Rescan the notes folder",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
    )
    async def reindex() -> Annotated[CallToolResult, IndexReport]:
        """Reconcile the whole notes folder with the index now and return what changed (the shape `groove index
        --format json` prints). Rarely needed (the folder is watched); one at a time. Embeddings of new text
        follow in the background (pending_chunks)."""
        return tool_result(await service.reindex(), answers.reindex_text)

    @tool(title="Notes related to a note", annotations=READ_ONLY)
    async def related(
        path: Annotated[str, Field(description="The note to start from, as search or list_documents returned its path.")],
        limit: Annotated[int, bounded(ge=1, le=MAX_LIMIT, description="How many related notes to return.")] = 10,
        depth: Annotated[int, bounded(ge=1, le=MAX_DEPTH, description="How many hops to walk from the note (1 = its nearest notes).")] = 1,
        fan_out: Annotated[int, bounded(ge=1, le=MAX_FAN_OUT, description="Nearest unseen notes each note expands to per hop.")] = 5,
    ) -> Annotated[CallToolResult, RelatedAnswer]:
        """Find the notes nearest in meaning to a given note (with depth > 1, also the notes nearest to those).

        Returns source, related (uri, path, title, score, depth, via: the path of hops, chunk: the closest
        passage's heading and lines), bounded_by (which bound stopped the walk early, if any) and elapsed_ms."""
        try:
            found = await service.related(RelatedRequest(path=check_note_path(path, lenient=True), limit=limit,
                                                         depth=depth, fan_out=fan_out))
        except GrooveError as exc:
            if str(exc).startswith("no indexed note"):  # not a note: a backslash or an encoded separator is refused as such
                check_note_path(path)
            raise
        return tool_result(found.for_client(), answers.related_text)


__all__ = ["READ_ONLY", "register_tools", "tool_result"]
