"""The service API: every operation groove answers, with a typed request and a typed answer.

Every front end calls one `Service`: the MCP tools, resources and prompts (`serve/mcp/server.py`), the
web view (`serve/http/ui.py`), the local socket the command line asks (`serve/process/local.py`), and the
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

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from groove.api.answers import (
    ChangesAnswer,
    DocumentAnswer,
    DocumentPage,
    IndexStatus,
    LinksAnswer,
    RelatedAnswer,
    StatusAnswer,
    TopicsAnswer,
)
from groove.corpus.best_practice import BestPracticeAnswer, BestPractices
from groove.errors import UsageError
from groove.evaluate.metrics import KS
from groove.evaluate.report import EvalReport, TuneReport
from groove.evaluate.runner import evaluate_golden
from groove.evaluate.tune import tune_golden
from groove.folders import Folders
from groove.index import MAX_LINKS, MAX_PAGE, Index
from groove.search.answers import SearchAnswer
from groove.search.compiler import QueryError
from groove.search.filters import MAX_PATH_GLOBS
from groove.search.related import MAX_CHUNKS_PER_NOTE, MAX_DEPTH, MAX_FAN_OUT, MAX_NODES
from groove.search.request import (
    MAX_FILTER_ITEMS,
    MAX_LIMIT,
    DocumentRequest,
    FilterArgs,
    LineRange,
    SearchRequest,
    describe,
)
from groove.sync.embedding import Progress
from groove.sync.history import parse_since
from groove.sync.report import IndexReport, iso_times

__all__ = [
    "ChangesRequest",
    "DocumentRequest",
    "EvalRequest",
    "LineRange",
    "LinksRequest",
    "ListRequest",
    "RelatedRequest",
    "SearchRequest",
    "Service",
    "Supervisor",
    "TopicsRequest",
    "TuneRequest",
]


MAX_CHANGES = 500  # notes one `changes` answer lists


class _Request(BaseModel):
    """A request's fields are checked as it is made: a bad one is a QueryError of one line (as a search's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise QueryError(describe(exc, (type(self),))) from None


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
    seed_strategy: Literal["centroid", "all_chunks", "all-chunks"] = "centroid"
    max_seed_chunks: int | None = Field(None, ge=1, le=MAX_CHUNKS_PER_NOTE)


class ChangesRequest(_Request):
    """What changed in the notes since a time (`changes`; sync/history.py)."""

    since: str = Field("7d", max_length=64, description="ISO date/time or span back from now (7d, 24h)")
    limit: int = Field(50, ge=1, le=MAX_CHANGES)


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


class EvalRequest(_Request):
    """A golden set scored through the search pipeline (`groove eval`; evaluate/runner.py)."""

    source: Path = Field(description="the golden set: a YAML file or a BEIR folder")
    retriever: str = "hybrid"
    split: str | None = None
    limit: int = 10
    max_queries: int | None = None
    request_options: dict[str, Any] = Field(default_factory=dict, description="search options for every query")
    ks: tuple[int, ...] = KS
    record: bool = Field(True, description="append the run to the index's eval history")


class TuneRequest(_Request):
    """Fusion settings swept and cross-validated on a golden set (`groove tune`; evaluate/tune.py)."""

    source: Path
    split: str | None = None
    limit: int = 10
    max_queries: int | None = None
    metric: str = "ndcg@10"


class Supervisor(Protocol):
    """What a running service adds to the index (`serve.daemon.Daemon` is one)."""

    async def wait_ready(self) -> None:
        """Return once the index is open for requests."""

    def startup_scan_done(self) -> bool:
        """Whether the startup reconcile has run (until then a note may be missing without being pending)."""

    async def service_status(self) -> dict[str, Any]:
        """The service's own status fields (`StatusAnswer` beyond `IndexStatus`)."""

    async def full_reconcile(self, *, force: bool = False) -> IndexReport:
        """A full reconcile through the service's writer, now; one at a time (`force`: every file parsed again)."""


class Service:
    """The operations of groove over one open `Index`, for every front end."""

    def __init__(self, index: Index, supervisor: Supervisor | None = None):
        self.index = index
        self.supervisor = supervisor

    @property
    def folders(self) -> Folders:
        """The notes folders (several, or a shared store: every note's path starts with its folder's name)."""
        return self.index.folders

    @property
    def indexes_notes(self) -> bool:
        """This process indexes notes folders (not a search node of a shared store, which only answers)."""
        return not self.index.search_only

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
        return await self.index.related(
            req.path,
            limit=req.limit,
            depth=req.depth,
            fan_out=req.fan_out,
            max_nodes=req.max_nodes,
            by=req.by,
            min_similarity=req.min_similarity,
            exclude_paths=tuple(req.exclude_paths or ()),
            filters=req.filters.compile() if req.filters is not None else None,
            seed_strategy=req.seed_strategy,
            max_seed_chunks=req.max_seed_chunks,
        )

    async def changes(self, req: ChangesRequest) -> ChangesAnswer:
        """The notes added, edited (and which sections), renamed or deleted since `req.since`, newest first."""
        since = parse_since(req.since, time.time())  # before the wait: a bad time is said at once
        await self._ready()
        return await self.index.changes(since, limit=req.limit)

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

    async def topics(self, req: TopicsRequest | None = None) -> TopicsAnswer:
        req = req or TopicsRequest()
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
            # Read from the notes folders' files: a search node has none here (its notes are in the store).
            self._best_practices = (
                None if self.index.search_only else BestPractices.from_settings(self.index.settings, self.index.folders)
            )
        return self._best_practices

    async def best_practice(self, target: str, section: str | None = None) -> BestPracticeAnswer:
        """The document for `target`, or its `##` section `section`; read from the files now (not the index)."""
        practices = self.best_practices()
        if practices is None:
            raise UsageError("no best-practice documents are configured: set [best_practice] path_templates")
        return await anyio.to_thread.run_sync(practices.answer, target, section)

    async def reindex(self, progress: Progress | None = None, *, force: bool = False) -> IndexReport:
        """Reconcile the whole folder now: through the running service's writer, or (no service: `groove index`)
        in this process over an index open for writing, every pending chunk embedded before it returns."""
        if self.supervisor is not None:
            await self._ready()
            return await self.supervisor.full_reconcile(force=force)
        if not self.index.writable:
            raise UsageError("reindex needs the running service or the index open for writing; run `groove index`")
        return await self.index.index_all(progress=progress, force=force)

    async def evaluate(self, req: EvalRequest) -> EvalReport:
        """Judged queries through the search pipeline, scored, compared with the run history (`groove eval`)."""
        await self._ready()
        return await evaluate_golden(
            self.index,
            req.source,
            retriever=req.retriever,
            split=req.split,
            limit=req.limit,
            max_queries=req.max_queries,
            request_options=dict(req.request_options),
            ks=req.ks,
            record=req.record,
        )

    async def tune(self, req: TuneRequest, progress: Callable[[str, int, int], None] | None = None) -> TuneReport:
        """Fusion settings cross-validated on judged queries, to paste; writes nothing (`groove tune`)."""
        await self._ready()
        return await tune_golden(
            self.index,
            req.source,
            split=req.split,
            limit=req.limit,
            max_queries=req.max_queries,
            metric=req.metric,
            progress=progress,
        )
