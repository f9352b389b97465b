"""`.txt`: plain text, chunked at paragraphs (blank lines); title from the first line, else the file name."""

from __future__ import annotations

from groove.corpus.chunking import chunk_body
from groove.corpus.markdown import ParsedNote, normalise_text, nul_warning
from groove.corpus.parsers.document import ChunkOptions, paragraph_structure

MAX_TITLE_CHARS = 120


def parse_txt(text: str, *, stem: str, options: ChunkOptions) -> ParsedNote:
    """The whole file is one section (heading ''); oversized runs are cut at paragraphs, then lines,
    sentences; tiny paragraphs join a neighbour. Line numbers are the file's own."""
    body = normalise_text(text)
    first = next((line.strip() for line in body.split("\n") if line.strip()), "")
    title = first if len(first) <= MAX_TITLE_CHARS else ""
    title = title or stem
    chunks = chunk_body(
        body,
        paragraph_structure(body),
        title=title,
        body_first_line=1,
        split_levels=1,
        max_tokens=options.max_tokens,
        min_chunk_tokens=options.min_chunk_tokens,
        count_tokens=options.count_tokens,
    )
    warnings = (w,) if (w := nul_warning(text)) else ()
    return ParsedNote(title=title, tags=(), date=None, frontmatter={}, warnings=warnings, chunks=chunks)
