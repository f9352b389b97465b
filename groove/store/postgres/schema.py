"""The PostgreSQL store's schema: its tables, its versioned migrations, and the model it was built with.

The same records as the SQLite file (groove/store/sqlite/schema.py): meta, documents, their tags,
chunks, links and the names notes answer to, skipped files, vectors. The full-text side is what
groove computes in Python (groove/corpus/tokens.py) rather than FTS5's tables:

- `chunks.fold_h / fold_x / fold_c`: each column's phrase text, under one pg_trgm GIN index of the
  three joined by U+001F (a phrase never holds it), for the phrases leg's substring matches;
  `phrase_len`: the trigrams FTS5 would count;
- `postings`: one row per (index, term, chunk) of the bigram and word indexes, the term's count in
  each column packed in one integer (heading x 10^6 + context x 10^3 + content, each capped at 999) and
  the chunk's length in that index's tokens, both carried in the primary key's index (bm25 reads them
  with an index-only scan, visiting neither the postings' rows nor the chunk);
  `vocab`: each term's chunk count; `text_stats`: per index, the chunks holding a term and their
  summed length, and (kind 3) every chunk: bm25's N and average length;
- `embeddings.embedding`: pgvector's `vector(dimension)` under an HNSW index (L2);
- `queue`: the texts waiting for a vector, handed out with `FOR UPDATE SKIP LOCKED`;
- `folders`: which process indexes which notes folder (a claim held by that process's session);
- `parked_vectors`: the vectors of texts no chunk holds any more, out of every search, for a grace period
  (a note back under another name, or after a restart, takes them again instead of being embedded again);
- `note_history`: the change history `groove changes` answers from (as the SQLite file's: one row per note
  added, edited with its sections, renamed or deleted), kept protocols.HISTORY_KEPT_S;
- `changes`: the last hour of what every NOTIFY said, for a search node on a read replica, where LISTEN
  is not allowed (it reads them every few seconds instead).

A schema version in meta, and MIGRATIONS one step per version, as the SQLite store has them; a database
a newer groove wrote is refused with one line.
"""

from __future__ import annotations

SCHEMA_VERSION = 3

# The change history (`groove changes`): in the schema and in the migration to version 3.
_HISTORY_TABLE = """CREATE TABLE IF NOT EXISTS note_history (
    id       BIGSERIAL PRIMARY KEY,
    at       DOUBLE PRECISION NOT NULL,
    path     TEXT NOT NULL,
    change   TEXT NOT NULL,
    old_path TEXT,
    hash     TEXT NOT NULL DEFAULT '',
    sections TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS note_history_at ON note_history(at);
"""

# Every statement groove runs to create a store, in order; `{dim}` is the vectors' dimension.
SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    id          BIGSERIAL PRIMARY KEY,
    path        TEXT NOT NULL UNIQUE,
    title       TEXT NOT NULL,
    tags        TEXT NOT NULL DEFAULT '[]',
    date        TEXT,
    frontmatter TEXT NOT NULL DEFAULT '{}',
    warnings    TEXT NOT NULL DEFAULT '[]',
    size        BIGINT NOT NULL,
    mtime_ns    BIGINT NOT NULL,
    hash        TEXT NOT NULL,
    indexed_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_date ON documents(date);
CREATE INDEX IF NOT EXISTS documents_path_pattern ON documents(path text_pattern_ops);
CREATE TABLE IF NOT EXISTS doc_tags (
    doc_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    tag    TEXT NOT NULL,
    PRIMARY KEY (doc_id, tag)
);
CREATE INDEX IF NOT EXISTS doc_tags_tag ON doc_tags(tag);
CREATE TABLE IF NOT EXISTS embeddings (
    id         BIGSERIAL PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    created_at DOUBLE PRECISION NOT NULL,
    embedding  vector({dim}) NOT NULL
);
CREATE INDEX IF NOT EXISTS embeddings_hnsw ON embeddings USING hnsw (embedding vector_l2_ops);
CREATE TABLE IF NOT EXISTS chunks (
    id           BIGSERIAL PRIMARY KEY,
    doc_id       BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading      TEXT NOT NULL,
    level        INTEGER NOT NULL,
    context      TEXT NOT NULL,
    content      TEXT NOT NULL,
    start_line   INTEGER NOT NULL,
    end_line     INTEGER NOT NULL,
    token_count  INTEGER,
    hash         TEXT NOT NULL,
    embedding_id BIGINT,
    queued_at    DOUBLE PRECISION NOT NULL,
    text_quality REAL NOT NULL DEFAULT 1.0,
    quality      REAL NOT NULL DEFAULT 1.0,
    fold_h       TEXT NOT NULL DEFAULT '',
    fold_x       TEXT NOT NULL DEFAULT '',
    fold_c       TEXT NOT NULL DEFAULT '',
    phrase_len   INTEGER NOT NULL DEFAULT 0,
    bigram_len   INTEGER NOT NULL DEFAULT 0,
    word_len     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, ordinal);
CREATE INDEX IF NOT EXISTS chunks_quality ON chunks(quality);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(hash);
CREATE INDEX IF NOT EXISTS chunks_embedding ON chunks(embedding_id);
CREATE INDEX IF NOT EXISTS chunks_pending ON chunks(queued_at) WHERE embedding_id IS NULL;
CREATE INDEX IF NOT EXISTS chunks_phrases ON chunks
    USING gin ((fold_h || chr(31) || fold_x || chr(31) || fold_c) gin_trgm_ops);
CREATE TABLE IF NOT EXISTS postings (
    kind     SMALLINT NOT NULL,
    term     TEXT NOT NULL,
    chunk_id BIGINT NOT NULL,
    tf       INTEGER NOT NULL,
    dl       INTEGER NOT NULL,
    PRIMARY KEY (kind, term, chunk_id) INCLUDE (tf, dl)
);
CREATE TABLE IF NOT EXISTS vocab (
    kind SMALLINT NOT NULL,
    term TEXT NOT NULL,
    df   INTEGER NOT NULL,
    PRIMARY KEY (kind, term)
);
CREATE TABLE IF NOT EXISTS text_stats (
    kind   SMALLINT PRIMARY KEY,
    rows   BIGINT NOT NULL DEFAULT 0,
    length BIGINT NOT NULL DEFAULT 0
);
INSERT INTO text_stats(kind) VALUES (0), (1), (2), (3) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS skipped (
    path   TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    at     DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS note_names (
    doc_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    name   TEXT NOT NULL,
    alias  INTEGER NOT NULL,
    PRIMARY KEY (doc_id, name)
);
CREATE INDEX IF NOT EXISTS note_names_name ON note_names(name);
CREATE TABLE IF NOT EXISTS links (
    id        BIGSERIAL PRIMARY KEY,
    source_id BIGINT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    line      INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    target    TEXT NOT NULL,
    name      TEXT NOT NULL,
    heading   TEXT,
    block     TEXT,
    alias     TEXT,
    target_id BIGINT REFERENCES documents(id) ON DELETE SET NULL
);
CREATE INDEX IF NOT EXISTS links_source ON links(source_id);
CREATE INDEX IF NOT EXISTS links_target ON links(target_id);
CREATE INDEX IF NOT EXISTS links_name ON links(name);
CREATE TABLE IF NOT EXISTS queue (
    hash      TEXT PRIMARY KEY,
    queued_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_newest ON queue(queued_at DESC, hash);
CREATE TABLE IF NOT EXISTS folders (
    name       TEXT PRIMARY KEY,
    path       TEXT NOT NULL,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    command    TEXT NOT NULL,
    claimed_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS eval_history (
    id   BIGSERIAL PRIMARY KEY,
    line TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS parked_vectors (
    hash      TEXT PRIMARY KEY,
    embedding vector({dim}) NOT NULL,
    at        DOUBLE PRECISION NOT NULL
);
"""
    + _HISTORY_TABLE
    + """CREATE TABLE IF NOT EXISTS changes (
    id      BIGSERIAL PRIMARY KEY,
    at      DOUBLE PRECISION NOT NULL,
    payload TEXT NOT NULL
);
CREATE OR REPLACE FUNCTION groove_vectors_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'vectors_removed';
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS embeddings_removed ON embeddings;
CREATE TRIGGER embeddings_removed AFTER DELETE ON embeddings FOR EACH ROW EXECUTE FUNCTION groove_vectors_removed();
"""
)

# Schema version -> the statements that take a store from it to the next.
MIGRATIONS: dict[int, str] = {
    # 2: a term's postings carry tf and dl in the index, so a full-text leg reads no table row (an index-only scan:
    # the words leg of a 6-term query at 10k chunks, 26 -> 14 ms with the rest of decision 0022's changes).
    1: "ALTER TABLE postings DROP CONSTRAINT postings_pkey, ADD PRIMARY KEY (kind, term, chunk_id) INCLUDE (tf, dl);",
    # 3: the change history (`groove changes`), begun with the upgrade (meta history_since). Nothing is re-embedded.
    2: _HISTORY_TABLE
    + """INSERT INTO meta(key, value) VALUES ('history_since', extract(epoch FROM now())::text) ON CONFLICT DO NOTHING;
""",
}

# The full-text indexes' kinds in `postings`, `vocab` and `text_stats` (0: phrases, counted in text_stats only).
KIND = {"phrases": 0, "bigrams": 1, "words": 2}

# Advisory lock keys (pg_advisory_lock's two-int form): the first names groove's use, the second the object.
LOCK_WRITE = 4711  # (LOCK_WRITE, 0): one note write at a time, across every process that writes this store
LOCK_FOLDER = 4712  # (LOCK_FOLDER, hashtext(name)): the process indexing a notes folder holds it
LOCK_TEXT = 4713  # (LOCK_TEXT, hashtext(hash)): the embedding worker that took a text holds it
LOCK_SCHEMA = 4714  # (LOCK_SCHEMA, 0): creating or migrating the schema


def statements(script: str) -> list[str]:
    """Split a script on `;` at line ends, keeping a `$$ ... $$` function body whole."""
    out: list[str] = []
    buf: list[str] = []
    in_body = False
    for line in script.splitlines():
        if not line.strip() and not buf:
            continue
        buf.append(line)
        if line.count("$$") % 2 == 1:
            in_body = not in_body
        if not in_body and line.rstrip().endswith(";"):
            out.append("\n".join(buf))
            buf = []
    if buf and "".join(buf).strip():
        out.append("\n".join(buf))
    return out
