"""The index as one object: settings -> paths -> embedder -> connections -> searcher.

`Index` is the only place that wires groove together. Every front end reaches it through the
service API (`groove.api.service.Service`), in one process or in the running service:

    async with Index.open(settings) as index:                 # writer: `groove index`
        report = await Service(index).reindex()

    async with Index.open(settings, readonly=True) as index:  # the read commands
        answer = await Service(index).search(SearchRequest(query="..."))

The daemon opens it as a writer with a pool of read-only connections
(`pool=True`): searches never wait for writes (decision 0003).

It owns the notes folder and the index path (resolved once, here), the
embedder, the query batcher, the write connection and the indexer (writer
mode), the read connection(s), the `Searcher` and the reranker factory.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from groove.api.answers import (
    ChangesAnswer,
    DocumentAnswer,
    DocumentPage,
    IndexStatus,
    LinksAnswer,
    RelatedAnswer,
    TopicsAnswer,
    VectorsInMemory,
    changes_answer,
    document_answer,
    document_page,
    document_text,
    links_answer,
    related_answer,
    topics_answer,
)
from groove.config import Settings
from groove.corpus import markdown
from groove.corpus.cjk import cjk_share
from groove.corpus.parsers import Parsers
from groove.embed.embedder import Embedder, embedder_for_index, make_embedder, model_fit_warning, settings_json
from groove.embed.pool import BulkLimiter, QueryBatcher
from groove.embed.reranker import CrossEncoderReranker
from groove.errors import EmbedderError, NotFoundError, UsageError
from groove.evaluate.golden import JudgedQuery
from groove.evaluate.metrics import KS
from groove.evaluate.report import EvalRun
from groove.evaluate.runner import query_vector_texts, run_eval
from groove.folders import Folders, NotesFolder
from groove.logs import get_logger
from groove.search import language, parts
from groove.search.answers import SearchAnswer, search_answer
from groove.search.compiler import QueryError
from groove.search.pipeline import Reranker, Searcher
from groove.search.related import related_notes
from groove.search.request import LineRange, SearchRequest
from groove.store.address import StoreAddress, address
from groove.store.memory import VectorMatrix
from groove.store.open import open_store
from groove.store.protocols import EmbeddingStore, Reads, Store
from groove.sync.embedding import EmbedQueue, Progress
from groove.sync.history import HISTORY_ROWS, net_changes
from groove.sync.indexer import Indexer, ReconcileStats
from groove.sync.report import FinishedSwitch, IndexReport, index_report

log = get_logger(__name__)

MAX_PAGE = 500  # list_documents page size
MAX_LINKS = 500  # links of each kind in one links answer


def reranker_factory(settings: Settings, cli_model: str | None = None) -> Callable[[], Reranker | None] | None:
    """A lazy reranker: the CLI's model if named, else the configured one, else None.
    The model loads on first use (a search that asks for reranking)."""
    name = cli_model or settings.search.reranker
    if not name:
        return None
    reranker = CrossEncoderReranker(name, settings.embedding.device)
    return lambda: reranker


MODEL_FIT_SAMPLE = 2000  # chunks read to judge the notes' script mix
SWITCH_MAX_LEFT_SHARE = 0.01  # a switch swaps with at most this share of texts the new model keeps failing on

PreviousEmbedder = Callable[[str, str | None], Embedder | None]


class ModelSwitch:
    """A model switch in progress (decision 0008): the old model answers queries and embeds new
    edits into the active set; the configured model fills the shadow set; `Index` swaps them."""

    def __init__(self, old_identity: str, new_identity: str, old: Embedder | None, shadow_queue: EmbedQueue):
        self.old_identity = old_identity
        self.new_identity = new_identity
        self.old = old
        self.queries = QueryBatcher(old) if old is not None else None
        self.shadow = shadow_queue


def _index_path(settings: Settings) -> Path:
    """The SQLite file of `index_path` (a store URL needs none)."""
    if settings.store.url:
        return settings.index_path or Path()
    return settings.resolved_index_path()


class Index:
    """One open index. Use `Index.open(...)` (an async context manager)."""

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        reranker_model: str | None = None,
        bulk: BulkLimiter | None = None,
        previous_embedder: PreviousEmbedder = embedder_for_index,
    ):
        self.settings = settings
        self.reranker_model = reranker_model  # a reranker named on the command line (it reranks unconditionally)
        self.address: StoreAddress = address(settings.store.url, _index_path(settings))  # a SQLite file or a database
        # A search node: a shared store and no notes folder here; it answers every folder the store holds.
        self.search_only = self.address.kind == "postgresql" and not settings.kb_path
        # Resolved once, here. In a store several machines share, every folder's notes are under its name.
        self._folders: Folders | None = None
        if not self.search_only:
            folders = settings.folders()
            self._folders = folders.shared() if self.address.kind == "postgresql" else folders
        self.path: Path = self.address.anchor  # the SQLite file, or the local name that stands for the database
        self.embedder: Embedder = embedder or make_embedder(settings.embedding)  # the configured model
        self.queries = QueryBatcher(self.embedder)
        self.bulk = bulk
        self.previous_embedder = previous_embedder
        self.searcher = Searcher(
            settings.search,
            embed_query=self.embed_query,
            reranker=reranker_factory(settings, reranker_model),
            quality=settings.quality_filter,
        )
        self.store: Store | None = None
        self.indexer: Indexer | None = None
        self.embedding: EmbedQueue | None = None  # the active set's queue (None: nothing can embed for it)
        self.switching: ModelSwitch | None = None  # a model switch in progress
        self._full_reconciled = False  # the chunks reflect the folder (a switch may swap)
        self.last_switch: FinishedSwitch | None = None
        self._swapping = False

    # -- opening and closing ----------------------------------------------------------
    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        *,
        readonly: bool = False,
        rebuild: bool = False,
        pool: bool = False,
        embedder: Embedder | None = None,
        reranker_model: str | None = None,
        any_model: bool = False,
        previous_embedder: PreviousEmbedder = embedder_for_index,
    ) -> AsyncIterator[Index]:
        index = cls(settings, embedder=embedder, reranker_model=reranker_model, previous_embedder=previous_embedder)
        if readonly:
            await index.open_reader(any_model=any_model)
        else:
            await index.open_writer(rebuild=rebuild, pool=pool)
        try:
            yield index
        finally:
            await index.close()

    @property
    def folders(self) -> Folders:
        """The notes folders (a search node's: those the store holds notes of, known once it is open)."""
        if self._folders is None:
            raise UsageError("the store's notes folders are known once it is open")
        return self._folders

    def describe(self) -> str:
        """The notes folders as a log line names them (a search node: the store's, whichever they are)."""
        if self._folders is None:
            return f"every notes folder of {self.address.shown}"
        return self._folders.describe()

    async def refresh_folders(self) -> None:
        """A search node: the notes folders the store holds now (another machine may have started indexing one)."""
        if not self.search_only or self.store is None:
            return
        held = await self.store.folders()
        if held:
            self._folders = Folders([NotesFolder(f["name"], Path(f["path"])) for f in held], named=True)

    def _open_options(self) -> dict[str, Any]:
        return {
            "model": self.embedder.identity,
            "dimension": self.embedder.dimension,
            "describe": self._folders.describe() if self._folders is not None else "",
            "settings_json": settings_json(self.settings.embedding),
            "pool_size": self.settings.store.pool_size,
        }

    async def open_writer(self, *, rebuild: bool = False, pool: bool = False) -> None:
        """Create or check the index, open the writer (and readers beside it for the daemon)."""
        claims = [(f.name, str(f.path)) for f in self.folders]  # a shared store: this process indexes these
        self.store = store = await open_store(
            self.address, writer_=True, pool=pool, rebuild=rebuild, claims=claims, **self._open_options()
        )
        # Chunks are cut for the configured model: it is the one that stays.
        try:
            self.indexer = Indexer(
                store.writes,
                self.folders,
                self.settings.index,
                self.embedder,
                self.settings.parsers,
                shared=self.address.kind == "postgresql",
            )
        except BaseException:
            # e.g. a .grooveignore that is a FIFO: say so and exit, instead of an open connection's
            # thread keeping the process alive after the error
            await self.close()
            raise
        switch = store.switch
        if switch is None:
            self.embedding = self._queue(self.embedder)
        else:
            # The old model answers queries (and embeds new edits) only where queries are served.
            old = self.previous_embedder(switch["from"], switch["settings"]) if pool else None
            self.switching = ModelSwitch(
                switch["from"], self.embedder.identity, old, self._queue(self.embedder, store.queue(shadow_set=True))
            )
            self.embedding = self._queue(old) if old is not None else None
            if pool and old is None:
                log.warning(
                    "model_switch_without_old_model",
                    old=switch["from"],
                    new=self.embedder.identity,
                    message="the old model cannot be loaded here: searches use full text until the switch is done",
                )
        if pool:
            self.searcher.vectors = self._vector_matrix()

    def _vector_matrix(self) -> VectorMatrix:
        """The in-memory copy of the vectors a long-running reader keeps (store/memory.py)."""
        assert self.store is not None, "the index is not open"
        return self.store.vector_memory(self.settings.search.vector_memory_mb * 2**20)

    async def vectors_in_memory(self) -> VectorsInMemory | None:
        """What the in-memory copy holds (`index_status`), brought up to date first, as a search
        would; None when the store's own KNN answers."""
        if self.searcher.vectors is None:
            return None
        async with self.reading() as reads:
            snap = await self.searcher.vectors.usable(reads)
        if snap is None:
            return None
        return VectorsInMemory(vectors=len(snap.ids), mib=round(snap.matrix.nbytes / 2**20, 1))

    async def warm_vectors(self) -> None:
        """Load the in-memory vectors now (the daemon's start), not at the first search."""
        try:
            await self.vectors_in_memory()
        except Exception as exc:  # noqa: BLE001 - a reader that cannot open: searches will say so
            log.warning("vectors_warm_up_failed", error=repr(exc))

    def _queue(self, embedder: Embedder, queue: EmbeddingStore | None = None) -> EmbedQueue:
        """An embedding queue on the active vector set, or on `queue` (a switch's shadow set)."""
        assert self.store is not None, "the writer is not open"
        run = self.bulk.embed if self.bulk is not None else None
        store = queue if queue is not None else self.store.queue()
        batch_size = self.settings.embedding.batch_size
        return EmbedQueue(store, embedder, batch_size, run=run) if run else EmbedQueue(store, embedder, batch_size)

    async def open_reader(self, *, any_model: bool = False, pool: bool = False) -> None:
        """For the read commands: the index must exist and match the model (unless `any_model`:
        `groove status` reads no vectors). With `pool` (a search node's daemon), readers for many searches at
        once and the in-memory vectors."""
        self.store = store = await open_store(
            self.address, writer_=False, pool=pool, any_model=any_model, **self._open_options()
        )
        if self._folders is None:
            held = await store.folders()
            if not held:
                await self.close()
                raise UsageError(
                    f"the store {self.address.shown} holds no notes folder yet: index one into it first "
                    "(`groove index --kb PATH --store URL`, or a `groove serve --kb PATH --store URL`)"
                )
            self._folders = Folders([NotesFolder(f["name"], Path(f["path"])) for f in held], named=True)
        if pool:
            self.searcher.vectors = self._vector_matrix()

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            if self.store is not None:
                await self.store.close()
                self.store = None

    @property
    def writable(self) -> bool:
        """Open for writing (`groove index`, the daemon), not read-only."""
        return self.store is not None and self.store.writable

    def reading(self) -> AbstractAsyncContextManager[Reads]:
        """A view to read with: a reader of the pool (daemon), the read-only one, else the writer's."""
        assert self.store is not None, "the index is not open"
        return self.store.reading()

    @property
    def eval_history_location(self) -> str:
        assert self.store is not None, "the index is not open"
        return self.store.eval_history_location

    async def eval_history(self) -> list[str]:
        """The eval history's lines (the store keeps it: a file beside the SQLite index, a table of a shared one)."""
        assert self.store is not None, "the index is not open"
        return await self.store.eval_history()

    async def append_eval_history(self, line: str, keep: int) -> None:
        assert self.store is not None, "the index is not open"
        await self.store.append_eval_history(line, keep)

    def spare_reading(self) -> AbstractAsyncContextManager[Reads | None]:
        """A second reader for a search that holds one, if one is free now; else None."""
        assert self.store is not None, "the index is not open"
        return self.store.spare_reading()

    # -- writing ------------------------------------------------------------------------
    async def reconcile(
        self, paths: Sequence[str] | set[str] | None = None, progress: Progress | None = None, *, force: bool = False
    ) -> ReconcileStats:
        """Reconcile the whole folder (paths None) or only the given paths with the index; `force`: the whole folder
        with every file parsed again, changed or not (`reindex` force)."""
        assert self.indexer is not None, "open the index as a writer to reconcile"
        if paths is None:
            writes = self._writes()
            key = self._rules_key()
            parsed_by = await writes.meta(key)  # None: a new index, or one made before groove kept its rules
            reread = parsed_by != markdown.RULES
            stats = await self.indexer.reconcile_all(progress=progress, reread=reread, force=force)
            if reread:
                await writes.set_meta(key, markdown.RULES)
                if stats.unchanged:
                    log.info(
                        "notes_parsed_again",
                        rules=markdown.RULES,
                        was=parsed_by,
                        why="the Markdown rules changed (headings without HTML): each note was read again once; "
                        "no text changed, nothing was embedded again",
                    )
            self._full_reconciled = True
            await self.check_model_fit()
            return stats
        return await self.indexer.reconcile_paths(paths)

    def _rules_key(self) -> str:
        """The meta key of the Markdown rules this index's notes were parsed by (corpus/markdown.py RULES); in a store
        several machines share, one per set of folders: each machine parses its own notes again."""
        if self.address.kind != "postgresql":
            return "markdown_rules"
        return "markdown_rules:" + ",".join(sorted(f.name for f in self.folders))

    async def check_model_fit(self) -> str | None:
        """After a full reconcile: does the model read what the notes are written in?

        The share of CJK letters over a deterministic sample of chunks, against the model's
        languages; stored in meta `model_fit` (shown by `groove status` and `index_status`),
        and logged once when it first stops fitting.
        """
        writes = self._writes()
        share = cjk_share(await writes.sample_contents(MODEL_FIT_SAMPLE))
        warning = model_fit_warning(self.embedder.identity, share)
        old = json.loads(await writes.meta("model_fit") or "null")
        new = {"cjk_share": round(share, 3), "warning": warning}
        if old != new:
            await writes.set_meta("model_fit", json.dumps(new, ensure_ascii=False))
            if warning and not (old or {}).get("warning"):
                log.warning("model_does_not_fit_notes", message=warning)
        return warning

    def _writes(self) -> Any:
        assert self.store is not None and self.store.writable, "open the index as a writer"
        return self.store.writes

    async def collect_garbage(self) -> int:
        return await self._writes().collect_garbage()

    async def collect_freed(self) -> int:
        """The vectors the last path writes' deleted chunks held, when no chunk holds them now (the daemon)."""
        return await self._writes().collect_freed()

    async def embed_batch(self) -> tuple[int, int]:
        """One batch of work (the daemon's workers): (texts fetched, texts embedded).

        The active set first (what searches use now); during a model switch, then the shadow
        set, and once the shadow set is complete, the swap."""
        assert self.writable, "open the index as a writer to embed"
        if self._swapping:
            return 0, 0
        if self.embedding is not None:
            fetched, done = await self.embedding.embed_batch()
            if fetched:
                return fetched, done
        switch = self.switching
        if switch is None:
            return 0, 0
        fetched, done = await switch.shadow.embed_batch()
        if not fetched:
            await self.finish_switch_if_done()
        return fetched, done

    async def embed_pending(self, progress: Progress | None = None) -> int:
        """Every pending text, batch by batch (`groove index`); a switch in progress is finished
        first (its shadow set filled, then swapped in)."""
        assert self.writable, "open the index as a writer to embed"
        done = 0
        if self.switching is not None:
            done += await self.switching.shadow.embed_pending(progress=progress, stage="embed (new model)")
            self.last_switch = await self.finish_switch_if_done()
        if self.embedding is not None:
            done += await self.embedding.embed_pending(progress=progress)
        return done

    def _queues(self) -> list[EmbedQueue]:
        return [q for q in (self.embedding, self.switching.shadow if self.switching else None) if q is not None]

    async def finish_switch_if_done(self) -> FinishedSwitch | None:
        """Swap in the new model's vectors when the shadow set is complete; None while it is not.

        Complete: the folder has been reconciled in this process, and every text has its new
        vector, or the only ones left are texts the new model keeps failing on (set aside) and
        they are few (SWITCH_MAX_LEFT_SHARE): they become pending work of the new active set.
        """
        switch = self.switching
        if switch is None or self._swapping or not self._full_reconciled or switch.shadow.inflight:
            return None
        assert self.store is not None
        missing = await self.store.shadow_pending()
        if missing:
            total = await self._writes().distinct_texts()
            set_aside = len(switch.shadow.failing)
            if missing > set_aside or missing > max(1, SWITCH_MAX_LEFT_SHARE * total):
                return None
        self._swapping = True
        try:
            # No batch of either set may be half done: wait for the ones in flight.
            while any(q.inflight for q in self._queues()):  # noqa: ASYNC110 - a count, no event to wait on
                await anyio.sleep(0.05)
            record = FinishedSwitch(**await self.store.swap_shadow())
            failing = switch.shadow.failing
            self.embedding = self._queue(self.embedder)
            self.embedding.failing.update(failing)  # the new model's failures keep their backoff
            self.switching = None
        finally:
            self._swapping = False
        log.info(
            "model_switched",
            **record.model_dump(exclude={"started_at", "swapped_at"}),
            seconds=round(record.swapped_at - record.started_at, 1),
        )
        return record

    async def embed_query(self, text: str) -> np.ndarray:
        """A query vector from the model the index answers with (the old one during a switch)."""
        switch = self.switching
        if switch is None:
            return await self.queries.embed(text)
        if switch.queries is None:
            raise EmbedderError(
                f"the index is switching from {switch.old_identity} to {switch.new_identity} and the old model "
                "cannot be loaded here; searches use full text until the switch is done"
            )
        return await switch.queries.embed(text)

    async def full_reconcile(
        self, progress: Progress | None = None, *, embed: bool = False, force: bool = False
    ) -> tuple[ReconcileStats, int, bool]:
        """The whole folder against the index (`groove index`, the daemon's startup and periodic reconcile,
        `reindex`): the reconcile, then (`embed`: `groove index`, which has no workers) every pending chunk
        embedded, then the vectors no chunk uses any more collected (a model switch that just finished
        leaves the old ones), then the full-text tables merged after a large write. Returns the stats,
        the vectors collected and whether it merged."""
        stats = await self.reconcile(progress=progress, force=force)
        if embed:
            stats.chunks_embedded = await self.embed_pending(progress=progress)
        collected = await self.collect_garbage()
        merged = await self.merge_full_text(stats.chunks_written)
        return stats, collected, merged

    async def index_all(self, progress: Progress | None = None, *, force: bool = False) -> IndexReport:
        """`groove index`: one full reconcile, every pending chunk embedded, the off_topic calibration stored,
        and the report (a writer without a running service; the service's writer reconciles by itself)."""
        started = time.perf_counter()
        stats, collected, merged = await self.full_reconcile(progress=progress, embed=True, force=force)
        await self.store_off_topic_calibration()
        report = await self.report(
            stats, vectors_collected=collected, seconds=time.perf_counter() - started, full_text_merged=merged
        )
        log.debug("index_done", **report.model_dump(exclude={"kb_path", "index_path"}))
        return report

    async def merge_full_text(self, written: int) -> bool:
        """`groove index`, after a large write: the full-text indexes compacted."""
        return await self._writes().merge_full_text(written)

    async def report(
        self, stats: ReconcileStats, *, vectors_collected: int, seconds: float, full_text_merged: bool = False
    ) -> IndexReport:
        """The one result shape of a full reconcile (`groove index` and the MCP `reindex`)."""
        async with self.reading() as reads:
            pending = await reads.pending_count()
            computed = int(await reads.meta("embeddings_computed") or 0)
        return index_report(
            stats,
            kb_path=self.folders.describe(),
            index_path=self.address.shown,
            pending_chunks=pending,
            embeddings_computed=computed,
            vectors_collected=vectors_collected,
            seconds=seconds,
            model_switch=self.last_switch,
            full_text_merged=full_text_merged,
        )

    async def store_off_topic_calibration(self) -> None:
        """Measure the off_topic calibration now and keep it in meta, so a one-shot `groove search`
        reads it instead of measuring it (search/offtopic.py); a failure only logs."""
        if not self.writable or self.embedding is None:
            return
        try:
            self.searcher.calibration = None
            cal = await self.searcher.calibration_for(self.reading)
            if cal is not None:
                await self._writes().set_meta("off_topic_calibration", json.dumps(cal.to_dict()))
        except Exception as exc:  # noqa: BLE001 - the flag falls back to measuring at the first search
            log.warning("off_topic_calibration_not_stored", error=repr(exc))

    # -- reading ------------------------------------------------------------------------
    async def search(self, req: SearchRequest, *, searcher: Searcher | None = None) -> SearchAnswer:
        # The searcher takes a reader for the full-text half and another for the rest, and none
        # while it waits for the query vector (decision 0008).
        # With a pool, the two full-text legs run at once when a second reader is free.
        response = await (searcher or self.searcher).search(self.reading, req, spare=self.spare_reading)
        answer = search_answer(response, include_ids=True)
        return (
            answer if req.max_chars is None else parts.fill_budget(answer, req.max_chars)
        )  # best first, at sentence ends

    async def related(self, path: str, **kw: Any) -> RelatedAnswer:
        async with self.reading() as reads:
            return related_answer(
                await related_notes(reads, path, matrix=self.searcher.vectors, min_quality=self.quality_floor(), **kw)
            )

    async def language_centres(self) -> language.Centres | None:
        """The language centres a search of this index ranks its vector leg with (search/language.py):
        None when `[search] language_centres` is off or the index holds one language. `groove tune`
        retrieves its vector leg with them, so it scores the ranking a search gives."""
        return await self.searcher.centres_for(self.reading) if self.settings.search.language_centres else None

    def quality_floor(self) -> float | None:
        """The score under which the graph and `groove tune` leave chunks out, as a search without min_quality or
        include_low_quality does: `[quality_filter] threshold` while the filter is on (decision 0020)."""
        return self.settings.quality_filter.floor()

    async def links(self, path: str, *, limit: int = 100) -> LinksAnswer:
        """A note's outgoing links, backlinks and unresolved links (corpus/links.py)."""
        if not isinstance(path, str) or not path.strip():
            raise NotFoundError("path is empty; pass a note's path as search or list_documents returned it")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LINKS:
            raise QueryError(f"limit must be between 1 and {MAX_LINKS}, got {limit}")
        async with self.reading() as reads:
            found = await reads.note_links(path, limit=limit)
        if found is None:
            raise NotFoundError(
                f"no indexed note at {path!r}; paths are relative to the notes folder, as search and "
                "list_documents return them"
            )
        return links_answer(found)

    async def changes(self, since: float, *, limit: int = 50) -> ChangesAnswer:
        """The notes added, edited (which sections), renamed or deleted since `since` (unix seconds), newest
        first, from the store's change history (sync/history.py)."""
        async with self.reading() as reads:
            rows = await reads.note_history(since, HISTORY_ROWS + 1)
            began = await reads.meta("history_since")
        entries = net_changes(rows[-HISTORY_ROWS:])  # cut: the most recent changes, which matter most
        began_at = float(began) if began else None
        return changes_answer(entries, since=since, history_from=began_at, limit=limit, cut=len(rows) > HISTORY_ROWS)

    async def status(self) -> IndexStatus:
        """What the index file holds (the service adds its own fields when one runs)."""
        assert self.store is not None, "the index is not open"
        held = await self.store.folders()  # a shared store: every machine's folders, not only this one's
        async with self.reading() as reads:
            st = await reads.status(self.address.shown)
            if held:
                st["folders"] = [
                    {
                        "name": f["name"],
                        "path": f["path"],
                        "host": f["host"] or None,
                        "notes": await reads.count_documents_under(f"{f['name']}/"),
                    }
                    for f in held
                ]
            else:
                st["folders"] = [
                    {
                        "name": f.name,
                        "path": str(f.path),
                        "notes": await reads.count_documents_under(self.folders.prefix(f)),
                    }
                    for f in self.folders
                ]
        switch = self.switching
        if switch is not None and st.get("model_switch"):
            st["model_switch"].update(
                failures=switch.shadow.failures(),
                queries_use=switch.old_identity if switch.queries else "full text only",
            )
        return IndexStatus.of(st)

    def embedding_failures(self) -> dict[str, object] | None:
        """The active set's set-aside texts (`index_status`; a switch's own are under model_switch)."""
        return self.embedding.failures() if self.embedding is not None else None

    def next_retry_in(self) -> float | None:
        """Seconds until the next set-aside text of any queue is due again (None: none is set aside)."""
        due = [t for q in self._queues() if (t := q.next_retry_in()) is not None]
        return min(due) if due else None

    async def topics(self, *, depth: int = 2, limit: int = 100) -> TopicsAnswer:
        async with self.reading() as reads:
            return topics_answer(await reads.topics(depth=depth, limit=limit))

    async def pending(self) -> int:
        async with self.reading() as reads:
            return await reads.pending_count()

    async def get_document(
        self, path: str, *, heading: str | None = None, lines: LineRange | None = None, max_chars: int | None = None
    ) -> DocumentAnswer:
        """One note; with `heading` one section of it, with `lines` a range of its lines, with `max_chars` at most
        that many characters cut at a sentence end; then the answer's `part` says what was left out."""
        if not isinstance(path, str) or not path.strip():
            raise NotFoundError("path is empty; pass a path exactly as a search result returned it")
        whole = heading is None and lines is None and max_chars is None
        async with self.reading() as reads:
            doc = await reads.get_document(path, with_chunks=not whole)
        if doc is None:
            raise NotFoundError(
                f"no indexed note at {path!r}; paths are relative to the notes folder, as search and "
                "list_documents return them"
            )
        if whole:
            return document_answer(doc)
        chunks = doc.pop("chunks")  # (heading, context, start_line, characters) each
        first = parts.text_first_line([(chunks[0][2], doc.pop("first_chunk"))] if chunks else [])
        markdown = self.parsers.kind(path) == "markdown"

        def read() -> parts.Part:  # linear in the note, in a worker thread: a 2 MB note never holds the loop
            text = parts.NoteText(doc["content"], first)
            # A Markdown note's every heading from its block structure; a PDF's pages, a presentation's slides,
            # a Word file's headings as its chunks carry them.
            sections = (
                parts.markdown_sections(text, doc["title"])
                if markdown
                else parts.chunk_sections([(c[0], c[1], c[3]) for c in chunks])
            )
            return parts.read_part(
                text, sections, path=path, heading=heading, lines=lines, max_chars=max_chars, lines_chars=lines_chars
            )

        def lines_chars(info: parts.DocumentPart) -> int:
            """What the answer's text takes besides the content: its header lines (the note, which part, what was
            left out and the headings in it), as every front end shows them (`document_text`): max_chars holds
            them too."""
            return len(document_text(document_answer({**doc, "content": "", "part": info})))

        part = await anyio.to_thread.run_sync(read)
        return document_answer({**doc, "content": part.content, "part": part.info})

    async def complete(self, kind: str, prefix: str, limit: int = 100) -> tuple[list[str], int]:
        """Note paths (`kind="path"`) or tags (`kind="tag"`) starting with `prefix`, and how many match in all."""
        async with self.reading() as reads:
            if kind == "path":
                return await reads.paths_starting_with(prefix, limit)
            return await reads.tags_starting_with(prefix, limit)

    async def list_documents(
        self, *, cursor: str | None = None, limit: int = 50, folder: str | None = None, tags: list[str] | None = None
    ) -> DocumentPage:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise QueryError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        after = ""
        if cursor:
            try:
                after = bytes.fromhex(cursor).decode("utf-8")
            except ValueError as exc:
                raise QueryError("invalid cursor; pass next_cursor from the previous page unchanged") from exc
        async with self.reading() as reads:
            docs, more = await reads.list_documents(after=after, limit=limit, folder=folder, tags=tags)
        return document_page(
            {"documents": docs, "next_cursor": docs[-1]["path"].encode().hex() if more and docs else None}
        )

    @property
    def parsers(self) -> Parsers:
        """The parser registry (which files are Markdown), as the indexer has it."""
        if self.indexer is not None:
            return self.indexer.parsers
        return Parsers(self.settings.index, self.settings.parsers)

    def note_path(self, given: str) -> str:
        """A note as the user named it (its index path, or a file path inside a notes folder) -> its index path."""
        return self.folders.relative(given)

    async def evaluate(
        self,
        queries: Sequence[JudgedQuery],
        *,
        retriever: str,
        limit: int,
        request_options: dict[str, Any],
        ks: Sequence[int] = KS,
        vectors: dict[str, np.ndarray] | None = None,
    ) -> EvalRun:
        """Judged queries through the search pipeline; query vectors computed in batches up front
        (or given: `vectors`, a compiled query's vector text -> its embedding, as tune has them)."""
        cache: dict[str, np.ndarray] = dict(vectors or {})
        if retriever != "fts" and vectors is None:
            texts = query_vector_texts(queries)
            embedded = await anyio.to_thread.run_sync(self.embedder.embed_queries, texts)
            cache = dict(zip(texts, embedded, strict=True))

        async def embed_query(text: str) -> np.ndarray:
            return cache[text] if text in cache else await self.queries.embed(text)

        searcher = Searcher(
            self.settings.search,
            embed_query=embed_query,
            reranker=self.searcher.reranker,
            vectors=self._vector_matrix() if retriever != "fts" else None,
            quality=self.settings.quality_filter,
        )
        return await run_eval(
            searcher, self.reading, queries, retriever=retriever, limit=limit, request_options=request_options, ks=ks
        )


__all__ = ["Index", "MAX_LINKS", "MAX_PAGE", "ModelSwitch", "reranker_factory"]
