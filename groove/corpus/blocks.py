"""Block structure of a note's body, from markdown-it-py (CommonMark) and its `token.map` line ranges.

One parse per note. The chunker needs three things from it, all as 0-based
line numbers of the body:

- the **top-level headings** (ATX and setext), with level, text and the lines
  they occupy. A heading-looking line inside a block quote, a list item, an
  HTML block, an indented or fenced code block is not one of them;
- the lines where a **block starts** (a paragraph, heading, list item, quote,
  code block, HTML block, rule, at any depth): an oversized section is cut
  there, never inside a code block or an HTML block;
- the lines that belong to a heading (for "is this piece only headings?").

Inline markup is not parsed (the inline rules are off): only the block
structure is needed, and that keeps the parse linear in the text.

A heading's text is shown as a reader sees it rendered, without raw HTML (`plain_heading`): the tags of
inline HTML (`<a name="setup"></a>Setup`, `<a id="x">Title</a>`, `<span>`, `<br>`, comments) are dropped
and the text between them kept, as CommonMark reads them (a `<` that starts no tag, `\\<String\\>`,
`<System.String>` or an autolink, stays, and so does anything inside a code span). The ids and names
those tags carried are the heading's `anchors`: a link's `#setup` still names the section
(search/parts.py `find_section`).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

_MD = MarkdownIt("commonmark").disable(["inline", "text_join"])

# Tokens that open a block: where a block-level cut may fall.
_BLOCK_OPENERS = frozenset(
    {
        "paragraph_open",
        "heading_open",
        "fence",
        "code_block",
        "html_block",
        "hr",
        "blockquote_open",
        "bullet_list_open",
        "ordered_list_open",
        "list_item_open",
        "table_open",
    }
)


@dataclass(frozen=True)
class Heading:
    line: int  # first line (0-based, in the body)
    end: int  # one past the last line (a setext heading includes its underline)
    level: int  # 1..6
    text: str  # the heading text, closing #'s and HTML tags removed, lines joined by one space
    anchors: tuple[str, ...] = ()  # the id / name attributes of the HTML tags it had (`<a name="setup">`)


# CommonMark's raw inline HTML (spec 6.6): an open tag with its attributes, a closing tag, a declaration, a CDATA
# section (a comment and a processing instruction: plain_heading finds their ends).
_ATTRIBUTE = r"""(?:\s+[A-Za-z_:][A-Za-z0-9_.:-]*(?:\s*=\s*(?:[^"'=<>`\s]+|'[^']*'|"[^"]*"))?)"""
_HTML = re.compile(
    rf"<[A-Za-z][A-Za-z0-9-]*{_ATTRIBUTE}*\s*/?>"
    r"|</[A-Za-z][A-Za-z0-9-]*\s*>"
    r"|<![A-Za-z][^>]*>"
    r"|<!\[CDATA\[[\s\S]*?\]\]>"
)
_ANCHOR = re.compile(r"""\s(?:id|name)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^"'=<>`\s]+))""", re.IGNORECASE)
_BREAK = re.compile(r"<br\b", re.IGNORECASE)  # a line break between two words leaves a space
_SPECIAL = re.compile(r"[\\`<]")
MAX_TAG_CHARS = 512  # a longer "tag" is text: bounds what a heading of a hostile file costs (linear in it)
# A heading (or title) longer than this is cut, with an ellipsis: every chunk of its section carries it in its
# heading and breadcrumb, so a 200,000-character heading made each of 99 hits 400 KB. The longest title of the
# shared corpora is 300 characters.
MAX_HEADING_CHARS = 1_000


def bounded(text: str) -> str:
    """`text`, cut to MAX_HEADING_CHARS with an ellipsis when it is longer."""
    return text if len(text) <= MAX_HEADING_CHARS else text[: MAX_HEADING_CHARS - 1].rstrip() + "\u2026"


def plain_heading(text: str) -> tuple[str, tuple[str, ...]]:
    """A heading's text without its inline HTML tags (their text content kept), and the ids and names the tags
    carried. Backslash escapes and code spans are left as written: `` `<div>` `` is text, not a tag."""
    if "<" not in text:
        return text, ()
    # Code spans (CommonMark 6.1): a run of backticks closes at the next run of the same length.
    runs: dict[int, list[int]] = {}
    for found in re.finditer("`+", text):
        runs.setdefault(found.end() - found.start(), []).append(found.start())
    out: list[str] = []
    anchors: list[str] = []
    i = 0
    while (m := _SPECIAL.search(text, i)) is not None:
        j = m.start()
        out.append(text[i:j])
        if text[j] == "\\":  # an escaped character: kept as written, never the start of a tag
            i = j + 2
            out.append(text[j:i])
        elif text[j] == "`":  # to the closing run, kept as written; none: the backticks are text
            run = _run_at(text, j)
            starts = runs.get(run, [])  # (a run after a backslash is shorter than the one found)
            k = bisect.bisect_right(starts, j)
            i = starts[k] + run if k < len(starts) else j + run
            out.append(text[j:i])
        elif text.startswith(("<!--", "<?"), j):  # a comment or a processing instruction: to its end, found in C
            close = text.find("-->" if text[j + 1] == "!" else "?>", j + 2, j + MAX_TAG_CHARS)
            if close < 0:
                out.append("<")
                i = j + 1
            else:
                i = close + (3 if text[j + 1] == "!" else 2)
        elif (tag := _HTML.match(text, j, min(len(text), j + MAX_TAG_CHARS))) is not None:
            anchors += [next(v for v in a.groups() if v is not None) for a in _ANCHOR.finditer(tag.group())]
            if _BREAK.match(tag.group()):
                out.append(" ")  # a line break between two words leaves a space
            i = tag.end()
        else:  # a `<` that starts no tag: `<String>` is a tag, `\<String\>` and `<System.String>` are text
            out.append("<")
            i = j + 1
    out.append(text[i:])
    plain = " ".join("".join(out).split())
    return plain, tuple(dict.fromkeys(a for a in anchors if a))


def _run_at(text: str, j: int) -> int:
    """How many backticks start at `j`."""
    end = j
    while end < len(text) and text[end] == "`":
        end += 1
    return end - j


@dataclass(frozen=True)
class Structure:
    headings: tuple[Heading, ...]  # top-level headings, in order
    block_starts: frozenset[int]  # lines where a block begins
    heading_lines: frozenset[int]  # every line that is part of a top-level heading


def structure(body: str) -> Structure:
    """The block structure of `body` (LF line endings)."""
    tokens = _MD.parse(body)
    headings: list[Heading] = []
    starts: set[int] = set()
    heading_lines: set[int] = set()
    for i, tok in enumerate(tokens):
        if tok.type in _BLOCK_OPENERS and tok.map is not None:
            starts.add(tok.map[0])
        if tok.type == "heading_open" and tok.level == 0 and tok.map is not None:
            first, end = tok.map
            inline = tokens[i + 1] if i + 1 < len(tokens) else None
            text = " ".join((inline.content if inline is not None else "").split("\n")).strip()
            text, anchors = plain_heading(text)
            headings.append(Heading(first, end, int(tok.tag[1:]), bounded(text), anchors))
            heading_lines.update(range(first, end))
    return Structure(tuple(headings), frozenset(starts), frozenset(heading_lines))
