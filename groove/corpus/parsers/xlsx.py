"""`.xlsx` (openpyxl): each sheet's rows in blocks that fit a chunk, the header row repeated at the top
of every block; the position `{"sheet": name, "rows": [first, last]}` (1-based sheet rows)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from datetime import date, datetime, time

from groove.config import ParserSettings
from groove.corpus.markdown import ParsedNote
from groove.corpus.parsers.document import ChunkOptions, Section, build_note, clean, core_frontmatter, open_zip, require
from groove.corpus.scan import NoteReadError


def _cell(value: object) -> str:  # a cell's value as openpyxl reads it
    if value is None:
        return ""
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return " ".join(clean(str(value)).split())


def _row_text(values: Iterable[object]) -> str:
    cells = [_cell(v) for v in values]
    while cells and not cells[-1]:
        cells.pop()
    return " | ".join(cells)


def _blocks(sheet: str, rows: list[tuple[int, str]], options: ChunkOptions) -> list[Section]:
    """Header row + as many following rows as fit max_tokens, per block."""
    count = options.count_tokens
    if not rows:
        return []
    header_no, header = rows[0]
    data = rows[1:]
    if not data:
        return [Section(heading=sheet, level=1, text=header, position={"sheet": sheet, "rows": [header_no, header_no]})]
    sections: list[Section] = []
    block: list[tuple[int, str]] = []

    def flush() -> None:
        if block:
            text = "\n".join([header] + [t for _, t in block])
            sections.append(
                Section(
                    heading=sheet, level=1, text=text, position={"sheet": sheet, "rows": [block[0][0], block[-1][0]]}
                )
            )

    size = count(header)
    for no, text in data:
        cost = count(text) + 1
        if block and size + cost > options.max_tokens:
            flush()
            block, size = [], count(header)
        block.append((no, text))
        size += cost
    flush()
    return sections


def parse_xlsx(data: bytes, *, stem: str, options: ChunkOptions, limits: ParserSettings) -> ParsedNote:
    open_zip(data, ".xlsx", limits.max_unpacked_bytes)
    openpyxl = require("openpyxl", ".xlsx", "openpyxl")
    warnings: list[str] = []
    sections: list[Section] = []
    try:
        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            front = core_frontmatter("xlsx", wb.properties)
            names = []
            for ws in wb.worksheets:
                if not hasattr(ws, "iter_rows"):
                    continue  # a chart sheet
                names.append(ws.title)
                rows: list[tuple[int, str]] = []
                for no, values in enumerate(ws.iter_rows(values_only=True), 1):
                    text = _row_text(values)
                    if not text:
                        continue
                    if len(rows) == limits.max_rows:  # stop reading: a huge sheet costs no more than max_rows
                        warnings.append(
                            f"sheet {ws.title!r}: only the first {limits.max_rows} non-empty rows"
                            " are indexed ([parsers] max_rows)"
                        )
                        break
                    rows.append((no, text))
                sections += _blocks(ws.title, rows, options)
        finally:
            wb.close()
    except NoteReadError:
        raise
    except Exception as exc:  # a zip that is not a workbook, broken XML, ...
        raise NoteReadError(f"not a readable .xlsx file ({type(exc).__name__}: {exc})") from exc
    front["sheets"] = names
    return build_note(
        title=front.get("title") or stem,
        sections=sections,
        frontmatter=front,
        warnings=warnings,
        options=options,
    )
