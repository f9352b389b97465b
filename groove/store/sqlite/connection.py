"""SQLite connections: the driver rule, extension loading, groove's SQL functions, and the errors of a write.

Driver rule (ENVIRONMENT.md): the standard library `sqlite3` when it can load
extensions and its SQLite is 3.43 or newer (the word table is contentless with
deletes, `contentless_delete`, new in 3.43); otherwise `sqlean` (a drop-in
`sqlite3` with extension loading and FTS5 trigram).

Every connection loads sqlite-vec and registers the functions the schema's triggers call
(folding, CJK bigrams, word text, links, quality: groove/corpus/), sets WAL for a writer, and
is wrapped in aiosqlite for the async callers.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import quote

import aiosqlite
import sqlite_vec

from groove.corpus.cjk import cjk_terms
from groove.corpus.links import links_json, links_of_chunks, note_names_json, resolve_json
from groove.corpus.normalize import fold
from groove.corpus.quality import repeat_factor, text_quality
from groove.corpus.words import word_text
from groove.errors import GrooveError
from groove.logs import get_logger

log = get_logger(__name__)

_Row = TypeVar("_Row")


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


SQLITE_READONLY = 8  # a write to a database opened (or only openable) read-only
SQLITE_CANTOPEN = 14  # SQLite cannot open a file it needs (the index, its -wal or -shm)


def _uri(path: Path, query: str) -> str:
    """`path` as an SQLite file URI (`?`, `#` and `%` in a name escaped) with `query`."""
    return f"file:{quote(path.absolute().as_posix())}?{query}"


def cannot_write(exc: BaseException) -> bool:
    """Whether a write (or opening for writing: journal_mode = WAL creates the -wal and -shm files) failed
    because the index or its folder cannot be written."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (SQLITE_CANTOPEN, SQLITE_READONLY)
    text = str(exc).lower()
    return "unable to open database file" in text or "readonly database" in text


def _folder_why(folder: Path) -> str:
    """Why `folder` cannot be written, in a few words (a read-only file system, the permissions)."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except (OSError, AttributeError):  # no statvfs (Windows): the permissions are all there is to say
        pass
    return "it cannot be written" if os.access(folder, os.W_OK) else "permission denied"


def _wal_holds_writes(path: Path) -> bool:
    """Whether the index's `-wal` file holds anything: writes not yet folded into the index file."""
    try:
        return os.path.getsize(f"{path}-wal") > 0
    except OSError:
        return False


def open_readonly(path: Path | str) -> Any:
    """A read-only driver connection to `path`, probed with a read of the schema.

    A WAL database is read through its `-shm` file, which SQLite creates beside it: in a folder that cannot be
    written (a read-only file system, chmod 555) the plain read-only open fails. Then, when there is no -shm (no
    writer runs: a writer keeps one open) and no writes wait in the `-wal` file, the file alone holds every
    committed row and is opened `immutable` (no -shm, no locks); otherwise IndexError_ says which folder and
    what to do."""
    p = Path(path)
    con = DRIVER.connect(_uri(p, "mode=ro"), uri=True, check_same_thread=False, isolation_level=None)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return con
    except DBError as exc:
        con.close()
        if not cannot_write(exc):  # CANTOPEN on a read-only file system, READONLY without write permission
            raise
        why = str(exc)
    if _wal_holds_writes(p):
        raise IndexError_(
            f"cannot read the index {p}: its folder {p.parent} cannot be written ({_folder_why(p.parent)}) and "
            f"SQLite must create {p.name}-shm there to read the writes still in {p.name}-wal; make the folder "
            "writable, or run `groove index` once where it can write (that folds them into the index file)"
        )
    if os.path.lexists(f"{p}-shm"):  # a writer may be running: the file alone is not a consistent view
        raise IndexError_(
            f"cannot read the index {p}: SQLite cannot use its {p.name}-shm in {p.parent} ({why}); make that file "
            "readable and the folder writable by you, or read the index as the user that writes it"
        )
    con = DRIVER.connect(_uri(p, "mode=ro&immutable=1"), uri=True, check_same_thread=False, isolation_level=None)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except DBError as exc:
        con.close()
        raise IndexError_(
            f"cannot open the index {p} to read it ({exc}); check that you can read it and its folder {p.parent}"
        ) from None
    log.debug("index_opened_immutable", index=str(p), why=_folder_why(p.parent))
    return con


def connect_sync(path: Path | str, *, readonly: bool = False) -> Any:
    """A driver connection with sqlite-vec loaded and our pragmas set (`readonly`: `open_readonly`)."""
    if readonly:
        con = open_readonly(path)
    else:
        con = DRIVER.connect(str(path), check_same_thread=False, isolation_level=None)
    con.enable_load_extension(True)
    sqlite_vec.load(con)
    con.enable_load_extension(False)
    # The trigram table's triggers fold text to one spelling with this one (groove/corpus/normalize.py).
    con.create_function("groove_fold", 1, _fold_column, deterministic=True)
    # The bigram table's triggers segment text with this function (groove/corpus/cjk.py).
    con.create_function("groove_cjk_terms", 1, cjk_terms, deterministic=True)
    # The word table's triggers cut the CJK runs out with this one (groove/corpus/words.py).
    con.create_function("groove_word_text", 1, word_text, deterministic=True)
    # Links between notes (groove/corpus/links.py): a note's name, which note a link names, and a note's links
    # from its stored chunks (FILL_LINKS, RESOLVE_LINKS).
    con.create_function("groove_note_names", 3, note_names_json, deterministic=True)
    con.create_function("groove_link_target", 4, resolve_json, deterministic=True)
    con.create_aggregate("groove_chunk_links", 3, _ChunkLinks)
    # A chunk's quality score from its stored text, and a template's factor (groove/corpus/quality.py): QUALITY_SCORES.
    con.create_function("groove_text_quality", 1, _text_quality_column, deterministic=True)
    con.create_function("groove_repeat_factor", 1, repeat_factor, deterministic=True)
    con.execute("PRAGMA busy_timeout = 10000")
    if not readonly:
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = NORMAL")
    con.execute("PRAGMA foreign_keys = ON")
    return con


def _fold_column(text: str | None) -> str:
    return fold(text) if text else ""


def _text_quality_column(text: str | None) -> float:
    return text_quality(text) if text else 0.0


class _ChunkLinks:
    """`groove_chunk_links(ordinal, start_line, content)`, an aggregate over one note's chunks: its links as
    JSON (corpus/links.py `links_json`). A note whose text the parser cannot take has none (`[]`) rather than
    failing the statement: the table is derived, and `groove doctor --fix` fills it again."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, str]] = []

    def step(self, ordinal: int, start_line: int, content: str | None) -> None:
        self.rows.append((int(ordinal), int(start_line), content or ""))

    def finalize(self) -> str:
        try:
            return links_json(links_of_chunks(self.rows))
        except Exception:  # noqa: BLE001 - see the class doc
            return "[]"


def one(row: _Row | None) -> _Row:
    """The row a statement always returns (an aggregate, an INSERT ... RETURNING): aiosqlite's `fetchone`
    is typed as maybe None, and a None here would be a bug, raised as one."""
    if row is None:
        raise RuntimeError("the statement returned no row")
    return row


async def connect(path: Path | str, *, readonly: bool = False) -> aiosqlite.Connection:
    conn = aiosqlite.Connection(lambda: connect_sync(path, readonly=readonly), iter_chunk_size=64)
    return await conn


# --- write errors a person can act on ---------------------------------------------------------


def write_failure(exc: BaseException) -> tuple[str, str] | None:
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
