"""Every page a user reads has a Japanese twin (`X.md` -> `X.ja.md`) that stays in step with it.

User pages: README.md and the docs/ pages about using groove (docs/scale-out.md included: the manual of a
store several machines share). Developer pages stay English only: docs/ARCHITECTURE.md,
docs/benchmarks.md (written by `make bench`), docs/benchmarks-history.md and docs/decisions/ (why it is
built that way) are read by people who work on groove, not by its users.

A twin is in step when it carries the same fenced code blocks (verbatim: commands, config and
output are not translated), the same `inline code` tokens (setting keys, flags, file names,
values), and a link to its English page at the top, while the English page links to it. Its
paragraphs are not wrapped between Japanese characters, where a browser would show a space. The
checker below is tried on hand-made broken twins first, so a check that cannot fail is caught.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

from tests.support.common import ROOT
from tests.support.docs import heading_slugs

USER_PAGES = (
    "README.md",
    "docs/search.md",
    "docs/indexing.md",
    "docs/embedding.md",
    "docs/mcp.md",
    "docs/clients.md",
    "docs/configuration.md",
    "docs/service.md",
    "docs/evaluation.md",
    "docs/operations.md",
    "docs/scale-out.md",
)
# For developers, English only (see the module docstring); docs/decisions/ is not listed: it is a folder of records.
DEVELOPER_PAGES = ("docs/ARCHITECTURE.md", "docs/benchmarks.md", "docs/benchmarks-history.md")

LINK_LINES_WITHIN = 5  # "at the top": the twin link is on one of the first lines
MIN_JAPANESE_SHARE = 0.5  # of the letters in a twin's prose (code excluded): a copy of the English page is not a twin

_md = MarkdownIt("commonmark").enable("table")


def twin_of(page: Path) -> Path:
    return page.with_name(page.stem + ".ja.md")


def english_link_line(page: Path) -> str:
    return f"日本語: [{twin_of(page).name}]({twin_of(page).name})"


def japanese_link_line(page: Path) -> str:
    return f"English: [{page.name}]({page.name})"


def _inline_tokens(text: str):
    for token in _md.parse(text):
        if token.type == "inline":
            yield from token.children or ()


def fenced_blocks(text: str) -> list[str]:
    """Each fenced code block as its info string and content, exactly."""
    return [f"```{t.info}\n{t.content}" for t in _md.parse(text) if t.type == "fence"]


def inline_code(text: str) -> set[str]:
    return {t.content for t in _inline_tokens(text) if t.type == "code_inline"}


def links(text: str) -> list[str]:
    """Link targets as written (markdown-it percent-encodes them: `#融合` comes back as `#%E8%9E%8D%E5%90%88`)."""
    return [unquote(t.attrs["href"]) for t in _inline_tokens(text) if t.type == "link_open"]


def prose_japanese_share(text: str) -> float:
    """Share of Japanese letters (kana, kanji) among the letters outside code."""
    prose = "".join(t.content for t in _inline_tokens(text) if t.type == "text")
    letters = [ch for ch in prose if unicodedata.category(ch).startswith("L")]
    japanese = [ch for ch in letters if re.match(r"[\u3040-\u30ff\u3400-\u9fff]", ch)]
    return len(japanese) / max(1, len(letters))


_JAPANESE = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]")


def breaks_inside_japanese(text: str) -> list[str]:
    """Soft line breaks between two Japanese characters: browsers render each one as a stray space."""
    found = []
    for token in _md.parse(text):
        children = (token.children or []) if token.type == "inline" else []
        for before, brk, after in zip(children, children[1:], children[2:]):
            if (brk.type == "softbreak" and before.type == "text" and after.type == "text"
                    and _JAPANESE.match(before.content[-1:]) and _JAPANESE.match(after.content[:1])):
                found.append(before.content[-12:] + "⏎" + after.content[:12])
    return found


def unrendered_bold(text: str) -> list[str]:
    """`**` left as text: CommonMark does not close bold after a full-width bracket that a letter follows."""
    return [t.content for t in _inline_tokens(text) if t.type == "text" and "**" in t.content]


def _multiset_gap(ours: list[str], theirs: list[str]) -> list[str]:
    return sorted((Counter(ours) - Counter(theirs)).elements())


def _first_line(block: str) -> str:
    lines = block.split("\n")
    return lines[1] if len(lines) > 1 and lines[1] else lines[0]


def drift(english: Path, japanese: Path, root: Path) -> list[str]:
    """What keeps `japanese` from being the twin of `english`, one sentence per problem."""
    en_name, ja_name = english.relative_to(root), japanese.relative_to(root)
    if not japanese.is_file():
        return [f"{en_name} has no Japanese twin: write {ja_name} (a translation of {en_name})"]
    en, ja = english.read_text(encoding="utf-8"), japanese.read_text(encoding="utf-8")
    problems = []
    if english_link_line(english) not in en.splitlines()[:LINK_LINES_WITHIN]:
        problems.append(f"{en_name} does not link to its twin at the top: add the line `{english_link_line(english)}`")
    if japanese_link_line(english) not in ja.splitlines()[:LINK_LINES_WITHIN]:
        problems.append(f"{ja_name} does not link to its English page at the top: add the line `{japanese_link_line(english)}`")
    en_blocks, ja_blocks = fenced_blocks(en), fenced_blocks(ja)
    for block in _multiset_gap(en_blocks, ja_blocks):
        problems.append(f"{ja_name} lacks the code block of {en_name} that starts `{_first_line(block)}` (copy it verbatim)")
    for block in _multiset_gap(ja_blocks, en_blocks):
        problems.append(f"{ja_name} has a code block that {en_name} no longer has, starting `{_first_line(block)}`")
    en_code, ja_code = inline_code(en), inline_code(ja)
    for token in sorted(en_code - ja_code):
        problems.append(f"{ja_name} never mentions `{token}`, which {en_name} does")
    for token in sorted(ja_code - en_code):
        problems.append(f"{ja_name} mentions `{token}`, which {en_name} does not (any more)")
    share = prose_japanese_share(ja)
    if share < MIN_JAPANESE_SHARE:
        problems.append(f"{ja_name} is not written in Japanese: {share:.0%} of its prose letters are kana or kanji")
    for where in breaks_inside_japanese(ja):
        problems.append(f"{ja_name} breaks a line between Japanese characters ({where}): join the lines, "
                        "a browser shows the break as a space")
    for text in unrendered_bold(ja):
        at = text.index("**")
        problems.append(f"{ja_name} has bold that does not render ({text[max(0, at - 8):at + 12]}): "
                        "end it before the full-width bracket, `**固定**（frozen）`")
    for href in links(ja):
        if re.match(r"[a-z][a-z0-9+.-]*:", href) or href.startswith("#"):
            continue
        target, _, anchor = href.partition("#")
        path = (japanese.parent / target).resolve()
        if not path.exists():
            problems.append(f"{ja_name} links to {href}, which does not exist")
        elif path.suffix == ".md" and path != english.resolve() and twin_of(path).is_file():
            problems.append(f"{ja_name} links to the English {href}: link its twin {twin_of(Path(target)).as_posix()}")
        elif anchor and path.suffix == ".md" and anchor not in heading_slugs(path.read_text(encoding="utf-8")):
            problems.append(f"{ja_name} links to {href}, but {path.name} has no heading with that anchor")
    return problems


def unclassified_pages(root: Path) -> list[str]:
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    known = {root / p for p in USER_PAGES + DEVELOPER_PAGES}
    return [str(p.relative_to(root)) for p in pages
            if not p.name.endswith(".ja.md") and p.exists() and p not in known]


# The checker, tried on broken twins.

ENGLISH = """日本語: [page.ja.md](page.ja.md)

# Page

Set `search.mmr.lambda` in `groove.toml`; see [other](other.md#the-part).

```sh
groove index --kb ~/notes
```
"""

JAPANESE = """English: [page.md](page.md)

# ページ

`groove.toml` の `search.mmr.lambda` を設定します。[別のページ](other.ja.md#その部分)を参照してください。

```sh
groove index --kb ~/notes
```
"""


@pytest.fixture
def pages(tmp_path: Path) -> Path:
    (tmp_path / "page.md").write_text(ENGLISH, encoding="utf-8")
    (tmp_path / "page.ja.md").write_text(JAPANESE, encoding="utf-8")
    (tmp_path / "other.md").write_text("# The part\n", encoding="utf-8")
    (tmp_path / "other.ja.md").write_text("# その部分\n", encoding="utf-8")
    return tmp_path


def check(root: Path, japanese: str | None = None, english: str | None = None) -> list[str]:
    if japanese is not None:
        (root / "page.ja.md").write_text(japanese, encoding="utf-8")
    if english is not None:
        (root / "page.md").write_text(english, encoding="utf-8")
    return drift(root / "page.md", root / "page.ja.md", root)


def test_the_checker_accepts_a_twin_in_step(pages: Path) -> None:
    assert check(pages) == []


def test_the_checker_reports_a_page_without_a_twin(pages: Path) -> None:
    (pages / "page.ja.md").unlink()
    assert check(pages) == ["page.md has no Japanese twin: write page.ja.md (a translation of page.md)"]


def test_the_checker_reports_a_twin_that_lost_a_code_block(pages: Path) -> None:
    problems = check(pages, japanese=JAPANESE.replace("groove index --kb ~/notes", "groove index"))
    assert "page.ja.md lacks the code block of page.md that starts `groove index --kb ~/notes` (copy it verbatim)" in problems


def test_the_checker_reports_a_code_block_added_to_the_english_page_only(pages: Path) -> None:
    problems = check(pages, english=ENGLISH + "\n```toml\n[search]\ndefault_limit = 10\n```\n")
    assert problems == ["page.ja.md lacks the code block of page.md that starts `[search]` (copy it verbatim)"]


def test_the_checker_reports_a_setting_key_the_twin_lacks(pages: Path) -> None:
    problems = check(pages, japanese=JAPANESE.replace("`search.mmr.lambda`", "MMR の lambda"))
    assert problems == ["page.ja.md never mentions `search.mmr.lambda`, which page.md does"]


def test_the_checker_reports_a_setting_key_the_english_page_dropped(pages: Path) -> None:
    problems = check(pages, english=ENGLISH.replace("`search.mmr.lambda`", "the MMR weight"))
    assert problems == ["page.ja.md mentions `search.mmr.lambda`, which page.md does not (any more)"]


def test_the_checker_reports_missing_links_between_twins(pages: Path) -> None:
    problems = check(pages, english=ENGLISH.split("\n", 2)[2], japanese=JAPANESE.split("\n", 2)[2])
    assert problems == [
        "page.md does not link to its twin at the top: add the line `日本語: [page.ja.md](page.ja.md)`",
        "page.ja.md does not link to its English page at the top: add the line `English: [page.md](page.md)`",
    ]


def test_the_checker_reports_an_untranslated_copy(pages: Path) -> None:
    copy = ENGLISH.replace("日本語: [page.ja.md](page.ja.md)", "English: [page.md](page.md)").replace(
        "other.md#the-part", "other.ja.md#その部分")
    problems = check(pages, japanese=copy)
    assert len(problems) == 1 and problems[0].startswith("page.ja.md is not written in Japanese: 0% of its prose")


def test_the_checker_reports_a_line_break_inside_japanese_text(pages: Path) -> None:
    problems = check(pages, japanese=JAPANESE.replace("設定します。", "設定\nします。"))
    assert problems == ["page.ja.md breaks a line between Japanese characters ( を設定⏎します。): join the lines, "
                        "a browser shows the break as a space"]


def test_the_checker_reports_bold_that_does_not_render(pages: Path) -> None:
    problems = check(pages, japanese=JAPANESE.replace("を設定します。", "を**設定（set）**します。"))
    assert problems == ["page.ja.md has bold that does not render ( を**設定（set）**し): "
                        "end it before the full-width bracket, `**固定**（frozen）`"]
    assert check(pages, japanese=JAPANESE.replace("を設定します。", "を**設定**（set）します。")) == []


def test_the_checker_reports_links_to_english_pages_and_broken_anchors(pages: Path) -> None:
    assert check(pages, japanese=JAPANESE.replace("other.ja.md#その部分", "other.md")) == [
        "page.ja.md links to the English other.md: link its twin other.ja.md"]
    assert check(pages, japanese=JAPANESE.replace("#その部分", "#the-part")) == [
        "page.ja.md links to other.ja.md#the-part, but other.ja.md has no heading with that anchor"]
    assert check(pages, japanese=JAPANESE.replace("other.ja.md#その部分", "gone.ja.md")) == [
        "page.ja.md links to gone.ja.md, which does not exist"]


def test_heading_anchors_follow_githubs_rule() -> None:
    # The anchors the English pages already link to, as GitHub renders them.
    assert "embeddingopenai-an-openai-compatible-embeddings-server" in heading_slugs(
        "### `[embedding.openai]`: an OpenAI-compatible embeddings server\n")
    assert "埋め込みバックエンドmcp-の設定" in heading_slugs("## 埋め込みバックエンド（MCP の設定）\n")


def test_a_new_docs_page_must_be_declared_a_user_or_a_developer_page(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    for page in ("README.md", "docs/search.md", "docs/search.ja.md", "docs/ARCHITECTURE.md", "docs/new.md"):
        (tmp_path / page).write_text("# x\n", encoding="utf-8")
    assert unclassified_pages(tmp_path) == ["docs/new.md"]


# The real pages.

def test_every_docs_page_is_declared_a_user_or_a_developer_page() -> None:
    assert unclassified_pages(ROOT) == [], (
        "add each page to USER_PAGES (and write its .ja.md twin) or, if only developers read it, to DEVELOPER_PAGES")


@pytest.mark.parametrize("page", USER_PAGES)
def test_every_user_page_has_a_japanese_twin_in_step(page: str) -> None:
    problems = drift(ROOT / page, twin_of(ROOT / page), ROOT)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("page", DEVELOPER_PAGES)
def test_developer_pages_have_no_twin_to_keep_in_step(page: str) -> None:
    assert (ROOT / page).is_file(), f"{page} is listed as a developer page but does not exist"
    assert not twin_of(ROOT / page).exists(), f"{page} is for developers: a twin would go stale unchecked"
