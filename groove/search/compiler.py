"""Compile a user's search query into an FTS5 ``MATCH`` expression.

The full-text half of the hybrid search runs over an FTS5 table with the
``trigram`` tokenizer, where a quoted phrase is a contiguous-substring match
and a phrase shorter than three characters matches nothing at all. Sending
the whole query as one phrase searches for the sentence verbatim, which no
note contains; sending it unquoted lets FTS5 read ``"``, ``*``, ``:``, ``^``,
``(``, ``)``, ``NEAR``, ``AND``, ``OR`` and ``NOT`` as syntax and fail the whole
search. So the query is compiled into a set of quoted phrases joined with
``OR``, in small pure stages:

1. :func:`split_groups` -- cut the query at whitespace into groups, keeping
   ``"..."`` regions whole (``""`` inside one is a literal ``"``, FTS5's own
   convention). A group led by ``-`` at a whitespace boundary is an
   *exclusion*; ``foo-bar`` is not.
2. :func:`split_separators` -- cut unquoted text into words at every
   character that is not a word character (letters ``L*``, numbers ``N*``,
   marks ``M*``; this includes ``ー`` and ``々``).
3. :func:`split_scripts` -- cut each word at script boundaries: kanji
   (including ``々 〆 〇``), hiragana, katakana (including ``ー`` and halfwidth
   katakana) and other word characters. A combining mark stays with the
   character before it.
4. :func:`apply_trigram_floor` -- join a run shorter than 3 characters to its
   neighbours *within the same word* (rightwards first; a short tail joins the
   span before it) until it reaches 3. When the join extends a span that
   already stood on its own (>= 3 characters), that pre-extension span is
   emitted too. A word that never reaches 3 characters is dropped; a join
   never crosses a separator or a quote. A quoted phrase under 3 characters
   is dropped by the same floor.
5. :func:`finalize_phrases` / :func:`build_match_expr` -- dedupe (first
   occurrence wins), cap at 32 (logged at warning), quote each phrase with
   FTS5's doubled-quote escaping and join with ``" OR "``. Exclusions join as
   ``(positives) NOT (negatives)``.
6. :func:`route` -- which table the query searches (decision 0014, beyond the
   seeds). A query made only of unquoted words of alphabets written with
   spaces (script runs of "other" characters, see ``groove/corpus/words.py``:
   English, and Latin, Greek or Cyrillic words) searches the word table, each
   word stemmed; two characters are enough there. Any other query (with
   Japanese in it, or a quoted region) searches the trigram table exactly as
   stage 5 compiled it. ``match_expr`` stays the expression of stage 5;
   ``trigram_expr`` and ``word_expr`` are what the two tables are handed.
   ``written_expr`` is stage 5's expression of the query as written, not
   folded: what explain shows as the MATCH expression (the seeds' own).

``再ランキングの評価について`` compiles to
``"再ランキング" OR "ランキング" OR "の評価" OR "について"`` under the seeds' rules;
groove searches those phrases in the folded spelling (stage 0 below):
``"再ランキング" OR "ランキング" OR "ノ評価" OR "ニツイテ"``.

Stage 0, beyond the seeds (decision 0018): the full-text tables hold the notes'
text folded to one spelling (``groove/corpus/normalize.py``: NFKC, iteration
marks, okurigana, hiragana as katakana), so each piece of the query is folded
the same way before stages 2-4 cut it, in two halves: ``fold_words`` (what
depends on neighbours) before the cut, so the script boundaries are those of
the folded text, and ``fold_kana`` (one character for one) on each phrase
after it, so that hiragana and katakana are still two scripts when the query
is cut. An unquoted phrase ending in a long vowel mark after three kana is
followed by its spelling without it (``サーバー`` also searches ``サーバ``, which
the tables' ``サーバー`` contains too): the tables keep the notes' marks. A
quoted region is folded whole.
Every phrase, positive or excluded, and every expression here is in the
folded spelling; ``text`` and ``vector_text`` are the query as written (the
embedder and the reranker never see folded text).

Rules decided here, beyond the retrieval-pipeline document:

* **Unterminated quote.** A ``"`` with no closing partner opens a quoted region
  that runs to the end of the (trimmed) query: ``rust "async runtime`` searches
  ``rust`` and the verbatim phrase ``async runtime``.
* **NUL and lone surrogates.** SQLite reads the ``MATCH`` argument as a C string
  (a NUL would cut the expression short, leaving an unterminated string) and a
  lone surrogate (U+D800..U+DFFF) cannot be encoded as UTF-8 at all. Both are
  replaced by a space before anything else, i.e. they act as whitespace,
  everywhere including inside quoted regions.
* **A lone ``-``.** ``-`` followed by whitespace or the end of the query is
  not an exclusion (there is nothing to exclude); it is ordinary punctuation.
* **Exclusions with a vector-only positive part.** ``AI -async``: the positive
  query ``AI`` is under 3 characters, so there is no FTS half
  (``match_expr is None``) but ``negative_expr`` is still set, because the
  vector half filters its candidates with it.
* **Fallback.** When no phrase survives and the positive query is at least 3
  characters, the positive query (the trimmed query with exclusion groups cut
  out, otherwise verbatim, quote characters included, folded) becomes one phrase --
  the pre-v0.16 behaviour, so this shape of query does not regress.
  Exclusions never fall back: an exclusion that yields no phrase excludes
  nothing.
* **Caps.** Positives and negatives are each capped at ``max_phrases``;
  ``CompiledQuery.truncated`` is the total dropped on both sides.

All lengths are in characters (code points), not bytes.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import structlog

from groove.corpus import normalize
from groove.corpus.words import fold_word, is_spaced, is_spaced_word
from groove.errors import GrooveError

__all__ = [
    "MAX_PHRASES",
    "TRIGRAM_FLOOR",
    "CompiledQuery",
    "Group",
    "Piece",
    "QueryError",
    "apply_trigram_floor",
    "build_match_expr",
    "compile_query",
    "finalize_phrases",
    "group_phrases",
    "query_words",
    "quote_phrase",
    "route",
    "split_groups",
    "split_scripts",
    "split_separators",
]

log = structlog.get_logger(__name__)

# Bump when the same query would compile to a different expression: `groove eval` history
# (groove/evaluate/history.py) refuses to compare runs across a change of it.
# 2: a query of words of spaced alphabets searches the word table (decision 0014)
# 3: phrases are searched in the folded spelling (decision 0018)
COMPILER_VERSION = 3
MAX_PHRASES = 32
TRIGRAM_FLOOR = 3

KANJI = "kanji"
HIRAGANA = "hiragana"
KATAKANA = "katakana"
OTHER = "other"

# Characters that belong to a script although their code point lies outside
# (or their category is ambiguous for) the block ranges below.
_KANJI_EXTRA = frozenset("々〆〇〻")
_KATAKANA_EXTRA = frozenset("ー")


class QueryError(GrooveError, ValueError):
    """The query cannot be searched; ``str(err)`` is a message for the user."""

    kind = "invalid"


@dataclass(frozen=True)
class CompiledQuery:
    text: str
    """The query, trimmed (NUL and lone surrogates replaced by spaces)."""
    vector_text: str
    """The query with exclusion groups cut out, whitespace-normalised: what the
    embedder, the reranker and match spans see."""
    positives: tuple[str, ...]
    """Unescaped phrases to search for, in query order, deduped, capped; folded (stage 0)."""
    negatives: tuple[str, ...]
    """Unescaped excluded phrases, in query order, deduped, capped separately; folded."""
    match_expr: str | None
    """The full FTS5 MATCH expression; ``None`` means no FTS half (vector-only)."""
    negative_expr: str | None
    """The negatives alone, ``"c" OR "d"``, or ``None`` when nothing is excluded."""
    vector_only: bool
    """True when the trimmed positive query is under 3 characters."""
    fallback: bool
    """True when no phrase survived and the whole positive query became one phrase."""
    truncated: int
    """Number of phrases dropped by the caps (positives + negatives)."""
    words: tuple[str, ...] = ()
    """The query's words, folded, deduped, capped, when it is made only of words of spaced
    alphabets (stage 6); else ()."""
    trigram_expr: str | None = None
    """What the trigram table is handed: ``match_expr``, or ``None`` when the word table
    searches the query instead."""
    word_expr: str | None = None
    """What the word table is handed: ``"a" OR "b"``, or ``None``."""
    written_expr: str | None = None
    """``match_expr`` of the query as written (stages 1-5 without stage 0's folding, as the seeds compile
    it: ``"の評価"`` where ``match_expr`` has ``"ノ評価"``), for a reader; nothing searches with it."""


@dataclass(frozen=True)
class Piece:
    """A stretch of one group: either unquoted text or a quoted region (unescaped)."""

    quoted: bool
    text: str


@dataclass(frozen=True)
class Group:
    """A whitespace-delimited group of the query (quoted regions never split it)."""

    negative: bool
    pieces: tuple[Piece, ...]
    start: int
    """Offset of the group in the query, including a leading ``-``."""
    end: int


def quote_phrase(s: str) -> str:
    """Quote ``s`` as an FTS5 string: wrap in ``"`` and double any ``"`` inside."""
    return '"' + s.replace('"', '""') + '"'


# --------------------------------------------------------------------------
# Stage 0: sanitise
# --------------------------------------------------------------------------


def _sanitize(query: str) -> str:
    """Replace NUL and lone surrogates (unrepresentable in SQLite) with spaces."""
    if "\x00" not in query and not any("\ud800" <= ch <= "\udfff" for ch in query):
        return query
    return "".join(" " if ch == "\x00" or "\ud800" <= ch <= "\udfff" else ch for ch in query)


# --------------------------------------------------------------------------
# Stage 1: quoted regions and exclusion groups
# --------------------------------------------------------------------------


def split_groups(query: str) -> list[Group]:
    """Cut ``query`` at whitespace into groups of unquoted and quoted pieces.

    A ``"`` anywhere opens a quoted region, closed by the next lone ``"``;
    ``""`` inside a region is a literal ``"``. A region left open runs to the
    end of the query. Whitespace inside a quoted region does not end the
    group. A group whose first character is ``-`` followed by a
    non-whitespace character is an exclusion (the ``-`` is not part of it).
    """
    groups: list[Group] = []
    n = len(query)
    i = 0
    while i < n:
        if query[i].isspace():
            i += 1
            continue
        start = i
        negative = query[i] == "-" and i + 1 < n and not query[i + 1].isspace()
        if negative:
            i += 1
        pieces: list[Piece] = []
        bare_start = i
        while i < n and not query[i].isspace():
            if query[i] != '"':
                i += 1
                continue
            if bare_start < i:
                pieces.append(Piece(False, query[bare_start:i]))
            i += 1
            buf: list[str] = []
            while i < n:
                ch = query[i]
                if ch == '"':
                    if i + 1 < n and query[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(ch)
                i += 1
            pieces.append(Piece(True, "".join(buf)))
            bare_start = i
        if bare_start < i:
            pieces.append(Piece(False, query[bare_start:i]))
        groups.append(Group(negative, tuple(pieces), start, i))
    return groups


# --------------------------------------------------------------------------
# Stage 2: separators
# --------------------------------------------------------------------------


def is_word_char(ch: str) -> bool:
    """Letters, numbers and marks are word characters; ``ー`` and ``々`` too."""
    return ch in _KATAKANA_EXTRA or ch in _KANJI_EXTRA or unicodedata.category(ch)[0] in "LNM"


def split_separators(text: str) -> list[str]:
    """Cut unquoted text into maximal runs of word characters."""
    words: list[str] = []
    current: list[str] = []
    for ch in text:
        if is_word_char(ch):
            current.append(ch)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


# --------------------------------------------------------------------------
# Stage 3: script boundaries
# --------------------------------------------------------------------------


def script_of(ch: str) -> str:
    """Classify a word character as kanji, hiragana, katakana or other."""
    cp = ord(ch)
    if (
        ch in _KANJI_EXTRA
        or 0x3400 <= cp <= 0x4DBF
        or 0x4E00 <= cp <= 0x9FFF
        or 0xF900 <= cp <= 0xFAFF
        or 0x20000 <= cp <= 0x3FFFF
    ):
        return KANJI
    if (
        ch in _KATAKANA_EXTRA
        or 0x30A0 <= cp <= 0x30FF
        or 0x31F0 <= cp <= 0x31FF
        or 0xFF66 <= cp <= 0xFF9F
        or 0x1AFF0 <= cp <= 0x1AFFF
        or cp == 0x1B000
        or 0x1B164 <= cp <= 0x1B167
    ):
        return KATAKANA
    if 0x3040 <= cp <= 0x309F or 0x1B001 <= cp <= 0x1B11F or 0x1B150 <= cp <= 0x1B152:
        return HIRAGANA
    return OTHER


def split_scripts(word: str) -> list[str]:
    """Cut a word into runs of one script; a combining mark keeps its base's script."""
    runs: list[str] = []
    current: list[str] = []
    current_script: str | None = None
    for ch in word:
        if unicodedata.category(ch)[0] == "M":
            script = current_script if current_script is not None else OTHER
        else:
            script = script_of(ch)
        if current and script != current_script:
            runs.append("".join(current))
            current = []
        current.append(ch)
        current_script = script
    if current:
        runs.append("".join(current))
    return runs


# --------------------------------------------------------------------------
# Stage 4: the trigram floor
# --------------------------------------------------------------------------


def apply_trigram_floor(runs: Sequence[str]) -> list[str]:
    """Turn the script runs of one word into phrases of at least 3 characters.

    A run of 3+ characters stands on its own. A shorter run absorbs the runs
    to its right until the span reaches 3; if the run that completed it stood
    on its own, that run is emitted too (``再`` + ``ランキング`` gives
    ``再ランキング`` and ``ランキング``). A short tail that reaches the end of the
    word below 3 joins the span before it, which is then emitted too
    (``システム`` + ``化`` gives ``システム化`` and ``システム``). A word with no
    span of 3 characters yields nothing.
    """
    # Each entry is [span, *pre-extension spans], in emission order.
    spans: list[list[str]] = []
    i = 0
    n = len(runs)
    while i < n:
        run = runs[i]
        i += 1
        if len(run) >= TRIGRAM_FLOOR:
            spans.append([run])
            continue
        joined = run
        stood: str | None = None
        while len(joined) < TRIGRAM_FLOOR and i < n:
            neighbour = runs[i]
            i += 1
            if len(neighbour) >= TRIGRAM_FLOOR:
                stood = neighbour
            joined += neighbour
        if len(joined) >= TRIGRAM_FLOOR:
            spans.append([joined] if stood is None else [joined, stood])
        elif spans:
            previous = spans[-1]
            spans[-1] = [previous[0] + joined, *previous]
        # else: the whole word is under the floor and is dropped.
    return [phrase for entry in spans for phrase in entry]


def group_phrases(group: Group, fold: bool = True) -> list[str]:
    """All phrases of one group, in order, in the folded spelling (stage 0; stages 2-4 for
    unquoted pieces). A quoted region is folded whole, and the floor counts its folded length.
    With `fold` False, the phrases of the text as written (the seeds' stages 2-4 alone)."""
    phrases: list[str] = []
    for piece in group.pieces:
        if piece.quoted:
            text = normalize.fold(piece.text) if fold else piece.text
            if len(text) >= TRIGRAM_FLOOR:
                phrases.append(text)
            continue
        for word in split_separators(normalize.fold_words(piece.text) if fold else piece.text):
            for phrase in apply_trigram_floor(split_scripts(word)):
                if not fold:
                    phrases.append(phrase)
                    continue
                phrases.append(normalize.fold_kana(phrase))
                shorter = normalize.long_vowel_variant(phrase)
                if shorter is not None and len(shorter) >= TRIGRAM_FLOOR:
                    phrases.append(normalize.fold_kana(shorter))
    return phrases


# --------------------------------------------------------------------------
# Stage 5: dedupe, cap, quote, join
# --------------------------------------------------------------------------


def finalize_phrases(phrases: Iterable[str], max_phrases: int) -> tuple[tuple[str, ...], int]:
    """Dedupe keeping first occurrence order, then cap; return (kept, dropped)."""
    unique = tuple(dict.fromkeys(phrases))
    return unique[:max_phrases], max(0, len(unique) - max_phrases)


def _or_expr(phrases: Sequence[str]) -> str | None:
    return " OR ".join(quote_phrase(p) for p in phrases) if phrases else None


def build_match_expr(positives: Sequence[str], negatives: Sequence[str]) -> tuple[str | None, str | None]:
    """Return ``(match_expr, negative_expr)`` for already-finalized phrases."""
    positive_expr = _or_expr(positives)
    negative_expr = _or_expr(negatives)
    if positive_expr is None:
        return None, negative_expr
    if negative_expr is None:
        return positive_expr, None
    return f"({positive_expr}) NOT ({negative_expr})", negative_expr


# --------------------------------------------------------------------------
# Stage 6: route to the word table or the trigram table
# --------------------------------------------------------------------------


def _unquoted_runs(groups: Sequence[Group]) -> Iterator[str | None]:
    """The script runs of the positive groups' unquoted pieces, in order; None for each quoted piece."""
    for group in groups:
        if group.negative:
            continue
        for piece in group.pieces:
            if piece.quoted:
                yield None
                continue
            for word in split_separators(piece.text):
                yield from split_scripts(word)


def spaced_only(groups: Sequence[Group]) -> bool:
    """Whether the positive query is made only of unquoted words of alphabets written with
    spaces: no Japanese, no script written without spaces, no quoted region."""
    return all(run is not None and script_of(run[0]) == OTHER and is_spaced(run) for run in _unquoted_runs(groups))


def query_words(groups: Sequence[Group], max_words: int = MAX_PHRASES) -> tuple[str, ...]:
    """The folded words (two characters or more) of the positive groups, in query order,
    deduped, capped: what the word table searches."""
    runs = [r for r in _unquoted_runs(groups) if r is not None and script_of(r[0]) == OTHER and is_spaced_word(r)]
    return tuple(dict.fromkeys(fold_word(r) for r in runs))[:max_words]


def route(groups: Sequence[Group], vector_only: bool, max_words: int = MAX_PHRASES) -> tuple[str, ...]:
    """The words the word table searches instead of the trigram table: those of a query made
    only of words of spaced alphabets; () for any other query, which searches the trigram
    table exactly as the seeds compile it."""
    if vector_only or not spaced_only(groups):
        return ()
    return query_words(groups, max_words)


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def _positive_text(query: str, groups: Sequence[Group]) -> str:
    """The query with exclusion groups (and the whitespace before them) cut out."""
    parts: list[str] = []
    previous_end = 0
    for group in groups:
        if not group.negative:
            if parts:
                parts.append(query[previous_end : group.start])
            parts.append(query[group.start : group.end])
        previous_end = group.end
    return "".join(parts)


def compile_query(query: str, max_phrases: int = MAX_PHRASES) -> CompiledQuery:
    """Compile a user query into FTS5 phrases; see the module docstring for the rules.

    Raises :class:`QueryError` for an empty query or one made only of exclusions.
    """
    if max_phrases < 1:
        raise ValueError(f"max_phrases must be at least 1, got {max_phrases}")
    text = _sanitize(query).strip()
    if not text:
        raise QueryError("The search query is empty: type at least one word to search for.")
    groups = split_groups(text)
    if all(group.negative for group in groups):
        raise QueryError(
            "The search query only excludes terms (every word starts with '-'): "
            "add at least one term to search for. To search for a leading hyphen, "
            'quote it, as in "-foo".'
        )

    positive_text = _positive_text(text, groups)
    vector_only = len(positive_text) < TRIGRAM_FLOOR
    positive_phrases = [p for g in groups if not g.negative for p in group_phrases(g)]
    negative_phrases = [p for g in groups if g.negative for p in group_phrases(g)]

    fallback = False
    if vector_only:
        positive_phrases = []
    elif not positive_phrases:
        positive_phrases = [normalize.fold(positive_text)]
        fallback = True

    positives, dropped_positive = finalize_phrases(positive_phrases, max_phrases)
    negatives, dropped_negative = finalize_phrases(negative_phrases, max_phrases)
    if dropped_positive:
        log.warning("fts_phrases_truncated", kept=len(positives), dropped=dropped_positive)
    if dropped_negative:
        log.warning("fts_negative_phrases_truncated", kept=len(negatives), dropped=dropped_negative)

    match_expr, negative_expr = build_match_expr(positives, negatives)
    words = route(groups, vector_only, max_phrases)
    written_expr = match_expr and _written_expr(groups, positive_text, fallback, max_phrases)
    trigram_expr = None if words else match_expr
    return CompiledQuery(
        text=text,
        vector_text=" ".join(positive_text.split()),
        positives=positives,
        negatives=negatives,
        match_expr=match_expr,
        negative_expr=negative_expr,
        vector_only=vector_only,
        fallback=fallback,
        truncated=dropped_positive + dropped_negative,
        words=words,
        trigram_expr=trigram_expr,
        word_expr=" OR ".join(quote_phrase(w) for w in words) or None,
        written_expr=written_expr,
    )


def _written_expr(groups: Sequence[Group], positive_text: str, fallback: bool, max_phrases: int) -> str | None:
    """Stage 5's expression of the query as written: the phrases without stage 0's folding."""
    positives = [p for g in groups if not g.negative for p in group_phrases(g, fold=False)]
    if fallback or not positives:
        positives = [positive_text]
    negatives = [p for g in groups if g.negative for p in group_phrases(g, fold=False)]
    expr, _ = build_match_expr(finalize_phrases(positives, max_phrases)[0], finalize_phrases(negatives, max_phrases)[0])
    return expr
