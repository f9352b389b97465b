"""PostgreSQL connections: psycopg 3 with its pool, pgvector's types, and the errors a person can act on.

The driver is psycopg 3 (decision 0022: measured beside asyncpg; libpq reads the password from its usual
places, `PGPASSWORD`, `~/.pgpass` or a service file, and psycopg has COPY and a pool). Every connection
registers pgvector's numpy adapters (vectors travel in binary) and runs in autocommit: a write opens its
own transaction (`transaction()`), a read sees the latest committed state.

Connecting fails with one line that says what to do: the server cannot be reached, the password or user
is refused, the database does not exist, pgvector or pg_trgm is not installed on the server.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector_async

from groove.logs import get_logger
from groove.store.address import redact
from groove.store.protocols import StoreError

log = get_logger(__name__)

DBError = psycopg.Error
EXTENSIONS = ("vector", "pg_trgm")
CONNECT_TIMEOUT_S = 10


class ConnectError(StoreError):
    """The database cannot be reached or used; the message says why and what to do."""


def describe_connect_error(exc: BaseException, url: str) -> str:
    """One line for a failed connection: what happened and what to do."""
    shown = redact(url)
    text = " ".join(str(exc).split())
    low = text.lower()
    if "password authentication failed" in low or "no password supplied" in low:
        return (
            f"PostgreSQL refused the password for {shown}: put the right one in PGPASSWORD or ~/.pgpass "
            f"(host:port:database:user:password) ({text})"
        )
    if "role" in low and "does not exist" in low:
        return f"PostgreSQL has no such user for {shown}: create it, or name another in the URL ({text})"
    if "database" in low and "does not exist" in low:
        return f"the database of {shown} does not exist: create it (createdb NAME) and try again ({text})"
    if any(
        s in low
        for s in ("could not connect", "connection refused", "could not translate host", "timeout expired", "no route")
    ):
        return f"cannot reach the PostgreSQL server of {shown}: is it running, and is the host and port right? ({text})"
    return f"cannot use the PostgreSQL database {shown}: {text}"


def write_failure(exc: BaseException) -> tuple[str, str] | None:
    """(what happened, what to do) for a write PostgreSQL refused for a reason a person can fix, else None."""
    if not isinstance(exc, DBError):
        return None
    text = " ".join(str(exc).split())
    low = text.lower()
    if "no space left" in low or "could not extend file" in low or isinstance(exc, psycopg.errors.DiskFull):
        return f"the disk holding the database is full ({text})", "free some space on the database server"
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction) or "read-only transaction" in low:
        return (
            f"the database is read-only here ({text})",
            "point --store at the primary server (a replica only serves searches)",
        )
    if isinstance(exc, psycopg.OperationalError):
        return f"the connection to the database was lost ({text})", "check that the server runs and can be reached"
    return None


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    await register_vector_async(conn)


async def connect_plain(url: str) -> psycopg.AsyncConnection[Any]:
    """A connection without pgvector's types (a database that may not have them yet)."""
    try:
        return await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise ConnectError(describe_connect_error(exc, url)) from None


async def connect(url: str, *, autocommit: bool = True) -> psycopg.AsyncConnection[Any]:
    """One connection of its own (the session that holds this process's claims and listens for changes)."""
    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise ConnectError(describe_connect_error(exc, url)) from None
    try:
        await _configure(conn)
    except psycopg.Error as exc:  # the vector type is not there: the extension is not installed
        await conn.close()
        raise ConnectError(missing_extension(url, exc)) from None
    return conn


def missing_extension(url: str, exc: BaseException) -> str:
    return (
        f"the database {redact(url)} has no pgvector (the `vector` type is missing: {' '.join(str(exc).split())}); "
        "install pgvector on the server and run CREATE EXTENSION vector; CREATE EXTENSION pg_trgm; "
        "as a user allowed to (groove creates them itself when it may)"
    )


def sync_connect(url: str) -> psycopg.Connection[Any]:
    """A blocking connection (the doctor, the in-memory vectors' bulk load in a worker thread)."""
    from pgvector.psycopg import register_vector

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise ConnectError(describe_connect_error(exc, url)) from None
    try:
        register_vector(conn)
    except psycopg.Error as exc:
        conn.close()
        raise ConnectError(missing_extension(url, exc)) from None
    return conn


async def ensure_extensions(url: str) -> None:
    """CREATE EXTENSION for pgvector and pg_trgm when they are missing (a user allowed to); a clear line when the
    server does not have them installed, or this user may not create them."""
    conn = await connect_plain(url)
    try:
        cur = await conn.execute("SELECT extname FROM pg_extension WHERE extname = ANY(%s)", (list(EXTENSIONS),))
        have = {r[0] for r in await cur.fetchall()}
        for ext in EXTENSIONS:
            if ext in have:
                continue
            try:
                await conn.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}")
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
                # IF NOT EXISTS does not lock: another process starting on the same new database created it between
                # our check and our CREATE (two indexers launched together). It is there, which is all we need.
                continue
            except psycopg.errors.FeatureNotSupported as exc:
                raise ConnectError(_not_installed(url, ext, exc)) from None
            except psycopg.errors.UndefinedFile as exc:
                raise ConnectError(_not_installed(url, ext, exc)) from None
            except psycopg.errors.InsufficientPrivilege:
                raise ConnectError(
                    f"the database {redact(url)} has no {ext} extension and this user may not create it: ask its "
                    f"owner to run CREATE EXTENSION {ext}; (pgvector and pg_trgm are both needed)"
                ) from None
            except psycopg.Error as exc:
                raise ConnectError(_not_installed(url, ext, exc)) from None
    finally:
        await conn.close()


def _not_installed(url: str, ext: str, exc: BaseException) -> str:
    what = "pgvector" if ext == "vector" else ext
    return (
        f"the PostgreSQL server of {redact(url)} does not have {what} installed ({' '.join(str(exc).split())}); "
        f"install it on the server (packages postgresql-NN-pgvector, or a build of pgvector 0.8+), then try again"
    )


class Pool:
    """A pool of connections, each with pgvector's types registered, opened at once (a bad URL fails here)."""

    def __init__(self, url: str, max_size: int = 8):
        self.url = url
        self.pool = psycopg_pool.AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            open=False,
            configure=_configure,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            name="groove",
        )

    async def open(self) -> None:
        try:
            await self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S + 5)
        except psycopg_pool.PoolTimeout:
            # The pool keeps retrying in the background; one direct try says why it cannot connect.
            await self.pool.close()
            conn = await connect(self.url)
            await conn.close()
            raise ConnectError(f"cannot open connections to {redact(self.url)}") from None

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self.pool.connection() as conn:
            yield conn

    async def close(self) -> None:
        await self.pool.close()


def host_name() -> str:
    return socket.gethostname()
