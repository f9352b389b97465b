"""The store as every layer above it sees it: protocols in groove's own terms, no SQL, no driver.

An index lives in a store: an SQLite file (the default: `groove/store/sqlite/`) or a PostgreSQL
database shared by several machines (`groove/store/postgres/`). Search, sync, evaluation,
operations and the wiring (`groove.index.Index`) talk to these protocols only; each backend
implements them side by side, and `groove.store.open_store` picks one from `[store] url`.

- `Store`: one open index: readers, the writer's `IndexWrites`, the embedding queues, the
  in-memory vectors' source, maintenance.
- `Reads`: every read on one consistent view (one connection): what a search reads
  (`SearchReads`: full-text legs asked for their terms and weights, the vector leg, rows by id)
  and what the answers read (`IndexReads`: status, documents, links, topics).
- `IndexWrites`: a note's chunks, tags, links and quality in one transaction; deletions, skipped
  files, meta.
- `EmbeddingStore`: the embedding queue (texts without a vector in, vectors out).

The tokens the full-text legs index are the same in every store (`groove/corpus/tokens.py`
computes them in Python; the SQLite store's FTS5 tables tokenize the same way), so a query ranks
alike on both: decision 0022.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from groove.errors import GrooveError

if TYPE_CHECKING:
    import numpy as np

# The three full-text indexes of a chunk's heading, context and content (decisions 0006, 0014, 0018):
# substrings of three characters or more of the folded text (the seeds' phrases), CJK bigrams, and the
# stemmed words of the alphabets written with spaces.
TextKind = Literal["phrases", "bigrams", "words"]
TEXT_KINDS: tuple[TextKind, ...] = ("phrases", "bigrams", "words")

Weights = tuple[float, float, float]  # bm25 column weights: heading, context, content


class StoreError(GrooveError):
    """The store cannot be used as asked; the message says what to do."""


class StoreWriteError(StoreError):
    """A write failed for a reason a person can fix (a full disk, a read-only index, a lost server)."""


@dataclass(frozen=True)
class TextQuery:
    """One full-text leg's query: its terms (folded as the index holds them), OR-ed, ranked by bm25.

    `prefix`: the terms that match any indexed term starting with them (a one-character CJK run);
    `excluded`: phrases whose chunks the leg leaves out (the phrases leg's `-word` exclusions)."""

    kind: TextKind
    terms: tuple[str, ...]
    prefix: frozenset[str] = frozenset()
    excluded: tuple[str, ...] = ()

    def keeping(self, kept: Collection[str]) -> TextQuery:
        """The same query with only the `kept` terms (in their order): common terms left out."""
        return TextQuery(self.kind, tuple(t for t in self.terms if t in kept), self.prefix, self.excluded)


@dataclass(frozen=True)
class DocumentFilter:
    """What a store can select documents by: tags (folded) and a date range (ISO days, inclusive)."""

    tags_any: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    date_from: str | None = None
    date_to: str | None = None
    with_frontmatter: bool = False


# How long the vector of a text no chunk holds any more is kept aside (parked): a note that comes back under
# another name within it (a rename the watcher saw as a deletion and, a batch later, an addition; or across a
# restart) takes its vectors back by their text's hash, and nothing is embedded again. Parked vectors are out
# of every search.
PARKED_VECTOR_GRACE_S = 900.0

# How long the change history (`note_history`: each note added, edited, renamed or deleted, and its sections) is
# kept: what `changes` can answer about. A row older than it goes with the next write.
HISTORY_KEPT_S = 90 * 86400.0


def day_after(day: str) -> str | None:
    """The ISO day after `day` (a date filter's `date_to`, inclusive, as `date < day after`); None past
    9999-12-31 (every date is on or before it)."""
    import datetime as dt

    try:
        return (dt.date.fromisoformat(day) + dt.timedelta(days=1)).isoformat()
    except OverflowError:
        return None


@dataclass(frozen=True)
class Check:
    """One finding of a store's check of itself (`groove doctor`)."""

    level: str  # "error" | "warning" | "info"
    check: str
    message: str
    fix: str
    count: int = 1
    examples: list[str] = field(default_factory=list)
    fixable: bool = False


class SearchReads(Protocol):
    """The reads of one search, on one consistent view of the index. The view may leave out the chunks
    under a quality floor (decision 0020): `text_scored` and `vector_scored` then never return them."""

    async def tag_names(self) -> list[str]:
        """Every tag some note carries (folded), sorted: what a filter's tags could have been."""
        ...

    async def documents_matching(self, where: DocumentFilter) -> list[tuple[Any, ...]]:
        """(doc id, path[, frontmatter dict]) of the documents with these tags and dates, by id."""

    async def text_scored(
        self,
        query: TextQuery,
        limit: int,
        weights: Weights = (2.0, 1.0, 1.0),
        allowed_docs: Sequence[int] | None = None,
        exclude: set[int] | None = None,
    ) -> list[tuple[int, float]]:
        """(chunk id, bm25) best first over one full-text index; bm25 negative, lower is better
        (FTS5's convention), computed over the whole index whatever the filter."""

    async def doc_freq(self, kind: TextKind, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """Chunks containing each term (a phrase: at most its rarest trigram's count), and the number of chunks."""

    async def indexed_rows(self, kind: TextKind) -> int:
        """Chunks that hold at least one term of this index (the postings a leg can walk)."""

    async def sent_expression(self, query: TextQuery) -> str:
        """What this store hands its full-text engine for `query` (explain)."""

    async def fetch_texts(self, ids: Sequence[int]) -> dict[int, str]:
        """Heading, context and content of each chunk as one text, folded as the full-text indexes hold it."""

    async def matching_ids(self, phrases: Sequence[str]) -> set[int]:
        """Every chunk containing any of the phrases: no ranking, no limit (an exclusion's chunks)."""

    async def section_labels(self) -> Sequence[tuple[int, str, str]]:
        """(chunk id, heading, context) of every chunk (`exclude_headings` picks its sections from them); the same
        object again while the index is unchanged, where the store can tell."""

    async def vector_scored(
        self, query: np.ndarray, limit: int, exclude: set[int] | None, allowed_docs: Sequence[int] | None
    ) -> list[tuple[int, float]]:
        """(chunk id, L2 distance) nearest first."""

    async def vector_legs(
        self,
        queries: Sequence[tuple[np.ndarray, int]],
        exclude: set[int] | None,
        allowed_docs: Sequence[int] | None,
    ) -> tuple[list[list[tuple[int, float]]], dict[int, np.ndarray]]:
        """`vector_scored` of each (query, limit), in one pass over the in-memory vectors when the view has
        them, and the vector of every chunk returned (from that copy when it answered, else the store's)."""

    async def fetch_hits(self, ids: Sequence[int]) -> dict[int, Any]:
        """A `groove.search.hits.Hit` (score 0) per chunk id."""

    async def fetch_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of the given chunks."""

    async def calibration_state(self) -> tuple[str, int, str | None]:
        """The vector set's model and size, and the off_topic calibration stored with the index (JSON)."""

    async def calibration_passages(self, k: int) -> list[tuple[int, int, str]]:
        """(chunk id, doc id, content) of a fixed sample of up to `k` embedded chunks."""

    async def chunk_docs(self, ids: Sequence[int]) -> dict[int, int]:
        """The doc id of each chunk id."""

    async def chunk_quality(self, ids: Sequence[int]) -> dict[int, float]:
        """The stored quality score (0..1) of each chunk id."""

    async def low_quality_count(self, min_quality: float) -> int:
        """How many chunks of the index score under `min_quality`."""

    async def fetch_doc_chunks(self, doc_ids: Sequence[int]) -> dict[int, list[tuple[Any, ...]]]:
        """(ordinal, level, heading, content, start_line, end_line, token_count) per document, in order."""

    async def pending_count(self) -> int:
        """Chunks still without a vector."""


class IndexReads(Protocol):
    """What the answers read besides a search: status, notes, links, the graph's rows, evaluation's rows."""

    async def meta(self, key: str) -> str | None: ...

    async def status(self, location: str) -> dict[str, Any]:
        """The index's counts, identity, skipped files and warnings (`IndexStatus`)."""

    async def count_documents_under(self, prefix: str) -> int: ...

    async def get_document(self, path: str, *, with_chunks: bool = False) -> dict[str, Any] | None: ...

    async def list_documents(
        self, *, after: str, limit: int, folder: str | None, tags: list[str] | None
    ) -> tuple[list[dict[str, Any]], bool]: ...

    async def paths_starting_with(self, prefix: str, limit: int) -> tuple[list[str], int]: ...

    async def tags_starting_with(self, prefix: str, limit: int) -> tuple[list[str], int]: ...

    async def topics(self, *, depth: int, limit: int) -> dict[str, Any]: ...

    async def note_links(self, path: str, *, limit: int) -> dict[str, Any] | None: ...

    async def linked_notes(self, path: str) -> list[dict[str, Any]]: ...

    async def note_title(self, path: str) -> str | None: ...

    async def note_titles(self, paths: Sequence[str]) -> dict[str, str]: ...

    async def paths_of(self, doc_ids: Sequence[int]) -> dict[int, str]: ...

    async def note_vectors(self, path: str, min_quality: float | None, limit: int) -> list[np.ndarray]:
        """The vectors of a note's first `limit` embedded chunks (its passages that clear the floor)."""

    async def passages_of_vectors(
        self, emb_ids: Sequence[int], min_quality: float | None
    ) -> list[tuple[int, int, str, str, int, int]]:
        """(chunk id, vector id, path, heading, start_line, end_line) of the chunks holding these vectors."""

    async def nearest_vectors(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(vector id, L2 distance) of the `k` stored vectors nearest `query` (the store's own scan)."""

    async def hidden_vector_count(self, min_quality: float) -> int:
        """How many vectors the chunks scoring under `min_quality` hold."""

    async def chunk_locations(self) -> dict[int, dict[str, Any]]:
        """{chunk id: {path, heading}} of every chunk (tune scores rankings by them)."""

    async def texts_containing(self, phrases: Sequence[str], limit: int) -> list[tuple[str, list[str]]]:
        """(path, [heading, context, content]) of up to `limit` chunks containing every phrase (folded)."""

    async def sample_contents(self, n: int) -> list[str]:
        """A fixed sample of `n` chunk texts (the notes' script mix)."""

    async def known_documents(self) -> dict[str, tuple[int, int, int, str]]:
        """{path: (doc id, size, mtime_ns, file hash)} of every indexed note."""

    async def skipped(self) -> dict[str, str]:
        """{path: reason} of the files the last scans skipped."""

    async def note_history(self, since: float, limit: int) -> list[tuple[float, str, str, str | None, str, str]]:
        """(at, path, change, old path, file hash, sections JSON) of the change history's rows at or after `since`
        (unix seconds), the last `limit` of them, oldest first; meta `history_since` says when the history began."""


class Reads(SearchReads, IndexReads, Protocol):
    """Every read, on one consistent view (one connection) of the index, the in-memory vectors'
    `groove.store.memory.VectorSource` included."""

    async def vector_stamp(self) -> tuple[Any, ...]: ...

    async def vector_ids_upto(self, max_id: int) -> np.ndarray: ...

    async def count_vectors_after(self, max_id: int) -> int: ...

    async def vectors_after(self, max_id: int) -> list[tuple[int, bytes]]: ...

    def searching(self, matrix: Any = None, min_quality: float | None = None) -> SearchReads:
        """This view as one search reads it: KNN on the process's in-memory vectors (`matrix`) when it
        keeps them, and without the chunks under `min_quality` (decision 0020)."""


class IndexWrites(Protocol):
    """Every write the indexer and the maintenance make, each in its own short transaction."""

    async def write_note(
        self, *, rel: str, parsed: Any, size: int, mtime_ns: int, file_hash: str, doc_id: int | None
    ) -> tuple[int, int]:
        """Insert or update one note (a `groove.corpus.markdown.ParsedNote`), its chunks diffed by hash, its tags,
        links and quality, in one transaction. Returns (doc id, chunks inserted)."""

    async def touch_document(self, doc_id: int, size: int, mtime_ns: int) -> None: ...

    async def delete_documents(self, paths: Collection[str]) -> int: ...

    async def record_skipped(self, skipped: Mapping[str, str], *, replace_all: bool) -> None: ...

    async def set_meta(self, key: str, value: str) -> None: ...

    async def collect_garbage(self, grace_s: float = PARKED_VECTOR_GRACE_S) -> int:
        """Park the vectors no chunk uses (out of every search, kept `grace_s` for a text that comes back) and drop
        those parked longer; how many were taken out of the index."""

    async def collect_freed(self, grace_s: float = PARKED_VECTOR_GRACE_S) -> int:
        """The same for the vectors the last note writes freed, when no chunk holds them now."""

    async def merge_full_text(self, written: int) -> bool:
        """After a large write: the full-text indexes compacted; whether it ran."""

    async def known_documents(self) -> dict[str, tuple[int, int, int, str]]:
        """{path: (doc id, size, mtime_ns, file hash)} of every indexed note, as the writer sees them."""

    async def skipped(self) -> dict[str, str]:
        """{path: reason} of the files the last scans skipped."""


class EmbeddingStore(Protocol):
    """The embedding queue: texts without a vector, and where their vectors go."""

    async def pending_count(self) -> int: ...

    async def pending_batch(self, limit: int, exclude: Collection[str] = ()) -> list[tuple[str, str]]:
        """(hash, text) of the next texts to embed, newest edits first, without `exclude`."""

    async def store_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> int:
        """Store the vectors of these texts and attach them to their chunks; chunks updated."""


class Store(Protocol):
    """One open index."""

    kind: str  # "sqlite" | "postgresql"
    location: str  # the file, or the database URL without its password
    switch: dict[str, Any] | None  # a model switch found when the writer opened it ({"from", "settings"})

    @property
    def writable(self) -> bool: ...

    @property
    def writes(self) -> IndexWrites: ...

    def reading(self) -> AbstractAsyncContextManager[Reads]: ...

    def spare_reading(self) -> AbstractAsyncContextManager[Reads | None]: ...

    def queue(self, shadow_set: bool = False) -> EmbeddingStore: ...

    def vector_memory(self, max_bytes: int) -> Any:
        """An in-memory copy of this store's vectors (`groove.store.memory.VectorMatrix`)."""

    async def shadow_pending(self) -> int: ...

    async def swap_shadow(self) -> dict[str, Any]: ...

    @property
    def eval_history_location(self) -> str:
        """Where the eval history lives, as a message names it (a file beside the index, or the store's table)."""
        ...

    async def eval_history(self) -> list[str]:
        """The eval history's lines (one JSON run each), oldest first; [] when there is none."""
        ...

    async def append_eval_history(self, line: str, keep: int) -> None:
        """Add one run's line and keep the last `keep` (every reader sees the old history whole, or the new)."""
        ...

    async def folders(self) -> list[dict[str, Any]]:
        """The notes folders a shared store holds notes of (name, path, host, pid, claimed_at); [] for a store
        one process writes (SQLite: its folders are the configuration's)."""
        ...

    async def close(self) -> None: ...
