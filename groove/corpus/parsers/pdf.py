"""`.pdf` (pypdf): one section per page, the position `{"page": n}`; metadata title/author/dates."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from groove.config import ParserSettings
from groove.corpus.markdown import ParsedNote
from groove.corpus.parsers.document import ChunkOptions, Section, build_note, clean, core_frontmatter, require
from groove.corpus.scan import NoteReadError


class _Meta:
    """pypdf's DocumentInformation under the core-property names the other formats use."""

    def __init__(self, info: Any) -> None:  # pypdf's DocumentInformation, imported lazily
        self.title = info.title if info else None
        self.author = info.author if info else None
        self.subject = info.subject if info else None
        self.keywords = None
        self.created = _safe(lambda: info.creation_date) if info else None
        self.modified = _safe(lambda: info.modification_date) if info else None


def _safe(get: Callable[[], Any]) -> Any:  # a malformed date in the metadata is not worth a skip
    try:
        return get()
    except Exception:  # noqa: BLE001 - pypdf raises many kinds for a malformed field: no value
        return None


def parse_pdf(data: bytes, *, stem: str, options: ChunkOptions, limits: ParserSettings) -> ParsedNote:
    pypdf = require("pypdf", ".pdf", "pypdf")
    warnings: list[str] = []
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")  # many PDFs are encrypted with an empty user password
            except Exception:  # noqa: BLE001 - an unsupported cipher is as unreadable as a password
                opened = 0
            if not opened:
                raise NoteReadError("encrypted PDF: it needs a password to open; save a copy without one to index it")
        pages = reader.pages
        total = len(pages)
        if total == 0:
            raise NoteReadError("not a readable PDF (no pages found: is the file damaged or cut short?)")
        sections = []
        for n in range(min(total, limits.max_pages)):
            sections.append(
                Section(heading="", level=0, text=clean(pages[n].extract_text() or ""), position={"page": n + 1})
            )
        meta = _Meta(_safe(lambda: reader.metadata))
    except NoteReadError:
        raise
    except Exception as exc:  # pypdf raises many kinds for a damaged file
        raise NoteReadError(f"not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if total > limits.max_pages:
        warnings.append(f"only the first {limits.max_pages} of {total} pages are indexed ([parsers] max_pages)")
    front = core_frontmatter("pdf", meta)
    front["pages"] = total
    return build_note(
        title=front.get("title") or stem,
        sections=sections,
        frontmatter=front,
        warnings=warnings,
        options=options,
    )
