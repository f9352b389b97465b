"""What every non-Markdown parser shares: sections in, a `ParsedNote` out; lazy imports; zip checks.

A parser turns a file into :class:`Section` s in reading order (a PDF page, a
slide, a block of sheet rows, a DOCX heading's section) and hands them to
:func:`build_note`. The *extracted text* of the file is the sections' texts
joined, each ending in one blank line; chunk line numbers count lines of that
text, which is what ``get_document`` returns (the chunks joined in order).
Each section is chunked on its own (paragraph boundaries first, then lines,
sentences, hard cuts: the Markdown chunker's rules 4-5), so no chunk spans two
pages, slides or row blocks, and every chunk carries its section's position.
The positions are kept per document in ``frontmatter["groove_positions"]``
(``[{"start_line", "end_line", "page" | "slide" | "sheet" + "rows"}, ...]``):
a JSON field the index already has, so the schema does not change.
"""

from __future__ import annotations

import importlib
import io
import zipfile
from dataclasses import dataclass, replace
from datetime import date, datetime
from types import ModuleType
from typing import Any

from groove.corpus.blocks import Structure
from groove.corpus.chunking import Chunk, TokenCounter, chunk_body, estimate_tokens, split_lines
from groove.corpus.markdown import ParsedNote, normalise_text
from groove.corpus.scan import NoteReadError

POSITIONS_KEY = "groove_positions"


@dataclass(frozen=True)
class ChunkOptions:
    """The chunker's knobs, as the indexer passes them."""

    max_tokens: int = 256
    min_chunk_tokens: int = 32
    split_levels: int = 3
    count_tokens: TokenCounter = estimate_tokens
    max_chunks: int | None = None  # [index] max_chunks_per_file
    max_frontmatter_bytes: int | None = None  # [index] max_frontmatter_bytes (Markdown only)


@dataclass(frozen=True)
class Section:
    """One natural unit of a document, in reading order."""

    heading: str  # '' when the unit has none (a PDF page)
    level: int  # 1..6 for a heading, 0 otherwise
    text: str
    position: dict[str, Any] | None = None  # {"page": 3}, {"slide": 2}, {"sheet": "Budget", "rows": [2, 40]}
    parents: tuple[str, ...] = ()  # headings above this one (DOCX), for the context breadcrumb


def require(module: str, ext: str, package: str) -> ModuleType:
    """Import an optional document library, or say how to install it (the file's skip reason)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise NoteReadError(
            f"install groove[documents] to index {ext} files (the Python package {package} is missing)"
        ) from exc


def open_zip(data: bytes, ext: str, max_unpacked_bytes: int) -> None:
    """Check an Office file's zip container before a library unpacks it: damaged, or a zip bomb."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            unpacked = sum(i.file_size for i in zf.infolist())
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as exc:
        raise NoteReadError(f"not a readable {ext} file (its zip container is damaged: {exc})") from exc
    if unpacked > max_unpacked_bytes:
        raise NoteReadError(
            f"{ext} file unpacks to {unpacked} bytes > [parsers] max_unpacked_bytes {max_unpacked_bytes}"
        )


def clean(text: str) -> str:
    """Text from a library, made safe to index: LF line ends, no NUL or other C0 controls but tab."""
    text = normalise_text(text or "")
    return "".join(c for c in text if c in "\n\t" or c >= " ")


def iso(value: Any) -> str | None:
    """A core-property date as ISO text (None when absent)."""
    if isinstance(value, datetime):
        return value.replace(microsecond=0).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return None


def core_frontmatter(fmt: str, props: Any) -> dict[str, Any]:
    """title / author / created / modified from Office core properties (or PDF metadata), where set."""
    front: dict[str, Any] = {"format": fmt}
    for key, attrs in (
        ("title", ("title",)),
        ("author", ("author", "creator")),
        ("subject", ("subject",)),
        ("keywords", ("keywords",)),
    ):
        for attr in attrs:  # openpyxl calls the author `creator`
            value = getattr(props, attr, None)
            if isinstance(value, str) and value.strip():
                front[key] = clean(value).strip()
                break
    for key in ("created", "modified"):
        value = iso(getattr(props, key, None))
        if value:
            front[key] = value
    return front


def paragraph_structure(text: str) -> Structure:
    """Plain text's block structure: a block starts at each non-blank line after a blank one."""
    starts: set[int] = set()
    blank = True
    for i, line in enumerate(split_lines(text)):
        if line.strip():
            if blank:
                starts.add(i)
            blank = False
        else:
            blank = True
    return Structure((), frozenset(starts), frozenset())


def _context(title: str, parents: tuple[str, ...], heading: str) -> str:
    parts = [title.strip()]
    for p in (*parents, heading):
        if p and p.strip().casefold() != title.strip().casefold():
            parts.append(p.strip())
    return " > ".join(p for p in parts if p)


def build_note(
    *,
    title: str,
    sections: list[Section],
    frontmatter: dict[str, Any],
    warnings: list[str],
    options: ChunkOptions,
) -> ParsedNote:
    """Chunk each section on its own and number the lines of the joined extracted text; the note's date
    is the day of the document's `created` property, where `core_frontmatter` found one."""
    chunks: list[Chunk] = []
    positions: list[dict[str, Any]] = []
    line = 1
    for sec in sections:
        body = clean(sec.text).strip("\n")
        if not body.strip():
            continue
        body = "\n".join(row.rstrip() for row in body.split("\n")) + "\n\n"
        pieces = chunk_body(
            body,
            paragraph_structure(body),
            title=title,
            body_first_line=line,
            split_levels=1,
            max_tokens=options.max_tokens,
            min_chunk_tokens=options.min_chunk_tokens,
            count_tokens=options.count_tokens,
        )
        context = _context(title, sec.parents, sec.heading)
        for piece in pieces:
            chunks.append(replace(piece, ordinal=len(chunks), heading=sec.heading, level=sec.level, context=context))
        lines = body.count("\n")
        if sec.position:
            positions.append({"start_line": line, "end_line": line + lines - 1, **sec.position})
        line += lines
    if not chunks:
        warnings.append("no text could be extracted (a scanned image, or an empty file?)")
    front = dict(frontmatter)
    if positions:
        front[POSITIONS_KEY] = positions
    return ParsedNote(
        title=title,
        tags=(),
        date=frontmatter["created"][:10] if frontmatter.get("created") else None,
        frontmatter=front,
        warnings=tuple(warnings),
        chunks=tuple(chunks),
    )


def position_of(positions: Any, start_line: int) -> dict[str, Any] | None:
    """The position (page / slide / sheet rows) of the chunk that starts at `start_line`, from a
    document's stored ``groove_positions``; None for a note without them or a malformed value."""
    if not isinstance(positions, list):
        return None
    for entry in positions:
        if not isinstance(entry, dict):
            return None
        first, last = entry.get("start_line"), entry.get("end_line")
        if not (isinstance(first, int) and isinstance(last, int)):
            return None
        if first <= start_line <= last:
            return {k: v for k, v in entry.items() if k not in ("start_line", "end_line")} or None
    return None
