"""The embedding queue's consumer: one `embed_batch()` for `groove index` and the daemon.

The queue is the store (texts whose chunks have no vector). A batch is
fetched, embedded and stored; texts in flight in another worker are not
fetched twice. A batch that fails is split in halves and each half retried at
once, so one text the model cannot take never holds back the others; a single
text that still fails is *set aside*: it is left out of the next fetches and
retried after a delay that doubles with each failure (capped), so a text that
fails every time can never starve the queue. `failures()` reports the set-aside
texts for `index_status`.

A queue works on one `EmbeddingStore` (groove/store/protocols.py): the active
vector set (chunks without a vector), or, during a model switch, the shadow set
the new model fills (decision 0008). A store shared by several machines hands
each worker its own texts (decision 0022), so two never embed one text twice.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import numpy as np

from groove.backoff import doubling
from groove.embed.embedder import Embedder
from groove.errors import EmbedderError
from groove.logs import get_logger
from groove.store.protocols import EmbeddingStore

log = get_logger(__name__)

Progress = Callable[[str, int, int], None]
RunEmbed = Callable[[Callable[[Sequence[str]], np.ndarray], Sequence[str]], Awaitable[np.ndarray]]

RETRY_FIRST_S = 1.0  # a set-aside text is first retried after this long
RETRY_MAX_S = 300.0  # and never waits longer than this between tries
LENGTH_WINDOW = 16  # `embed_pending` sorts this many batches of the queue by length at a time


async def _on_thread(fn: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str]) -> np.ndarray:
    return await anyio.to_thread.run_sync(fn, texts)


@dataclass
class Failure:
    attempts: int
    last_error: str
    retry_at: float  # time.monotonic() of the next try
    retry_at_wall: float  # the same moment as time.time(), for people


class EmbedQueue:
    """Fetch -> embed -> store, with failing texts set aside under exponential backoff."""

    def __init__(
        self,
        store: EmbeddingStore,
        embedder: Embedder,
        batch_size: int,
        *,
        run: RunEmbed = _on_thread,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.embedder = embedder
        self.batch_size = batch_size
        self.run = run
        self.clock = clock
        self.inflight: set[str] = set()
        self.failing: dict[str, Failure] = {}
        self._fetch_lock = anyio.Lock()

    def _set_aside(self) -> set[str]:
        now = self.clock()
        return {h for h, f in self.failing.items() if f.retry_at > now}

    def next_retry_in(self) -> float | None:
        """Seconds until the next set-aside text is due again (None when none is set aside)."""
        if not self.failing:
            return None
        return max(0.0, min(f.retry_at for f in self.failing.values()) - self.clock())

    async def embed_batch(self, *, strict: bool = False) -> tuple[int, int]:
        """Embed one batch of pending texts. Returns (texts fetched, texts embedded); (0, 0) when
        nothing is due. With `strict`, a model that cannot load (EmbedderError) is raised."""
        async with self._fetch_lock:
            skip = self.inflight | self._set_aside()
            batch = await self.store.pending_batch(self.batch_size, skip)
            self.inflight.update(h for h, _ in batch)
        if not batch:
            return 0, 0
        try:
            done = await self._embed(batch, strict)
        finally:
            self.inflight.difference_update(h for h, _ in batch)
        return len(batch), done

    async def _embed(self, batch: list[tuple[str, str]], strict: bool) -> int:
        hashes = [h for h, _ in batch]
        try:
            vectors = await self.run(self.embedder.embed_documents, [c for _, c in batch])
        except EmbedderError as exc:
            if strict:
                raise
            return await self._failed(batch, strict, exc)
        except Exception as exc:  # noqa: BLE001 - one text the model cannot take must not stop the rest
            return await self._failed(batch, strict, exc)
        await self.store.store_vectors(hashes, vectors)
        self._recovered(hashes)
        return len(batch)

    async def _failed(self, batch: list[tuple[str, str]], strict: bool, exc: BaseException) -> int:
        if len(batch) > 1:  # find the text(s) at fault: each half on its own
            mid = len(batch) // 2
            return await self._embed(batch[:mid], strict) + await self._embed(batch[mid:], strict)
        h = batch[0][0]
        error = repr(exc)
        previous = self.failing.get(h)
        attempts = (previous.attempts if previous else 0) + 1
        delay = doubling(attempts, RETRY_FIRST_S, RETRY_MAX_S)
        self.failing[h] = Failure(attempts, error, self.clock() + delay, time.time() + delay)
        log.error(
            "embed_failed",
            hash=h[:12],
            attempts=attempts,
            retry_in_s=delay,
            error=error,
            vectors=getattr(self.store, "name", "active"),
        )
        return 0

    def failures(self) -> dict[str, object]:
        """What `index_status` reports: how many texts are set aside, the last error, the next retry."""
        if not self.failing:
            return {"count": 0, "last_error": None, "next_retry_at": None}
        last = max(self.failing.values(), key=lambda f: f.retry_at)
        return {
            "count": len(self.failing),
            "last_error": last.last_error,
            "next_retry_at": round(min(f.retry_at_wall for f in self.failing.values()), 3),
        }

    async def embed_pending(
        self, progress: Progress | None = None, limit: int | None = None, stage: str = "embed"
    ) -> int:
        """Embed every due pending text (`groove index`). Returns texts embedded.

        The queue is read a window of `LENGTH_WINDOW` batches at a time and each window is
        cut into batches of texts of similar length (a padding model pads a batch to its
        longest text; the queue itself is in note order). Each batch's vectors are stored
        while the next batch is encoded: the writer and the model work at the same time.
        """
        total = await self.store.pending_count()
        done = 0
        send, recv = anyio.create_memory_object_stream[tuple[list[str], np.ndarray]](1)

        async def store() -> None:
            nonlocal done
            async with recv:
                async for hashes, vectors in recv:
                    try:
                        await self.store.store_vectors(hashes, vectors)
                    finally:
                        self.inflight.difference_update(hashes)
                    self._recovered(hashes)
                    done += len(hashes)
                    if progress:
                        progress(stage, done, max(total, done))

        model_error: EmbedderError | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(store)
                async with send:
                    while model_error is None and (limit is None or done < limit):
                        async with self._fetch_lock:
                            skip = self.inflight | self._set_aside()
                            window = await self.store.pending_batch(self.batch_size * LENGTH_WINDOW, skip)
                            self.inflight.update(h for h, _ in window)
                        if not window:
                            break
                        batches = by_length(window, self.batch_size)
                        for i, batch in enumerate(batches):
                            try:
                                vectors = await self.run(self.embedder.embed_documents, [c for _, c in batch])
                            except EmbedderError as exc:
                                # The model cannot go on: stop, but let the storer keep what was embedded.
                                self.inflight.difference_update(h for b in batches[i:] for h, _ in b)
                                model_error = exc
                                break
                            except Exception as exc:  # noqa: BLE001 - split, find the text at fault, store the rest
                                try:
                                    stored = await self._failed(batch, True, exc)
                                    done += stored  # after the await: the storer adds to `done` meanwhile
                                finally:
                                    self.inflight.difference_update(h for h, _ in batch)
                                continue
                            await send.send(([h for h, _ in batch], vectors))
        except BaseExceptionGroup as group:  # one failure (the database): raise it as itself
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        if model_error is not None:
            raise model_error
        return done

    def _recovered(self, hashes: Sequence[str]) -> None:
        for h in hashes:
            if self.failing.pop(h, None) is not None:
                log.info("embed_recovered", hash=h[:12])


def by_length(items: Sequence[tuple[str, str]], size: int) -> list[list[tuple[str, str]]]:
    """(hash, text) pairs cut into batches of `size` texts of similar length (shortest first)."""
    ordered = sorted(items, key=lambda item: (len(item[1]), item[0]))
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]
