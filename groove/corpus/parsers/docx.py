"""`.docx` (python-docx): cut before each heading of level <= split_levels; tables as ` | ` rows."""

from __future__ import annotations

import io
import re
from typing import Any

from groove.config import ParserSettings
from groove.corpus.markdown import ParsedNote
from groove.corpus.parsers.document import ChunkOptions, Section, build_note, clean, core_frontmatter, open_zip, require
from groove.corpus.scan import NoteReadError

_HEADING = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def _level(paragraph: Any) -> int:  # python-docx's Paragraph, imported lazily
    """1..9 for a Heading N paragraph, 0 for any other (a missing style is body text)."""
    try:
        name = paragraph.style.name if paragraph.style is not None else ""
    except Exception:  # noqa: BLE001 - a style python-docx cannot read is body text, not a failed file
        return 0
    m = _HEADING.match((name or "").strip())
    return int(m.group(1)) if m else 0


def _table_text(table: Any) -> str:  # python-docx's Table
    rows = []
    for row in table.rows:
        cells = [" ".join(clean(c.text).split()) for c in row.cells]
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def parse_docx(data: bytes, *, stem: str, options: ChunkOptions, limits: ParserSettings) -> ParsedNote:
    open_zip(data, ".docx", limits.max_unpacked_bytes)
    docx = require("docx", ".docx", "python-docx")
    from docx.table import Table  # lazily, with the package

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(document.iter_inner_content())
        props = document.core_properties
        front = core_frontmatter("docx", props)
    except Exception as exc:  # a zip that is not a Word document, broken XML, ...
        raise NoteReadError(f"not a readable .docx file ({type(exc).__name__}: {exc})") from exc

    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    heading, level = "", 0
    parents: tuple[str, ...] = ()
    lines: list[str] = []

    def close() -> None:
        if lines:
            sections.append(Section(heading=heading, level=level, text="\n\n".join(lines), parents=parents))

    first_heading = ""
    for block in blocks:
        if isinstance(block, Table):
            text = _table_text(block)
            if text:
                lines.append(text)
            continue
        text = clean(block.text).strip()
        if not text:
            continue
        n = _level(block)
        if n and not first_heading:
            first_heading = text
        if n and n <= options.split_levels:
            close()
            while stack and stack[-1][0] >= n:
                stack.pop()
            parents = tuple(t for _, t in stack)
            stack.append((n, text))
            heading, level, lines = text, n, [text]
            continue
        lines.append(text)
    close()
    return build_note(
        title=front.get("title") or first_heading or stem,
        sections=sections,
        frontmatter=front,
        warnings=[],
        options=options,
    )
