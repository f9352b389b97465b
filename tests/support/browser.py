"""A real headless Chromium for the web view's tests, and what they do with its page.

The browser is Debian's chromium driven through chromium-driver with Selenium; `scripts/install-browser`
installs both when they are missing (as root, as CI runs). Tests reach it through conftest's `browser`
fixture (which marks them `browser`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.support.common import ROOT

# GROOVE_UI_SCREENSHOTS=dir keeps the browser tests' screenshots there (docs/images: webview-*.png); read at
# import, since the tests run without GROOVE_*
SCREENSHOTS = os.environ.get("GROOVE_UI_SCREENSHOTS")
SHOT_SIZE = (1200, 800)  # the kept screenshots' viewport


def browser_binaries() -> tuple[str | None, str | None]:
    """Chromium and chromium-driver on PATH (None for each that is missing)."""
    return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


def install_browser() -> str:
    """scripts/install-browser (apt-get as root); what it said on stderr."""
    proc = subprocess.run([str(ROOT / "scripts" / "install-browser")], capture_output=True, text=True, timeout=900)
    return proc.stderr.strip()


class Browser:
    """The installed Chromium and its driver; `driver()` starts one headless browser."""

    def __init__(self, chromium: str, driver: str):
        self.binaries = (chromium, driver)

    def driver(self, *args: str, lang: str = "en-US"):
        """A headless Chromium whose user asks for `lang` (navigator.languages and Accept-Language)."""
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        chromium, driver = self.binaries
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1100,1300", f"--lang={lang}", *args):
            options.add_argument(arg)
        options.add_experimental_option("prefs", {"intl.accept_languages": lang})
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def wait_for(driver, condition, what: str, timeout: float = 30):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout).until(lambda d: condition(d))
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}; console: {driver.get_log('browser')}") from None


def run_search(driver, query: str, *, explain: bool) -> list[Any]:
    from selenium.webdriver.common.by import By

    before = int(driver.execute_script("return Number(document.body.dataset.searches || 0)"))
    box = driver.find_element(By.ID, "query")
    box.clear()
    box.send_keys(query)
    check = driver.find_element(By.ID, "explain-on")
    if check.is_selected() != explain:
        check.click()
    driver.find_element(By.CSS_SELECTOR, "form#search button[type=submit]").click()
    wait_for(driver, lambda d: int(d.execute_script("return Number(document.body.dataset.searches || 0)")) > before,
             f"the search for {query!r} to finish")
    return driver.find_elements(By.CSS_SELECTOR, "ol#results > li")


def count(driver, name: str) -> int:
    """One of the page's counters (document.body.dataset: searches, noteOpens, noteCloses, statusPolls)."""
    return int(driver.execute_script(f"return Number(document.body.dataset.{name} || 0)"))


def load(driver, url: str, *, searches: int = 0) -> None:
    """Open the page and wait for its first status (and for `searches` searches, run from the URL)."""
    driver.get(url)
    wait_for(driver, lambda d: d.execute_script("return document.body.dataset.statusLoaded") == "1", "the page to load")
    if searches:
        wait_for(driver, lambda d: count(d, "searches") >= searches, f"the search in {url} to run")


def hit_paths(driver) -> list[str]:
    """The hits' paths, read at once (a search under way may replace the list between two reads)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('ol#results > li > .hit-head > .hit-path')].map((a) => a.textContent);")


def open_hit(driver, index: int) -> None:
    """Click a hit's path and wait for its note to open."""
    from selenium.webdriver.common.by import By

    before = count(driver, "noteOpens")
    driver.find_elements(By.CSS_SELECTOR, "ol#results > li")[index].find_element(By.CSS_SELECTOR, ".hit-path").click()
    wait_for(driver, lambda d: count(d, "noteOpens") > before, f"hit {index}'s note to open")


def note_path(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, "note-path").text


def keep(driver, name: str, script: str | None = None) -> None:
    """With GROOVE_UI_SCREENSHOTS set, save the page as it is at 1200 x 800 CSS pixels (script runs after the
    resize, e.g. to scroll back to the marked lines)."""
    if not SCREENSHOTS:
        return
    width, height = SHOT_SIZE
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    try:
        if script:
            driver.execute_script(script)
        time.sleep(0.3)
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(Path(SCREENSHOTS) / name))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def console(driver) -> list[dict[str, Any]]:
    """The browser console's entries since the last read (reading empties it)."""
    return driver.get_log("browser")


def csp_violations(driver) -> list[dict[str, Any]]:
    return [e for e in console(driver) if "Content Security Policy" in e.get("message", "")]


def blocked_inline_handler(entry: dict[str, Any]) -> bool:
    """A console report that the page's policy stopped an inline event handler (`onerror=...`): evidence that
    one was blocked, not that it ran. Chromium reports them where the markup only sits in an inert parsed
    document; older versions said nothing, newer ones say "Executing inline event handler ... blocked"."""
    message = entry.get("message", "")
    return "inline event handler" in message and ("blocked" in message or "Refused to execute" in message)


def requests_elsewhere(driver, origin: str) -> list[str]:
    """What the page requested (its Resource Timing: images, fetches, frames ...) from anywhere but `origin`."""
    names = driver.execute_script("return performance.getEntriesByType('resource').map((e) => e.name)")
    return [name for name in names if not name.startswith(origin + "/")]

