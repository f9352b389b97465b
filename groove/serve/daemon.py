"""The daemon: task supervision. One anyio task group with the writer loop (the
single writer), the embedding workers, the watcher, the periodic reconcile;
the MCP transport runs beside it (`groove.serve.main`).

Everything it reads or writes goes through `groove.app.Index`: reconciling,
`embed_batch()` (the same queue consumer `groove index` uses, with failing
texts set aside under backoff), searches and document reads.

Requests are served at once; the startup reconcile (files changed while the
daemon was down, chunks still without vectors) runs behind them. The
database is the queue: a chunk without a vector is pending work, so a crash
or a kill -9 loses nothing and the next start carries on.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import anyio
import anyio.abc

from groove.app import Index
from groove.config import Settings
from groove.corpus.parsers import Parsers
from groove.embed.embedder import Embedder
from groove.embed.pool import BulkLimiter
from groove.errors import BusyError, NotFoundError
from groove.logs import get_logger
from groove.search.request import SearchRequest
from groove.sync.indexer import ReconcileStats
from groove.sync.watcher import watch

log = get_logger(__name__)

IDLE_WAIT_S = 30.0  # a worker with nothing to do looks at the queue again after this long anyway

__all__ = ["BusyError", "Change", "ChangeKind", "Daemon", "NotFoundError"]


class ChangeKind(enum.Enum):
    PATH = "path"    # reconcile this path (a file or a folder)
    FULL = "full"    # reconcile everything


@dataclass(frozen=True)
class Change:
    """One item of the change stream the writer loop consumes."""

    kind: ChangeKind
    path: str = ""

    @classmethod
    def of(cls, path: str) -> "Change":
        return cls(ChangeKind.PATH, path)


FULL = Change(ChangeKind.FULL)

ChangeListener = Callable[[list[str], bool], Awaitable[None]]


class Daemon:
    def __init__(self, settings: Settings, embedder: Embedder | None = None):
        self.settings = settings
        self.index = Index(settings, embedder=embedder, bulk=BulkLimiter(settings.embedding.workers))
        self.kb = self.index.kb
        self.index_path = self.index.path
        self.embedder = self.index.embedder
        self.queries = self.index.queries
        self.watcher_state = "starting"
        self.last_change: float | None = None
        self.last_reconcile: dict[str, Any] | None = None
        self.started_at = time.time()
        self.listeners: list[ChangeListener] = []
        self._changes_send, self._changes_recv = anyio.create_memory_object_stream[Change](max_buffer_size=10_000)
        self._work_gen = 0
        self._work_event = anyio.Event()
        self._full_requested = 0     # generations of full reconciles asked for / done
        self._full_done = 0
        self._full_event = anyio.Event()
        self._reindexing = False
        self._stop = anyio.Event()
        self.ready = anyio.Event()       # set once the database is open (requests can be served)
        self.reconciled = anyio.Event()  # set after the startup reconcile

    @property
    def _inflight(self) -> set[str]:
        """Texts being embedded right now (empty before the index is open)."""
        return self.index.embedding.inflight if self.index.embedding is not None else set()

    # -- lifecycle ------------------------------------------------------------
    async def open(self) -> None:
        await self.index.open_writer(pool=True)
        self.ready.set()

    async def close(self) -> None:
        await self.index.close()

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
        first = True
        async for item in self._changes_recv:
            # Coalesce whatever else is already queued (bounded: the stream is).
            batch = {item}
            while True:
                try:
                    batch.add(self._changes_recv.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            full = FULL in batch
            full_gen = self._full_requested
            try:
                if full:
                    stats = await self.index.reconcile()
                    gc = await self.index.collect_garbage()
                    self.last_reconcile = {**stats.to_dict(), "at": time.time(), "vectors_collected": gc}
                    log.info("reconcile_done", **stats.to_dict())
                else:
                    stats = await self.index.reconcile({c.path for c in batch})
                    log.info("changes_indexed", **stats.to_dict())
            except Exception as exc:  # noqa: BLE001 - one bad batch must not stop the daemon
                log.error("reconcile_failed", error=repr(exc))
                continue
            finally:
                if first:
                    first = False
                    self.reconciled.set()
                if full:
                    self._full_done = full_gen
                    self._full_event.set()
                    self._full_event = anyio.Event()
            await self._after_write(stats)

    async def _after_write(self, stats: ReconcileStats) -> None:
        if stats.chunks_written:
            self._wake_workers()
        touched = stats.changed_paths + stats.deleted_paths
        if touched:
            self.last_change = time.time()
            list_changed = bool(stats.added or stats.deleted or stats.renamed)
            for listener in list(self.listeners):
                try:
                    await listener(touched, list_changed)
                except Exception as exc:  # noqa: BLE001
                    log.warning("listener_failed", error=repr(exc))

    def _wake_workers(self) -> None:
        self._work_gen += 1
        self._work_event.set()
        self._work_event = anyio.Event()

    async def submit_paths(self, rels: set[str]) -> None:
        for rel in sorted(rels):
            await self._changes_send.send(Change.of(rel))

    # -- embedding workers --------------------------------------------------------
    async def _embed_loop(self, worker: int) -> None:
        while True:
            gen, event = self._work_gen, self._work_event
            try:
                fetched, _ = await self.index.embed_batch()
            except Exception as exc:  # noqa: BLE001 - a database hiccup: look again shortly
                log.error("embed_batch_failed", worker=worker, error=repr(exc))
                fetched = 0
                await anyio.sleep(1.0)
            if fetched:
                continue
            if self._work_gen == gen:
                # Nothing due: wait for new work, or for the next set-aside text to be due.
                retry = self.index.embedding.next_retry_in() if self.index.embedding else None
                with anyio.move_on_after(IDLE_WAIT_S if retry is None else min(IDLE_WAIT_S, retry + 0.01)):
                    await event.wait()

    # -- watcher / periodic ---------------------------------------------------------
    def _set_watch_state(self, state: str) -> None:
        self.watcher_state = state

    async def _watch_loop(self) -> None:
        try:
            await watch(
                self.kb,
                self.submit_paths,
                debounce_ms=self.settings.watch.debounce_ms,
                extensions=Parsers(self.settings.index, self.settings.parsers).extensions,  # the registry decides
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
        return await self.index.search(req)

    async def get_document(self, path: str) -> dict[str, Any]:
        await self.ready.wait()
        return await self.index.get_document(path)

    async def list_documents(
        self, *, cursor: str | None = None, limit: int = 50, folder: str | None = None, tags: list[str] | None = None
    ) -> dict[str, Any]:
        await self.ready.wait()
        return await self.index.list_documents(cursor=cursor, limit=limit, folder=folder, tags=tags)

    async def index_status(self) -> dict[str, Any]:
        await self.ready.wait()
        st = await self.index.status()
        st.update(
            kb_path=str(self.kb),
            watcher=self.watcher_state,
            last_change_at=self.last_change,
            last_reconcile=self.last_reconcile,
            startup_reconcile_done=self.reconciled.is_set(),
            reindex_running=self._reindexing,
            uptime_s=round(time.time() - self.started_at, 1),
            embedding_failures=self.index.embedding.failures() if self.index.embedding else None,
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
            result["pending_chunks"] = await self.index.pending()
            return result
        finally:
            self._reindexing = False

    async def related(self, *, path: str, limit: int = 10, depth: int = 1, fan_out: int = 10,
                      max_nodes: int = 100) -> dict[str, Any]:
        await self.ready.wait()
        return await self.index.related(path, limit=limit, depth=depth, fan_out=fan_out, max_nodes=max_nodes)

    async def pending(self) -> int:
        return await self.index.pending()
