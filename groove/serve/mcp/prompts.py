"""The prompts: two that hand the assistant a question or a note, four workflows that only instruct
(`topic_summary`, `deep_dive`, `changed_since`, `where_silent`). An unknown prompt or a missing
argument is -32602 with one line. GrooveSeek's names are taken too (`whats_new` with `since` for
`changed_since`, `find_gaps` for `where_silent`), not listed."""

from __future__ import annotations

import datetime as dt
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    EmbeddedResource,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    TextContent,
    TextResourceContents,
)

from groove.api.service import Service
from groove.errors import NotFoundError
from groove.search.answers import note_uri
from groove.serve.mcp import sdk
from groove.serve.mcp.paths import NOTE_MIME_TYPE, check_note_path

PROMPTS = [
    Prompt(
        name="search_notes",
        title="Search my notes",
        description="Ask the assistant to answer a question from the notes, citing the paths it used.",
        arguments=[
            PromptArgument(name="question", description="What to look for in the notes.", required=True),
            PromptArgument(
                name="tag", description="Only notes with this tag (completion lists the tags).", required=False
            ),
        ],
    ),
    Prompt(
        name="summarize_note",
        title="Summarize a note",
        description="Give the assistant one whole note (as an embedded resource) and ask for a summary.",
        arguments=[
            PromptArgument(name="path", description="The note's path (completion lists the paths).", required=True)
        ],
    ),
    Prompt(
        name="topic_summary",
        title="Summarize a topic across my notes",
        description="Search broadly, read the notes that carry weight whole, then summarize with citations.",
        arguments=[
            PromptArgument(name="topic", description="The topic, in any language the notes use.", required=True)
        ],
    ),
    Prompt(
        name="deep_dive",
        title="Deep dive from a question",
        description="Search, then walk `related` from the best note before answering, citing every note used.",
        arguments=[
            PromptArgument(name="question", description="The question to answer from the notes.", required=True)
        ],
    ),
    Prompt(
        name="changed_since",
        title="What changed since a date",
        description=(
            "The notes dated on or after a day (frontmatter date), grouped by folder, with what is new in each."
        ),
        arguments=[
            PromptArgument(name="date", description="An ISO date, YYYY-MM-DD (default: 30 days ago).", required=False),
            PromptArgument(name="topic", description="Optionally, only what concerns this topic.", required=False),
        ],
    ),
    Prompt(
        name="where_silent",
        title="Where are my notes silent?",
        description=(
            "Split a topic into questions and report which ones the notes do not answer (no hit, or off_topic)."
        ),
        arguments=[
            PromptArgument(
                name="topic",
                description="The topic to check the notes' coverage of (default: what the notes cover).",
                required=False,
            )
        ],
    ),
]

#: GrooveSeek's prompt names (issue 38): prompts/get takes them, with their arguments' old names, as groove's own.
ALIASES: dict[str, tuple[str, dict[str, str]]] = {
    "whats_new": ("changed_since", {"since": "date"}),
    "find_gaps": ("where_silent", {}),
}
SINCE_DAYS = 30  # changed_since without a date: this many days back (GrooveSeek's whats_new)


def default_since(today: dt.date | None = None) -> str:
    """The day `changed_since` starts from when no date is given: 30 days before today (UTC)."""
    return ((today or dt.datetime.now(dt.UTC).date()) - dt.timedelta(days=SINCE_DAYS)).isoformat()


def check_day(value: str) -> str:
    """A prompt's date as YYYY-MM-DD; -32602 in one line otherwise (a bad day would filter out every note)."""
    try:
        return dt.date.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise MCPError(
            code=INVALID_PARAMS, message=f"date must be an ISO date like 2026-11-01 (YYYY-MM-DD), got {value!r}"
        ) from None


CITE = (
    "Cite every passage you use by its path and line range (path:start_line-end_line). When a search "
    "answers with off_topic: true, the notes most likely do not cover the question: say so instead of "
    "answering from the passages it returned; off_topic: false is no promise, so use a passage only "
    "when it states the answer; with low_confidence: true, several notes score alike, so "
    "compare them before relying on one; when pending_chunks > 0, say the index is still embedding."
)


def workflow_prompt(name: str, args: dict[str, str], *, changes: bool = False) -> str | None:
    """The text of a prompt that only instructs (no note content inside), or None for another prompt.
    `changes`: the server has the `changes` tool (what changed since a time, from the index's history)."""
    if name == "topic_summary":
        return (
            f"Summarize what my notes say about: {args['topic']}\n\n"
            "1. Call the groove `search` tool with the topic (limit 20); search again with one or two "
            "rephrasings, in Japanese and in English when the notes mix both.\n"
            "2. The notes that carry weight are the ones that come back in several searches or at the top: "
            "read up to five of them whole with `get_document`.\n"
            "3. Summarize the topic in a few paragraphs, grouping what the notes agree on and where they "
            f"differ.\n\n{CITE}"
        )
    if name == "deep_dive":
        return (
            f"Answer from my notes: {args['question']}\n\n"
            "1. Call `search` with the question; take the best note.\n"
            "2. Call `related` on that note (depth 2) and read the related notes that bear on the question "
            "(`get_document`).\n"
            "3. Only then answer, drawing the notes together; name each note you used and how it relates.\n\n"
            f"{CITE}"
        )
    if name == "changed_since":
        topic = (args.get("topic") or "").strip()
        query = topic or "notes"
        day = (args.get("date") or "").strip() or default_since()
        first = (
            f"1. Call `changes` with since {day!r}: the notes added, edited (with the sections), renamed or "
            "deleted since then, from the index's own history.\n"
            if changes
            else ""
        )
        n = 2 if changes else 1
        return (
            f"What changed in my notes since {day}?\n\n{first}"
            f"{n}. Call `search` with query {query!r}, date_from {day!r} and limit 50 "
            "(date_from filters on each note's frontmatter date); repeat with other words if the notes "
            "cover several subjects.\n"
            f"{n + 1}. Group the notes by folder and say in one line each what is new.\n"
            + ("" if changes else f"{n + 2}. Notes without a frontmatter date are not found this way: say so.\n")
            + "\n"
            + CITE
        )
    if name == "where_silent":
        topic = (args.get("topic") or "").strip()
        if not topic:
            return (
                "Find where my notes are silent.\n\n"
                "1. Call `topics` for the folders and tags the notes cover; take the main ones.\n"
                "2. For each, write three to five concrete questions a reader of those notes would ask, and call "
                "`search` for each.\n"
                "3. Search the main topics again with include_low_quality: true: passages that only come back "
                "then are stubs (a heading, a link, a template) where a note was begun and not written.\n"
                "4. Report, as a list, which questions the notes answer (with the path), which they do not "
                "(no result, off_topic: true, or passages that do not answer it when you read them), and the "
                "stubs. Do not fill the gaps from your own knowledge; name them.\n\n" + CITE
            )
        return (
            f"Find where my notes are silent on: {topic}\n\n"
            "1. Split the topic into five to ten concrete questions a reader would ask.\n"
            "2. Call `search` for each question.\n"
            "3. Report, as a list, which questions the notes answer (with the path) and which they do not: "
            "no result, off_topic: true, or passages that do not answer it when you read them "
            "(low_confidence: true alone only means several notes score alike). Do not fill the "
            "gaps from your own knowledge; name them.\n\n" + CITE
        )
    return None


def register_prompts(server: MCPServer, service: Service) -> dict[str, Prompt]:
    """prompts/list and prompts/get on `server`; the prompts by name (completion offers their arguments)."""
    prompts = {p.name: p for p in PROMPTS}

    async def list_prompts(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> ListPromptsResult:
        return ListPromptsResult(prompts=PROMPTS)

    changes = callable(getattr(service, "changes", None))

    async def get_prompt(ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams) -> GetPromptResult:
        name, renamed = ALIASES.get(params.name, (params.name, {}))
        prompt = prompts.get(name)
        if prompt is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown prompt {params.name!r}; the prompts are: {', '.join(prompts)} (prompts/list)",
                data={"prompt": params.name},
            )
        given = {renamed.get(k, k): v for k, v in (params.arguments or {}).items()}
        takes = [a.name for a in prompt.arguments or []]
        for arg in prompt.arguments or []:
            if arg.required and not str(given.get(arg.name) or "").strip():
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"prompt {prompt.name!r} needs the argument {arg.name!r} ({arg.description})",
                    data={"prompt": prompt.name, "argument": arg.name},
                )
        extra = sorted(set(given) - set(takes))
        if extra:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown argument {extra[0]!r} for prompt {prompt.name!r}; it takes: {', '.join(takes)}",
            )
        if str(given.get("date") or "").strip():
            given["date"] = check_day(str(given["date"]))
        text = workflow_prompt(prompt.name, {k: str(v) for k, v in given.items()}, changes=changes)
        if text is not None:
            return GetPromptResult(
                description=prompt.description,
                messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
            )
        if prompt.name == "search_notes":
            tag = str(given.get("tag") or "").strip()
            where = f" Only use notes tagged #{tag} (tags_any)." if tag else ""
            text = (
                f"Answer from my notes: {given['question']}\n\nUse the groove search tool first.{where} "
                "Cite the path and line range of every passage you use; say so if the notes do not answer it."
            )
            return GetPromptResult(
                description=prompt.description,
                messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
            )
        path = check_note_path(given["path"], lenient=True)
        try:
            doc = await service.get_document(path)
        except NotFoundError as exc:
            check_note_path(path)
            raise MCPError(code=INVALID_PARAMS, message=str(exc), data={"path": path}) from exc
        return GetPromptResult(
            description=prompt.description,
            messages=[
                PromptMessage(
                    role="user", content=TextContent(type="text", text=f"Summarize my note {path} in a few sentences.")
                ),
                PromptMessage(
                    role="user",
                    content=EmbeddedResource(
                        type="resource",
                        resource=TextResourceContents(uri=note_uri(path), text=doc.content, mime_type=NOTE_MIME_TYPE),
                    ),
                ),
            ],
        )

    sdk.add_request_handler(server, "prompts/list", PaginatedRequestParams, list_prompts)
    sdk.add_request_handler(server, "prompts/get", GetPromptRequestParams, get_prompt)
    return prompts


__all__ = ["CITE", "PROMPTS", "register_prompts", "workflow_prompt"]
