"""Markdown note -> frontmatter + heading-sized chunks. A pure function.

Three modules do the work: ``frontmatter.py`` (YAML, title, tags, dates),
``blocks.py`` (block structure and line ranges from markdown-it-py) and
``chunking.py`` (sections, splitting, merging); this one ties them together.

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
3. **Sections.** The block structure comes from markdown-it-py (CommonMark;
   ``blocks.py``). The body is cut before every top-level heading, ATX
   (``#`` to ``######``) or setext (text underlined with ``===`` / ``---``),
   whose level is ``<= split_levels``. A heading-looking line inside a fenced
   or indented code block, an HTML block, a block quote or a list item is not
   a heading (an unclosed fence runs to the end of the file). Deeper headings
   stay inside their section. Text before the first heading is the preamble
   (level 0, heading ``''``).
   Sizes are always measured on what is embedded, ``count_tokens(embed_text(
   text))``: whitespace around a piece never changes its size.
4. **Oversized sections** (more than ``max_tokens``) are cut
   into pieces: at block boundaries first (where markdown-it starts a block:
   a paragraph, heading, list item, quote; a code or HTML block is one block,
   blank lines go with the block before them), and a block still too long is cut at line ends,
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
   ``max_tokens`` (whitespace always fits: it changes no embedded text). A piece with no body (only its
   heading line, or only blank lines) joins the FOLLOWING piece (a parent heading directly followed by a
   child heading lands in the child's chunk); otherwise it joins the
   PREVIOUS piece; failing that the following one; failing both it stays a
   chunk of its own. So ``min_chunk_tokens`` is a soft floor; the only
   chunks under it are a note's single chunk or a piece that no neighbour
   had room for.
   A merged chunk is labelled (heading, level, context) by its first part
   that has a body, else by its first part.
6. **Limits.** ``max_chunks`` keeps the first that many chunks of a note and
   ``max_frontmatter_bytes`` leaves a larger frontmatter block unread; each
   cut is a warning saying what was left out (a note far larger than the cap
   can fill is parsed only up to ``max_chunks x max_tokens x 16`` characters,
   so a 50 MB note costs what that head costs) (``[index] max_chunks_per_file``,
   ``max_frontmatter_bytes``). Chunking costs a few token counts per chunk,
   linear in the note. A long word (``LONG_WORD_CHARS`` = 100 or more
   characters with no whitespace or CJK in it: a hash, base64, a pasted blob)
   counts one token per character, an upper bound, without asking the
   tokenizer (whose one ``[UNK]`` for it would hide its size, or which would
   take a minute over a 1.9 MB note of them), so it is cut like any other
   oversized text and its chunks carry that count.
7. **No bytes lost.** ``"".join(c.content for c in chunks)`` equals the
   normalised body (the text after the frontmatter), unless that body is
   whitespace only, which yields no chunks at all, or ``max_chunks`` cut it
   (rule 6: then it is the start of the body, and the warning says which
   lines are left). No chunk is whitespace
   only: blank lines travel with the text before them (leading ones with the
   first chunk).

8. **Links.** ``ParsedNote.links`` are the note's ``[[wiki links]]``, embeds and
   Markdown links to notes, outside code, each with its line of the file
   (``corpus/links.py``); they are read from the chunks, which hold the body
   byte for byte (rule 7), as the migration that added them reads the chunks
   an index already stores.

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

from dataclasses import dataclass, field
from typing import Any

from groove.corpus.blocks import Structure, structure
from groove.corpus.chunking import Chunk, TokenCounter, chunk_body, embed_text, estimate_tokens
from groove.corpus.frontmatter import date_from, split_frontmatter, tags_from, title_from
from groove.corpus.links import Link, links_of_chunks

__all__ = [
    "RULES",
    "Chunk",
    "ParsedNote",
    "embed_text",
    "estimate_tokens",
    "normalise_text",
    "nul_warning",
    "parse_note",
]


@dataclass(frozen=True)
class ParsedNote:
    """Everything groove keeps from one note."""

    title: str  # frontmatter title, else first H1, else the file stem
    tags: tuple[str, ...]  # frontmatter tags only, '#' stripped, deduplicated
    date: str | None  # ISO 'YYYY-MM-DD', or a full ISO datetime when it has a time
    frontmatter: dict[str, Any] = field(hash=False)  # every key, JSON-serialisable
    warnings: tuple[str, ...] = ()
    chunks: tuple[Chunk, ...] = ()
    links: tuple[Link, ...] = ()  # [[wiki links]], embeds and Markdown links to notes (corpus/links.py)


# The version of these rules (and blocks.py's) where a change alters what a note parses to while its text stays the
# same: an index parsed under another version reads each Markdown note again once (groove/index.py `reconcile`);
# the text, its hash and so its vector are unchanged, nothing is embedded again. 2: headings without HTML tags.
RULES = "2"

# More characters per token than real text ever has (English is about 4, code and long
# runs of punctuation under 16); bounds how much of a huge note the chunk cap can use.
_CHARS_PER_TOKEN_BOUND = 16


def normalise_text(text: str) -> str:
    """Drop a leading BOM, turn CRLF and lone CR into LF, and a NUL into U+FFFD (as CommonMark does).

    Line numbers are preserved: each original line ending becomes one LF. A NUL
    past the first 8 KB (a file with one there is binary: corpus/scan.py) would
    otherwise end the text the word table sees, so the words after it could not be
    found; `nul_warning` says the note had one.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def nul_warning(text: str) -> str | None:
    """The warning for a note with NUL bytes in its text (read as U+FFFD, the rest indexed), or None."""
    count = text.count("\x00")
    if not count:
        return None
    line = text.count("\n", 0, text.index("\x00")) + 1
    return (
        f"{count} NUL byte(s) in the text (the first on line {line}) are read as U+FFFD; the text around "
        "them is indexed. A NUL in a text file is usually damage: check the note"
    )


def parse_note(
    text: str,
    *,
    stem: str,
    split_levels: int = 3,
    max_tokens: int = 256,
    min_chunk_tokens: int = 32,
    count_tokens: TokenCounter = estimate_tokens,
    max_chunks: int | None = None,
    max_frontmatter_bytes: int | None = None,
) -> ParsedNote:
    """Parse one Markdown note into metadata and chunks (see the module doc)."""
    if not 0 <= split_levels <= 6:
        raise ValueError(f"split_levels must be between 0 and 6, got {split_levels}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if min_chunk_tokens < 0:
        raise ValueError(f"min_chunk_tokens must be 0 or more, got {min_chunk_tokens}")

    normalised = normalise_text(text)
    warnings: list[str] = [w] if (w := nul_warning(text)) else []
    front, body, body_first_line = split_frontmatter(normalised, warnings, max_bytes=max_frontmatter_bytes)

    title = title_from(front.get("title")) if front else ""
    tags = tags_from(front.get("tags")) if front else ()
    date = date_from(front.get("date"), warnings) if front else None

    def chunk(text: str, struct: Structure, title: str) -> tuple[Chunk, ...]:
        return chunk_body(
            text,
            struct,
            title=title,
            body_first_line=body_first_line,
            split_levels=split_levels,
            max_tokens=max_tokens,
            min_chunk_tokens=min_chunk_tokens,
            count_tokens=count_tokens,
        )

    # A note far larger than its chunk cap can fill is parsed only as far as the cap can reach:
    # a chunk holds at most max_tokens tokens, and real text has far fewer than
    # _CHARS_PER_TOKEN_BOUND characters per token. Should the head not fill the cap
    # (a flood of whitespace), the whole body is parsed after all.
    head = body
    if max_chunks is not None and len(body) > max_chunks * max_tokens * _CHARS_PER_TOKEN_BOUND:
        limit = max_chunks * max_tokens * _CHARS_PER_TOKEN_BOUND
        head = body[: body.rfind("\n", 0, limit) + 1 or limit]
    struct = structure(head)
    if not title:
        title = next((h.text for h in struct.headings if h.level == 1 and h.text), "") or stem
    chunks = chunk(head, struct, title)
    if max_chunks is not None and head is not body and len(chunks) <= max_chunks:  # (head is cut only with one)
        head = body
        chunks = chunk(body, structure(body), title)
    if max_chunks is not None and len(chunks) > max_chunks:
        made = f"{len(chunks)}" if head is body else "more than " + f"{len(chunks)}"
        chunks = chunks[:max_chunks]
        kept = sum(len(c.content) for c in chunks)
        first_left = body_first_line + body.count("\n", 0, kept)
        last = body_first_line + body.rstrip("\n").count("\n")
        cut_bytes = len(body[kept:].encode("utf-8", "surrogatepass"))
        warnings.append(
            f"cut: the note makes {made} chunks, more than max_chunks_per_file {max_chunks}; "
            f"indexed the first {max_chunks} (to line {chunks[-1].end_line}); lines {first_left}-"
            f"{last} ({cut_bytes} bytes) are not searchable. Split the note, or raise "
            "[index] max_chunks_per_file"
        )
    return ParsedNote(
        title=title,
        tags=tags,
        date=date,
        frontmatter=front,
        warnings=tuple(warnings),
        chunks=chunks,
        # From the chunks (which hold the body byte for byte), as the migration fills an existing index's links.
        links=links_of_chunks((c.ordinal, c.start_line, c.content) for c in chunks),
    )
