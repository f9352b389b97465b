"""One spelling for the full-text tables: Japanese written several ways folds to one text (pure).

People write the same Japanese word in several ways, and a full-text table
matches characters, so each spelling used to find only the notes written the
same way. The full-text tables (trigram and CJK bigram) index the notes' text
folded by `fold`, and the query compiler and the bigram query fold the query
the same way, so each spelling finds the others (docs/decisions/0018):

- **NFKC**: half-width katakana (ﾃﾞｰﾀ) become full-width, full-width ASCII
  (ＳＱＬ, １２３) becomes ASCII.
- **Iteration marks**: 々 repeats the kanji before it (時々 -> 時時, 人々 -> 人人;
  XY々々 -> XYXY), ゝ ゞ ヽ ヾ the kana before it. The mark is written out rather
  than the repeat collapsed, so a real repeat (会社社長) is never changed.
- **Long vowel marks**: a run of ーー is one ー. The tables keep the notes'
  marks; a query's word that ends in a ー after three kana (サーバー,
  コンピューター, ユーザー名) also searches its spelling without it
  (`long_vowel_variant`: サーバ, コンピュータ, ユーザ名). The short spelling is a
  prefix of the long one, so サーバ finds サーバー as it is, and サーバー finds
  サーバ through its variant. Short words (キー, コピー) and a ー inside a word
  (データ, インターフェース) are left alone. Dropping the final ー from the notes'
  text too, or every ー, was measured and lost full-text quality on JaQuAD:
  a name ending in ー then matches a word without it (マントー, マント).
- **Okurigana**: the okurigana of a compound written with them or without them
  (取り扱い / 取扱い / 取扱, 申し込み / 申込, 打ち合わせ / 打合せ, 受け付け / 受付)
  are dropped, where a compound is what they look like: one hiragana of the
  set below between a kanji that starts a run of kanji and a kanji that ends
  it (取り扱い -> 取扱い; not the し of 使用し始め, nor the して of 対して行う), and
  one or two of the set, but not し, after two kanji or more when a particle or
  no hiragana follows (取扱い -> 取扱, 打合わせは -> 打合は; not 紹介した, nor
  紹介して). A particle (の は が を に で と も へ や か) is never in the set. Wider
  rules (any okurigana between kanji, or after two kanji) stem verbs across
  word boundaries and cost full-text quality on JaQuAD (decision 0018).
- **Kana**: hiragana become katakana (りんご -> リンゴ), and ヶ ヵ become カ
  (3ヶ月 / 3か月 / 3カ月). Kanji spellings (林檎) are not reached: that needs a
  dictionary (decision 0018 measured one).

`fold` is `fold_kana(fold_words(text))`. The two halves are separate for the
query compiler: it cuts a query into phrases at script boundaries
(groove/search/compiler.py), which it must see before hiragana and katakana
are one script, so it cuts `fold_words(text)` and folds each phrase with
`fold_kana`, a character-for-character map that gives a substring of `fold`
of the same text.

`fold_aligned` also says where each folded character came from, so match
spans found in the folded text are offsets into the text as written: the text
shown is never the folded one, and the embedded text is never folded
(vectors are keyed by the hash of the text embedded).

Bump FOLD_VERSION when the folding changes: the tables hold folded text, so a
change needs a migration that refills them (groove/store/sqlite/schema.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

FOLD_VERSION = 1

_KANJI = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_HIRAGANA = "\u3041-\u3096"
_KATAKANA = "\u30a1-\u30fa"

# --- NFKC --------------------------------------------------------------------------------------

# A character and the marks NFKC may compose onto it (combining marks; the half-width voicing marks).
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f\u3099-\u309c\uff9e\uff9f"
# Characters NFKC never changes on their own (ASCII, kana, kanji, the common punctuation): only the
# others are normalised one by one when the positions are kept (`fold_aligned`).
_NFKC_STABLE = "\x00-\x7f\u3001-\u3003\u3005-\u3007\u3041-\u3096\u309d\u309e\u30a1-\u30ff\u4e00-\u9fff"
_NFKC_SEGMENT = re.compile(f"(?s)(?:.(?=[{_MARKS}])|[^{_NFKC_STABLE}])[{_MARKS}]*")


def _nfkc(text: str) -> str:
    return text if text.isascii() or unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)


# --- iteration marks ---------------------------------------------------------------------------

_ITER_KANJI_2 = re.compile(f"([{_KANJI}][{_KANJI}])々々")
_ITER_KANJI = re.compile(f"([{_KANJI}])[々〻]")
_ITER_KANA = re.compile(f"([{_HIRAGANA}{_KATAKANA}])([ゝゞヽヾ])")


def _voiced(ch: str) -> str:
    """The kana with a dakuten (か -> が), or the kana itself when it has none."""
    composed = unicodedata.normalize("NFC", ch + "\u3099")
    return composed if len(composed) == 1 else ch


def _kana_repeat(m: re.Match[str]) -> str:
    base, mark = m.group(1), m.group(2)
    return base + (_voiced(base) if mark in "ゞヾ" else base)


# --- long vowel marks --------------------------------------------------------------------------

_LONG_RUN = re.compile("ー{2,}")
# A ー ending a word of kana with three kana (or ー) before it: not followed by a kana of the script of
# the one before it (サーバーの, ユーザー名; すーぱー). Only the query searches the spelling without it.
# (The ー first, then the look behind it, so that the search is for ー alone.)
_LONG_FINAL = re.compile(
    f"ー(?:(?<=[{_HIRAGANA}{_KATAKANA}ー]{{2}}[{_KATAKANA}]ー)(?![{_KATAKANA}ー])"
    f"|(?<=[{_HIRAGANA}{_KATAKANA}ー]{{2}}[{_HIRAGANA}]ー)(?![{_HIRAGANA}ー]))"
)

# --- okurigana ---------------------------------------------------------------------------------

# Hiragana that end the stem of a verb in a compound (取り, 申し, 書き, 込み, 打ち, 受け, 上げ, 替え,
# 合わせ, 決め, 比べ, 呼び, 継ぎ, 入れ, 閉じ); never a particle (の は が を に で と も へ や か).
OKURIGANA = "いえきぎけげしじちびみめりれわせべて"
PARTICLES = "はがをにでともへやの"
# One of them between a kanji that starts a run of kanji and a kanji that ends it: 取[り]扱い, 申[し]込み.
_OKURI_INNER = re.compile(f"(?<![{_KANJI}][{_KANJI}])(?<=[{_KANJI}])[{OKURIGANA}](?=[{_KANJI}](?![{_KANJI}]))")
# One or two of them (not し: 紹介し is a verb) after two kanji, before a particle or no hiragana:
# 取扱[い]は, 打合[わせ]の, 受付[け]。
_OKURI_FINAL = re.compile(
    f"(?<=[{_KANJI}][{_KANJI}])[{OKURIGANA.replace('し', '')}]{{1,2}}(?=[^{_HIRAGANA}]|[{PARTICLES}]|$)"
)

# --- kana --------------------------------------------------------------------------------------

_KANA_TABLE = {cp: cp + 0x60 for cp in range(0x3041, 0x3097)}
_KANA_TABLE.update(
    {
        ord("ゝ"): ord("ヽ"),
        ord("ゞ"): ord("ヾ"),
        ord("ヶ"): ord("カ"),
        ord("ヵ"): ord("カ"),
        0x3095: ord("カ"),
        0x3096: ord("カ"),
    }
)


def fold_kana(text: str) -> str:
    """Hiragana as katakana, ヶ ヵ as カ: one character for one, so it commutes with cutting a text."""
    return text.translate(_KANA_TABLE)


# --- the rules, in order -----------------------------------------------------------------------

Repl = str | Callable[[re.Match[str]], str]


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    repl: Repl
    needs: str = ""  # the rule applies only to a text holding one of these characters (a cheap test first)


# Folded text folds to itself (`fold(fold(t)) == fold(t)`: a folded phrase can be folded again).
RULES: tuple[Rule, ...] = (
    Rule(_ITER_KANJI_2, r"\1\1", "々"),
    Rule(_ITER_KANJI, r"\1\1", "々〻"),
    Rule(_ITER_KANA, _kana_repeat, "ゝゞヽヾ"),
    Rule(_OKURI_INNER, ""),
    Rule(_OKURI_FINAL, ""),
    Rule(_LONG_RUN, "ー", "ー"),
)


def long_vowel_variant(text: str) -> str | None:
    """`text` without the ー that ends a word of kana after three kana (サーバー -> サーバ, ユーザー名 ->
    ユーザ名), or None when it has none. The tables keep the notes' marks; a query searches this spelling
    too. Give it text before `fold_kana` (ー before の ends a word only while の is hiragana)."""
    if "ー" not in text:
        return None
    shorter = _LONG_FINAL.sub("", text)
    return shorter if shorter != text else None


def _applies(rule: Rule, text: str) -> bool:
    return not rule.needs or any(ch in text for ch in rule.needs)


def fold_words(text: str) -> str:
    """NFKC, iteration marks, long vowel marks and okurigana: the folding that depends on neighbours
    (what the query compiler cuts into phrases)."""
    if not text:
        return ""
    text = _nfkc(text)
    if text.isascii():
        return text
    for rule in RULES:
        if _applies(rule, text):
            text = rule.pattern.sub(rule.repl, text)
    return text


@lru_cache(maxsize=16)
def fold(text: str) -> str:
    """The text a full-text table indexes (and a query searches for): `fold_kana(fold_words(text))`.

    Cached for the last few texts: the trigram and the bigram table's triggers fold the same
    column one after the other."""
    if not text:
        return ""
    return fold_kana(fold_words(text))


# --- positions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aligned:
    """A folded text and, for each of its characters, the stretch of the original it came from."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]


def _sub_aligned(
    pattern: re.Pattern[str], repl: Repl, text: str, starts: list[int], ends: list[int]
) -> tuple[str, list[int], list[int]]:
    matches = list(pattern.finditer(text))
    if not matches:
        return text, starts, ends
    out: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    pos = 0
    for m in matches:
        a, b = m.span()
        out.append(text[pos:a])
        new_starts += starts[pos:a]
        new_ends += ends[pos:a]
        replacement = m.expand(repl) if isinstance(repl, str) else repl(m)
        if replacement and b > a:
            # Every character of a replacement comes from the whole match.
            out.append(replacement)
            new_starts += [starts[a]] * len(replacement)
            new_ends += [ends[b - 1]] * len(replacement)
        elif b > a and new_ends:
            # What is dropped belongs to the character before it (取り扱い: 取 is 取り, 扱 is 扱い).
            new_ends[-1] = ends[b - 1]
        pos = b
    out.append(text[pos:])
    new_starts += starts[pos:]
    new_ends += ends[pos:]
    return "".join(out), new_starts, new_ends


def fold_aligned(text: str) -> Aligned | None:
    """`fold(text)` with, per folded character, the original characters it came from (`starts[i]`,
    `ends[i]`: a folded occurrence [i, j) is the original [starts[i], ends[j - 1])). None in the rare
    text whose characters NFKC does not fold one by one as it folds the whole (Hangul jamo, say)."""
    starts = list(range(len(text)))
    ends = list(range(1, len(text) + 1))
    folded = text
    if not (text.isascii() or unicodedata.is_normalized("NFKC", text)):
        folded, starts, ends = _sub_aligned(
            _NFKC_SEGMENT, lambda m: unicodedata.normalize("NFKC", m.group()), folded, starts, ends
        )
    if not folded.isascii():
        for rule in RULES:
            if _applies(rule, folded):
                folded, starts, ends = _sub_aligned(rule.pattern, rule.repl, folded, starts, ends)
        folded = fold_kana(folded)
    if folded != fold(text):
        return None
    return Aligned(folded, tuple(starts), tuple(ends))
