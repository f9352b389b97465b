"""`.pptx` (python-pptx): one section per slide (title, text frames, tables, speaker notes), `{"slide": n}`."""

from __future__ import annotations

import io
from typing import Any

from groove.config import ParserSettings
from groove.corpus.markdown import ParsedNote
from groove.corpus.parsers.document import ChunkOptions, Section, build_note, clean, core_frontmatter, open_zip, require
from groove.corpus.scan import NoteReadError


def _shape_texts(shapes: Any, skip: Any) -> list[str]:  # python-pptx's types, imported lazily
    out = []
    for shape in shapes:
        if shape is skip:
            continue
        if getattr(shape, "shape_type", None) == 6 and hasattr(shape, "shapes"):  # a group
            out += _shape_texts(shape.shapes, skip)
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            text = clean(shape.text_frame.text).strip()
            if text:
                out.append(text)
        elif getattr(shape, "has_table", False) and shape.has_table:
            rows = [" | ".join(" ".join(clean(c.text).split()) for c in row.cells) for row in shape.table.rows]
            rows = [r for r in rows if r.strip(" |")]
            if rows:
                out.append("\n".join(rows))
    return out


def parse_pptx(data: bytes, *, stem: str, options: ChunkOptions, limits: ParserSettings) -> ParsedNote:
    open_zip(data, ".pptx", limits.max_unpacked_bytes)
    pptx = require("pptx", ".pptx", "python-pptx")
    warnings: list[str] = []
    try:
        prs = pptx.Presentation(io.BytesIO(data))
        front = core_frontmatter("pptx", prs.core_properties)
        slides = list(prs.slides)
        sections = []
        for n, slide in enumerate(slides[: limits.max_slides], 1):
            title_shape = slide.shapes.title
            title = clean(title_shape.text).strip() if title_shape is not None and title_shape.has_text_frame else ""
            parts = ([title] if title else []) + _shape_texts(slide.shapes, title_shape)
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = clean(slide.notes_slide.notes_text_frame.text).strip()
                if notes:
                    parts.append(notes)
            sections.append(
                Section(
                    heading=" ".join(title.split()),
                    level=1 if title else 0,
                    text="\n\n".join(parts),
                    position={"slide": n},
                )
            )
    except NoteReadError:
        raise
    except Exception as exc:  # a zip that is not a presentation, broken XML, ...
        raise NoteReadError(f"not a readable .pptx file ({type(exc).__name__}: {exc})") from exc
    if len(slides) > limits.max_slides:
        warnings.append(
            f"only the first {limits.max_slides} of {len(slides)} slides are indexed ([parsers] max_slides)"
        )
    front["slides"] = len(slides)
    first_title = next((s.heading for s in sections if s.heading), "")
    return build_note(
        title=front.get("title") or first_title or stem,
        sections=sections,
        frontmatter=front,
        warnings=warnings,
        options=options,
    )
