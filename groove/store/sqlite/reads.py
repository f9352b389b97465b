"""Opening the index and the read side that is not search: status, documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiosqlite

from groove.corpus.links import is_note_target
from groove.corpus.tags import fold_tag
from groove.logs import get_logger
from groove.store import shape
from groove.store.sqlite import connection, schema, shadow
from groove.store.sqlite.connection import one

log = get_logger(__name__)


def prepare_index(
    path: Path, *, model: str, dimension: int, kb_path: str, settings_json: str | None = None, switch: bool = False
) -> dict[str, Any] | None:
    """Create the index file (and folder) if needed and check it matches the model.

    With `switch`, an index built by another model is not refused: a shadow set for `model`
    is started (or resumed), and the switch is returned ({"from": model answering now,
    "settings": its [embedding] section or None}); a leftover shadow set for a model no longer
    configured is dropped. Returns None when the index answers with `model`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    con = connection.connect_sync(path)
    try:
        answering_with = schema.init_sync(
            con, model=model, dimension=dimension, kb_path=kb_path, settings_json=settings_json, allow_switch=switch
        )
        if answering_with is None:
            if shadow.drop_sync(con):
                log.info("model_switch_abandoned", model=model, reason="the configuration is back to the active model")
            return None
        if shadow.begin_sync(con, model=model, dimension=dimension, settings_json=settings_json):
            log.info("model_switch_started", old=answering_with, new=model)
        else:
            log.info("model_switch_resumed", old=answering_with, new=model)
        return {"from": answering_with, "settings": schema.get_meta_sync(con, "embedding_settings") or None}
    finally:
        con.close()


def check_existing_index(path: Path, *, model: str | None, dimension: int) -> None:
    """For read-only commands: the index must exist and match the model (model None: any model,
    for `groove status`, which reads no vectors)."""
    if not path.exists():
        raise connection.IndexError_(f"no index at {path}; run `groove index` first")
    con = connection.connect_sync(path, readonly=True)
    try:
        built_model, built_dim = schema.read_identity_sync(con)
        version = int(schema.get_meta_sync(con, "schema_version", "0") or 0) if built_model is not None else 0
        switching = shadow.state_sync(con) if built_model is not None else None
    finally:
        con.close()
    if built_model is None:
        raise connection.IndexError_(f"{path} is not a groove index; run `groove index --rebuild`")
    if model is None:
        pass
    elif switching and switching["model"] == model and (built_model, built_dim) != (model, dimension):
        raise connection.ModelMismatchError(
            f"the index is switching from {built_model} to {model} and answers with {built_model} until "
            f"every note has its new vector; `groove index` (or the running daemon) finishes the switch, and "
            f"`groove status` shows how far it is"
        )
    else:
        schema.check_identity(built_model, built_dim, model=model, dimension=dimension)
    if version < schema.SCHEMA_VERSION:
        raise connection.IndexError_(
            f"{path} has schema version {version}; this groove needs {schema.SCHEMA_VERSION}. Run `groove index` "
            "(or start `groove serve`) once to upgrade it in place: nothing is re-embedded"
        )


async def _scalar(conn: aiosqlite.Connection, sql: str, args: tuple = ()) -> Any:
    cur = await conn.execute(sql, args)
    row = await cur.fetchone()
    return row[0] if row else None


async def get_meta(conn: aiosqlite.Connection, key: str) -> str | None:
    return await _scalar(conn, "SELECT value FROM meta WHERE key = ?", (key,))


async def pending_count(conn: aiosqlite.Connection) -> int:
    return int(await _scalar(conn, "SELECT count(*) FROM chunks WHERE embedding_id IS NULL") or 0)


async def status(conn: aiosqlite.Connection, *, index_path: Path) -> dict[str, Any]:
    documents = await _scalar(conn, "SELECT count(*) FROM documents")
    chunks = await _scalar(conn, "SELECT count(*) FROM chunks")
    last = await get_meta(conn, "last_indexed_at")
    cur = await conn.execute("SELECT path, reason FROM skipped ORDER BY path")
    skipped = [{"path": p, "reason": r} for p, r in await cur.fetchall()]
    cur = await conn.execute("SELECT path, warnings FROM documents WHERE warnings != '[]' ORDER BY path")
    warnings = [{"path": p, "warnings": json.loads(w)} for p, w in await cur.fetchall()]
    return {
        "documents": int(documents or 0),
        "chunks": int(chunks or 0),
        "pending_chunks": await pending_count(conn),
        "vectors": int(await _scalar(conn, "SELECT count(*) FROM embeddings") or 0),
        "embeddings_computed": int(await get_meta(conn, "embeddings_computed") or 0),
        "model": await get_meta(conn, "model"),
        "dimension": int(await get_meta(conn, "dimension") or 0),
        "schema_version": int(await get_meta(conn, "schema_version") or 0),
        "index_path": str(index_path),
        "kb_path": await get_meta(conn, "kb_path"),
        "last_indexed_at": float(last) if last else None,
        "skipped": skipped,
        "warnings": warnings,
        "model_fit": json.loads(await get_meta(conn, "model_fit") or "null"),
        "model_switch": await shadow.progress(conn),
        "last_model_switch": json.loads(await get_meta(conn, "last_model_switch") or "null"),
    }


def documents_under(prefix: str) -> tuple[str, tuple]:
    """The statement (and its arguments) counting the notes whose path starts with `prefix` ('' = all)."""
    return "SELECT count(*) FROM documents WHERE substr(path, 1, ?) = ?", (len(prefix), prefix)


async def count_documents_under(conn: aiosqlite.Connection, prefix: str) -> int:
    """How many notes have a path starting with `prefix` ('' = all of them)."""
    return int(await _scalar(conn, *documents_under(prefix)) or 0)


async def get_document(conn: aiosqlite.Connection, path: str, *, with_chunks: bool = False) -> dict[str, Any] | None:
    """One whole note (its chunks joined in order), or None when it is not indexed. `with_chunks` adds
    "chunks": each chunk's (heading, context, start_line, characters), in order (to read a part of it)."""
    cur = await conn.execute(
        "SELECT id, path, title, tags, date, frontmatter, warnings, indexed_at, size FROM documents WHERE path = ?",
        (path,),
    )
    row = await cur.fetchone()
    if row is None:
        return None
    cur = await conn.execute(
        "SELECT content, heading, context, start_line FROM chunks WHERE doc_id = ? ORDER BY ordinal", (row[0],)
    )
    rows = list(await cur.fetchall())
    content = "".join(r[0] for r in rows)
    doc = {
        "path": row[1],
        "title": row[2],
        "tags": json.loads(row[3]),
        "date": row[4],
        "frontmatter": json.loads(row[5]),
        "warnings": json.loads(row[6]),
        "indexed_at": row[7],
        "size": row[8],
        "content": content,
    }
    doc["backlinks"] = await backlink_count(conn, row[0])
    if with_chunks:
        doc["chunks"] = [(r[1], r[2], r[3], len(r[0])) for r in rows]
        doc["first_chunk"] = rows[0][0] if rows else ""
    return doc


async def list_documents(
    conn: aiosqlite.Connection,
    *,
    after: str = "",
    limit: int = 50,
    folder: str | None = None,
    tags: list[str] | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """Up to `limit` notes after path `after`, in path order, and whether more follow."""
    sql = "SELECT id, path, title, tags, date FROM documents WHERE path > ?"
    args: list[Any] = [after]
    if folder:
        prefix = folder.strip("/") + "/"
        sql += " AND substr(path, 1, ?) = ?"
        args += [len(prefix), prefix]
    wanted = [folded for t in (tags or []) if (folded := fold_tag(t))]
    if wanted:
        # doc_tags holds folded tags
        sql += " AND id IN (SELECT doc_id FROM doc_tags WHERE tag IN (SELECT value FROM json_each(?)))"
        args.append(json.dumps(wanted, ensure_ascii=False))
    sql += " ORDER BY path LIMIT ?"
    args.append(limit + 1)
    cur = await conn.execute(sql, args)
    rows = list(await cur.fetchall())
    docs = [{"path": r[1], "title": r[2], "tags": json.loads(r[3]), "date": r[4]} for r in rows[:limit]]
    return docs, len(rows) > limit


async def paths_starting_with(conn: aiosqlite.Connection, prefix: str, limit: int) -> tuple[list[str], int]:
    """Up to `limit` note paths that start with `prefix`, in path order, and how many there are in all
    (for MCP completion of a note path)."""
    where, args = "substr(path, 1, ?) = ?", (len(prefix), prefix)
    total = int(await _scalar(conn, f"SELECT count(*) FROM documents WHERE {where}", args) or 0)
    cur = await conn.execute(f"SELECT path FROM documents WHERE {where} ORDER BY path LIMIT ?", (*args, limit))
    return [r[0] for r in await cur.fetchall()], total


async def tags_starting_with(conn: aiosqlite.Connection, prefix: str, limit: int) -> tuple[list[str], int]:
    """Up to `limit` distinct (folded) tags that start with the folded `prefix`, most used first, and how many
    distinct tags match in all (for MCP completion of a tag)."""
    folded = fold_tag(prefix) if prefix.strip() else ""
    where, args = "substr(tag, 1, ?) = ?", (len(folded), folded)
    total = int(await _scalar(conn, f"SELECT count(DISTINCT tag) FROM doc_tags WHERE {where}", args) or 0)
    cur = await conn.execute(
        f"SELECT tag FROM doc_tags WHERE {where} GROUP BY tag ORDER BY count(*) DESC, tag LIMIT ?", (*args, limit)
    )
    return [r[0] for r in await cur.fetchall()], total


async def topics(conn: aiosqlite.Connection, *, depth: int = 2, limit: int = 100) -> dict[str, Any]:
    """The vault at a glance: folders (down to `depth` levels) and tags, each with its note count,
    most notes first, and the search filter that selects it."""
    cur = await conn.execute("SELECT path FROM documents")
    folders: dict[str, int] = {}
    total = 0
    for (path,) in await cur.fetchall():
        total += 1
        parts = path.split("/")[:-1]
        for i in range(1, min(depth, len(parts)) + 1):
            key = "/".join(parts[:i])
            folders[key] = folders.get(key, 0) + 1
    top = sorted(folders.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    cur = await conn.execute(
        "SELECT tag, count(*) AS n FROM doc_tags GROUP BY tag ORDER BY n DESC, tag LIMIT ?", (limit,)
    )
    tags = [{"tag": t, "notes": n, "filter": {"tags_any": [t]}} for t, n in await cur.fetchall()]
    cur = await conn.execute("SELECT count(*) FROM documents WHERE instr(path, '/') = 0")
    at_root = int(one(await cur.fetchone())[0] or 0)
    return {
        "notes": total,
        "notes_at_top_level": at_root,
        "folders": [{"folder": f, "notes": n, "filter": {"path_globs": [f"{f}/**"]}} for f, n in top],
        "folders_total": len(folders),
        "tags": tags,
    }


# --- links (corpus/links.py; the tables: store/sqlite/schema.py) -------------------------------------------------

_LINK_COLUMNS = "l.line, l.kind, l.target, l.heading, l.block, l.alias"


def _link(row: Any, path: str | None, title: str | None) -> dict[str, Any]:
    line, kind, target, heading, block, alias = row[:6]
    return {
        "path": path,
        "title": title,
        "line": line,
        "kind": kind,
        "target": target,
        "heading": heading,
        "block": block,
        "alias": alias,
    }


async def backlink_count(conn: aiosqlite.Connection, doc_id: int) -> int:
    """How many other notes link to the note (a note linking twice counts once)."""
    return int(
        await _scalar(
            conn, "SELECT count(DISTINCT source_id) FROM links WHERE target_id = ? AND source_id != ?", (doc_id, doc_id)
        )
        or 0
    )


async def note_links(conn: aiosqlite.Connection, path: str, *, limit: int = 100) -> dict[str, Any] | None:
    """A note's links: `outgoing` (the notes it links to), `backlinks` (the links of other notes to it) and
    `unresolved` (its links that name no note), each in line order (backlinks: by linking note, then line),
    at most `limit` of each, with their totals; None when the note is not indexed."""
    cur = await conn.execute("SELECT id, title FROM documents WHERE path = ?", (path,))
    row = await cur.fetchone()
    if row is None:
        return None
    doc_id, title = row
    cur = await conn.execute(
        f"SELECT {_LINK_COLUMNS}, t.path, t.title FROM links l JOIN documents t ON t.id = l.target_id"
        " WHERE l.source_id = ? ORDER BY l.line, l.id",
        (doc_id,),
    )
    outgoing = [_link(r, r[6], r[7]) for r in await cur.fetchall()]
    cur = await conn.execute(
        f"SELECT {_LINK_COLUMNS} FROM links l WHERE l.source_id = ? AND l.target_id IS NULL ORDER BY l.line, l.id",
        (doc_id,),
    )
    # A link to a file groove does not index as a note (a PDF, a drawing) is not reported as unresolved.
    unresolved = [_link(r, r[2], None) for r in await cur.fetchall() if is_note_target(r[2])]
    cur = await conn.execute(
        f"SELECT {_LINK_COLUMNS}, s.path, s.title FROM links l JOIN documents s ON s.id = l.source_id"
        " WHERE l.target_id = ? ORDER BY s.path, l.line, l.id LIMIT ?",
        (doc_id, limit),
    )
    backlinks = [_link(r, r[6], r[7]) for r in await cur.fetchall()]
    backlinks_total = int(await _scalar(conn, "SELECT count(*) FROM links WHERE target_id = ?", (doc_id,)) or 0)
    return {
        "source": {"path": path, "title": title},
        "outgoing": outgoing[:limit],
        "outgoing_total": len(outgoing),
        "backlinks": backlinks,
        "backlinks_total": backlinks_total,
        "backlink_notes": await backlink_count(conn, doc_id),
        "unresolved": unresolved[:limit],
        "unresolved_total": len(unresolved),
    }


async def linked_notes(conn: aiosqlite.Connection, path: str) -> list[dict[str, Any]]:
    """The notes a note links to or is linked from (itself left out), each once: path, how many links join
    them, the direction (outgoing, backlink or both) and the first link (its line in the linking note,
    heading, alias); most links first, then path order. For `related` walking links."""
    cur = await conn.execute(
        "SELECT t.path, 'outgoing', l.line, l.heading, l.alias FROM links l"
        " JOIN documents s ON s.id = l.source_id JOIN documents t ON t.id = l.target_id"
        " WHERE s.path = ? AND t.id != s.id"
        " UNION ALL "
        "SELECT s.path, 'backlink', l.line, l.heading, l.alias FROM links l"
        " JOIN documents t ON t.id = l.target_id JOIN documents s ON s.id = l.source_id"
        " WHERE t.path = ? AND s.id != t.id",
        (path, path),
    )
    return shape.linked_notes(await cur.fetchall())


def unresolved_links_sync(con: Any, limit: int) -> tuple[int, list[str]]:
    """(how many links name no note, the first `limit` as 'path:line [[target]]'), for `groove doctor` (a sync
    connection). Links to files groove does not index as notes are not counted."""
    rows = con.execute(
        "SELECT d.path, l.line, l.target, l.kind FROM links l JOIN documents d ON d.id = l.source_id"
        " WHERE l.target_id IS NULL ORDER BY d.path, l.line"
    ).fetchall()
    found = [r for r in rows if is_note_target(r[2])]
    shown = [
        f"{p}:{line} " + (f"[..]({t})" if kind == "markdown" else f"{'!' if kind == 'embed' else ''}[[{t}]]")
        for p, line, t, kind in found[:limit]
    ]
    return len(found), shown


# --- rows for the graph, evaluation, the indexer and doctor ------------------------------------------------


async def note_title(conn: aiosqlite.Connection, path: str) -> str | None:
    """The note's title, None when it is not indexed."""
    cur = await conn.execute("SELECT title FROM documents WHERE path = ?", (path,))
    row = await cur.fetchone()
    return None if row is None else str(row[0])


async def note_titles(conn: aiosqlite.Connection, paths: list[str]) -> dict[str, str]:
    if not paths:
        return {}
    cur = await conn.execute(
        "SELECT path, title FROM documents WHERE path IN (SELECT value FROM json_each(?))", (json.dumps(paths),)
    )
    return {path: title for path, title in await cur.fetchall()}


async def paths_of(conn: aiosqlite.Connection, doc_ids: list[int]) -> dict[int, str]:
    if not doc_ids:
        return {}
    cur = await conn.execute(
        "SELECT id, path FROM documents WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(doc_ids),)
    )
    return {int(i): p for i, p in await cur.fetchall()}


async def note_vectors(conn: aiosqlite.Connection, path: str, min_quality: float | None, limit: int) -> list[bytes]:
    """The vectors (float32 bytes) of the note's first `limit` embedded chunks scoring `min_quality` or more."""
    kept, floor = (" AND c.quality >= ?", (min_quality,)) if min_quality else ("", ())
    cur = await conn.execute(
        "SELECT v.embedding FROM chunks c JOIN documents d ON d.id = c.doc_id"
        f" JOIN vec_embeddings v ON v.rowid = c.embedding_id WHERE d.path = ?{kept} ORDER BY c.ordinal LIMIT ?",
        (path, *floor, limit),
    )
    return [bytes(r[0]) for r in await cur.fetchall()]


async def passages_of_vectors(
    conn: aiosqlite.Connection, emb_ids: list[int], min_quality: float | None
) -> list[tuple[int, int, str, str, int, int]]:
    """(chunk id, vector id, path, heading, start_line, end_line) of the chunks holding these vectors."""
    if not emb_ids:
        return []
    kept, floor = (" AND c.quality >= ?", (min_quality,)) if min_quality else ("", ())
    cur = await conn.execute(
        "SELECT c.id, c.embedding_id, d.path, c.heading, c.start_line, c.end_line FROM chunks c"
        f" JOIN documents d ON d.id = c.doc_id WHERE c.embedding_id IN (SELECT value FROM json_each(?)){kept}",
        (json.dumps(emb_ids), *floor),
    )
    return [(int(a), int(b), c, d, int(e), int(f)) for a, b, c, d, e, f in await cur.fetchall()]


async def chunk_locations(conn: aiosqlite.Connection) -> dict[int, dict[str, Any]]:
    """{chunk id: {path, heading}} of every chunk."""
    cur = await conn.execute("SELECT c.id, d.path, c.heading FROM chunks c JOIN documents d ON d.id = c.doc_id")
    return {int(cid): {"path": path, "heading": heading} for cid, path, heading in await cur.fetchall()}


async def texts_containing(conn: aiosqlite.Connection, phrases: list[str], limit: int) -> list[tuple[str, list[str]]]:
    """(path, [heading, context, content]) of up to `limit` chunks whose folded text holds every phrase (each of
    three characters or more: a trigram phrase)."""
    if not phrases:
        return []
    expr = " AND ".join('"' + p.replace('"', '""') + '"' for p in phrases)
    cur = await conn.execute(
        "SELECT DISTINCT d.path, c.heading, c.context, c.content FROM fts_chunks f"
        " JOIN chunks c ON c.id = f.rowid JOIN documents d ON d.id = c.doc_id"
        " WHERE fts_chunks MATCH ? LIMIT ?",
        (expr, limit),
    )
    return [(p, [h, x, c]) for p, h, x, c in await cur.fetchall()]


async def sample_contents(conn: aiosqlite.Connection, n: int) -> list[str]:
    """A fixed sample of `n` chunk texts (by hash)."""
    cur = await conn.execute("SELECT content FROM chunks ORDER BY hash LIMIT ?", (n,))
    return [r[0] for r in await cur.fetchall()]


async def known_documents(conn: aiosqlite.Connection) -> dict[str, tuple[int, int, int, str]]:
    """{path: (doc id, size, mtime_ns, file hash)} of every indexed note."""
    cur = await conn.execute("SELECT path, id, size, mtime_ns, hash FROM documents")
    return {r[0]: (int(r[1]), int(r[2]), int(r[3]), str(r[4])) for r in await cur.fetchall()}


async def skipped_files(conn: aiosqlite.Connection) -> dict[str, str]:
    cur = await conn.execute("SELECT path, reason FROM skipped")
    return {p: r for p, r in await cur.fetchall()}


async def note_history(conn: aiosqlite.Connection, since: float, limit: int) -> list[tuple[Any, ...]]:
    """The change history's last `limit` rows at or after `since`, oldest first (none in an index from before it)."""
    if await _scalar(conn, "SELECT 1 FROM sqlite_master WHERE name = 'note_history'") is None:
        return []
    cur = await conn.execute(
        "SELECT at, path, change, old_path, hash, sections FROM (SELECT * FROM note_history WHERE at >= ?"
        " ORDER BY at DESC, id DESC LIMIT ?) ORDER BY at, id",
        (since, limit),
    )
    return [tuple(r) for r in await cur.fetchall()]
