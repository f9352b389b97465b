"""A daemon run in process for a test (the real watcher on real files), and a stand-in daemon for the MCP tools."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import anyio

from groove.daemon import Daemon
from groove.folders import Folders, NotesFolder
from groove.search.answers import SearchAnswer
from groove.search.request import SearchRequest
from tests.support.common import eventually

TIMEOUT = 60.0


@asynccontextmanager
async def running(settings, embedder=None, *, batches: list[set[str]] | None = None,
                  **index_options) -> AsyncIterator[Daemon]:
    """A daemon over the settings' folder, started and reconciled; stopped on exit. Without `embedder`, the
    suite's default (the bag-of-words fake; the real model for a test that takes conftest's `real_model`).
    `batches` records every batch of paths the watcher hands on."""
    daemon = Daemon(settings, embedder=embedder, **index_options)
    if batches is not None:
        submit = daemon.submit_paths

        async def recording(rels: set[str]) -> None:
            batches.append(set(rels))
            await submit(rels)

        daemon.submit_paths = recording  # type: ignore[method-assign]
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        with anyio.fail_after(TIMEOUT):
            await daemon.reconciled.wait()
        try:
            yield daemon
        finally:
            daemon.stop()


async def paths_for(daemon: Daemon, query: str, retriever: str = "hybrid") -> list[str]:
    resp = await daemon.service.search(SearchRequest(query=query, limit=10, retriever=retriever))
    return [r.path for r in resp.results]


async def idle(daemon: Daemon, timeout: float = 60.0) -> None:
    """Until nothing is waiting to be embedded or being embedded."""
    async def done() -> bool:
        return await daemon.index.pending() == 0 and not daemon._inflight

    await eventually(done, "the embedding queue to drain", timeout=timeout)


def fast(make_settings, kb: Path, **extra):
    """Settings whose watcher hands changes on after 50 ms."""
    return make_settings(kb, **{"watch.debounce_ms": 50, **extra})


class RecordingDaemon:
    """What the MCP search tool hands the daemon, recorded (no index needed to check the argument handling)."""

    def __init__(self) -> None:
        self.listeners: list[Any] = []
        self.reconciled = anyio.Event()
        self.reconciled.set()
        self.requests: list[SearchRequest] = []
        self.service = self  # build_server calls `daemon.service` (groove.api.service.Service): the stand-in answers itself
        self.folders = Folders([NotesFolder("notes", Path("/notes"))])  # one folder, as the service has it
        self.search_only = False  # a daemon that indexes its folder (not a search node of a shared store)

    async def search(self, req: SearchRequest) -> SearchAnswer:
        self.requests.append(req)
        return SearchAnswer(results=[], low_confidence=False, filter_applied=None, pending_chunks=0,
                            vectors_degraded=False)


@asynccontextmanager
async def healthz_client(daemon: Daemon, port: int = 3999) -> AsyncIterator[Any]:
    """An httpx client on the daemon's real Starlette app (guard, body limit, /healthz), in process; `port` is
    only in Host headers: nothing listens."""
    import httpx

    from groove.serve.http.server import Allowed, build_app
    from groove.serve.mcp.server import build_server

    app = build_app(build_server(daemon), daemon, daemon.settings, Allowed.for_bind("127.0.0.1", port))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"http://127.0.0.1:{port}") as client:
        yield client


class FullDisk:
    """The fault of a full disk under the embedding workers (issue 36, point 8): while `full` is set, the
    daemon's embedding queue refuses every batch of vectors with ENOSPC, as SQLite on a full disk does."""

    def __init__(self, daemon: Daemon):
        self.queue = daemon.index.embedding.store
        self.real = self.queue.store_vectors
        self.full = True
        self.refused = 0
        self.queue.store_vectors = self  # type: ignore[method-assign]

    async def __call__(self, hashes, vectors):
        if self.full:
            self.refused += 1
            raise OSError(28, "database or disk is full")
        return await self.real(hashes, vectors)
