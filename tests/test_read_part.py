"""Reading just the part that matters: `get_document` heading / lines / max_chars, and `search` max_chars.

Real files, a real SQLite index (the bag-of-words fake embedder: these tests are about text, not the
model), the service as every front end calls it, a real MCP client over stdio and over HTTP (`groove serve`
subprocesses), and the command line (`groove get`, `groove search --max-chars`, asked in process and of a
running service over its local socket).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from groove.api.answers import document_text
from groove.api.service import DocumentRequest, SearchRequest, Service
from groove.config import load_settings
from groove.errors import NotFoundError
from groove.index import Index
from groove.search.answers import search_text
from groove.search.compiler import QueryError
from groove.search.parts import cut_point
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once
from tests.support.server import FAKE_GROOVE, serve_argv, server_env

TEA = """\
---
title: お茶の淹れ方
date: 2024-05-14
tags: [tea]
---
# お茶の淹れ方

緑茶と紅茶の淹れ方をまとめる。This note covers green and black tea, with the water, the leaves and the time.

## 緑茶

湯は八十度まで冷ます。茶葉は二グラム。蒸らしは一分。二煎目は三十秒でよい。急須は温めておく。
Sencha wants cooler water than black tea does. Pour the last drop: it holds the most flavour.

### Notes

緑茶のメモ。玉露はさらに低い温度で淹れる。Gyokuro is brewed even cooler, near fifty degrees.

## 紅茶

熱湯を使う。蒸らしは三分。ミルクを入れるなら濃いめに淹れる。ポットも温めておく。
Black tea wants boiling water. Steep it for three minutes, longer for milk tea.

### Notes

紅茶のメモ。アッサムはミルクに合う。Assam takes milk well; Darjeeling is better plain.

## Code

```markdown
## Not a heading
```

Done with the code.
"""

STEEPING = """\
# Steeping times

Every tea has its own steeping time. Green tea steeps for one minute. Black tea steeps for three minutes.
Oolong steeps for two minutes, and a second steep is shorter. Herbal tea steeps for five minutes or more.
蒸らし時間はお茶ごとに違う。緑茶の蒸らしは一分。紅茶の蒸らしは三分。烏龍茶は二分で、二煎目は短くする。
ハーブティーは五分以上蒸らす。蒸らしすぎると渋くなるので、時間を計る。
"""

PLAIN = "Shopping list\n\nGreen tea leaves. Black tea leaves. A new kettle.\n"
SENTENCE_ENDS = ("。", "！", "？", ".", "!", "?", "\n", "」", "）")


def _file_lines(text: str, first: int, count: int) -> str:
    return "".join(text.splitlines(keepends=True)[first - 1:first - 1 + count])


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), 1) if line == needle)


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("read-part")
    kb = root / "notes"
    write(kb / "tea.md", TEA)
    write(kb / "steeping.md", STEEPING)
    write(kb / "lists/shopping.txt", PLAIN)
    config = write(root / "groove.toml", '[parsers]\nenabled = ["markdown", "txt"]\n')
    index = root / "index.sqlite"
    with pytest.MonkeyPatch.context() as mp:  # the module fixture runs before conftest's per-test isolation
        for name in [n for n in os.environ if n.startswith("GROOVE_")]:
            mp.delenv(name)
        mp.setenv("XDG_CONFIG_HOME", str(root / "config"))
        mp.setenv("XDG_DATA_HOME", str(root / "data"))
        mp.chdir(root)
        anyio.run(lambda: index_once(load_settings(config, kb_path=kb, index_path=index), embedder=BagOfWordsEmbedder()))
    return {"root": root, "kb": kb, "index": index, "config": config}


async def _with_service(vault: dict[str, Path], work) -> Any:
    settings = load_settings(vault["config"], kb_path=vault["kb"], index_path=vault["index"])
    async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as index:
        return await work(Service(index))


async def _get(vault: dict[str, Path], **request: Any):
    return await _with_service(vault, lambda service: service.get_document(DocumentRequest(**request)))


# --- get_document, in process over the real index --------------------------------------------------------

async def test_a_search_hit_s_context_names_its_section_and_get_document_returns_it_with_its_subsections(vault):
    async def work(service: Service):
        found = await service.search(SearchRequest(query="アッサム ミルク", limit=5, retriever="fts"))
        hit = next(h for h in found.results if h.path == "tea.md")
        return hit, await service.get_document(DocumentRequest(path="tea.md", heading=hit.context))

    hit, doc = await _with_service(vault, work)
    assert hit.context == "お茶の淹れ方 > 紅茶"
    assert doc.content.startswith("## 紅茶\n") and "### Notes" in doc.content and "Assam takes milk well" in doc.content
    assert "## Code" not in doc.content and "緑茶のメモ" not in doc.content
    first, last = _line_of(TEA, "## 紅茶"), _line_of(TEA, "## Code") - 2
    assert doc.part.heading == "お茶の淹れ方 > 紅茶" and doc.part.lines == [first, last]
    assert doc.part.lines[0] == hit.start_line  # (the chunk may run on: a tiny section merges into the one before)
    assert doc.content == _file_lines(TEA, first, _line_of(TEA, "## Code") - first)
    assert doc.part.chars == len(doc.content) and doc.part.omitted_chars == doc.part.total_chars - doc.part.chars
    assert doc.part.trimmed_chars == 0
    before, after = doc.part.left_out
    assert before.headings == ["お茶の淹れ方", "緑茶", "緑茶 > Notes"] and before.lines[1] < first
    assert after.headings == ["Code"] and after.lines == [_line_of(TEA, "## Code"), _line_of(TEA, "Done with the code.")]
    assert doc.title == "お茶の淹れ方" and doc.frontmatter["date"] == "2024-05-14"  # the note's fields stay whole


async def test_the_heading_alone_the_path_below_the_title_and_any_case_width_or_spacing_name_the_same_section(vault):
    names = ["緑茶 > Notes", "お茶の淹れ方 > 緑茶 > Notes", "  お茶の淹れ方>緑茶>NOTES ", "### 緑茶 > notes",
             "緑茶 ＞ Ｎｏｔｅｓ"]
    docs = [await _get(vault, path="tea.md", heading=name) for name in names]
    assert {d.content for d in docs} == {"### Notes\n\n緑茶のメモ。玉露はさらに低い温度で淹れる。Gyokuro is brewed even "
                                         "cooler, near fifty degrees.\n\n"}
    assert {d.part.heading for d in docs} == {"お茶の淹れ方 > 緑茶 > Notes"}
    whole = await _get(vault, path="tea.md", heading="お茶の淹れ方")  # the H1 that is the title: the whole text
    assert whole.content.startswith("# お茶の淹れ方\n") and whole.content.endswith("Done with the code.\n")
    assert whole.part.left_out == []


async def test_a_heading_that_is_not_in_the_note_is_an_error_naming_the_headings_it_has(vault):
    for missing in ("ほうじ茶", "Not a heading", "紅茶 > Milk"):
        with pytest.raises(NotFoundError) as err:
            await _get(vault, path="tea.md", heading=missing)
        message = str(err.value)
        assert message == (f"no heading {missing!r} in tea.md; its headings: お茶の淹れ方 | 緑茶 | 緑茶 > Notes | 紅茶 | "
                           "紅茶 > Notes | Code"), message


async def test_a_heading_that_names_two_sections_is_an_error_naming_each_with_its_lines(vault):
    with pytest.raises(QueryError) as err:
        await _get(vault, path="tea.md", heading="Notes")
    green, black = [i for i, line in enumerate(TEA.split("\n"), 1) if line == "### Notes"]
    assert str(err.value) == (f"heading 'Notes' names 2 sections of tea.md: お茶の淹れ方 > 緑茶 > Notes (lines {green}-{green + 2}) | "
                              f"お茶の淹れ方 > 紅茶 > Notes (lines {black}-{black + 2}); pass the full path, or lines (from, count)")


async def test_lines_from_a_hit_s_start_line_are_the_file_s_own_lines_with_the_frontmatter_counted(vault):
    start = _line_of(TEA, "## 紅茶")
    doc = await _get(vault, path="tea.md", lines={"from": start, "count": 4})
    assert doc.content == _file_lines(TEA, start, 4)
    assert doc.part.lines == [start, start + 3] and doc.part.heading is None
    to_end = await _get(vault, path="tea.md", lines={"from": _line_of(TEA, "Done with the code.")})
    assert to_end.content == "Done with the code.\n" and to_end.part.left_out[0].lines[0] == 6
    overlapping = await _get(vault, path="tea.md", lines={"from": 2, "count": 6})  # frontmatter lines 1-5: the text starts at 6
    assert overlapping.content == _file_lines(TEA, 6, 2) and overlapping.part.lines == [6, 7]


async def test_lines_past_the_end_or_inside_the_frontmatter_are_one_line_errors(vault):
    last = len(TEA.rstrip("\n").split("\n"))
    for lines, message in (
        ({"from": 500}, f"lines.from 500 is past the end of tea.md: its text is lines 6-{last}"),
        ({"from": 1, "count": 5}, f"lines 1-5 of tea.md are its frontmatter (in the answer's frontmatter field); "
                                  f"its text is lines 6-{last}"),
    ):
        with pytest.raises(QueryError) as err:
            await _get(vault, path="tea.md", lines=lines)
        assert str(err.value) == message


async def test_max_chars_cuts_the_note_at_a_sentence_end_and_says_what_it_left_out(vault):
    doc = await _get(vault, path="tea.md", max_chars=400)
    assert len(document_text(doc)) <= 400  # the answer's own lines count: the content gets what they leave
    assert len(doc.content) <= 400 - 150 and doc.content.endswith(SENTENCE_ENDS)
    assert TEA.split("---\n", 2)[2].startswith(doc.content)
    assert doc.part.trimmed_chars == doc.part.total_chars - len(doc.content) == doc.part.omitted_chars
    gap = doc.part.left_out[-1]
    assert gap.lines[1] == _line_of(TEA, "Done with the code.") and "紅茶" in gap.headings and "Code" in gap.headings
    text = document_text(doc)
    assert f"part: lines 6-{doc.part.lines[1]} · {len(doc.content)} of {doc.part.total_chars} chars" in text
    assert f"(max_chars cut the last {doc.part.trimmed_chars} at a sentence end)" in text and "left out: lines" in text

    section = await _get(vault, path="tea.md", heading="緑茶", max_chars=300)  # a section, then the budget
    assert section.content.startswith("## 緑茶\n") and len(document_text(section)) <= 300
    assert section.content.endswith(SENTENCE_ENDS) and section.part.trimmed_chars > 0
    with pytest.raises(QueryError) as err:  # too small for the answer's own lines and some text: say what would do
        await _get(vault, path="tea.md", heading="緑茶", max_chars=150)
    need = int(str(err.value).rsplit(" ", 1)[1])
    assert str(err.value).startswith("max_chars 150 cannot hold this part of tea.md: the answer's own lines")
    assert len(document_text(await _get(vault, path="tea.md", heading="緑茶", max_chars=need))) <= need
    roomy = await _get(vault, path="tea.md", heading="緑茶", max_chars=100_000)
    assert roomy.part.trimmed_chars == 0 and "left out" in document_text(roomy)


async def test_a_whole_note_is_answered_as_before_without_a_part(vault):
    doc = await _get(vault, path="tea.md")
    assert doc.part is None and doc.content == TEA.split("---\n", 2)[2]
    assert "part:" not in document_text(doc)
    assert "part" not in doc.model_dump(exclude_unset=True)


async def test_a_document_without_headings_says_so_and_reads_by_lines(vault):
    with pytest.raises(NotFoundError) as err:
        await _get(vault, path="lists/shopping.txt", heading="Shopping list")
    assert str(err.value) == ("no heading 'Shopping list' in lists/shopping.txt: the note has no headings; "
                              "read it by lines (from, count) or whole")
    doc = await _get(vault, path="lists/shopping.txt", lines={"from": 3, "count": 1})
    assert doc.content == "Green tea leaves. Black tea leaves. A new kettle.\n" and doc.part.lines == [3, 3]


@pytest.mark.parametrize("request_, message", [
    ({"path": "tea.md", "heading": "x", "lines": {"from": 1}}, "give heading or lines, not both"),
    ({"path": "tea.md", "max_chars": 10}, "max_chars must be between 100 and 10000000, got 10"),
    ({"path": "tea.md", "max_chars": "200"}, "max_chars must be a whole number, got '200'"),
    ({"path": "tea.md", "lines": {"from": 0}}, "lines.from must be between 1 and 10000000, got 0"),
    ({"path": "tea.md", "lines": {"from": 3, "count": 0}}, "lines.count must be between 1 and 10000000, got 0"),
    ({"path": "tea.md", "lines": {"from": 3, "to": 9}}, "unknown argument 'lines.to'; lines takes: from, count"),
    ({"path": "tea.md", "lines": [3, 9]}, 'lines must be an object like {"from": 12, "count": 20}, got [3, 9]'),
    ({"path": "tea.md", "heading": " # "}, "heading is empty; give one of the note's headings"),
    ({"path": "tea.md", "heading": "h" * 1025}, "heading is 1025 characters; at most 1024 are allowed"),
    ({"path": "tea.md", "chapter": 2}, "unknown argument 'chapter'; it takes: path, heading, lines, max_chars"),
])
def test_every_bad_get_document_argument_is_a_one_line_error(request_, message):
    with pytest.raises(QueryError) as err:
        DocumentRequest(**request_)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("text, limit, kept", [
    ("これは文です。これも文です。そして", 10, "これは文です。"),
    ("Hello world. Next sentence here", 20, "Hello world."),
    ("Is it? Yes! It is.", 12, "Is it? Yes!"),
    ("「はい。」と言った。次の文。", 7, "「はい。」"),
    ("pi is 3.14 and e is 2.71 today", 12, "pi is 3.14"),  # no sentence end fits: a space, never inside a word
    ("first line\nsecond line without an end", 25, "first line\n"),
    ("abcdefghijklmnopqrstuvwxyz", 10, ""),  # one long word: nothing rather than half of it
    ("漢字だけが続く長い文字列で句読点がない", 5, "漢字だけが"),  # between two CJK characters
    ("Intro.\n\n## Next\n\nMore text here", 18, "Intro.\n\n"),  # not on a heading whose text was cut off
    ("short", 100, "short"),
])
def test_a_budget_cuts_text_at_a_sentence_end_never_inside_a_word(text, limit, kept):
    assert text[:cut_point(text, limit)] == kept


# --- search max_chars -------------------------------------------------------------------------------------

async def test_search_max_chars_fills_the_budget_best_first_cutting_at_sentence_ends_and_lists_what_it_left_out(vault):
    async def work(service: Service):
        whole = await service.search(SearchRequest(query="steeping 蒸らし tea", limit=10, retriever="fts"))
        first = len(whole.results[0].content)
        budgeted = await service.search(SearchRequest(query="steeping 蒸らし tea", limit=10, retriever="fts",
                                                      max_chars=first + 100))
        tight = await service.search(SearchRequest(query="steeping 蒸らし tea", limit=10, retriever="fts", max_chars=100))
        return whole, budgeted, tight

    whole, budgeted, tight = await _with_service(vault, work)
    assert len(whole.results) >= 3 and whole.budget is None
    budget = budgeted.budget
    assert budget.max_chars == len(whole.results[0].content) + 100
    assert budget.used_chars == sum(len(h.content) for h in budgeted.results) <= budget.max_chars
    assert budgeted.results[0].content == whole.results[0].content and budgeted.results[0].trimmed_chars is None
    by_key = {(h.path, h.start_line): h for h in whole.results}
    order = [(h.path, h.start_line) for h in whole.results]
    kept = [(h.path, h.start_line) for h in budgeted.results]
    assert kept == [k for k in order if k in kept]  # best first, in the search's own order
    for hit in budgeted.results[1:]:
        full = by_key[(hit.path, hit.start_line)]
        if hit.trimmed_chars:
            assert full.content.startswith(hit.content) and hit.content.endswith(SENTENCE_ENDS)
            assert hit.trimmed_chars == len(full.content) - len(hit.content) and len(hit.content) >= 80
            assert hit.end_line <= full.end_line
    assert budget.trimmed_passages == sum(1 for h in budgeted.results if h.trimmed_chars) >= 1
    assert [(o.path, o.start_line) for o in budget.omitted] == [k for k in order if k not in kept]
    assert budget.omitted_chars == sum(len(by_key[(o.path, o.start_line)].content) for o in budget.omitted)
    text = search_text(budgeted)
    assert f"budget: {budget.used_chars} of {budget.max_chars} chars used" in text
    assert "trimmed at a sentence end" in text and "read on: get_document lines from" in text

    assert len(tight.results) == 1 and len(tight.results[0].content) <= 100  # the first hit, cut to fit
    assert tight.results[0].content.endswith(SENTENCE_ENDS) and tight.budget.omitted_passages == len(whole.results) - 1


# --- over MCP: stdio and HTTP ------------------------------------------------------------------------------

MCP_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "section": ("get_document", {"path": "tea.md", "heading": "お茶の淹れ方 > 紅茶"}),
    "lines": ("get_document", {"path": "tea.md", "lines": {"from": 10, "count": 3}}),
    "budget": ("get_document", {"path": "tea.md", "max_chars": 400}),
    "whole": ("get_document", {"path": "tea.md"}),
    "missing_heading": ("get_document", {"path": "tea.md", "heading": "ほうじ茶"}),
    "two_sections": ("get_document", {"path": "tea.md", "heading": "Notes"}),
    "both": ("get_document", {"path": "tea.md", "heading": "緑茶", "lines": {"from": 3}}),
    "small_budget": ("get_document", {"path": "tea.md", "max_chars": 5}),
    "bad_lines": ("get_document", {"path": "tea.md", "lines": {"from": 0}}),
    "past_end": ("get_document", {"path": "tea.md", "lines": {"from": 900}}),
    "search": ("search", {"query": "steeping 蒸らし tea", "retriever": "fts", "max_chars": 300}),
    "search_small": ("search", {"query": "tea", "max_chars": 3}),
}


async def _mcp_script(client: Client) -> dict[str, Any]:
    got: dict[str, Any] = {"tools": {t.name: t for t in (await client.list_tools()).tools}}
    for key, (name, arguments) in MCP_CALLS.items():
        got[key] = await client.call_tool(name, arguments)
    return got


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _check_mcp(got: dict[str, Any]) -> None:
    tool = got["tools"]["get_document"]
    props = tool.input_schema["properties"]
    assert set(props) == {"path", "heading", "lines", "max_chars"} and tool.input_schema["required"] == ["path"]
    assert props["max_chars"]["minimum"] == 100 and "heading" in tool.description and "max_chars" in tool.description
    assert "max_chars" in got["tools"]["search"].input_schema["properties"]
    assert "max_chars" in got["tools"]["search"].description

    section = got["section"].structured_content
    assert not got["section"].is_error and section["content"].startswith("## 紅茶\n")
    assert section["part"]["heading"] == "お茶の淹れ方 > 紅茶"
    assert _text(got["section"]).split("\n")[1].startswith("part: § お茶の淹れ方 > 紅茶 · lines ")
    assert got["lines"].structured_content["content"] == _file_lines(TEA, 10, 3)
    assert got["lines"].structured_content["part"]["lines"] == [10, 12]
    budget = got["budget"].structured_content
    assert len(_text(got["budget"])) <= 400  # the text a model reads, its header lines included
    assert budget["part"]["trimmed_chars"] > 0 and budget["part"]["left_out"]
    assert "part" not in got["whole"].structured_content  # a whole note: the answer as before

    for key, message in (
        ("missing_heading", "no heading 'ほうじ茶' in tea.md; its headings: お茶の淹れ方 | 緑茶 | 緑茶 > Notes | 紅茶 | "
                            "紅茶 > Notes | Code"),
        ("two_sections", "heading 'Notes' names 2 sections of tea.md: お茶の淹れ方 > 緑茶 > Notes (lines "),
        ("both", "give heading or lines, not both"),
        ("small_budget", "max_chars must be between 100 and 10000000, got 5"),
        ("bad_lines", "lines.from must be"),
        ("past_end", "lines.from 900 is past the end of tea.md"),
        ("search_small", "max_chars must be between 100 and 1000000, got 3"),
    ):
        result = got[key]
        assert result.is_error, (key, _text(result))
        assert message in _text(result), (key, _text(result))
        assert "\n" not in _text(result) and result.structured_content is None

    found = got["search"].structured_content
    assert found["budget"]["max_chars"] == 300
    assert found["budget"]["used_chars"] == sum(len(h["content"]) for h in found["results"]) <= 300
    assert "budget: " in _text(got["search"])


def _stdio_params(spawn, vault: dict[str, Path]) -> StdioServerParameters:
    argv = serve_argv(vault["kb"], vault["index"], "--transport", "stdio", "--config", str(vault["config"]),
                      command=FAKE_GROOVE)
    return spawn.stdio(command=argv[0], args=argv[1:], env=server_env(vault["root"]), cwd=str(vault["root"]))


def test_a_real_client_over_stdio_reads_a_section_lines_and_a_budget_and_a_missing_heading_names_the_ones_there(spawn, vault):
    async def go() -> dict[str, Any]:
        with anyio.fail_after(120):
            async with Client(_stdio_params(spawn, vault)) as client:
                return await _mcp_script(client)

    _check_mcp(anyio.run(go))


@pytest.fixture(scope="module")
def http_server(spawn, vault):
    server = spawn.server(vault["kb"], vault["index"], vault["root"], extra=("--config", str(vault["config"])),
                           command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        server.wait_indexed(3)
        yield server
    finally:
        server.terminate()


def test_a_real_client_over_http_reads_a_section_lines_and_a_budget_and_a_missing_heading_names_the_ones_there(http_server):
    async def go() -> dict[str, Any]:
        with anyio.fail_after(120):
            async with http_server.client() as client:
                return await _mcp_script(client)

    _check_mcp(anyio.run(go))


# --- the command line ---------------------------------------------------------------------------------------

def _groove(spawn, vault: dict[str, Path], *argv: str) -> subprocess.CompletedProcess:
    return spawn.run([*FAKE_GROOVE, *argv, "--kb", str(vault["kb"]), "--index", str(vault["index"]),
                           "--config", str(vault["config"])], cwd=vault["root"], env=server_env(vault["root"]),
                          capture_output=True, text=True, timeout=120)


def test_groove_get_prints_a_section_lines_or_a_budget_and_refuses_bad_input_in_one_line(spawn, vault):
    section = _groove(spawn, vault, "get", "tea.md", "--heading", "紅茶 > Notes", "--no-daemon")
    assert section.returncode == 0, section.stderr
    assert section.stdout.split("---\n", 1)[1] == "### Notes\n\n紅茶のメモ。アッサムはミルクに合う。Assam takes milk well; Darjeeling is better plain.\n\n"
    assert "part: § お茶の淹れ方 > 紅茶 > Notes · lines " in section.stdout

    by_file = _groove(spawn, vault, "get", str(vault["kb"] / "tea.md"), "--lines", "10-12", "--format", "json", "--no-daemon")
    data = json.loads(by_file.stdout)
    assert data["content"] == _file_lines(TEA, 10, 3) and data["part"]["lines"] == [10, 12]
    plus = json.loads(_groove(spawn, vault, "get", "tea.md", "--lines", "10+3", "--format", "json", "--no-daemon").stdout)
    assert plus["content"] == data["content"]

    budget = _groove(spawn, vault, "get", "tea.md", "--max-chars", "400", "--no-daemon")
    assert budget.returncode == 0 and "at a sentence end)" in budget.stdout and "left out: lines" in budget.stdout
    assert len(budget.stdout.rstrip("\n")) <= 400

    for argv, code, message in (
        (["get", "tea.md", "--heading", "ほうじ茶"], 1, "groove: error: no heading 'ほうじ茶' in tea.md; its headings: "),
        (["get", "tea.md", "--lines", "12-10"], 2, "groove: error: --lines 12-10: the last line 10 is before the first 12"),
        (["get", "tea.md", "--lines", "ten"], 2, "groove: error: --lines takes FIRST-LAST"),
        (["get", "tea.md", "--heading", "緑茶", "--lines", "3"], 2, "not allowed with argument"),
        (["get", "tea.md", "--max-chars", "5"], 1, "groove: error: max_chars must be between 100 and 10000000, got 5"),
        (["get", "tea.md", "--max-chars", "120"], 1, "groove: error: max_chars 120 cannot hold this part of tea.md"),
        (["get", "nowhere.md"], 1, "groove: error: no indexed note at 'nowhere.md'"),
    ):
        proc = _groove(spawn, vault, *argv, "--no-daemon")
        assert proc.returncode == code, (argv, proc.returncode, proc.stderr)
        assert message in proc.stderr, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_groove_search_max_chars_prints_the_budgeted_passages_and_what_was_trimmed(spawn, vault):
    proc = _groove(spawn, vault, "search", "steeping 蒸らし tea", "--retriever", "fts", "--max-chars", "300", "--no-daemon")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"budget: \d+ of 300 chars used", proc.stdout)
    data = json.loads(_groove(spawn, vault, "search", "steeping 蒸らし tea", "--retriever", "fts", "--max-chars", "300",
                              "--format", "json", "--no-daemon").stdout)
    assert data["budget"]["used_chars"] == sum(len(h["content"]) for h in data["results"]) <= 300
    bad = _groove(spawn, vault, "search", "tea", "--max-chars", "7", "--no-daemon")
    assert bad.returncode != 0 and "max_chars must be between 100 and 1000000, got 7" in bad.stderr


def test_groove_get_and_search_max_chars_ask_a_running_service_over_its_local_socket(spawn, vault, http_server):
    got = _groove(spawn, vault, "get", "tea.md", "--heading", "緑茶", "--format", "json")
    assert got.returncode == 0, got.stderr
    assert "asked the running groove serve" in got.stderr
    assert json.loads(got.stdout)["part"]["heading"] == "お茶の淹れ方 > 緑茶"
    missing = _groove(spawn, vault, "get", "tea.md", "--heading", "ほうじ茶")
    assert missing.returncode == 1 and "its headings: お茶の淹れ方 | 緑茶" in missing.stderr
    found = _groove(spawn, vault, "search", "steeping 蒸らし tea", "--retriever", "fts", "--max-chars", "200", "--format", "json")
    assert "asked the running groove serve" in found.stderr
    assert json.loads(found.stdout)["budget"]["max_chars"] == 200
