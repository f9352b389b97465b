"""Reading the project's own Markdown pages: GitHub's heading anchors, and the tools a README lists."""

from __future__ import annotations

import re
import unicodedata

from markdown_it import MarkdownIt

from tests.support.common import ROOT

_md = MarkdownIt("commonmark").enable("table")
NUMBERS = {"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def heading_slugs(text: str) -> set[str]:
    """GitHub's anchors: lower case, punctuation and symbols dropped, spaces to hyphens."""
    tokens = _md.parse(text)
    slugs = set()
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            title = "".join(c.content for c in tokens[i + 1].children or () if c.type in ("text", "code_inline"))
            kept = "".join(ch for ch in title.lower()
                           if ch in " -_" or unicodedata.category(ch)[0] in "LMN")
            slugs.add(kept.replace(" ", "-"))
    return slugs


def readme_tools(lang: str) -> tuple[list[str], int]:
    """The tool names a README lists and the count it says in words."""
    if lang == "en":
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        m = re.search(r"^Tools \((\w+)\): (.*?);", text, re.M | re.S)
        assert m, "README.md has no 'Tools (N): ...;' sentence"
        return re.findall(r"`([a-z_]+)`", m.group(2)), NUMBERS[m.group(1)]
    text = (ROOT / "README.ja.md").read_text(encoding="utf-8")
    m = re.search(r"^ツールは (.*?) の (\d+) つです", text, re.M)
    assert m, "README.ja.md has no 'ツールは ... の N つです' sentence"
    return re.findall(r"`([a-z_]+)`", m.group(1)), int(m.group(2))
