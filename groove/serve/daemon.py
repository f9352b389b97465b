"""The daemon: one anyio task group with the watcher, the indexer (single writer),
the embedding workers, the periodic reconcile and the MCP transport.

Requests are served at once; the startup reconcile (files changed while the
daemon was down, chunks still without vectors) runs behind them. The
database is the queue: a chunk without a vector is pending work, so a crash
or a kill -9 loses nothing and the next start carries on.
"""

from __future__ import annotations

import json
import time
from typing import Any, Awaitable, Callable

import aiosqlite
import anyio
import anyio.abc

from groove.config import Settings
from groove.corpus.tags import fold_tag
from groove.embed.embedder import Embedder, make_embedder
from groove.embed.pool import BulkLimiter, QueryBatcher
from groove.logs import get_logger
from groove.search.pipeline import Searcher, SearchRequest
from groove.store import db, reads, writer
from groove.store.pool import ReaderPool
from groove.sync.indexer import Indexer, ReconcileStats
from groove.sync.watcher import watch

log = get_logger(__name__)

FULL = "\x00full"  # a token on the change stream meaning "reconcile everything"


class BusyError(Exception):
    """A second reindex while one runs."""


class NotFoundError(Exception):
    pass


ChangeListener = Callable[[list[str], bool], Awaitable[None]]


class Daemon:
    def __init__(self, settings: Settings, embedder: Embedder | None = None):
        self.settings = settings
        self.kb = settings.require_kb()
        self.index_path = settings.resolved_index_path()
        self.embedder = embedder or make_embedder(settings.embedding)
        self.queries = QueryBatcher(self.embedder)
        self.bulk = BulkLimiter(settings.embedding.workers)
        self.readers = ReaderPool(self.index_path)
        self.searcher = Searcher(settings.search, embed_query=self.queries.embed, reranker=self._reranker_factory())
        self.wconn: aiosqlite.Connection | None = None
        self.indexer: Indexer | None = None
        self.watcher_state = "starting"
        self.last_change: float | None = None
        self.last_reconcile: dict[str, Any] | None = None
        self.started_at = time.time()
        self.listeners: list[ChangeListener] = []
        self._changes_send, self._changes_recv = anyio.create_memory_object_stream[str](max_buffer_size=10_000)
        self._work_gen = 0
        self._work_event = anyio.Event()
        self._full_requested = 0     # generations of full reconciles asked for / done
        self._full_done = 0
        self._full_event = anyio.Event()
        self._reindexing = False
        self._inflight: set[str] = set()
        self._fetch_lock = anyio.Lock()
        self._stop = anyio.Event()
        self.ready = anyio.Event()       # set once the database is open (requests can be served)
        self.reconciled = anyio.Event()  # set after the startup reconcile

    def _reranker_factory(self):
        from groove.runtime import make_reranker_factory

        return make_reranker_factory(self.settings)

    # -- lifecycle ------------------------------------------------------------
    async def open(self) -> None:
        reads.prepare_index(self.index_path, model=self.embedder.identity, dimension=self.embedder.dimension, kb_path=str(self.kb))
        self.wconn = await db.connect(self.index_path)
        self.indexer = Indexer(self.wconn, self.kb, self.settings, self.embedder)
        self.ready.set()

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.readers.close()
            if self.wconn is not None:
                # Take the write lock so the current transaction finishes first.
                async with writer.write_lock(self.wconn):
                    await self.wconn.close()
                self.wconn = None

    async def run_background(self, task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED) -> None:
        """Everything but the transport. Returns when cancelled."""
        await self.open()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._writer_loop)
                for i in range(self.settings.embedding.workers):
                    tg.start_soon(self._embed_loop, i)
                tg.start_soon(self._watch_loop)
                if self.settings.watch.reconcile_interval_s > 0:
                    tg.start_soon(self._periodic_loop)
                self._full_requested += 1
                await self._changes_send.send(FULL)  # the startup reconcile
                task_status.started()
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            self._changes_send.close()
            self._changes_recv.close()
            await self.close()

    def stop(self) -> None:
        self._stop.set()

    # -- writer ------------------------------------------------------------------
    async def _writer_loop(self) -> None:
        assert self.indexer is not None
        first = True
        async for item in self._changes_recv:
            # Coalesce whatever else is already queued (bounded: the stream is).
            batch = {item}
            while True:
                try:
                    batch.add(self._changes_recv.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            full_gen = self._full_requested
            try:
                if FULL in batch:
                    stats = await self.indexer.reconcile_all()
                    gc = await writer.collect_garbage(self.wconn)
                    self.last_reconcile = {**stats.to_dict(), "at": time.time(), "vectors_collected": gc}
                    log.info("reconcile_done", **stats.to_dict())
                else:
                    stats = await self.indexer.reconcile_paths(batch)
                    log.info("changes_indexed", **stats.to_dict())
            except Exception as exc:  # noqa: BLE001 - one bad batch must not stop the daemon
                log.error("reconcile_failed", error=repr(exc))
                continue
            finally:
                if first:
                    first = False
                    self.reconciled.set()
                if FULL in batch:
                    self._full_done = full_gen
                    self._full_event.set()
                    self._full_event = anyio.Event()
            await self._after_write(stats)

    async def _after_write(self, stats: ReconcileStats) -> None:
        if stats.chunks_written:
            self._work_gen += 1
            self._work_event.set()
            self._work_event = anyio.Event()
        touched = stats.changed_paths + stats.deleted_paths
        if touched:
            self.last_change = time.time()
            list_changed = bool(stats.added or stats.deleted or stats.renamed)
            for listener in list(self.listeners):
                try:
                    await listener(touched, list_changed)
                except Exception as exc:  # noqa: BLE001
                    log.warning("listener_failed", error=repr(exc))

    async def submit_paths(self, rels: set[str]) -> None:
        for rel in sorted(rels):
            await self._changes_send.send(rel)

    # -- embedding workers --------------------------------------------------------
    async def _embed_loop(self, worker: int) -> None:
        assert self.wconn is not None
        size = self.settings.embedding.batch_size
        while True:
            gen, event = self._work_gen, self._work_event
            async with self._fetch_lock:
                batch = await writer.pending_batch(self.wconn, size + len(self._inflight))
                batch = [(h, c) for h, c in batch if h not in self._inflight][:size]
                self._inflight.update(h for h, _ in batch)
            if not batch:
                if self._work_gen == gen:
                    with anyio.move_on_after(30.0):
                        await event.wait()
                continue
            try:
                hashes = [h for h, _ in batch]
                vectors = await self.bulk.embed(self.embedder.embed_documents, [c for _, c in batch])
                await writer.store_vectors(self.wconn, hashes, vectors)
            except Exception as exc:  # noqa: BLE001
                log.error("embed_failed", error=repr(exc), batch=len(batch))
                await anyio.sleep(1.0)
            finally:
                self._inflight.difference_update(h for h, _ in batch)

    # -- watcher / periodic ---------------------------------------------------------
    def _set_watch_state(self, state: str) -> None:
        self.watcher_state = state

    async def _watch_loop(self) -> None:
        try:
            await watch(
                self.kb,
                self.submit_paths,
                debounce_ms=self.settings.watch.debounce_ms,
                extensions=tuple(e.lower() for e in self.settings.index.extensions),
                index_path=self.index_path,
                stop_event=self._stop,  # lets the watcher thread return at once on stop (else up to 5 s)
                on_state=self._set_watch_state,
            )
        except Exception as exc:  # noqa: BLE001 - without a watcher the periodic reconcile still runs
            self.watcher_state = f"failed: {exc}"
            log.error("watcher_failed", error=repr(exc))

    async def _periodic_loop(self) -> None:
        while True:
            await anyio.sleep(self.settings.watch.reconcile_interval_s)
            await self.request_full()

    async def request_full(self) -> None:
        """Ask the writer for a full reconcile and wait until one that started after this call is done."""
        self._full_requested += 1
        wanted = self._full_requested
        await self._changes_send.send(FULL)
        while self._full_done < wanted:
            await self._full_event.wait()

    # -- the service API (MCP tools call these) -------------------------------------
    async def search(self, req: SearchRequest) -> dict[str, Any]:
        await self.ready.wait()
        async with self.readers.connection() as conn:
            return await self.searcher.search(conn, req)

    async def get_document(self, path: str) -> dict[str, Any]:
        await self.ready.wait()
        if not isinstance(path, str) or not path.strip():
            raise NotFoundError("path is empty; pass a path exactly as a search result returned it")
        async with self.readers.connection() as conn:
            cur = await conn.execute(
                "SELECT id, path, title, tags, date, frontmatter, warnings, indexed_at, size FROM documents WHERE path = ?",
                (path,),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFoundError(
                    f"no indexed note at {path!r}; paths are relative to the notes folder, as search and "
                    "list_documents return them"
                )
            cur = await conn.execute("SELECT content FROM chunks WHERE doc_id = ? ORDER BY ordinal", (row[0],))
            content = "".join(r[0] for r in await cur.fetchall())
        return {
            "path": row[1], "title": row[2], "tags": json.loads(row[3]), "date": row[4],
            "frontmatter": json.loads(row[5]), "warnings": json.loads(row[6]), "indexed_at": row[7],
            "size": row[8], "content": content,
        }

    async def list_documents(
        self, *, cursor: str | None = None, limit: int = 50, folder: str | None = None, tags: list[str] | None = None
    ) -> dict[str, Any]:
        await self.ready.wait()
        if not 1 <= limit <= 500:
            raise ValueError(f"limit must be between 1 and 500, got {limit}")
        after = ""
        if cursor:
            try:
                after = bytes.fromhex(cursor).decode("utf-8")
            except ValueError as exc:
                raise ValueError("invalid cursor; pass next_cursor from the previous page unchanged") from exc
        sql = "SELECT id, path, title, tags, date FROM documents WHERE path > ?"
        args: list[Any] = [after]
        if folder:
            prefix = folder.strip("/") + "/"
            sql += " AND substr(path, 1, ?) = ?"
            args += [len(prefix), prefix]
        wanted = [folded for t in (tags or []) if (folded := fold_tag(t))]
        if wanted:  # doc_tags holds folded tags: the same rule as search filters
            sql += " AND id IN (SELECT doc_id FROM doc_tags WHERE tag IN (SELECT value FROM json_each(?)))"
            args.append(json.dumps(wanted, ensure_ascii=False))
        sql += " ORDER BY path LIMIT ?"
        args.append(limit + 1)
        async with self.readers.connection() as conn:
            cur = await conn.execute(sql, args)
            rows = await cur.fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        docs = [{"path": r[1], "title": r[2], "tags": json.loads(r[3]), "date": r[4]} for r in rows]
        return {"documents": docs, "next_cursor": rows[-1][1].encode().hex() if more and rows else None}

    async def index_status(self) -> dict[str, Any]:
        await self.ready.wait()
        async with self.readers.connection() as conn:
            st = await reads.status(conn, index_path=self.index_path)
        st.update(
            kb_path=str(self.kb),
            watcher=self.watcher_state,
            last_change_at=self.last_change,
            last_reconcile=self.last_reconcile,
            startup_reconcile_done=self.reconciled.is_set(),
            reindex_running=self._reindexing,
            uptime_s=round(time.time() - self.started_at, 1),
        )
        return st

    async def reindex(self) -> dict[str, Any]:
        """A full reconcile now, through the writer. One at a time."""
        await self.ready.wait()
        if self._reindexing:
            raise BusyError("a reindex is already running; wait for it to finish (index_status shows reindex_running)")
        self._reindexing = True
        try:
            await self.request_full()
            result = dict(self.last_reconcile or {})
            async with self.readers.connection() as conn:
                result["pending_chunks"] = await reads.pending_count(conn)
            return result
        finally:
            self._reindexing = False

    async def related(self, *, path: str, limit: int = 10, depth: int = 1, fan_out: int = 10,
                      max_nodes: int = 100) -> dict[str, Any]:
        from groove.search.related import related_notes

        await self.ready.wait()
        async with self.readers.connection() as conn:
            return await related_notes(conn, path, limit=limit, depth=depth, fan_out=fan_out, max_nodes=max_nodes)

    async def pending(self) -> int:
        async with self.readers.connection() as conn:
            return await reads.pending_count(conn)
