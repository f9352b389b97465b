"""The daemon: task supervision. One anyio task group with the writer loop (the
single writer), the embedding workers, the watcher, the periodic reconcile;
the MCP transport runs beside it (`groove.serve.process.main`).

Everything it reads or writes goes through `groove.index.Index`: reconciling,
`embed_batch()` (the same queue consumer `groove index` uses, with failing
texts set aside under backoff), searches and document reads.

Requests are served at once; the startup reconcile (files changed while the
daemon was down, chunks still without vectors) runs behind them. The
database is the queue: a chunk without a vector is pending work, so a crash
or a kill -9 loses nothing and the next start carries on.

Every task reports its health (`TaskHealth`: state, last error, when, how
often in a row) for `index_status` and `/healthz`: a write that fails (disk
full, a read-only index file, a reconcile that raises) is retried with
backoff (the failed paths again, or the full reconcile) while searches go on
over what the index has; a watcher that dies is restarted with backoff and a
full reconcile then picks up what it missed; the embedding workers back off
while the database refuses their writes. With `[watch] enabled = false`
(`groove serve --no-watch`, a folder that changes only by deploy) there is no
watcher: its state says so and it does not make the service unhealthy; the
startup reconcile, the periodic one and `reindex` keep the index current.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import anyio.abc

from groove.api.service import Service
from groove.backoff import doubling
from groove.config import Settings
from groove.embed.embedder import Embedder
from groove.embed.pool import BulkLimiter
from groove.errors import BusyError, GrooveError, NotFoundError, UsageError
from groove.folders import Folders, NotesFolder
from groove.index import Index
from groove.logs import get_logger
from groove.store.failures import describe_write_error
from groove.sync.indexer import Indexer, ReconcileStats
from groove.sync.report import IndexReport
from groove.sync.watcher import FolderRepointed, watch

log = get_logger(__name__)

IDLE_WAIT_S = 30.0  # a worker with nothing to do looks at the queue again after this long anyway
RETRY_FIRST_S = 1.0  # a failed write, a dead watcher, a refused embedding store: first retry after this long
RETRY_MAX_S = 60.0  # doubling each time in a row, never longer than this
#: The watcher's state when `[watch] enabled = false` (`groove serve --no-watch`): not a fault, so not unhealthy.
WATCH_OFF = "off ([watch] enabled = false): changes are picked up by the periodic reconcile and reindex"

__all__ = ["BusyError", "Change", "ChangeKind", "Daemon", "NotFoundError", "ReindexError", "TaskHealth"]


class ReindexError(GrooveError):
    """The full reconcile that `reindex` asked for failed (its message says why and what to do)."""


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` failures in a row (1, 2, 4 ... RETRY_MAX_S)."""
    return doubling(failures, RETRY_FIRST_S, RETRY_MAX_S)


@dataclass
class TaskHealth:
    """What one task of the daemon is doing and the last thing that went wrong with it."""

    state: str = "starting"
    last_error: str | None = None
    last_error_at: float | None = None
    failures: int = 0  # in a row; 0 once the task succeeds again (a restarted task: once it has lived a while)
    last_ok_at: float | None = None
    retry_at: float | None = None

    def ok(self, state: str = "running", *, reset: bool = True) -> None:
        self.state = state
        if reset:
            self.failures = 0
        self.retry_at = None
        self.last_ok_at = time.time()

    def failed(self, error: str, *, state: str = "failing", retry_in: float | None = None) -> None:
        self.failures += 1
        self.state = state
        self.last_error = error
        self.last_error_at = time.time()
        self.retry_at = time.time() + retry_in if retry_in is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "last_error": self.last_error,
            "last_error_at": round(self.last_error_at, 3) if self.last_error_at else None,
            "failures_in_a_row": self.failures,
            "last_ok_at": round(self.last_ok_at, 3) if self.last_ok_at else None,
            "retry_at": round(self.retry_at, 3) if self.retry_at else None,
        }


class ChangeKind(enum.Enum):
    PATH = "path"  # reconcile this path (a file or a folder)
    FULL = "full"  # reconcile everything


@dataclass(frozen=True)
class Change:
    """One item of the change stream the writer loop consumes."""

    kind: ChangeKind
    path: str = ""

    @classmethod
    def of(cls, path: str) -> Change:
        return cls(ChangeKind.PATH, path)


FULL = Change(ChangeKind.FULL)

ChangeListener = Callable[[list[str], bool], Awaitable[None]]


class Daemon:
    def __init__(self, settings: Settings, embedder: Embedder | None = None, **index_options: Any):
        self.settings = settings
        self.index = Index(settings, embedder=embedder, bulk=BulkLimiter(settings.embedding.workers), **index_options)
        self.service = Service(self.index, self)  # what every front end calls (groove.api.service)
        self.http_url: str | None = None  # the Streamable HTTP endpoint once it listens (a stdio client attaches there)
        self.http_token: str | None = (
            None  # its bearer token, told only over the local socket (serve/process/attach.py)
        )
        self.tasks: dict[str, TaskHealth] = {
            name: TaskHealth() for name in ("writer", "reconcile", "watcher", "embedding")
        }
        # A store several machines share: the changes any process commits reach this one's listeners.
        self.shared = self.index.address.kind == "postgresql"
        self.search_only = self.index.search_only  # a search node: no notes folder here, nothing written
        if self.shared:
            self.tasks["store"] = TaskHealth()
        self.last_change: float | None = None
        self.last_reconcile: dict[str, Any] | None = None
        self.started_at = time.time()
        self.listeners: list[ChangeListener] = []
        self._changes_send, self._changes_recv = anyio.create_memory_object_stream[Change](max_buffer_size=10_000)
        self._work_gen = 0
        self._work_event = anyio.Event()
        self._force_next = False  # the next full reconcile parses every file again (`reindex` force)
        self._full_requested = 0  # generations of full reconciles asked for / done
        self._full_done = 0
        self._full_event = anyio.Event()
        self._full_error: str | None = None  # how the last full reconcile failed (None: it succeeded)
        self._full_ok = False  # a full reconcile has succeeded since the start
        self._retry_paths: set[str] = set()  # paths whose write failed, written again after a backoff
        self._retry_full = False
        self._retry_scheduled = False
        self._tg: anyio.abc.TaskGroup | None = None
        self._reindexing = False
        self._last_full: tuple[ReconcileStats, int, bool] | None = (
            None  # the last full reconcile, its vectors collected, merged?
        )
        self._drained = False  # the queue was empty after the startup reconcile, and no chunk has waited since
        self._stop = anyio.Event()
        self.ready = anyio.Event()  # set once the database is open (requests can be served)
        self.reconciled = anyio.Event()  # set after the startup reconcile

    @property
    def watcher_state(self) -> str:
        return self.tasks["watcher"].state

    @property
    def startup_reconcile_done(self) -> bool:
        """A full reconcile has succeeded since the start (a failed one does not count)."""
        return self._full_ok

    def health(self) -> tuple[bool, list[str]]:
        """Alive means: the watcher watches and the writer runs and its last write went through (a search node:
        it hears the store's changes)."""
        reasons = []
        store = self.tasks.get("store")
        if store is not None and store.state != "listening":
            reasons.append(f"store {store.state}" + (f": {store.last_error}" if store.last_error else ""))
        if self.search_only:
            return not reasons, reasons
        if not self._full_ok:
            reasons.append(
                "starting: the first scan of the notes folder is not done"
                + (f" (it failed: {self._full_error})" if self._full_error else "")
            )
        embedding = self.tasks["embedding"]
        if embedding.state == "failing":  # the store refuses the vectors (a full disk, a read-only index)
            reasons.append("embedding failing" + (f": {embedding.last_error}" if embedding.last_error else ""))
        watcher = self.tasks["watcher"]
        if watcher.state != "watching" and self.settings.watch.enabled:
            reasons.append(
                f"watcher {watcher.state}"
                + (f": {watcher.last_error}" if watcher.last_error and watcher.state != "starting" else "")
            )
        writer_task = self.tasks["writer"]
        if writer_task.state != "running":
            reasons.append(
                f"writer {writer_task.state}" + (f": {writer_task.last_error}" if writer_task.last_error else "")
            )
        return not reasons, reasons

    @property
    def _inflight(self) -> set[str]:
        """Texts being embedded right now (empty before the index is open)."""
        return self.index.embedding.inflight if self.index.embedding is not None else set()

    # -- lifecycle ------------------------------------------------------------
    async def open(self) -> None:
        if self.search_only:
            await self.index.open_reader(pool=True)
        else:
            await self.index.open_writer(pool=True)
        self.ready.set()

    async def close(self) -> None:
        await self.index.close()

    async def run_background(self, task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED) -> None:
        """Everything but the transport. Returns when cancelled."""
        await self.open()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self.index.queries.warm_up)  # the model loads now, not at the first search
                tg.start_soon(self.index.warm_vectors)  # and the in-memory vectors
                if self.shared:
                    tg.start_soon(self._supervised, "store", self._listen_once)
                if self.search_only:
                    for name in ("writer", "reconcile", "watcher", "embedding"):
                        self.tasks[name].ok("off: a search node")
                    self.reconciled.set()
                    self._full_ok = True
                    task_status.started()
                    await self._stop.wait()
                    tg.cancel_scope.cancel()
                    return
                tg.start_soon(self._supervised, "writer", self._writer_loop)
                for i in range(self.settings.embedding.workers):
                    tg.start_soon(self._embed_loop, i)
                if self.settings.watch.enabled:
                    tg.start_soon(self._supervised, "watcher", self._watch_once)
                else:  # a folder that changes only by deploy: the startup and periodic reconciles, and reindex
                    self.tasks["watcher"].ok(WATCH_OFF)
                    log.info(
                        "watch_off",
                        kb=self.index.folders.describe(),
                        reconcile_interval_s=self.settings.watch.reconcile_interval_s,
                    )
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

    # -- supervision ---------------------------------------------------------------------
    async def _supervised(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        """Run a task; when it raises (or returns before the daemon stops) record why and start it again
        after a backoff, so one crash is visible (index_status, /healthz) instead of silent and final."""
        health = self.tasks[name]
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                await run()
                if self._stop.is_set():
                    return
                raise RuntimeError(f"the {name} stopped by itself")
            except Exception as exc:  # noqa: BLE001 - a crashed task is restarted, not lost
                if time.monotonic() - started > RETRY_MAX_S:
                    health.failures = 0  # it lived a while: this death starts a new series
                delay = backoff(health.failures + 1)
                health.failed(repr(exc), state=f"failed, restarting in {delay:g} s", retry_in=delay)
                log.error(f"{name}_failed", error=repr(exc), restart_in_s=delay)
            await anyio.sleep(delay)
            if name == "watcher":  # what changed while nobody watched
                self._full_requested += 1
                await self._changes_send.send(FULL)

    # -- writer ------------------------------------------------------------------
    async def _writer_loop(self) -> None:
        self.tasks["writer"].ok()
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
            paths = {c.path for c in batch if c.kind is ChangeKind.PATH}
            error: str | None = None
            try:
                if full:
                    force, self._force_next = self._force_next, False
                    stats, gc, merged = await self.index.full_reconcile(force=force)
                    self.last_reconcile = {
                        **stats.to_dict(),
                        "at": time.time(),
                        "vectors_collected": gc,
                        "full_text_merged": merged,
                    }
                    self._last_full = (stats, gc, merged)
                    log.info("reconcile_done", **stats.to_dict())
                else:
                    stats = await self.index.reconcile(paths)
                    log.info("changes_indexed", **stats.to_dict())
                    if stats.deleted or stats.changed:  # the vectors of deleted or rewritten sections: now, not
                        collected = await self.index.collect_freed()  # at the next full reconcile (doctor clean)
                        if collected:
                            log.debug("vectors_collected", vectors=collected)
            except Exception as exc:  # noqa: BLE001 - one bad batch must not stop the daemon
                error = describe_write_error(exc)
                self._write_failed(error, full=full, paths=paths)
                continue
            finally:
                if first:
                    first = False
                    self.reconciled.set()
                if full:
                    self._full_done = full_gen
                    self._full_error = error
                    self._full_event.set()
                    self._full_event = anyio.Event()
            self.tasks["writer"].ok()
            if full:
                self._full_ok = True
                self.tasks["reconcile"].ok("ok")
            await self._after_write(stats)

    def _write_failed(self, error: str, *, full: bool, paths: set[str]) -> None:
        """Record a failed write and write it again after a backoff: the same paths, or the full reconcile."""
        writer_task = self.tasks["writer"]
        delay = backoff(writer_task.failures + 1)
        writer_task.failed(error, state="failing", retry_in=delay)
        if full:
            self.tasks["reconcile"].failed(error, state="failed", retry_in=delay)
        log.error(
            "reconcile_failed" if full else "write_failed",
            error=error,
            retry_in_s=delay,
            paths=len(paths) if not full else None,
        )
        self._retry_full |= full
        self._retry_paths |= paths
        if not self._retry_scheduled and self._tg is not None:
            self._retry_scheduled = True
            self._tg.start_soon(self._retry_writes, delay)

    async def _retry_writes(self, delay: float) -> None:
        await anyio.sleep(delay)
        self._retry_scheduled = False
        full, paths = self._retry_full, self._retry_paths
        self._retry_full, self._retry_paths = False, set()
        if full:
            await self._changes_send.send(FULL)
        else:
            await self.submit_paths(paths)

    async def _after_write(self, stats: ReconcileStats) -> None:
        if stats.chunks_written:
            self._drained = False
            self._wake_workers()
        else:
            await self._check_drained()
        touched = stats.changed_paths + stats.deleted_paths
        if touched and not self.shared:  # a shared store announces every process's changes (`_listen_once`)
            await self._changed(touched, bool(stats.added or stats.deleted or stats.renamed))

    async def _changed(self, touched: list[str], list_changed: bool) -> None:
        self.last_change = time.time()
        for listener in list(self.listeners):
            try:
                await listener(touched, list_changed)
            except Exception as exc:  # noqa: BLE001 - one listener failing must not stop the others or the writer
                log.warning("listener_failed", error=repr(exc))

    async def _listen_once(self) -> None:
        """A shared store: the notes any process (this one included) changes, handed to the listeners (MCP's
        resource notifications); `_supervised` starts it again when the connection is lost."""
        store: Any = self.index.store
        assert store is not None and hasattr(store, "listen"), "a shared store listens"

        def ready() -> None:
            self.tasks["store"].ok("listening", reset=False)

        async def changed(paths: list[str], list_changed: bool) -> None:
            if list_changed and self.search_only:
                await self.index.refresh_folders()  # a folder may have joined the store
            await self._changed(paths, list_changed)

        await store.listen(changed, ready)

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
            health = self.tasks["embedding"]
            try:
                fetched, _ = await self.index.embed_batch()
            except Exception as exc:  # noqa: BLE001 - the database refused the vectors (disk full, ...): back off
                delay = backoff(health.failures + 1)
                error = describe_write_error(exc)
                health.failed(error, state="failing", retry_in=delay)
                log.error("embed_batch_failed", worker=worker, error=error, retry_in_s=delay)
                await anyio.sleep(delay)
                continue
            if health.state != "running":
                health.ok()
            if fetched:
                continue
            await self._check_drained()
            if self._work_gen == gen:
                # Nothing due: wait for new work, or for the next set-aside text to be due.
                retry = self.index.next_retry_in()
                with anyio.move_on_after(IDLE_WAIT_S if retry is None else min(IDLE_WAIT_S, retry + 0.01)):
                    await event.wait()

    async def _check_drained(self) -> None:
        """Say once, when the queue empties, that every note is searchable by meaning (`make serve` shows it)."""
        if self._drained or not self.reconciled.is_set():
            return
        try:
            pending = await self.index.pending()
        except Exception:  # noqa: BLE001 - the index is closing; nothing to say
            return
        if pending or self._drained:
            return
        self._drained = True
        st = await self.index.status()
        log.info(
            "embedding queue drained: every note is searchable by meaning", documents=st.documents, chunks=st.chunks
        )

    # -- watcher / periodic ---------------------------------------------------------
    def _set_watch_state(self, state: str) -> None:
        if state == "watching":
            # A watcher that dies soon after each start must still back off: failures in a row are
            # reset by _supervised only once it has lived longer than RETRY_MAX_S.
            self.tasks["watcher"].ok("watching", reset=False)
        elif not self._stop.is_set() or state != "stopped":
            self.tasks["watcher"].state = state

    async def _watch_once(self) -> None:
        """One life of the watcher; `_supervised` restarts it (with backoff) when it dies. Several notes
        folders: a watch each, their paths handed on under the folder's name; the watcher is "watching"
        while every one is, else it names the folder that is not (`/healthz` fails then)."""
        folders = self.index.folders
        indexer = self.index.indexer
        assert indexer is not None, "the daemon watches an index it writes"

        def one(folder):
            if not folders.named:
                return self.submit_paths, self._set_watch_state

            async def on_batch(rels: set[str]) -> None:
                await self.submit_paths({folders.outer(folder, r) for r in rels})

            def on_state(state: str) -> None:
                states[folder.name] = state
                waiting = [f"{name}: {st}" for name, st in states.items() if st != "watching"]
                self._set_watch_state("watching" if not waiting else "; ".join(waiting))

            return on_batch, on_state

        states = {f.name: "starting" for f in folders}
        while True:
            try:
                await self._watch_folders(folders, indexer, one)
                return
            except* FolderRepointed as group:
                # A notes folder given as a symlink now leads elsewhere: read and watch the new folder (or,
                # when it is another served folder, index nothing under this one), then a full reconcile.
                for exc in group.exceptions:
                    assert isinstance(exc, FolderRepointed)
                    for f in folders:
                        if f.link == exc.link and f.path == exc.kb:
                            indexer.repoint(f.name, exc.target)
                self._full_requested += 1
                await self._changes_send.send(FULL)

    async def _watch_folders(self, folders: Folders, indexer: Indexer, one: Callable[[NotesFolder], Any]) -> None:
        # Each round of watches its own stop event: watchfiles sets the event it was given when its watch is
        # cancelled (a re-pointed link ends the round), and that must not stop the daemon.
        stop = anyio.Event()

        async def relay() -> None:
            await self._stop.wait()
            stop.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            for folder in folders:
                on_batch, on_state = one(folder)
                tg.start_soon(
                    partial(
                        watch,
                        folder.path,
                        on_batch,
                        debounce_ms=self.settings.watch.debounce_ms,
                        extensions=indexer.parsers.extensions,  # the indexer's parser registry decides
                        index_path=self.index.path,
                        stop_event=stop,  # lets the watcher thread return at once on stop (else up to 5 s)
                        on_state=on_state,
                        on_lost=lambda: self._changes_send.send(FULL),  # a batch watchfiles could not decode
                        ignored=indexer.ignore_of(folder).path_ignored,  # what .grooveignore and .gitignore leave out
                        link=folder.given,  # a symlink as given: followed anew, so a re-pointed link is seen
                    )
                )

    async def _periodic_loop(self) -> None:
        while True:
            await anyio.sleep(self.settings.watch.reconcile_interval_s)
            await self.request_full()

    async def request_full(self, *, force: bool = False) -> str | None:
        """Ask the writer for a full reconcile and wait until one that started after this call is done
        (`force`: one that parses every file again). Returns how it failed, or None when it succeeded."""
        self._force_next = self._force_next or force
        self._full_requested += 1
        wanted = self._full_requested
        await self._changes_send.send(FULL)
        while self._full_done < wanted:
            await self._full_event.wait()
        return self._full_error

    # -- what the service API asks of a running service (groove.api.service.Supervisor) -------------
    async def wait_ready(self) -> None:
        await self.ready.wait()

    def startup_scan_done(self) -> bool:
        return self.reconciled.is_set()

    async def service_status(self) -> dict[str, Any]:
        """The daemon's own fields of `index_status`, beside the index's."""
        return dict(
            kb_path=self.index.folders.describe(),
            watcher=self.watcher_state,
            healthy=self.health()[0],
            tasks={name: t.to_dict() for name, t in self.tasks.items()},
            last_change_at=self.last_change,
            last_reconcile=self.last_reconcile,
            startup_reconcile_done=self.startup_reconcile_done,
            reindex_running=self._reindexing,
            uptime_s=round(time.time() - self.started_at, 1),
            embedding_failures=self.index.embedding_failures(),
            vectors_in_memory=await self.index.vectors_in_memory(),
        )

    async def full_reconcile(self, *, force: bool = False) -> IndexReport:
        """A full reconcile now, through the writer. One at a time (`force`: every file parsed again)."""
        if self.search_only:
            raise UsageError(
                "this is a search node of a shared store: it indexes no folder; reindex where the folder is "
                "(`groove index --kb PATH --store URL` on that machine)"
            )
        if self._reindexing:
            raise BusyError("a reindex is already running; wait for it to finish (index_status shows reindex_running)")
        self._reindexing = True
        try:
            started = time.perf_counter()
            error = await self.request_full(force=force)
            if error is not None:
                retry = self.tasks["reconcile"].retry_at
                when = f" in {max(0.0, retry - time.time()):.0f} s" if retry else ""
                raise ReindexError(
                    f"the full reconcile failed: {error}. The index still holds what the last good reconcile "
                    f"wrote and searches keep working; groove tries again{when} (index_status shows tasks.reconcile)"
                )
            stats, collected, merged = self._last_full or (ReconcileStats(), 0, False)
            return await self.index.report(
                stats, vectors_collected=collected, seconds=time.perf_counter() - started, full_text_merged=merged
            )
        finally:
            self._reindexing = False
