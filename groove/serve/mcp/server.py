"""The MCP face of the daemon, composed from one module per concern.

`build_server(daemon, limits)` returns an `MCPServer` (mcp 2.3):

| module         | what it adds                                                                   |
|----------------|--------------------------------------------------------------------------------|
| `tools.py`     | the tools, each a thin call into the service API (`groove.api.service`)                |
| `guard.py`     | the call guard: unknown tools and argument shapes (-32602), the rate (-32029)  |
| `resources.py` | notes as resources `groove://note/<path>`, the topics listing                  |
| `events.py`    | change notifications, for both protocol eras                                   |
| `prompts.py`   | the six prompts                                                                |
| `paths.py`     | note URIs and paths as clients give them, refused when they leave the folder   |
| here           | completion (note paths, tags, topic kinds) and logging/setLevel                |

Errors, as MCP 2025-11-25 (SEP-1303) and the conformance suite expect: arguments that do not fit a
tool (a missing or unknown argument, a wrong type, a value out of its advertised range, an empty
query, a bad date or cursor, a path that steps out of the folder) and a failure the notes decide (a
note that is not indexed, a reindex already running) are tool errors (`isError: true`) with one line
the model reads and can act on; an unknown tool is JSON-RPC error -32602; a client over its
tool-call rate gets -32029 with `retry_after_s`; an unknown resource or prompt, or a missing prompt
argument, is -32602. `groove.serve.errors` maps a `GrooveError` to these in one table. Never a
crash, a traceback or pydantic's report with its URL.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    Completion,
    CompletionArgument,
    CompletionContext,
    EmptyResult,
    PromptReference,
    ResourceTemplateReference,
    SetLevelRequestParams,
)

from groove import __version__
from groove.config import HTTPSettings
from groove.daemon import Daemon
from groove.folders import Folders
from groove.logs import get_logger
from groove.search.answers import NOTE_URI_PREFIX, note_uri
from groove.search.request import MAX_QUERY_BYTES
from groove.serve.mcp import sdk
from groove.serve.mcp.events import NoteEvents
from groove.serve.mcp.guard import RATE_LIMITED, TokenBucket, ToolCallGuard
from groove.serve.mcp.paths import TOPIC_KINDS, TOPICS_URI_PREFIX, check_note_path, note_path
from groove.serve.mcp.prompts import PROMPTS, register_prompts
from groove.serve.mcp.resources import register_resources
from groove.serve.mcp.sdk import events_of
from groove.serve.mcp.tools import tool_result, tools_for

log = get_logger(__name__)

COMPLETION_VALUES = 100  # the most values one completion/complete answer may carry (the specification's cap)

INSTRUCTIONS = """\
groove searches the user's Markdown notes (a local folder, often mixed Japanese and English).

- `search` first: it returns the few passages that best answer a question, each with
  path, heading context, tags, score and line range, so you can cite them. Query syntax:
  plain words or a question; "quoted phrases" are matched verbatim; -word excludes notes
  containing it. Narrow with path_globs (gitignore-style, !glob excludes), tags_any /
  tags_all, date_from / date_to (frontmatter date) and fields (frontmatter key = value).
- `off_topic: true` in a search response means the notes most likely do not answer the
  question: say the notes do not cover it; do not quote the returned passages as if they
  answered (they are only the nearest ones). `off_topic: false` is no promise: a question
  close to a note (its subject, a detail it never wrote down) is often not flagged, so use
  a passage only when it states the answer. `low_confidence: true` means something else:
  several notes score alike, so compare the top few before choosing one.
  `filter_matched_nothing` means the filters left no note, so nothing was searched: fix or
  drop the filter part it names (it suggests existing values); it says nothing of the notes.
- `pending_chunks` in a search response counts passages not yet embedded: when it is
  above 0, a note may be findable by its words but not yet by meaning, so an empty or
  weak answer may mean "not indexed yet" rather than "not in the notes".
- `get_document` returns a note by the path a result gave; for a long note pass heading
  (a hit's context) or lines (from a hit's start_line) to read only that part, and
  max_chars to cap it. When the context is tight, give `search` a max_chars budget too.
  `related` finds notes near one note; `list_documents` pages through the notes (filter by folder or tags).
- `index_status` says what is indexed and what is pending; `reindex` forces a full
  rescan of the folder (rarely needed: the folder is watched).
- Every note is also a resource `groove://note/<path>` (each hit's `uri`); subscribe to
  one to hear when it changes. `groove://topics/all` lists the folders and tags.
"""


def instructions_for(folders: Folders | None) -> str:
    """The server instructions; with several notes folders, their names (every note's path starts with one);
    None: a search node of a shared store, whose folders are whichever the store holds."""
    if folders is None:
        return (
            INSTRUCTIONS + "- The notes come from a store several machines index their folders into. Every path "
            "starts with its folder's name (index_status lists them); to search one folder, pass path_globs like "
            '["NAME/**"].\n'
        )
    if not folders.named:
        return INSTRUCTIONS
    names = ", ".join(f"{f.name}/" for f in folders)
    return (
        INSTRUCTIONS + f"- The notes come from {len(folders)} folders: {names}. Every path starts with its "
        'folder\'s name; to search one folder, pass path_globs like ["NAME/**"].\n'
    )


def build_server(daemon: Daemon, limits: HTTPSettings | None = None) -> MCPServer:
    """The MCP server for one daemon, composed: the tools (`tools.py`) behind the call guard (`guard.py`),
    the note resources (`resources.py`) and their change notifications (`events.py`), the prompts
    (`prompts.py`), completion and logging/setLevel. Every part calls the service API (groove.api.service)."""
    bus = InMemorySubscriptionBus()
    service = daemon.service
    guard = ToolCallGuard(limits or HTTPSettings())
    server: MCPServer = MCPServer(
        "groove",
        title="groove: search your notes",
        instructions=instructions_for(None if daemon.search_only else daemon.service.folders),
        version=__version__,
        subscriptions=bus,
        log_level="WARNING",
        warn_on_duplicate_tools=False,
        tools=tools_for(service, guard),
    )
    events = NoteEvents(bus)
    sdk.attach_events(server, events)
    daemon.listeners.append(events.on_change)
    register_resources(server, service, events)
    server.middleware.append(events.track)
    server.middleware.append(guard)
    prompts = register_prompts(server, service)

    # -- completion (note paths and tags) -------------------------------------------------------
    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        kind = None
        if (
            isinstance(ref, ResourceTemplateReference)
            and ref.uri.startswith(NOTE_URI_PREFIX)
            and argument.name == "path"
        ):
            kind = "path"
        elif (
            isinstance(ref, ResourceTemplateReference)
            and ref.uri.startswith(TOPICS_URI_PREFIX)
            and argument.name == "kind"
        ):
            values = [k for k in TOPIC_KINDS if k.startswith(argument.value or "")]
            return Completion(values=values, total=len(values), has_more=False)
        elif isinstance(ref, PromptReference) and ref.name in prompts:
            kind = {"path": "path", "tag": "tag"}.get(argument.name)
        if kind is None:
            return Completion(values=[], total=0, has_more=False)
        prefix = argument.value or ""
        if len(prefix.encode()) > MAX_QUERY_BYTES:
            raise MCPError(code=INVALID_PARAMS, message=f"the value to complete is over {MAX_QUERY_BYTES} bytes")
        values, total = await service.complete(kind, prefix, COMPLETION_VALUES)
        return Completion(values=values, total=total, has_more=total > len(values))

    # -- logging/setLevel (handshake era) -------------------------------------------------------
    async def set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        # groove sends no log messages to clients (its log is on stderr); the level is accepted and noted.
        log.debug("client_log_level", level=params.level)
        return EmptyResult()

    sdk.add_request_handler(server, "logging/setLevel", SetLevelRequestParams, set_level)

    sdk.advertise_resources_list_changed(server)
    return server


__all__ = [
    "INSTRUCTIONS",
    "PROMPTS",
    "RATE_LIMITED",
    "NoteEvents",
    "TokenBucket",
    "ToolCallGuard",
    "build_server",
    "check_note_path",
    "events_of",
    "note_path",
    "note_uri",
    "tool_result",
]
