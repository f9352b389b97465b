"""Notes as resources: `groove://note/<path>` (each path segment percent-encoded, so Japanese names
round-trip), listed with pagination, and the topics listing `groove://topics/{kind}` (JSON).

The handlers are registered on the low-level server directly (`resources/list`, `resources/read`,
`resources/templates/list`, `resources/subscribe`, `resources/unsubscribe`), replacing MCPServer's
static-resource manager, because the set of notes is the index's and changes while the server runs."""

from __future__ import annotations

import json
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    SubscribeRequestParams,
    TextResourceContents,
    UnsubscribeRequestParams,
)

from groove.api.answers import DocumentRef
from groove.api.service import ListRequest, Service
from groove.errors import GrooveError, NotFoundError
from groove.search.answers import NOTE_URI_PREFIX
from groove.serve.errors import request_error
from groove.serve.mcp import sdk
from groove.serve.mcp.events import NoteEvents
from groove.serve.mcp.paths import JSON_MIME_TYPE, NOTE_MIME_TYPE, TOPIC_KINDS, TOPICS_URI_PREFIX, note_mime, parse_uri

RESOURCE_PAGE_SIZE = 100
BACKLINKS_META = "groove/backlinks"  # a note's resource: how many other notes link to it (_meta)


def register_resources(server: MCPServer, service: Service, events: NoteEvents) -> None:
    """The resource handlers on `server` (subscriptions go to `events`)."""

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
    ) -> ListResourcesResult:
        try:
            page = await service.list_documents(ListRequest(cursor=params.cursor, limit=RESOURCE_PAGE_SIZE))
        except GrooveError as exc:
            raise request_error(exc) from exc
        resources = [
            Resource(
                uri=doc.uri,
                name=doc.path,
                title=doc.title or None,
                description=_describe(doc),
                mime_type=note_mime(doc.path),
            )
            for doc in page.documents
        ]
        return ListResourcesResult(resources=resources, next_cursor=page.next_cursor)

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(
            resource_templates=[
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
                    description=(
                        "The topics tool's listing as JSON, with its defaults (two folder levels, 100 of each): "
                        f"kind is {', '.join(TOPIC_KINDS)} (all: both)."
                    ),
                    mime_type=JSON_MIME_TYPE,
                ),
            ]
        )

    async def read_topics(uri: str) -> ReadResourceResult:
        kind = uri[len(TOPICS_URI_PREFIX) :]
        if kind not in TOPIC_KINDS:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Resource not found: {uri!r} names no topics listing; use "
                + ", ".join(TOPICS_URI_PREFIX + k for k in TOPIC_KINDS),
                data={"uri": uri},
            )
        listing = (await service.topics()).model_dump(mode="json")
        if kind != "all":
            listing = {k: v for k, v in listing.items() if k in ("notes", kind, f"{kind}_total")}
        return ReadResourceResult(
            contents=[
                TextResourceContents(uri=uri, text=json.dumps(listing, ensure_ascii=False), mime_type=JSON_MIME_TYPE)
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        if isinstance(params.uri, str) and params.uri.startswith(TOPICS_URI_PREFIX):
            return await read_topics(params.uri)
        path = parse_uri(params.uri, lenient=True)
        try:
            doc = await service.get_document(path)
        except NotFoundError as exc:
            parse_uri(params.uri)  # not a note: a decoded backslash is refused as such
            # SEP-2164: an unknown resource is invalid params, with the URI in data.
            raise MCPError(code=INVALID_PARAMS, message=f"Resource not found: {exc}", data={"uri": params.uri}) from exc
        # The note's backlink count travels in the contents' _meta (the links tool lists them).
        return ReadResourceResult(
            contents=[
                TextResourceContents(
                    uri=params.uri, text=doc.content, mime_type=note_mime(path), meta={BACKLINKS_META: doc.backlinks}
                )
            ]
        )

    sdk.add_request_handler(server, "resources/list", PaginatedRequestParams, list_resources)
    sdk.add_request_handler(server, "resources/templates/list", PaginatedRequestParams, list_templates)
    sdk.add_request_handler(server, "resources/read", ReadResourceRequestParams, read_resource)
    sdk.add_request_handler(server, "resources/subscribe", SubscribeRequestParams, events.subscribe)
    sdk.add_request_handler(server, "resources/unsubscribe", UnsubscribeRequestParams, events.unsubscribe)


def _describe(doc: DocumentRef) -> str | None:
    parts = []
    if doc.date:
        parts.append(str(doc.date))
    if doc.tags:
        parts.append("tags: " + ", ".join(f"#{t}" for t in doc.tags))
    return "; ".join(parts) or None


__all__ = ["BACKLINKS_META", "RESOURCE_PAGE_SIZE", "register_resources"]
