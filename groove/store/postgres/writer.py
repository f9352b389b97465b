"""Every write to a PostgreSQL store: a note's rows in one transaction, deletions, the embedding queue.

Several processes may write one store (each indexing its own notes folders, any number embedding): every
write transaction first takes one transaction-level advisory lock (`schema.LOCK_WRITE`), so note writes,
vector writes and the collection of unused vectors never interleave (no deadlock between two notes'
links, no vector collected while another process attaches it). A transaction is short (one note); the
embedding itself runs outside any lock.

The full-text rows a chunk needs (its phrase text, its bigram and word postings, the vocabulary counts and
the indexes' totals) are computed in Python (groove/corpus/tokens.py) and written with the chunk; a deleted
chunk's postings are found again from its stored text.

The queue: a text without a vector has a `queue` row. A worker takes a batch with `FOR UPDATE SKIP LOCKED`
inside a short transaction and holds each text it took by a session-level advisory lock on its own
connection (`schema.LOCK_TEXT`) until its vector is written: two workers, on one machine or several,
never embed one text twice, and a worker killed mid-batch leaves nothing held (its session ends, its locks
with it).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg

from groove.corpus.links import note_names, resolve
from groove.corpus.quality import REPEAT_FREE, repeat_factor, text_quality
from groove.corpus.tags import fold_tag
from groove.corpus.tokens import ChunkTokens, chunk_tokens
from groove.store.postgres.schema import KIND, LOCK_TEXT, LOCK_WRITE
from groove.store.protocols import HISTORY_KEPT_S, PARKED_VECTOR_GRACE_S
from groove.store.shape import history_row, note_change, section_changes

Conn = psycopg.AsyncConnection[Any]
NOTIFY_CHANNEL = "groove_changes"
CHANGES_KEPT_S = 3600.0  # what a search node on a replica, which cannot LISTEN, reads the changes from
MAX_TF = 999


def pack(tf: tuple[int, int, int]) -> int:
    return min(tf[0], MAX_TF) * 1_000_000 + min(tf[1], MAX_TF) * 1000 + min(tf[2], MAX_TF)


async def lock_writes(conn: Conn) -> None:
    """Inside a transaction: wait for the store's one write lock (released at commit or rollback)."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_WRITE,))


async def notify(conn: Conn, paths: Iterable[str], list_changed: bool = False) -> None:
    """Tell every process listening on this store which notes a committed transaction changed (and whether the
    list of notes did: one was added, renamed or deleted). Sent at commit, dropped at rollback."""
    payload = json.dumps({"paths": sorted(paths)[:200], "list_changed": list_changed}, ensure_ascii=False)
    await conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, payload))
    # The same, kept for an hour: a replica cannot LISTEN, and replays these rows instead. The writes hold the
    # store's write lock, so the ids are in commit order.
    now = time.time()
    await conn.execute("INSERT INTO changes (at, payload) VALUES (%s, %s)", (now, payload))
    await conn.execute("DELETE FROM changes WHERE at < %s", (now - CHANGES_KEPT_S,))


async def _postings(conn: Conn, chunk_id: int, toks: ChunkTokens, sign: int) -> None:
    """Add (sign 1) or remove (sign -1) one chunk's postings, vocabulary counts and the indexes' totals."""
    rows: list[tuple[int, str, int, int]] = []
    for kind, counts, length in (
        ("bigrams", toks.bigrams, toks.bigram_length),
        ("words", toks.words, toks.word_length),
    ):
        rows += [(KIND[kind], term, pack(tf), length) for term, tf in counts.items()]
    if sign > 0 and rows:
        async with conn.cursor() as cur:
            async with cur.copy("COPY postings (kind, term, chunk_id, tf, dl) FROM STDIN") as copy:
                for k, term, tf, dl in rows:
                    await copy.write_row((k, term, chunk_id, tf, dl))
    elif rows:
        for k in (1, 2):
            terms = [t for kk, t, _, _ in rows if kk == k]
            if terms:
                await conn.execute(
                    "DELETE FROM postings WHERE kind = %s AND term = ANY(%s) AND chunk_id = %s", (k, terms, chunk_id)
                )
    vocab = sorted((k, t) for k, t, _, _ in rows)
    if vocab:
        await conn.execute(
            "INSERT INTO vocab (kind, term, df) SELECT k, t, %s FROM unnest(%s::smallint[], %s::text[]) AS u(k, t)"
            " ON CONFLICT (kind, term) DO UPDATE SET df = vocab.df + excluded.df",
            (sign, [k for k, _ in vocab], [t for _, t in vocab]),
        )
    totals = [
        (0, toks.phrase_length > 0, toks.phrase_length),
        (1, bool(toks.bigrams), toks.bigram_length),
        (2, bool(toks.words), toks.word_length),
        (3, True, 0),
    ]
    for k, holds, length in totals:
        await conn.execute(
            "UPDATE text_stats SET rows = rows + %s, length = length + %s WHERE kind = %s",
            (sign * int(holds), sign * length, k),
        )


async def _forget_chunks(conn: Conn, where: str, args: Sequence[Any]) -> set[int]:
    """Remove the full-text rows of the chunks `where` selects (before the chunks themselves go); the vectors
    they held."""
    cur = await conn.execute(f"SELECT id, heading, context, content, embedding_id FROM chunks WHERE {where}", args)
    freed: set[int] = set()
    for cid, heading, context, content, emb in await cur.fetchall():
        await _postings(conn, int(cid), chunk_tokens(heading, context, content), -1)
        if emb is not None:
            freed.add(int(emb))
    return freed


async def write_note(
    conn: Conn, *, rel: str, parsed: Any, size: int, mtime_ns: int, file_hash: str, doc_id: int | None
) -> tuple[int, int, set[int]]:
    """Insert or update one note and diff its chunks by hash, in one transaction. Returns (doc id, chunks
    inserted, vectors its removed chunks held)."""
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
    toks = {c.hash: chunk_tokens(c.heading, c.context, c.content) for c in parsed.chunks}  # before the lock
    inserted = 0
    freed: set[int] = set()
    async with conn.transaction():
        await lock_writes(conn)
        old_path = old_hash = None
        if doc_id is not None:
            cur = await conn.execute("SELECT path, hash FROM documents WHERE id = %s", (doc_id,))
            row = await cur.fetchone()
            old_path, old_hash = (row[0], row[1]) if row else (None, None)
            if row is None:
                doc_id = None
        if doc_id is None:
            # another process may have written this path since the scan: its row is this note's
            cur = await conn.execute("SELECT id, hash FROM documents WHERE path = %s", (rel,))
            row = await cur.fetchone()
            doc_id = int(row[0]) if row else None
            old_path, old_hash = (rel, row[1]) if row else (None, None)
        if doc_id is None:
            cur = await conn.execute(
                "INSERT INTO documents(path, title, tags, date, frontmatter, warnings, size, mtime_ns, hash,"
                " indexed_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                doc_values,
            )
            doc_id = int((await cur.fetchone() or (0,))[0])
        else:
            await conn.execute(
                "UPDATE documents SET path=%s, title=%s, tags=%s, date=%s, frontmatter=%s, warnings=%s, size=%s,"
                " mtime_ns=%s, hash=%s, indexed_at=%s WHERE id=%s",
                (*doc_values, doc_id),
            )
        await conn.execute("DELETE FROM doc_tags WHERE doc_id = %s", (doc_id,))
        tags = sorted({folded for t in parsed.tags if (folded := fold_tag(t))})
        if tags:
            await conn.execute(
                "INSERT INTO doc_tags(doc_id, tag) SELECT %s, t FROM unnest(%s::text[]) t ON CONFLICT DO NOTHING",
                (doc_id, tags),
            )
        cur = await conn.execute(
            "SELECT id, hash, ordinal, heading, level, context, start_line, end_line, token_count"
            " FROM chunks WHERE doc_id = %s ORDER BY ordinal",
            (doc_id,),
        )
        old_by_hash: dict[str, list[Any]] = {}
        changed: set[str] = set()
        old_rows = await cur.fetchall()
        for row in old_rows:
            old_by_hash.setdefault(row[1], []).append(row)
        sections = section_changes([(r[1], r[3]) for r in old_rows], [(c.hash, c.heading) for c in parsed.chunks])
        # Texts new to this note whose vectors were parked (a note back under another name): theirs again.
        await unpark(conn, [c.hash for c in parsed.chunks if c.hash not in old_by_hash])
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
                        "UPDATE chunks SET ordinal=%s, heading=%s, level=%s, context=%s, start_line=%s, end_line=%s,"
                        " token_count=%s WHERE id=%s",
                        (*meta, old[0]),
                    )
                continue
            t = toks[chunk.hash]
            score = text_quality(chunk.content)
            cur = await conn.execute(
                "INSERT INTO chunks(doc_id, ordinal, heading, level, context, content, start_line, end_line,"
                " token_count, hash, embedding_id, queued_at, text_quality, quality, fold_h, fold_x, fold_c,"
                " phrase_len, bigram_len, word_len)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,(SELECT id FROM embeddings WHERE hash = %s),%s,%s,%s,"
                " %s,%s,%s,%s,%s,%s) RETURNING id, embedding_id",
                (
                    doc_id,
                    *meta[:4],
                    chunk.content,
                    chunk.start_line,
                    chunk.end_line,
                    chunk.token_count,
                    chunk.hash,
                    chunk.hash,
                    now,
                    score,
                    score,
                    *t.phrases,
                    t.phrase_length,
                    t.bigram_length,
                    t.word_length,
                ),
            )
            cid, emb = await cur.fetchone() or (0, None)
            await _postings(conn, int(cid), t, 1)
            if emb is None:
                await conn.execute(
                    "INSERT INTO queue(hash, queued_at) VALUES (%s, %s)"
                    " ON CONFLICT (hash) DO UPDATE SET queued_at = excluded.queued_at",
                    (chunk.hash, now),
                )
            inserted += 1
            changed.add(chunk.hash)
        stale = [row[0] for rows in old_by_hash.values() for row in rows]
        if stale:
            freed |= await _forget_chunks(conn, "id = ANY(%s)", (stale,))
            await conn.execute("DELETE FROM chunks WHERE id = ANY(%s)", (stale,))
            changed.update(h for h, rows in old_by_hash.items() if rows)
        await rescore_templates(conn, changed)
        await _write_links(conn, doc_id, rel, parsed, old_path)
        await conn.execute("DELETE FROM skipped WHERE path = %s", (rel,))
        change = note_change(old_path, rel, old_hash, file_hash, sections)
        if change is not None:
            await record_change(conn, now, rel, change, old_path, file_hash, sections if change != "added" else [])
        await notify(conn, {rel} | ({old_path} if old_path else set()), list_changed=old_path != rel)
    return doc_id, inserted, freed


async def record_change(
    conn: Conn,
    at: float,
    path: str,
    change: str,
    old_path: str | None,
    file_hash: str,
    sections: list[list[str]] | None = None,
) -> None:
    """One row of the change history, inside the caller's transaction; the rows past HISTORY_KEPT_S go."""
    await conn.execute(
        "INSERT INTO note_history(at, path, change, old_path, hash, sections) VALUES (%s,%s,%s,%s,%s,%s)",
        history_row(at, path, change, old_path, file_hash, sections),
    )
    await conn.execute("DELETE FROM note_history WHERE at < %s", (at - HISTORY_KEPT_S,))


async def _write_links(conn: Conn, doc_id: int, rel: str, parsed: Any, old_path: str | None) -> None:
    names = note_names(rel, parsed.title, parsed.frontmatter)
    before: set[tuple[str, int]] = set()
    if old_path is not None:
        cur = await conn.execute("SELECT name, alias FROM note_names WHERE doc_id = %s", (doc_id,))
        before = {(r[0], r[1]) for r in await cur.fetchall()}
        if before != set(names):
            await conn.execute("DELETE FROM note_names WHERE doc_id = %s", (doc_id,))
        await conn.execute("DELETE FROM links WHERE source_id = %s", (doc_id,))
    if before != set(names) and names:
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO note_names(doc_id, name, alias) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                [(doc_id, name, alias) for name, alias in names],
            )
    if parsed.links:
        found = await _candidates(conn, {ln.name for ln in parsed.links})
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO links(source_id, line, kind, target, name, heading, block, alias, target_id)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
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


async def _candidates(conn: Conn, names: Collection[str]) -> dict[str, list[tuple[int, str, int]]]:
    cur = await conn.execute(
        "SELECT n.name, n.doc_id, d.path, n.alias FROM note_names n JOIN documents d ON d.id = n.doc_id"
        " WHERE n.name = ANY(%s)",
        (sorted(names),),
    )
    out: dict[str, list[tuple[int, str, int]]] = {}
    for name, doc, path, alias in await cur.fetchall():
        out.setdefault(name, []).append((int(doc), path, alias))
    for found in out.values():  # as SQLite returns them: by the notes' rowid order
        found.sort()
    return out


async def resolve_names(conn: Conn, names: Collection[str]) -> None:
    if not names:
        return
    cur = await conn.execute(
        "SELECT l.id, l.target, l.kind, s.path, l.name, l.target_id FROM links l JOIN documents s ON s.id = l.source_id"
        " WHERE l.name = ANY(%s)",
        (sorted(names),),
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
    if moved:
        async with conn.cursor() as c:
            await c.executemany("UPDATE links SET target_id = %s WHERE id = %s", moved)


async def rescore_templates(conn: Conn, hashes: Collection[str]) -> None:
    if not hashes:
        return
    cur = await conn.execute(
        "SELECT hash, count(DISTINCT doc_id) FROM chunks WHERE hash = ANY(%s)"
        " GROUP BY hash HAVING count(DISTINCT doc_id) >= %s",
        (sorted(hashes), REPEAT_FREE),
    )
    factors = [(repeat_factor(int(n)), h) for h, n in await cur.fetchall()]
    if factors:
        async with conn.cursor() as c:
            await c.executemany(
                "UPDATE chunks SET quality = text_quality * %s WHERE hash = %s AND quality != text_quality * %s",
                [(f, h, f) for f, h in factors],
            )


async def _delete_document(conn: Conn, doc_id: int) -> set[int]:
    cur = await conn.execute("SELECT path, hash FROM documents WHERE id = %s", (doc_id,))
    path, file_hash = await cur.fetchone() or ("", "")
    await record_change(conn, time.time(), path, "deleted", None, file_hash)
    cur = await conn.execute("SELECT name FROM note_names WHERE doc_id = %s", (doc_id,))
    names = {r[0] for r in await cur.fetchall()}
    cur = await conn.execute("SELECT DISTINCT hash FROM chunks WHERE doc_id = %s", (doc_id,))
    texts = {r[0] for r in await cur.fetchall()}
    freed = await _forget_chunks(conn, "doc_id = %s", (doc_id,))
    await conn.execute("DELETE FROM documents WHERE id = %s", (doc_id,))
    await resolve_names(conn, names)
    await rescore_templates(conn, texts)
    return freed


async def delete_documents(conn: Conn, paths: Iterable[str]) -> tuple[int, set[int]]:
    """Delete notes and all their rows; one transaction per note. (count, vectors freed)."""
    count = 0
    freed: set[int] = set()
    for rel in paths:
        async with conn.transaction():
            await lock_writes(conn)
            cur = await conn.execute("SELECT id FROM documents WHERE path = %s", (rel,))
            row = await cur.fetchone()
            if row is None:
                continue
            freed |= await _delete_document(conn, int(row[0]))
            await notify(conn, {rel}, list_changed=True)
            count += 1
    return count, freed


async def record_skipped(
    conn: Conn, skipped: Mapping[str, str], *, replace_all: bool, prefixes: Sequence[str] = ("",)
) -> set[int]:
    """Remember why files were skipped; with `replace_all`, the earlier ones under `prefixes` (this process's
    folders) are forgotten first. A skipped file has no rows: an indexed note now skipped is deleted."""
    freed: set[int] = set()
    async with conn.transaction():
        await lock_writes(conn)
        if replace_all:
            for prefix in prefixes:
                await conn.execute("DELETE FROM skipped WHERE starts_with(path, %s)", (prefix,))
        now = time.time()
        for rel, reason in skipped.items():
            await conn.execute(
                "INSERT INTO skipped(path, reason, at) VALUES (%s,%s,%s) ON CONFLICT (path) DO UPDATE SET "
                "reason = excluded.reason, at = excluded.at",
                (rel, reason, now),
            )
            cur = await conn.execute("SELECT id FROM documents WHERE path = %s", (rel,))
            row = await cur.fetchone()
            if row is not None:
                freed |= await _delete_document(conn, int(row[0]))
    return freed


async def touch_document(conn: Conn, doc_id: int, size: int, mtime_ns: int) -> None:
    await conn.execute("UPDATE documents SET size = %s, mtime_ns = %s WHERE id = %s", (size, mtime_ns, doc_id))


async def set_meta(conn: Conn, key: str, value: str) -> None:
    await conn.execute(
        "INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


# --- vectors ---------------------------------------------------------------------------------------------


async def take_batch(session: Conn, limit: int, exclude: Collection[str]) -> list[tuple[str, str]]:
    """The next texts to embed (newest edits first), each held by a session advisory lock on `session` until
    `store_vectors` or `release` lets it go; texts another worker holds are skipped."""
    async with session.transaction():
        # Rows another worker is taking right now are skipped (SKIP LOCKED); of the rest, those another worker
        # took earlier are skipped by their advisory lock.
        cur = await session.execute(
            "SELECT hash FROM queue WHERE hash <> ALL(%s) ORDER BY queued_at DESC, hash LIMIT %s"
            " FOR UPDATE SKIP LOCKED",
            (sorted(exclude), limit * 2),
        )
        candidates = [r[0] for r in await cur.fetchall()]
        if not candidates:
            return []
        cur = await session.execute(
            "SELECT h, pg_try_advisory_lock(%s, hashtext(h)) FROM unnest(%s::text[]) WITH ORDINALITY AS u(h, i)"
            " ORDER BY i",
            (LOCK_TEXT, candidates),
        )
        held = [h for h, ok in await cur.fetchall() if ok]
        await release(session, held[limit:])
        hashes = held[:limit]
        if not hashes:
            return []
        cur = await session.execute(
            "SELECT DISTINCT ON (hash) hash, content FROM chunks WHERE hash = ANY(%s) ORDER BY hash, id", (hashes,)
        )
        texts = dict(await cur.fetchall())
    gone = [h for h in hashes if h not in texts]
    if gone:  # every chunk of the text was deleted before it was embedded: nothing to embed
        await session.execute("DELETE FROM queue WHERE hash = ANY(%s)", (gone,))
        await release(session, gone)
    return [(h, texts[h]) for h in hashes if h in texts]


async def release(session: Conn, hashes: Sequence[str]) -> None:
    if hashes:
        await session.execute(
            "SELECT pg_advisory_unlock(%s, hashtext(h)) FROM unnest(%s::text[]) h", (LOCK_TEXT, list(hashes))
        )


async def store_vectors(conn: Conn, hashes: Sequence[str], vectors: np.ndarray) -> int:
    """Write the vectors of texts and attach them to every chunk with that text; chunks updated."""
    now = time.time()
    attached = 0
    async with conn.transaction():
        await lock_writes(conn)
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO embeddings(hash, created_at, embedding) VALUES (%s, %s, %s) ON CONFLICT (hash) DO NOTHING",
                [(h, now, np.asarray(v, dtype=np.float32)) for h, v in zip(hashes, vectors, strict=True)],
            )
        cur2 = await conn.execute(
            "UPDATE chunks c SET embedding_id = e.id FROM embeddings e"
            " WHERE e.hash = c.hash AND c.hash = ANY(%s) AND c.embedding_id IS NULL",
            (list(hashes),),
        )
        attached = cur2.rowcount
        await conn.execute("DELETE FROM queue WHERE hash = ANY(%s)", (list(hashes),))
        await conn.execute(
            "UPDATE meta SET value = (value::bigint + %s)::text WHERE key = 'embeddings_computed'", (len(hashes),)
        )
    return attached


async def collect(conn: Conn, candidates: Collection[int] | None, grace_s: float = PARKED_VECTOR_GRACE_S) -> int:
    """Park the vectors no chunk uses, all of them (`candidates` None) or those among `candidates`: out of the
    index and every search, kept by their text's hash for `grace_s` (a text that comes back takes its vector
    again: `unpark`); drop those parked longer. How many left the index."""
    now = time.time()
    async with conn.transaction():
        await lock_writes(conn)
        unused = "NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embedding_id = e.id)"
        if candidates is None:
            cur = await conn.execute(f"DELETE FROM embeddings e WHERE {unused} RETURNING hash, embedding")
        elif candidates:
            cur = await conn.execute(
                f"DELETE FROM embeddings e WHERE e.id = ANY(%s) AND {unused} RETURNING hash, embedding",
                (sorted(candidates),),
            )
        gone = await cur.fetchall() if candidates is None or candidates else []
        if gone:
            async with conn.cursor() as out:
                await out.executemany(
                    "INSERT INTO parked_vectors (hash, embedding, at) VALUES (%s, %s, %s)"
                    " ON CONFLICT (hash) DO UPDATE SET embedding = excluded.embedding, at = excluded.at",
                    [(h, v, now) for h, v in gone],
                )
        await conn.execute("DELETE FROM parked_vectors WHERE at < %s", (now - grace_s,))
        return len(gone)


async def unpark(conn: Conn, hashes: Sequence[str]) -> int:
    """Give back the parked vectors of these texts (in the note's transaction): the chunks written next take them
    by their hash instead of waiting in the queue. How many came back."""
    if not hashes:
        return 0
    cur = await conn.execute(
        "WITH back AS (DELETE FROM parked_vectors p WHERE p.hash = ANY(%s)"
        " AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.hash = p.hash) RETURNING hash, embedding)"
        " INSERT INTO embeddings (hash, created_at, embedding) SELECT hash, %s, embedding FROM back",
        (sorted(set(hashes)), time.time()),
    )
    return max(0, cur.rowcount)


def stats_of(rows: Iterable[tuple[int, int]]) -> Counter[int]:
    return Counter(dict(rows))
