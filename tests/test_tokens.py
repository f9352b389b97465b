"""groove's tokens (groove/corpus/tokens.py) are FTS5's, token for token, so a store without FTS5 (PostgreSQL)
indexes and ranks what the SQLite store does (decision 0022).

The oracle is SQLite's own FTS5: a table with each index's tokenizer, read back through fts5vocab's
`instance` rows (every token of every row, with its position). The texts: the example notes, the test
fixtures in both languages, and generated text that mixes what unicode61 and the Porter stemmer treat
specially (accents, combining marks, Greek final sigma, full-width forms, CJK, digits, punctuation, emoji).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groove.corpus import tokens
from groove.corpus.cjk import cjk_terms
from groove.corpus.normalize import fold
from groove.corpus.words import WORD_TOKENIZER, word_text
from groove.store.sqlite.connection import pick_driver
from tests.support.common import EXAMPLES, ROOT

INDEXES = {  # the index: (its FTS5 tokenizer, the text the SQLite store hands it, groove's tokens of the text)
    "words": (WORD_TOKENIZER, word_text, tokens.word_tokens),
    "bigrams": ("unicode61", lambda t: cjk_terms(t), tokens.bigram_tokens),
    "phrases": ("trigram", fold, lambda t: trigrams(tokens.phrase_text(t))),
}


def trigrams(text: str) -> list[str]:
    return [text[i:i + 3] for i in range(tokens.trigram_count(text))]


def fts5_tokens(index: str, texts: list[str]) -> list[list[str]]:
    """Each text's tokens as FTS5 indexes them, in order."""
    tokenizer, prepare, _ = INDEXES[index]
    sqlite: sqlite3.Connection = pick_driver().connect(":memory:")
    try:
        sqlite.execute(f"CREATE VIRTUAL TABLE t USING fts5(c, tokenize='{tokenizer}')")
        sqlite.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        sqlite.executemany("INSERT INTO t(rowid, c) VALUES (?, ?)", [(i, prepare(x)) for i, x in enumerate(texts)])
        found: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for term, doc, _col, offset in sqlite.execute("SELECT term, doc, col, offset FROM v"):
            found[doc].append((offset, term))
        return [[term for _, term in sorted(found[i])] for i in range(len(texts))]
    finally:
        sqlite.close()


def corpus() -> list[str]:
    files = sorted(EXAMPLES.rglob("*.md")) + sorted((ROOT / "tests" / "fixtures").rglob("*.md"))
    texts = [p.read_text(encoding="utf-8") for p in files]
    assert len(texts) > 30  # the example notes and both fixtures
    return texts


@pytest.mark.parametrize("index", sorted(INDEXES))
def test_every_note_of_the_examples_and_fixtures_has_fts5s_tokens(index):
    texts = corpus()
    ours = [INDEXES[index][2](t) for t in texts]
    theirs = fts5_tokens(index, texts)
    differing = [(i, a[:20], b[:20]) for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert not differing
    assert sum(map(len, ours)) > 1000  # the check compared tokens, not empty lists


TRICKY = st.sampled_from(
    list("aeiouyAEIOUY")
    + list("éèêëÉÀÂÇçñÑöÖüÜßøØåÅæÆœŒłŁ")          # precomposed Latin: their base with diacritics removed
    + ["e\u0301", "a\u0308", "o\u0323", "\u0338"]  # combining marks: some FTS5 drops, some it keeps
    + list("ΣσςΑλφαΒήτα")                           # Greek, final sigma folds to sigma
    + list("ＡＢＣａｂｃ１２３")                      # full-width
    + list("日本語の全文検索東京都庁カタカナひらがな漢字")
    + list("0123456789")
    + list(" \n\t-_.,;:!?'\"()[]{}/\\@#*+=&%$")
    + ["🎌", "\u200b", "\u00a0", "\u3000"]
)
WORDS = st.sampled_from(
    ["running", "runs", "generalization", "relational", "conditional", "hopping", "caresses", "ponies",
     "sky", "agreed", "feed", "plastered", "motoring", "sing", "conflated", "troubled", "sized", "hoping",
     "Crème", "brûlée", "naïve", "Ångström", "straße", "ΣΊΣΥΦΟΣ", "TEST", "iPhone", "x86_64", "3.14"]
)
TEXT = st.lists(st.one_of(TRICKY, WORDS, st.just(" ")), min_size=0, max_size=60).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, min_size=1, max_size=8))
def test_generated_text_has_fts5s_tokens_in_every_index(texts):
    for index, (_, _, ours) in INDEXES.items():
        assert [ours(t) for t in texts] == fts5_tokens(index, texts), index
