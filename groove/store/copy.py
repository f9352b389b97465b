"""`groove store copy`: an index moved to another store without embedding anything again.

Every record goes across with its id (notes, their tags, chunks, vectors, the names notes answer to, links,
skipped files, the meta that says which model made the vectors, the off_topic calibration, and the eval
history), so the copy answers a search exactly as the source does. The change history (`groove changes`) is not
copied: the copy's begins when it is made. What a store derives from the chunks is
built by the destination: FTS5's tables through the SQLite schema's triggers, the PostgreSQL store's phrase
text, postings, vocabulary and totals from groove/corpus/tokens.py.

A shared store (PostgreSQL) leads every note's path with its folder's name; an SQLite index of one folder
does not. Copying such an index into a database puts its folder's name in front (`folder`); copying a
database that holds one folder into an SQLite file takes it off again.

The destination must be new (no groove index there yet); the source is read in one transaction.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from groove.store.address import StoreAddress
from groove.store.protocols import StoreError

TABLES = ("meta", "documents", "doc_tags", "embeddings", "chunks", "note_names", "links", "skipped")
BATCH = 2_000
COPIED_META = (
    "model",
    "dimension",
    "embedding_settings",
    "embeddings_computed",
    "vectors_removed",
    "created_at",
    "last_indexed_at",
    "model_fit",
    "off_topic_calibration",
    "kb_path",
)

Progress = Callable[[str, int, int], None]


@dataclass
class CopyReport:
    source: str
    destination: str
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    history_lines: int = 0


# --- reading a source ---------------------------------------------------------------------------------------


class _Source:
    """Rows of one store, table by table, with their ids."""

    def __init__(self, where: StoreAddress):
        self.where = where
        if where.kind == "sqlite":
            from groove.store.sqlite import connection

            assert where.path is not None
            if not where.path.exists():
                raise StoreError(f"no index at {where.shown} to copy")
            self.con: Any = connection.connect_sync(where.path, readonly=True)
            self.con.execute("BEGIN")
            self.vector_sql = (
                "SELECT e.id, e.hash, e.created_at, v.embedding FROM embeddings e"
                " JOIN vec_embeddings v ON v.rowid = e.id ORDER BY e.id"
            )
        else:
            from groove.store.postgres.connection import sync_connect

            assert where.url is not None
            self.con = sync_connect(where.url)
            self.con.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            self.vector_sql = "SELECT id, hash, created_at, embedding FROM embeddings ORDER BY id"

    def scalar(self, sql: str) -> Any:
        row = self.con.execute(sql).fetchone()
        return None if row is None else row[0]

    def meta(self) -> dict[str, str]:
        return {k: v for k, v in self.con.execute("SELECT key, value FROM meta").fetchall()}

    def rows(self, sql: str) -> Iterator[list[tuple[Any, ...]]]:
        cur = self.con.execute(sql)
        while batch := cur.fetchmany(BATCH):
            yield [tuple(r) for r in batch]

    def count(self, table: str) -> int:
        return int(self.scalar(f"SELECT count(*) FROM {table}") or 0)

    def folders(self) -> list[tuple[str, str]]:
        if self.where.kind == "sqlite":
            return []
        return [(n, p) for n, p in self.con.execute("SELECT name, path FROM folders ORDER BY name").fetchall()]

    def close(self) -> None:
        try:
            self.con.close()
        except Exception:  # noqa: BLE001 - a read-only source, closing on the way out
            pass


def _vector_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    array = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(array, dtype=np.float32).tobytes()


# --- the copy -------------------------------------------------------------------------------------------


def copy_store(
    source: StoreAddress,
    destination: StoreAddress,
    *,
    folder: str | None = None,
    history: Path | None = None,
    progress: Progress | None = None,
) -> CopyReport:
    """Copy the index at `source` into the new store at `destination` (module doc). `folder`: the name to lead
    the paths with when an SQLite index of one folder goes into a shared store; `history`: the source's eval
    history file, when it has one."""
    started = time.perf_counter()
    src = _Source(source)
    report = CopyReport(source=source.shown, destination=destination.shown)
    try:
        meta = src.meta()
        if "model" not in meta:
            raise StoreError(f"{source.shown} is not a groove index: nothing to copy")
        dimension = int(meta.get("dimension") or 0)
        prefix, strip = _path_rule(src, source, destination, folder)
        lines = history.read_text(encoding="utf-8").splitlines() if history and history.exists() else []
        if source.kind == "postgresql":
            lines += [r[0] for r in src.con.execute("SELECT line FROM eval_history ORDER BY id").fetchall()]
        report.history_lines = len(lines)
        if destination.kind == "postgresql":
            report.rows = _into_postgres(src, destination, meta, dimension, prefix, strip, lines, progress)
        else:
            report.rows = _into_sqlite(src, destination, meta, dimension, prefix, strip, lines, progress)
    finally:
        src.close()
    report.seconds = round(time.perf_counter() - started, 2)
    return report


def _path_rule(src: _Source, source: StoreAddress, destination: StoreAddress, folder: str | None) -> tuple[str, str]:
    """(prefix to add, prefix to take off) of every note path."""
    if source.kind == "sqlite" and destination.kind == "postgresql":
        kb = json.loads(json.dumps(src.scalar("SELECT value FROM meta WHERE key = 'kb_path'") or ""))
        named = " = " in str(kb) and ";" in str(kb)  # several folders: the paths carry their names already
        if named:
            return "", ""
        name = folder or (str(kb).split(" = ")[0] if " = " in str(kb) else Path(str(kb)).name) or "notes"
        return f"{name}/", ""
    if source.kind == "postgresql" and destination.kind == "sqlite":
        held = src.folders()
        if len(held) == 1:
            return "", f"{held[0][0]}/"
    return "", ""


def _folders_of(kb: str, prefix: str) -> list[tuple[str, str]]:
    """The (name, path) of each notes folder the copied index held: the one its paths now start with, or, for an
    index of several folders (`name = path; ...`), each of them (a search node of the copy lists them)."""
    if prefix:
        return [(prefix.rstrip("/"), kb.split(" = ")[-1])]
    return [(n.strip(), p.strip()) for n, _, p in (part.partition(" = ") for part in kb.split("; ")) if p]


def _path(p: str, prefix: str, strip: str) -> str:
    if strip and p.startswith(strip):
        p = p[len(strip) :]
    return prefix + p


def _into_sqlite(
    src: _Source,
    dest: StoreAddress,
    meta: dict[str, str],
    dimension: int,
    prefix: str,
    strip: str,
    history: list[str],
    progress: Progress | None,
) -> dict[str, int]:
    from groove.store.sqlite import connection, schema

    assert dest.path is not None
    if dest.path.exists() and dest.path.stat().st_size > 0:
        raise StoreError(f"{dest.shown} exists: copy into a new file (move it away, or name another)")
    dest.path.parent.mkdir(parents=True, exist_ok=True)
    con = connection.connect_sync(dest.path)
    counts: dict[str, int] = {}
    try:
        schema.init_sync(
            con,
            model=meta["model"],
            dimension=dimension,
            kb_path=meta.get("kb_path", ""),
            settings_json=meta.get("embedding_settings"),
        )
        con.execute("BEGIN IMMEDIATE")
        for key in COPIED_META:
            if key in meta:
                schema.set_meta_sync(con, key, meta[key])
        counts["documents"] = _each(
            src,
            "SELECT id, path, title, tags, date, frontmatter, warnings, size, mtime_ns, hash, indexed_at FROM documents"
            " ORDER BY id",
            lambda r: con.execute(
                "INSERT INTO documents(id, path, title, tags, date, frontmatter, warnings, size, mtime_ns, hash,"
                " indexed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (r[0], _path(r[1], prefix, strip), *r[2:]),
            ),
            "documents",
            progress,
        )
        counts["doc_tags"] = _each(
            src, "SELECT doc_id, tag FROM doc_tags", lambda r: con.execute("INSERT INTO doc_tags VALUES (?,?)", r)
        )
        counts["embeddings"] = _each(
            src,
            src.vector_sql,
            lambda r: (
                con.execute("INSERT INTO embeddings(id, hash, created_at) VALUES (?,?,?)", r[:3]),
                con.execute(
                    f"INSERT INTO {schema.VECTOR_TABLE}(rowid, embedding) VALUES (?, ?)", (r[0], _vector_bytes(r[3]))
                ),
            ),
            "vectors",
            progress,
        )
        counts["chunks"] = _each(
            src,
            "SELECT id, doc_id, ordinal, heading, level, context, content, start_line, end_line, token_count, hash,"
            " embedding_id, queued_at, text_quality, quality FROM chunks ORDER BY id",
            lambda r: con.execute(
                "INSERT INTO chunks(id, doc_id, ordinal, heading, level, context, content, start_line, end_line,"
                " token_count, hash, embedding_id, queued_at, text_quality, quality)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                r,
            ),
            "chunks",
            progress,
        )
        counts["note_names"] = _each(
            src,
            "SELECT doc_id, name, alias FROM note_names",
            lambda r: con.execute("INSERT INTO note_names VALUES (?,?,?)", r),
        )
        counts["links"] = _each(
            src,
            "SELECT id, source_id, line, kind, target, name, heading, block, alias, target_id FROM links ORDER BY id",
            lambda r: con.execute("INSERT INTO links VALUES (?,?,?,?,?,?,?,?,?,?)", r),
        )
        counts["skipped"] = _each(
            src,
            "SELECT path, reason, at FROM skipped",
            lambda r: con.execute(
                "INSERT INTO skipped(path, reason, at) VALUES (?,?,?)", (_path(r[0], prefix, strip), *r[1:])
            ),
        )
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        con.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(dest.path) + suffix).unlink(missing_ok=True)
        raise
    con.close()
    if history:
        Path(str(dest.path) + ".eval.jsonl").write_text("\n".join(history) + "\n", encoding="utf-8")
    return counts


def _each(
    src: _Source, sql: str, put: Callable[[tuple[Any, ...]], Any], what: str = "", progress: Progress | None = None
) -> int:
    n = 0
    total = src.count(what if what in TABLES else "documents") if progress and what else 0
    for batch in src.rows(sql):
        for row in batch:
            put(row)
        n += len(batch)
        if progress and what:
            progress(what, n, total)
    return n


def _into_postgres(
    src: _Source,
    dest: StoreAddress,
    meta: dict[str, str],
    dimension: int,
    prefix: str,
    strip: str,
    history: list[str],
    progress: Progress | None,
) -> dict[str, int]:
    import anyio

    from groove.corpus.tokens import chunk_tokens
    from groove.store.postgres.connection import ensure_extensions, sync_connect
    from groove.store.postgres.schema import KIND, SCHEMA, statements
    from groove.store.postgres.writer import pack

    assert dest.url is not None
    anyio.run(ensure_extensions, dest.url)
    con = sync_connect(dest.url)
    side: Any = None
    counts: dict[str, int] = {}
    try:
        if (con.execute("SELECT to_regclass('meta')").fetchone() or (None,))[0] is not None:
            raise StoreError(f"{dest.shown} already holds a groove store: copy into a new database")
        others = (con.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone() or (0,))[
            0
        ]
        if others:
            raise StoreError(f"{dest.shown} holds other tables: copy into a database of groove's own")
        with con.transaction():
            for statement in statements(SCHEMA.replace("{dim}", str(dimension))):
                con.execute(statement)
            con.execute("DROP INDEX IF EXISTS embeddings_hnsw")  # built once, after the rows (much faster)
            con.execute("DROP INDEX IF EXISTS chunks_phrases")
        # The postings go in over a second connection beside the chunks' (one COPY at a time per connection);
        # a copy that fails drops every table it made, so the rows need not share one transaction.
        side = sync_connect(dest.url)
        with con.transaction():
            from groove.store.postgres.schema import SCHEMA_VERSION

            con.execute("INSERT INTO meta(key, value) VALUES ('schema_version', %s)", (str(SCHEMA_VERSION),))
            for key in COPIED_META:
                if key in meta:
                    con.execute(
                        "INSERT INTO meta(key, value) VALUES (%s, %s)"
                        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        (key, meta[key]),
                    )
            con.execute("INSERT INTO meta(key, value) VALUES ('vectors_removed', '0') ON CONFLICT (key) DO NOTHING")
            # the change history (`groove changes`) is not copied: the copy's begins now, as an SQLite copy's does
            con.execute(
                "INSERT INTO meta(key, value) VALUES ('history_since', %s) ON CONFLICT (key) DO NOTHING",
                (str(time.time()),),
            )
            counts["documents"] = _copy(
                con,
                src,
                "SELECT id, path, title, tags, date, frontmatter, warnings, size, mtime_ns, hash, indexed_at FROM"
                " documents ORDER BY id",
                "documents (id, path, title, tags, date, frontmatter, warnings, size, mtime_ns, hash, indexed_at)",
                lambda r: (r[0], _path(r[1], prefix, strip), *r[2:]),
            )
            counts["doc_tags"] = _copy(con, src, "SELECT doc_id, tag FROM doc_tags", "doc_tags (doc_id, tag)")
            counts["embeddings"] = _copy(
                con,
                src,
                src.vector_sql,
                "embeddings (id, hash, created_at, embedding)",
                lambda r: (r[0], r[1], r[2], np.frombuffer(_vector_bytes(r[3]), dtype=np.float32)),
                binary=True,
            )
            vocab: Counter[tuple[int, str]] = Counter()
            totals = {0: [0, 0], 1: [0, 0], 2: [0, 0], 3: [0, 0]}
            n = 0
            total = src.count("chunks")
            with con.cursor() as cur_c, side.cursor() as cur_p:
                with (
                    cur_c.copy(
                        "COPY chunks (id, doc_id, ordinal, heading, level, context, content, start_line, end_line,"
                        " token_count, hash, embedding_id, queued_at, text_quality, quality, fold_h, fold_x, fold_c,"
                        " phrase_len, bigram_len, word_len) FROM STDIN"
                    ) as chunks,
                    cur_p.copy("COPY postings (kind, term, chunk_id, tf, dl) FROM STDIN") as postings,
                ):
                    for batch in src.rows(
                        "SELECT id, doc_id, ordinal, heading, level, context, content, start_line, end_line,"
                        " token_count, hash, embedding_id, queued_at, text_quality, quality FROM chunks ORDER BY id"
                    ):
                        for r in batch:
                            t = chunk_tokens(r[3], r[5], r[6])
                            chunks.write_row((*r, *t.phrases, t.phrase_length, t.bigram_length, t.word_length))
                            for kind, terms, length in (
                                ("bigrams", t.bigrams, t.bigram_length),
                                ("words", t.words, t.word_length),
                            ):
                                k = KIND[kind]
                                for term, tf in terms.items():
                                    postings.write_row((k, term, r[0], pack(tf), length))
                                    vocab[(k, term)] += 1
                            for k, holds, length in (
                                (0, t.phrase_length > 0, t.phrase_length),
                                (1, bool(t.bigrams), t.bigram_length),
                                (2, bool(t.words), t.word_length),
                                (3, True, 0),
                            ):
                                totals[k][0] += int(holds)
                                totals[k][1] += length
                        n += len(batch)
                        if progress:
                            progress("chunks", n, total)
            counts["chunks"] = n
            with con.cursor() as cur, cur.copy("COPY vocab (kind, term, df) FROM STDIN") as copy:
                for (k, term), df in vocab.items():
                    copy.write_row((k, term, df))
            counts["vocab"] = len(vocab)
            for k, (rows, length) in totals.items():
                con.execute("UPDATE text_stats SET rows = %s, length = %s WHERE kind = %s", (rows, length, k))
            con.execute(
                "INSERT INTO queue(hash, queued_at) SELECT hash, max(queued_at) FROM chunks"
                " WHERE embedding_id IS NULL GROUP BY hash ON CONFLICT DO NOTHING"
            )
            counts["note_names"] = _copy(
                con, src, "SELECT doc_id, name, alias FROM note_names", "note_names (doc_id, name, alias)"
            )
            counts["links"] = _copy(
                con,
                src,
                "SELECT id, source_id, line, kind, target, name, heading, block, alias, target_id"
                " FROM links ORDER BY id",
                "links (id, source_id, line, kind, target, name, heading, block, alias, target_id)",
            )
            counts["skipped"] = _copy(
                con,
                src,
                "SELECT path, reason, at FROM skipped",
                "skipped (path, reason, at)",
                lambda r: (_path(r[0], prefix, strip), *r[1:]),
            )
            for line in history:
                con.execute("INSERT INTO eval_history(line) VALUES (%s)", (line,))
            for name, path in _folders_of(meta.get("kb_path", ""), prefix):
                con.execute(
                    "INSERT INTO folders(name, path, host, pid, command, claimed_at) VALUES (%s, %s, '', 0, %s, %s)",
                    (name, path, "groove store copy", time.time()),
                )
            for table in ("documents", "chunks", "embeddings", "links"):
                con.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                    f" coalesce((SELECT max(id) FROM {table}), 0) + 1, false)"
                )
        if progress:
            progress("indexes", 0, 2)
        con.execute(
            "CREATE INDEX IF NOT EXISTS chunks_phrases ON chunks USING gin"
            " ((fold_h || chr(31) || fold_x || chr(31) || fold_c) gin_trgm_ops)"
        )
        con.execute("CREATE INDEX IF NOT EXISTS embeddings_hnsw ON embeddings USING hnsw (embedding vector_l2_ops)")
        con.execute("ANALYZE")
        if progress:
            progress("indexes", 2, 2)
    except BaseException:
        if side is not None:
            side.close()
        try:
            with con.transaction():
                for table in reversed(
                    ("meta", "documents", "doc_tags", "embeddings", "chunks", "postings", "vocab", "text_stats",
                     "skipped", "note_names", "links", "queue", "folders", "eval_history")
                ):  # fmt: skip
                    con.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
        finally:
            con.close()
        raise
    side.close()
    con.close()
    return counts


def _copy(
    con: Any,
    src: _Source,
    sql: str,
    into: str,
    transform: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None,
    *,
    binary: bool = False,
) -> int:
    n = 0
    with con.cursor() as cur:
        fmt = " (FORMAT BINARY)" if binary else ""
        if binary:
            # pgvector's binary dumper for numpy arrays; every other column is typed by the table
            from pgvector.psycopg import register_vector

            register_vector(con)
        with cur.copy(f"COPY {into} FROM STDIN{fmt}") as copy:
            if binary:
                copy.set_types(["bigint", "text", "double precision", "vector"])
            for batch in src.rows(sql):
                for row in batch:
                    copy.write_row(transform(row) if transform else row)
                n += len(batch)
    return n
