"""The Porter stemmer as SQLite's FTS5 `porter` tokenizer applies it.

M. F. Porter's reference version (with its two departures from the 1980 paper: `bli` -> `ble` and
`logi` -> `log` in step 2), with FTS5's own reading of it: a rule applies only to a word longer than
its suffix, and the word is stemmed as bytes (groove/corpus/tokens.py passes UTF-8 bytes as latin-1
characters, so any byte that is not an ASCII vowel or `y` is a consonant, as in FTS5's C code).

Written here rather than taken from a library: Snowball's `porter` (snowballstemmer, PyStemmer) is the
paper's algorithm without the departures, and differs from FTS5 on words as common as "technology"
and "assembly" (measured on SciFact: 980 of 16,327 documents tokenised differently); this module gives
FTS5's stems on every token of SciFact and JaQuAD (tests/test_tokens.py).
"""

from __future__ import annotations


def _cons(w: str, i: int) -> bool:
    ch = w[i]
    if ch in "aeiou":
        return False
    if ch == "y":
        return i == 0 or not _cons(w, i - 1)
    return True


def _m(stem: str) -> int:
    """The number of VC sequences in `stem`."""
    n, i, length = 0, 0, len(stem)
    while i < length and _cons(stem, i):
        i += 1
    while i < length:
        while i < length and not _cons(stem, i):
            i += 1
        if i >= length:
            break
        while i < length and _cons(stem, i):
            i += 1
        n += 1
    return n


def _vowel_in(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _double_c(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    if len(w) < 3:
        return False
    return _cons(w, len(w) - 3) and not _cons(w, len(w) - 2) and _cons(w, len(w) - 1) and w[-1] not in "wxy"


def _ends(w: str, suffix: str) -> bool:
    return len(w) > len(suffix) and w.endswith(suffix)


_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)
_STEP3 = (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""))
_STEP4 = (
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
)


def stem(w: str) -> str:
    if len(w) <= 2:
        return w
    # step 1a
    if _ends(w, "sses"):
        w = w[:-2]
    elif _ends(w, "ies"):
        w = w[:-2]
    elif _ends(w, "ss"):
        pass
    elif _ends(w, "s"):
        w = w[:-1]
    # step 1b
    if _ends(w, "eed"):
        if _m(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suf in ("ed", "ing"):
            if _ends(w, suf) and _vowel_in(w[: -len(suf)]):
                w = w[: -len(suf)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif _double_c(w) and w[-1] not in "lsz":
                    w = w[:-1]
                elif _m(w) == 1 and _cvc(w):
                    w += "e"
                break
    # step 1c
    if _ends(w, "y") and _vowel_in(w[:-1]):
        w = w[:-1] + "i"
    # step 2
    for suf, repl in _STEP2:
        if _ends(w, suf):
            if _m(w[: -len(suf)]) > 0:
                w = w[: -len(suf)] + repl
            break
    # step 3
    for suf, repl in _STEP3:
        if _ends(w, suf):
            if _m(w[: -len(suf)]) > 0:
                w = w[: -len(suf)] + repl
            break
    # step 4
    for suf in _STEP4:
        if _ends(w, suf):
            stem_ = w[: -len(suf)]
            if _m(stem_) > 1 and (suf != "ion" or stem_.endswith(("s", "t"))):
                w = stem_
            break
    # step 5
    if _ends(w, "e"):
        s = w[:-1]
        if _m(s) > 1 or (_m(s) == 1 and not _cvc(s)):
            w = s
    if _m(w) > 1 and _double_c(w) and w.endswith("l"):
        w = w[:-1]
    return w
