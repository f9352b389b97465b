"""`groove doctor`'s checks of a PostgreSQL store against itself, and its safe repairs.

The same findings as the SQLite store's where they apply (schema version, model, orphan and pending chunks,
dangling and unused vectors, links), and the full-text counts groove keeps itself: the vocabulary against
the postings, the totals against the chunks. --fix takes the store's write lock for its one transaction.
"""

from __future__ import annotations

from typing import Any

from groove.corpus.links import is_note_target
from groove.store.postgres.connection import sync_connect
from groove.store.postgres.reads import like_prefix
from groove.store.postgres.schema import LOCK_WRITE, SCHEMA_VERSION
from groove.store.protocols import Check as Finding

EXAMPLES = 5
LINK_EXAMPLES = 20


class PostgresDoctor:
    def __init__(self, url: str, settings: Any = None):
        self.url = url
        self.con = sync_connect(url)

    def close(self) -> None:
        self.con.close()

    def _one(self, sql: str, args: Any = ()) -> Any:
        row = self.con.execute(sql, args).fetchone()
        return None if row is None else row[0]

    def _count(self, sql: str, args: Any = ()) -> int:
        return int(self._one(sql, args) or 0)

    def hold_writer_lock(self) -> None:
        """--fix writes in one transaction that takes the store's write lock; nothing to hold beforehand."""

    def is_index(self) -> bool:
        if self._one("SELECT to_regclass('meta')") is None:
            return False
        return self._one("SELECT value FROM meta WHERE key = 'model'") is not None

    def notes_under(self, prefix: str) -> int:
        return self._count("SELECT count(*) FROM documents WHERE path LIKE %s", (like_prefix(prefix),))

    def indexed(self) -> dict[str, tuple[int, int]]:
        rows = self.con.execute("SELECT path, size, mtime_ns FROM documents").fetchall()
        return {p: (int(s), int(m)) for p, s, m in rows}

    def skipped(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT path FROM skipped").fetchall()}

    def sample_contents(self, n: int) -> list[str]:
        return [r[0] for r in self.con.execute('SELECT content FROM chunks ORDER BY hash COLLATE "C" LIMIT %s', (n,))]

    def schema_checks(self) -> list[Finding]:
        version = int(self._one("SELECT value FROM meta WHERE key = 'schema_version'") or 0)
        if version < SCHEMA_VERSION:
            return [
                Finding(
                    "warning",
                    "schema_stale",
                    f"the store has schema version {version}; this groove uses {SCHEMA_VERSION}",
                    "groove index --store URL (upgrades it in place; nothing is re-embedded)",
                )
            ]
        if version > SCHEMA_VERSION:
            return [
                Finding(
                    "error",
                    "schema_newer",
                    f"the store has schema version {version}, newer than this groove ({SCHEMA_VERSION})",
                    "upgrade groove on this machine",
                )
            ]
        return []

    def model_checks(self, identity: str) -> list[Finding]:
        built = self._one("SELECT value FROM meta WHERE key = 'model'")
        if built != identity:
            return [
                Finding(
                    "warning",
                    "model_mismatch",
                    f"the store answers with {built} but the configuration asks for {identity}",
                    "set [embedding] model back, or groove index --rebuild --store URL",
                )
            ]
        return []

    def integrity_checks(self) -> list[Finding]:
        out: list[Finding] = []
        pending = self._count("SELECT count(*) FROM chunks WHERE embedding_id IS NULL")
        if pending:
            ex = [
                r[0]
                for r in self.con.execute(
                    "SELECT DISTINCT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"
                    " WHERE c.embedding_id IS NULL LIMIT %s",
                    (EXAMPLES,),
                )
            ]
            out.append(
                Finding(
                    "warning",
                    "chunks_pending",
                    f"{pending} chunk(s) have no vector yet: they are queued for embedding (found by full text only "
                    "until then)",
                    "groove index --store URL (or keep a groove serve indexing)",
                    pending,
                    ex,
                )
            )
        dangling = self._count(
            "SELECT count(*) FROM chunks c WHERE c.embedding_id IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.id = c.embedding_id)"
        )
        if dangling:
            out.append(
                Finding(
                    "error",
                    "chunks_dangling_vector",
                    f"{dangling} chunk(s) point at a vector that does not exist (never found by meaning)",
                    "groove doctor --fix --store URL, then groove index --store URL",
                    dangling,
                    fixable=True,
                )
            )
        unqueued = self._count(
            "SELECT count(DISTINCT c.hash) FROM chunks c WHERE c.embedding_id IS NULL"
            " AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.hash = c.hash)"
        )
        if unqueued:
            out.append(
                Finding(
                    "error",
                    "chunks_not_queued",
                    f"{unqueued} text(s) without a vector are not in the embedding queue (never embedded)",
                    "groove doctor --fix --store URL",
                    unqueued,
                    fixable=True,
                )
            )
        unused = self._count(
            "SELECT count(*) FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embedding_id = e.id)"
        )
        if unused:
            out.append(
                Finding(
                    "info",
                    "vectors_unused",
                    f"{unused} vector(s) belong to no chunk (space only)",
                    "groove doctor --fix --store URL (or groove index --store URL)",
                    unused,
                    fixable=True,
                )
            )
        chunks = self._count("SELECT count(*) FROM chunks")
        counted = self._count("SELECT rows FROM text_stats WHERE kind = 3")
        if chunks != counted:
            out.append(
                Finding(
                    "error",
                    "text_stats",
                    f"the full-text totals count {counted} chunk(s) but the store holds {chunks}"
                    " (bm25's lengths are off)",
                    "groove doctor --fix --store URL (counts them again from the chunks)",
                    fixable=True,
                )
            )
        rows = self.con.execute(
            "SELECT d.path, l.line, l.target, l.kind FROM links l JOIN documents d ON d.id = l.source_id"
            ' WHERE l.target_id IS NULL ORDER BY d.path COLLATE "C", l.line'
        ).fetchall()
        found = [r for r in rows if is_note_target(r[2])]
        if found:
            shown = [
                f"{p}:{line} " + (f"[..]({t})" if kind == "markdown" else f"{'!' if kind == 'embed' else ''}[[{t}]]")
                for p, line, t, kind in found[:LINK_EXAMPLES]
            ]
            out.append(
                Finding(
                    "info",
                    "links_unresolved",
                    f"{len(found)} link(s) name a note that does not exist (`groove links PATH` lists a note's)",
                    "create the note, or correct the link at the path and line shown",
                    len(found),
                    shown,
                )
            )
        return out

    def repair(self, findings: list[Finding], gone: list[str]) -> list[str]:
        names = {f.check for f in findings if f.fixable}
        done: list[str] = []
        with self.con.transaction():
            self.con.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_WRITE,))
            if "notes_gone" in names and gone:
                for path in gone:
                    row = self.con.execute("SELECT id FROM documents WHERE path = %s", (path,)).fetchone()
                    if row is not None:
                        self._delete_document(int(row[0]))
                done.append(f"removed {len(gone)} note(s) that no longer exist from the store")
            if "chunks_dangling_vector" in names:
                n = self.con.execute(
                    "UPDATE chunks c SET embedding_id = NULL WHERE c.embedding_id IS NOT NULL"
                    " AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.id = c.embedding_id)"
                ).rowcount
                done.append(f"re-queued {n} chunk(s) for embedding")
            if names & {"chunks_dangling_vector", "chunks_not_queued"}:
                self.con.execute(
                    "INSERT INTO queue(hash, queued_at) SELECT DISTINCT hash, extract(epoch FROM now()) FROM chunks"
                    " WHERE embedding_id IS NULL ON CONFLICT DO NOTHING"
                )
                done.append("put every text without a vector in the embedding queue (run `groove index --store URL`)")
            if "vectors_unused" in names:
                n = self.con.execute(
                    "DELETE FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embedding_id = e.id)"
                ).rowcount
                done.append(f"dropped {n} unused vector(s)")
            if "text_stats" in names:
                self._recount()
                done.append("counted the full-text totals again from the chunks")
        return done

    def _delete_document(self, doc_id: int) -> None:
        from groove.corpus.tokens import chunk_tokens
        from groove.store.postgres.schema import KIND

        for cid, h, x, c in self.con.execute(
            "SELECT id, heading, context, content FROM chunks WHERE doc_id = %s", (doc_id,)
        ).fetchall():
            toks = chunk_tokens(h, x, c)
            for kind, counts in (("bigrams", toks.bigrams), ("words", toks.words)):
                terms = sorted(counts)
                if terms:
                    self.con.execute(
                        "DELETE FROM postings WHERE kind = %s AND term = ANY(%s) AND chunk_id = %s",
                        (KIND[kind], terms, cid),
                    )
                    self.con.execute(
                        "UPDATE vocab SET df = df - 1 WHERE kind = %s AND term = ANY(%s)", (KIND[kind], terms)
                    )
        self.con.execute("DELETE FROM documents WHERE id = %s", (doc_id,))
        self._recount()

    def _recount(self) -> None:
        self.con.execute(
            "UPDATE text_stats t SET rows = s.rows, length = s.length FROM ("
            " SELECT 0 AS kind, count(*) FILTER (WHERE phrase_len > 0) AS rows, coalesce(sum(phrase_len), 0) AS length"
            " FROM chunks UNION ALL"
            " SELECT 1, count(*) FILTER (WHERE bigram_len > 0), coalesce(sum(bigram_len), 0) FROM chunks UNION ALL"
            " SELECT 2, count(*) FILTER (WHERE word_len > 0), coalesce(sum(word_len), 0) FROM chunks UNION ALL"
            " SELECT 3, count(*), 0 FROM chunks) s WHERE s.kind = t.kind"
        )
