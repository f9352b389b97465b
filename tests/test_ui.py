"""The web view at /ui, against a real `groove serve --transport http` and a real headless Chromium.

The browser is Debian's chromium driven through chromium-driver with Selenium;
`scripts/install-browser` installs both when they are missing (as root, as CI
runs). The browser tests skip, saying why, only when no browser can be had.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from conftest import ROOT, write
from mcp_support import ServerProcess, note

# GROOVE_UI_SCREENSHOT=path keeps the browser test's screenshot (read at import: the tests run without GROOVE_*)
KEEP_SCREENSHOT = os.environ.get("GROOVE_UI_SCREENSHOT")

EVIL = (
    "This note tries to inject markup into the web view: payload "
    "<script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned = 2\"> <b>bold?</b>"
)
EVIL_HEADING = "<b>heading</b> <img src=y onerror=\"window.__pwned = 3\">"


def _corpus(kb: Path) -> dict[str, str]:
    notes = {
        "baking/sourdough.md": note("Sourdough starter", "## Feeding\n\nFeed the sourdough starter twice a day with "
                                    "equal weights of flour and water; a ripe starter doubles in four hours.",
                                    tags=["baking"]),
        "baking/bread.md": note("Bread", "## Crust\n\nSteam in the first minutes of baking gives a thin, crackling crust."),
        "travel/kyoto.md": note("京都の旅", "## 寺\n\n京都の寺を巡る。清水寺は朝早くが静か。"),
        "garden/tomatoes.md": note("Tomatoes", "## Watering\n\nWater tomatoes deeply at the roots, never the leaves."),
        "security/evil.md": note("Markup in a note", f"## Payload {EVIL_HEADING}\n\n" + EVIL),
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
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("ui")
    kb = root / "notes"
    notes = _corpus(kb)
    server = ServerProcess(kb, root / "index.sqlite", root)
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


def test_the_page_ships_inside_the_wheel(tmp_path):
    """A copy of the project built into a wheel (offline, no build isolation) carries the page, byte for byte."""
    import sys
    import zipfile

    src = tmp_path / "src"
    shutil.copytree(ROOT / "groove", src / "groove", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, src / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("groove-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = zf.read("groove/serve/static/ui.html")
    assert shipped == (ROOT / "groove" / "serve" / "static" / "ui.html").read_bytes()


# --- the page, in a real browser ---------------------------------------------------------------

def _browser_binaries() -> tuple[str | None, str | None]:
    return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser_binaries() -> tuple[str, str]:
    chromium, driver = _browser_binaries()
    if chromium is None or driver is None:
        proc = subprocess.run([str(ROOT / "scripts" / "install-browser")], capture_output=True, text=True, timeout=900)
        chromium, driver = _browser_binaries()
        if chromium is None or driver is None:
            pytest.skip("no headless browser: chromium and chromium-driver are not installed and "
                        f"scripts/install-browser could not install them ({proc.stderr.strip() or 'no output'})")
    pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")
    return chromium, driver


def _driver(binaries: tuple[str, str], *args: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = binaries
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1100,1300", "--lang=en-US", *args):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


@pytest.fixture(scope="module")
def chrome(browser_binaries, served):
    # evil.example resolves to this server: a DNS rebinding attack as a browser would make it.
    driver = _driver(browser_binaries, "--host-resolver-rules=MAP evil.example 127.0.0.1")
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver, condition, what: str, timeout: float = 30):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout).until(lambda d: condition(d))
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}; console: {driver.get_log('browser')}") from None


def _run_search(driver, query: str, *, explain: bool) -> list[Any]:
    from selenium.webdriver.common.by import By

    before = int(driver.execute_script("return Number(document.body.dataset.searches || 0)"))
    box = driver.find_element(By.ID, "query")
    box.clear()
    box.send_keys(query)
    check = driver.find_element(By.ID, "explain-on")
    if check.is_selected() != explain:
        check.click()
    driver.find_element(By.CSS_SELECTOR, "form#search button[type=submit]").click()
    _wait(driver, lambda d: int(d.execute_script("return Number(document.body.dataset.searches || 0)")) > before,
          f"the search for {query!r} to finish")
    return driver.find_elements(By.CSS_SELECTOR, "ol#results li")


def test_the_web_view_shows_status_finds_a_note_highlights_its_span_and_explains(chrome, served, tmp_path):
    from selenium.webdriver.common.by import By

    chrome.get(served.ui)
    _wait(chrome, lambda d: d.find_element(By.ID, "st-documents").text == str(len(served.notes)),
          "the status panel to show the documents")
    assert chrome.find_element(By.ID, "st-pending").text == "0"
    assert chrome.find_element(By.ID, "st-watcher").text == "watching"
    assert chrome.find_element(By.ID, "st-model").text
    assert re.fullmatch(r"\d+ (s|min \d+ s)", chrome.find_element(By.ID, "st-uptime").text)

    hits = _run_search(chrome, "sourdough", explain=True)
    assert hits, chrome.find_element(By.ID, "error").text
    first = hits[0]
    assert first.find_element(By.CSS_SELECTOR, ".hit-path").text == "baking/sourdough.md"
    assert "Feeding" in first.find_element(By.CSS_SELECTOR, ".hit-heading").text
    assert re.fullmatch(r"score \d\.\d{4}", first.find_element(By.CSS_SELECTOR, ".hit-score").text)
    marks = first.find_elements(By.CSS_SELECTOR, ".passage mark")
    assert marks and {m.text.casefold() for m in marks} == {"sourdough"}
    passage = first.find_element(By.CSS_SELECTOR, ".passage").text
    assert "Feed the sourdough starter twice a day" in passage

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
    if KEEP_SCREENSHOT:
        shutil.copyfile(shot, KEEP_SCREENSHOT)

    # A Japanese query: the span is cut at UTF-8 byte offsets and lands on whole characters.
    hits = _run_search(chrome, "清水寺", explain=False)
    assert hits[0].find_element(By.CSS_SELECTOR, ".hit-path").text == "travel/kyoto.md"
    assert [m.text for m in hits[0].find_elements(By.CSS_SELECTOR, ".passage mark")] == ["清水寺"]
    if KEEP_SCREENSHOT:
        chrome.save_screenshot(str(Path(KEEP_SCREENSHOT).with_suffix(".ja.png")))
    assert not chrome.find_element(By.ID, "explain").is_displayed()

    # The inline script ran under the page's CSP (the page works) and the browser reported no violation.
    violations = [e for e in chrome.get_log("browser") if "Content Security Policy" in e.get("message", "")]
    assert violations == []


def test_a_note_full_of_markup_shows_as_text_and_runs_nothing(chrome, served):
    from selenium.webdriver.common.by import By

    chrome.get(served.ui)
    _wait(chrome, lambda d: d.execute_script("return document.body.dataset.statusLoaded") == "1", "the page to load")
    hits = _run_search(chrome, "payload inject markup", explain=False)
    evil = [h for h in hits if h.find_element(By.CSS_SELECTOR, ".hit-path").text == "security/evil.md"]
    assert evil, [h.text for h in hits]
    assert f"Payload {EVIL_HEADING}" in evil[0].find_element(By.CSS_SELECTOR, ".hit-heading").text
    passage = evil[0].find_element(By.CSS_SELECTOR, ".passage")
    assert "<script>window.__pwned = 1</script>" in passage.text
    assert '<img src=x onerror="window.__pwned = 2">' in passage.text
    assert chrome.execute_script("return window.__pwned === undefined")
    assert chrome.execute_script("return document.querySelectorAll('#results script, #results img, #results b').length") == 0


def test_the_web_view_shows_the_search_tools_error_for_a_bad_limit(chrome, served):
    from selenium.webdriver.common.by import By

    chrome.get(served.ui)
    _wait(chrome, lambda d: d.execute_script("return document.body.dataset.statusLoaded") == "1", "the page to load")
    # Past the input's own max: the page sends it anyway and shows the server's refusal.
    chrome.execute_script("document.getElementById('limit').value = '500'")
    hits = _run_search(chrome, "bread", explain=False)
    assert hits == []
    error = chrome.find_element(By.ID, "error")
    assert error.is_displayed()
    assert error.text == "limit must be between 1 and 100, got 500"


def test_a_rebinding_page_in_the_browser_gets_421_from_the_ui(chrome, served):
    from selenium.webdriver.common.by import By

    chrome.get(f"http://evil.example:{served.port}/ui")
    assert "Invalid Host header" in chrome.find_element(By.TAG_NAME, "body").text
    assert not chrome.find_elements(By.ID, "query")
    # and the same request, made directly, is a 421
    r = httpx.get(f"{served.server.base}/ui", headers={"Host": f"evil.example:{served.port}"}, timeout=10)
    assert r.status_code == 421


def test_with_a_token_the_page_loads_and_its_script_sends_the_token_from_the_url_fragment(browser_binaries, tmp_path):
    from selenium.webdriver.common.by import By

    token = "ui-test-token-0123456789abcdef"
    kb = tmp_path / "notes"
    notes = _corpus(kb)
    server = ServerProcess(kb, tmp_path / "index.sqlite", tmp_path, env={"GROOVE_TOKEN": token}, token=token)
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

        driver = _driver(browser_binaries)
        driver.get(f"{server.base}/ui#token={token}")
        _wait(driver, lambda d: d.find_element(By.ID, "st-documents").text == str(len(notes)),
              "the status panel, fetched with the token")
        assert "token" not in driver.current_url  # the fragment is dropped from the address bar
        hits = _run_search(driver, "sourdough", explain=False)
        assert hits and hits[0].find_element(By.CSS_SELECTOR, ".hit-path").text == "baking/sourdough.md"
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
