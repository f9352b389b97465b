"""The parser registry: which files are indexed, and how each kind becomes a `ParsedNote`.

The registry is the source of truth for the extensions groove scans and watches:

- ``markdown`` (the default) owns the extensions in ``[index] extensions``
  (``.md``, ``.markdown``): the Markdown path (``corpus/markdown.py``);
- ``txt`` (built in), ``pdf``, ``docx``, ``pptx``, ``xlsx`` own ``.txt``,
  ``.pdf``, ... when named in ``[parsers] enabled``. The four document formats
  need the optional libraries (``pip install 'groove[documents]'``: pypdf,
  python-docx, python-pptx, openpyxl), imported only when such a file is read;
  without them the file is skipped with the reason "install groove[documents]
  to index .pdf files ...".

An extension listed in ``[index] extensions`` stays Markdown even when an
enabled parser also claims it (a user who put ``.txt`` there keeps what they had).
Document files have their own byte limit (``[parsers] max_document_bytes``);
Markdown and text files keep ``[index] max_file_bytes``. A file that cannot be
read raises :class:`NoteReadError` whose message is the skip reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from groove.config import IndexSettings, ParserSettings
from groove.corpus.markdown import ParsedNote, parse_note
from groove.corpus.parsers.document import POSITIONS_KEY, ChunkOptions, position_of
from groove.corpus.scan import FileInfo, NoteReadError, read_bytes, read_note

__all__ = ["DOCUMENT_EXTENSIONS", "POSITIONS_KEY", "ChunkOptions", "Parsers", "position_of"]

# The extensions each parser besides Markdown owns.
EXTENSIONS: dict[str, tuple[str, ...]] = {
    "txt": (".txt",),
    "pdf": (".pdf",),
    "docx": (".docx",),
    "pptx": (".pptx",),
    "xlsx": (".xlsx",),
}
BINARY = frozenset({"pdf", "docx", "pptx", "xlsx"})
DOCUMENT_EXTENSIONS = tuple(e for name in sorted(BINARY) for e in EXTENSIONS[name])


def _document_parser(name: str) -> Callable[..., ParsedNote]:
    # Imported on use: a document module is only loaded when such a file is parsed.
    if name == "pdf":
        from groove.corpus.parsers.pdf import parse_pdf as fn
    elif name == "docx":
        from groove.corpus.parsers.docx import parse_docx as fn
    elif name == "pptx":
        from groove.corpus.parsers.pptx import parse_pptx as fn
    else:
        from groove.corpus.parsers.xlsx import parse_xlsx as fn
    return fn


class Parsers:
    """The enabled parsers of one index: extension -> parser name, reading and parsing by kind."""

    def __init__(self, index: IndexSettings, parsers: ParserSettings | None = None) -> None:
        self.limits = parsers or ParserSettings()
        self.by_extension: dict[str, str] = {}
        enabled = list(dict.fromkeys(self.limits.enabled))
        if "markdown" in enabled:
            for ext in index.extensions:
                self.by_extension[ext.lower()] = "markdown"
        for name in enabled:
            for ext in EXTENSIONS.get(name, ()):
                self.by_extension.setdefault(ext, name)

    @property
    def extensions(self) -> tuple[str, ...]:
        """Every extension scanned and watched (lower case)."""
        return tuple(self.by_extension)

    def kind(self, rel: str) -> str | None:
        """The parser for a path (its longest matching extension), None when no parser takes it."""
        low = rel.lower()
        best = max((e for e in self.by_extension if low.endswith(e)), key=len, default=None)
        return self.by_extension[best] if best is not None else None

    def size_limits(self) -> dict[str, tuple[int, str]]:
        """extension -> (largest file accepted, the setting's name) for the file types with their own limit
        (documents); the others keep `[index] max_file_bytes`."""
        return {
            e: (self.limits.max_document_bytes, "[parsers] max_document_bytes")
            for e, k in self.by_extension.items()
            if k in BINARY
        }

    def read(self, info: FileInfo, max_file_bytes: int) -> tuple[str | bytes, str]:
        """The file's content (text, or bytes for a document) and the sha256 of its bytes."""
        if self.kind(info.rel) not in BINARY:
            return read_note(info, max_file_bytes)
        limit = self.limits.max_document_bytes
        # Opened as a note is (groove/corpus/scan.py): regular files only, without blocking, capped.
        try:
            data = read_bytes(info.path, limit)
        except NoteReadError as exc:
            raise NoteReadError(str(exc).replace("max_file_bytes", "[parsers] max_document_bytes")) from None
        return data, hashlib.sha256(data).hexdigest()

    def parse(self, rel: str, source: str | bytes, *, stem: str, options: ChunkOptions) -> ParsedNote:
        """Parse what `read` returned; NoteReadError (the skip reason) when the file cannot be read."""
        kind = self.kind(rel)
        if kind in BINARY:
            assert isinstance(source, bytes)
            return _document_parser(kind)(source, stem=stem, options=options, limits=self.limits)
        assert isinstance(source, str)
        if kind == "txt":
            from groove.corpus.parsers.txt import parse_txt

            return parse_txt(source, stem=stem, options=options)
        return parse_note(
            source,
            stem=stem,
            split_levels=options.split_levels,
            max_tokens=options.max_tokens,
            min_chunk_tokens=options.min_chunk_tokens,
            count_tokens=options.count_tokens,
            max_chunks=options.max_chunks,
            max_frontmatter_bytes=options.max_frontmatter_bytes,
        )
