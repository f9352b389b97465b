"""The MCP tools: each a thin call into the service API (groove.api.service), answering a `CallToolResult`
typed by a model of `groove.api.answers` (search's: `groove.search.answers`; the SDK advertises its schema as
`outputSchema` and validates the `structuredContent` against it; the text content is the model's text rendering).
A failure becomes a tool error (`isError: true`, one line) in one place (`groove.serve.errors.tool_error`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, WithJsonSchema

from groove.api import answers
from groove.api.answers import DocumentAnswer, DocumentPage, LinksAnswer, RelatedAnswer, StatusAnswer, TopicsAnswer
from groove.api.service import LinksRequest, ListRequest, RelatedRequest, Service, TopicsRequest
from groove.corpus.best_practice import MAX_SECTION_CHARS, MAX_TARGET_CHARS, BestPracticeAnswer, best_practice_text
from groove.errors import GrooveError, NotFoundError
from groove.index import MAX_LINKS, MAX_PAGE
from groove.search.answers import SearchAnswer, search_text
from groove.search.filters import MAX_PATH_GLOBS
from groove.search.related import MAX_DEPTH, MAX_FAN_OUT
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
                Field(
                    description=(
                        "Add each hit's internal ids (chunk_id, doc_id, ordinal, token_count), e.g. to line hits up "
                        "with explain or a debugging session; off by default."
                    )
                ),
            ],
        )
    )
    return inspect.Signature(params, return_annotation=Annotated[CallToolResult, SearchAnswer])


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

# get_document's arguments are described once, on the request model (groove/search/request.py).
_DOC_FIELDS = {name: field.description or "" for name, field in DocumentRequest.model_fields.items()}


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
        content, match spans, and position: the page, slide or sheet rows for a hit in a PDF, PowerPoint or Excel
        file), off_topic (true when the notes most likely do not answer the query: the results are only the nearest
        passages; tell the user the notes do not cover it rather than answering from them, and do not present them as
        the answer; false is no promise: a question close to a note, about a detail it never wrote down, is often not
        flagged, so use a passage only when it states the answer), low_confidence (true when no note stands out from
        the next: several notes may be meant; read or compare the top few before choosing), filter_applied,
        filter_matched_nothing (present when the filters left no note: nothing was searched, so fix the filter part it
        names, not a sign the notes are silent),
        pending_chunks (passages still waiting for their embedding: a note saved moments ago may be found by its words
        but not yet by meaning), vectors_degraded (true when the query could not be embedded, so the results come from
        full text alone) and startup_reconcile_done (false while the folder is still being scanned after a start). The
        text content is one block per hit: rank, path and heading, score, line range, the passage.

        When the context is tight, or many results are wanted, pass max_chars (e.g. 4000): the passages fill that
        many characters best first, a passage that does not fit is cut at a sentence end (its trimmed_chars says
        how much), and budget lists what was left out; then read more of a hit with get_document (path and
        heading, or lines from its start_line).

        Low-quality passages (a heading over TODO or 詳細は後述, headings or links only, a template pasted into many
        notes) are left out; pass include_low_quality: true to see them too (e.g. when looking for stubs)."""
        include_ids = arguments.pop("include_ids", False)
        answer = await service.search(SearchRequest.from_arguments(arguments))
        return tool_result(answer.for_client(include_ids=include_ids), search_text)

    search.__signature__ = _search_signature()  # type: ignore[attr-defined]  # the SDK reads the tool's parameters here
    tool(title="Search the notes", annotations=READ_ONLY)(search)

    @tool(title="Read a note, or the part that matters", annotations=READ_ONLY)
    async def get_document(
        path: Annotated[
            str,
            Field(
                description=(
                    "The note's path relative to the notes folder, exactly as search or list_documents returned it."
                )
            ),
        ],
        heading: Annotated[str | None, Field(description=_DOC_FIELDS["heading"], max_length=MAX_HEADING_CHARS)] = None,
        lines: Annotated[LineRange | None, Field(description=_DOC_FIELDS["lines"])] = None,
        max_chars: Annotated[
            int | None, bounded(ge=MIN_BUDGET_CHARS, le=MAX_DOCUMENT_CHARS, description=_DOC_FIELDS["max_chars"])
        ] = None,
    ) -> Annotated[CallToolResult, DocumentAnswer]:
        """Return one note: uri, path, title, tags, date, frontmatter, warnings, size and content (Markdown, or the
        text extracted from a PDF, Word, PowerPoint or Excel file). The text content is the note under a short
        header.

        To read only what matters, pass heading (a search hit's context, e.g. "Title > Setup > Install") for that
        section with its subsections, or lines ({"from": hit.start_line, "count": 40}) to read on around a hit;
        and max_chars to cap a long note (content is then cut at a sentence end). With any of them the answer's
        part says which lines it holds and what was left out (characters, line ranges and the headings in them,
        to ask for next). A heading the note does not have is an error that names the headings it has."""
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

    @tool(title="List the notes", annotations=READ_ONLY)
    async def list_documents(
        cursor: Annotated[
            str | None, Field(description="next_cursor from the previous page; omit for the first page.")
        ] = None,
        limit: Annotated[int, bounded(ge=1, le=MAX_PAGE, description="Notes per page.")] = 50,
        folder: Annotated[
            str | None,
            Field(
                description="Only notes inside this folder (relative path, e.g. projects/2024).",
                max_length=MAX_QUERY_BYTES,
            ),
        ] = None,
        tags: Annotated[
            list[str] | None,
            Field(description="Only notes with at least one of these tags.", max_length=MAX_FILTER_ITEMS),
        ] = None,
    ) -> Annotated[CallToolResult, DocumentPage]:
        """Page through the indexed notes in path order: documents (uri, path, title, tags, date) and next_cursor
        (null on the last page)."""
        if folder and folder.rstrip("/"):
            check_note_path(folder.rstrip("/"), name="folder")
        page = await service.list_documents(ListRequest(cursor=cursor, limit=limit, folder=folder, tags=tags))
        return tool_result(page, answers.document_page_text)

    @tool(title="Folders and tags of the notes", annotations=READ_ONLY)
    async def topics(
        depth: Annotated[
            int, bounded(ge=1, le=6, description="Folder levels to count (1: top-level folders only).")
        ] = 2,
        limit: Annotated[
            int, bounded(ge=1, le=MAX_PAGE, description="At most this many folders and this many tags.")
        ] = 100,
    ) -> Annotated[CallToolResult, TopicsAnswer]:
        """The vault at a glance: its folders and tags with how many notes each holds, most first, each with
        the search filter that selects it (`path_globs` for a folder, `tags_any` for a tag): pass that filter
        to `search` to stay inside one topic. Also a resource: groove://topics/all (or /folders, /tags)."""
        return tool_result(await service.topics(TopicsRequest(depth=depth, limit=limit)), answers.topics_text)

    # A search node of a shared store has no notes folder to rescan (each folder's own groove does): not listed.
    if getattr(service, "indexes_notes", True):

        @tool(
            title="Rescan the notes folder",
            annotations=ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
            ),
        )
        async def reindex() -> Annotated[CallToolResult, IndexReport]:
            """Reconcile the whole notes folder with the index now and return what changed (the shape `groove index
            --format json` prints). Rarely needed (the folder is watched); one at a time. Embeddings of new text
            follow in the background (pending_chunks)."""
            return tool_result(await service.reindex(), answers.reindex_text)

    @tool(title="Notes related to a note", annotations=READ_ONLY)
    async def related(
        path: Annotated[
            str, Field(description="The note to start from, as search or list_documents returned its path.")
        ],
        limit: Annotated[int, bounded(ge=1, le=MAX_LIMIT, description="How many related notes to return.")] = 10,
        depth: Annotated[
            int, bounded(ge=1, le=MAX_DEPTH, description="How many hops to walk from the note (1 = its nearest notes).")
        ] = 1,
        fan_out: Annotated[
            int, bounded(ge=1, le=MAX_FAN_OUT, description="Nearest unseen notes each note expands to per hop.")
        ] = 5,
        by: Annotated[
            Literal["meaning", "links", "both"],
            Field(
                description=(
                    "What relates notes: meaning (nearest in meaning, the default), links (the notes it links to and "
                    "the notes linking to it, both ways) or both."
                )
            ),
        ] = "meaning",
        min_similarity: Annotated[
            float | None,
            bounded(
                ge=-1,
                le=1,
                description=(
                    "Leave out notes less similar than this (cosine, -1..1); a linked note is kept whatever its "
                    "similarity."
                ),
            ),
        ] = None,
        exclude_paths: Annotated[
            list[str] | None,
            Field(
                description=(
                    'Leave these notes out of the walk: gitignore-style globs, e.g. ["daily/**", "templates/**"].'
                ),
                max_length=MAX_PATH_GLOBS,
            ),
        ] = None,
        filters: Annotated[
            FilterArgs | None,
            Field(description=("Only notes that pass these filters are walked and returned (the filters of search).")),
        ] = None,
    ) -> Annotated[CallToolResult, RelatedAnswer]:
        """Find the notes related to a given note: nearest in meaning (by: meaning, the default), linked to it
        or from it (by: links), or both; with depth > 1, also the notes related to those.

        Returns source, related (uri, path, title, score, depth, via: the path of hops, chunk: the closest
        passage's heading and lines, null for a note reached by a link alone; with by links or both, by: how the
        last hop reached it, and link: its direction, line, heading), bounded_by (which bound stopped the walk
        early, if any) and elapsed_ms."""
        try:
            found = await service.related(
                RelatedRequest(
                    path=check_note_path(path, lenient=True),
                    limit=limit,
                    depth=depth,
                    fan_out=fan_out,
                    by=by,
                    min_similarity=min_similarity,
                    exclude_paths=exclude_paths,
                    filters=filters,
                )
            )
        except GrooveError as exc:
            if exc.kind == "not_found":  # not a note: a backslash or an encoded separator is refused as such
                check_note_path(path)
            raise
        return tool_result(found.for_client(), answers.related_text)

    @tool(title="Links and backlinks of a note", annotations=READ_ONLY)
    async def links(
        path: Annotated[str, Field(description="The note, as search or list_documents returned its path.")],
        limit: Annotated[int, bounded(ge=1, le=MAX_LINKS, description="At most this many links of each kind.")] = 100,
    ) -> Annotated[CallToolResult, LinksAnswer]:
        """The links of a note as the vault's author wrote them ([[wiki links]], ![[embeds]] and Markdown links
        to notes, resolved as Obsidian resolves them): outgoing (the notes it links to), backlinks (the notes
        that link to it) and unresolved (its links to notes that do not exist). Each item has path, the line of
        the link, and the heading, block or alias it names. Use it to follow what the author connected: the
        notes a hub or index note points to, what refers to a note before you change or rely on it, or dangling
        links to fix; for notes similar in meaning use related (by: links walks this graph further)."""
        try:
            found = await service.links(LinksRequest(path=check_note_path(path, lenient=True), limit=limit))
        except NotFoundError:
            check_note_path(path)  # not a note: a backslash or an encoded separator is refused as such
            raise
        return tool_result(found, answers.links_text)

    # Opt-in ([best_practice] path_templates): not configured, the tool is not listed at all (rather than listed
    # and failing). A stand-in service without the method (tests) offers none either.
    best_practices = getattr(service, "best_practices", None)
    if callable(best_practices) and best_practices() is not None:

        @tool(title="Best practices for a target", annotations=READ_ONLY)
        async def get_best_practice(
            target: Annotated[
                str,
                Field(
                    description=(
                        "What the practices are for: one name such as python, react or docker, as the notes lay the "
                        "documents out ([best_practice] path_templates). An unknown target's error names the targets "
                        "that have a document."
                    ),
                    max_length=MAX_TARGET_CHARS,
                ),
            ],
            section: Annotated[
                str | None,
                Field(
                    description=(
                        "Only this `##` section of the document (its heading text, any case; e.g. Testing); omit for "
                        "the whole document."
                    ),
                    max_length=MAX_SECTION_CHARS,
                ),
            ] = None,
        ) -> Annotated[CallToolResult, BestPracticeAnswer]:
            """Return the user's best-practice document for a target (a language, framework or tool), or only one
            of its `##` sections: target, path, section, sections (every `##` heading, to ask for one), size and
            content (Markdown). Use it before writing or reviewing work on that target, and follow it over general
            habits. The text content is the document under a short header."""
            return tool_result(await service.best_practice(target, section), best_practice_text)


__all__ = ["READ_ONLY", "register_tools", "tool_result"]
