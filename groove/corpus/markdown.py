"""Markdown note -> frontmatter + heading-sized chunks. A pure function.

``parse_note(text, stem=...)`` reads one note (already decoded to ``str``) and
returns a :class:`ParsedNote`: the title, tags, date and frontmatter, any
warnings about the input, and the chunks to index. No filesystem, no model,
no database: the caller reads the file and stores the result.

The rules, in the order they are applied:

1. **Normalise.** A leading UTF-8 BOM is dropped; CRLF and lone CR become LF.
   Every original line ending becomes exactly one LF, so line *n* of the
   normalised text is line *n* of the file on disk.
2. **Frontmatter.** A ``---`` first line opens YAML frontmatter, closed by the
   next ``---`` or ``...`` line. Every key is kept in ``frontmatter``, made
   JSON-serialisable (dates become ISO strings, other values ``str``).
   ``title``, ``tags`` and ``date`` are read from it (tags from frontmatter
   only: inline ``#tags`` in the body are not collected; ``'#'`` is stripped
   and exact duplicates dropped). Only the ``date`` key is a date; it is
   normalised to ISO and a value that is not a date is a warning. Broken frontmatter
   never drops the note: invalid YAML, a value that is not a mapping, or a
   structure too large to keep is reported in ``warnings`` and the body after
   the closing fence is indexed; an opening fence that is never closed makes
   the whole text the body.
3. **Sections.** The body is cut before every ATX heading (``#`` to
   ``######`` then a space, a tab or the end of the line, after at most three
   spaces) whose level is ``<= split_levels``, except inside fenced code
   blocks (```````` or ``~~~``; closed by a fence of the same character at
   least as long; an unclosed fence runs to the end of the file). Deeper
   headings stay inside their section. Setext headings (text underlined with
   ``===`` / ``---``) are not recognised: they stay inside the section they
   are in. Text before the first heading is the preamble (level 0,
   heading ``''``).
   Sizes are always measured on what is embedded, ``count_tokens(embed_text(
   text))``: whitespace around a piece never changes its size.
4. **Oversized sections** (more than ``max_tokens``) are cut
   into pieces: at block boundaries first (blank lines, headings; a fenced
   code block is one block), and a block still too long is cut at line ends,
   then at sentence ends (``. ! ?`` followed by whitespace, ``。！？``), then
   hard at the longest prefix that fits. Runs of blocks that fit are packed
   greedily; a packed piece that is only headings and blank lines (or under
   ``min_chunk_tokens``) right before an oversized block is carried into that
   block's first piece, so a heading is not cut off from its text. Every
   piece keeps its section's heading, level and context. No chunk exceeds
   ``max_tokens`` (the one exception is impossible input: a single character
   that alone counts more than ``max_tokens``).
5. **Tiny pieces** (fewer than ``min_chunk_tokens``, or whitespace only)
   join a neighbour, and only when the joined text still fits in
   ``max_tokens`` (whitespace always fits: it changes no embedded text). A piece with no body (only its heading line, or only blank
   lines) joins the FOLLOWING piece (a parent heading directly followed by a
   child heading lands in the child's chunk); otherwise it joins the
   PREVIOUS piece; failing that the following one; failing both it stays a
   chunk of its own. So ``min_chunk_tokens`` is a soft floor; the only
   chunks under it are a note's single chunk or a piece that no neighbour
   had room for.
   A merged chunk is labelled (heading, level, context) by its first part
   that has a body, else by its first part.
6. **No bytes lost.** ``"".join(c.content for c in chunks)`` equals the
   normalised body (the text after the frontmatter), unless that body is
   whitespace only, which yields no chunks at all. No chunk is whitespace
   only: blank lines travel with the text before them (leading ones with the
   first chunk).

``start_line``/``end_line`` are 1-based lines of the original file
(frontmatter lines count) spanning the chunk's non-blank lines: the blank
lines a chunk carries before or after its text (kept so no byte is lost) are
not part of its span.

What is embedded (:func:`embed_text`) is the chunk content alone, heading line
included, stripped of surrounding whitespace: no title, no breadcrumb, no
path. Renaming a note or moving a section to another note leaves the text,
and so ``Chunk.hash``, unchanged, and nothing is re-embedded.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import yaml

__all__ = [
    "Chunk",
    "ParsedNote",
    "embed_text",
    "estimate_tokens",
    "normalise_text",
    "parse_note",
]

TokenCounter = Callable[[str], int]

# Frontmatter larger than this many values (after following YAML aliases) or
# nested deeper than this is dropped with a warning: an alias bomb must not
# blow up memory or the JSON column it is stored in.
_MAX_FRONTMATTER_VALUES = 10_000
_MAX_FRONTMATTER_DEPTH = 64


# ---------------------------------------------------------------------------
# Public data


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


@dataclass(frozen=True)
class ParsedNote:
    """Everything groove keeps from one note."""

    title: str  # frontmatter title, else first H1, else the file stem
    tags: tuple[str, ...]  # frontmatter tags only, '#' stripped, deduplicated
    date: str | None  # ISO 'YYYY-MM-DD', or a full ISO datetime when it has a time
    frontmatter: dict[str, Any] = field(hash=False)  # every key, JSON-serialisable
    warnings: tuple[str, ...] = ()
    chunks: tuple[Chunk, ...] = ()


# ---------------------------------------------------------------------------
# Small public helpers

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


def _size(count_tokens: TokenCounter, text: str) -> int:
    """The size of a piece: the tokens of the text that would be embedded."""
    return count_tokens(embed_text(text))


def normalise_text(text: str) -> str:
    """Drop a leading BOM and turn CRLF and lone CR into LF.

    Line numbers are preserved: each original line ending becomes one LF.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------------------
# parse_note


def parse_note(
    text: str,
    *,
    stem: str,
    split_levels: int = 3,
    max_tokens: int = 256,
    min_chunk_tokens: int = 32,
    count_tokens: TokenCounter = estimate_tokens,
) -> ParsedNote:
    """Parse one Markdown note into metadata and chunks (see the module doc)."""
    if not 0 <= split_levels <= 6:
        raise ValueError(f"split_levels must be between 0 and 6, got {split_levels}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if min_chunk_tokens < 0:
        raise ValueError(f"min_chunk_tokens must be 0 or more, got {min_chunk_tokens}")

    normalised = normalise_text(text)
    warnings: list[str] = []
    front, body, body_first_line = _split_frontmatter(normalised, warnings)

    title = _title_from(front.get("title")) if front else ""
    tags = _tags_from(front.get("tags")) if front else ()
    date = _date_from(front.get("date"), warnings) if front else None

    lines = _split_lines(body)
    kinds = _classify(lines)
    if not title:
        title = next(
            (k.text for k in kinds if k.level == 1 and k.text), ""
        ) or stem

    chunks: tuple[Chunk, ...] = ()
    if body.strip():
        sections = _sections(lines, kinds, split_levels, title)
        splitter = _Splitter(count_tokens, max_tokens, min_chunk_tokens)
        pieces: list[_Piece] = []
        for section in sections:
            pieces.extend(splitter.pieces(section))
        merged = _merge_tiny(pieces, count_tokens, max_tokens, min_chunk_tokens)
        chunks = _build_chunks(merged, body_first_line, count_tokens)

    return ParsedNote(
        title=title,
        tags=tags,
        date=date,
        frontmatter=front,
        warnings=tuple(warnings),
        chunks=chunks,
    )


# ---------------------------------------------------------------------------
# Frontmatter


def _split_frontmatter(text: str, warnings: list[str]) -> tuple[dict[str, Any], str, int]:
    """Return (frontmatter, body, 1-based line number where the body starts)."""
    first_end = text.find("\n")
    first = text if first_end < 0 else text[:first_end]
    if first.rstrip() != "---":
        return {}, text, 1

    offset = len(first) + 1  # start of line 2
    line_no = 2
    close_at = -1
    while offset <= len(text):
        end = text.find("\n", offset)
        line = text[offset:] if end < 0 else text[offset:end]
        if line.rstrip() in ("---", "..."):
            close_at = offset
            break
        if end < 0:
            break
        offset = end + 1
        line_no += 1
    if close_at < 0:
        warnings.append(
            "frontmatter opened with '---' on line 1 is never closed by '---' or '...'; "
            "indexed the whole file as the body"
        )
        return {}, text, 1

    yaml_text = text[first_end + 1 : close_at]
    close_end = text.find("\n", close_at)
    body = "" if close_end < 0 else text[close_end + 1 :]
    body_first_line = line_no + 1

    try:
        data = yaml.safe_load(yaml_text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = exc.problem or exc.context or "unreadable"
        warnings.append(
            f"frontmatter is not valid YAML{where}: {problem}; indexed the body without it"
        )
        return {}, body, body_first_line
    except Exception as exc:  # untrusted input: e.g. a timestamp like 2024-02-30
        warnings.append(
            f"frontmatter is not valid YAML: {type(exc).__name__}: {exc}; "
            "indexed the body without it"
        )
        return {}, body, body_first_line

    if data is None:
        return {}, body, body_first_line
    if not isinstance(data, dict):
        warnings.append(
            f"frontmatter is a YAML {type(data).__name__}, not a mapping of keys to values; "
            "indexed the body without it"
        )
        return {}, body, body_first_line
    try:
        front = _to_json(data, _Budget(), depth=0, path=set())
    except _Unkeepable as exc:
        warnings.append(f"frontmatter {exc}; indexed the body without it")
        return {}, body, body_first_line
    return front, body, body_first_line


class _Unkeepable(Exception):
    pass


class _Budget:
    def __init__(self) -> None:
        self.left = _MAX_FRONTMATTER_VALUES

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _Unkeepable(f"has more than {_MAX_FRONTMATTER_VALUES} values")


def _to_json(value: Any, budget: _Budget, depth: int, path: set[int]) -> Any:
    """Make a YAML value JSON-serialisable: dates to ISO strings, others to str."""
    budget.spend()
    if depth > _MAX_FRONTMATTER_DEPTH:
        raise _Unkeepable(f"is nested deeper than {_MAX_FRONTMATTER_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        if id(value) in path:
            raise _Unkeepable("refers to itself (a YAML alias cycle)")
        path.add(id(value))
        try:
            if isinstance(value, dict):
                return {
                    _key(k): _to_json(v, budget, depth + 1, path) for k, v in value.items()
                }
            items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
            return [_to_json(v, budget, depth + 1, path) for v in items]
        finally:
            path.discard(id(value))
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, (dt.date, dt.datetime)):
        return key.isoformat()
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _title_from(value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        return ""
    return str(value).strip()


_TAG_SEPARATORS = re.compile(r"[,\s]+")


def _tags_from(value: Any) -> tuple[str, ...]:
    """Tags from a YAML list, or from a comma/space separated string."""
    if value is None or isinstance(value, (bool, dict)):
        return ()
    if isinstance(value, list):
        raw = [str(v) for v in value if v is not None and not isinstance(v, (list, dict, bool))]
    else:
        raw = _TAG_SEPARATORS.split(str(value))
    seen: dict[str, None] = {}
    for tag in raw:
        tag = tag.strip().lstrip("#").strip()
        if tag:
            seen.setdefault(tag, None)
    return tuple(seen)


_DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%Y.%m.%d", "%Y年%m月%d日")
_DATETIME_FORMATS = ("%Y/%m/%d %H:%M", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M")


def _date_from(value: Any, warnings: list[str]) -> str | None:
    """Normalise a frontmatter date (already JSON-converted) to ISO."""
    if value is None or value == "":
        return None
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        s = str(value).strip()
        try:
            return dt.date.fromisoformat(s).isoformat()
        except ValueError:
            pass
        for fmt in _DATE_FORMATS:
            try:
                return dt.datetime.strptime(s, fmt).date().isoformat()
            except ValueError:
                pass
        try:
            return dt.datetime.fromisoformat(s).isoformat()
        except ValueError:
            pass
        for fmt in _DATETIME_FORMATS:
            try:
                return dt.datetime.strptime(s, fmt).isoformat()
            except ValueError:
                pass
    shown = value if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    warnings.append(
        f"frontmatter date {shown!r} is not a date (expected YYYY-MM-DD); "
        "left the note undated"
    )
    return None


# ---------------------------------------------------------------------------
# Lines, headings and code fences


def _split_lines(text: str) -> list[str]:
    """Split on LF only, keeping the terminators: "".join(result) == text."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _heading(line: str) -> tuple[int, str] | None:
    m = _ATX.match(line)
    if m is None:
        return None
    text = _ATX_CLOSING.sub("", m.group(2) or "").strip()
    return len(m.group(1)), text


def _fence_open(line: str) -> tuple[str, int] | None:
    m = _FENCE_OPEN.match(line)
    if m is None:
        return None
    fence = m.group(1)
    if fence[0] == "`" and "`" in m.group(2):
        return None  # a backtick fence's info string cannot contain backticks
    return fence[0], len(fence)


def _fence_closes(line: str, fence: tuple[str, int]) -> bool:
    char, length = fence
    stripped = line.rstrip(" \t")
    indent = len(stripped) - len(stripped.lstrip(" "))
    run = stripped[indent:]
    return indent <= 3 and len(run) >= length and run == char * len(run)


@dataclass(frozen=True)
class _Kind:
    level: int = 0  # heading level, 0 if the line is not a heading
    text: str = ""  # heading text


_PLAIN = _Kind()


def _classify(lines: list[str]) -> list[_Kind]:
    """The ATX heading on each line, if any, ignoring lines in code fences."""
    kinds: list[_Kind] = []
    fence: tuple[str, int] | None = None
    for raw in lines:
        line = raw.rstrip("\n")
        if fence is not None:
            if _fence_closes(line, fence):
                fence = None
            kinds.append(_PLAIN)
            continue
        opened = _fence_open(line)
        if opened is not None:
            fence = opened
            kinds.append(_PLAIN)
            continue
        h = _heading(line)
        kinds.append(_Kind(h[0], h[1]) if h else _PLAIN)
    return kinds


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
    has_body: bool  # some non-blank text besides the section's heading line


def _context(title: str, stack: list[tuple[int, str]]) -> str:
    parts = [title.strip()]
    for i, (_, text) in enumerate(stack):
        if i == 0 and text.casefold() == title.strip().casefold():
            continue  # the H1 repeats the title
        parts.append(text)
    return " > ".join(p for p in parts if p)


def _sections(
    lines: list[str], kinds: list[_Kind], split_levels: int, title: str
) -> list[tuple[str, _Label, bool]]:
    """Cut the body before each heading of level <= split_levels.

    Returns (text, label, text_starts_with_heading) per section.
    """
    starts = [i for i, k in enumerate(kinds) if 0 < k.level <= split_levels]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    sections = []
    stack: list[tuple[int, str]] = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        kind = kinds[start]
        is_heading = 0 < kind.level <= split_levels
        if is_heading:
            while stack and stack[-1][0] >= kind.level:
                stack.pop()
            stack.append((kind.level, kind.text))
            label = _Label(kind.text, kind.level, _context(title, stack))
        else:
            label = _Label("", 0, _context(title, []))
        sections.append(("".join(lines[start:end]), label, is_heading))
    return sections


class _Splitter:
    """Cuts an oversized section into pieces that each fit in max_tokens."""

    def __init__(self, count_tokens: TokenCounter, max_tokens: int, min_tokens: int) -> None:
        self.count = count_tokens
        self.max = max_tokens
        self.min = min_tokens
        self.levels = (_split_blocks, _split_lines, _split_sentences)

    def fits(self, text: str) -> bool:
        return _size(self.count, text) <= self.max

    def pieces(self, section: tuple[str, _Label, bool]) -> list[_Piece]:
        text, label, starts_with_heading = section
        if self.fits(text):
            parts = [text]
        else:
            parts = self._cut(text, 0)
        pieces = []
        for i, part in enumerate(parts):
            if i == 0 and starts_with_heading:
                nl = part.find("\n")
                body = "" if nl < 0 else part[nl + 1 :]
            else:
                body = part
            pieces.append(_Piece(part, label, bool(body.strip())))
        return pieces

    def _cut(self, text: str, depth: int) -> list[str]:
        """Pieces of ``text``, preferring the coarsest boundaries that work."""
        if self.fits(text):
            return [text]
        if depth == len(self.levels):
            return self._hard(text)
        parts = self.levels[depth](text)
        if len(parts) <= 1:
            return self._cut(text, depth + 1)
        out: list[str] = []
        run: list[str] = []  # consecutive parts that fit: packed together
        for part in parts:
            if self.fits(part):
                run.append(part)
                continue
            packed = self._pack(run)
            run = []
            if packed and self._bare(packed[-1]):
                # A heading (or a scrap) right before an oversized block goes
                # with the block's first piece rather than standing alone.
                part = packed.pop() + part
            out.extend(packed)
            out.extend(self._cut(part, depth + 1))
        out.extend(self._pack(run))
        return out

    def _bare(self, text: str) -> bool:
        """Too small to stand alone, or nothing but headings and blank lines."""
        if _size(self.count, text) < self.min:
            return True
        return all(not line.strip() or _heading(line) for line in text.split("\n"))

    def _pack(self, parts: list[str]) -> list[str]:
        """Greedily join consecutive parts while the join fits."""
        out = []
        offsets = [0]
        for p in parts:
            offsets.append(offsets[-1] + len(p))
        joined = "".join(parts)
        i = 0
        while i < len(parts):
            n = _longest_prefix(
                len(parts) - i,
                lambda k: self.fits(joined[offsets[i] : offsets[i + k]]),
            )
            out.append(joined[offsets[i] : offsets[i + n]])
            i += n
        return out

    def _hard(self, text: str) -> list[str]:
        """Cut at the longest prefixes that fit (at least one character each)."""
        out = []
        while text:
            n = _longest_prefix(len(text), lambda k: self.fits(text[:k]))
            out.append(text[:n])
            text = text[n:]
        return out


def _longest_prefix(n: int, fits: Callable[[int], bool]) -> int:
    """The largest k in 1..n with fits(k), assuming fits is monotone; at least 1.

    Gallops up from 1 and then bisects, so the cost follows the answer, not n.
    """
    if n <= 1 or not fits(1):
        return 1
    lo, hi = 1, 2
    while True:
        if hi >= n:
            if fits(n):
                return n
            hi = n
            break
        if not fits(hi):
            break
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _split_blocks(text: str) -> list[str]:
    """Cut before each block: after blank lines, at headings, around code fences.

    Blank lines stay with the block before them (leading ones with the first
    block); a fenced code block, blank lines inside included, is one block.
    """
    blocks: list[str] = []
    current: list[str] = []
    has_content = False
    boundary = False
    fence: tuple[str, int] | None = None
    for raw in _split_lines(text):
        line = raw.rstrip("\n")
        if fence is not None:
            current.append(raw)
            if _fence_closes(line, fence):
                fence = None
                boundary = True
            continue
        if not line.strip():
            current.append(raw)
            boundary = boundary or has_content
            continue
        opened = _fence_open(line)
        heading = _heading(line)
        if has_content and (boundary or opened or heading):
            blocks.append("".join(current))
            current = []
        current.append(raw)
        has_content = True
        boundary = heading is not None
        fence = opened
    if current:
        blocks.append("".join(current))
    return blocks


_SENTENCE_END = re.compile(r"[.!?]+[)\]\"'”’]*[ \t\n]+|[。！？]+[」』）)]*[ \t\n]*")


def _split_sentences(text: str) -> list[str]:
    """Cut after sentence ends; the whitespace after one stays with it."""
    parts = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if m.end() > start and m.end() < len(text):
            parts.append(text[start : m.end()])
            start = m.end()
    parts.append(text[start:])
    return [p for p in parts if p]


# ---------------------------------------------------------------------------
# Merging and chunk building


def _merge_tiny(
    pieces: list[_Piece], count: TokenCounter, max_tokens: int, min_tokens: int
) -> list[_Piece]:
    def tiny(p: _Piece) -> bool:
        return not p.text.strip() or _size(count, p.text) < min_tokens

    def fits(a: _Piece, b: _Piece) -> bool:
        return _size(count, a.text + b.text) <= max_tokens

    out: list[_Piece] = []
    carry: _Piece | None = None
    for i, piece in enumerate(pieces):
        if carry is not None:
            piece = _join(carry, piece)
            carry = None
        if not tiny(piece):
            out.append(piece)
            continue
        nxt = pieces[i + 1] if i + 1 < len(pieces) else None
        fits_next = nxt is not None and fits(piece, nxt)
        if not piece.has_body and fits_next:
            carry = piece
        elif out and fits(out[-1], piece):
            out[-1] = _join(out[-1], piece)
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


def _build_chunks(
    pieces: list[_Piece], body_first_line: int, count: TokenCounter
) -> tuple[Chunk, ...]:
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
                token_count=count(embedded),
                hash=hashlib.sha256(embedded.encode("utf-8", "surrogatepass")).hexdigest(),
            )
        )
        line += piece.text.count("\n")
    return tuple(chunks)
