"""The MCP face of the daemon: tools, note resources and change notifications.

`build_server(daemon, limits)` returns an `MCPServer` (mcp 2.3) whose tools
are thin calls into the `Daemon` service API. Errors, as the MCP
specification and the conformance suite expect:

- an unknown tool, arguments that do not fit the tool's schema (a missing or
  unknown argument, a wrong type, a value out of its advertised range, an
  empty query, a bad date or cursor, a path that steps out of the folder):
  JSON-RPC error -32602 with one line saying what to change (`ToolCallGuard`
  checks the shape before the tool runs; groove's `QueryError` maps to it);
- a client over its tool-call rate: JSON-RPC error -32029 with
  `retry_after_s` (a token bucket per client);
- a failure the notes decide (a note that is not indexed, a reindex already
  running): a tool error (`isError: true` with the message);
- an unknown prompt or a missing prompt argument: -32602, one line.

Never a crash, a traceback or pydantic's report with its URL.

Six prompts (`search_notes`, `summarize_note`, and the workflows `topic_summary`, `deep_dive`,
`changed_since`, `where_silent`) and `completion/complete`
(note paths for the resource template and the prompts' `path`, tags for
`tag`) are offered; `logging/setLevel` is accepted on the handshake era.

Notes are resources too: `groove://note/<path>` (each path segment
percent-encoded, so Japanese names round-trip), `text/markdown`, listed with
pagination. The resource handlers are registered on the low-level server
directly (`resources/list`, `resources/read`, `resources/templates/list`,
`resources/subscribe`, `resources/unsubscribe`), replacing MCPServer's
static-resource manager, because the set of notes is the index's and changes
while the server runs. The topics listing is a resource template too,
`groove://topics/{kind}` (`all`, `folders`, `tags`; JSON).

Every tool answers a `CallToolResult` typed by a model of `answers.py`: the
SDK advertises the model's schema as `outputSchema` and validates the
`structuredContent` against it; the text content is the compact rendering
`answers.py` writes for a model to read.

Change notifications reach clients of both protocol eras:

- handshake versions (up to 2025-11-25): `resources/subscribe` records the
  connection per note; `notifications/resources/updated` goes to the
  connections subscribed to a changed note and
  `notifications/resources/list_changed` to every live connection when notes
  are added, removed or renamed. A connection is forgotten when it closes
  (its exit stack), or when a send to it fails or stalls.
- 2026-07-28: clients open `subscriptions/listen`; the same events are
  published as `ResourceUpdated` / `ResourcesListChanged` on the SDK's
  subscription bus, which filters per stream.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from typing import Annotated, Any, Callable
from urllib.parse import unquote

import anyio
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptReference,
    ResourceTemplateReference,
    SetLevelRequestParams,
    TextContent,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    SubscribeRequestParams,
    TextResourceContents,
    ToolAnnotations,
    CallToolResult,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, create_model

from groove import __version__
from groove.app import MAX_PAGE
from groove.config import HTTPSettings
from groove.corpus.parsers import DOCUMENT_EXTENSIONS
from groove.errors import GrooveError, NotFoundError
from groove.search.compiler import QueryError
from groove.logs import get_logger
from groove.search.related import MAX_DEPTH, MAX_FAN_OUT
from groove.search.request import MAX_FILTER_ITEMS, MAX_LIMIT, MAX_QUERY_BYTES, SearchRequest, describe, tool_fields
from groove.serve import answers, sdk
from groove.serve.answers import (
    NOTE_URI_PREFIX, DocumentAnswer, DocumentPage, RelatedAnswer, SearchAnswer, StatusAnswer, TopicsAnswer, note_uri,
)
from groove.sync.report import IndexReport
from groove.serve.daemon import Daemon
from groove.serve.sdk import events_of

log = get_logger(__name__)

NOTE_MIME_TYPE = "text/markdown"
TEXT_MIME_TYPE = "text/plain"  # .txt files and the text extracted from documents (corpus/parsers)


JSON_MIME_TYPE = "application/json"
TOPICS_URI_PREFIX = "groove://topics/"  # + all | folders | tags: the topics tool's listing as a resource
TOPIC_KINDS = ("all", "folders", "tags")


def note_mime(path: str) -> str:
    return TEXT_MIME_TYPE if path.lower().endswith((".txt", *DOCUMENT_EXTENSIONS)) else NOTE_MIME_TYPE


RESOURCE_PAGE_SIZE = 100
COMPLETION_VALUES = 100  # the most values one completion/complete answer may carry (the specification's cap)
SEND_TIMEOUT_S = 2.0  # a connection that cannot take a notification this fast is dropped

INSTRUCTIONS = """\
groove searches the user's Markdown notes (a local folder, often mixed Japanese and English).

- `search` first: it returns the few passages that best answer a question, each with
  path, heading context, tags, score and line range, so you can cite them. Query syntax:
  plain words or a question; "quoted phrases" are matched verbatim; -word excludes notes
  containing it. Narrow with path_globs (gitignore-style, !glob excludes), tags_any /
  tags_all, date_from / date_to (frontmatter date) and fields (frontmatter key = value).
- `pending_chunks` in a search response counts passages not yet embedded: when it is
  above 0, a note may be findable by its words but not yet by meaning, so an empty or
  weak answer may mean "not indexed yet" rather than "not in the notes".
- `get_document` returns a whole note by the path a result gave; `related` finds notes
  near one note; `list_documents` pages through the notes (filter by folder or tags).
- `index_status` says what is indexed and what is pending; `reindex` forces a full
  rescan of the folder (rarely needed: the folder is watched).
- Every note is also a resource `groove://note/<path>` (each hit's `uri`); subscribe to
  one to hear when it changes. `groove://topics/all` lists the folders and tags.
"""


# --- note URIs ---------------------------------------------------------------------

def note_path(uri: str) -> str | None:
    """The relative path a note URI names, or None when it is not a note URI."""
    if not isinstance(uri, str) or not uri.startswith(NOTE_URI_PREFIX):
        return None
    rest = uri[len(NOTE_URI_PREFIX):]
    if not rest:
        return None
    segments = [unquote(segment, errors="strict") if "%" in segment else segment for segment in rest.split("/")]
    if any(not s for s in segments):
        return None
    return "/".join(segments)


def check_note_path(path: Any, *, name: str = "path") -> str:
    """A note path as a client gave it, refused (JSON-RPC -32602) when it could name anything outside the
    notes folder: `..` or `.` segments, an absolute or drive path, backslashes, NUL, or percent-encoded
    separators (`%2F`, `%5C`) and dots that would decode into one of those. Paths are looked up in the
    index, never opened as given, so this is a second wall with a clear message."""
    if not isinstance(path, str):
        raise MCPError(code=INVALID_PARAMS, message=f"{name} must be a string, got {path!r}")
    problem = _path_problem(path)
    if problem is None and "%" in path:
        decoded = unquote(path)
        if decoded != path and _path_problem(decoded) is not None:
            problem = "has percent-encoded separators or dots"
    if problem is not None:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{name} {path!r} {problem}; pass a path relative to the notes folder, exactly as search or "
                    "list_documents returned it",
            data={name: path},
        )
    return path


def _path_problem(path: str) -> str | None:
    if "\x00" in path:
        return "contains a NUL character"
    if path.startswith("/") or (len(path) > 1 and path[1] == ":" and path[0].isalpha()):
        return "is absolute"
    if "\\" in path:
        return "contains a backslash"
    if any(segment in ("..", ".") for segment in path.split("/")):
        return "steps out of the notes folder (a '..' or '.' segment)"
    return None


def _bad_uri(uri: str) -> MCPError:
    return MCPError(
        code=INVALID_PARAMS,
        message=f"{uri!r} is not a note URI; note URIs look like {NOTE_URI_PREFIX}<path>, as resources/list returns them",
        data={"uri": uri},
    )


def _parse_uri(uri: str) -> str:
    try:
        path = note_path(uri)
    except UnicodeDecodeError:
        path = None
    if path is None:
        raise _bad_uri(uri)
    if any(sep in segment for segment in path.split("/") for sep in ("\\",)) or _path_problem(path) is not None \
            or len(path.split("/")) != len(uri[len(NOTE_URI_PREFIX):].split("/")):
        # A segment that decoded into a separator (%2F, %5C) or a '..': refused, not looked up.
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{uri!r} names a path outside the notes folder (an encoded separator or a '..' segment); "
                    "use the URIs resources/list returns",
            data={"uri": uri},
        )
    return path


# --- change notifications -------------------------------------------------------------

class NoteEvents:
    """Who hears about which note, and the daemon listener that tells them."""

    def __init__(self, bus: InMemorySubscriptionBus):
        self.bus = bus
        self._connections: set[Connection] = set()                     # live handshake-era connections
        self._subscriptions: dict[Connection, dict[str, str]] = {}     # -> {path: the URI as the client wrote it}

    # -- connection tracking (a server middleware sees every request) ---------------
    async def track(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        connection = sdk.connection_of(ctx)
        if (
            connection is not None
            and connection.has_standalone_channel
            and connection.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            self._know(connection)
        return await call_next(ctx)

    def _know(self, connection: Connection) -> None:
        if connection not in self._connections:
            self._connections.add(connection)
            connection.exit_stack.callback(self.forget, connection)  # runs when the connection closes

    def forget(self, connection: Connection) -> None:
        self._connections.discard(connection)
        self._subscriptions.pop(connection, None)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def subscriber_count(self, path: str) -> int:
        return sum(1 for subs in self._subscriptions.values() if path in subs)

    # -- resources/subscribe, resources/unsubscribe -----------------------------------
    async def subscribe(self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        path = _parse_uri(params.uri)
        connection = sdk.connection_of(ctx)
        if connection is None:
            raise MCPError(code=INTERNAL_ERROR, message="this transport cannot deliver resource notifications")
        self._know(connection)
        self._subscriptions.setdefault(connection, {})[path] = params.uri
        log.debug("resource_subscribed", path=path)
        return EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        path = _parse_uri(params.uri)
        connection = sdk.connection_of(ctx)
        if connection is not None:
            subs = self._subscriptions.get(connection)
            if subs is not None:
                subs.pop(path, None)
        return EmptyResult()

    # -- the daemon listener ------------------------------------------------------------
    async def on_change(self, paths: list[str], list_changed: bool) -> None:
        """Called by the daemon after a write: `paths` changed (or were deleted)."""
        # 2026-07-28: the bus filters per listen stream.
        for path in paths:
            await self.bus.publish(ResourceUpdated(uri=note_uri(path)))
        if list_changed:
            await self.bus.publish(ResourcesListChanged())
        # Handshake versions: this connection's subscriptions, plus list_changed to all.
        touched = set(paths)
        sends: list[tuple[Connection, list[str]]] = []
        for connection in list(self._connections):
            uris = [uri for path, uri in self._subscriptions.get(connection, {}).items() if path in touched]
            if uris or list_changed:
                sends.append((connection, uris))
        if not sends:
            return
        async with anyio.create_task_group() as tg:
            for connection, uris in sends:
                tg.start_soon(self._send, connection, uris, list_changed)

    async def _send(self, connection: Connection, uris: list[str], list_changed: bool) -> None:
        try:
            with anyio.fail_after(SEND_TIMEOUT_S):
                for uri in uris:
                    await connection.send_resource_updated(uri)
                if list_changed:
                    await connection.send_resource_list_changed()
        except Exception as exc:  # noqa: BLE001 - a dead or stuck client is dropped quietly
            log.debug("notification_dropped", error=repr(exc))
            self.forget(connection)


# --- the server ---------------------------------------------------------------------

def _bounded(ge: float | None = None, le: float | None = None, *, description: str) -> Any:
    """A parameter whose bounds are advertised in the JSON schema and checked by groove itself,
    so that a value out of range gets groove's one-line message rather than pydantic's report."""
    extra: dict[str, Any] = {}
    if ge is not None:
        extra["minimum"] = ge
    if le is not None:
        extra["maximum"] = le
    return Field(description=description, json_schema_extra=extra)


def _tool_error(exc: Exception) -> ToolError:
    return ToolError(str(exc))


def _groove_errors_as_tool_errors(fn):
    """The one mapping of groove's errors for every tool: invalid arguments (`QueryError`: out of range, an
    empty query, a bad date or cursor) are a JSON-RPC error -32602 with groove's one-line message; any other
    GrooveError (a note that is not indexed, a reindex already running) is a tool error with its message
    (`isError: true`); anything else stays a crash the SDK reports without its details."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except QueryError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        except GrooveError as exc:
            raise _tool_error(exc) from exc

    return call


# --- tools/call: unknown tools, argument shapes, the rate per client --------------------------------

RATE_LIMITED = -32029  # server-defined JSON-RPC code: too many tool calls from this client


def arguments_model(name: str, fn: Callable[..., Any]) -> type[BaseModel]:
    """A strict pydantic model of a tool's arguments, from its signature (what its input schema says)."""
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn, eval_str=True).parameters.values():
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (param.annotation, default)
    return create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid", strict=True), **fields)


def describe_arguments(tool: str, model: type[BaseModel], exc: ValidationError) -> str:
    """One line for the first problem of a tool's arguments (never pydantic's report with its URL)."""
    err = exc.errors(include_url=False)[0]
    if err["type"] == "extra_forbidden":
        takes = ", ".join(model.model_fields) or "no arguments"
        return f"unknown argument {str(err['loc'][-1])!r} for {tool}; it takes: {takes}"
    return f"{tool}: {describe(exc)}"


class TokenBucket:
    """`rate` tokens a second up to `burst`; `take()` is the wait in seconds before a token (0 = taken)."""

    def __init__(self, rate: float, burst: int):
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def take(self) -> float:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class ToolCallGuard:
    """Server middleware for tools/call: an unknown tool or arguments that do not fit the tool's schema are
    JSON-RPC error -32602 (the MCP specification's protocol errors, with one-line messages), and each client
    over its rate gets error -32029 at once (a token bucket per client, so other clients are not slowed).

    A client is its MCP session (`Mcp-Session-Id`) or, without one (2026-07-28 stateless requests), its TCP
    connection; the connection cap of the HTTP layer bounds how many there can be. stdio has one client and
    no rate limit."""

    MAX_CLIENTS = 10_000  # buckets kept; the fullest (least recently used) are forgotten first

    def __init__(self, limits: HTTPSettings):
        self.limits = limits
        self.models: dict[str, type[BaseModel]] = {}
        self.buckets: dict[str, TokenBucket] = {}
        self.refused = 0

    def add(self, name: str, fn: Callable[..., Any]) -> None:
        self.models[name] = arguments_model(name, fn)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            self._check(ctx)
        return await call_next(ctx)

    def _check(self, ctx: ServerRequestContext[Any, Any]) -> None:
        params = ctx.params or {}
        name = params.get("name")
        self._rate(ctx, name)
        model = self.models.get(name) if isinstance(name, str) else None
        if model is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown tool {name!r}; this server's tools are: {', '.join(self.models)} (tools/list)",
                data={"tool": name},
            )
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise MCPError(code=INVALID_PARAMS, message=f"{name}: arguments must be an object, got {arguments!r}")
        try:
            model.model_validate(arguments)
        except ValidationError as exc:
            raise MCPError(code=INVALID_PARAMS, message=describe_arguments(name, model, exc)) from None
        for field, info in model.model_fields.items():  # the bounds `_bounded` advertises in the schema
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            value = arguments.get(field)
            low, high = extra.get("minimum"), extra.get("maximum")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and (low is not None or high is not None):
                if (low is not None and value < low) or (high is not None and value > high):
                    raise MCPError(code=INVALID_PARAMS, message=f"{field} must be between {low} and {high}, got {value}")

    def _rate(self, ctx: ServerRequestContext[Any, Any], tool: Any) -> None:
        request = ctx.request
        headers = getattr(request, "headers", None)
        if headers is None:
            return  # stdio
        client = getattr(request, "client", None)
        key = headers.get("mcp-session-id") or (f"{client.host}:{client.port}" if client else "unknown")
        bucket = self.buckets.pop(key, None) or TokenBucket(self.limits.tool_calls_per_s, self.limits.tool_call_burst)
        self.buckets[key] = bucket  # most recently used last
        while len(self.buckets) > self.MAX_CLIENTS:
            self.buckets.pop(next(iter(self.buckets)))
        wait = bucket.take()
        if wait > 0:
            self.refused += 1
            log.info("tool_call_rate_limited", tool=str(tool)[:64], retry_after_s=round(wait, 3))
            raise MCPError(
                code=RATE_LIMITED,
                message=(f"too many tool calls from this client: at most {self.limits.tool_calls_per_s:g} a second "
                         f"(bursts of {self.limits.tool_call_burst}); retry in {wait:.2f} s"),
                data={"retry_after_s": round(wait, 3)},
            )


# --- prompts ------------------------------------------------------------------------------------

PROMPTS = [
    Prompt(
        name="search_notes",
        title="Search my notes",
        description="Ask the assistant to answer a question from the notes, citing the paths it used.",
        arguments=[
            PromptArgument(name="question", description="What to look for in the notes.", required=True),
            PromptArgument(name="tag", description="Only notes with this tag (completion lists the tags).", required=False),
        ],
    ),
    Prompt(
        name="summarize_note",
        title="Summarize a note",
        description="Give the assistant one whole note (as an embedded resource) and ask for a summary.",
        arguments=[PromptArgument(name="path", description="The note's path (completion lists the paths).", required=True)],
    ),
    Prompt(
        name="topic_summary",
        title="Summarize a topic across my notes",
        description="Search broadly, read the notes that carry weight whole, then summarize with citations.",
        arguments=[PromptArgument(name="topic", description="The topic, in any language the notes use.", required=True)],
    ),
    Prompt(
        name="deep_dive",
        title="Deep dive from a question",
        description="Search, then walk `related` from the best note before answering, citing every note used.",
        arguments=[PromptArgument(name="question", description="The question to answer from the notes.", required=True)],
    ),
    Prompt(
        name="changed_since",
        title="What changed since a date",
        description="The notes dated on or after a day (frontmatter date), grouped by folder, with what is new in each.",
        arguments=[
            PromptArgument(name="date", description="An ISO date, YYYY-MM-DD.", required=True),
            PromptArgument(name="topic", description="Optionally, only what concerns this topic.", required=False),
        ],
    ),
    Prompt(
        name="where_silent",
        title="Where are my notes silent?",
        description="Split a topic into questions and report which ones the notes do not answer (no hit, or low_confidence).",
        arguments=[PromptArgument(name="topic", description="The topic to check the notes' coverage of.", required=True)],
    ),
]

CITE = ("Cite every passage you use by its path and line range (path:start_line-end_line). When a search "
        "answers with low_confidence: true, say that the notes may not cover it instead of guessing; when "
        "pending_chunks > 0, say the index is still embedding.")


def workflow_prompt(name: str, args: dict[str, str]) -> str | None:
    """The text of a prompt that only instructs (no note content inside), or None for another prompt."""
    if name == "topic_summary":
        return (f"Summarize what my notes say about: {args['topic']}\n\n"
                "1. Call the groove `search` tool with the topic (limit 20); search again with one or two "
                "rephrasings, in Japanese and in English when the notes mix both.\n"
                "2. The notes that carry weight are the ones that come back in several searches or at the top: "
                "read up to five of them whole with `get_document`.\n"
                "3. Summarize the topic in a few paragraphs, grouping what the notes agree on and where they "
                f"differ.\n\n{CITE}")
    if name == "deep_dive":
        return (f"Answer from my notes: {args['question']}\n\n"
                "1. Call `search` with the question; take the best note.\n"
                "2. Call `related` on that note (depth 2) and read the related notes that bear on the question "
                "(`get_document`).\n"
                "3. Only then answer, drawing the notes together; name each note you used and how it relates.\n\n"
                f"{CITE}")
    if name == "changed_since":
        topic = (args.get("topic") or "").strip()
        query = topic or "notes"
        return (f"What changed in my notes since {args['date']}?\n\n"
                f"1. Call `search` with query {query!r}, date_from {args['date']!r} and limit 50 "
                "(date_from filters on each note's frontmatter date); repeat with other words if the notes "
                "cover several subjects.\n"
                "2. Group the notes by folder and say in one line each what is new.\n"
                "3. Notes without a frontmatter date are not found this way: say so.\n\n" + CITE)
    if name == "where_silent":
        return (f"Find where my notes are silent on: {args['topic']}\n\n"
                "1. Split the topic into five to ten concrete questions a reader would ask.\n"
                "2. Call `search` for each question.\n"
                "3. Report, as a list, which questions the notes answer (with the path) and which they do not: "
                "no result, or low_confidence: true with passages that do not answer it. Do not fill the "
                "gaps from your own knowledge; name them.\n\n" + CITE)
    return None


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


def build_server(daemon: Daemon, limits: HTTPSettings | None = None) -> MCPServer:
    """The MCP server for one daemon: tools, note resources, subscriptions, prompts and completion."""
    bus = InMemorySubscriptionBus()
    server: MCPServer = MCPServer(
        "groove",
        title="groove: search your notes",
        instructions=INSTRUCTIONS,
        version=__version__,
        subscriptions=bus,
        log_level="WARNING",
        warn_on_duplicate_tools=False,
    )
    events = NoteEvents(bus)
    sdk.attach_events(server, events)
    daemon.listeners.append(events.on_change)
    guard = ToolCallGuard(limits or HTTPSettings())

    # -- tools ----------------------------------------------------------------------
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
        return answers.tool_result(answers.status_answer(await daemon.index_status()), answers.status_text)

    async def search(**arguments: Any) -> Annotated[CallToolResult, SearchAnswer]:
        """Find the passages of the notes that best answer a query (hybrid full-text + semantic search).

        Returns results (uri: the note's resource, path, title, heading context, tags, score, start/end lines,
        content, match spans, and position: the page, slide or sheet rows for a hit in a PDF, PowerPoint or
        Excel file), low_confidence, filter_applied, pending_chunks (passages still waiting for their embedding:
        a note saved moments ago may be found by its words but not yet by meaning), vectors_degraded (true when
        the query could not be embedded, so the results come from full text alone) and startup_reconcile_done
        (false while the folder is still being scanned after a start). The text content is one block per hit:
        rank, path and heading, score, line range, the passage."""
        include_ids = arguments.pop("include_ids", False)
        response = await daemon.search(SearchRequest.from_arguments(arguments))
        # Until the startup scan is done, a note may be missing without being pending.
        response["startup_reconcile_done"] = daemon.reconciled.is_set()
        return answers.tool_result(answers.search_answer(response, include_ids=include_ids), answers.search_text)

    search.__signature__ = _search_signature()  # type: ignore[attr-defined]
    tool(title="Search the notes", annotations=READ_ONLY)(search)

    @tool(title="Read a whole note", annotations=READ_ONLY)
    async def get_document(
        path: Annotated[str, Field(description="The note's path relative to the notes folder, exactly as search or list_documents returned it.")],
    ) -> Annotated[CallToolResult, DocumentAnswer]:
        """Return one whole note: uri, path, title, tags, date, frontmatter, warnings, size and content (Markdown,
        or the text extracted from a PDF, Word, PowerPoint or Excel file). The text content is the note itself
        under a one-line header."""
        doc = await daemon.get_document(check_note_path(path))
        return answers.tool_result(answers.document_answer(doc), answers.document_text)

    @tool(title="List the notes", annotations=READ_ONLY)
    async def list_documents(
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page; omit for the first page.")] = None,
        limit: Annotated[int, _bounded(ge=1, le=MAX_PAGE, description="Notes per page.")] = 50,
        folder: Annotated[str | None, Field(description="Only notes inside this folder (relative path, e.g. projects/2024).",
                                            max_length=MAX_QUERY_BYTES)] = None,
        tags: Annotated[list[str] | None, Field(description="Only notes with at least one of these tags.",
                                                max_length=MAX_FILTER_ITEMS)] = None,
    ) -> Annotated[CallToolResult, DocumentPage]:
        """Page through the indexed notes in path order: documents (uri, path, title, tags, date) and next_cursor
        (null on the last page)."""
        if folder and folder.rstrip("/"):
            check_note_path(folder.rstrip("/"), name="folder")
        page = await daemon.list_documents(cursor=cursor, limit=limit, folder=folder, tags=tags)
        return answers.tool_result(answers.document_page(page), answers.document_page_text)

    @tool(title="Folders and tags of the notes", annotations=READ_ONLY)
    async def topics(
        depth: Annotated[int, _bounded(ge=1, le=6, description="Folder levels to count (1: top-level folders only).")] = 2,
        limit: Annotated[int, _bounded(ge=1, le=MAX_PAGE, description="At most this many folders and this many tags.")] = 100,
    ) -> Annotated[CallToolResult, TopicsAnswer]:
        """The vault at a glance: its folders and tags with how many notes each holds, most first, each with
        the search filter that selects it (`path_globs` for a folder, `tags_any` for a tag): pass that filter
        to `search` to stay inside one topic. Also a resource: groove://topics/all (or /folders, /tags)."""
        return answers.tool_result(answers.topics_answer(await daemon.topics(depth=depth, limit=limit)), answers.topics_text)

    @tool(
        title="Rescan the notes folder",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
    )
    async def reindex() -> Annotated[CallToolResult, IndexReport]:
        """Reconcile the whole notes folder with the index now and return what changed (the shape `groove index
        --format json` prints). Rarely needed (the folder is watched); one at a time. Embeddings of new text
        follow in the background (pending_chunks)."""
        report = IndexReport.model_validate(await daemon.reindex())
        return answers.tool_result(report, answers.reindex_text)

    @tool(title="Notes related to a note", annotations=READ_ONLY)
    async def related(
        path: Annotated[str, Field(description="The note to start from, as search or list_documents returned its path.")],
        limit: Annotated[int, _bounded(ge=1, le=MAX_LIMIT, description="How many related notes to return.")] = 10,
        depth: Annotated[int, _bounded(ge=1, le=MAX_DEPTH, description="How many hops to walk from the note (1 = its nearest notes).")] = 1,
        fan_out: Annotated[int, _bounded(ge=1, le=MAX_FAN_OUT, description="Nearest unseen notes each note expands to per hop.")] = 5,
    ) -> Annotated[CallToolResult, RelatedAnswer]:
        """Find the notes nearest in meaning to a given note (with depth > 1, also the notes nearest to those).

        Returns source, related (uri, path, title, score, depth, via: the path of hops, chunk: the closest
        passage's heading and lines), bounded_by (which bound stopped the walk early, if any) and elapsed_ms."""
        found = await daemon.related(path=check_note_path(path), limit=limit, depth=depth, fan_out=fan_out)
        return answers.tool_result(answers.related_answer(found), answers.related_text)

    # -- note resources -----------------------------------------------------------------
    async def list_resources(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> ListResourcesResult:
        try:
            page = await daemon.list_documents(cursor=params.cursor, limit=RESOURCE_PAGE_SIZE)
        except GrooveError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        resources = [
            Resource(
                uri=note_uri(doc["path"]),
                name=doc["path"],
                title=doc["title"] or None,
                description=_describe(doc),
                mime_type=note_mime(doc["path"]),
            )
            for doc in page["documents"]
        ]
        return ListResourcesResult(resources=resources, next_cursor=page["next_cursor"])

    async def list_templates(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=[
            ResourceTemplate(
                uri_template=NOTE_URI_PREFIX + "{+path}",
                name="note",
                title="A note by its path",
                description="A note of the notes folder by its relative path (segments percent-encoded).",
                mime_type=NOTE_MIME_TYPE,
            ),
            ResourceTemplate(
                uri_template=TOPICS_URI_PREFIX + "{kind}",
                name="topics",
                title="Folders and tags of the notes",
                description=("The topics tool's listing as JSON, with its defaults (two folder levels, 100 of each): "
                             f"kind is {', '.join(TOPIC_KINDS)} (all: both)."),
                mime_type=JSON_MIME_TYPE,
            ),
        ])

    async def read_topics(uri: str) -> ReadResourceResult:
        kind = uri[len(TOPICS_URI_PREFIX):]
        if kind not in TOPIC_KINDS:
            raise MCPError(code=INVALID_PARAMS, message=f"Resource not found: {uri!r} names no topics listing; use "
                           + ", ".join(TOPICS_URI_PREFIX + k for k in TOPIC_KINDS), data={"uri": uri})
        listing = answers.topics_answer(await daemon.topics()).model_dump(mode="json")
        if kind != "all":
            listing = {k: v for k, v in listing.items() if k in ("notes", kind, f"{kind}_total")}
        return ReadResourceResult(contents=[TextResourceContents(
            uri=uri, text=json.dumps(listing, ensure_ascii=False), mime_type=JSON_MIME_TYPE)])

    async def read_resource(ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams) -> ReadResourceResult:
        if isinstance(params.uri, str) and params.uri.startswith(TOPICS_URI_PREFIX):
            return await read_topics(params.uri)
        path = _parse_uri(params.uri)
        try:
            doc = await daemon.get_document(path)
        except NotFoundError as exc:
            # SEP-2164: an unknown resource is invalid params, with the URI in data.
            raise MCPError(code=INVALID_PARAMS, message=f"Resource not found: {exc}", data={"uri": params.uri}) from exc
        return ReadResourceResult(contents=[TextResourceContents(uri=params.uri, text=doc["content"], mime_type=note_mime(path))])

    sdk.add_request_handler(server, "resources/list", PaginatedRequestParams, list_resources)
    sdk.add_request_handler(server, "resources/templates/list", PaginatedRequestParams, list_templates)
    sdk.add_request_handler(server, "resources/read", ReadResourceRequestParams, read_resource)
    sdk.add_request_handler(server, "resources/subscribe", SubscribeRequestParams, events.subscribe)
    sdk.add_request_handler(server, "resources/unsubscribe", UnsubscribeRequestParams, events.unsubscribe)
    server.middleware.append(events.track)
    server.middleware.append(guard)

    # -- prompts -----------------------------------------------------------------------------
    prompts = {p.name: p for p in PROMPTS}

    async def list_prompts(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> ListPromptsResult:
        return ListPromptsResult(prompts=PROMPTS)

    async def get_prompt(ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams) -> GetPromptResult:
        prompt = prompts.get(params.name)
        if prompt is None:
            raise MCPError(code=INVALID_PARAMS, message=f"unknown prompt {params.name!r}; the prompts are: "
                           f"{', '.join(prompts)} (prompts/list)", data={"prompt": params.name})
        given = dict(params.arguments or {})
        takes = [a.name for a in prompt.arguments or []]
        for arg in prompt.arguments or []:
            if arg.required and not str(given.get(arg.name) or "").strip():
                raise MCPError(code=INVALID_PARAMS, message=f"prompt {prompt.name!r} needs the argument {arg.name!r} "
                               f"({arg.description})", data={"prompt": prompt.name, "argument": arg.name})
        extra = sorted(set(given) - set(takes))
        if extra:
            raise MCPError(code=INVALID_PARAMS, message=f"unknown argument {extra[0]!r} for prompt {prompt.name!r}; "
                           f"it takes: {', '.join(takes)}")
        text = workflow_prompt(prompt.name, {k: str(v) for k, v in given.items()})
        if text is not None:
            return GetPromptResult(description=prompt.description,
                                   messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))])
        if prompt.name == "search_notes":
            tag = str(given.get("tag") or "").strip()
            where = f" Only use notes tagged #{tag} (tags_any)." if tag else ""
            text = (f"Answer from my notes: {given['question']}\n\nUse the groove search tool first.{where} "
                    "Cite the path and line range of every passage you use; say so if the notes do not answer it.")
            return GetPromptResult(description=prompt.description,
                                   messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))])
        path = check_note_path(given["path"])
        try:
            doc = await daemon.get_document(path)
        except NotFoundError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc), data={"path": path}) from exc
        return GetPromptResult(description=prompt.description, messages=[
            PromptMessage(role="user", content=TextContent(type="text", text=f"Summarize my note {path} in a few sentences.")),
            PromptMessage(role="user", content=EmbeddedResource(type="resource", resource=TextResourceContents(
                uri=note_uri(path), text=doc["content"], mime_type=NOTE_MIME_TYPE))),
        ])

    sdk.add_request_handler(server, "prompts/list", PaginatedRequestParams, list_prompts)
    sdk.add_request_handler(server, "prompts/get", GetPromptRequestParams, get_prompt)

    # -- completion (note paths and tags) -------------------------------------------------------
    @server.completion()
    async def complete(ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument,
                       context: CompletionContext | None) -> Completion | None:
        kind = None
        if isinstance(ref, ResourceTemplateReference) and ref.uri.startswith(NOTE_URI_PREFIX) and argument.name == "path":
            kind = "path"
        elif isinstance(ref, ResourceTemplateReference) and ref.uri.startswith(TOPICS_URI_PREFIX) and argument.name == "kind":
            values = [k for k in TOPIC_KINDS if k.startswith(argument.value or "")]
            return Completion(values=values, total=len(values), has_more=False)
        elif isinstance(ref, PromptReference) and ref.name in prompts:
            kind = {"path": "path", "tag": "tag"}.get(argument.name)
        if kind is None:
            return Completion(values=[], total=0, has_more=False)
        prefix = argument.value or ""
        if len(prefix.encode()) > MAX_QUERY_BYTES:
            raise MCPError(code=INVALID_PARAMS, message=f"the value to complete is over {MAX_QUERY_BYTES} bytes")
        values, total = await daemon.complete(kind, prefix, COMPLETION_VALUES)
        return Completion(values=values, total=total, has_more=total > len(values))

    # -- logging/setLevel (handshake era) -------------------------------------------------------
    async def set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        # groove sends no log messages to clients (its log is on stderr); the level is accepted and noted.
        log.debug("client_log_level", level=params.level)
        return EmptyResult()

    sdk.add_request_handler(server, "logging/setLevel", SetLevelRequestParams, set_level)

    sdk.advertise_resources_list_changed(server)
    return server


def _describe(doc: dict[str, Any]) -> str | None:
    parts = []
    if doc.get("date"):
        parts.append(str(doc["date"]))
    if doc.get("tags"):
        parts.append("tags: " + ", ".join(f"#{t}" for t in doc["tags"]))
    return "; ".join(parts) or None


__all__ = [
    "INSTRUCTIONS", "PROMPTS", "RATE_LIMITED", "NoteEvents", "TokenBucket", "ToolCallGuard", "build_server",
    "check_note_path", "events_of", "note_path", "note_uri",
]
