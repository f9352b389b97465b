"""The embedding worker pool: one model per process, used from worker threads.

Bulk work (chunks without a vector, from the database queue) runs on its own
capacity limiter of `workers` threads, in batches. Queries never queue behind
it: they run on a separate thread slot at once, and queries that arrive while
one is being embedded are embedded together in the next call (torch releases
the GIL, so a query and a bulk batch share the CPU rather than wait in line).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import anyio
import numpy as np

from groove.embed.embedder import Embedder
from groove.logs import get_logger

log = get_logger(__name__)


class QueryBatcher:
    """`await embed(text)`; concurrent callers are embedded together in one model call."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self._waiting: list[tuple[str, anyio.Event, dict]] = []
        self._running = False
        self._limiter = anyio.CapacityLimiter(1)
        self.calls = 0  # model calls made (for tests and benchmarks)
        self.texts = 0  # texts embedded

    async def embed(self, text: str) -> np.ndarray:
        done = anyio.Event()
        slot: dict = {}
        self._waiting.append((text, done, slot))
        if not self._running:
            self._running = True
            with anyio.CancelScope(shield=True):
                try:
                    while self._waiting:
                        batch, self._waiting = self._waiting, []
                        await self._run(batch)
                finally:
                    self._running = False
        await done.wait()
        if "error" in slot:
            raise slot["error"]
        return slot["vector"]

    async def warm_up(self) -> bool:
        """Load the model now (the daemon's start), on the query slot, so the first search does
        not pay for it. Only for in-process models that are not loaded yet (a remote backend
        loads nothing here). A failure is logged, not raised: searches report it themselves."""
        if getattr(self.embedder, "loaded", True):
            return False
        t = time.perf_counter()
        try:
            await anyio.to_thread.run_sync(self.embedder.embed_queries, ["groove"], limiter=self._limiter)
        except Exception as exc:  # noqa: BLE001 - the first search will say what is wrong
            log.warning("model_warm_up_failed", error=repr(exc))
            return False
        engine = getattr(self.embedder, "engine_note", None)  # the default model: which engine, and why
        log.info("model_loaded", seconds=round(time.perf_counter() - t, 2), **({"engine": engine} if engine else {}))
        return True

    async def _run(self, batch: list[tuple[str, anyio.Event, dict]]) -> None:
        texts = list(dict.fromkeys(t for t, _, _ in batch))
        try:
            vectors = await anyio.to_thread.run_sync(self.embedder.embed_queries, texts, limiter=self._limiter)
            by_text = dict(zip(texts, vectors, strict=True))
            self.calls += 1
            self.texts += len(texts)
            for text, _, slot in batch:
                slot["vector"] = by_text[text]
        except Exception as exc:  # noqa: BLE001 - handed to every waiter
            for _, _, slot in batch:
                slot["error"] = exc
        for _, done, _ in batch:
            done.set()


class BulkLimiter:
    """Thread slots for bulk embedding, separate from the query slot."""

    def __init__(self, workers: int):
        self.limiter = anyio.CapacityLimiter(workers)

    async def embed(self, fn: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str]) -> np.ndarray:
        # A batch in flight must not hold up shutdown: its result is simply not stored (the
        # chunks stay pending in the database and are embedded on the next start).
        return await anyio.to_thread.run_sync(fn, texts, limiter=self.limiter, abandon_on_cancel=True)
