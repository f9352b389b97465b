"""SQLite: the driver rule, extension loading, the schema and its migrations.

One file holds everything: documents, chunks, the three FTS5 tables over
(heading, context, content): trigram, CJK bigrams and words (decisions 0006,
0014), and the sqlite-vec vectors. WAL mode lets readers run beside the single
writer.

Driver rule (ENVIRONMENT.md): the standard library `sqlite3` when it can load
extensions and its SQLite is 3.43 or newer (the word table is contentless with
deletes, `contentless_delete`, new in 3.43); otherwise `sqlean` (a drop-in
`sqlite3` with extension loading and FTS5 trigram).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import aiosqlite
import sqlite_vec

from groove.errors import GrooveError
from groove.corpus.cjk import cjk_terms
from groove.corpus.words import WORD_TOKENIZER, word_text

SCHEMA_VERSION = 5
# The FTS5 tables over (heading, context, content): trigram (the seed compiler's phrases), CJK
# bigrams (decision 0006), stemmed words of spaced alphabets (decision 0014).
FTS_TABLES = ("fts_chunks", "fts_cjk", "fts_words")


class IndexError_(GrooveError):
    """The index cannot be used as asked; the message says what to do."""


class ModelMismatchError(IndexError_):
    pass


def pick_driver() -> ModuleType:
    # Imported here, not at the top: the standard library's sqlite3 when it can load extensions,
    # else sqlean, which is then the only driver this process imports.
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension") and sqlite3.sqlite_version_info >= (3, 43, 0):
        return sqlite3
    import sqlean

    return sqlean


DRIVER = pick_driver()
DBError = DRIVER.Error


def connect_sync(path: Path | str, *, readonly: bool = False) -> Any:
    """A driver connection with sqlite-vec loaded and our pragmas set."""
    if readonly:
        con = DRIVER.connect(f"file:{Path(path).as_posix()}?mode=ro", uri=True, check_same_thread=False, isolation_level=None)
    else:
        con = DRIVER.connect(str(path), check_same_thread=False, isolation_level=None)
    con.enable_load_extension(True)
    sqlite_vec.load(con)
    con.enable_load_extension(False)
    # The bigram table's triggers segment text with this function (groove/corpus/cjk.py).
    con.create_function("groove_cjk_terms", 1, cjk_terms, deterministic=True)
    # The word table's triggers cut the CJK runs out with this one (groove/corpus/words.py).
    con.create_function("groove_word_text", 1, word_text, deterministic=True)
    con.execute("PRAGMA busy_timeout = 10000")
    if not readonly:
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = NORMAL")
    con.execute("PRAGMA foreign_keys = ON")
    return con


async def connect(path: Path | str, *, readonly: bool = False) -> aiosqlite.Connection:
    conn = aiosqlite.Connection(lambda: connect_sync(path, readonly=readonly), iter_chunk_size=64)
    return await conn


# --- schema ------------------------------------------------------------------

# AUTOINCREMENT: an id is never used twice, so a vector id names one vector for the life of the
# file; the in-memory vector matrix (store/vectors.py) reads only the ids past the last it holds.
# Every deleted vector moves meta `vectors_removed` (the trigger below), whoever deletes it.
_EMBEDDINGS_TABLE = """CREATE TABLE IF NOT EXISTS embeddings (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,  -- = vec_embeddings.rowid
    hash       TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL
);
"""

_CJK_TABLES = """
-- CJK character bigrams (groove/corpus/cjk.py): the short Japanese words trigrams cannot match.
CREATE VIRTUAL TABLE IF NOT EXISTS fts_cjk USING fts5(
    heading, context, content, tokenize='unicode61'
);
CREATE VIRTUAL TABLE IF NOT EXISTS fts_cjk_vocab USING fts5vocab(fts_cjk, 'row');
CREATE VIRTUAL TABLE IF NOT EXISTS fts_chunks_vocab USING fts5vocab(fts_chunks, 'row');
CREATE TRIGGER IF NOT EXISTS chunks_cjk_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO fts_cjk(rowid, heading, context, content)
    VALUES (new.id, groove_cjk_terms(new.heading), groove_cjk_terms(new.context), groove_cjk_terms(new.content));
END;
CREATE TRIGGER IF NOT EXISTS chunks_cjk_ad AFTER DELETE ON chunks BEGIN
    DELETE FROM fts_cjk WHERE rowid = old.id;
END;
CREATE TRIGGER IF NOT EXISTS chunks_cjk_au AFTER UPDATE OF heading, context, content ON chunks BEGIN
    DELETE FROM fts_cjk WHERE rowid = old.id;
    INSERT INTO fts_cjk(rowid, heading, context, content)
    VALUES (new.id, groove_cjk_terms(new.heading), groove_cjk_terms(new.context), groove_cjk_terms(new.content));
END;
"""

# Words of the alphabets written with spaces, stemmed (groove/corpus/words.py, decision 0014).
# Contentless: the text is the chunks'; a row is deleted by rowid (contentless_delete).
_WORD_TABLES = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS fts_words USING fts5(
    heading, context, content, content='', contentless_delete=1, tokenize='{WORD_TOKENIZER}'
);
CREATE TRIGGER IF NOT EXISTS chunks_words_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO fts_words(rowid, heading, context, content)
    VALUES (new.id, groove_word_text(new.heading), groove_word_text(new.context), groove_word_text(new.content));
END;
CREATE TRIGGER IF NOT EXISTS chunks_words_ad AFTER DELETE ON chunks BEGIN
    DELETE FROM fts_words WHERE rowid = old.id;
END;
CREATE TRIGGER IF NOT EXISTS chunks_words_au AFTER UPDATE OF heading, context, content ON chunks BEGIN
    DELETE FROM fts_words WHERE rowid = old.id;
    INSERT INTO fts_words(rowid, heading, context, content)
    VALUES (new.id, groove_word_text(new.heading), groove_word_text(new.context), groove_word_text(new.content));
END;
"""

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    id          INTEGER PRIMARY KEY,
    path        TEXT NOT NULL UNIQUE,          -- relative to the notes folder, '/' separated
    title       TEXT NOT NULL,
    tags        TEXT NOT NULL DEFAULT '[]',    -- JSON list
    date        TEXT,                          -- ISO date from frontmatter
    frontmatter TEXT NOT NULL DEFAULT '{}',    -- JSON object, every key
    warnings    TEXT NOT NULL DEFAULT '[]',    -- JSON list (e.g. broken frontmatter)
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    hash        TEXT NOT NULL,                 -- sha256 of the file bytes
    indexed_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_hash ON documents(hash);
CREATE INDEX IF NOT EXISTS documents_date ON documents(date);
CREATE TABLE IF NOT EXISTS doc_tags (
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    tag    TEXT NOT NULL,                      -- folded: corpus/tags.py fold_tag (NFKC + casefold)
    PRIMARY KEY (doc_id, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_tags_tag ON doc_tags(tag);
CREATE TABLE IF NOT EXISTS chunks (
    id           INTEGER PRIMARY KEY,
    doc_id       INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading      TEXT NOT NULL,
    level        INTEGER NOT NULL,
    context      TEXT NOT NULL,
    content      TEXT NOT NULL,
    start_line   INTEGER NOT NULL,
    end_line     INTEGER NOT NULL,
    token_count  INTEGER,
    hash         TEXT NOT NULL,                -- sha256 of exactly the embedded text
    embedding_id INTEGER,                      -- NULL: waiting for a vector (the queue)
    queued_at    REAL NOT NULL                 -- newest edits are embedded first
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, ordinal);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(hash);
CREATE INDEX IF NOT EXISTS chunks_embedding ON chunks(embedding_id);
CREATE INDEX IF NOT EXISTS chunks_pending ON chunks(queued_at) WHERE embedding_id IS NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS fts_chunks USING fts5(
    heading, context, content,
    content='chunks', content_rowid='id', tokenize='trigram'
);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO fts_chunks(rowid, heading, context, content)
    VALUES (new.id, new.heading, new.context, new.content);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO fts_chunks(fts_chunks, rowid, heading, context, content)
    VALUES ('delete', old.id, old.heading, old.context, old.content);
END;
CREATE TRIGGER IF NOT EXISTS chunks_au AFTER UPDATE OF heading, context, content ON chunks BEGIN
    INSERT INTO fts_chunks(fts_chunks, rowid, heading, context, content)
    VALUES ('delete', old.id, old.heading, old.context, old.content);
    INSERT INTO fts_chunks(rowid, heading, context, content)
    VALUES (new.id, new.heading, new.context, new.content);
END;
""" + _CJK_TABLES + _WORD_TABLES + _EMBEDDINGS_TABLE + """CREATE TRIGGER IF NOT EXISTS embeddings_ad AFTER DELETE ON embeddings BEGIN
    INSERT INTO meta(key, value) VALUES ('vectors_removed', '1')
    ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT);
END;
CREATE TABLE IF NOT EXISTS skipped (
    path   TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    at     REAL NOT NULL
);
"""

# The two tables that index a function of the chunks' text, filled again from the chunks
# (their migrations, and `groove doctor --fix`).
REFILL_CJK = """
DELETE FROM fts_cjk;
INSERT INTO fts_cjk(rowid, heading, context, content)
    SELECT id, groove_cjk_terms(heading), groove_cjk_terms(context), groove_cjk_terms(content) FROM chunks;
"""
REFILL_WORDS = """
INSERT INTO fts_words(fts_words) VALUES ('delete-all');
INSERT INTO fts_words(rowid, heading, context, content)
    SELECT id, groove_word_text(heading), groove_word_text(context), groove_word_text(content) FROM chunks;
"""

# Explicit migrations: MIGRATIONS[n] takes a database at version n to n + 1.
MIGRATIONS: dict[int, str] = {
    # 1 -> 2: doc_tags holds tags folded by fold_tag (NFKC + casefold; it was the raw tag).
    # SQL cannot fold Unicode, so: fold ASCII now (lower) and mark every document as
    # changed, so the next reconcile rewrites each one through the writer, which stores
    # the folded tags. Chunks are diffed by hash: nothing is re-embedded.
    1: """
DELETE FROM doc_tags;
INSERT OR IGNORE INTO doc_tags(doc_id, tag)
    SELECT d.id, lower(trim(j.value)) FROM documents d, json_each(d.tags) j WHERE trim(j.value) != '';
UPDATE documents SET mtime_ns = -1, hash = '';
""",
    # 2 -> 3: the CJK bigram table, filled from the chunks already indexed (nothing is re-embedded).
    2: _CJK_TABLES + REFILL_CJK,
    # 3 -> 4: vector ids are never reused (AUTOINCREMENT; the table is rebuilt with the same
    # rows and ids, so nothing is re-embedded). The delete trigger comes with the schema.
    3: _EMBEDDINGS_TABLE.replace("embeddings (", "embeddings_v4 (", 1) + """
INSERT INTO embeddings_v4(id, hash, created_at) SELECT id, hash, created_at FROM embeddings;
DROP TABLE embeddings;
ALTER TABLE embeddings_v4 RENAME TO embeddings;
""",
    # 4 -> 5: the word table, filled from the chunks already indexed (nothing is re-embedded;
    # about 1 s per 2,000 chunks), then merged like any large write (decision 0013).
    4: _WORD_TABLES + REFILL_WORDS + "INSERT INTO fts_words(fts_words) VALUES ('optimize');\n",
}


def _vec_table_sql(dimension: int) -> str:
    return f"CREATE VIRTUAL TABLE IF NOT EXISTS vec_embeddings USING vec0(embedding float[{int(dimension)}])"


def get_meta_sync(con: Any, key: str, default: str | None = None) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else default


def set_meta_sync(con: Any, key: str, value: Any) -> None:
    con.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value if isinstance(value, str) else json.dumps(value)),
    )


def _has_table(con: Any, name: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def init_sync(con: Any, *, model: str, dimension: int, kb_path: str, settings_json: str | None = None,
              allow_switch: bool = False) -> str | None:
    """Create or check the schema for this model.

    An index built by another model is refused, unless `allow_switch` (a writer: the switch
    is then built beside, groove/store/shadow.py); the model it answers with is returned
    then, else None. `settings_json` is the `[embedding]` section that made `model`, kept in
    meta `embedding_settings` so a later switch can still load the old model for queries.
    """
    answering_with: str | None = None
    if _has_table(con, "meta"):
        version = int(get_meta_sync(con, "schema_version", "0") or 0)
        if version > SCHEMA_VERSION:
            raise IndexError_(
                f"this index has schema version {version}, newer than this groove understands "
                f"({SCHEMA_VERSION}); upgrade groove or run `groove index --rebuild`"
            )
        built_model, built_dim = read_identity_sync(con)
        if built_model is not None:
            if allow_switch and (built_model, built_dim) != (model, dimension):
                answering_with = built_model
            else:
                check_identity(built_model, built_dim, model=model, dimension=dimension)
        migrate_sync(con, version)
    con.execute("BEGIN IMMEDIATE")
    try:
        for statement in split_sql(_SCHEMA_V1):
            con.execute(statement)
        con.execute(_vec_table_sql(dimension))
        if get_meta_sync(con, "schema_version") is None:
            set_meta_sync(con, "schema_version", str(SCHEMA_VERSION))
            set_meta_sync(con, "model", model)
            set_meta_sync(con, "dimension", str(dimension))
            set_meta_sync(con, "embeddings_computed", "0")
            set_meta_sync(con, "created_at", str(time.time()))
        if settings_json is not None and answering_with is None and get_meta_sync(con, "embedding_settings") in (None, ""):
            set_meta_sync(con, "embedding_settings", settings_json)
        set_meta_sync(con, "kb_path", kb_path)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return answering_with


class MigrationError(IndexError_):
    """A schema migration step failed and was rolled back: the index is at the version before it."""


# A step runs inside one transaction (BEGIN IMMEDIATE ... COMMIT), so it holds none of these: each would end
# that transaction or step outside it (VACUUM, ATTACH), or be silently ignored inside it (PRAGMA foreign_keys).
_NOT_IN_A_STEP = ("BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "VACUUM", "ATTACH", "DETACH", "PRAGMA")


def migrate_sync(con: Any, version: int) -> int:
    """Take the index from schema `version` up to SCHEMA_VERSION, one MIGRATIONS step at a time.

    Each step is one transaction, its statements run one by one (`split_sql`, never `executescript`,
    which commits on its own) and its new schema_version written inside it: a step that fails is rolled
    back whole, so the index is left at the version before it, its tables as they were, and the step is
    tried again by the next writer that opens it. MigrationError (one line: which step, why, what to do).
    """
    while version < SCHEMA_VERSION:
        _migrate_step(con, version)
        version += 1
    return version


def _migrate_step(con: Any, version: int) -> None:
    statements = split_sql(MIGRATIONS.get(version, ""))
    for statement in statements:
        first = statement.split(None, 1)[0].rstrip(";").upper()
        if first in _NOT_IN_A_STEP:  # a bug in groove: refused before anything runs
            raise MigrationError(_migration_failed(
                con, version, f"the step holds `{first}`, which cannot run inside the step's one transaction",
                "this is a bug in groove (please report it); `groove index --rebuild` builds a new index from the notes",
                ran=False))
    try:
        con.execute("BEGIN IMMEDIATE")
        for statement in statements:
            con.execute(statement)  # one by one: executescript() would commit on its own
        set_meta_sync(con, "schema_version", str(version + 1))
        con.execute("COMMIT")
    except BaseException as exc:
        if con.in_transaction:
            try:
                con.execute("ROLLBACK")
            except DBError:
                pass  # closing the connection rolls back whatever is left
        if not isinstance(exc, Exception):
            raise
        known = _write_failure(exc)
        why = known[0] if known else f"{type(exc).__name__}: {exc}"
        todo = ((f"{known[1]}, then run" if known else "run") + " `groove index` (or start `groove serve`) to upgrade "
                "it again; if it fails the same way, `groove index --rebuild` builds a new index from the notes "
                "(every note is embedded again)")
        raise MigrationError(_migration_failed(con, version, why, todo)) from exc


def _migration_failed(con: Any, version: int, why: str, todo: str, *, ran: bool = True) -> str:
    """One line: which step failed, why, that the index is still at `version`, what to do."""
    try:
        path = next((row[2] for row in con.execute("PRAGMA database_list") if row[1] == "main"), "")
    except DBError:
        path = ""
    text = (f"could not upgrade the index {path or '(in memory)'} from schema version {version} to {version + 1} "
            f"(migration step {version}): {why}; the index is unchanged at schema version {version} "
            f"({'the step was rolled back whole' if ran else 'the step did not run'}); {todo}")
    return " ".join(text.split())  # one line, whatever the exception said


def check_identity(built_model: str, built_dim: int | None, *, model: str, dimension: int) -> None:
    """Refuse an index built by another model or dimension, saying how to rebuild."""
    if built_model != model or built_dim != dimension:
        raise ModelMismatchError(
            f"the index was built with {built_model} ({built_dim} dims) but the configuration asks for "
            f"{model} ({dimension} dims); run `groove index` (or start `groove serve`) to switch it: the new vectors "
            "are built beside the old ones, which keep answering until the switch is done"
        )


def read_identity_sync(con: Any) -> tuple[str | None, int | None]:
    if not _has_table(con, "meta"):
        return None, None
    dim = get_meta_sync(con, "dimension")
    return get_meta_sync(con, "model"), int(dim) if dim else None


def split_sql(script: str) -> list[str]:
    """Split on ';' at statement ends, keeping trigger bodies whole."""
    out, buf, depth = [], [], 0
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        buf.append(line)
        upper = stripped.upper()
        if upper.startswith("CREATE TRIGGER"):
            depth = 1
        if depth and upper == "END;":
            depth = 0
            out.append("\n".join(buf))
            buf = []
        elif not depth and stripped.endswith(";"):
            out.append("\n".join(buf))
            buf = []
    if buf:
        out.append("\n".join(buf))
    return out


SQLITE_HEADER = b"SQLite format 3\x00"


def _is_groove_index(path: Path) -> bool:
    """Whether `path` is (or was) a groove index: an SQLite file with groove's `meta` table, or an SQLite
    file too damaged to say (what `--rebuild` is for). An empty file counts; anything else does not."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError:
        return True  # unreadable: the unlink below says why, or succeeds
    if not head:
        return True
    if head != SQLITE_HEADER:
        return False
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return con.execute("SELECT 1 FROM meta WHERE key = 'schema_version'").fetchone() is not None
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return "no such table" not in str(exc)  # damaged: groove's own, as far as anyone can tell


def remove_index_files(path: Path) -> None:
    """Delete an index and its WAL files (`--rebuild`). Refused when the file is not a groove index, so an
    `index_path` pointed at another file (a config can set it) never deletes that file."""
    if path.exists() and not _is_groove_index(path):
        raise IndexError_(
            f"{path} is not a groove index, so --rebuild will not delete it; point index_path at a groove index "
            "or at a new file"
        )
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()


# --- write errors a person can act on ---------------------------------------------------------

def describe_write_error(exc: BaseException, *, resumes: bool = True) -> str:
    """One sentence for a failed write: what happened and what to do (disk full, read-only index),
    else the exception itself. The daemon (`resumes`) shows it in index_status and /healthz and retries;
    `groove index` says to run it again."""
    then = ("writing resumes by itself and searches keep working meanwhile" if resumes
            else "then run groove index again (what was written so far is kept)")
    known = _write_failure(exc)
    if known:
        return f"{known[0]}: {known[1]}; {then}"
    return repr(exc)


def _write_failure(exc: BaseException) -> tuple[str, str] | None:
    """(what happened, what to do) for a write that failed for a reason a person can fix (a full disk, a
    read-only index), else None."""
    text = str(exc)
    lowered = text.lower()
    if isinstance(exc, DBError) or isinstance(exc, OSError):
        if "database or disk is full" in lowered or getattr(exc, "errno", None) == 28:
            return f"the disk holding the index is full ({text})", "free some space"
        if "readonly database" in lowered or "read-only" in lowered:
            return f"the index file cannot be written ({text})", "make it and its folder writable (e.g. chmod u+w)"
    return None


# --- one writer per index: an advisory lock beside it ------------------------------------------

class IndexLockedError(IndexError_):
    """Another groove process writes this index."""


class IndexFolderError(IndexError_):
    """The folder of the index cannot be written (permissions, a read-only file system)."""


def unwritable_folder(index: Path, exc: OSError) -> IndexFolderError:
    """One line naming the index's folder and why it cannot be written, for a writer that must create files there
    (the index, its lock, SQLite's -wal and -shm files)."""
    import errno

    why = exc.strerror or str(exc)
    if exc.errno == errno.EROFS:
        why = "it is on a read-only file system"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why = "permission denied"
    return IndexFolderError(f"cannot write in the index folder {index.parent} ({why}): make it writable, or give "
                            "--index (or index_path) a file in a folder you can write; read-only commands "
                            "(search, status) still work on an index that is there")


def lock_path(path: Path) -> Path:
    return Path(str(path) + ".lock")


def _identity_lock_dir() -> Path:
    """Where the locks on index files' identities live: one folder per user, in the runtime folder."""
    import os
    import tempfile

    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"groove-locks-{os.getuid()}"


def identity_lock_path(index: Path) -> Path | None:
    """The lock of the index file's identity (device + inode), or None while there is no file."""
    import os

    try:
        st = os.stat(index)
    except OSError:
        return None
    return _identity_lock_dir() / f"{st.st_dev}-{st.st_ino}.lock"


class WriterLock:
    """`fcntl.flock` on `<index>.lock`, holding JSON {pid, command, started_at, index} of the process that writes,
    and on the index file's identity (device + inode: a lock file in a per-user folder of the runtime folder).

    Every writer (`groove index`, `groove serve`) takes it when it opens the index for writing and keeps
    it until it closes; a second writer is refused at once with a message naming the first. The OS
    drops the lock when its process dies (kill -9 included), so a stale file never blocks anyone.
    Read-only commands never take it. The identity lock refuses a writer that reaches the same file
    under another name (a hard link, a bind mount): `hold_identity` takes it as soon as the file
    exists (at once for an existing index; after creating a new one).
    """

    def __init__(self, path: Path):
        self.index = Path(path)
        self.path = lock_path(self.index)
        self._fd: int | None = None
        self._identity_fd: int | None = None

    def _info(self) -> bytes:
        import os
        import sys

        return json.dumps({"pid": os.getpid(), "command": " ".join(["groove", *sys.argv[1:]]) if sys.argv else "groove",
                           "started_at": time.time(), "index": str(self.index)}).encode("utf-8")

    def acquire(self) -> None:
        import os

        if self._fd is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise unwritable_folder(self.index, exc) from None
        self._fd = self._take(fd)
        try:
            self.hold_identity()
        except BaseException:
            self.release()
            raise

    def hold_identity(self) -> None:
        """Lock the index file's identity too; nothing to do while there is no file yet (call again once
        it exists). IndexLockedError when another writer holds it through another name."""
        import os

        if self._identity_fd is not None:
            return
        path = identity_lock_path(self.index)
        if path is None:
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._identity_fd = self._take(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), identity=True)

    def _take(self, fd: int, *, identity: bool = False) -> int:
        """Lock `fd` (closed when it cannot be), write who holds it, and return it. IndexLockedError names the
        holder; for the identity lock, the other name the holder has the file under."""
        import fcntl  # POSIX only; lazy so that the module imports everywhere
        import os

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            other = holder.get("index") if identity else None
            through = f" as {other} (the same file under another name: a hard link?)" if other else ""
            raise IndexLockedError(_locked_message(self.index, holder, through)) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, self._info(), 0)
        return fd

    def release(self) -> None:
        import os

        for name in ("_identity_fd", "_fd"):
            fd = getattr(self, name)
            if fd is None:
                continue
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing the descriptor drops the flock
            setattr(self, name, None)

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read_holder(fd: int) -> dict[str, Any]:
    import os

    try:
        data = os.pread(fd, 4096, 0)
        holder = json.loads(data.decode("utf-8")) if data else {}
        return holder if isinstance(holder, dict) else {}
    except (OSError, ValueError):
        return {}


def _locked_message(index: Path, holder: dict[str, Any], through: str = "") -> str:
    who = []
    if holder.get("pid"):
        who.append(f"pid {holder['pid']}")
    if holder.get("command"):
        who.append(f"`{holder['command']}`")
    if isinstance(holder.get("started_at"), (int, float)):
        who.append("since " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["started_at"])))
    named = f" ({', '.join(who)})" if who else ""
    return (f"the index {index} is being written by another groove process{named}{through}; stop that process first "
            "(or use its MCP tools, e.g. reindex), or give this command another --index. Read-only commands "
            "(search, status, related) work beside it")
