"""`groove doctor`'s checks of an SQLite index against itself, and its safe repairs.

The notes folder side (notes not indexed, gone, changed; the ignore file; the model's fit) is
groove/ops/doctor.py's; this module reads and repairs the file: schema version, model identity and
vector tables, orphan and pending chunks, dangling and unused vectors, the three FTS5 tables, links,
SQLite's own quick_check. Repairs run in one transaction under the writer lock the caller takes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from groove.store.protocols import Check as Finding
from groove.store.sqlite import connection, reads, schema, shadow, writer_lock

EXAMPLES = 5
LINK_EXAMPLES = 20  # unresolved links listed (path:line each)


def vector_tables(con: Any) -> list[tuple[str, int | None]]:
    """(name, declared dimension) of every vec0 table: the one place doctor learns where vectors live."""
    rows = con.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING vec0%'"
    ).fetchall()
    out = []
    for name, sql in rows:
        m = re.search(r"float\[(\d+)\]", sql or "")
        out.append((name, int(m.group(1)) if m else None))
    return sorted(out)


def _count(con: Any, sql: str, args: tuple = ()) -> int:
    return int(con.execute(sql, args).fetchone()[0] or 0)


def _examples(con: Any, sql: str, args: tuple = ()) -> list[str]:
    return [str(r[0]) for r in con.execute(sql + f" LIMIT {EXAMPLES}", args).fetchall()]


def check_schema(con: Any) -> list[Finding]:
    version = int(schema.get_meta_sync(con, "schema_version", "0") or 0)
    if version < schema.SCHEMA_VERSION:
        return [
            Finding(
                "warning",
                "schema_stale",
                f"the index has schema version {version}; this groove uses {schema.SCHEMA_VERSION}",
                "groove index (upgrades it in place; nothing is re-embedded)",
            )
        ]
    if version > schema.SCHEMA_VERSION:
        return [
            Finding(
                "error",
                "schema_newer",
                f"the index has schema version {version}, newer than this groove ({schema.SCHEMA_VERSION})",
                "upgrade groove, or groove index --rebuild",
            )
        ]
    return []


def check_model(con: Any, identity: str) -> list[Finding]:
    """The model the index answers with against the configured one (`identity`), and each vector table's
    dimension against the index's."""
    built_model, built_dim = schema.read_identity_sync(con)
    out = []
    switch = shadow.state_sync(con)
    if built_model != identity:
        if switch and switch["model"] == identity:
            out.append(
                Finding(
                    "warning",
                    "model_switch",
                    f"the index is switching from {built_model} to {identity} and answers with "
                    f"{built_model} until every text has its new vector (groove status shows how far)",
                    "groove index (or the running groove serve) finishes the switch",
                )
            )
        else:
            out.append(
                Finding(
                    "warning",
                    "model_mismatch",
                    f"the index answers with {built_model} but the configuration asks for {identity}; "
                    "read-only commands refuse it until it is switched",
                    "groove index (switches in place, the old vectors answer meanwhile), or set [embedding] model back",
                )
            )
    for name, dim in vector_tables(con):
        if name == shadow.VECTORS:
            if switch and dim != switch["dimension"]:
                out.append(
                    Finding(
                        "error",
                        "vector_dimension",
                        f"table {name} holds vectors of {dim} dimensions but the switch to "
                        f"{switch['model']} expects {switch['dimension']}",
                        "groove index --rebuild",
                    )
                )
            continue
        if dim != built_dim:
            out.append(
                Finding(
                    "error",
                    "vector_dimension",
                    f"table {name} holds vectors of {dim} dimensions but the index says {built_dim}",
                    "groove index --rebuild",
                )
            )
    return out


def check_chunks(con: Any, vec_table: str) -> list[Finding]:
    out = []
    n = _count(con, "SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)")
    if n:
        out.append(
            Finding(
                "error",
                "orphan_chunks",
                f"{n} chunk(s) belong to no note (search can return them)",
                "groove doctor --fix",
                n,
                fixable=True,
            )
        )
    pending = _count(con, "SELECT count(*) FROM chunks WHERE embedding_id IS NULL")
    if pending:
        ex = _examples(
            con, "SELECT DISTINCT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.embedding_id IS NULL"
        )
        out.append(
            Finding(
                "warning",
                "chunks_pending",
                f"{pending} chunk(s) have no vector yet: they are queued for embedding (found by full text only "
                "until then)",
                "groove index (or keep groove serve running)",
                pending,
                ex,
            )
        )
    dangling = _count(
        con,
        "SELECT count(*) FROM chunks WHERE embedding_id IS NOT NULL"
        " AND embedding_id NOT IN (SELECT id FROM embeddings)",
    )
    if dangling:
        out.append(
            Finding(
                "error",
                "chunks_dangling_vector",
                f"{dangling} chunk(s) point at a vector record that does not exist (never found by meaning)",
                "groove doctor --fix, then groove index (re-queues and embeds them)",
                dangling,
                fixable=True,
            )
        )
    novec = _count(
        con, f"SELECT count(*) FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM {vec_table} v WHERE v.rowid = e.id)"
    )
    if novec:
        out.append(
            Finding(
                "error",
                "vectors_missing",
                f"{novec} vector record(s) have no vector in {vec_table} (their chunks are never found by meaning)",
                "groove doctor --fix, then groove index (re-queues and embeds them)",
                novec,
                fixable=True,
            )
        )
    unused = _count(
        con, "SELECT count(*) FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embedding_id = e.id)"
    )
    if unused:
        out.append(
            Finding(
                "info",
                "vectors_unused",
                f"{unused} vector(s) belong to no chunk (space only)",
                "groove doctor --fix (or groove index)",
                unused,
                fixable=True,
            )
        )
    return out


FTS = (("fts_chunks", "trigram"), ("fts_cjk", "CJK bigram"), ("fts_words", "word"))


def check_fts(con: Any, readonly: bool = False) -> list[Finding]:
    """Rows and chunks agree in the three full-text tables, and each passes FTS5's integrity check (which SQLite
    runs as a write: on an index that cannot be written it is skipped, said once as an info finding)."""
    out = []
    skipped: list[str] = []
    for table, label in FTS:
        extra = _count(con, f"SELECT count(*) FROM {table}_docsize WHERE id NOT IN (SELECT id FROM chunks)")
        absent = _count(con, f"SELECT count(*) FROM chunks WHERE id NOT IN (SELECT id FROM {table}_docsize)")
        if extra:
            out.append(
                Finding(
                    "error",
                    "fts_rows_without_chunks",
                    f"the {label} full-text table has {extra} row(s) of chunks that do not exist",
                    "groove doctor --fix (rebuilds it from the chunks)",
                    extra,
                    fixable=True,
                )
            )
        if absent:
            out.append(
                Finding(
                    "error",
                    "fts_chunks_missing",
                    f"{absent} chunk(s) are missing from the {label} full-text table (never found by words)",
                    "groove doctor --fix (rebuilds it from the chunks)",
                    absent,
                    fixable=True,
                )
            )
        if readonly:
            skipped.append(label)
            continue
        try:
            con.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        except connection.DBError as exc:
            if connection.cannot_write(exc):
                skipped.append(label)
                continue
            out.append(
                Finding(
                    "error",
                    "fts_integrity",
                    f"the {label} full-text table fails its integrity check: {exc}",
                    "groove doctor --fix (rebuilds it from the chunks)",
                    fixable=True,
                )
            )
    if skipped:
        out.append(
            Finding(
                "info",
                "fts_integrity_skipped",
                f"the {', '.join(skipped)} full-text tables' integrity checks did not run: SQLite runs them as "
                "writes and the index cannot be written here (the rest was checked read-only)",
                "make the index and its folder writable, then run groove doctor again",
            )
        )
    return out


def check_links(con: Any) -> list[Finding]:
    """Links resolved as the notes' names say now (a mismatch is repaired from them), and the links that name
    no note (info: each with its path and line)."""
    if not schema._has_table(con, "links"):
        return []  # an index before schema 7: check_schema says to upgrade it
    out = []
    stale = _count(con, f"SELECT count(*) FROM links WHERE target_id IS NOT {schema.LINK_TARGET}")
    if stale:
        out.append(
            Finding(
                "warning",
                "links_stale",
                f"{stale} link(s) point at another note than the one their "
                "target names now (backlinks and related by links are off for them)",
                "groove doctor --fix (resolves every link again from the notes' names)",
                stale,
                fixable=True,
            )
        )
    count, shown = reads.unresolved_links_sync(con, LINK_EXAMPLES)
    if count:
        out.append(
            Finding(
                "info",
                "links_unresolved",
                f"{count} link(s) name a note that does not exist (`groove links PATH` lists a note's)",
                "create the note, or correct the link at the path and line shown",
                count,
                shown,
            )
        )
    return out


def check_sqlite(con: Any) -> list[Finding]:
    rows = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
    if rows == ["ok"]:
        return []
    return [
        Finding(
            "error",
            "sqlite_integrity",
            f"SQLite's quick_check reports damage: {rows[0]}",
            "groove index --rebuild",
            len(rows),
            rows[:EXAMPLES],
        )
    ]


# --- repairs ---------------------------------------------------------------------------------


def repair(con: Any, findings: list[Finding], gone: list[str], vec_table: str) -> list[str]:
    """The safe repairs for `findings`, in one transaction; what was done, one line each. The caller holds the
    index's `writer_lock.WriterLock` (`diagnose(fix=True)`): no other groove process writes meanwhile."""
    names = {f.check for f in findings if f.fixable}
    done = []
    con.execute("BEGIN IMMEDIATE")
    try:
        if "notes_gone" in names and gone:
            con.executemany("DELETE FROM documents WHERE path = ?", [(p,) for p in gone])
            done.append(f"removed {len(gone)} note(s) that no longer exist from the index")
        if "orphan_chunks" in names:
            n = con.execute("DELETE FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)").rowcount
            done.append(f"removed {n} orphan chunk(s)")
        if "vectors_missing" in names:
            ids = [
                r[0]
                for r in con.execute(
                    f"SELECT id FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM {vec_table} v WHERE v.rowid = e.id)"
                )
            ]
            con.executemany("DELETE FROM embeddings WHERE id = ?", [(i,) for i in ids])
            done.append(f"dropped {len(ids)} vector record(s) without a vector")
        if names & {"chunks_dangling_vector", "vectors_missing"}:
            n = con.execute(
                "UPDATE chunks SET embedding_id = NULL WHERE embedding_id IS NOT NULL"
                " AND embedding_id NOT IN (SELECT id FROM embeddings)"
            ).rowcount
            done.append(f"re-queued {n} chunk(s) for embedding (run `groove index`)")
        if "vectors_unused" in names:
            ids = [
                r[0]
                for r in con.execute(
                    "SELECT id FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embedding_id = e.id)"
                )
            ]
            con.executemany(f"DELETE FROM {vec_table} WHERE rowid = ?", [(i,) for i in ids])
            con.executemany("DELETE FROM embeddings WHERE id = ?", [(i,) for i in ids])
            done.append(f"dropped {len(ids)} unused vector(s)")
        if "links_stale" in names or ("notes_gone" in names and gone):
            con.execute(schema.RESOLVE_LINKS)
            done.append("resolved every link again from the notes' names")
        if names & {"fts_rows_without_chunks", "fts_chunks_missing", "fts_integrity"}:
            con.execute("INSERT INTO fts_chunks(fts_chunks) VALUES ('rebuild')")
            for statement in schema.split_sql(schema.REFILL_CJK + schema.REFILL_WORDS):
                con.execute(statement)
            done.append("rebuilt the three full-text tables from the chunks")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return done


def _guarded(name: str, run: Callable[[], list[Finding]]) -> list[Finding]:
    try:
        return run()
    except connection.DBError as exc:
        return [Finding("error", name, f"the {name} check could not run: {exc}", "groove index --rebuild")]


class SqliteDoctor:
    """One SQLite index file, open for `groove doctor` (a sync connection; the checks take no lock)."""

    def __init__(self, path: Path):
        self.path = path
        self.lock: writer_lock.WriterLock | None = None
        self.readonly = False  # the index cannot be written here: checked read-only, --fix refused
        try:
            self.con = connection.connect_sync(path)
        except connection.DBError as exc:
            if not connection.cannot_write(exc):
                raise
            self.con = connection.connect_sync(path, readonly=True)  # IndexError_ when even that cannot be
            self.readonly = True

    def close(self) -> None:
        self.con.close()
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def hold_writer_lock(self) -> None:
        """--fix writes: it takes the one writer lock, refused at once (naming the holder) while another groove
        process writes; the checks alone take none."""
        if self.readonly:
            raise writer_lock.IndexFolderError(
                f"cannot --fix the index {self.path}: it cannot be written here ({self.path.parent} or the file is "
                "read-only); make them writable, or run `groove doctor` without --fix to list what --fix would repair"
            )
        lock = writer_lock.WriterLock(self.path)
        try:
            lock.acquire()
        except writer_lock.IndexLockedError as exc:
            raise writer_lock.IndexLockedError(
                f"{exc}; so does `groove doctor` without --fix, which lists what --fix would repair"
            ) from None
        self.lock = lock

    def is_index(self) -> bool:
        return schema._has_table(self.con, "meta") and schema.read_identity_sync(self.con)[0] is not None

    def notes_under(self, prefix: str) -> int:
        return int(self.con.execute(*reads.documents_under(prefix)).fetchone()[0])

    def indexed(self) -> dict[str, tuple[int, int]]:
        return {p: (size, mtime) for p, size, mtime in self.con.execute("SELECT path, size, mtime_ns FROM documents")}

    def skipped(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT path FROM skipped")}

    def sample_contents(self, n: int) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT content FROM chunks ORDER BY hash LIMIT ?", (n,))]

    def schema_checks(self) -> list[Finding]:
        return _guarded("schema", lambda: check_schema(self.con))

    def model_checks(self, identity: str) -> list[Finding]:
        return _guarded("model", lambda: check_model(self.con, identity))

    def integrity_checks(self) -> list[Finding]:
        vec_table = schema.VECTOR_TABLE  # the active set (a switch's shadow set is checked by check_model)
        out = _guarded("chunks", lambda: check_chunks(self.con, vec_table))
        out += _guarded("fts", lambda: check_fts(self.con, self.readonly))
        out += _guarded("links", lambda: check_links(self.con))
        out += _guarded("sqlite", lambda: check_sqlite(self.con))
        return out

    def repair(self, findings: list[Finding], gone: list[str]) -> list[str]:
        return repair(self.con, findings, gone, schema.VECTOR_TABLE)
