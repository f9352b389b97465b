"""More file types: the parser registry, and .txt / .pdf / .docx / .pptx / .xlsx files written by the
real libraries (tests/support/documents.py), parsed, indexed on a real SQLite index and found by search."""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile

import anyio
import pytest

from groove.config import IndexSettings, ParserSettings
from groove.corpus.chunking import estimate_tokens
from groove.corpus.parsers import ChunkOptions, Parsers
from groove.corpus.scan import NoteReadError
from groove.index import Index
from groove.search.answers import SearchHit
from groove.search.request import SearchRequest
from groove.store.sqlite import reads
from tests.support.common import ROOT, write
from tests.support.documents import docx_bytes, pdf_bytes, pptx_bytes, xlsx_bytes
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, read_status, search_once

FAKE = BagOfWordsEmbedder()
ALL = ["markdown", "txt", "pdf", "docx", "pptx", "xlsx"]
OPTIONS = ChunkOptions(max_tokens=64, min_chunk_tokens=4)


def parse(name: str, source: str | bytes, limits: ParserSettings | None = None, options: ChunkOptions = OPTIONS):
    registry = Parsers(IndexSettings(), limits or ParserSettings(enabled=ALL))
    return registry.parse(name, source, stem=name.rsplit(".", 1)[0], options=options)


def joined(parsed) -> str:
    return "".join(c.content for c in parsed.chunks)


def lines(text: str, first: int, last: int) -> str:
    return "\n".join(text.split("\n")[first - 1:last])


# --- the registry --------------------------------------------------------------------------------

def test_by_default_only_the_markdown_extensions_are_notes():
    registry = Parsers(IndexSettings(), ParserSettings())
    assert registry.extensions == (".md", ".markdown")
    assert registry.kind("a/b.PDF") is None and registry.kind("a/b.txt") is None
    assert registry.kind("Notes/Plan.MD") == "markdown"


def test_enabled_parsers_add_their_extensions_and_an_index_extension_stays_markdown():
    registry = Parsers(IndexSettings(extensions=[".md", ".txt"]), ParserSettings(enabled=["markdown", "txt", "pdf"]))
    assert set(registry.extensions) == {".md", ".txt", ".pdf"}
    assert registry.kind("readme.txt") == "markdown"  # the user's own choice in [index] extensions wins
    assert registry.kind("paper.pdf") == "pdf"
    assert registry.size_limits() == {".pdf": (ParserSettings().max_document_bytes, "[parsers] max_document_bytes")}


def test_an_unknown_parser_name_is_a_configuration_error_that_lists_the_choices(make_settings, kb):
    from groove.config import ConfigError

    with pytest.raises(ConfigError) as err:
        make_settings(kb, **{"parsers.enabled": ["markdown", "odt"]})
    assert "parsers.enabled" in str(err.value) and "pdf" in str(err.value)
    with pytest.raises(ConfigError, match="parsers.enabled"):
        make_settings(kb, **{"parsers.enabled": []})  # nothing to index at all is a mistake, not a setting


# --- .txt ------------------------------------------------------------------------------------------

def test_a_text_file_is_titled_by_its_first_line_and_chunked_at_paragraphs():
    paragraphs = [f"Paragraph {i} about the harbour crane number {i} and its maintenance schedule." * 3 for i in range(6)]
    text = "Harbour maintenance log\r\n\r\n" + "\r\n\r\n".join(paragraphs) + "\r\n"
    parsed = parse("log.txt", text)
    assert parsed.title == "Harbour maintenance log"
    assert len(parsed.chunks) > 1
    assert joined(parsed) == text.replace("\r\n", "\n")  # no byte lost, line numbers are the file's
    for chunk in parsed.chunks:
        assert chunk.content.strip().startswith(("Harbour", "Paragraph"))  # every cut falls at a paragraph
        assert lines(text.replace("\r\n", "\n"), chunk.start_line, chunk.end_line).strip() == chunk.content.strip()
    assert all(c.heading == "" for c in parsed.chunks)


def test_a_text_file_whose_first_line_is_a_whole_paragraph_is_titled_by_its_file_name():
    parsed = parse("field-notes.txt", "word " * 60 + "\n\nSecond paragraph.\n")
    assert parsed.title == "field-notes"


# --- .pdf ------------------------------------------------------------------------------------------

def test_a_pdf_becomes_one_section_per_page_with_its_metadata_and_page_positions():
    data = pdf_bytes(
        [["The glacier retreated two kilometres."], ["Moraine deposits mark the old ice front."], ["Meltwater lakes formed."]],
        title="Glacier survey", author="Sato Hana", created="D:20240315093000Z",
    )
    parsed = parse("survey.pdf", data)
    assert parsed.title == "Glacier survey"
    assert parsed.date == "2024-03-15"
    front = parsed.frontmatter
    assert front["format"] == "pdf" and front["author"] == "Sato Hana" and front["pages"] == 3
    positions = front["groove_positions"]
    assert [p["page"] for p in positions] == [1, 2, 3]
    text = joined(parsed)
    for p, needle in zip(positions, ["glacier retreated", "Moraine deposits", "Meltwater lakes"]):
        assert needle in lines(text, p["start_line"], p["end_line"])
    assert [c.content.count("\n\n") for c in parsed.chunks] == [1, 1, 1]  # one chunk per page, none spans two


def test_pages_past_max_pages_are_left_out_with_a_warning():
    data = pdf_bytes([[f"Page number {i} text."] for i in range(1, 6)])
    parsed = parse("long.pdf", data, ParserSettings(enabled=ALL, max_pages=2))
    assert [p["page"] for p in parsed.frontmatter["groove_positions"]] == [1, 2]
    assert "Page number 3" not in joined(parsed)
    assert parsed.warnings == ("only the first 2 of 5 pages are indexed ([parsers] max_pages)",)


def test_an_encrypted_pdf_is_refused_with_a_reason_that_says_what_to_do():
    data = pdf_bytes([["Secret budget figures."]], password="hunter2")
    with pytest.raises(NoteReadError, match="encrypted PDF: it needs a password to open; save a copy without one"):
        parse("secret.pdf", data)


def test_a_pdf_without_text_is_indexed_with_a_warning_and_no_chunks():
    parsed = parse("scan.pdf", pdf_bytes([[]]))
    assert parsed.chunks == ()
    assert parsed.warnings == ("no text could be extracted (a scanned image, or an empty file?)",)


def test_a_missing_document_library_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pypdf", None)  # `import pypdf` now raises ImportError
    with pytest.raises(NoteReadError) as err:
        parse("paper.pdf", b"%PDF-1.4 whatever")
    assert str(err.value) == "install groove[documents] to index .pdf files (the Python package pypdf is missing)"


# --- .docx -----------------------------------------------------------------------------------------

def test_a_docx_is_cut_at_its_headings_with_a_breadcrumb_and_its_tables_as_rows():
    data = docx_bytes(
        [("p", "Opening remarks before any heading."), ("h1", "Budget"), ("p", "The budget grew by ten percent."),
         ("h2", "Travel"), ("p", "出張費は削減された。"), ("h1", "Staff"), ("p", "Two engineers joined.")],
        title="Annual report", author="Kato", table=[["Item", "Cost"], ["Laptops", "1200"]],
    )
    parsed = parse("report.docx", data, options=ChunkOptions(max_tokens=64, min_chunk_tokens=0))
    assert parsed.title == "Annual report" and parsed.frontmatter["author"] == "Kato"
    by_heading = {c.heading: c for c in parsed.chunks}
    assert set(by_heading) == {"", "Budget", "Travel", "Staff"}
    assert by_heading["Travel"].context == "Annual report > Budget > Travel"
    assert by_heading["Travel"].level == 2 and "出張費" in by_heading["Travel"].content
    assert "Laptops | 1200" in by_heading["Staff"].content  # the table follows the last heading's text
    text = joined(parsed)
    staff = by_heading["Staff"]
    assert lines(text, staff.start_line, staff.end_line).strip() == staff.content.strip()
    assert "groove_positions" not in parsed.frontmatter  # a Word file has no pages to point at


def test_a_docx_without_a_title_property_is_titled_by_its_first_heading():
    parsed = parse("x.docx", docx_bytes([("h1", "Kickoff meeting"), ("p", "Agenda and owners.")]))
    assert parsed.title == "Kickoff meeting"


# --- .pptx -----------------------------------------------------------------------------------------

def test_each_slide_is_a_section_with_its_title_body_and_speaker_notes():
    data = pptx_bytes([("Roadmap", "Ship the search box in May.", "Mention the beta users."),
                       ("Risks", "GPU supply is uncertain.", "")], title="Quarterly review")
    parsed = parse("review.pptx", data)
    assert parsed.title == "Quarterly review" and parsed.frontmatter["slides"] == 2
    assert [c.heading for c in parsed.chunks] == ["Roadmap", "Risks"]
    assert "Mention the beta users." in parsed.chunks[0].content  # speaker notes are searchable
    assert [p["slide"] for p in parsed.frontmatter["groove_positions"]] == [1, 2]
    assert parsed.chunks[1].context == "Quarterly review > Risks"


# --- .xlsx -----------------------------------------------------------------------------------------

def test_sheet_rows_come_in_blocks_that_each_repeat_the_header_and_fit_the_chunk_size():
    rows = [["City", "Population", "Country"]] + [[f"City{i}", 1000 + i, "Japan"] for i in range(60)]
    data = xlsx_bytes({"Cities": rows, "Notes": [["Remark"], ["東京は首都です"]]}, title="Atlas", author="Ito")
    parsed = parse("atlas.xlsx", data)
    cities = [c for c in parsed.chunks if c.heading == "Cities"]
    assert len(cities) > 1
    for chunk in cities:
        assert chunk.content.startswith("City | Population | Country\n")
        assert estimate_tokens(chunk.content.strip()) <= OPTIONS.max_tokens
    positions = [p for p in parsed.frontmatter["groove_positions"] if p["sheet"] == "Cities"]
    assert positions[0]["rows"][0] == 2 and positions[-1]["rows"][1] == 61  # sheet rows, header is row 1
    covered = [r for p in positions for r in range(p["rows"][0], p["rows"][1] + 1)]
    assert covered == list(range(2, 62))  # every data row once, in order
    assert any("東京は首都です" in c.content for c in parsed.chunks)
    assert parsed.frontmatter["sheets"] == ["Cities", "Notes"] and parsed.frontmatter["author"] == "Ito"


def test_rows_past_max_rows_are_left_out_with_a_warning():
    data = xlsx_bytes({"S": [["h"]] + [[f"r{i}"] for i in range(10)]})
    parsed = parse("s.xlsx", data, ParserSettings(enabled=ALL, max_rows=4))
    assert "r2" in joined(parsed) and "r3" not in joined(parsed)
    assert parsed.warnings == ("sheet 'S': only the first 4 non-empty rows are indexed ([parsers] max_rows)",)


def test_an_office_file_that_unpacks_past_the_limit_is_refused_before_it_is_opened():
    data = xlsx_bytes({"S": [["h"], ["x" * 5000]]})
    with pytest.raises(NoteReadError, match=r"unpacks to \d+ bytes > \[parsers\] max_unpacked_bytes 1000"):
        parse("big.xlsx", data, ParserSettings(enabled=ALL, max_unpacked_bytes=1000))


# --- indexed and searched ----------------------------------------------------------------------------

def corpus(kb) -> None:
    write(kb / "note.md", "# Kitchen\n\nSourdough starter feeding schedule.\n")
    write(kb / "docs/plain.txt", "Lighthouse keeper diary\n\nThe foghorn sounded all night.\n")
    (kb / "docs/paper.pdf").write_bytes(pdf_bytes([["Introduction to tides."], ["The quasar spectrum shifted."]],
                                                  title="Paper"))
    (kb / "docs/minutes.docx").write_bytes(docx_bytes([("h1", "Decisions"), ("p", "We adopt the zeppelin plan.")]))
    (kb / "docs/deck.pptx").write_bytes(pptx_bytes([("Intro", "Hello.", ""), ("Results", "The narwhal count doubled.", "")]))
    (kb / "docs/book.xlsx").write_bytes(xlsx_bytes({"Stock": [["Item", "Qty"], ["Bolts", 10], ["Marmalade", 3]]}))


def hits(settings, query: str) -> list[SearchHit]:
    req = SearchRequest(query=query, limit=5, retriever="fts")
    return anyio.run(lambda: search_once(settings, req, embedder=FAKE)).results


def test_every_enabled_file_type_is_indexed_and_found_by_search_with_its_position(kb, make_settings):
    corpus(kb)
    settings = make_settings(kb, **{"parsers.enabled": ALL})
    summary = anyio.run(lambda: index_once(settings, embedder=FAKE))
    assert summary.added == 6 and summary.skipped == 0
    expect = {
        "foghorn": ("docs/plain.txt", None),
        "quasar": ("docs/paper.pdf", {"page": 2}),
        "zeppelin": ("docs/minutes.docx", None),
        "narwhal": ("docs/deck.pptx", {"slide": 2}),
        "Marmalade": ("docs/book.xlsx", {"sheet": "Stock", "rows": [2, 3]}),
        "Sourdough": ("note.md", None),
    }
    for word, (path, position) in expect.items():
        top = hits(settings, word)[0]
        assert (top.path, top.position) == (path, position), word
        assert word in top.content
    minutes = [h for h in hits(settings, "zeppelin") if h.path == "docs/minutes.docx"][0]
    assert minutes.heading == "Decisions"


def test_get_document_returns_a_document_s_extracted_text_and_properties(kb, make_settings):
    corpus(kb)
    settings = make_settings(kb, **{"parsers.enabled": ALL})
    anyio.run(lambda: index_once(settings, embedder=FAKE))

    async def get() -> dict:
        async with Index.open(settings, readonly=True, embedder=FAKE) as index, index.reading() as view:
            return await reads.get_document(view.conn, "docs/paper.pdf")

    doc = anyio.run(get)
    assert doc["title"] == "Paper" and doc["frontmatter"]["format"] == "pdf"
    assert "Introduction to tides." in doc["content"] and "The quasar spectrum shifted." in doc["content"]
    page2 = doc["frontmatter"]["groove_positions"][1]
    assert "quasar" in lines(doc["content"], page2["start_line"], page2["end_line"])


def test_file_types_that_are_not_enabled_are_not_scanned_and_disabling_one_drops_its_files(kb, make_settings):
    corpus(kb)
    settings = make_settings(kb)  # the default: markdown only
    summary = anyio.run(lambda: index_once(settings, embedder=FAKE))
    assert summary.added == 1 and summary.skipped == 0
    assert hits(settings, "quasar") == []
    enabled = make_settings(kb, **{"parsers.enabled": ["markdown", "pdf"]})
    assert anyio.run(lambda: index_once(enabled, embedder=FAKE)).added == 1
    assert hits(enabled, "quasar")[0].path == "docs/paper.pdf"
    assert anyio.run(lambda: index_once(settings, embedder=FAKE)).deleted == 1
    assert hits(settings, "quasar") == []


def test_a_corrupt_file_of_each_type_is_skipped_with_its_reason_and_the_rest_indexes(kb, make_settings):
    write(kb / "good.md", "# Good\n\nThe albatross glides.\n")
    (kb / "bad.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    (kb / "locked.pdf").write_bytes(pdf_bytes([["Secret."]], password="pw"))
    (kb / "bad.docx").write_bytes(b"PK\x03\x04 truncated zip")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("hello.txt", "a zip, but not a presentation")
    (kb / "bad.pptx").write_bytes(buf.getvalue())
    (kb / "bad.xlsx").write_bytes(xlsx_bytes({"S": [["h"], ["v"]]})[:200])
    (kb / "bad.txt").write_bytes(b"not utf-8 \xff\xfe\xff")  # no BOM at the start: a BOM means UTF-16
    settings = make_settings(kb, **{"parsers.enabled": ALL})
    summary = anyio.run(lambda: index_once(settings, embedder=FAKE))
    assert summary.added == 1 and summary.skipped == 6
    reasons = {s.path: s.reason for s in anyio.run(lambda: read_status(settings, embedder=FAKE)).skipped}
    assert reasons["bad.pdf"].startswith("not a readable PDF (")
    assert reasons["locked.pdf"].startswith("encrypted PDF: it needs a password")
    assert reasons["bad.docx"].startswith("not a readable .docx file (its zip container is damaged")
    assert reasons["bad.pptx"].startswith("not a readable .pptx file (")
    assert reasons["bad.xlsx"].startswith("not a readable .xlsx file (its zip container is damaged")
    assert reasons["bad.txt"].startswith("not UTF-8 text")
    assert hits(settings, "albatross")[0].path == "good.md"


def test_documents_have_their_own_byte_limit(kb, make_settings):
    (kb / "paper.pdf").write_bytes(pdf_bytes([["Tiny paper about otters."]]))
    write(kb / "note.md", "# Note\n\n" + "otters " * 400 + "\n")
    size = (kb / "paper.pdf").stat().st_size
    settings = make_settings(kb, **{"parsers.enabled": ["markdown", "pdf"], "index.max_file_bytes": 1000,
                                    "parsers.max_document_bytes": size - 1})
    anyio.run(lambda: index_once(settings, embedder=FAKE))
    reasons = {s.path: s.reason for s in anyio.run(lambda: read_status(settings, embedder=FAKE)).skipped}
    assert reasons == {"note.md": f"too large ({(kb / 'note.md').stat().st_size} bytes > max_file_bytes 1000)",
                       "paper.pdf": f"too large ({size} bytes > [parsers] max_document_bytes {size - 1})"}
    roomy = make_settings(kb, **{"parsers.enabled": ["markdown", "pdf"], "index.max_file_bytes": 1000})
    assert anyio.run(lambda: index_once(roomy, embedder=FAKE)).added == 1  # the PDF is over 1000 bytes too


def test_groove_index_and_search_on_the_command_line_find_a_pdf_page_and_a_slide(spawn, kb, tmp_path):
    (kb / "paper.pdf").write_bytes(pdf_bytes([["Intro page."], ["Photosynthesis converts light into sugar."]]))
    (kb / "deck.pptx").write_bytes(pptx_bytes([("Harvest", "Rice terraces in autumn.", "")]))
    config = tmp_path / "groove.toml"
    config.write_text('[parsers]\nenabled = ["markdown", "pdf", "pptx"]\n', encoding="utf-8")
    base = [sys.executable, "-m", "groove.cli"]
    common = ["--config", str(config), "--kb", str(kb), "--index", str(tmp_path / "cli.sqlite")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = spawn.run(base + ["index", *common, "--format", "json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stdout)["added"] == 2
    found = spawn.run(base + ["search", "Photosynthesis", *common, "--format", "json"], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=True)
    top = json.loads(found.stdout)["results"][0]
    assert (top["path"], top["position"]) == ("paper.pdf", {"page": 2})
    text = spawn.run(base + ["search", "rice terraces", *common], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    assert "] deck.pptx" in text.stdout and " · slide 1" in text.stdout  # "[n] deck.pptx § ...", "lines 1-3 · slide 1"


async def test_the_watcher_picks_up_an_enabled_document_dropped_into_the_folder_and_ignores_a_disabled_one(
        kb, make_settings):
    from groove.daemon import Daemon
    from tests.support.common import eventually

    write(kb / "base.md", "# Base\n\nA note about bread.\n")
    settings = make_settings(kb, **{"watch.debounce_ms": 50, "parsers.enabled": ["markdown", "pdf"]})
    daemon = Daemon(settings, embedder=BagOfWordsEmbedder())

    async def paths(query: str) -> list[str]:
        resp = await daemon.service.search(SearchRequest(query=query, limit=5, retriever="fts"))
        return [r.path for r in resp.results]

    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        with anyio.fail_after(60):
            await daemon.reconciled.wait()
        try:
            (kb / "ignored.docx").write_bytes(docx_bytes([("p", "The pelican report is not enabled.")]))
            (kb / "new.pdf").write_bytes(pdf_bytes([["Cover."], ["The pelican census counted forty birds."]]))

            async def found() -> bool:
                return "new.pdf" in await paths("pelican")

            await eventually(found, "the dropped PDF to be indexed by the watcher")
            resp = await daemon.service.search(SearchRequest(query="pelican census", limit=5, retriever="fts"))
            assert [(r.path, r.position) for r in resp.results] == [("new.pdf", {"page": 2})]
            status = await daemon.service.status()
            assert status.documents == 2 and status.skipped == []  # the .docx is not even looked at
        finally:
            daemon.stop()


async def test_an_mcp_client_finds_a_pdf_page_and_reads_its_text_over_stdio(real_model, spawn, tmp_path):
    import mcp_types as types
    from mcp import Client

    from groove.config import load_settings
    from groove.serve.mcp.server import note_uri
    from tests.support.server import serve_argv, server_env

    kb = tmp_path / "notes"
    write(kb / "note.md", "# Note\n\nA note about kelp forests.\n")
    (kb / "paper.pdf").write_bytes(pdf_bytes([["Abstract."], ["The quasar spectrum shifted to the red."]], title="Paper"))
    config = tmp_path / "groove.toml"
    config.write_text('[parsers]\nenabled = ["markdown", "pdf"]\n', encoding="utf-8")
    index = tmp_path / "index.sqlite"
    await index_once(load_settings(config, kb_path=kb, index_path=index))
    argv = serve_argv(kb, index, "--transport", "stdio", "--config", str(config))
    params = spawn.stdio(command=argv[0], args=argv[1:], env=server_env(tmp_path), cwd=str(tmp_path))
    with anyio.fail_after(120):
        async with Client(params) as client:
            found = await client.call_tool("search", {"query": "quasar spectrum", "limit": 3})
            text = "".join(c.text for c in found.content if isinstance(c, types.TextContent))
            assert not found.is_error, text
            top = found.structured_content["results"][0]
            assert (top["path"], top["position"], top["title"]) == ("paper.pdf", {"page": 2}, "Paper")
            doc = (await client.call_tool("get_document", {"path": "paper.pdf"})).structured_content
            assert "The quasar spectrum shifted to the red." in doc["content"] and doc["frontmatter"]["pages"] == 2
            read = await client.read_resource(note_uri("paper.pdf"))
            assert read.contents[0].mime_type == "text/plain" and "quasar" in read.contents[0].text
            note = await client.read_resource(note_uri("note.md"))
            assert note.contents[0].mime_type == "text/markdown"
