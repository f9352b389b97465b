"""A bare SQLite connection (or a pool of them) as a store's reading factory: what `Searcher.search`,
`calibration_for`, `centres_for` and `run_eval` read through, for a test that holds connections of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import aiosqlite

from groove.store.sqlite.pool import ReaderPool
from groove.store.sqlite.store import SqliteReads


def reading_of(conn: aiosqlite.Connection) -> Callable[[], AbstractAsyncContextManager[SqliteReads]]:
    """A zero-argument factory whose every view is `SqliteReads(conn)`: the same connection each time,
    as a store without a pool of readers gives its one connection."""

    @asynccontextmanager
    async def reading() -> AsyncIterator[SqliteReads]:
        yield SqliteReads(conn)

    return reading


def reading_from(pool: ReaderPool) -> Callable[[], AbstractAsyncContextManager[SqliteReads]]:
    """A factory whose every view is `SqliteReads` on one of the pool's connections, taken for the view and
    given back after (what `SqliteStore.reading` does with its pool)."""

    @asynccontextmanager
    async def reading() -> AsyncIterator[SqliteReads]:
        async with pool.connection() as conn:
            yield SqliteReads(conn)

    return reading
