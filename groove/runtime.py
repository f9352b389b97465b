"""Wiring shared by the CLI and the daemon: settings -> embedder -> index -> indexer."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import aiosqlite

from groove.config import ConfigError, Settings
from groove.corpus.scan import NoteReadError
from groove.embed.embedder import EmbedderError, make_embedder
from groove.logs import get_logger
from groove.store import db, reads, writer
from groove.sync.indexer import Indexer, Progress

log = get_logger(__name__)


def known_errors() -> tuple[type[BaseException], ...]:
    from groove.evaluate.golden import GoldenError
    from groove.search.compiler import QueryError
    from groove.search.related import RelatedError

    return (ConfigError, db.IndexError_, EmbedderError, NoteReadError, QueryError, RelatedError, GoldenError)


async def index_once(settings: Settings, *, rebuild: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """`groove index`: one full reconcile, then embed everything pending."""
    kb = settings.require_kb()
    path = settings.resolved_index_path()
    embedder = make_embedder(settings.embedding)
    if rebuild:
        db.remove_index_files(path)
        log.info("index_rebuild", index=str(path))
    reads.prepare_index(path, model=embedder.identity, dimension=embedder.dimension, kb_path=str(kb))
    started = time.perf_counter()
    conn = await db.connect(path)
    try:
        indexer = Indexer(conn, kb, settings, embedder)
        stats = await indexer.reconcile_all(progress=progress)
        stats.chunks_embedded = await indexer.embed_pending(progress=progress)
        await writer.collect_garbage(conn)
        stats.seconds = time.perf_counter() - started
        summary = stats.to_dict()
        summary["pending_chunks"] = await reads.pending_count(conn)
        summary["embeddings_computed"] = int(await reads.get_meta(conn, "embeddings_computed") or 0)
        summary["kb_path"] = str(kb)
        summary["index_path"] = str(path)
        log.info("index_done", **{k: v for k, v in summary.items() if k not in ("kb_path", "index_path")})
        return summary
    finally:
        await conn.close()


@asynccontextmanager
async def open_index_readonly(settings: Settings) -> AsyncIterator[tuple[aiosqlite.Connection, Any, Path]]:
    """For the read-only commands: check the index exists and matches the model, open it.
    Yields (connection, embedder, index path)."""
    path = settings.resolved_index_path()
    embedder = make_embedder(settings.embedding)
    reads.check_existing_index(path, model=embedder.identity, dimension=embedder.dimension)
    conn = await db.connect(path, readonly=True)
    try:
        yield conn, embedder, path
    finally:
        await conn.close()


async def read_status(settings: Settings) -> dict[str, Any]:
    async with open_index_readonly(settings) as (conn, _, path):
        return await reads.status(conn, index_path=path)


def make_reranker_factory(settings: Settings, cli_model: str | None = None):
    """A lazy reranker: the CLI's model if named, else the configured one, else None."""
    from groove.embed.reranker import CrossEncoderReranker

    name = cli_model or settings.search.reranker
    if not name:
        return None
    reranker = CrossEncoderReranker(name, settings.embedding.device)  # loads its model on first use
    return lambda: reranker


async def search_once(settings: Settings, req, *, reranker_model: str | None = None) -> dict[str, Any]:
    """`groove search`: one query against the index, read-only."""
    import anyio

    from groove.search.pipeline import Searcher

    if reranker_model and req.rerank is None:
        req.rerank = True  # a model named on the command line applies unconditionally
    async with open_index_readonly(settings) as (conn, embedder, _):
        searcher = Searcher(
            settings.search,
            embed_query=lambda text: anyio.to_thread.run_sync(embedder.embed_query, text),
            reranker=make_reranker_factory(settings, reranker_model),
        )
        return await searcher.search(conn, req)


async def eval_once(
    settings: Settings,
    source: Path,
    *,
    retriever: str = "hybrid",
    split: str | None = None,
    limit: int = 10,
    max_queries: int | None = None,
    request_options: dict[str, Any] | None = None,
    reranker_model: str | None = None,
) -> dict[str, Any]:
    """`groove eval`: judged queries through the search pipeline; query vectors computed in batches."""
    import anyio

    from groove.evaluate.golden import load
    from groove.evaluate.runner import run_eval
    from groove.search.compiler import QueryError, compile_query
    from groove.search.pipeline import Searcher

    queries = load(source, split)
    if max_queries is not None:
        queries = queries[:max_queries]
    options = dict(request_options or {})
    if reranker_model and options.get("rerank") is None:
        options["rerank"] = True
    async with open_index_readonly(settings) as (conn, embedder, path):
        cache: dict[str, Any] = {}
        if retriever != "fts":
            texts = []
            for q in queries:
                try:
                    texts.append(compile_query(q.query).vector_text)
                except QueryError:
                    continue
            texts = list(dict.fromkeys(t for t in texts if t.strip()))
            vectors = await anyio.to_thread.run_sync(embedder.embed_queries, texts)
            cache = dict(zip(texts, vectors))

        async def embed_query(text: str):
            if text in cache:
                return cache[text]
            return await anyio.to_thread.run_sync(embedder.embed_query, text)

        searcher = Searcher(settings.search, embed_query=embed_query, reranker=make_reranker_factory(settings, reranker_model))
        result = await run_eval(searcher, conn, queries, retriever=retriever, limit=limit, request_options=options)
    result["source"] = str(source)
    result["index_path"] = str(path)
    return result


async def related_once(settings: Settings, path: str, **kw: Any) -> dict[str, Any]:
    """`groove related PATH`: notes nearest in meaning, read-only."""
    from groove.search.related import related_notes

    async with open_index_readonly(settings) as (conn, _, _):
        return await related_notes(conn, path, **kw)
