"""The PostgreSQL store: one index in one database, written and searched by any number of processes.

`PostgresStore.open` connects (a pool of connections, and for a writer or a long-running reader one
session connection of its own), creates the extensions and the schema on first use (under an advisory lock,
so two processes starting at once create it once), checks the store's version and model, and for a writer
claims its notes folders: each folder is indexed by one process at a time, held by an advisory lock on that
process's session (a second claimant is refused with the holder's host and command; a holder killed with
kill -9 leaves nothing behind, its session and lock end with it).

Every committed note write is announced on the `groove_changes` channel (LISTEN/NOTIFY); a process that
serves searches listens on its session and hands the changed paths to its listeners (resource notifications,
the in-memory vectors' refresh, the off_topic calibration).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import numpy as np
import psycopg

from groove.logs import get_logger
from groove.store.address import redact
from groove.store.memory import VectorMatrix, read_all
from groove.store.postgres import writer
from groove.store.postgres.connection import (
    ConnectError,
    Pool,
    connect,
    connect_plain,
    ensure_extensions,
    host_name,
    sync_connect,
)
from groove.store.postgres.reads import Counts, PostgresReads, scalar
from groove.store.postgres.schema import LOCK_FOLDER, LOCK_SCHEMA, MIGRATIONS, SCHEMA, SCHEMA_VERSION, statements
from groove.store.postgres.search import as_array
from groove.store.protocols import PARKED_VECTOR_GRACE_S, StoreError

log = get_logger(__name__)

POLL_S = 2.0  # a search node on a read replica reads the changes table this often
GROOVE_TABLES = (
    "meta", "documents", "doc_tags", "embeddings", "chunks", "postings", "vocab", "text_stats", "skipped",
    "note_names", "links", "queue", "folders", "eval_history", "changes", "parked_vectors", "note_history",
)  # fmt: skip

ChangeListener = Callable[[list[str], bool], Awaitable[None]]


class ClaimError(StoreError):
    """A notes folder is indexed by another process."""

    kind = "busy"


class PostgresWrites:
    """`groove.store.protocols.IndexWrites` over the pool; the vectors freed by deleted chunks are remembered
    for `collect_freed`."""

    def __init__(self, store: PostgresStore):
        self.store = store
        self.freed: set[int] = set()

    async def write_note(
        self, *, rel: str, parsed: Any, size: int, mtime_ns: int, file_hash: str, doc_id: int | None
    ) -> tuple[int, int]:
        async with self.store.pool.connection() as conn:
            doc, inserted, freed = await writer.write_note(
                conn, rel=rel, parsed=parsed, size=size, mtime_ns=mtime_ns, file_hash=file_hash, doc_id=doc_id
            )
        self.freed |= freed
        return doc, inserted

    async def touch_document(self, doc_id: int, size: int, mtime_ns: int) -> None:
        async with self.store.pool.connection() as conn:
            await writer.touch_document(conn, doc_id, size, mtime_ns)

    async def delete_documents(self, paths: Collection[str]) -> int:
        async with self.store.pool.connection() as conn:
            count, freed = await writer.delete_documents(conn, sorted(paths))
        self.freed |= freed
        return count

    async def record_skipped(self, skipped: Mapping[str, str], *, replace_all: bool) -> None:
        async with self.store.pool.connection() as conn:
            self.freed |= await writer.record_skipped(
                conn, skipped, replace_all=replace_all, prefixes=self.store.prefixes
            )

    async def set_meta(self, key: str, value: str) -> None:
        async with self.store.pool.connection() as conn:
            await writer.set_meta(conn, key, value)

    async def collect_garbage(self, grace_s: float = PARKED_VECTOR_GRACE_S) -> int:
        async with self.store.pool.connection() as conn:
            n = await writer.collect(conn, None, grace_s)
        self.freed.clear()
        return n

    async def collect_freed(self, grace_s: float = PARKED_VECTOR_GRACE_S) -> int:
        freed, self.freed = self.freed, set()
        async with self.store.pool.connection() as conn:
            return await writer.collect(conn, freed, grace_s)

    async def merge_full_text(self, written: int) -> bool:
        """After a large write: the planner's statistics of the full-text tables brought up to date."""
        if written < 2_000:
            return False
        async with self.store.pool.connection() as conn:
            await conn.execute("ANALYZE chunks")
            await conn.execute("ANALYZE postings")
            await conn.execute("ANALYZE vocab")
        return True

    async def known_documents(self) -> dict[str, tuple[int, int, int, str]]:
        async with self.store.reading() as reads:
            return await reads.known_documents()

    async def skipped(self) -> dict[str, str]:
        async with self.store.reading() as reads:
            return await reads.skipped()

    async def meta(self, key: str) -> str | None:
        async with self.store.reading() as reads:
            return await reads.meta(key)

    async def sample_contents(self, n: int) -> list[str]:
        async with self.store.reading() as reads:
            return await reads.sample_contents(n)

    async def distinct_texts(self) -> int:
        async with self.store.pool.connection() as conn:
            return int(await scalar(conn, "SELECT count(DISTINCT hash) FROM chunks") or 0)


class PostgresQueue:
    """`EmbeddingStore`: texts handed out disjointly to every worker of every process (module doc)."""

    name = "active"

    def __init__(self, store: PostgresStore):
        self.store = store

    async def pending_count(self) -> int:
        async with self.store.reading() as reads:
            return await reads.pending_count()

    async def pending_batch(self, limit: int, exclude: Collection[str] = ()) -> list[tuple[str, str]]:
        async with self.store.session() as session:
            return await writer.take_batch(session, limit, exclude)

    async def store_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> int:
        try:
            async with self.store.pool.connection() as conn:
                return await writer.store_vectors(conn, hashes, vectors)
        finally:
            async with self.store.session() as session:
                await writer.release(session, hashes)

    async def release(self, hashes: Sequence[str]) -> None:
        async with self.store.session() as session:
            await writer.release(session, hashes)


def load_all(url: str) -> Callable[[int], tuple[tuple[Any, ...], Any]]:
    """`VectorMatrix`'s loader: every vector over a connection of its own, in one repeatable-read transaction
    with the stamp, streamed in batches."""

    def load(max_bytes: int) -> tuple[tuple[Any, ...], Any]:
        conn = sync_connect(url)
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                stamp = tuple(
                    conn.execute(
                        "SELECT (SELECT value FROM meta WHERE key = 'model'),"
                        " (SELECT value FROM meta WHERE key = 'dimension'), (SELECT max(id) FROM embeddings),"
                        " (SELECT value FROM meta WHERE key = 'vectors_removed')"
                    ).fetchone()
                    or ()
                )
                count = int((conn.execute("SELECT count(*) FROM embeddings").fetchone() or (0,))[0])
                with conn.cursor(name="groove_vectors") as cur:
                    cur.itersize = 4096
                    cur.execute("SELECT id, embedding FROM embeddings")

                    def batches() -> Any:
                        while rows := cur.fetchmany(4096):
                            yield [(int(i), as_array(v).tobytes()) for i, v in rows]

                    return read_all(stamp, count, batches(), max_bytes)
        finally:
            conn.close()

    return load


class PostgresStore:
    """One index in a PostgreSQL database (`groove.store.protocols.Store`)."""

    kind = "postgresql"

    def __init__(self, url: str, pool_size: int = 8):
        self.url = url
        self.location = redact(url)
        self.switch: dict[str, Any] | None = None
        self.pool = Pool(url, pool_size)
        self.counts = Counts()
        self.prefixes: list[str] = [""]  # the paths this process writes under (its folders' names)
        self._session: psycopg.AsyncConnection[Any] | None = None
        self._session_lock = anyio.Lock()
        self._writes: PostgresWrites | None = None
        self._listeners: list[ChangeListener] = []
        self._listening: anyio.CancelScope | None = None

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        writer_: bool,
        pool: bool = False,
        model: str,
        dimension: int,
        describe: str = "",
        settings_json: str | None = None,
        any_model: bool = False,
        rebuild: bool = False,
        claims: Sequence[tuple[str, str]] = (),
        pool_size: int = 8,
    ) -> PostgresStore:
        store = cls(url, pool_size)
        try:
            if writer_:
                await ensure_extensions(url)
            else:  # before the pool, whose connections need pgvector's type: an empty database says so first
                await store._check_is_store()
            await store.pool.open()
            if writer_ or pool:
                store._session = await connect(url)
            if writer_:
                await store._prepare(model, dimension, describe, settings_json, rebuild)
                await store._claim(claims)
                store._writes = PostgresWrites(store)
            else:
                await store._check_existing(model, dimension, any_model)
        except BaseException:
            await store.close()
            raise
        return store

    # -- schema and identity --------------------------------------------------------------------------------
    async def _prepare(
        self, model: str, dimension: int, describe: str, settings_json: str | None, rebuild: bool
    ) -> None:
        assert self._session is not None
        s = self._session
        await s.execute("SELECT pg_advisory_lock(%s, 0)", (LOCK_SCHEMA,))
        try:
            if rebuild and await self._is_store(s):
                log.info("index_rebuild", store=self.location)
                async with s.transaction():
                    for table in GROOVE_TABLES:
                        await s.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
            if not await self._is_store(s):
                others = await self._other_tables(s)
                if others:
                    raise StoreError(
                        f"the database {self.location} holds other tables ({', '.join(others[:5])}) and no groove "
                        "store: give groove a database of its own (createdb groove) so it never writes into "
                        "another program's tables"
                    )
                async with s.transaction():
                    for statement in statements(SCHEMA.replace("{dim}", str(int(dimension)))):
                        await s.execute(statement)
                    for key, value in (
                        ("schema_version", str(SCHEMA_VERSION)),
                        ("model", model),
                        ("dimension", str(dimension)),
                        ("embeddings_computed", "0"),
                        ("vectors_removed", "0"),
                        ("created_at", str(time.time())),
                        ("history_since", str(time.time())),
                    ):
                        await writer.set_meta(s, key, value)
                    if settings_json is not None:
                        await writer.set_meta(s, "embedding_settings", settings_json)
                log.info("store_created", store=self.location, model=model, dimension=dimension)
            await self._migrate(s)
            await self._check_identity(s, model, dimension)
            await writer.set_meta(s, "kb_path", describe)
        finally:
            await s.execute("SELECT pg_advisory_unlock(%s, 0)", (LOCK_SCHEMA,))

    @staticmethod
    async def _is_store(conn: psycopg.AsyncConnection[Any]) -> bool:
        if await scalar(conn, "SELECT to_regclass('meta')") is None:
            return False
        return await scalar(conn, "SELECT value FROM meta WHERE key = 'schema_version'") is not None

    @staticmethod
    async def _other_tables(conn: psycopg.AsyncConnection[Any]) -> list[str]:
        cur = await conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> ALL(%s) ORDER BY 1",
            (list(GROOVE_TABLES),),
        )
        return [r[0] for r in await cur.fetchall()]

    async def _migrate(self, conn: psycopg.AsyncConnection[Any]) -> None:
        version = int(await scalar(conn, "SELECT value FROM meta WHERE key = 'schema_version'") or 0)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the store {self.location} has schema version {version}, written by a newer groove than this one "
                f"(it understands {SCHEMA_VERSION}): upgrade groove on this machine"
            )
        while version < SCHEMA_VERSION:
            async with conn.transaction():
                for statement in statements(MIGRATIONS.get(version, "")):
                    await conn.execute(statement)
                version += 1
                await writer.set_meta(conn, "schema_version", str(version))
            log.info("store_migrated", store=self.location, schema_version=version)

    async def _check_identity(self, conn: psycopg.AsyncConnection[Any], model: str, dimension: int) -> None:
        built = await scalar(conn, "SELECT value FROM meta WHERE key = 'model'")
        dim = await scalar(conn, "SELECT value FROM meta WHERE key = 'dimension'")
        if built is not None and (built != model or int(dim or 0) != dimension):
            raise StoreError(
                f"the store {self.location} was built with {built} ({dim} dims) but the configuration asks for "
                f"{model} ({dimension} dims); set [embedding] model back, or run `groove index --rebuild --store URL` "
                "to embed every note again with the new model (the side-by-side model switch is the SQLite store's)"
            )

    async def _check_is_store(self) -> None:
        conn = await connect_plain(self.url)
        try:
            if not await self._is_store(conn):
                raise StoreError(
                    f"no groove store in the database {self.location}; run `groove index --store URL` first "
                    "(with --kb PATH: the folder to index into it)"
                )
        finally:
            await conn.close()

    async def _check_existing(self, model: str, dimension: int, any_model: bool) -> None:
        async with self.pool.connection() as conn:
            version = int(await scalar(conn, "SELECT value FROM meta WHERE key = 'schema_version'") or 0)
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the store {self.location} has schema version {version}, written by a newer groove than this "
                    f"one (it understands {SCHEMA_VERSION}): upgrade groove on this machine"
                )
            if version < SCHEMA_VERSION:
                raise StoreError(
                    f"the store {self.location} has schema version {version}; run `groove index --store URL` once "
                    "to upgrade it (nothing is embedded again)"
                )
            if not any_model:
                await self._check_identity(conn, model, dimension)

    # -- folder claims --------------------------------------------------------------------------------------
    async def _claim(self, claims: Sequence[tuple[str, str]]) -> None:
        """Claim each (name, path) notes folder for this process, or refuse naming the process that holds it."""
        if not claims:
            return
        assert self._session is not None
        s = self._session
        command = " ".join(["groove", *sys.argv[1:]]) if sys.argv else "groove"
        held: list[str] = []
        for name, path in claims:
            got = await scalar(s, "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (LOCK_FOLDER, name))
            if not got:
                cur = await s.execute("SELECT host, pid, command, claimed_at FROM folders WHERE name = %s", (name,))
                row = await cur.fetchone()
                for h in held:
                    await s.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LOCK_FOLDER, h))
                who = (
                    f"groove on {row[0]} (pid {row[1]}, `{row[2]}`, since "
                    f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(row[3]))})"
                    if row
                    else "another groove process"
                )
                raise ClaimError(
                    f"the notes folder {name!r} is already indexed into {self.location} by {who}: one process "
                    "indexes a folder (serve it from there, or stop that one first); search nodes need no folder "
                    "(`groove serve --store URL`)"
                )
            held.append(name)
            await s.execute(
                "INSERT INTO folders(name, path, host, pid, command, claimed_at) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (name) DO UPDATE SET path = excluded.path, host = excluded.host, pid = excluded.pid,"
                " command = excluded.command, claimed_at = excluded.claimed_at",
                (name, path, host_name(), os.getpid(), command, time.time()),
            )
        self.prefixes = [f"{name}/" for name, _ in claims]

    # -- the Store protocol -----------------------------------------------------------------------------------
    @property
    def writable(self) -> bool:
        return self._writes is not None

    @property
    def writes(self) -> PostgresWrites:
        assert self._writes is not None, "open the store as a writer to write"
        return self._writes

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[PostgresReads]:
        async with self.pool.connection() as conn:
            yield PostgresReads(conn, self.counts)

    @asynccontextmanager
    async def spare_reading(self) -> AsyncIterator[PostgresReads | None]:
        yield None  # the pool serves each leg's reads in turn; a search holds one connection

    @asynccontextmanager
    async def session(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """This process's own connection (its claims, the texts it took, LISTEN), one statement at a time."""
        assert self._session is not None, "the store has no session (open it as a writer or a server)"
        async with self._session_lock:
            yield self._session

    def queue(self, shadow_set: bool = False) -> PostgresQueue:
        if shadow_set:
            raise StoreError("a model switch in a PostgreSQL store: run `groove index --rebuild --store URL`")
        return PostgresQueue(self)

    def vector_memory(self, max_bytes: int) -> VectorMatrix:
        return VectorMatrix(load_all(self.url), max_bytes)

    async def shadow_pending(self) -> int:
        return 0

    async def swap_shadow(self) -> dict[str, Any]:
        raise StoreError("no model switch runs in a PostgreSQL store")

    @property
    def eval_history_location(self) -> str:
        return f"the eval_history table of {self.location}"

    async def eval_history(self) -> list[str]:
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT line FROM eval_history ORDER BY id")
            return [r[0] for r in await cur.fetchall()]

    async def append_eval_history(self, line: str, keep: int) -> None:
        try:
            async with self.pool.connection() as conn, conn.transaction():
                await conn.execute("INSERT INTO eval_history (line) VALUES (%s)", (line,))
                await conn.execute(
                    "DELETE FROM eval_history WHERE id NOT IN (SELECT id FROM eval_history ORDER BY id DESC LIMIT %s)",
                    (max(keep, 0),),
                )
        except psycopg.errors.ReadOnlySqlTransaction:
            raise StoreError(
                f"{self.location} is a read replica: the run is not recorded (run groove eval against the primary "
                "to record it)"
            ) from None

    async def folders(self) -> list[dict[str, Any]]:
        """Every notes folder the store holds notes of: name, path and the host that indexes it."""
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT name, path, host, pid, claimed_at FROM folders ORDER BY name")
            return [
                {"name": n, "path": p, "host": h, "pid": pid, "claimed_at": at}
                for n, p, h, pid, at in await cur.fetchall()
            ]

    # -- changes from other processes ----------------------------------------------------------------------
    async def listen(self, listener: ChangeListener, on_ready: Callable[[], None] | None = None) -> None:
        """Call `listener(paths, list_changed)` for every change any process commits to this store, until
        cancelled; on a dedicated connection (LISTEN keeps it). `on_ready` once it listens."""
        conn = await connect(self.url)
        try:
            if await scalar(conn, "SELECT pg_is_in_recovery()"):
                await self._poll(conn, listener, on_ready)
                return
            await conn.execute(f"LISTEN {writer.NOTIFY_CHANNEL}")
            if on_ready is not None:
                on_ready()
            async for note in conn.notifies():
                await _hand_on(note.payload, listener)
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()

    async def _poll(
        self, conn: psycopg.AsyncConnection[Any], listener: ChangeListener, on_ready: Callable[[], None] | None
    ) -> None:
        """A read replica (LISTEN is not allowed there): the changes table's new rows, every POLL_S seconds."""
        last = int(await scalar(conn, "SELECT coalesce(max(id), 0) FROM changes") or 0)
        log.info("store_changes_polled", store=self.location, every_s=POLL_S, reason="a replica cannot LISTEN")
        if on_ready is not None:
            on_ready()
        while True:
            await anyio.sleep(POLL_S)
            cur = await conn.execute("SELECT id, payload FROM changes WHERE id > %s ORDER BY id", (last,))
            for change_id, payload in await cur.fetchall():
                last = int(change_id)
                await _hand_on(payload, listener)

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._session is not None:
                try:
                    await self._session.close()  # its advisory locks (claims, texts taken) end with it
                except psycopg.Error:
                    pass
                self._session = None
            try:
                await self.pool.close()
            except Exception:  # noqa: BLE001 - closing on the way out
                pass


async def _hand_on(payload: str, listener: ChangeListener) -> None:
    try:
        body = json.loads(payload)
    except ValueError:
        return
    await listener(list(body.get("paths") or []), bool(body.get("list_changed")))


__all__ = ["ClaimError", "ConnectError", "PostgresStore"]
