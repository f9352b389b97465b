"""Character bigrams for Japanese (and Chinese) text: the second full-text table.

The seed query compiler turns a query into trigram phrases, and FTS5's trigram
tokenizer never matches fewer than 3 characters. Japanese content words are
often one or two kanji (首都, 鶏, 京都), so inside a sentence they reach FTS
glued to a particle (`の首都`, `は誰の`) and match only beside that particle.
A second FTS5 table indexes every run of CJK characters as overlapping
character bigrams plus the run's last character, so a one- or two-character
word matches wherever it occurs (docs/decisions/0006 records the measurements).

The same functions segment the notes (through the SQL function
`groove_cjk_terms`, called by the table's triggers) and the queries, so the
two sides can never disagree. Both fold the text to one spelling first
(groove/corpus/normalize.py, decision 0018: 取り扱い and 取扱, 時々 and 時時,
りんご and リンゴ give the same terms; a query's サーバー brings the terms of
サーバ too). Text outside CJK runs is left to the
trigram table: this one holds CJK terms only.
"""

from __future__ import annotations

import re
import unicodedata

from groove.corpus import normalize

# Han (with 々 〆 ヶ), Hiragana, Katakana (with ー and the half-width forms), CJK compatibility.
_CJK_RUN = re.compile(
    "[\u3005\u3006\u30f6\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]+"
)
MAX_QUERY_TERMS = 64


def _runs(text: str) -> list[str]:
    """The CJK runs of the text folded to one spelling (NFKC included)."""
    return _CJK_RUN.findall(normalize.fold(text))


def _run_terms(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def cjk_terms(text: str) -> str:
    """The bigram document text: space-separated terms (FTS5's unicode61 tokenizer splits on spaces)."""
    if not text:
        return ""
    return " ".join(t for run in _runs(text) for t in _run_terms(run))


def query_terms(text: str, max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """The query's bigram terms, in order, deduplicated; a one-character run stays one character.
    A word ending in a long vowel mark brings the terms of its spelling without it too (サーバー: サー
    ーバ バー, and サーバの バノ where the note may say サーバの)."""
    words = normalize.fold_words(text)
    shorter = normalize.long_vowel_variant(words)
    runs = _CJK_RUN.findall(normalize.fold_kana(words))
    if shorter is not None:
        runs += _CJK_RUN.findall(normalize.fold_kana(shorter))
    terms: list[str] = []
    for run in runs:
        terms += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    return list(dict.fromkeys(terms))[:max_terms]


def cjk_query(text: str, max_terms: int = MAX_QUERY_TERMS) -> str | None:
    """An FTS5 MATCH expression over the bigram table, or None when the query has no CJK run.

    Every bigram of every CJK run, OR-ed (bm25 weighs them by rarity); a run of
    one character becomes a prefix term (`鶏*`), which matches that character
    at the start of any bigram or as a run's last character: everywhere it occurs.
    """
    terms = [f'"{t}"*' if len(t) == 1 else f'"{t}"' for t in query_terms(text, max_terms)]
    return " OR ".join(terms) if terms else None


def cjk_share(texts: list[str]) -> float:
    """The share of the letters in `texts` that are CJK (0 when there are no letters)."""
    cjk = letters = 0
    for text in texts:
        folded = unicodedata.normalize("NFKC", text)
        cjk += sum(len(run) for run in _CJK_RUN.findall(folded))
        letters += sum(1 for ch in folded if ch.isalpha())
    return cjk / letters if letters else 0.0


def has_cjk(text: str) -> bool:
    return bool(_CJK_RUN.search(text))


def cjk_count(text: str) -> int:
    """How many of `text`'s characters are Han, kana or their compatibility forms."""
    return sum(len(run) for run in _CJK_RUN.findall(text))
