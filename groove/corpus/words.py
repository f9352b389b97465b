"""Words for the third full-text table: the word index of the alphabets written with spaces.

The trigram table matches any substring of three characters, which is what
Japanese needs and what the seed compiler's phrases are written for. For a word
of an alphabet written with spaces (English, and any Latin, Greek or Cyrillic
text inside Japanese notes) a trigram phrase is an intersection of every one of
its trigrams' postings, and the common ones ("pro", "ent", "ion") are in a
large share of the table: at 100,000 chunks that leg was most of a search. The
word table holds each such word once, stemmed (FTS5's `porter` over
`unicode61`), so a query word walks one doclist, and "properties" also finds
"property" (docs/decisions/0014 records the measurements).

`word_text` is what the table's triggers index (through the SQL function
`groove_word_text`): the text with its CJK runs cut out, since those belong to
the trigram and bigram tables. The query side is the compiler's
(`groove/search/compiler.py`, `CompiledQuery.words`): a query made only of such
words searches this table instead of the trigram table; any other query
searches the trigram table as the seeds compile it.
"""

from __future__ import annotations

import re
import unicodedata

from groove.corpus.cjk import _CJK_RUN

# FTS5's tokenizer for the table: unicode61 splits at every character that is not a letter or
# a number, folds case and diacritics; porter stems the English words it gives.
WORD_TOKENIZER = "porter unicode61 remove_diacritics 2"
# Scripts written without spaces between words outside the CJK runs (Thai, Lao, Myanmar,
# Khmer): unicode61 would read a whole sentence of them as one word, so they stay trigram.
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]")
MIN_WORD = 2  # "AI", "ML", "Go": two letters are a word here (the trigram floor is 3)


def word_text(text: str | None) -> str:
    """The word table's text of one column: NFKC (full-width Latin becomes Latin), CJK runs cut out."""
    if not text:
        return ""
    return _CJK_RUN.sub(" ", unicodedata.normalize("NFKC", text))


def is_spaced(run: str) -> bool:
    """Whether a run of word characters (no CJK: the compiler's "other" script) is written in an
    alphabet that separates its words with spaces."""
    return not _UNSPACED.search(run)


def is_spaced_word(run: str) -> bool:
    """Whether such a run is a word the word table searches (two characters or more)."""
    return len(run) >= MIN_WORD and is_spaced(run)


def fold_word(run: str) -> str:
    """A query word as the word table's text holds it before FTS5 tokenizes it (NFKC, case folded)."""
    return unicodedata.normalize("NFKC", run).casefold()
