"""Headings without markup (issue 37, point 5): raw HTML in headings, as docs trees write anchors.

`## <a name="provider-name"></a>Provider name` reads `Provider name` in every hit's heading and context
(breadcrumb), in get_document's list of what it left out, on the command line, over MCP and in the web view;
the anchor still names the section (`cert.md#provider-name`). A read with max_chars holds the answer's own
lines too. Real files and a real SQLite index (the bag-of-words fake embedder: this is about text, not the
model), the service every front end calls, a `groove serve` subprocess with a real MCP client, and `groove`
commands as processes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest

from groove.api.answers import document_text
from groove.api.service import DocumentRequest, LinksRequest, SearchRequest, Service
from groove.config import load_settings
from groove.corpus import markdown
from groove.corpus.blocks import plain_heading
from groove.corpus.markdown import parse_note
from groove.index import Index
from groove.search.compiler import QueryError
from groove.store.sqlite import connection
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once
from tests.support.server import FAKE_GROOVE, server_env

SECTIONS = 40


def _anchor_note() -> str:
    """A page of a docs tree (as the PowerShell docs write them): an anchor before every heading's text."""
    parts = ['# <a name="certificate-provider"></a>Certificate provider\n\n',
             "The provider exposes the certificate store as a drive. It reads the stores of this machine.\n\n"]
    for i in range(SECTIONS):
        parts.append(f'## <a name="param-{i}"></a>Parameter number {i}\n\n'
                     f"Text of parameter {i}: what it takes and when to use it. It matters in scripts that run "
                     "unattended, where a wrong value stops the whole job before it has done anything useful.\n\n")
    parts.append('## <a name="thumbprint"></a>The <code>Thumbprint</code> <span class="x">value</span>\n\n'
                 "The zebrafinch thumbprint names one certificate in the store. Two certificates never share one, so a "
                 "script can find the certificate it signs with by this value alone, on any machine.\n\n")
    parts.append("## Escaped \\<String\\> and `<div>` stay\n\nText about the quokkaword types. A heading may name a "
                 "type in angle brackets, escaped so that no renderer reads it as a tag, and that stays as written.\n")
    return "".join(parts)


NOTES = {
    "cert.md": _anchor_note(),
    "guide.md": '# <a id="guide">Reading guide</a>\n\nSee [the thumbprint](cert.md#thumbprint) and '
                "[[cert#param-7]] for the details.\n",
}


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("heading-markup")
    kb = root / "notes"
    for rel, text in NOTES.items():
        write(kb / rel, text)
    index = root / "index.sqlite"
    with pytest.MonkeyPatch.context() as mp:  # the module fixture runs before conftest's per-test isolation
        for name in [n for n in os.environ if n.startswith("GROOVE_")]:
            mp.delenv(name)
        mp.setenv("XDG_CONFIG_HOME", str(root / "config"))
        mp.setenv("XDG_DATA_HOME", str(root / "data"))
        anyio.run(lambda: index_once(load_settings(None, kb_path=kb, index_path=index), embedder=BagOfWordsEmbedder()))
    return {"root": root, "kb": kb, "index": index}


async def _service(vault: dict[str, Path], work) -> Any:
    settings = load_settings(None, kb_path=vault["kb"], index_path=vault["index"])
    async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as index:
        return await work(Service(index))


# --- the parser ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, text, anchors", [
    ('<a name="foo"></a>Title', "Title", ("foo",)),
    ('<a id="x">Title</a> more', "Title more", ("x",)),
    ('<a name="installing"></a><a id="msix" />Microsoft Store', "Microsoft Store", ("installing", "msix")),
    ("Line<br>break <!-- a comment --> here", "Line break here", ()),
    ("The `<div>` element", "The `<div>` element", ()),  # a code span is text
    ("Address \\<String\\>", "Address \\<String\\>", ()),  # escaped: no tag
    ("EKU <System.string>", "EKU <System.string>", ()),  # `System.string` is no tag name
    ("<https://example.org> site", "<https://example.org> site", ()),  # an autolink is no tag
    ("a < b and c > d", "a < b and c > d", ()),
    ("Plain heading", "Plain heading", ()),
])
def test_a_heading_loses_its_html_tags_keeps_their_text_and_remembers_their_anchors(raw, text, anchors):
    assert plain_heading(raw) == (text, anchors)


def test_chunks_carry_plain_headings_and_breadcrumbs_while_their_text_stays_byte_for_byte():
    parsed = parse_note(NOTES["cert.md"], stem="cert", max_tokens=64, min_chunk_tokens=0)
    assert parsed.title == "Certificate provider"
    assert "".join(c.content for c in parsed.chunks) == NOTES["cert.md"]  # what is embedded: unchanged
    for chunk in parsed.chunks:
        assert "<a" not in chunk.heading and "<a" not in chunk.context and "<span" not in chunk.context
    by_heading = {c.heading: c for c in parsed.chunks}
    assert by_heading["Parameter number 7"].context == "Certificate provider > Parameter number 7"
    assert "The Thumbprint value" in by_heading
    assert "Escaped \\<String\\> and `<div>` stay" in by_heading


# --- search, get_document, links: the service every front end calls -----------------------------------------

async def test_search_hits_name_the_section_without_markup(vault):
    found = await _service(vault, lambda s: s.search(SearchRequest(query="zebrafinch thumbprint", retriever="fts")))
    hit = found.results[0]
    assert (hit.path, hit.heading, hit.title) == ("cert.md", "The Thumbprint value", "Certificate provider")
    assert hit.context == "Certificate provider > The Thumbprint value"
    assert hit.content.startswith('## <a name="thumbprint"></a>')  # the passage is the note's own text
    guide = await _service(vault, lambda s: s.search(SearchRequest(query="reading guide details", retriever="fts")))
    assert guide.results[0].title == "Reading guide" and "<" not in guide.results[0].context


async def test_a_budgeted_read_stays_within_max_chars_with_its_lines_and_names_the_skipped_sections_plainly(vault):
    for budget in (1500, 600, 400):
        doc = await _service(vault, lambda s, b=budget: s.get_document(DocumentRequest(path="cert.md", max_chars=b)))
        text = document_text(doc)
        assert len(text) <= budget, (budget, len(text))
        assert doc.content and NOTES["cert.md"].startswith(doc.content)
        gap = doc.part.left_out[-1]
        assert gap.headings and all("<" not in h for h in gap.headings), gap.headings
        assert gap.headings[0].startswith("Parameter number ")
        # named or counted, every heading in the run left out is accounted for
        skipped = NOTES["cert.md"][len(doc.content):].count("\n## ")
        assert len(gap.headings) + gap.more_headings in (skipped, skipped + 1)
        assert "<a name" not in text.split("\n---\n", 1)[0]  # the answer's own lines: no markup
    roomy = await _service(vault, lambda s: s.get_document(DocumentRequest(path="cert.md", max_chars=100_000)))
    assert roomy.content == NOTES["cert.md"] and roomy.part.left_out == []


async def test_a_budget_too_small_for_the_answer_s_own_lines_is_an_error_naming_one_that_fits(vault):
    with pytest.raises(QueryError) as err:
        await _service(vault, lambda s: s.get_document(DocumentRequest(path="cert.md", max_chars=120)))
    message = str(err.value)
    assert message.startswith("max_chars 120 cannot hold this part of cert.md: the answer's own lines") and "\n" not in message
    need = int(message.rsplit(" ", 1)[1])
    doc = await _service(vault, lambda s: s.get_document(DocumentRequest(path="cert.md", max_chars=need)))
    assert len(document_text(doc)) <= need and doc.content


async def test_a_link_s_fragment_names_the_section_by_its_anchor_or_its_slug(vault):
    links = await _service(vault, lambda s: s.links(LinksRequest(path="guide.md")))
    fragments = sorted(item.heading for item in links.outgoing if item.path == "cert.md")
    assert fragments == ["param-7", "thumbprint"]  # as written: `cert.md#thumbprint`, `[[cert#param-7]]`
    for fragment, section in (("thumbprint", "The Thumbprint value"), ("param-7", "Parameter number 7"),
                              ("#param-7", "Parameter number 7"), ("parameter-number-12", "Parameter number 12"),
                              ("Parameter number 3", "Parameter number 3")):
        doc = await _service(vault, lambda s, f=fragment: s.get_document(DocumentRequest(path="cert.md", heading=f)))
        assert doc.part.heading == f"Certificate provider > {section}", fragment
        assert doc.content.startswith("## <a name=")
    with pytest.raises(Exception) as err:
        await _service(vault, lambda s: s.get_document(DocumentRequest(path="cert.md", heading="param-99")))
    assert "no heading 'param-99' in cert.md; its headings: Certificate provider | Parameter number 0 | " in str(err.value)
    assert "<a" not in str(err.value)


# --- an index parsed under the old rules ---------------------------------------------------------------

def test_an_index_parsed_before_reads_its_notes_again_once_without_embedding_anything(tmp_path):
    kb = tmp_path / "notes"
    write(kb / "cert.md", NOTES["cert.md"])
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "index.sqlite")
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    con = connection.connect_sync(tmp_path / "index.sqlite")  # as a groove before this change left it
    try:
        con.execute("UPDATE chunks SET heading = '<a name=\"x\"></a>' || heading, context = '<a name=\"x\"></a>' || context")
        con.execute("DELETE FROM meta WHERE key = 'markdown_rules'")
    finally:
        con.close()
    report = anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    assert report.chunks_embedded == 0 and report.chunks_written == 0 and report.unchanged == 1
    con = connection.connect_sync(tmp_path / "index.sqlite", readonly=True)
    try:
        headings = [h for (h,) in con.execute("SELECT heading || context FROM chunks")]
        rules = con.execute("SELECT value FROM meta WHERE key = 'markdown_rules'").fetchone()
    finally:
        con.close()
    assert headings and not any("<a" in h for h in headings)
    assert rules == (markdown.RULES,)


# --- the real front ends: groove serve over MCP and the web view, the command line ----------------------------

def test_mcp_the_web_view_and_the_command_line_show_headings_without_markup(spawn, vault):
    server = spawn.server(vault["kb"], vault["index"], vault["root"], command=FAKE_GROOVE)

    async def over_mcp() -> dict[str, Any]:
        async with server.client() as client:
            return {
                "search": await client.call_tool("search", {"query": "zebrafinch thumbprint", "retriever": "fts"}),
                "read": await client.call_tool("get_document", {"path": "cert.md", "max_chars": 1500}),
                "anchor": await client.call_tool("get_document", {"path": "cert.md", "heading": "thumbprint"}),
            }

    try:
        server.wait_healthy()
        server.wait_indexed(len(NOTES))
        got = anyio.run(over_mcp)
        web = httpx.post(f"{server.base}/ui/api/search", json={"query": "zebrafinch thumbprint", "retriever": "fts"},
                         timeout=30).json()
        cli = spawn.run([*FAKE_GROOVE, "search", "zebrafinch thumbprint", "--retriever", "fts", "--kb", str(vault["kb"]),
                         "--index", str(vault["index"])], cwd=vault["root"], env=server_env(vault["root"]),
                        capture_output=True, text=True, timeout=120)
    finally:
        server.terminate()

    def text(result: types.CallToolResult) -> str:
        return "".join(c.text for c in result.content if isinstance(c, types.TextContent))

    hit = got["search"].structured_content["results"][0]
    assert hit["context"] == "Certificate provider > The Thumbprint value"
    assert "§ Certificate provider > The Thumbprint value" in text(got["search"])
    read = text(got["read"])
    assert len(read) <= 1500 and "Parameter number" in read and "<a name" not in read.split("\n---\n", 1)[0]
    assert got["anchor"].structured_content["part"]["heading"] == "Certificate provider > The Thumbprint value"

    first = web["results"][0]
    assert first["context"] == "Certificate provider > The Thumbprint value"
    assert "<h2>The Thumbprint value</h2>" in first["html"].replace("<mark>", "").replace("</mark>", "")
    assert "&lt;a name" not in first["html"]

    assert cli.returncode == 0, cli.stderr
    heads = [line for line in cli.stdout.split("\n") if line.startswith("[")]
    assert heads[0] == "[1] cert.md § Certificate provider > The Thumbprint value", cli.stdout
    assert not any("<a" in line or "<span" in line for line in heads)


def test_a_200000_character_heading_is_cut_so_a_budgeted_search_answers_a_few_kilobytes(tmp_path):
    kb, index = tmp_path / "notes", tmp_path / "index.sqlite"
    write(kb / "huge.md", "---\ntitle: " + "T" * 5_000 + "\n---\n# " + "endless " * 25_000
          + "\n\nThe okapiword passage under the endless heading.\n")
    settings = load_settings(None, kb_path=kb, index_path=index)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))

    async def search(service: Service) -> Any:
        return await service.search(SearchRequest(query="okapiword passage", retriever="fts", max_chars=100))

    found = anyio.run(_service, {"kb": kb, "index": index}, search)
    hit = found.results[0]
    assert len(hit.heading) == 1_000 and hit.heading.endswith("\u2026") and hit.heading.startswith("endless endless")
    assert len(hit.title) == 1_000 and len(hit.context) <= 2_010
    assert len(found.model_dump_json()) < 12_000  # before: 200-400 KB for max_chars 100
