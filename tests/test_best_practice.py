"""Best-practice documents on request: `[best_practice] path_templates` and the `get_best_practice` tool.

A real `groove serve --transport stdio` subprocess (the bag-of-words fake embedder: these tests are about
files and the protocol, not the model), a real MCP client (the Python SDK over stdio), real files: a
document per target under the notes folder, one in a folder outside it named by an absolute template,
a symbolic link that leads out, a file too large and one that is not UTF-8. Not configured, the tool is
not in tools/list at all.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from groove.config import ConfigError, load_settings
from groove.corpus.best_practice import BestPractices, headings, section_of
from tests.support.common import ROOT, note, write
from tests.support.docs import readme_tools
from tests.support.server import FAKE_GROOVE, serve_argv, server_env

PYTHON = """\
# Python practices

Read this before writing Python here.

## Testing

Use pytest; one behaviour per test.

```markdown
## Not a heading: inside a code block
```

### Fixtures

Prefer tmp_path over hand-made temporary folders.

## Packaging ##

pyproject.toml only; no setup.py.
"""

RUST = "# Rust\n\n## Errors\n\nUse thiserror in libraries and anyhow in binaries.\n"
WRITING = "# 文章の書き方\n\n## 見出し\n\n見出しは名詞で終える。\n\n## 表記\n\n数字は半角で書く。\n"
DOCKER = "# Docker\n\n## Images\n\nPin base images by digest.\n"
SECRET = "the secret outside the notes folder: do not leak\n"
TEMPLATE = "best-practices/{target}/PRACTICES.md"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("best-practice")
    kb = root / "notes"
    write(kb / "inbox.md", note("Inbox", "Buy tomato stakes."))
    write(kb / "best-practices/python/PRACTICES.md", PYTHON)
    write(kb / "best-practices/rust/PRACTICES.md", RUST)
    write(kb / "best-practices/文章/PRACTICES.md", WRITING)
    write(kb / "best-practices/.hidden/PRACTICES.md", "# hidden\n")
    (kb / "best-practices/empty").mkdir()  # a folder without a document is not a target
    write(root / "secret.md", SECRET)
    (kb / "best-practices/escape").mkdir()
    (kb / "best-practices/escape/PRACTICES.md").symlink_to(root / "secret.md")
    shared = root / "shared guides"  # outside the notes folder: named by an absolute template
    write(shared / "docker.md", DOCKER)
    write(shared / "huge.md", "# Huge\n\n" + "x" * 1_000_100 + "\n")
    (shared / "latin1.md").write_bytes("# Caf\xe9\n".encode("latin-1"))
    write(shared / "rust.md", "# Rust from the shared folder: the notes folder's template comes first\n")
    config = write(root / "groove.toml", "[best_practice]\npath_templates = [\n"
                   f'  "{TEMPLATE}",\n  "{shared}/{{target}}.md",\n]\n')
    plain = write(root / "plain.toml", "[search]\ndefault_limit = 5\n")
    return {"root": root, "kb": kb, "config": config, "plain": plain, "shared": shared}


def _params(spawn, library: dict[str, Path], config: Path) -> StdioServerParameters:
    argv = serve_argv(library["kb"], library["root"] / "index.sqlite", "--transport", "stdio", "--config", str(config),
                      command=FAKE_GROOVE)
    return spawn.stdio(command=argv[0], args=argv[1:], env=server_env(library["root"]), cwd=str(library["root"]))


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _session(spawn, library: dict[str, Path], config: Path, script) -> Any:
    async def go() -> Any:
        with anyio.fail_after(120):
            async with Client(_params(spawn, library, config)) as client:
                return await script(client)

    return anyio.run(go)


TARGETS_NAMED = "targets with a document: docker, huge, latin1, python, rust, 文章"


def test_the_tool_returns_a_document_a_section_or_an_error_naming_the_targets_over_stdio(spawn, library):
    kb = library["kb"]

    async def script(client: Client) -> dict[str, Any]:
        got: dict[str, Any] = {"tools": {t.name: t for t in (await client.list_tools()).tools}}
        calls = {
            "whole": {"target": "python"},
            "section": {"target": "python", "section": "testing"},
            "hashes": {"target": "python", "section": "## Packaging"},
            "japanese": {"target": "文章", "section": "表記"},
            "absolute": {"target": "docker"},
            "first_wins": {"target": "rust"},
            "unknown": {"target": "pyhton"},
            "no_section": {"target": "python", "section": "Deployment"},
            "in_code": {"target": "python", "section": "Not a heading: inside a code block"},
            "empty_section": {"target": "python", "section": "  "},
            "symlink": {"target": "escape"},
            "huge": {"target": "huge"},
            "latin1": {"target": "latin1"},
            "hidden": {"target": ".hidden"},
            "empty_folder": {"target": "empty"},
            "too_long": {"target": "p" * 101},
            "extra": {"target": "python", "chapter": "x"},
            "missing": {},
        }
        for key, args in calls.items():
            got[key] = await client.call_tool("get_best_practice", args)
        got["traversal"] = {bad: await client.call_tool("get_best_practice", {"target": bad})
                            for bad in ("../secret", "..", ".", "python/../../../secret", "/etc/passwd", "a\\..\\b",
                                        "", "escape/../../secret", "py\nthon", "%2e%2e", "python\x00")}
        write(kb / "best-practices/go/PRACTICES.md", "# Go\n\n## Errors\n\nWrap errors with %w.\n")
        got["added"] = await client.call_tool("get_best_practice", {"target": "go"})  # read now: no restart
        (kb / "best-practices/go/PRACTICES.md").unlink()
        return got

    got = _session(spawn, library, library["config"], script)

    tool = got["tools"]["get_best_practice"]
    listed, _ = readme_tools("en")
    assert sorted(got["tools"]) == sorted([*listed, "get_best_practice"])  # the README's seven and the optional one
    assert tool.input_schema["required"] == ["target"]
    assert tool.input_schema["properties"]["target"]["maxLength"] == 100
    assert tool.annotations.read_only_hint is True

    whole = got["whole"]
    assert not whole.is_error, _text(whole)
    assert whole.structured_content == {
        "target": "python", "path": "best-practices/python/PRACTICES.md", "section": None,
        "sections": ["Testing", "Packaging"], "size": len(PYTHON.encode()), "content": PYTHON,
    }
    assert _text(whole).startswith("best-practices/python/PRACTICES.md · best practice for python")
    assert _text(whole).endswith("---\n" + PYTHON)

    section = got["section"].structured_content
    assert section["section"] == "Testing"
    assert section["content"].startswith("## Testing\n") and "### Fixtures" in section["content"]
    assert "## Not a heading" in section["content"]  # a line in a code block is not a heading: the section goes on
    assert "Packaging" not in section["content"] and "Read this before" not in section["content"]
    assert got["hashes"].structured_content["content"] == "## Packaging ##\n\npyproject.toml only; no setup.py.\n"
    assert got["hashes"].structured_content["section"] == "Packaging"

    japanese = got["japanese"].structured_content
    assert japanese["content"] == "## 表記\n\n数字は半角で書く。\n" and japanese["sections"] == ["見出し", "表記"]

    absolute = got["absolute"].structured_content
    assert absolute["path"] == str(library["shared"] / "docker.md") and absolute["content"] == DOCKER
    assert got["first_wins"].structured_content["content"] == RUST

    for key, message in (
        ("unknown", "no best-practice document for target 'pyhton' (looked for best-practices/pyhton/PRACTICES.md, "
                    f"{library['shared']}/pyhton.md); {TARGETS_NAMED}"),
        ("no_section", "no section 'Deployment' in best-practices/python/PRACTICES.md; its ## sections: Testing | Packaging"),
        ("in_code", "no section 'Not a heading: inside a code block' in best-practices/python/PRACTICES.md"),
        ("empty_section", "section is empty: give one of the document's ## headings"),
        ("symlink", "the best-practice document best-practices/escape/PRACTICES.md leads outside the notes folder"),
        ("huge", "is 1000109 bytes, more than the 1000000 a best-practice document may have"),
        ("latin1", "is not UTF-8 text"),
        ("hidden", "target '.hidden' is not a target name"),
        ("empty_folder", "no best-practice document for target 'empty'"),
        ("too_long", "get_best_practice: target"),
        ("extra", "unknown argument 'chapter' for get_best_practice; it takes: target, section"),
        ("missing", "get_best_practice: target"),
    ):
        result = got[key]
        assert result.is_error, (key, _text(result))
        assert message in _text(result), (key, _text(result))
        assert "\n" not in _text(result) and SECRET.strip() not in _text(result)
    assert _text(got["symlink"]).endswith(TARGETS_NAMED)

    for bad, result in got["traversal"].items():
        assert result.is_error, (bad, _text(result))
        text = _text(result)
        assert ("is not a target name" in text or "target is empty" in text) and text.endswith(TARGETS_NAMED), (bad, text)
        assert SECRET.strip() not in text and result.structured_content is None

    assert got["added"].structured_content["content"].startswith("# Go")


def test_not_configured_the_tool_is_not_listed_and_a_call_is_an_unknown_tool(spawn, library):
    async def script(client: Client) -> tuple[set[str], MCPError]:
        names = {t.name for t in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("get_best_practice", {"target": "python"})
        return names, refused.value

    names, error = _session(spawn, library, library["plain"], script)
    listed, _ = readme_tools("en")
    assert names == set(listed) and "get_best_practice" not in names
    assert error.error.code == INVALID_PARAMS and "unknown tool 'get_best_practice'" in error.error.message


def test_the_readmes_name_the_optional_tool_beside_the_list_of_seven():
    for name in ("README.md", "README.ja.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "`get_best_practice`" in text and "`[best_practice]`" in text, name
    for lang in ("en", "ja"):
        assert "get_best_practice" not in readme_tools(lang)[0]  # listed only when configured


# --- the templates, the files and the sections, without a server ---------------------------

@pytest.mark.parametrize("template, message", [
    ("best-practices/PRACTICES.md", "has no {target}: write where the target's name goes"),
    ("best-practices/{name}/{target}.md", "{target} is the only placeholder a template may have"),
    ("../elsewhere/{target}.md", "steps out of its folder with '..'"),
    ("guides/{target}/../../x/{target}.md", "steps out of its folder with '..'"),
    ("guides\\{target}.md", "write paths with / and without control characters"),
    ("guides/{target}/", "names a folder: end it with the document's file name"),
])
def test_a_template_that_cannot_work_is_refused_when_the_settings_load(tmp_path: Path, template: str, message: str):
    config = write(tmp_path / "groove.toml", f"[best_practice]\npath_templates = ['{template}']\n")  # TOML literal
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    assert message in str(err.value) and "best_practice.path_templates" in str(err.value)


def test_a_template_that_is_not_a_list_of_strings_and_too_many_templates_are_refused(tmp_path: Path):
    with pytest.raises(ConfigError, match="best_practice.path_templates"):
        load_settings(write(tmp_path / "a.toml", '[best_practice]\npath_templates = "x/{target}.md"\n'))
    many = ", ".join(f'"t{i}/{{target}}.md"' for i in range(17))
    with pytest.raises(ConfigError, match="at most 16 items"):
        load_settings(write(tmp_path / "b.toml", f"[best_practice]\npath_templates = [{many}]\n"))


def test_not_configured_means_no_library_and_the_default_is_empty(tmp_path: Path, kb: Path):
    settings = load_settings(None, kb_path=kb)
    assert settings.best_practice.path_templates == [] and BestPractices.from_settings(settings) is None


def test_a_target_named_twice_in_a_template_must_be_the_same_name(kb: Path):
    write(kb / "guides/python/python.md", "# py\n")
    write(kb / "guides/python/rust.md", "# not a target: the two names differ\n")
    write(kb / "guides/go/go.md", "# go\n")
    library = BestPractices(["guides/{target}/{target}.md"], kb)
    assert library.targets() == ["go", "python"]
    assert library.answer("python").content == "# py\n"


def test_a_relative_template_never_leaves_the_notes_folder_even_through_a_linked_folder(tmp_path: Path, kb: Path):
    outside = tmp_path / "outside"
    write(outside / "python" / "PRACTICES.md", SECRET)
    (kb / "best-practices").symlink_to(outside, target_is_directory=True)
    library = BestPractices([TEMPLATE], kb)
    with pytest.raises(Exception, match="leads outside the notes folder") as err:
        library.answer("python")
    assert SECRET.strip() not in str(err.value)


def test_an_absolute_template_stays_inside_its_own_folder(tmp_path: Path, kb: Path):
    guides = tmp_path / "guides"
    write(guides / "python.md", "# py\n")
    write(tmp_path / "secret.md", SECRET)
    os.symlink(tmp_path / "secret.md", guides / "leak.md")
    library = BestPractices([f"{guides}/{{target}}.md"], kb)
    assert library.answer("python").path == str(guides / "python.md")
    with pytest.raises(Exception, match=re.escape(f"leads outside {guides}")):
        library.answer("leak")


def test_headings_in_fenced_code_and_setext_lines_are_not_sections():
    text = "# T\n\n~~~\n## fenced\n~~~\n\n## Real ##\n\ntext\n\n````\n```\n## still fenced\n````\n\n## Next\n"
    assert [(level, title) for _, level, title in headings(text)] == [(1, "T"), (2, "Real"), (2, "Next")]
    title, body = section_of(text, "real")
    assert title == "Real" and body.startswith("## Real ##\n") and "## still fenced" in body and "## Next" not in body
    assert section_of(text, "fenced") is None


def test_category_is_taken_as_the_old_name_of_section_and_both_must_agree(spawn, library):
    async def script(client: Client) -> dict[str, Any]:
        calls = {
            "category": {"target": "python", "category": "testing"},
            "section": {"target": "python", "section": "testing"},
            "agree": {"target": "python", "section": "## Testing", "category": "testing"},
            "differ": {"target": "python", "section": "Testing", "category": "Packaging"},
        }
        return {key: await client.call_tool("get_best_practice", args) for key, args in calls.items()}

    got = _session(spawn, library, library["config"], script)
    for key in ("category", "section", "agree"):
        assert not got[key].is_error, _text(got[key])
        assert got[key].structured_content["section"] == "Testing"
        assert "Use pytest; one behaviour per test." in got[key].structured_content["content"]
    assert got["category"].structured_content == got["section"].structured_content
    assert got["differ"].is_error
    assert _text(got["differ"]) == (
        "give section or category (its old name), not both: section 'Testing', category 'Packaging'"
    )
