"""The service API: every operation groove answers, with a typed request and a typed answer.

Every front end calls one `Service`: the MCP tools, resources and prompts (`serve/mcp_app.py`), the
web view (`serve/ui.py`), the local socket the command line asks (`serve/local.py`), and the
command line itself when no service runs (`cli.py`, over a one-shot `Index`). Each front end only
turns its own input into a request and the answer into its own output; what an operation does,
the readiness wait, and the state a running service adds to an answer are here, once.

    service = Service(index)                 # a one-shot command: the index as it is
    service = Service(index, supervisor)     # a running service: `Daemon` supervises the index

The `Supervisor` is what a running service adds (the daemon implements it): a wait until the index
is open, whether the startup scan has run, the service's own status fields (its tasks, the
watcher), and the full reconcile its single writer runs. Without one, `status` answers the index's
part (`IndexStatus`) and `reindex` is refused (a one-shot `groove index` reconciles by itself).

The answers are the models of `groove.search.answers`; their errors are `GrooveError`s, each with a
`kind` that `groove.serve.errors` maps to each front end's error (docs/decisions/0016).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field

from groove.app import MAX_LINKS, MAX_PAGE, Index
from groove.corpus.best_practice import BestPracticeAnswer, BestPractices
from groove.errors import UsageError
from groove.search.answers import (DocumentAnswer, DocumentPage, IndexStatus, LinksAnswer, RelatedAnswer,
                                   SearchAnswer, StatusAnswer, TopicsAnswer)
from groove.search.filters import MAX_PATH_GLOBS
from groove.search.related import MAX_DEPTH, MAX_FAN_OUT, MAX_NODES
from groove.search.request import MAX_FILTER_ITEMS, MAX_LIMIT, DocumentRequest, FilterArgs, LineRange, SearchRequest
from groove.sync.report import IndexReport, iso_times

__all__ = ["DocumentRequest", "LineRange", "LinksRequest", "ListRequest", "RelatedRequest", "SearchRequest", "Service", "Supervisor",
           "TopicsRequest"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RelatedRequest(_Request):
    """The notes nearest in meaning to one note, or linked to it (`related`; search/related.py)."""

    path: str = Field(description="the note, relative to the notes folder")
    limit: int = Field(10, ge=1, le=MAX_LIMIT)
    depth: int = Field(1, ge=1, le=MAX_DEPTH)
    fan_out: int = Field(10, ge=1, le=MAX_FAN_OUT)
    max_nodes: int = Field(100, ge=1, le=MAX_NODES)
    by: Literal["meaning", "links", "both"] = "meaning"
    min_similarity: float | None = Field(None, ge=-1.0, le=1.0)
    exclude_paths: list[str] | None = Field(None, max_length=MAX_PATH_GLOBS)
    filters: FilterArgs | None = None


class LinksRequest(_Request):
    """A note's outgoing links, backlinks and unresolved links (`links`)."""

    path: str = Field(description="the note, relative to the notes folder")
    limit: int = Field(100, ge=1, le=MAX_LINKS)


class ListRequest(_Request):
    """A page of the notes in path order (`list_documents`, `resources/list`)."""

    cursor: str | None = None
    limit: int = 50
    folder: str | None = None
    tags: list[str] | None = Field(None, max_length=MAX_FILTER_ITEMS)


class TopicsRequest(_Request):
    """The folders and tags with their note counts (`topics`)."""

    depth: int = Field(2, ge=1, le=6)
    limit: int = Field(100, ge=1, le=MAX_PAGE)


class Supervisor(Protocol):
    """What a running service adds to the index (`serve.daemon.Daemon` is one)."""

    async def wait_ready(self) -> None:
        """Return once the index is open for requests."""

    def startup_scan_done(self) -> bool:
        """Whether the startup reconcile has run (until then a note may be missing without being pending)."""

    async def service_status(self) -> dict[str, Any]:
        """The service's own status fields (`StatusAnswer` beyond `IndexStatus`)."""

    async def full_reconcile(self) -> IndexReport:
        """A full reconcile through the service's writer, now; one at a time."""


class Service:
    """The operations of groove over one open `Index`, for every front end."""

    def __init__(self, index: Index, supervisor: Supervisor | None = None):
        self.index = index
        self.supervisor = supervisor
        self.folders = index.folders  # the notes folders (several: every note's path starts with its folder's name)

    async def _ready(self) -> None:
        if self.supervisor is not None:
            await self.supervisor.wait_ready()

    async def search(self, req: SearchRequest) -> SearchAnswer:
        await self._ready()
        answer = await self.index.search(req)
        if self.supervisor is not None:
            answer = answer.model_copy(update={"startup_reconcile_done": self.supervisor.startup_scan_done()})
        return answer

    async def related(self, req: RelatedRequest) -> RelatedAnswer:
        await self._ready()
        return await self.index.related(req.path, limit=req.limit, depth=req.depth, fan_out=req.fan_out,
                                        max_nodes=req.max_nodes, by=req.by, min_similarity=req.min_similarity,
                                        exclude_paths=tuple(req.exclude_paths or ()),
                                        filters=req.filters.compile() if req.filters is not None else None)

    async def links(self, req: LinksRequest) -> LinksAnswer:
        """A note's links to other notes, the links of other notes to it, and its links that name no note."""
        await self._ready()
        return await self.index.links(req.path, limit=req.limit)

    async def get_document(self, req: DocumentRequest | str) -> DocumentAnswer:
        """One note (a path: the whole of it), or the part of it a `DocumentRequest` asks for: a section by its
        heading, a range of lines, at most max_chars characters; its `part` then says what was left out."""
        await self._ready()
        if isinstance(req, str):
            return await self.index.get_document(req)
        return await self.index.get_document(req.path, heading=req.heading, lines=req.lines, max_chars=req.max_chars)

    async def list_documents(self, req: ListRequest) -> DocumentPage:
        await self._ready()
        return await self.index.list_documents(cursor=req.cursor, limit=req.limit, folder=req.folder, tags=req.tags)

    async def topics(self, req: TopicsRequest = TopicsRequest()) -> TopicsAnswer:
        await self._ready()
        return await self.index.topics(depth=req.depth, limit=req.limit)

    async def complete(self, kind: str, prefix: str, limit: int = 100) -> tuple[list[str], int]:
        """Note paths (`kind="path"`) or tags (`kind="tag"`) starting with `prefix`, and how many match in all."""
        await self._ready()
        return await self.index.complete(kind, prefix, limit)

    async def status(self) -> IndexStatus:
        """The index's status; with a running service, its own fields too (a `StatusAnswer`)."""
        await self._ready()
        status = await self.index.status()
        if self.supervisor is None:
            return status
        return StatusAnswer(**{**status.model_dump(), **iso_times(await self.supervisor.service_status())})

    def best_practices(self) -> BestPractices | None:
        """The best-practice documents (`[best_practice] path_templates`), or None when none are configured:
        then no front end offers them (the MCP tool is not listed)."""
        if not hasattr(self, "_best_practices"):
            self._best_practices = BestPractices.from_settings(self.index.settings, self.index.folders)
        return self._best_practices

    async def best_practice(self, target: str, section: str | None = None) -> BestPracticeAnswer:
        """The document for `target`, or its `##` section `section`; read from the files now (not the index)."""
        practices = self.best_practices()
        if practices is None:
            raise UsageError("no best-practice documents are configured: set [best_practice] path_templates")
        return await anyio.to_thread.run_sync(practices.answer, target, section)

    async def reindex(self) -> IndexReport:
        """Reconcile the whole folder now, through the running service's writer."""
        if self.supervisor is None:
            raise UsageError("reindex needs the running service; without one, run `groove index`")
        await self._ready()
        return await self.supervisor.full_reconcile()
