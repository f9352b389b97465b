"""Reading just the part that matters: a note's sections and lines, and text fitted to a budget.

Pure functions over a note's indexed text (its chunks joined: the body, frontmatter left out) and the
search hits; `groove.index.Index.get_document` and `Index.search` call them.

- **Lines** are numbered as search hits number them (`start_line`, `end_line`): lines of the file,
  frontmatter included, so `lines: {from: hit.start_line}` reads on from a hit. The text's first line
  is found from the first chunk (its `start_line` is its first non-blank line).
- **Sections** of a Markdown note come from its block structure (`corpus/blocks.py`, so a `#` line in a
  code block is no heading), at every level: a section runs from its heading to the next heading of the
  same or a higher level. Each has a path built as a hit's `context` is ("Title > Parent > Heading";
  an H1 that repeats the title is left out), so a hit's context, the path below the title, or the
  heading alone (when unique) names it; case, width (NFKC) and spaces around `>` do not matter.
  Other files (PDF, Word, ...) have the sections their chunks carry (a page, a slide, a heading).
- **Budgets** cut text at the last sentence end (`。` `！` `？` `．`, or `.` `!` `?` before a space, with
  any closing brackets or quotes after it) or line end that fits; failing that at a space, then between
  two CJK characters; never inside a word. `fill_budget` fills a search answer best first and says what
  it trimmed and left out.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import Field

from groove.corpus.blocks import structure
from groove.errors import NotFoundError
from groove.search.answers import Answer, OmittedPassage, SearchAnswer, SearchBudget, SearchHit
from groove.search.compiler import QueryError
from groove.search.request import LineRange

MAX_LISTED_HEADINGS = 40  # headings an error names (the rest are counted)
MAX_GAP_HEADINGS = 20  # headings listed per run of lines left out
MIN_LATER_PIECE = 80  # a trimmed passage after the first must keep at least this many characters


class LeftOut(Answer):
    """A run of the note's lines that a part did not return."""

    lines: list[int] = Field(description="[first, last]: the lines left out (numbered as search hits number them)")
    chars: int = Field(description="their characters")
    headings: list[str] = Field(
        description="the headings that start in those lines, as paths below the title: pass one as heading to read it"
    )
    more_headings: int = Field(0, description="headings in those lines beyond the ones listed")


class DocumentPart(Answer):
    """Which part of a note an answer holds (set when heading, lines or max_chars was given)."""

    heading: str | None = Field(None, description="the section returned, as its full heading path (with heading)")
    lines: list[int] = Field(description="[first, last]: the lines of the note content spans")
    chars: int = Field(description="characters in content")
    total_chars: int = Field(description="characters of the whole note's text (frontmatter not counted)")
    omitted_chars: int = Field(description="characters of the note not in content (total_chars - chars)")
    trimmed_chars: int = Field(description="characters max_chars cut from the end of the part asked for (0: none)")
    left_out: list[LeftOut] = Field(description="what was not returned, in note order, with the headings in it")


# --- lines ------------------------------------------------------------------------------------------


class NoteText:
    """A note's indexed text and where its lines are: offsets <-> line numbers of the file."""

    def __init__(self, content: str, first_line: int):
        self.content = content
        self.first_line = first_line
        self.starts = [0] + [m.end() for m in re.finditer("\n", content)]  # offset of each line's start
        n = len(self.starts) - (1 if content.endswith("\n") or not content else 0)
        self.last_line = first_line + max(n, 1) - 1

    def line_at(self, offset: int) -> int:
        return self.first_line + bisect.bisect_right(self.starts, offset) - 1

    def offset_of(self, line: int) -> int:
        """Where a line starts (past the end: the text's length)."""
        i = line - self.first_line
        if i <= 0:
            return 0
        return self.starts[i] if i < len(self.starts) else len(self.content)

    def span(self, start: int, end: int) -> tuple[int, int] | None:
        """[first, last] lines of the non-blank text in content[start:end]; None when it is all blank."""
        piece = self.content[start:end]
        lead = len(piece) - len(piece.lstrip())
        if lead == len(piece):
            return None
        trail = len(piece.rstrip())
        return self.line_at(start + lead), self.line_at(start + trail - 1)


def text_first_line(chunks: Sequence[tuple[int, str]]) -> int:
    """The file line where a note's indexed text starts, from its first chunk (start_line, content): a chunk's
    start_line is its first non-blank line, and the blank lines before it are part of its content."""
    if not chunks:
        return 1
    start_line, content = chunks[0]
    lead = len(content) - len(content.lstrip())
    return max(1, start_line - content.count("\n", 0, lead))


# --- sections ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    path: tuple[str, ...]  # title, parents, heading (an H1 that repeats the title left out: a hit's context)
    start: int  # offsets into the text: the heading line ...
    end: int  # ... to the next heading of the same or a higher level
    below_title: str  # the path without the title, as errors and left-out runs name it
    anchors: tuple[str, ...] = ()  # the ids and names of its heading's HTML tags (`<a name="setup"></a>Setup`)
    slug: str = ""  # its heading's anchor as GitHub makes it (`setup`); a link's `#fragment` names it by either

    @property
    def context(self) -> str:
        return " > ".join(self.path)


def _norm(text: str) -> str:
    text = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return re.sub(r"\s*>\s*", " > ", text).strip(" >")


def _paths(title: str, stack: list[str]) -> tuple[str, ...]:
    parts = [title.strip()]
    for i, text in enumerate(stack):
        if i == 0 and text.casefold() == title.strip().casefold():
            continue  # the H1 repeats the title (as corpus/chunking.py builds a chunk's context)
        parts.append(text)
    return tuple(p for p in parts if p)


def _section(path: tuple[str, ...], start: int, end: int, anchors: tuple[str, ...] = (), slug: str = "") -> Section:
    below = " > ".join(path[1:]) or (path[0] if path else "")
    return Section(path, start, end, below, anchors, slug)


def slug(heading: str) -> str:
    """The anchor GitHub (and most Markdown renderers) give a heading: lower case, punctuation and symbols dropped,
    spaces to hyphens (`Installing groove` -> `installing-groove`, `日本語の見出し` as it is)."""
    kept = "".join(ch for ch in heading.lower() if ch in " -_" or unicodedata.category(ch)[0] in "LMN")
    return kept.replace(" ", "-")


def markdown_sections(text: NoteText, title: str) -> list[Section]:
    """Every heading's section of a Markdown note (and the text before the first heading, named by the title
    when no heading is)."""
    heads = structure(text.content).headings
    offsets = [text.starts[h.line] if h.line < len(text.starts) else len(text.content) for h in heads]
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    for i, h in enumerate(heads):
        while stack and stack[-1][0] >= h.level:
            stack.pop()
        stack.append((h.level, h.text))
        end = next((offsets[j] for j in range(i + 1, len(heads)) if heads[j].level <= h.level), len(text.content))
        sections.append(_section(_paths(title, [t for _, t in stack]), offsets[i], end, h.anchors, slug(h.text)))
    first = offsets[0] if heads else len(text.content)
    top = _paths(title, [])
    if text.content[:first].strip() and top and all(s.path != top for s in sections):
        sections.insert(0, _section(top, 0, first))
    return sections


def chunk_sections(labels: Sequence[tuple[str, str, int]]) -> list[Section]:
    """The sections of a document that is not Markdown: runs of chunks with the same heading (a page, a slide,
    a Word heading), from (heading, context, characters) per chunk in order."""
    sections: list[Section] = []
    offset = 0
    run: tuple[str, str, int] | None = None  # heading, context, start
    for heading, context, chars in labels:
        if run is not None and (run[0], run[1]) != (heading, context):
            sections.append(_section(tuple(run[1].split(" > ")), run[2], offset))
            run = None
        if run is None and heading:
            run = (heading, context, offset)
        offset += chars
    if run is not None:
        sections.append(_section(tuple(run[1].split(" > ")), run[2], offset))
    return sections


def _listing(sections: Sequence[Section]) -> str:
    names = list(dict.fromkeys(s.below_title for s in sections))
    shown = names[:MAX_LISTED_HEADINGS]
    more = len(names) - len(shown)
    return " | ".join(shown) + (f" | ... and {more} more" if more else "")


def find_section(sections: Sequence[Section], heading: str, path: str, text: NoteText | None = None) -> Section:
    """The section a heading path names; NotFoundError naming the note's headings, or QueryError when it
    names several (each with its lines when `text` is given, to pick one)."""
    want = _norm(re.sub(r"^#+\s+", "", heading.strip()))
    if not sections:
        raise NotFoundError(
            f"no heading {heading!r} in {path}: the note has no headings; read it by lines (from, count) or whole"
        )
    exact = [s for s in sections if _norm(s.context) == want]
    matches = exact or [s for s in sections if any(_norm(" > ".join(s.path[i:])) == want for i in range(len(s.path)))]
    if not matches:  # a link's fragment: `note.md#setup` names a section by its heading's HTML id, else its slug
        fragment = heading.strip().lstrip("#").strip()
        matches = (
            [s for s in sections if fragment in s.anchors]
            or [s for s in sections if _norm(fragment) in (_norm(a) for a in s.anchors)]
            or [s for s in sections if s.slug and s.slug == _norm(fragment).replace(" ", "-")]
        )
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NotFoundError(f"no heading {heading!r} in {path}; its headings: {_listing(sections)}")
    named = [s.context + (f" (lines {_lines(text, s.start, s.end)})" if text is not None else "") for s in matches]
    raise QueryError(
        f"heading {heading!r} names {len(matches)} sections of {path}: "
        + " | ".join(named)
        + "; pass the full path, or lines (from, count)"
    )


# --- cutting text at a sentence end -----------------------------------------------------------------

_CLOSERS = "」』）)]】〕〉》\"'”’"
_SENTENCE_END = re.compile("(?:[。．！？｡]|[.!?](?=[\\s" + re.escape(_CLOSERS) + "]))[" + re.escape(_CLOSERS) + "]*")


_NON_SPACE = re.compile(r"\S")


def _wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


MAX_HEADING_BACKOFF = 16  # heading lines a cut steps back over (a run of bare headings is rare)
WORD_LOOKBACK = 256  # characters searched back for a place between two CJK characters


def cut_point(text: str, limit: int, *, hard: bool = False) -> int:
    """How much of `text` to keep within `limit` characters: all of it when it fits; else up to the last
    sentence end or line end that fits (not right after a heading whose text would be cut off); failing that
    the last space, then the last place between two CJK characters; failing that `limit` (with `hard`) or 0
    (the caller leaves the text out). Linear in `limit`, the searches in C."""
    if len(text) <= limit:
        return len(text)
    if limit <= 0:
        return 0
    window = text[: limit + 1]  # one more character: whether a '.' at the edge is followed by a space
    best = max((m.end() for m in _SENTENCE_END.finditer(window) if m.end() <= limit), default=0)
    best = max(best, window.rfind("\n", 0, limit) + 1)
    for _ in range(MAX_HEADING_BACKOFF):
        if not best:
            break
        end = best
        while end > 0 and text[end - 1].isspace():
            end -= 1
        line_start = text.rfind("\n", 0, end) + 1
        if not text[line_start:end].lstrip().startswith("#") or not _NON_SPACE.search(text, 0, line_start):
            return best
        best = line_start  # the kept text would end on a heading: end before that line instead
    if best:
        return best
    space = max(window.rfind(" ", 1, limit + 1), window.rfind("\t", 1, limit + 1), window.rfind("\u3000", 1, limit + 1))
    if space > 0:
        return len(text[:space].rstrip()) or space
    for i in range(limit, max(0, limit - WORD_LOOKBACK), -1):
        if _wide(text[i - 1]) or _wide(text[i]):
            return i
    return limit if hard else 0


# --- get_document's part ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """What get_document returns of a note, and what it says about the rest."""

    content: str
    info: DocumentPart


MIN_PART_TEXT = 80  # a budgeted read holds at least this much of the note's text (or all of the part asked for)
LISTING_SHARE = 4  # the headings named in what a budgeted read left out take at most 1/4 of its budget
FIT_SLACK = 8  # characters a refit takes off beyond the excess: the numbers in the lines may grow a digit


def read_part(
    text: NoteText,
    sections: Sequence[Section],
    *,
    path: str,
    heading: str | None,
    lines: LineRange | None,
    max_chars: int | None,
    lines_chars: Callable[[DocumentPart], int] | None = None,
) -> Part:
    """The part of a note a request asks for: a section, lines, or the whole text; cut to max_chars.

    With `lines_chars` (the characters the answer's own lines take around the content: the note's line, which part,
    what was left out, as the caller renders them), max_chars holds those lines too: the headings named in what
    was left out take at most a quarter of it (the rest are counted), the content what is left. A budget that
    cannot hold the lines and MIN_PART_TEXT characters of text is a QueryError naming the budget that would."""
    content = text.content
    start, end = 0, len(content)
    name = None
    if heading is not None:
        found = find_section(sections, heading, path, text)
        start, end, name = found.start, found.end, found.context
    elif lines is not None:
        first, last = text.first_line, text.last_line
        if not content.strip():
            raise QueryError(f"{path} has no text to read by lines (only frontmatter, or nothing)")
        want_last = lines.last if lines.last is not None else last
        if lines.from_ > last:
            raise QueryError(f"lines.from {lines.from_} is past the end of {path}: its text is lines {first}-{last}")
        if want_last < first:
            raise QueryError(
                f"lines {lines.from_}-{want_last} of {path} are its frontmatter (in the answer's "
                f"frontmatter field); its text is lines {first}-{last}"
            )
        start, end = text.offset_of(max(lines.from_, first)), text.offset_of(min(want_last, last) + 1)
    by_lines = lines is not None and heading is None

    def part(room: int | None, listing: int | None) -> Part:
        stop = end if room is None or end - start <= room else start + cut_point(content[start:end], room, hard=True)
        return _part(text, sections, start, stop, end, name, by_lines, listing)

    if max_chars is None:
        return part(None, None)
    if lines_chars is None:
        return part(max_chars, None)
    least = min(MIN_PART_TEXT, end - start)
    for listing in (max_chars // LISTING_SHARE, 0):
        room = max_chars
        while True:
            got = part(room, listing)
            over = lines_chars(got.info) + len(got.content) - max_chars
            if over <= 0:
                return got
            if room <= least:
                break
            room = max(least, len(got.content) - over - FIT_SLACK)
    bare = part(least, 0)
    need = lines_chars(bare.info) + len(bare.content)
    raise QueryError(
        f"max_chars {max_chars} cannot hold this part of {path}: the answer's own lines (the note, which part, what "
        f"was left out) and {len(bare.content)} characters of its text take {need}; pass max_chars of at least {need}"
    )


def _part(
    text: NoteText,
    sections: Sequence[Section],
    start: int,
    end: int,
    asked_end: int,
    name: str | None,
    by_lines: bool,
    listing: int | None,
) -> Part:
    """content[start:end] of a part asked as content[start:asked_end], with what it leaves out; `listing`: the
    characters the headings named in the left-out runs may take (None: MAX_GAP_HEADINGS per run)."""
    content = text.content
    piece = content[start:end]
    span = text.span(start, end)
    if by_lines:
        shown = (text.line_at(start), text.line_at(max(start, end - 1)))
    else:
        shown = span or (text.line_at(start), text.line_at(max(start, end - 1)))
    left_out: list[LeftOut] = []
    for a, b in ((0, start), (end, len(content))):
        gap = _gap(text, sections, a, b, listing)
        if gap is not None:
            left_out.append(gap)
            if listing is not None:
                listing -= sum(len(h) + 2 for h in gap.headings[1:])
    info = DocumentPart(
        heading=name,
        lines=list(shown),
        chars=len(piece),
        total_chars=len(content),
        omitted_chars=len(content) - len(piece),
        trimmed_chars=asked_end - end,
        left_out=left_out,
    )
    return Part(piece, info)


def _lines(text: NoteText, start: int, end: int) -> str:
    span = text.span(start, end) or (text.line_at(start), text.line_at(start))
    return f"{span[0]}-{span[1]}"


def _gap(
    text: NoteText, sections: Sequence[Section], start: int, end: int, listing: int | None = None
) -> LeftOut | None:
    """A run of text not returned (None when it is only blank lines), with the headings that start in it: at most
    MAX_GAP_HEADINGS, and with `listing` the first and then only as many as fit in that many characters (", "
    between them); the others are counted."""
    span = text.span(start, end)
    if span is None:
        return None
    heads = [s.below_title for s in sections if start <= s.start < end]
    named = heads[:MAX_GAP_HEADINGS]
    if listing is not None:
        used = 0
        for n, head in enumerate(named[1:], 1):  # the first is always named: where to read on
            used += len(head) + 2
            if used > listing:
                named = named[:n]
                break
    return LeftOut(
        lines=list(span),
        chars=end - start,
        headings=named,
        more_headings=len(heads) - len(named),
    )


# --- search's budget --------------------------------------------------------------------------------


def _trimmed(hit: SearchHit, keep: int) -> SearchHit:
    """The hit with its passage cut to `keep` characters: end_line and the match spans follow the cut."""
    kept = hit.content[:keep]
    body = kept.rstrip()
    lead = hit.content[: len(hit.content) - len(hit.content.lstrip())].count("\n")
    end_line = max(hit.start_line, hit.start_line - lead + body.count("\n"))
    limit = len(kept.encode("utf-8", "surrogatepass"))
    spans = [s for s in hit.match_spans if s[1] <= limit]
    return hit.model_copy(
        update={"content": kept, "end_line": end_line, "match_spans": spans, "trimmed_chars": len(hit.content) - keep}
    )


def fill_budget(answer: SearchAnswer, max_chars: int) -> SearchAnswer:
    """The answer's passages fitted to `max_chars` characters, best first: a passage that fits is kept whole,
    the first that does not is cut at a sentence end (a later one only when at least MIN_LATER_PIECE
    characters of it fit), the rest are left out and listed in `budget`."""
    left = max_chars
    kept: list[SearchHit] = []
    omitted: list[SearchHit] = []
    trimmed = trimmed_chars = 0
    for hit in answer.results:
        size = len(hit.content)
        if size <= left:
            kept.append(hit)
            left -= size
            continue
        keep = cut_point(hit.content, left)
        if keep <= 0 or (kept and keep < MIN_LATER_PIECE):
            omitted.append(hit)
            continue
        kept.append(_trimmed(hit, keep))
        trimmed += 1
        trimmed_chars += size - keep
        left -= keep
    budget = SearchBudget(
        max_chars=max_chars,
        used_chars=max_chars - left,
        trimmed_passages=trimmed,
        trimmed_chars=trimmed_chars,
        omitted_passages=len(omitted),
        omitted_chars=sum(len(h.content) for h in omitted),
        omitted=[
            OmittedPassage(
                path=h.path, context=h.context, start_line=h.start_line, end_line=h.end_line, chars=len(h.content)
            )
            for h in omitted
        ],
    )
    return answer.model_copy(update={"results": kept, "budget": budget})


__all__ = [
    "MAX_LISTED_HEADINGS",
    "NoteText",
    "Part",
    "Section",
    "chunk_sections",
    "cut_point",
    "fill_budget",
    "find_section",
    "markdown_sections",
    "read_part",
    "text_first_line",
]
