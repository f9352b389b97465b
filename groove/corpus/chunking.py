"""Chunking: a note's body and its block structure -> heading-sized chunks (rules 3-5 and 7 in markdown.py).

Works on character offsets into the body and line numbers from blocks.py, so
the Markdown is parsed once per note. Sizes are `count_tokens(embed_text(piece))`
and each distinct text is counted once (`_Sizer`); packing guesses how many
parts fit from their known sizes and checks the guess, so a section of n parts
costs about n + 2 x (pieces) counts instead of a search over every prefix.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from groove.corpus.blocks import Structure

TokenCounter = Callable[[str], int]

HARD_SAMPLE_TOKENS = 16  # a hard split measures characters per token on this many windows' worth at most
HARD_GUESSES = 4  # guesses per hard cut before it bisects between what fits and what does not


@dataclass(frozen=True)
class Chunk:
    """One indexed passage of a note."""

    ordinal: int  # 0-based position in the note
    heading: str  # heading text without the #'s; '' for the preamble
    level: int  # 1..6; 0 for the preamble
    context: str  # "Title > Parent heading > Heading"
    content: str  # the exact text, heading line included
    start_line: int  # 1-based line of the original file, first non-blank line
    end_line: int  # inclusive, last non-blank line
    token_count: int  # count_tokens(embed_text(content))
    hash: str  # sha256 hex of embed_text(content)


# Han (incl. extensions and compatibility), kana, Hangul, CJK punctuation and
# full-width forms: each of these is about one token for the tokenizers groove
# uses, where Latin text is about four characters per token.
_CJK = re.compile(
    "[\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]"
)


def estimate_tokens(text: str) -> int:
    """A cheap, model-free token estimate.

    Each CJK character (Han, kana, Hangul, CJK punctuation, full-width forms)
    counts one token; the remaining characters count one token per four,
    rounded up. Non-empty text is at least one token; empty text is zero.
    """
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    return max(1, cjk + math.ceil((len(text) - cjk) / 4))


def embed_text(content: str) -> str:
    """The text that is embedded for a chunk: its content, whitespace-trimmed.

    Deliberately without the title, breadcrumb or path, so that renaming a
    note or moving a section elsewhere does not change what is embedded.
    """
    return content.strip()


# A run of this many characters with neither whitespace nor CJK in it is a
# "long word" (a hash, base64, a pasted blob, a URL without separators). Such a
# run counts one token per character and is not handed to the tokenizer:
# WordPiece turns any word over 100 characters into a single [UNK] (so its
# count would hide the run's size), and a SentencePiece tokenizer reads random
# letters at about 35 KB/s (a 1.9 MB note of them would take a minute for
# every pass). One token per character is an upper bound for every tokenizer
# groove uses on such text, so a piece that fits really fits.
LONG_WORD_CHARS = 100
_WORD_CHAR = (
    "[^\\s\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]"
)
# A match may only start where a run starts (the lookbehind): without it, every position inside a
# run shorter than LONG_WORD_CHARS was tried again, so a word of L letters cost L x L / 2 steps and
# a note of 20-99-letter words spent most of its sizing time here.
_LONG_WORD = re.compile("(?<!%s)%s{%d,}" % (_WORD_CHAR, _WORD_CHAR, LONG_WORD_CHARS))


def size_of(text: str, count: TokenCounter) -> int:
    """The size of an embedded text: `count(text)`, long words counted one token per character.

    With long words, the text between them is counted piece by piece (`count`
    may cache those pieces: they recur in every cut of the same text) and
    added: token counts are additive across whitespace for the tokenizers
    groove uses, up to a token where a long word touches its neighbours.
    """
    if len(text) < LONG_WORD_CHARS:
        return count(text)
    runs = [m.span() for m in _LONG_WORD.finditer(text)]
    if not runs:
        return count(text)
    cost, at = 0, 0
    for a, b in [*runs, (len(text), len(text))]:
        between = text[at:a].strip()
        if between:
            cost += count(between)
        cost += b - a
        at = b
    return cost


class _Sizer:
    """`size_of(embed_text(text))`, counted once per distinct embedded text."""

    def __init__(self, count: TokenCounter) -> None:
        self.count = count
        self.cache: dict[str, int] = {}
        self.between: dict[str, int] = {}  # texts between long words, counted once

    def _count_between(self, text: str) -> int:
        size = self.between.get(text)
        if size is None:
            size = self.between[text] = self.count(text)
        return size

    def __call__(self, text: str) -> int:
        key = embed_text(text)
        size = self.cache.get(key)
        if size is None:
            size = self.cache[key] = size_of(key, self._count_between)
        return size


def split_lines(text: str) -> list[str]:
    """Split on LF only, keeping the terminators: "".join(result) == text."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


# ---------------------------------------------------------------------------
# Sections and pieces


@dataclass(frozen=True)
class _Label:
    heading: str
    level: int
    context: str


@dataclass(frozen=True)
class _Piece:
    text: str
    label: _Label
    has_body: bool  # some non-blank text besides the section's heading lines


@dataclass(frozen=True)
class _Section:
    offset: int  # where the section starts in the body
    text: str
    label: _Label
    heading_chars: int  # length of its heading lines at the start (0 for the preamble)


def _context(title: str, stack: list[tuple[int, str]]) -> str:
    parts = [title.strip()]
    for i, (_, text) in enumerate(stack):
        if i == 0 and text.casefold() == title.strip().casefold():
            continue  # the H1 repeats the title
        parts.append(text)
    return " > ".join(p for p in parts if p)


def _sections(lines: list[str], offsets: list[int], struct: Structure, split_levels: int, title: str) -> list[_Section]:
    """Cut the body before each top-level heading of level <= split_levels."""
    cuts = [h for h in struct.headings if h.level <= split_levels]
    bounds = [h.line for h in cuts]
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    first = bounds[0] if cuts else len(lines)
    if first > 0:  # text before the first heading: the preamble
        sections.append(_Section(0, "".join(lines[:first]), _Label("", 0, _context(title, [])), 0))
    for n, h in enumerate(cuts):
        stop = bounds[n + 1] if n + 1 < len(cuts) else len(lines)
        while stack and stack[-1][0] >= h.level:
            stack.pop()
        stack.append((h.level, h.text))
        label = _Label(h.text, h.level, _context(title, stack))
        start = offsets[h.line]
        sections.append(_Section(start, "".join(lines[h.line : stop]), label, offsets[min(h.end, stop)] - start))
    return sections


class _Splitter:
    """Cuts an oversized section into pieces that each fit in max_tokens."""

    def __init__(
        self,
        size: _Sizer,
        max_tokens: int,
        min_tokens: int,
        block_starts: frozenset[int],
        heading_starts: frozenset[int],
    ) -> None:
        self.size = size
        self.max = max_tokens
        self.min = min_tokens
        self.block_starts = block_starts  # body offsets where a block begins
        self.heading_starts = heading_starts  # body offsets of lines that are part of a heading
        self.levels = (self._split_blocks, _split_at_lines, _split_sentences)

    def fits(self, text: str) -> bool:
        head = self._head(text)
        if head is not None and self.size(head) > self.max:
            return False  # its start alone is too large: a long text is not counted whole to learn that
        return self.size(text) <= self.max

    def _head(self, text: str) -> str | None:
        """The start of a long text, cut at whitespace (token counts add up across whitespace, so the
        start never counts more than the whole), at most HARD_SAMPLE_TOKENS x max_tokens characters;
        None for a text shorter than that or with no whitespace to cut at."""
        limit = HARD_SAMPLE_TOKENS * self.max
        if len(text) <= limit:
            return None
        cut = max(text.rfind(" ", 0, limit), text.rfind("\n", 0, limit))
        return text[:cut] if cut > 0 else None

    def pieces(self, section: _Section) -> list[_Piece]:
        text = section.text
        parts = [text] if self.fits(text) else [p for _, p in self._cut(section.offset, text, 0)]
        pieces = []
        consumed = 0
        for part in parts:
            # The part's own text minus whatever of the heading lines falls inside it.
            skip = max(0, min(len(part), section.heading_chars - consumed))
            pieces.append(_Piece(part, section.label, bool(part[skip:].strip())))
            consumed += len(part)
        return pieces

    def _cut(self, offset: int, text: str, depth: int) -> list[tuple[int, str]]:
        """Pieces (body offset, text) of ``text``, preferring the coarsest boundaries that work."""
        if self.fits(text):
            return [(offset, text)]
        if depth == len(self.levels):
            return self._hard(offset, text)
        parts = self.levels[depth](offset, text)
        if len(parts) <= 1:
            return self._cut(offset, text, depth + 1)
        out: list[tuple[int, str]] = []
        run: list[tuple[int, str]] = []  # consecutive parts that fit: packed together
        for part in parts:
            if self.fits(part[1]):
                run.append(part)
                continue
            packed = self._pack(run)
            run = []
            if packed and self._bare(*packed[-1]):
                # A heading (or a scrap) right before an oversized block goes
                # with the block's first piece rather than standing alone.
                before = packed.pop()
                part = (before[0], before[1] + part[1])
            out.extend(packed)
            out.extend(self._cut(part[0], part[1], depth + 1))
        out.extend(self._pack(run))
        return out

    def _split_blocks(self, offset: int, text: str) -> list[tuple[int, str]]:
        """Cut before each line where a block starts (blank lines stay with the block before)."""
        cuts = [0]
        pos = text.find("\n")
        while 0 <= pos < len(text) - 1:
            if offset + pos + 1 in self.block_starts:
                cuts.append(pos + 1)
            pos = text.find("\n", pos + 1)
        cuts.append(len(text))
        return [(offset + a, text[a:b]) for a, b in itertools.pairwise(cuts) if b > a]

    def _bare(self, offset: int, text: str) -> bool:
        """Too small to stand alone, or nothing but headings and blank lines."""
        if self.size(text) < self.min:
            return True
        pos = 0
        for line in text.split("\n"):
            if line.strip() and offset + pos not in self.heading_starts:
                return False
            pos += len(line) + 1
        return True

    def _pack(self, parts: list[tuple[int, str]]) -> list[tuple[int, str]]:
        """Greedily join consecutive parts while the join fits.

        The sizes of the parts are known, so their running sum guesses how many
        fit; the guess is checked on the joined text (token counts are close to
        additive, not exactly) and corrected by a search only when it is wrong.
        """
        out = []
        ends = [0]
        for _, p in parts:
            ends.append(ends[-1] + len(p))
        joined = "".join(p for _, p in parts)
        sizes = [self.size(p) for _, p in parts]
        i = 0
        while i < len(parts):
            total, guess = 0, 0
            while i + guess < len(parts) and total + sizes[i + guess] <= self.max:
                total += sizes[i + guess]
                guess += 1
            start = i
            n = _longest_prefix(
                len(parts) - i,
                lambda k: self.fits(joined[ends[start] : ends[start + k]]),  # noqa: B023 - called before the loop moves on
                guess=max(1, guess),
                # the next part did not fit by the sum of sizes: a guess that fits is the answer
                trust=lambda k: True,
            )
            out.append((parts[i][0], joined[ends[i] : ends[i + n]]))
            i += n
        return out

    def _hard(self, offset: int, text: str) -> list[tuple[int, str]]:
        """Cut at the longest prefixes that fit (at least one character each).

        Characters per token are measured once on the start of the text (at most
        HARD_SAMPLE_TOKENS x max_tokens characters, the start `fits` counted: never the whole of a 2 MB line)
        and then kept up to date from every count; each cut's length is
        guessed from that rate (aiming at 95 % of the window) and the guess corrected
        from the size it turned out to have, so a piece costs one or two counts of
        its own length and the whole text is counted about twice, whatever its length.
        """
        sample = self._head(text) or text[: HARD_SAMPLE_TOKENS * self.max]
        per_token = len(sample) / max(1, self.size(sample))
        out = []
        start = 0
        while start < len(text):
            n, per_token = self._fill(text, start, per_token)
            out.append((offset + start, text[start : start + n]))
            start += n
        return out

    def _fill(self, text: str, start: int, per_token: float) -> tuple[int, float]:
        """(length of the cut at `start`, characters per token as last measured).

        A cut that fits and fills the window to 90 % is taken as it is. Otherwise the
        next guess is the measured rate times the window; the known bounds (the
        longest cut that fits, the shortest that does not) keep every guess between
        them, and after a few guesses a bisection between them settles it."""
        rest = len(text) - start
        lo, hi = 0, rest + 1  # lo fits (0: none known yet); hi does not (rest + 1: none known)
        k = min(rest, max(1, int(per_token * self.max)))
        for _ in range(HARD_GUESSES):
            size = self.size(text[start : start + k])
            if size <= self.max:
                lo = k
                if k == rest or size * 10 >= self.max * 9:
                    return k, per_token
            else:
                hi = k
            if size:
                per_token = k / size
            k = int(per_token * self.max * 0.95)
            if not lo < k < hi:
                if hi - lo <= 1:
                    break
                k = (lo + hi) // 2 if hi <= rest else min(rest, max(lo + 1, lo * 2))
        if lo == 0:
            if hi <= 1 or not self.fits(text[start : start + 1]):
                return 1, per_token
            lo = 1
        if hi > rest:
            if self.fits(text[start:]):
                return rest, per_token
            hi = rest
        return _bisect(lambda j: self.fits(text[start : start + j]), lo, hi), per_token


def _longest_prefix(
    n: int, fits: Callable[[int], bool], guess: int = 1, trust: Callable[[int], bool] | None = None
) -> int:
    """The largest k in 1..n with fits(k), assuming fits is monotone; at least 1.

    Starts at `guess` (checked first: a good guess costs two calls, or one when
    `trust(guess)` says a guess that fits is good enough), gallops up from there
    and then bisects, so the cost follows the answer, not n.
    """
    guess = min(max(guess, 1), n)
    if guess > 1 and not fits(guess):
        if not fits(1):
            return 1
        return _bisect(fits, 1, guess)  # the answer is below the guess
    if n <= 1 or (guess == 1 and not fits(1)):
        return 1
    if guess == n:
        return n
    if trust is not None and trust(guess):
        return guess
    lo, step = guess, 1
    hi = lo + step  # the guess usually is the answer: check one more first
    while True:
        if hi >= n:
            if fits(n):
                return n
            hi = n
            break
        if not fits(hi):
            break
        step *= 2
        lo, hi = hi, hi + step
    return _bisect(fits, lo, hi)


def _bisect(fits: Callable[[int], bool], lo: int, hi: int) -> int:
    """The largest k in [lo, hi) with fits(k), given fits(lo) and not fits(hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _split_at_lines(offset: int, text: str) -> list[tuple[int, str]]:
    parts = []
    for line in split_lines(text):
        parts.append((offset, line))
        offset += len(line)
    return parts


_SENTENCE_END = re.compile(r"[.!?]+[)\]\"'”’]*[ \t\n]+|[。！？]+[」』）)]*[ \t\n]*")


def _split_sentences(offset: int, text: str) -> list[tuple[int, str]]:
    """Cut after sentence ends; the whitespace after one stays with it."""
    parts = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if m.end() > start and m.end() < len(text):
            parts.append((offset + start, text[start : m.end()]))
            start = m.end()
    parts.append((offset + start, text[start:]))
    return [p for p in parts if p[1]]


# ---------------------------------------------------------------------------
# Merging and chunk building


def _merge_tiny(
    pieces: list[_Piece], size: _Sizer, max_tokens: int, min_tokens: int, exact: bool = False
) -> list[_Piece]:
    """Join tiny pieces to a neighbour (rule 5).

    A joined piece's size is taken as the sum of its parts' (token counts are
    close to additive across the line ends where pieces meet), so a run of
    tiny pieces costs no counting; the caller checks every merged piece once
    and merges again with `exact` counts when a sum was wrong.
    """
    sums: dict[_Piece, int] = {}

    def sz(p: _Piece) -> int:
        known = sums.get(p)
        return known if known is not None else size(p.text)

    def tiny(p: _Piece) -> bool:
        return not p.text.strip() or sz(p) < min_tokens

    def fits(a: _Piece, b: _Piece) -> bool:
        if exact:
            return size(a.text + b.text) <= max_tokens
        return sz(a) + sz(b) <= max_tokens

    def join(a: _Piece, b: _Piece) -> _Piece:
        joined = _join(a, b)
        if not exact:
            sums[joined] = sz(a) + sz(b)
        return joined

    out: list[_Piece] = []
    carry: _Piece | None = None
    for i, piece in enumerate(pieces):
        if carry is not None:
            piece = join(carry, piece)
            carry = None
        if not tiny(piece):
            out.append(piece)
            continue
        nxt = pieces[i + 1] if i + 1 < len(pieces) else None
        fits_next = nxt is not None and fits(piece, nxt)
        if not piece.has_body and fits_next:
            carry = piece
        elif out and fits(out[-1], piece):
            out[-1] = join(out[-1], piece)
        elif fits_next:
            carry = piece
        else:
            out.append(piece)
    return out


def _join(a: _Piece, b: _Piece) -> _Piece:
    """a followed by b, labelled by the first part that has a body."""
    label = a.label if a.has_body or not b.has_body else b.label
    return _Piece(a.text + b.text, label, a.has_body or b.has_body)


def _line_span(content: str, first_line: int) -> tuple[int, int]:
    """The lines of content's non-blank text (all of it if it is blank)."""
    lines = content.split("\n")
    if content.endswith("\n"):
        lines.pop()
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if not filled:
        return first_line, first_line + max(len(lines) - 1, 0)
    return first_line + filled[0], first_line + filled[-1]


def _build_chunks(pieces: list[_Piece], body_first_line: int, size: _Sizer) -> tuple[Chunk, ...]:
    chunks = []
    line = body_first_line
    for ordinal, piece in enumerate(pieces):
        start, end = _line_span(piece.text, line)
        embedded = embed_text(piece.text)
        chunks.append(
            Chunk(
                ordinal=ordinal,
                heading=piece.label.heading,
                level=piece.label.level,
                context=piece.label.context,
                content=piece.text,
                start_line=start,
                end_line=end,
                token_count=size(piece.text),
                hash=hashlib.sha256(embedded.encode("utf-8", "surrogatepass")).hexdigest(),
            )
        )
        line += piece.text.count("\n")
    return tuple(chunks)


def chunk_body(
    body: str,
    struct: Structure,
    *,
    title: str,
    body_first_line: int,
    split_levels: int,
    max_tokens: int,
    min_chunk_tokens: int,
    count_tokens: TokenCounter,
) -> tuple[Chunk, ...]:
    """The chunks of a body whose block structure is `struct` (rules 3-5 and 7 in markdown.py)."""
    if not body.strip():
        return ()
    lines = split_lines(body)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    n = len(lines)
    size = _Sizer(count_tokens)
    splitter = _Splitter(
        size,
        max_tokens,
        min_chunk_tokens,
        frozenset(offsets[i] for i in struct.block_starts if i < n),
        frozenset(offsets[i] for i in struct.heading_lines if i < n),
    )
    pieces: list[_Piece] = []
    for section in _sections(lines, offsets, struct, split_levels, title):
        pieces.extend(splitter.pieces(section))
    merged = _merge_tiny(pieces, size, max_tokens, min_chunk_tokens)
    if any(size(p.text) > max_tokens for p in merged):  # a sum of sizes was wrong: count every join
        merged = _merge_tiny(pieces, size, max_tokens, min_chunk_tokens, exact=True)
    return _build_chunks(merged, body_first_line, size)
