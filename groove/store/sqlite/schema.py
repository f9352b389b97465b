"""The index's schema: its tables, the versioned migrations between them, and the model it was built with.

One file holds everything: documents, chunks, the three FTS5 tables over
(heading, context, content): trigram, CJK bigrams and words (decisions 0006,
0014), and the sqlite-vec vectors. The trigram and bigram tables index the text
folded to one spelling (groove/corpus/normalize.py, decision 0018); the chunks
keep the text as written, which is what is shown and embedded. WAL mode lets readers run beside the single
writer.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from groove.corpus.quality import REPEAT_FREE
from groove.corpus.words import WORD_TOKENIZER
from groove.store.sqlite.connection import DBError, IndexError_, ModelMismatchError, write_failure

SCHEMA_VERSION = 10
# The FTS5 tables over (heading, context, content): trigram (the seed compiler's phrases), CJK
# bigrams (decision 0006), stemmed words of spaced alphabets (decision 0014).
FTS_TABLES = ("fts_chunks", "fts_cjk", "fts_words")
# The sqlite-vec table of the active vectors (vec0, one row per `embeddings` row, same id).
VECTOR_TABLE = "vec_embeddings"


# --- schema ------------------------------------------------------------------

# AUTOINCREMENT: an id is never used twice, so a vector id names one vector for the life of the
# file; the in-memory vector matrix (store/memory.py) reads only the ids past the last it holds.
# Every deleted vector moves meta `vectors_removed` (the trigger below), whoever deletes it.
_EMBEDDINGS_TABLE = """CREATE TABLE IF NOT EXISTS embeddings (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,  -- = vec_embeddings.rowid
    hash       TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL
);
"""

# The vectors of texts no chunk holds any more, set aside for a grace period (protocols.PARKED_VECTOR_GRACE_S)
# outside every search: a note that comes back under another name (a rename the watcher saw as a deletion,
# then an addition; or across a restart) takes them back instead of being embedded again.
_PARKED_TABLE = """CREATE TABLE IF NOT EXISTS parked_vectors (
    hash   TEXT PRIMARY KEY,
    vector BLOB NOT NULL,  -- float32, as vec_embeddings holds it
    at     REAL NOT NULL   -- when it was set aside (unix seconds)
);
"""

# The change history (`groove changes`, the MCP tool `changes`): one row per note write that changed something --
# a note added, edited (`sections`: JSON [[change, heading], ...] of its sections added, edited, deleted), renamed
# (`old_path`) or deleted -- with the file's hash (a deletion and an addition of the same bytes read as a rename).
# Kept protocols.HISTORY_KEPT_S; meta `history_since` says when it began.
_HISTORY_TABLE = """CREATE TABLE IF NOT EXISTS note_history (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       REAL NOT NULL,  -- unix seconds
    path     TEXT NOT NULL,
    change   TEXT NOT NULL,  -- added | edited | renamed | deleted
    old_path TEXT,
    hash     TEXT NOT NULL DEFAULT '',
    sections TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS note_history_at ON note_history(at);
"""

# The trigram table (the seed compiler's phrases) over the text folded to one spelling (decision 0018):
# external content over a view of the chunks' folded text, so the folded text is stored nowhere, and FTS5
# reads it from the view where it needs it ('rebuild'; 'integrity-check', with which `groove doctor`
# compares the index with the chunks). A delete hands FTS5 the old text folded again, which is the text it
# indexed: the fold is deterministic, and a change of it comes with a migration that rebuilds the table
# (normalize.FOLD_VERSION).
_TRIGRAM_TABLE = """
CREATE VIEW IF NOT EXISTS fts_chunks_text(id, heading, context, content) AS
    SELECT id, groove_fold(heading), groove_fold(context), groove_fold(content) FROM chunks;
CREATE VIRTUAL TABLE IF NOT EXISTS fts_chunks USING fts5(
    heading, context, content, content='fts_chunks_text', content_rowid='id', tokenize='trigram'
);
CREATE VIRTUAL TABLE IF NOT EXISTS fts_chunks_vocab USING fts5vocab(fts_chunks, 'row');
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO fts_chunks(rowid, heading, context, content)
    VALUES (new.id, groove_fold(new.heading), groove_fold(new.context), groove_fold(new.content));
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO fts_chunks(fts_chunks, rowid, heading, context, content)
    VALUES ('delete', old.id, groove_fold(old.heading), groove_fold(old.context), groove_fold(old.content));
END;
CREATE TRIGGER IF NOT EXISTS chunks_au AFTER UPDATE OF heading, context, content ON chunks BEGIN
    INSERT INTO fts_chunks(fts_chunks, rowid, heading, context, content)
    VALUES ('delete', old.id, groove_fold(old.heading), groove_fold(old.context), groove_fold(old.content));
    INSERT INTO fts_chunks(rowid, heading, context, content)
    VALUES (new.id, groove_fold(new.heading), groove_fold(new.context), groove_fold(new.content));
END;
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

# Links between notes (groove/corpus/links.py; docs/indexing.md "Links"). `note_names` holds the names each note
# answers to (its file name without .md, and its frontmatter aliases and title, folded), `links` every link of
# every Markdown note, with the note it names (`target_id`, NULL: unresolved). Both are written in the note's own
# transaction (store/sqlite/writer.py); a note added, renamed or deleted resolves again the links that name it
# (RESOLVE_LINKS), so its backlinks follow.
_LINK_TABLES = """
CREATE TABLE IF NOT EXISTS note_names (
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    name   TEXT NOT NULL,                      -- groove_note_names(path, title, frontmatter)
    alias  INTEGER NOT NULL,                   -- 0: the file name, 1: an alias or the title
    PRIMARY KEY (doc_id, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS note_names_name ON note_names(name);
CREATE TABLE IF NOT EXISTS links (
    id        INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    line      INTEGER NOT NULL,                -- 1-based line of the linking note
    kind      TEXT NOT NULL,                   -- wiki, embed or markdown
    target    TEXT NOT NULL,                   -- the note as written: a name or a path
    name      TEXT NOT NULL,                   -- the target's file name, folded: note_names.name
    heading   TEXT,
    block     TEXT,
    alias     TEXT,
    target_id INTEGER REFERENCES documents(id) ON DELETE SET NULL
);
CREATE INDEX IF NOT EXISTS links_source ON links(source_id);
CREATE INDEX IF NOT EXISTS links_target ON links(target_id);
CREATE INDEX IF NOT EXISTS links_name ON links(name);
"""

_SCHEMA_V1 = (
    """
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
    queued_at    REAL NOT NULL,                -- newest edits are embedded first
    text_quality REAL NOT NULL DEFAULT 1.0,    -- the score of the text alone: 0..1 (corpus/quality.py)
    quality      REAL NOT NULL DEFAULT 1.0     -- text_quality x the template factor of the notes holding the text
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, ordinal);
CREATE INDEX IF NOT EXISTS chunks_quality ON chunks(quality);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(hash);
CREATE INDEX IF NOT EXISTS chunks_embedding ON chunks(embedding_id);
CREATE INDEX IF NOT EXISTS chunks_pending ON chunks(queued_at) WHERE embedding_id IS NULL;
"""
    + _TRIGRAM_TABLE
    + _CJK_TABLES
    + _WORD_TABLES
    + _EMBEDDINGS_TABLE
    + _PARKED_TABLE
    + _HISTORY_TABLE
    + """CREATE TRIGGER IF NOT EXISTS embeddings_ad AFTER DELETE ON embeddings BEGIN
    INSERT INTO meta(key, value) VALUES ('vectors_removed', '1')
    ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT);
END;
CREATE TABLE IF NOT EXISTS skipped (
    path   TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    at     REAL NOT NULL
);
"""
    + _LINK_TABLES
)

# The two tables that index a function of the chunks' text, filled again from the chunks
# (their migrations, and `groove doctor --fix`; the trigram table's 'rebuild' reads its view).
REFILL_CJK = """
DELETE FROM fts_cjk;
INSERT INTO fts_cjk(rowid, heading, context, content)
    SELECT id, groove_cjk_terms(heading), groove_cjk_terms(context), groove_cjk_terms(content) FROM chunks;
"""
# Which note each link names, among the notes that answer to its name (corpus/links.py `resolve`); the writer
# adds a WHERE (one note's links, or the links naming a name).
LINK_TARGET = """(
    SELECT groove_link_target(links.target, links.kind, (SELECT path FROM documents WHERE id = links.source_id),
                              json_group_array(json_array(n.doc_id, d.path, n.alias)))
    FROM note_names n JOIN documents d ON d.id = n.doc_id WHERE n.name = links.name)"""
RESOLVE_LINKS = "UPDATE links SET target_id = " + LINK_TARGET
# The links and names filled again from the documents and their stored chunks (which hold each Markdown note's
# body byte for byte): the migration that added them, and `groove doctor --fix`. Nothing is read from the files
# and nothing is re-embedded.
FILL_LINKS = (
    """
DELETE FROM links;
DELETE FROM note_names;
INSERT OR IGNORE INTO note_names(doc_id, name, alias)
    SELECT d.id, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]')
    FROM documents d, json_each(groove_note_names(d.path, d.title, d.frontmatter)) j;
INSERT INTO links(source_id, line, kind, target, name, heading, block, alias)
    SELECT f.doc_id, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'),
           json_extract(j.value, '$[3]'), json_extract(j.value, '$[4]'), json_extract(j.value, '$[5]'),
           json_extract(j.value, '$[6]')
    FROM (SELECT doc_id, groove_chunk_links(ordinal, start_line, content) AS found FROM chunks
          WHERE doc_id IN (SELECT id FROM documents WHERE path LIKE '%.md' OR path LIKE '%.markdown')
          GROUP BY doc_id) f, json_each(f.found) j;
"""
    + RESOLVE_LINKS
    + ";\n"
)
# Every chunk's quality score from its stored text, times the template factor of a text more than REPEAT_FREE
# notes hold (groove/corpus/quality.py): the migration that added the scores (and the step of any later change
# of the score). Nothing is read from the files and nothing is re-embedded.
QUALITY_SCORES = f"""
UPDATE chunks SET text_quality = groove_text_quality(content);
UPDATE chunks SET quality = text_quality;
UPDATE chunks SET quality = chunks.text_quality * groove_repeat_factor(n.notes)
    FROM (SELECT hash, count(DISTINCT doc_id) AS notes FROM chunks GROUP BY hash
          HAVING count(DISTINCT doc_id) > {REPEAT_FREE}) AS n
    WHERE chunks.hash = n.hash;
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
    3: _EMBEDDINGS_TABLE.replace("embeddings (", "embeddings_v4 (", 1)
    + """
INSERT INTO embeddings_v4(id, hash, created_at) SELECT id, hash, created_at FROM embeddings;
DROP TABLE embeddings;
ALTER TABLE embeddings_v4 RENAME TO embeddings;
""",
    # 4 -> 5: the word table, filled from the chunks already indexed (nothing is re-embedded;
    # about 1 s per 2,000 chunks), then merged like any large write (decision 0013).
    4: _WORD_TABLES + REFILL_WORDS + "INSERT INTO fts_words(fts_words) VALUES ('optimize');\n",
    # 5 -> 6: the trigram and bigram tables hold the text folded to one spelling (decision 0018). The
    # trigram table was external content over the chunks (the text as written); it becomes external
    # content over the view of their folded text. Both are filled again from the chunks, nothing is
    # re-embedded (the chunks, their hashes and the vectors are untouched), then merged (decision 0013).
    5: """
DROP TRIGGER IF EXISTS chunks_ai;
DROP TRIGGER IF EXISTS chunks_ad;
DROP TRIGGER IF EXISTS chunks_au;
DROP TABLE IF EXISTS fts_chunks_vocab;
DROP TABLE IF EXISTS fts_chunks;
"""
    + _TRIGRAM_TABLE
    + "INSERT INTO fts_chunks(fts_chunks) VALUES ('rebuild');\n"
    + REFILL_CJK
    + "INSERT INTO fts_chunks(fts_chunks) VALUES ('optimize');\n"
    + "INSERT INTO fts_cjk(fts_cjk) VALUES ('optimize');\n",
    # 6 -> 7: links between notes (corpus/links.py): the names the notes answer to and every Markdown note's
    # links, filled from the documents and the chunks already stored (which hold each body byte for byte) and
    # resolved; nothing is read from the files and nothing is re-embedded.
    6: _LINK_TABLES + FILL_LINKS,
    # 7 -> 8: each chunk's quality score (decision 0020), stored with it and computed from the chunks already
    # stored: their text and how many notes hold the same text. The search and the graph hide the chunks under
    # [quality_filter] threshold. Nothing is read from the files and nothing is re-embedded (the hashes and
    # the vectors are untouched).
    7: """
ALTER TABLE chunks ADD COLUMN text_quality REAL NOT NULL DEFAULT 1.0;
ALTER TABLE chunks ADD COLUMN quality REAL NOT NULL DEFAULT 1.0;
CREATE INDEX IF NOT EXISTS chunks_quality ON chunks(quality);
"""
    + QUALITY_SCORES,
    # 8 -> 9: the vectors of deleted texts are parked for a grace period before they are dropped (a rename
    # across two watcher batches, or across a restart, embeds nothing). Nothing is re-embedded.
    8: _PARKED_TABLE,
    # 9 -> 10: the change history (`groove changes`); it begins with the upgrade (meta history_since, set by
    # init_sync). Nothing is re-embedded.
    9: _HISTORY_TABLE,
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


def init_sync(
    con: Any, *, model: str, dimension: int, kb_path: str, settings_json: str | None = None, allow_switch: bool = False
) -> str | None:
    """Create or check the schema for this model.

    An index built by another model is refused, unless `allow_switch` (a writer: the switch
    is then built beside, groove/store/sqlite/shadow.py); the model it answers with is returned
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
        if (
            settings_json is not None
            and answering_with is None
            and get_meta_sync(con, "embedding_settings") in (None, "")
        ):
            set_meta_sync(con, "embedding_settings", settings_json)
        if get_meta_sync(con, "history_since") is None:  # a new index, or one from before the history
            set_meta_sync(con, "history_since", str(time.time()))
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


_ADD_COLUMN = re.compile(r"^\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)", re.IGNORECASE)


def _column_there(con: Any, statement: str) -> bool:
    """Whether `statement` adds a column its table already has (SQLite has no ADD COLUMN IF NOT EXISTS)."""
    m = _ADD_COLUMN.match(statement)
    if m is None:
        return False
    return any(row[1] == m.group(2) for row in con.execute(f"PRAGMA table_info({m.group(1)})"))


def _migrate_step(con: Any, version: int) -> None:
    statements = split_sql(MIGRATIONS.get(version, ""))
    for statement in statements:
        first = statement.split(None, 1)[0].rstrip(";").upper()
        if first in _NOT_IN_A_STEP:  # a bug in groove: refused before anything runs
            raise MigrationError(
                _migration_failed(
                    con,
                    version,
                    f"the step holds `{first}`, which cannot run inside the step's one transaction",
                    "this is a bug in groove (please report it); `groove index --rebuild` builds a new index from "
                    "the notes",
                    ran=False,
                )
            )
    try:
        con.execute("BEGIN IMMEDIATE")
        for statement in statements:
            if _column_there(con, statement):
                continue  # a step run again over a table that has the column: adding it twice is an error
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
        known = write_failure(exc)
        why = known[0] if known else f"{type(exc).__name__}: {exc}"
        todo = (
            (f"{known[1]}, then run" if known else "run") + " `groove index` (or start `groove serve`) to upgrade "
            "it again; if it fails the same way, `groove index --rebuild` builds a new index from the notes "
            "(every note is embedded again)"
        )
        raise MigrationError(_migration_failed(con, version, why, todo)) from exc


def _migration_failed(con: Any, version: int, why: str, todo: str, *, ran: bool = True) -> str:
    """One line: which step failed, why, that the index is still at `version`, what to do."""
    try:
        path = next((row[2] for row in con.execute("PRAGMA database_list") if row[1] == "main"), "")
    except DBError:
        path = ""
    text = (
        f"could not upgrade the index {path or '(in memory)'} from schema version {version} to {version + 1} "
        f"(migration step {version}): {why}; the index is unchanged at schema version {version} "
        f"({'the step was rolled back whole' if ran else 'the step did not run'}); {todo}"
    )
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


def check_writable_file(path: Path) -> None:
    """Refuse to make a groove index of a file that is something else: another program's SQLite database (it has
    tables and no groove `meta`) or a file that is not SQLite at all. A missing or empty file, an SQLite file with
    no table yet, and a groove index are fine."""
    if not path.exists() or _is_groove_index(path):
        return
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        finally:
            con.close()
    except sqlite3.DatabaseError:
        tables = ["?"]
    if not tables:
        return
    what = (
        f"an SQLite database of another program (tables {', '.join(tables[:5])})"
        if tables != ["?"]
        else "not an SQLite file"
    )
    raise IndexError_(
        f"{path} is {what}, not a groove index: groove never writes into it; point index_path (--index) at a new "
        "file, or leave it out for the default one"
    )


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
