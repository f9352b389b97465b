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
"""

from __future__ import annotations

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
    text: str  # the heading text, closing #'s removed, lines joined by one space


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
            headings.append(Heading(first, end, int(tok.tag[1:]), text))
            heading_lines.update(range(first, end))
    return Structure(tuple(headings), frozenset(starts), frozenset(heading_lines))
