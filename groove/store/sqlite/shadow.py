"""The shadow vector set: a model switch builds the new vectors beside the old ones.

While the configured model differs from the one the index answers with, the
new model's vectors go into `embeddings_shadow` / `vec_shadow` (keyed by the
same text hash as the active set), and searches keep using the active set.
When every text has its shadow vector, `swap()` replaces the active set in
one transaction and drops the shadow: readers see the old set or the new one,
never a mix (decision 0008).

The meta keys `shadow_model`, `shadow_dimension`, `shadow_settings` and
`shadow_started_at` name the switch in progress; none of them means none is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Sequence
from typing import Any

import aiosqlite
import numpy as np

from groove.store.sqlite.connection import one
from groove.store.sqlite.schema import get_meta_sync, set_meta_sync
from groove.store.sqlite.writer import Tx

EMBEDDINGS = "embeddings_shadow"
VECTORS = "vec_shadow"
_META = ("shadow_model", "shadow_dimension", "shadow_settings", "shadow_started_at")


def _drop_sql() -> list[str]:
    return [f"DROP TABLE IF EXISTS {VECTORS}", f"DROP TABLE IF EXISTS {EMBEDDINGS}"]


def state_sync(con: Any) -> dict[str, Any] | None:
    """The switch in progress ({model, dimension, settings, started_at}), or None."""
    model = get_meta_sync(con, "shadow_model")
    if not model:
        return None
    return {
        "model": model,
        "dimension": int(get_meta_sync(con, "shadow_dimension") or 0),
        "settings": get_meta_sync(con, "shadow_settings"),
        "started_at": float(get_meta_sync(con, "shadow_started_at") or 0.0),
    }


def begin_sync(con: Any, *, model: str, dimension: int, settings_json: str | None) -> bool:
    """Start (or resume) a switch to `model`. Returns True when a new shadow set was created;
    a shadow set for another model is dropped first (the configuration changed again)."""
    current = state_sync(con)
    if current and current["model"] == model and current["dimension"] == dimension:
        return False
    con.execute("BEGIN IMMEDIATE")
    try:
        for sql in _drop_sql():
            con.execute(sql)
        con.execute(
            f"CREATE TABLE {EMBEDDINGS} (id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, created_at REAL NOT NULL)"
        )
        con.execute(f"CREATE VIRTUAL TABLE {VECTORS} USING vec0(embedding float[{int(dimension)}])")
        set_meta_sync(con, "shadow_model", model)
        set_meta_sync(con, "shadow_dimension", str(int(dimension)))
        set_meta_sync(con, "shadow_settings", settings_json or "")
        set_meta_sync(con, "shadow_started_at", str(time.time()))
        # Re-chunk every note for the new model's tokenizer and window at the next reconcile, so
        # that the new model embeds the texts that stay, once. Chunks whose text does not change
        # keep their old vector; the ones that do are embedded by the old model (the active set,
        # for searches now) and by the new one (the shadow set).
        con.execute("UPDATE documents SET mtime_ns = -1, hash = ''")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return True


def drop_sync(con: Any) -> bool:
    """Abandon the switch in progress (the configuration went back to the active model)."""
    if state_sync(con) is None:
        return False
    con.execute("BEGIN IMMEDIATE")
    try:
        for sql in _drop_sql():
            con.execute(sql)
        con.execute(f"DELETE FROM meta WHERE key IN ({','.join('?' * len(_META))})", _META)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return True


async def state(conn: aiosqlite.Connection) -> dict[str, Any] | None:
    cur = await conn.execute(f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(_META))})", _META)
    meta = {key: value for key, value in await cur.fetchall()}
    if not meta.get("shadow_model"):
        return None
    return {
        "model": meta["shadow_model"],
        "dimension": int(meta.get("shadow_dimension") or 0),
        "settings": meta.get("shadow_settings"),
        "started_at": float(meta.get("shadow_started_at") or 0.0),
    }


# --- the shadow set's queue (the same shape as writer.pending_batch / store_vectors) ----------

_MISSING = f"NOT EXISTS (SELECT 1 FROM {EMBEDDINGS} s WHERE s.hash = c.hash)"


async def pending_batch(
    conn: aiosqlite.Connection, limit: int, exclude: Collection[str] = (), after: str = ""
) -> list[tuple[str, str]]:
    """Texts of the index that have no vector of the new model yet: (hash, content), one per text,
    in hash order from just after `after` (a keyset: the `chunks_hash` index is entered at
    `after`, so a switch's next batch does not walk again past every text already embedded)."""
    cur = await conn.execute(
        f"SELECT c.hash, c.content FROM chunks c WHERE c.hash > ? AND {_MISSING}"
        " AND c.hash NOT IN (SELECT value FROM json_each(?)) GROUP BY c.hash ORDER BY c.hash LIMIT ?",
        (after, json.dumps(sorted(exclude)), limit),
    )
    return [(r[0], r[1]) for r in await cur.fetchall()]


async def pending_batch_from(
    conn: aiosqlite.Connection, limit: int, exclude: Collection[str], after: str
) -> tuple[list[tuple[str, str]], str]:
    """The next batch after the cursor `after`, and the cursor for the one after it. Past the last
    hash it wraps to the start once, for texts behind the cursor: edited during the switch, or set
    aside and due again. An empty batch means no text is pending (outside `exclude`)."""
    rows = await pending_batch(conn, limit, exclude, after)
    if len(rows) < limit and after:
        taken = set(exclude) | {h for h, _ in rows}
        rows += await pending_batch(conn, limit - len(rows), taken, "")
    return rows, (rows[-1][0] if rows else "")


async def pending_count(conn: aiosqlite.Connection) -> int:
    cur = await conn.execute(f"SELECT count(DISTINCT c.hash) FROM chunks c WHERE {_MISSING}")
    return int(one(await cur.fetchone())[0] or 0)


async def store_vectors(conn: aiosqlite.Connection, hashes: Sequence[str], vectors: np.ndarray) -> int:
    """Store new-model vectors for texts. Returns vectors written (a text already there is kept)."""
    written = 0
    now = time.time()
    async with Tx(conn):
        for h, vec in zip(hashes, vectors, strict=True):
            cur = await conn.execute(
                f"INSERT INTO {EMBEDDINGS}(hash, created_at) VALUES (?, ?) ON CONFLICT(hash) DO NOTHING RETURNING id",
                (h, now),
            )
            row = await cur.fetchone()
            if row is None:
                continue
            await conn.execute(
                f"INSERT INTO {VECTORS}(rowid, embedding) VALUES (?, ?)",
                (row[0], np.asarray(vec, dtype=np.float32).tobytes()),
            )
            written += 1
        await conn.execute(
            "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + ? AS TEXT) WHERE key = 'embeddings_computed'",
            (written,),
        )
    return written


async def progress(conn: aiosqlite.Connection) -> dict[str, Any] | None:
    """What `status` / `index_status` show while a switch runs: from, to, texts done of total."""
    current = await state(conn)
    if current is None:
        return None
    cur = await conn.execute("SELECT count(DISTINCT hash) FROM chunks")
    total = int(one(await cur.fetchone())[0] or 0)
    missing = await pending_count(conn)
    cur = await conn.execute("SELECT value FROM meta WHERE key = 'model'")
    row = await cur.fetchone()
    return {
        "from": row[0] if row else None,
        "to": current["model"],
        "texts_done": total - missing,
        "texts_total": total,
        "started_at": current["started_at"],
    }


async def swap(conn: aiosqlite.Connection) -> dict[str, Any]:
    """Make the shadow set the active one, in one transaction; drop the old vectors.

    Texts without a shadow vector (none, unless the new model failed on some) become pending
    work of the new active set.
    """
    async with Tx(conn):
        cur = await conn.execute(f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(_META))})", _META)
        meta = {key: value for key, value in await cur.fetchall()}
        if not meta.get("shadow_model"):
            raise RuntimeError("no model switch is in progress")
        cur = await conn.execute("SELECT value FROM meta WHERE key = 'model'")
        old_model = one(await cur.fetchone())[0]
        dimension = int(meta["shadow_dimension"])
        await conn.execute("DELETE FROM embeddings")
        await conn.execute("DELETE FROM parked_vectors")  # the old model's: never given back to the new one
        await conn.execute("DROP TABLE vec_embeddings")
        await conn.execute(f"CREATE VIRTUAL TABLE vec_embeddings USING vec0(embedding float[{dimension}])")
        await conn.execute(
            f"INSERT INTO embeddings(id, hash, created_at) SELECT id, hash, created_at FROM {EMBEDDINGS}"
            " WHERE hash IN (SELECT hash FROM chunks)"
        )
        await conn.execute(
            f"INSERT INTO vec_embeddings(rowid, embedding) SELECT rowid, embedding FROM {VECTORS}"
            " WHERE rowid IN (SELECT id FROM embeddings)"
        )
        await conn.execute(
            "UPDATE chunks SET embedding_id = (SELECT e.id FROM embeddings e WHERE e.hash = chunks.hash)"
        )
        cur = await conn.execute("SELECT count(*) FROM embeddings")
        vectors = int(one(await cur.fetchone())[0])
        cur = await conn.execute("SELECT count(*) FROM chunks WHERE embedding_id IS NULL")
        pending = int(one(await cur.fetchone())[0])
        for sql in _drop_sql():
            await conn.execute(sql)
        updates = {
            "model": meta["shadow_model"],
            "dimension": str(dimension),
            "embedding_settings": meta.get("shadow_settings") or "",
        }
        for key, value in updates.items():
            await conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
        await conn.execute(f"DELETE FROM meta WHERE key IN ({','.join('?' * len(_META))})", _META)
        record = {
            "from": old_model,
            "to": meta["shadow_model"],
            "vectors": vectors,
            "pending_chunks": pending,
            "started_at": float(meta.get("shadow_started_at") or 0.0),
            "swapped_at": time.time(),
        }
        await conn.execute(
            "INSERT INTO meta(key, value) VALUES ('last_model_switch', ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (json.dumps(record, ensure_ascii=False),),
        )
    return record


__all__ = [
    "EMBEDDINGS",
    "VECTORS",
    "begin_sync",
    "drop_sync",
    "pending_batch",
    "pending_count",
    "progress",
    "state",
    "state_sync",
    "store_vectors",
    "swap",
]
