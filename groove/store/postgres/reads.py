"""The PostgreSQL store's reads that are not a search's: status, notes, links, topics, and the rows the graph,
evaluation, the indexer and the doctor read. The same answers as groove/store/sqlite/reads.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from groove.corpus.links import is_note_target
from groove.corpus.tags import fold_tag
from groove.store import shape
from groove.store.postgres.search import JOINED, Counts, PostgresSearchReads, as_array, like_pattern
from groove.store.protocols import SearchReads

Conn = psycopg.AsyncConnection[Any]
_LINK_COLUMNS = "l.line, l.kind, l.target, l.heading, l.block, l.alias"


async def scalar(conn: Conn, sql: str, args: Sequence[Any] = ()) -> Any:
    cur = await conn.execute(sql, args)
    row = await cur.fetchone()
    return None if row is None else row[0]


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


class PostgresReads(PostgresSearchReads):
    """Every read (`groove.store.protocols.Reads`) on one PostgreSQL connection."""

    def searching(self, matrix: Any = None, min_quality: float | None = None) -> SearchReads:
        return PostgresSearchReads(self.conn, self.counts, matrix, min_quality)

    async def meta(self, key: str) -> str | None:
        return await scalar(self.conn, "SELECT value FROM meta WHERE key = %s", (key,))

    async def status(self, location: str) -> dict[str, Any]:
        last = await self.meta("last_indexed_at")
        cur = await self.conn.execute("SELECT path, reason FROM skipped ORDER BY path")
        skipped = [{"path": p, "reason": r} for p, r in await cur.fetchall()]
        cur = await self.conn.execute("SELECT path, warnings FROM documents WHERE warnings != '[]' ORDER BY path")
        warnings = [{"path": p, "warnings": json.loads(w)} for p, w in await cur.fetchall()]
        return {
            "documents": int(await scalar(self.conn, "SELECT count(*) FROM documents") or 0),
            "chunks": int(await scalar(self.conn, "SELECT count(*) FROM chunks") or 0),
            "pending_chunks": await self.pending_count(),
            "vectors": int(await scalar(self.conn, "SELECT count(*) FROM embeddings") or 0),
            "embeddings_computed": int(await self.meta("embeddings_computed") or 0),
            "model": await self.meta("model"),
            "dimension": int(await self.meta("dimension") or 0),
            "schema_version": int(await self.meta("schema_version") or 0),
            "index_path": location,
            "kb_path": await self.meta("kb_path"),
            "last_indexed_at": float(last) if last else None,
            "skipped": skipped,
            "warnings": warnings,
            "model_fit": json.loads(await self.meta("model_fit") or "null"),
            "model_switch": None,
            "last_model_switch": json.loads(await self.meta("last_model_switch") or "null"),
        }

    async def count_documents_under(self, prefix: str) -> int:
        return int(
            await scalar(self.conn, "SELECT count(*) FROM documents WHERE path LIKE %s", (like_prefix(prefix),)) or 0
        )

    async def get_document(self, path: str, *, with_chunks: bool = False) -> dict[str, Any] | None:
        cur = await self.conn.execute(
            "SELECT id, path, title, tags, date, frontmatter, warnings, indexed_at, size FROM documents"
            " WHERE path = %s",
            (path,),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        cur = await self.conn.execute(
            "SELECT content, heading, context, start_line FROM chunks WHERE doc_id = %s ORDER BY ordinal", (row[0],)
        )
        rows = list(await cur.fetchall())
        doc: dict[str, Any] = {
            "path": row[1],
            "title": row[2],
            "tags": json.loads(row[3]),
            "date": row[4],
            "frontmatter": json.loads(row[5]),
            "warnings": json.loads(row[6]),
            "indexed_at": row[7],
            "size": row[8],
            "content": "".join(r[0] for r in rows),
        }
        doc["backlinks"] = await self._backlink_count(row[0])
        if with_chunks:
            doc["chunks"] = [(r[1], r[2], r[3], len(r[0])) for r in rows]
            doc["first_chunk"] = rows[0][0] if rows else ""
        return doc

    async def _backlink_count(self, doc_id: int) -> int:
        return int(
            await scalar(
                self.conn,
                "SELECT count(DISTINCT source_id) FROM links WHERE target_id = %s AND source_id != %s",
                (doc_id, doc_id),
            )
            or 0
        )

    async def list_documents(
        self, *, after: str, limit: int, folder: str | None, tags: list[str] | None
    ) -> tuple[list[dict[str, Any]], bool]:
        sql = "SELECT id, path, title, tags, date FROM documents WHERE path > %s"
        args: list[Any] = [after]
        if folder:
            sql += " AND path LIKE %s"
            args.append(like_prefix(folder.strip("/") + "/"))
        wanted = [folded for t in (tags or []) if (folded := fold_tag(t))]
        if wanted:
            sql += " AND id IN (SELECT doc_id FROM doc_tags WHERE tag = ANY(%s))"
            args.append(wanted)
        sql += ' ORDER BY path COLLATE "C" LIMIT %s'
        args.append(limit + 1)
        cur = await self.conn.execute(sql.replace("path > %s", 'path > %s COLLATE "C"'), args)
        rows = list(await cur.fetchall())
        docs = [{"path": r[1], "title": r[2], "tags": json.loads(r[3]), "date": r[4]} for r in rows[:limit]]
        return docs, len(rows) > limit

    async def paths_starting_with(self, prefix: str, limit: int) -> tuple[list[str], int]:
        pat = like_prefix(prefix)
        total = int(await scalar(self.conn, "SELECT count(*) FROM documents WHERE path LIKE %s", (pat,)) or 0)
        cur = await self.conn.execute(
            'SELECT path FROM documents WHERE path LIKE %s ORDER BY path COLLATE "C" LIMIT %s', (pat, limit)
        )
        return [r[0] for r in await cur.fetchall()], total

    async def tags_starting_with(self, prefix: str, limit: int) -> tuple[list[str], int]:
        folded = fold_tag(prefix) if prefix.strip() else ""
        pat = like_prefix(folded)
        total = int(await scalar(self.conn, "SELECT count(DISTINCT tag) FROM doc_tags WHERE tag LIKE %s", (pat,)) or 0)
        cur = await self.conn.execute(
            'SELECT tag FROM doc_tags WHERE tag LIKE %s GROUP BY tag ORDER BY count(*) DESC, tag COLLATE "C" LIMIT %s',
            (pat, limit),
        )
        return [r[0] for r in await cur.fetchall()], total

    async def topics(self, *, depth: int, limit: int) -> dict[str, Any]:
        cur = await self.conn.execute("SELECT path FROM documents")
        folders: dict[str, int] = {}
        total = 0
        at_root = 0
        for (path,) in await cur.fetchall():
            total += 1
            parts = path.split("/")[:-1]
            at_root += not parts
            for i in range(1, min(depth, len(parts)) + 1):
                key = "/".join(parts[:i])
                folders[key] = folders.get(key, 0) + 1
        top = sorted(folders.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        cur = await self.conn.execute(
            'SELECT tag, count(*) AS n FROM doc_tags GROUP BY tag ORDER BY n DESC, tag COLLATE "C" LIMIT %s', (limit,)
        )
        tags = [{"tag": t, "notes": int(n), "filter": {"tags_any": [t]}} for t, n in await cur.fetchall()]
        return {
            "notes": total,
            "notes_at_top_level": at_root,
            "folders": [{"folder": f, "notes": n, "filter": {"path_globs": [f"{f}/**"]}} for f, n in top],
            "folders_total": len(folders),
            "tags": tags,
        }

    async def note_links(self, path: str, *, limit: int) -> dict[str, Any] | None:
        cur = await self.conn.execute("SELECT id, title FROM documents WHERE path = %s", (path,))
        row = await cur.fetchone()
        if row is None:
            return None
        doc_id, title = row
        cur = await self.conn.execute(
            f"SELECT {_LINK_COLUMNS}, t.path, t.title FROM links l JOIN documents t ON t.id = l.target_id"
            " WHERE l.source_id = %s ORDER BY l.line, l.id",
            (doc_id,),
        )
        outgoing = [_link(r, r[6], r[7]) for r in await cur.fetchall()]
        cur = await self.conn.execute(
            f"SELECT {_LINK_COLUMNS} FROM links l WHERE l.source_id = %s AND l.target_id IS NULL ORDER BY l.line, l.id",
            (doc_id,),
        )
        unresolved = [_link(r, r[2], None) for r in await cur.fetchall() if is_note_target(r[2])]
        cur = await self.conn.execute(
            f"SELECT {_LINK_COLUMNS}, s.path, s.title FROM links l JOIN documents s ON s.id = l.source_id"
            ' WHERE l.target_id = %s ORDER BY s.path COLLATE "C", l.line, l.id LIMIT %s',
            (doc_id, limit),
        )
        backlinks = [_link(r, r[6], r[7]) for r in await cur.fetchall()]
        total = int(await scalar(self.conn, "SELECT count(*) FROM links WHERE target_id = %s", (doc_id,)) or 0)
        return {
            "source": {"path": path, "title": title},
            "outgoing": outgoing[:limit],
            "outgoing_total": len(outgoing),
            "backlinks": backlinks,
            "backlinks_total": total,
            "backlink_notes": await self._backlink_count(doc_id),
            "unresolved": unresolved[:limit],
            "unresolved_total": len(unresolved),
        }

    async def linked_notes(self, path: str) -> list[dict[str, Any]]:
        cur = await self.conn.execute(
            "SELECT t.path, 'outgoing', l.line, l.heading, l.alias FROM links l"
            " JOIN documents s ON s.id = l.source_id JOIN documents t ON t.id = l.target_id"
            " WHERE s.path = %s AND t.id != s.id"
            " UNION ALL "
            "SELECT s.path, 'backlink', l.line, l.heading, l.alias FROM links l"
            " JOIN documents t ON t.id = l.target_id JOIN documents s ON s.id = l.source_id"
            " WHERE t.path = %s AND s.id != t.id",
            (path, path),
        )
        return shape.linked_notes(await cur.fetchall())

    async def note_title(self, path: str) -> str | None:
        return await scalar(self.conn, "SELECT title FROM documents WHERE path = %s", (path,))

    async def note_titles(self, paths: Sequence[str]) -> dict[str, str]:
        if not paths:
            return {}
        cur = await self.conn.execute("SELECT path, title FROM documents WHERE path = ANY(%s)", (list(paths),))
        return {p: t for p, t in await cur.fetchall()}

    async def paths_of(self, doc_ids: Sequence[int]) -> dict[int, str]:
        if not doc_ids:
            return {}
        cur = await self.conn.execute("SELECT id, path FROM documents WHERE id = ANY(%s)", (list(doc_ids),))
        return {int(i): p for i, p in await cur.fetchall()}

    async def note_vectors(self, path: str, min_quality: float | None, limit: int) -> list[np.ndarray]:
        kept, floor = (" AND c.quality >= %s", [min_quality]) if min_quality else ("", [])
        cur = await self.conn.execute(
            "SELECT e.embedding FROM chunks c JOIN documents d ON d.id = c.doc_id"
            f" JOIN embeddings e ON e.id = c.embedding_id WHERE d.path = %s{kept} ORDER BY c.ordinal LIMIT %s",
            [path, *floor, limit],
        )
        return [as_array(r[0]) for r in await cur.fetchall()]

    async def passages_of_vectors(
        self, emb_ids: Sequence[int], min_quality: float | None
    ) -> list[tuple[int, int, str, str, int, int]]:
        if not emb_ids:
            return []
        kept, floor = (" AND c.quality >= %s", [min_quality]) if min_quality else ("", [])
        cur = await self.conn.execute(
            "SELECT c.id, c.embedding_id, d.path, c.heading, c.start_line, c.end_line FROM chunks c"
            f" JOIN documents d ON d.id = c.doc_id WHERE c.embedding_id = ANY(%s){kept}",
            [list(emb_ids), *floor],
        )
        return [(int(a), int(b), c, d, int(e), int(f)) for a, b, c, d, e, f in await cur.fetchall()]

    async def chunk_locations(self) -> dict[int, dict[str, Any]]:
        cur = await self.conn.execute(
            "SELECT c.id, d.path, c.heading FROM chunks c JOIN documents d ON d.id = c.doc_id"
        )
        return {int(cid): {"path": path, "heading": heading} for cid, path, heading in await cur.fetchall()}

    async def texts_containing(self, phrases: Sequence[str], limit: int) -> list[tuple[str, list[str]]]:
        from groove.corpus import tokens

        pats = [like_pattern(tokens.phrase_query(p)) for p in phrases if len(p) >= 3]
        if not pats:
            return []
        cur = await self.conn.execute(
            "SELECT DISTINCT d.path, c.heading, c.context, c.content FROM chunks c JOIN documents d ON d.id = c.doc_id"
            f" WHERE {JOINED} LIKE ALL(%s) LIMIT %s",
            (pats, limit),
        )
        return [(p, [h, x, c]) for p, h, x, c in await cur.fetchall()]

    async def sample_contents(self, n: int) -> list[str]:
        cur = await self.conn.execute('SELECT content FROM chunks ORDER BY hash COLLATE "C" LIMIT %s', (n,))
        return [r[0] for r in await cur.fetchall()]

    async def known_documents(self) -> dict[str, tuple[int, int, int, str]]:
        cur = await self.conn.execute("SELECT path, id, size, mtime_ns, hash FROM documents")
        return {r[0]: (int(r[1]), int(r[2]), int(r[3]), str(r[4])) for r in await cur.fetchall()}

    async def skipped(self) -> dict[str, str]:
        cur = await self.conn.execute("SELECT path, reason FROM skipped")
        return {p: r for p, r in await cur.fetchall()}

    async def note_history(self, since: float, limit: int) -> list[tuple[Any, ...]]:
        cur = await self.conn.execute(
            "SELECT at, path, change, old_path, hash, sections FROM (SELECT * FROM note_history WHERE at >= %s"
            " ORDER BY at DESC, id DESC LIMIT %s) h ORDER BY at, id",
            (since, limit),
        )
        return [tuple(r) for r in await cur.fetchall()]


def like_prefix(prefix: str) -> str:
    """A LIKE pattern of the paths starting with `prefix`."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


__all__ = ["Counts", "PostgresReads", "like_prefix"]
