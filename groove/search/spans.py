"""Match spans: where the query's phrases occur in a hit's returned content.

Spans are UTF-8 byte offsets ``(start, end)`` into the final content (after
the parent retriever), sorted, disjoint and not touching: overlapping or
adjacent occurrences are merged into one span.

How case-insensitive matching maps back to the original text
------------------------------------------------------------
``str.casefold`` can change length (``'ß' -> 'ss'``, ``'İ' -> 'i̇'``,
``'ﬁ' -> 'fi'``), so offsets found in ``content.casefold()`` are not offsets
into ``content``. Instead each character is folded on its own (Python's
casefold is context-free, so joining the per-character folds equals folding
the whole string) and a map from folded positions back to character
positions is kept. An *occurrence* of a phrase is a run of whole original
characters whose casefold equals the phrase's casefold. A match that would
start or end inside one character's fold does not count: ``'ss'``, ``'SS'``
and ``'ß'`` all match ``'ß'``, but ``'s'`` does not match half of it. So the
text of every occurrence, casefolded, is exactly a casefolded phrase.

``re.IGNORECASE`` was not used: it compares characters one to one with
simple case mapping, so it misses ``'STRASSE'`` for ``'straße'``.

Spellings: the phrases are searched for in the content folded to one
spelling, as the full-text tables index it (``groove/corpus/normalize.py``,
decision 0018: NFKC, iteration marks, okurigana, hiragana as katakana), so
a query written ``取扱`` or ``リンゴ`` marks the ``取り扱い`` or ``りんご`` the
note has. The fold keeps, for each folded
character, the original characters it came from, and a span covers the
original characters of its folded occurrence: the offsets are into the content
as written, which is what is shown. As with case folding, an occurrence starts
and ends where the fold of a whole stretch does (``f`` does not match half of
``ﬁ``, folded ``fi``; nor ``時`` half of ``時々``, folded ``時時``). A fold may join characters (``ｶﾞ`` -> ``ガ``)
or drop them (the ``り`` of ``取り扱い``): a span then covers the whole of what
was joined, and a dropped character inside an occurrence is covered too.
The phrases are folded as well (folding a folded phrase leaves it as it is).

Cost: each phrase is found with ``str.find`` over the folded text (C speed,
overlapping occurrences included), so a phrase costs one pass over the
content plus a step per occurrence; ASCII content (most hits) needs no byte
offset table, other content one numpy pass for it. This replaced a numpy
search that narrowed candidate positions one character at a time: it cost
about 10 array operations per phrase and hit, a quarter of the event loop's
time in a search under 8 clients (docs/decisions/0011). Content over
``max_content_bytes`` is skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from groove.corpus import normalize
from groove.search.hits import Hit

DEFAULT_MAX_SPANS = 100
DEFAULT_MAX_CONTENT_BYTES = 256 * 1024

# Lone surrogates cannot be UTF-8 encoded; 'surrogatepass' gives them the three
# bytes they would take if they could, so offsets stay consistent.
_ERRORS = "surrogatepass"


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", _ERRORS), dtype="<u4")


def _utf8_offsets(code_points: np.ndarray) -> np.ndarray:
    """Byte offset of each character boundary, length ``len(text) + 1``."""
    widths = 1 + (code_points >= 0x80).astype(np.int64) + (code_points >= 0x800) + (code_points >= 0x10000)
    offsets = np.zeros(len(code_points) + 1, dtype=np.int64)
    np.cumsum(widths, out=offsets[1:])
    return offsets


def _starts(haystack: str, needle: str) -> list[int]:
    """Every start position (overlapping ones included) of needle in haystack (`str.find`, in C)."""
    out: list[int] = []
    i = haystack.find(needle)
    while i != -1:
        out.append(i)
        i = haystack.find(needle, i + 1)
    return out


def match_spans(
    content: str,
    phrases: Sequence[str],
    max_spans: int = DEFAULT_MAX_SPANS,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
) -> list[tuple[int, int]]:
    """Byte spans of every case-insensitive occurrence of any phrase.

    Empty phrases are ignored. Returns ``[]`` for empty content, no usable
    phrase, or content longer than ``max_content_bytes`` UTF-8 bytes. At most
    ``max_spans`` spans are returned: the first ones in the content, counted
    after merging.
    """
    if isinstance(max_spans, bool) or not isinstance(max_spans, int) or max_spans < 0:
        raise ValueError(
            f"match_spans max_spans must be an integer of at least 0 (the default is 100), got {max_spans!r}"
        )
    if isinstance(max_content_bytes, bool) or not isinstance(max_content_bytes, int) or max_content_bytes < 0:
        raise ValueError(
            "match_spans max_content_bytes must be an integer of at least 0 (the default is 262144), got "
            f"{max_content_bytes!r}"
        )
    needles = list(dict.fromkeys(normalize.fold(p).casefold() for p in phrases if p))
    needles = [n for n in needles if n]
    if not content or not needles or max_spans == 0:
        return []
    ascii_only = content.isascii()
    if (len(content) if ascii_only else len(content.encode("utf-8", _ERRORS))) > max_content_bytes:
        return []

    # The content folded to one spelling, and where each folded character came from (None: as written).
    aligned = None if ascii_only else normalize.fold_aligned(content)
    original = content
    if aligned is not None:
        content = aligned.text
    folded_text = content.casefold()
    if len(folded_text) == len(content):
        # Every character folds to exactly one character (a fold is never
        # empty), so folded positions are character positions.
        char_at_fold = None
        boundary = None
    else:
        fold_widths = np.fromiter((len(ch.casefold()) for ch in content), dtype=np.int64, count=len(content))
        fold_starts = np.zeros(len(content) + 1, dtype=np.int64)
        np.cumsum(fold_widths, out=fold_starts[1:])
        boundary = np.zeros(len(folded_text) + 1, dtype=bool)
        boundary[fold_starts] = True
        char_at_fold = np.zeros(len(folded_text) + 1, dtype=np.int64)
        char_at_fold[fold_starts] = np.arange(len(content) + 1)

    occurrences: list[tuple[int, int]] = []  # (start, end) in characters of `content`
    for needle in needles:
        width = len(needle)
        if boundary is None or char_at_fold is None:  # both None, or neither
            occurrences.extend((i, i + width) for i in _starts(folded_text, needle))
        else:
            for i in _starts(folded_text, needle):
                if boundary[i] and boundary[i + width]:
                    occurrences.append((int(char_at_fold[i]), int(char_at_fold[i + width])))
    if not occurrences:
        return []
    if aligned is not None:
        # Folded characters back to the characters as written; an occurrence must start and end where
        # what one stretch of the original folded to does (a phrase never matches part of what one
        # character or one mark's stretch folds to: "f" does not match half of "ﬁ", as with casefold).
        starts, ends = aligned.starts, aligned.ends
        last = len(starts) - 1
        occurrences = [
            (starts[a], ends[b - 1])
            for a, b in occurrences
            if (a == 0 or starts[a - 1] != starts[a] or ends[a - 1] != ends[a])
            and (b - 1 == last or starts[b] != starts[b - 1] or ends[b] != ends[b - 1])
        ]
        content = original
        if not occurrences:
            return []
    occurrences.sort()
    # A new span begins where an occurrence starts strictly after everything
    # before it has ended; touching occurrences (start == reach) merge.
    merged: list[list[int]] = []
    for start, end in occurrences:
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1][1] = end
        elif len(merged) == max_spans:
            break  # every later occurrence starts past the last kept span
        else:
            merged.append([start, end])
    if ascii_only:
        return [(a, b) for a, b in merged]
    byte_at_char = _utf8_offsets(_code_points(content))
    return [(int(byte_at_char[a]), int(byte_at_char[b])) for a, b in merged]


def apply_match_spans(
    hits: list[Hit],
    phrases: Sequence[str],
    max_spans: int = DEFAULT_MAX_SPANS,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
) -> list[Hit]:
    """New hits, in the same order, with ``match_spans`` computed over their content."""
    return [
        dataclasses.replace(hit, match_spans=match_spans(hit.content, phrases, max_spans, max_content_bytes))
        for hit in hits
    ]
