"""A small pool of read-only connections: searches read beside the writer (WAL) and never wait for it.

The pool's connections fetch a statement's rows in the same trip to the connection's thread as the
statement itself (`ReadConnection`): aiosqlite otherwise makes one trip for `execute` and another for
`fetchall`, and each trip is a queue put, a thread wake-up and an event-loop wake-up. A search runs
about sixteen statements, so this halves its thread hops (docs/decisions/0011).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
from aiosqlite.context import contextmanager

from groove.store.sqlite import connection


class FetchedCursor:
    """What `ReadConnection.execute` returns: the rows already fetched, read like an aiosqlite cursor."""

    def __init__(self, rows: list[Any], description: Any, rowcount: int):
        self._rows = rows
        self._next = 0
        self.description = description
        self.rowcount = rowcount
        self.lastrowid = None
        self.arraysize = 1

    async def fetchall(self) -> list[Any]:
        rows, self._next = self._rows[self._next :], len(self._rows)
        return rows

    async def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        n = self.arraysize if size is None else size
        rows = self._rows[self._next : self._next + n]
        self._next += len(rows)
        return rows

    async def __aiter__(self) -> AsyncIterator[Any]:
        while self._next < len(self._rows):
            self._next += 1
            yield self._rows[self._next - 1]

    async def close(self) -> None:
        self._rows, self._next = [], 0


class ReadConnection(aiosqlite.Connection):
    """An aiosqlite connection whose `execute` returns its rows fetched (one thread trip, not two)."""

    @contextmanager
    async def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> FetchedCursor:  # type: ignore[override]  # its rows fetched, not an aiosqlite Cursor
        return await self._execute(self._fetch, sql, [] if parameters is None else parameters)

    def _fetch(self, sql: str, parameters: Sequence[Any]) -> FetchedCursor:
        cursor: sqlite3.Cursor = self._conn.execute(sql, parameters)
        try:
            return FetchedCursor(cursor.fetchall(), cursor.description, cursor.rowcount)
        finally:
            cursor.close()


async def connect_reader(path: Path | str) -> ReadConnection:
    """A read-only connection (as `connection.connect(path, readonly=True)`) that fetches with each statement."""
    conn = ReadConnection(lambda: connection.connect_sync(path, readonly=True), iter_chunk_size=64)
    await conn  # starts its thread and opens the connection
    return conn


class ReaderPool:
    def __init__(self, path: Path, size: int = 4):
        self.path = path
        self.size = size
        self._free: list[aiosqlite.Connection] = []
        self._all: list[aiosqlite.Connection] = []
        self._slots = anyio.Semaphore(size)
        self._lock = anyio.Lock()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._slots:
            conn = await self._take()
            try:
                yield conn
            finally:
                self._free.append(conn)

    @asynccontextmanager
    async def spare(self) -> AsyncIterator[aiosqlite.Connection | None]:
        """A second connection for a search that already holds one, if one is free now, else
        None. It never waits: searches each holding a reader and waiting for a second one
        would wait for each other for ever."""
        try:
            self._slots.acquire_nowait()
        except anyio.WouldBlock:
            yield None
            return
        try:
            conn = await self._take()
            try:
                yield conn
            finally:
                self._free.append(conn)
        finally:
            self._slots.release()

    async def _take(self) -> aiosqlite.Connection:
        async with self._lock:
            conn = self._free.pop() if self._free else None
        if conn is None:
            conn = await connect_reader(self.path)
            self._all.append(conn)
        return conn

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            for conn in self._all:
                try:
                    await conn.close()
                except Exception:  # noqa: BLE001 - closing on the way out
                    pass
        self._all.clear()
        self._free.clear()
