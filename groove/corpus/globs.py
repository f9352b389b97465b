"""Gitignore-style globs, matched in time linear in the path and in the pattern.

One matcher for the two places a person's globs meet paths: search's
`path_globs` (groove/search/filters.py) and the notes folder's `.grooveignore`
(groove/corpus/scan.py).

Why not a regex library. pathspec translates a glob to a Python regex
(`*` -> `[^/]*`, `**/` -> `(?:.+/)?`), and Python's `re` backtracks: a glob
such as `*?*?*?*?*?*?*?*?Q` against a long file name tries every way to share
the name among the stars before it gives up, which took 18 s with two more
pairs taking hours, and held whatever thread ran it (the event loop, so the
whole daemon) the whole time.

The semantics are pathspec's "gitignore" patterns (GitIgnoreBasicPattern, which
groove used before and which tests/test_globs.py checks this module against on
thousands of pairs), with one exception, where this module follows git: a
negated class such as `[!a]` never matches a `/` (pathspec's regex let it, so
`x[!a]` also ignored the folder `x`, which is checked as the path `x/`).

- a blank line and a `#` line match nothing; trailing spaces are dropped
  unless escaped (`\\ `); a leading `!` makes a line re-include what it matches;
- `\\x` is a literal x; `?` is one character but not `/`; `[...]` a class,
  one character but not `/` (`[!...]` and `[^...]` negate it; a class with
  no closing `]` is a literal `[`; a bad range such as `[z-a]` is an error);
- `*` is any run of characters within one path segment (a segment that is
  only `*` must be non-empty); `**` as a whole segment is any number of
  segments (`**/x` at any depth, `a/**/b` zero or more between, `a/**` what is
  inside a);
- a pattern with a `/` at its start or in its middle is anchored at the top;
  one without (`x`, `x/`) matches at any depth; a trailing `/` matches only
  what is inside a folder of that name (callers pass a folder as `"name/"`);
- of the lines that match a path, the last decides.

How it stays linear. A path is split into its segments. Each segment glob is
compiled to a regex in the form CPython's own `fnmatch.translate` uses (since
3.9, with atomic groups since 3.11) to avoid this very blow-up: the pieces between stars are fixed-length, so
`A*B*C*D` becomes `A(?>.*?B)(?>.*?C).*D`. Each atomic group takes the
leftmost place where its piece fits and can never be re-entered (nothing
before it can back up into it), which is enough: the leftmost place leaves
the most room for the rest. So one segment costs at most (segment length) x
(glob length) steps. Across segments, `**` is handled by a table over (glob
segment i, path segment j), each cell computed at most once, and the "first
j' >= j that fits" scans memoised the same way: at most (path segments) x
(glob segments) cells, each one segment match. In all, a glob costs
O(len(path) x len(glob)), with no exponent; and a glob is bounded (at most
MAX_GLOB_CHARS characters and MAX_GLOB_STARS stars), so one match is
bounded too.

Paths never hold a newline here (names with control characters are never
indexed, and are shown escaped), so the `re` quirks of `.` and `$` around a
newline that a pathspec regex would have are not reproduced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from groove.errors import GrooveError

#: Longest glob accepted (characters, after trailing spaces are dropped).
MAX_GLOB_CHARS = 256
#: Most `*` wildcards in one glob (a `**` segment counts 2).
MAX_GLOB_STARS = 16


class GlobError(GrooveError, ValueError):
    """A glob that is refused; ``str(err)`` says why in words that follow the glob ("is 300 characters long; ...")."""


def shown(glob: str, width: int = 40) -> str:
    """A glob as it appears in a message: quoted, and cut after `width` characters."""
    return repr(glob if len(glob) <= width else glob[:width] + "...")


# --- one path segment ----------------------------------------------------------------------------

_STAR = object()
_SPECIAL_IN_CLASS = set("\\]^-[&~|")


def _class_regex(body: str, negate: bool) -> str:
    """A `[...]` class (its body without the brackets) as a regex class that `re` reads the way pathspec's did.

    pathspec copies the body into a Python regex class with backslashes doubled,
    so every character is literal except a `-` between two characters (a range;
    a `-` first or last is literal). The class is rebuilt here from that reading,
    each character escaped, so that `re` neither warns ("possible nested set")
    nor reads anything else into it.
    """
    out = []
    k = 0
    while k < len(body):
        lo = body[k]
        k += 1
        if k + 1 < len(body) and body[k] == "-":
            hi = body[k + 1]
            k += 2
            if hi < lo:
                raise GlobError(f"has a bad character range {lo}-{hi}")
            out.append(_class_char(lo) + "-" + _class_char(hi))
        else:
            out.append(_class_char(lo))
    return "[" + ("^" if negate else "") + "".join(out) + "]"


def _class_char(ch: str) -> str:
    return "\\" + ch if ch in _SPECIAL_IN_CLASS else ch


def _segment_tokens(seg: str) -> list:
    """One glob segment as tokens: a literal character (str), `_STAR`, or a regex for `?` or a class.

    The reading is pathspec's `_translate_segment_glob` with invalid ranges literal.
    """
    tokens: list = []
    i, end = 0, len(seg)
    escape = False
    while i < end:
        ch = seg[i]
        i += 1
        if escape:
            escape = False
            tokens.append(ch)
        elif ch == "\\":
            escape = True
        elif ch == "*":
            tokens.append(_STAR)
        elif ch == "?":
            tokens.append(("re", "."))
        elif ch == "[":
            j = i
            if j < end and seg[j] in "!^":
                j += 1
            if j < end and seg[j] == "]":
                j += 1
            while j < end and seg[j] != "]":
                j += 1
            if j < end:
                negate = seg[i] in "!^"
                start = i + 1 if negate else i
                tokens.append(("re", _class_regex(seg[start:j], negate)))
                i = j + 1
            else:
                tokens.append("[")
        else:
            tokens.append(ch)
    if escape:
        raise GlobError("ends with a lone backslash; write \\\\ for a backslash")
    return tokens


def _piece(tokens: Sequence) -> str:
    return "".join(re.escape(t) if isinstance(t, str) else t[1] for t in tokens)


class _Segment:
    """One segment of a glob, matched against one segment of a path (no `/` on either side)."""

    __slots__ = ("literal", "regex", "nonempty")

    def __init__(self, seg: str):
        self.literal: str | None = None
        self.regex: re.Pattern[str] | None = None
        self.nonempty = seg == "*"  # pathspec: a segment that is only `*` is `[^/]+`
        tokens = _segment_tokens(seg)
        if self.nonempty:
            return
        if all(isinstance(t, str) for t in tokens):
            self.literal = "".join(tokens)
            return
        # Pieces between stars (each fixed-length): A*B*C -> A(?>.*?B).*C. Linear: see the module doc.
        pieces: list[list] = [[]]
        for t in tokens:
            if t is _STAR:
                pieces.append([])
            else:
                pieces[-1].append(t)
        if len(pieces) == 1:
            pattern = _piece(pieces[0])
        else:
            middle = "".join(f"(?>.*?{_piece(p)})" for p in pieces[1:-1] if p)
            pattern = _piece(pieces[0]) + middle + ".*" + _piece(pieces[-1])
        self.regex = re.compile(f"(?s:{pattern})")

    def match(self, text: str) -> bool:
        if self.nonempty:
            return text != ""
        if self.literal is not None:
            return text == self.literal
        return self.regex.fullmatch(text) is not None  # type: ignore[union-attr]  # set when the two above are not


_ANY = "**"  # a whole-segment `**`, as written
_DEEP = object()  # ... and as it stands in a compiled glob


# --- one glob ------------------------------------------------------------------------------------


class Glob:
    """One gitignore-style line, parsed and bounded. `match(path)` is True when the line applies to the path."""

    __slots__ = ("source", "include", "_whole", "_segs", "_lead", "_trail", "_block")

    def __init__(self, source: str, include: bool, whole: str | None, segs: tuple):
        self.source = source
        self.include = include  # False for a `!` line
        self._whole = whole  # "any" (every path), "slash" (every path with a `/`), or None: use _segs
        self._segs = segs  # _Segment or _DEEP (`**`), normalised as pathspec does
        # The common shapes, `[**/]a/b[/**]` with no `**` between segments, take a short way (same rules).
        self._lead = segs[0] is _DEEP
        self._trail = len(segs) > 1 and segs[-1] is _DEEP
        block = segs[1 if self._lead else 0 : len(segs) - 1 if self._trail else len(segs)]
        self._block = block if all(s is not _DEEP for s in block) else None

    def __repr__(self) -> str:
        return f"Glob({self.source!r})"

    def match(self, path: str) -> bool:
        path = normalize_path(path)
        return self.match_parts(path, path.split("/"))

    def match_parts(self, path: str, parts: Sequence[str]) -> bool:
        """`match` for a path already normalised and split at `/` (a GlobSet splits it once for all its lines)."""
        if self._whole == "any":
            return path != ""
        if self._whole == "slash":
            return "/" in path
        if self._block is None:
            return _match_segments(self._segs, parts)
        return self._match_block(self._block, parts)

    def _match_block(self, block: Sequence[_Segment], parts: Sequence[str]) -> bool:
        """`_match_segments` for a glob with no inner `**` (its `block`): try each place the block may start.
        At most (path segments) x (block segments) segment matches."""
        n = len(parts)
        k = len(block)
        for m in range(n - k + 1 if self._lead else min(1, n - k + 1)):
            if m == 1 and parts[0] == "":
                continue  # a leading `**` skips no segment or a non-empty run of them
            for t in range(k):
                if not block[t].match(parts[m + t]):
                    break
            else:
                j = m + k  # the path segment after the block
                if self._trail:
                    if j < n:
                        return True
                elif not block[-1].nonempty or j == n or (j == n - 1 and parts[n - 1] == ""):
                    return True
        return False


def parse(line: str) -> Glob | None:
    """One line of gitignore syntax as a Glob; None for a blank or comment line; GlobError if it is refused.

    Refused: more than MAX_GLOB_CHARS characters or MAX_GLOB_STARS `*`, a bad
    `[...]` range, a lone trailing backslash, or a line that is only `!`.
    """
    text = line if line.endswith("\\ ") else line.rstrip()
    if not text or text.startswith("#"):
        return None
    if len(text) > MAX_GLOB_CHARS:
        raise GlobError(f"is {len(text)} characters long; the limit is {MAX_GLOB_CHARS} characters")
    include = not text.startswith("!")
    body = text if include else text[1:]
    raw = body.split("/")
    is_dir = not raw[-1]
    if body == "/":
        is_dir = False
    segs: list[str] = list(raw)
    if not segs[0]:
        del segs[0]  # a leading `/` anchors at the top
    elif len(segs) == 1 or (len(segs) == 2 and not segs[1]):
        if segs[0] != _ANY:
            segs.insert(0, _ANY)  # `x` and `x/` match at any depth
    if not segs:
        raise GlobError("has no pattern after its '!'")
    if not segs[-1]:
        segs[-1] = _ANY  # `x/`: what is inside x
    for i in range(len(segs) - 1, 0, -1):
        if segs[i - 1] == _ANY and segs[i] == _ANY:
            del segs[i]
    stars = sum(2 if s == _ANY else sum(t is _STAR for t in _segment_tokens(s)) for s in raw)  # as written
    if stars > MAX_GLOB_STARS:
        raise GlobError(f"has {stars} '*' wildcards; the limit is {MAX_GLOB_STARS}")
    compiled = tuple(_DEEP if s == _ANY else _Segment(s) for s in segs)
    whole = None
    if segs == [_ANY]:
        whole = "slash" if is_dir else "any"
    elif segs == [_ANY, "*"]:
        whole = "any"
    elif segs == [_ANY, "*", _ANY]:
        whole = "slash"
    return Glob(text, include, whole, compiled)


def normalize_path(path: str) -> str:
    """A path as pathspec compares it: one leading `/` or `./` dropped."""
    if path.startswith("/"):
        return path[1:]
    if path.startswith("./"):
        return path[2:]
    return path


def _match_segments(segs: Sequence, parts: Sequence[str]) -> bool:
    """Whether a normalised glob (segments and `**`) matches a path's segments. Bounded: see the module doc.

    reach(i, j): glob segments i.. match with glob segment i starting at path segment j. A glob
    segment matches one whole path segment; at the end, a last `*` must end the path (one trailing
    empty segment allowed, a folder passed as "name/"); any other last segment lets anything follow;
    a last `**` needs at least one more segment. A leading or inner `**` skips no segment or a
    non-empty run of them (pathspec's `(?:.+/)?` and `(?:/.+)?`).
    """
    n = len(parts)
    end = len(segs) - 1
    reach_memo: dict[int, bool] = {}
    first_memo: dict[int, int] = {}
    width = n + 2

    def reach(i: int, j: int) -> bool:
        key = i * width + j
        hit = reach_memo.get(key)
        if hit is not None:
            return hit
        seg = segs[i]
        if seg is _DEEP:
            if i == end:
                ok = j < n
            else:
                skip_from = j + 2 if j < n and parts[j] == "" else j + 1
                ok = reach(i + 1, j) or first(i + 1, skip_from) < n
        elif j >= n or not seg.match(parts[j]):
            ok = False
        elif i == end:
            ok = not seg.nonempty or j == n - 1 or (j == n - 2 and parts[n - 1] == "")
        else:
            ok = reach(i + 1, j + 1)
        reach_memo[key] = ok
        return ok

    def first(i: int, j: int) -> int:
        """The first path segment m >= j with reach(i, m), else n; every (i, m) is scanned once."""
        scanned = []
        m = j
        found = n
        while m < n:
            hit = first_memo.get(i * width + m)
            if hit is not None:
                found = hit
                break
            scanned.append(m)
            if reach(i, m):
                found = m
                break
            m += 1
        for s in scanned:
            first_memo[i * width + s] = found
        return found

    return reach(0, 0)


# --- lines in order: the last that matches decides ------------------------------------------------


class GlobSet:
    """Lines of globs in order; a path matches when the last line that matches it is not a `!` line."""

    __slots__ = ("globs", "_reversed")

    def __init__(self, globs: Iterable[Glob]):
        self.globs = tuple(globs)
        self._reversed = self.globs[::-1]

    def __bool__(self) -> bool:
        return bool(self.globs)

    def __len__(self) -> int:
        return len(self.globs)

    def match(self, path: str) -> bool:
        return bool(self.decide(path))

    def decide(self, path: str) -> bool | None:
        """True (the last line that matches ignores the path), False (a `!` line re-includes it), or None when no
        line matches: then a file of rules further up decides (nested .gitignore files, corpus/scan.py)."""
        path = normalize_path(path)
        parts = path.split("/")
        for glob in self._reversed:
            if glob.match_parts(path, parts):
                return glob.include
        return None


def parse_lines(lines: Iterable[str]) -> tuple[GlobSet, list[tuple[int, str, str]]]:
    """A file of globs (as .grooveignore): the usable lines, and (line number, line, why) for each refused one.

    A refused line matches nothing; the other lines apply as written.
    """
    globs = []
    refused = []
    for no, line in enumerate(lines, 1):
        try:
            glob = parse(line)
        except GlobError as exc:
            refused.append((no, line, str(exc)))
            continue
        if glob is not None:
            globs.append(glob)
    return GlobSet(globs), refused


__all__ = [
    "MAX_GLOB_CHARS",
    "MAX_GLOB_STARS",
    "Glob",
    "GlobError",
    "GlobSet",
    "normalize_path",
    "parse",
    "parse_lines",
    "shown",
]
