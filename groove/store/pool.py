"""A small pool of read-only connections: searches read beside the writer (WAL) and never wait for it."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import aiosqlite
import anyio

from groove.store import db


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
            async with self._lock:
                conn = self._free.pop() if self._free else None
            if conn is None:
                conn = await db.connect(self.path, readonly=True)
                self._all.append(conn)
            try:
                yield conn
            finally:
                self._free.append(conn)

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            for conn in self._all:
                try:
                    await conn.close()
                except Exception:  # noqa: BLE001 - closing on the way out
                    pass
        self._all.clear()
        self._free.clear()
