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

from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import aiosqlite
import sqlite_vec

from groove.corpus.cjk import cjk_terms
from groove.corpus.links import links_json, links_of_chunks, note_names_json, resolve_json
from groove.corpus.normalize import fold
from groove.corpus.quality import repeat_factor, text_quality
from groove.corpus.words import word_text
from groove.errors import GrooveError

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


def connect_sync(path: Path | str, *, readonly: bool = False) -> Any:
    """A driver connection with sqlite-vec loaded and our pragmas set."""
    if readonly:
        con = DRIVER.connect(
            f"file:{Path(path).as_posix()}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
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
