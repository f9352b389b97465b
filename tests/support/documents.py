"""Real document files for the parser tests, written by the libraries groove reads them with.

pypdf cannot lay out text, so `pdf_bytes` writes a small valid PDF by hand (one
content stream of Helvetica text per page) and hands it to pypdf's writer,
which adds the metadata (and the encryption, when asked) and writes a proper
cross-reference table. python-docx, python-pptx and openpyxl write their own.
"""

from __future__ import annotations

import io
from typing import Sequence


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def _raw_pdf(pages: Sequence[Sequence[str]]) -> bytes:
    objects: list[str] = []
    n = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    font = 3 + 2 * n
    objects.append("<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>")
    for i, lines in enumerate(pages):
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in lines:
            ops.append(f"{_pdf_string(line)} Tj T*")
        ops.append("ET")
        stream = "\n".join(ops)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R"
            f" /Resources << /Font << /F1 {font} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream.encode('latin-1'))} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for num, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{num} 0 obj\n{body}\nendobj\n".encode("latin-1"))
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def pdf_bytes(pages: Sequence[Sequence[str]], *, title: str | None = None, author: str | None = None,
              created: str | None = None, password: str | None = None) -> bytes:
    """A real PDF: each page a list of text lines; metadata and encryption through pypdf's writer."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_raw_pdf(pages))))
    meta = {}
    if title:
        meta["/Title"] = title
    if author:
        meta["/Author"] = author
    if created:
        meta["/CreationDate"] = created  # e.g. "D:20240315093000Z"
    if meta:
        writer.add_metadata(meta)
    if password:
        writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def docx_bytes(blocks: Sequence[tuple[str, str]], *, title: str | None = None, author: str | None = None,
               table: Sequence[Sequence[str]] | None = None) -> bytes:
    """blocks: ("h1" | "h2" | "h3" | "p", text) in order; an optional table at the end."""
    import docx

    doc = docx.Document()
    if title:
        doc.core_properties.title = title
    if author:
        doc.core_properties.author = author
    for kind, text in blocks:
        if kind.startswith("h"):
            doc.add_heading(text, level=int(kind[1:]))
        else:
            doc.add_paragraph(text)
    if table:
        t = doc.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                t.cell(r, c).text = value
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def pptx_bytes(slides: Sequence[tuple[str, str, str]], *, title: str | None = None) -> bytes:
    """slides: (title, body, speaker notes); '' leaves a part out."""
    from pptx import Presentation

    prs = Presentation()
    if title:
        prs.core_properties.title = title
    layout = prs.slide_layouts[1]  # title and content
    for head, body, notes in slides:
        slide = prs.slides.add_slide(layout)
        if head:
            slide.shapes.title.text = head
        if body:
            slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def xlsx_bytes(sheets: dict[str, Sequence[Sequence[object]]], *, title: str | None = None,
               author: str | None = None) -> bytes:
    """sheets: name -> rows (the first row is the header)."""
    import openpyxl

    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    if title:
        wb.properties.title = title
    if author:
        wb.properties.creator = author
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(list(row))
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()
