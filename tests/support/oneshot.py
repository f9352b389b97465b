"""One command over an index opened for it, through the service API: what the command line does in process.

Each helper opens an `Index` (read-only, or as the writer for `index_once`), calls the one `Service`
method the command calls, and closes it: the tests' and the benches' short way to say `groove index`,
`groove search`, `groove eval` ... with an embedder of their choice (`embedder=`: the fake one, or a
model loaded once for a module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from groove.api.answers import DocumentAnswer, IndexStatus, LinksAnswer, RelatedAnswer
from groove.api.service import DocumentRequest, EvalRequest, LinksRequest, RelatedRequest, Service, TuneRequest
from groove.config import Settings
from groove.embed.embedder import Embedder
from groove.evaluate.metrics import KS
from groove.evaluate.report import EvalReport, TuneReport
from groove.index import Index
from groove.search.answers import SearchAnswer
from groove.search.request import SearchRequest
from groove.sync.embedding import Progress
from groove.sync.report import IndexReport


async def _with(settings: Settings, call: Callable[[Service], Awaitable[Any]], **open_options: Any) -> Any:
    async with Index.open(settings, **open_options) as index:
        return await call(Service(index))


async def index_once(settings: Settings, *, rebuild: bool = False, progress: Progress | None = None,
                     embedder: Embedder | None = None) -> IndexReport:
    """`groove index`: one full reconcile, then everything pending embedded."""
    return await _with(settings, lambda s: s.reindex(progress=progress), rebuild=rebuild, embedder=embedder)


async def read_status(settings: Settings, *, embedder: Embedder | None = None) -> IndexStatus:
    """`groove status` without a running service."""
    return await _with(settings, lambda s: s.status(), readonly=True, embedder=embedder, any_model=True)


async def search_once(settings: Settings, req: SearchRequest, *, reranker_model: str | None = None,
                      embedder: Embedder | None = None) -> SearchAnswer:
    """`groove search`: one query, read-only (a reranker named as on the command line reranks unconditionally)."""
    if reranker_model and req.rerank is None:
        req = req.model_copy(update={"rerank": True})
    return await _with(settings, lambda s: s.search(req), readonly=True, embedder=embedder,
                       reranker_model=reranker_model)


async def links_once(settings: Settings, path: str, *, limit: int = 100,
                     embedder: Embedder | None = None) -> LinksAnswer:
    """`groove links PATH`: a note's links and backlinks (no vectors read: any model's index)."""
    req = LinksRequest(path=settings.folders().relative(path), limit=limit)
    return await _with(settings, lambda s: s.links(req), readonly=True, embedder=embedder, any_model=True)


async def related_once(settings: Settings, path: str, *, embedder: Embedder | None = None, **kw: Any) -> RelatedAnswer:
    """`groove related PATH`: the notes nearest in meaning (or by links)."""
    req = RelatedRequest(path=settings.folders().relative(path), **kw)
    return await _with(settings, lambda s: s.related(req), readonly=True, embedder=embedder)


async def get_once(settings: Settings, req: DocumentRequest, *, embedder: Embedder | None = None) -> DocumentAnswer:
    """`groove get PATH`: one note, or its part."""
    req = req.model_copy(update={"path": settings.folders().relative(req.path)})
    return await _with(settings, lambda s: s.get_document(req), readonly=True, embedder=embedder, any_model=True)


async def eval_once(settings: Settings, source: Path, *, retriever: str = "hybrid", split: str | None = None,
                    limit: int = 10, max_queries: int | None = None, request_options: dict[str, Any] | None = None,
                    reranker_model: str | None = None, embedder: Embedder | None = None, ks: Sequence[int] = KS,
                    record: bool = True) -> EvalReport:
    """`groove eval GOLDEN`."""
    req = EvalRequest(source=source, retriever=retriever, split=split, limit=limit, max_queries=max_queries,
                      request_options=request_options or {}, ks=tuple(ks), record=record)
    return await _with(settings, lambda s: s.evaluate(req), readonly=True, embedder=embedder,
                       reranker_model=reranker_model)


async def tune_once(settings: Settings, source: Path, *, split: str | None = None, limit: int = 10,
                    max_queries: int | None = None, metric: str = "ndcg@10", embedder: Embedder | None = None,
                    progress: Callable[[str, int, int], None] | None = None) -> TuneReport:
    """`groove tune GOLDEN`: writes nothing."""
    req = TuneRequest(source=source, split=split, limit=limit, max_queries=max_queries, metric=metric)
    return await _with(settings, lambda s: s.tune(req, progress), readonly=True, embedder=embedder)
