"""Every write to the index. One writer connection; each file changes in one transaction.

A chunk row whose `embedding_id` is NULL is pending work: the embedding queue
lives in the database, so a crash loses nothing. Vectors are keyed by the hash
of the embedded text, so a renamed note, a moved section or a repeated
paragraph reuses the vector it already has.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite
import anyio
import numpy as np

from groove.corpus.links import note_names, resolve
from groove.corpus.markdown import ParsedNote
from groove.corpus.quality import REPEAT_FREE, repeat_factor, text_quality
from groove.corpus.tags import fold_tag
from groove.store.protocols import HISTORY_KEPT_S, PARKED_VECTOR_GRACE_S
from groove.store.shape import history_row, note_change, section_changes
from groove.store.sqlite.connection import DBError, one
from groove.store.sqlite.schema import FTS_TABLES


@dataclass
class FileWrite:
    doc_id: int
    inserted: int  # chunk rows added


class Tx:
    """`async with Tx(conn):` runs BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error).

    Tasks sharing the writer connection (the indexer, the embedding workers)
    take turns through the connection's `write_lock`, one transaction each,
    so a long reconcile never holds writes for longer than one file.
    """

    def __init__(self, conn: aiosqlite.Connection):
        self.conn = conn
        self.lock = write_lock(conn)

    async def __aenter__(self) -> aiosqlite.Connection:
        await self.lock.acquire()
        try:
            await self.conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self.conn

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            with anyio.CancelScope(shield=True):
                if exc_type is None:
                    await self.conn.execute("COMMIT")
                else:
                    try:
                        await self.conn.execute("ROLLBACK")
                    except DBError:
                        pass
        finally:
            self.lock.release()


def write_lock(conn: aiosqlite.Connection) -> anyio.Lock:
    """The lock that serialises transactions on a writer connection (made on first use)."""
    lock = getattr(conn, "_groove_write_lock", None)
    if lock is None:
        lock = anyio.Lock()
        conn._groove_write_lock = lock  # type: ignore[attr-defined]  # one lock per connection, kept on it
    return lock


async def write_note(
    conn: aiosqlite.Connection,
    *,
    rel: str,
    parsed: ParsedNote,
    size: int,
    mtime_ns: int,
    file_hash: str,
    doc_id: int | None,
) -> FileWrite:
    """Insert or update one note and diff its chunks by hash, in one transaction.

    `doc_id` is the document row to update: the same path, or (for a rename)
    the row of the old path, which this moves to `rel`.
    """
    now = time.time()
    doc_values = (
        rel,
        parsed.title,
        json.dumps(list(parsed.tags), ensure_ascii=False),
        parsed.date,
        json.dumps(parsed.frontmatter, ensure_ascii=False, default=str),
        json.dumps(list(parsed.warnings), ensure_ascii=False),
        size,
        mtime_ns,
        file_hash,
        now,
    )
    inserted = 0
    async with Tx(conn):
        old_path = old_hash = None
        if doc_id is not None:
            cur = await conn.execute("SELECT path, hash FROM documents WHERE id = ?", (doc_id,))
            row = await cur.fetchone()
            old_path, old_hash = (row[0], row[1]) if row else (None, None)
        if doc_id is None:
            cur = await conn.execute(
                "INSERT INTO documents(path, title, tags, date, frontmatter, warnings, size, mtime_ns, hash,"
                " indexed_at) VALUES (?,?,?,?,?,?,?,?,?,?) RETURNING id",
                doc_values,
            )
            doc_id = one(await cur.fetchone())[0]
        else:
            await conn.execute(
                "UPDATE documents SET path=?, title=?, tags=?, date=?, frontmatter=?, warnings=?, size=?,"
                " mtime_ns=?, hash=?, indexed_at=? WHERE id=?",
                (*doc_values, doc_id),
            )
        await conn.execute("DELETE FROM doc_tags WHERE doc_id = ?", (doc_id,))
        await conn.executemany(
            "INSERT OR IGNORE INTO doc_tags(doc_id, tag) VALUES (?, ?)",
            [(doc_id, folded) for t in parsed.tags if (folded := fold_tag(t))],
        )
        cur = await conn.execute(
            "SELECT id, hash, ordinal, heading, level, context, start_line, end_line, token_count"
            " FROM chunks WHERE doc_id = ? ORDER BY ordinal",
            (doc_id,),
        )
        old_by_hash: dict[str, list[Any]] = {}
        changed: set[str] = set()  # texts this note gained or lost: their template factor may move
        old_rows = await cur.fetchall()
        for row in old_rows:
            old_by_hash.setdefault(row[1], []).append(row)
        sections = section_changes([(r[1], r[3]) for r in old_rows], [(c.hash, c.heading) for c in parsed.chunks])
        # Texts new to this note whose vectors were parked (a note back under another name): theirs again.
        await unpark(conn, (c.hash for c in parsed.chunks if c.hash not in old_by_hash))
        for chunk in parsed.chunks:
            meta = (
                chunk.ordinal,
                chunk.heading,
                chunk.level,
                chunk.context,
                chunk.start_line,
                chunk.end_line,
                chunk.token_count,
            )
            olds = old_by_hash.get(chunk.hash)
            if olds:
                old = olds.pop(0)
                if tuple(old[2:]) != meta:
                    await conn.execute(
                        "UPDATE chunks SET ordinal=?, heading=?, level=?, context=?, start_line=?, end_line=?,"
                        " token_count=? WHERE id=?",
                        (*meta, old[0]),
                    )
                continue
            score = text_quality(chunk.content)  # its template factor follows (rescore_templates)
            await conn.execute(
                "INSERT INTO chunks(doc_id, ordinal, heading, level, context, content, start_line, end_line,"
                " token_count, hash, embedding_id, queued_at, text_quality, quality)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,(SELECT id FROM embeddings WHERE hash = ?),?,?,?)",
                (
                    doc_id,
                    chunk.ordinal,
                    chunk.heading,
                    chunk.level,
                    chunk.context,
                    chunk.content,
                    chunk.start_line,
                    chunk.end_line,
                    chunk.token_count,
                    chunk.hash,
                    chunk.hash,
                    now,
                    score,
                    score,
                ),
            )
            inserted += 1
            changed.add(chunk.hash)
        stale = [row[0] for rows in old_by_hash.values() for row in rows]
        if stale:
            await conn.executemany("DELETE FROM chunks WHERE id = ?", [(i,) for i in stale])
            changed.update(h for h, rows in old_by_hash.items() if rows)
        await rescore_templates(conn, changed)
        await _write_links(conn, doc_id, rel, parsed, old_path)
        await conn.execute("DELETE FROM skipped WHERE path = ?", (rel,))
        change = note_change(old_path, rel, old_hash, file_hash, sections)
        if change is not None:
            await record_change(conn, now, rel, change, old_path, file_hash, sections if change != "added" else [])
    return FileWrite(doc_id=doc_id, inserted=inserted)


async def record_change(
    conn: aiosqlite.Connection,
    at: float,
    path: str,
    change: str,
    old_path: str | None,
    file_hash: str,
    sections: list[list[str]] | None = None,
) -> None:
    """One row of the change history, inside the caller's transaction; the rows past HISTORY_KEPT_S go."""
    await conn.execute(
        "INSERT INTO note_history(at, path, change, old_path, hash, sections) VALUES (?,?,?,?,?,?)",
        history_row(at, path, change, old_path, file_hash, sections),
    )
    await conn.execute("DELETE FROM note_history WHERE at < ?", (at - HISTORY_KEPT_S,))


async def _write_links(
    conn: aiosqlite.Connection, doc_id: int, rel: str, parsed: ParsedNote, old_path: str | None
) -> None:
    """The note's names and links, in the note's transaction, each link resolved (corpus/links.py). A note that
    is new, renamed, or answers to other names now (its aliases or title changed) resolves again every link
    that names one of its old or new names: links that named nothing find it, and links that named it under
    its old path or name let go of it."""
    names = note_names(rel, parsed.title, parsed.frontmatter)
    before: set[tuple[str, int]] = set()
    if old_path is not None:  # a note already indexed: its names and links are replaced (a new one has none)
        cur = await conn.execute("SELECT name, alias FROM note_names WHERE doc_id = ?", (doc_id,))
        before = {(r[0], r[1]) for r in await cur.fetchall()}
        if before != set(names):
            await conn.execute("DELETE FROM note_names WHERE doc_id = ?", (doc_id,))
        await conn.execute("DELETE FROM links WHERE source_id = ?", (doc_id,))
    if before != set(names):
        await conn.executemany(
            "INSERT INTO note_names(doc_id, name, alias) VALUES (?, ?, ?)",
            [(doc_id, name, alias) for name, alias in names],
        )
    if parsed.links:
        found = await _candidates(conn, {ln.name for ln in parsed.links})
        await conn.executemany(
            "INSERT INTO links(source_id, line, kind, target, name, heading, block, alias, target_id)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            [
                (
                    doc_id,
                    ln.line,
                    ln.kind,
                    ln.target,
                    ln.name,
                    ln.heading,
                    ln.block,
                    ln.alias,
                    resolve(ln.target, ln.kind, rel, found.get(ln.name, ())),
                )
                for ln in parsed.links
            ],
        )
    if old_path != rel or before != set(names):
        await resolve_names(conn, {n for n, _ in names} | {n for n, _ in before})


async def _candidates(conn: aiosqlite.Connection, names: Collection[str]) -> dict[str, list[tuple[int, str, int]]]:
    """name -> (doc id, path, alias) of the notes answering to it: what `resolve` chooses among."""
    cur = await conn.execute(
        "SELECT n.name, n.doc_id, d.path, n.alias FROM note_names n JOIN documents d ON d.id = n.doc_id"
        " WHERE n.name IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(names), ensure_ascii=False),),
    )
    out: dict[str, list[tuple[int, str, int]]] = {}
    for name, doc, path, alias in await cur.fetchall():
        out.setdefault(name, []).append((doc, path, alias))
    return out


async def _names_of(conn: aiosqlite.Connection, doc_id: int) -> set[str]:
    cur = await conn.execute("SELECT name FROM note_names WHERE doc_id = ?", (doc_id,))
    return {r[0] for r in await cur.fetchall()}


async def resolve_names(conn: aiosqlite.Connection, names: Collection[str]) -> None:
    """Resolve again the links that name any of `names` (folded, as `note_names` holds them), inside the caller's
    transaction:
    after a note with such a name was added, renamed or deleted."""
    if not names:
        return
    cur = await conn.execute(
        "SELECT l.id, l.target, l.kind, s.path, l.name, l.target_id FROM links l JOIN documents s ON s.id = l.source_id"
        " WHERE l.name IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(names), ensure_ascii=False),),
    )
    rows = await cur.fetchall()
    if not rows:
        return
    found = await _candidates(conn, names)
    moved = [
        (target, link)
        for link, written, kind, source, name, was in rows
        if (target := resolve(written, kind, source, found.get(name, ()))) != was
    ]
    if moved:  # only the links whose note changed are written
        await conn.executemany("UPDATE links SET target_id = ? WHERE id = ?", moved)


async def _texts_of(conn: aiosqlite.Connection, doc_id: int) -> set[str]:
    cur = await conn.execute("SELECT DISTINCT hash FROM chunks WHERE doc_id = ?", (doc_id,))
    return {r[0] for r in await cur.fetchall()}


async def rescore_templates(conn: aiosqlite.Connection, hashes: Collection[str]) -> None:
    """Inside the caller's transaction, after a note gained or lost the texts `hashes`: each text's chunks
    scored again with the template factor of the notes that hold it now (`chunks.quality` = `text_quality` x
    corpus/quality.py `repeat_factor`). A write moves a text's count of notes by one, so only a text now in
    REPEAT_FREE notes or more can change factor; the rows whose score stays are not written."""
    if not hashes:
        return
    cur = await conn.execute(
        "SELECT hash, count(DISTINCT doc_id) FROM chunks WHERE hash IN (SELECT value FROM json_each(?))"
        " GROUP BY hash HAVING count(DISTINCT doc_id) >= ?",
        (json.dumps(sorted(hashes)), REPEAT_FREE),
    )
    factors = [(repeat_factor(n), h) for h, n in await cur.fetchall()]
    if factors:
        await conn.executemany(
            "UPDATE chunks SET quality = text_quality * ?1 WHERE hash = ?2 AND quality != text_quality * ?1", factors
        )


async def touch_document(conn: aiosqlite.Connection, doc_id: int, size: int, mtime_ns: int) -> None:
    """Same bytes, new mtime: remember the stat so the next scan skips without reading."""
    async with Tx(conn):
        await conn.execute("UPDATE documents SET size=?, mtime_ns=? WHERE id=?", (size, mtime_ns, doc_id))


async def delete_documents(conn: aiosqlite.Connection, paths: Iterable[str]) -> int:
    """Delete notes and all their rows; one transaction per note."""
    count = 0
    for rel in paths:
        async with Tx(conn):
            cur = await conn.execute("SELECT id, hash FROM documents WHERE path = ?", (rel,))
            row = await cur.fetchone()
            if row is None:
                continue
            await record_change(conn, time.time(), rel, "deleted", None, row[1])
            # chunks (and through their triggers the FTS rows), doc_tags, its name and its links go by ON DELETE
            # CASCADE; the links that named it let go of it (ON DELETE SET NULL), then find another note of that
            # name if there is one
            names = await _names_of(conn, row[0])
            texts = await _texts_of(conn, row[0])
            await conn.execute("DELETE FROM documents WHERE id = ?", (row[0],))
            await resolve_names(conn, names)
            await rescore_templates(conn, texts)
            count += 1
    return count


async def record_skipped(conn: aiosqlite.Connection, skipped: dict[str, str], *, replace_all: bool) -> None:
    """Remember why files were skipped (shown by `groove status`). A skipped file has no rows."""
    async with Tx(conn):
        if replace_all:
            await conn.execute("DELETE FROM skipped")
        now = time.time()
        for rel, reason in skipped.items():
            await conn.execute(
                "INSERT INTO skipped(path, reason, at) VALUES (?,?,?) ON CONFLICT(path) DO UPDATE SET "
                "reason=excluded.reason, at=excluded.at",
                (rel, reason, now),
            )
            cur = await conn.execute("SELECT id, hash FROM documents WHERE path = ?", (rel,))
            row = await cur.fetchone()
            if row is not None:  # its chunks, tags, name and links go by ON DELETE CASCADE
                await record_change(conn, now, rel, "deleted", None, row[1])
                names = await _names_of(conn, row[0])
                texts = await _texts_of(conn, row[0])
                await conn.execute("DELETE FROM documents WHERE id = ?", (row[0],))
                await resolve_names(conn, names)
                await rescore_templates(conn, texts)


async def pending_batch(conn: aiosqlite.Connection, limit: int, exclude: Collection[str] = ()) -> list[tuple[str, str]]:
    """The next texts to embed: (hash, content), one per distinct text, newest edits first,
    leaving out the hashes in `exclude` (in flight elsewhere, or set aside after failing)."""
    cur = await conn.execute(
        "SELECT hash, content FROM chunks WHERE embedding_id IS NULL"
        " AND hash NOT IN (SELECT value FROM json_each(?))"
        " GROUP BY hash ORDER BY MAX(queued_at) DESC, MIN(id) LIMIT ?",
        (json.dumps(sorted(exclude)), limit),
    )
    return [(r[0], r[1]) for r in await cur.fetchall()]


async def store_vectors(conn: aiosqlite.Connection, hashes: Sequence[str], vectors: np.ndarray) -> int:
    """Write vectors for texts and attach them to every chunk with that text. Returns chunks updated."""
    attached = 0
    now = time.time()
    async with Tx(conn):
        for h, vec in zip(hashes, vectors, strict=True):
            cur = await conn.execute("SELECT id FROM embeddings WHERE hash = ?", (h,))
            row = await cur.fetchone()
            if row is None:
                cur = await conn.execute(
                    "INSERT INTO embeddings(hash, created_at) VALUES (?, ?) RETURNING id", (h, now)
                )
                emb_id = one(await cur.fetchone())[0]
                await conn.execute(
                    "INSERT INTO vec_embeddings(rowid, embedding) VALUES (?, ?)",
                    (emb_id, np.asarray(vec, dtype=np.float32).tobytes()),
                )
            else:
                emb_id = row[0]
            cur = await conn.execute(
                "UPDATE chunks SET embedding_id = ? WHERE hash = ? AND embedding_id IS NULL", (emb_id, h)
            )
            attached += cur.rowcount
        await conn.execute(
            "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + ? AS TEXT) WHERE key = 'embeddings_computed'",
            (len(hashes),),
        )
    return attached


async def collect_garbage(conn: aiosqlite.Connection, grace_s: float = PARKED_VECTOR_GRACE_S) -> int:
    """Set aside the vectors no chunk uses any more (one pass over the embeddings, each an index probe into
    chunks: 0.4 s at 100k, 5 s at 1M here), and drop those set aside longer than `grace_s` ago. After a full
    reconcile; a path write collects only its own (`collect_freed`)."""
    async with Tx(conn):
        cur = await conn.execute(
            "SELECT id FROM embeddings WHERE NOT EXISTS (SELECT 1 FROM chunks WHERE chunks.embedding_id = "
            "embeddings.id)"
        )
        ids = [r[0] for r in await cur.fetchall()]
        await _park(conn, ids, grace_s)
        cur = await conn.execute("SELECT 1 FROM sqlite_temp_master WHERE name = 'groove_freed_vectors'")
        if await cur.fetchone() is not None:  # every freed vector is checked now: the list starts over
            await conn.execute(f"DELETE FROM {FREED_TABLE}")
    return len(ids)


async def _park(conn: aiosqlite.Connection, ids: list[int], grace_s: float) -> None:
    """Move these vectors out of the index into `parked_vectors` (keyed by their text's hash), and drop what was
    parked more than `grace_s` ago. Inside the caller's transaction."""
    now = time.time()
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        await conn.execute(
            "INSERT OR REPLACE INTO parked_vectors(hash, vector, at) SELECT e.hash, v.embedding, ? FROM embeddings e"
            f" JOIN vec_embeddings v ON v.rowid = e.id WHERE e.id IN ({marks})",
            (now, *part),
        )
    await conn.executemany("DELETE FROM vec_embeddings WHERE rowid = ?", [(i,) for i in ids])
    await conn.executemany("DELETE FROM embeddings WHERE id = ?", [(i,) for i in ids])
    await conn.execute("DELETE FROM parked_vectors WHERE at < ?", (now - grace_s,))


async def unpark(conn: aiosqlite.Connection, hashes: Iterable[str]) -> int:
    """Give back the parked vectors of these texts (a note back under another name, within the grace period):
    the chunks written next take them by their hash instead of waiting to be embedded. How many came back."""
    wanted = sorted(set(hashes))
    if not wanted:
        return 0
    cur = await conn.execute(
        "SELECT p.hash, p.vector FROM parked_vectors p WHERE p.hash IN (SELECT value FROM json_each(?))"
        " AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.hash = p.hash)",
        (json.dumps(wanted),),
    )
    back = list(await cur.fetchall())
    now = time.time()
    for h, vector in back:
        cur = await conn.execute("INSERT INTO embeddings(hash, created_at) VALUES (?, ?)", (h, now))
        await conn.execute("INSERT INTO vec_embeddings(rowid, embedding) VALUES (?, ?)", (cur.lastrowid, vector))
        await conn.execute("DELETE FROM parked_vectors WHERE hash = ?", (h,))
    return len(back)


FREED_TABLE = "temp.groove_freed_vectors"


async def track_freed_vectors(conn: aiosqlite.Connection) -> None:
    """On the writer connection: remember the vector of every chunk row deleted (a temp table and trigger,
    this connection's own), so that `collect_freed` checks only those, not every vector."""
    await conn.execute("CREATE TEMP TABLE IF NOT EXISTS groove_freed_vectors(id INTEGER PRIMARY KEY)")
    await conn.execute(
        "CREATE TEMP TRIGGER IF NOT EXISTS groove_chunk_freed AFTER DELETE ON main.chunks"
        " WHEN old.embedding_id IS NOT NULL"
        " BEGIN INSERT OR IGNORE INTO groove_freed_vectors(id) VALUES (old.embedding_id); END"
    )


async def collect_freed(conn: aiosqlite.Connection, grace_s: float = PARKED_VECTOR_GRACE_S) -> int:
    """Set aside the vectors that chunks deleted since the last call held and no chunk holds now (the daemon,
    after a path write: a deleted or rewritten note's old sections), for `grace_s`: a section that comes back
    within it, in another file or batch, or after a restart, takes its vector back (`unpark`). Needs
    `track_freed_vectors` on this connection."""
    async with Tx(conn):
        cur = await conn.execute(
            f"SELECT id FROM {FREED_TABLE} f WHERE NOT EXISTS (SELECT 1 FROM chunks WHERE chunks.embedding_id = f.id)"
        )
        ids = [r[0] for r in await cur.fetchall()]
        await _park(conn, ids, grace_s)
        await conn.execute(f"DELETE FROM {FREED_TABLE}")
    return len(ids)


# `groove index` merges the full-text tables after a large write (decision 0013): at least this
# many chunks written, and at least this share of the index.
MERGE_MIN_CHUNKS = 2_000
MERGE_MIN_SHARE = 0.1


def full_text_merge_due(written: int, total: int) -> bool:
    return written >= MERGE_MIN_CHUNKS and written >= MERGE_MIN_SHARE * total


async def merge_full_text(conn: aiosqlite.Connection, written: int) -> bool:
    """After a large write, merge each full-text table's segments into one (FTS5 `optimize`):
    a query then walks one b-tree per term instead of one per segment. Whether it ran."""
    cur = await conn.execute("SELECT count(*) FROM chunks")
    if not full_text_merge_due(written, int(one(await cur.fetchone())[0])):
        return False
    async with Tx(conn):
        for table in FTS_TABLES:
            await conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
    return True


async def set_meta(conn: aiosqlite.Connection, key: str, value: str) -> None:
    async with Tx(conn):
        await conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
