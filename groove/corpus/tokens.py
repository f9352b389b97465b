"""The tokens the three full-text indexes hold, computed in Python, the same for every store.

The SQLite store hands its text to FTS5's tokenizers (`trigram`; `unicode61` over the bigram text;
`porter unicode61 remove_diacritics 2` over the word text: groove/store/sqlite/schema.py); a store
without them (PostgreSQL) indexes what this module gives, and the two agree token for token:

- phrases: the folded text (groove/corpus/normalize.py) case-folded one character for one, as
  FTS5's trigram tokenizer folds it; a phrase matches where the text holds it, and a column of n
  characters holds n - 2 trigrams (a phrase of under 3 characters matches nothing);
- bigrams: unicode61's tokens of `cjk_terms` (groove/corpus/cjk.py);
- words: unicode61's tokens of `word_text` (groove/corpus/words.py), diacritics of Latin letters
  removed, each stemmed by FTS5's Porter stemmer (groove/corpus/porter.py).

unicode61's rules, as SQLite implements them: a token is a run of letters (L*), numbers (N*),
private-use characters (Co) and the combining diacritics FTS5 knows (U+0300-U+0331, a fixed set);
every other character separates tokens. Case folds one code point for one (final sigma to sigma);
with diacritics removed, those combining marks vanish and a precomposed Latin letter becomes its
base. Checked against FTS5 on every document of the SciFact and JaQuAD corpora (1.26 million word
tokens, 0 rows differing: tests/test_tokens.py checks the same on the fixtures).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from groove.corpus import porter
from groove.corpus.cjk import cjk_terms
from groove.corpus.normalize import fold
from groove.corpus.words import word_text

# FTS5's combining diacritics (sqlite3Fts5UnicodeIsdiacritic): U+0300-U+0331 less a few, as two bit masks.
_DIACRITICS = frozenset(
    [cp for cp in range(768, 800) if 0x08029FDF >> (cp - 768) & 1]
    + [cp for cp in range(800, 818) if 0x000361F8 >> (cp - 800) & 1]
)
PREFIX_MARK = "*"  # a prefix term's key in a store's postings: the character and `*` (never a token)


def _is_token_char(ch: str) -> bool:
    cat = unicodedata.category(ch)
    return cat[0] in "LN" or cat == "Co" or ord(ch) in _DIACRITICS


@functools.cache
def _token_run() -> re.Pattern[str]:
    """A regular expression of one run of token characters (built once, on first use: about 0.3 s)."""
    ranges: list[str] = []
    start = None
    for cp in range(0x110000):
        ok = _is_token_char(chr(cp))
        if ok and start is None:
            start = cp
        elif not ok and start is not None:
            ranges.append(_range(start, cp - 1))
            start = None
    if start is not None:
        ranges.append(_range(start, 0x10FFFF))
    return re.compile("[" + "".join(ranges) + "]+")


def _range(a: int, b: int) -> str:
    return re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"


@functools.lru_cache(maxsize=200_000)
def _fold61(token: str, remove_diacritics: bool) -> str:
    out = []
    for ch in token:
        low = ch.lower()
        ch = low if len(low) == 1 else low[0] if all(unicodedata.combining(c) for c in low[1:]) else ch
        if ch == "\u03c2":  # final sigma
            ch = "\u03c3"
        if remove_diacritics:
            if ord(ch) in _DIACRITICS:
                continue
            if "\u00c0" <= ch <= "\u024f" or "\u1e00" <= ch <= "\u1eff":
                base = unicodedata.normalize("NFD", ch)[0]
                ch = base if base.isascii() else ch
        out.append(ch)
    return "".join(out)


def unicode61(text: str, *, remove_diacritics: bool) -> list[str]:
    """FTS5's unicode61 tokens of `text`, in order."""
    tokens = (_fold61(t, remove_diacritics) for t in _token_run().findall(text))
    return [t for t in tokens if t]


@functools.lru_cache(maxsize=200_000)
def stem(token: str) -> str:
    """FTS5's `porter` on one token: over its UTF-8 bytes, tokens of 3 to 64 bytes only."""
    raw = token.encode("utf-8")
    if not 3 <= len(raw) <= 64:
        return token
    return porter.stem(raw.decode("latin-1")).encode("latin-1").decode("utf-8")


def word_tokens(text: str | None) -> list[str]:
    """The word index's tokens of one column."""
    return [stem(t) for t in unicode61(word_text(text), remove_diacritics=True)]


def query_words(word: str) -> list[str]:
    """The word index's tokens of one query word (usually one stem)."""
    return word_tokens(word)


def bigram_tokens(text: str | None) -> list[str]:
    """The bigram index's tokens of one column."""
    return unicode61(cjk_terms(text or ""), remove_diacritics=False)


def phrase_text(text: str | None) -> str:
    """The phrases index's text of one column: folded, and case-folded as FTS5's trigram tokenizer folds it."""
    return "".join(_fold61(ch, False) or ch for ch in fold(text or ""))


def phrase_query(phrase: str) -> str:
    """A query phrase as the phrases index holds text (it is folded already: groove/search/compiler.py)."""
    return "".join(_fold61(ch, False) or ch for ch in phrase)


def trigram_count(text: str) -> int:
    """How many trigrams FTS5 counts in a column of this text."""
    return max(0, len(text) - 2)


Columns = tuple[str | None, str | None, str | None]  # heading, context, content


@dataclass(frozen=True)
class ChunkTokens:
    """What a store indexes of one chunk: the phrase text of each column and its trigram count, and per
    term index each term's count in each column (a one-character prefix of the bigrams too, under
    `<char>*`) and the column lengths in tokens."""

    phrases: tuple[str, str, str]
    phrase_length: int
    bigrams: dict[str, tuple[int, int, int]]
    bigram_length: int
    words: dict[str, tuple[int, int, int]]
    word_length: int


def _counts(columns: Sequence[list[str]], *, prefixes: bool = False) -> dict[str, tuple[int, int, int]]:
    per = [Counter(c) for c in columns]
    if prefixes:
        for counter in per:
            extra: Counter[str] = Counter()
            for term, n in counter.items():
                extra[term[0] + PREFIX_MARK] += n
            counter.update(extra)
    terms: set[str] = set().union(*per)
    return {t: (per[0][t], per[1][t], per[2][t]) for t in terms}


def chunk_tokens(heading: str | None, context: str | None, content: str | None) -> ChunkTokens:
    cols = (heading, context, content)
    phrases = tuple(phrase_text(c) for c in cols)
    bigrams = [bigram_tokens(c) for c in cols]
    words = [word_tokens(c) for c in cols]
    return ChunkTokens(
        phrases=(phrases[0], phrases[1], phrases[2]),
        phrase_length=sum(trigram_count(p) for p in phrases),
        bigrams=_counts(bigrams, prefixes=True),
        bigram_length=sum(len(b) for b in bigrams),
        words=_counts(words),
        word_length=sum(len(w) for w in words),
    )


def prefix_key(term: str) -> str:
    return term + PREFIX_MARK


def keys(terms: Iterable[str], prefix: Iterable[str] = ()) -> list[str]:
    """The postings keys of query terms: a prefix term's key is the term and `*`."""
    prefixed = set(prefix)
    return [prefix_key(t) if t in prefixed else t for t in terms]
