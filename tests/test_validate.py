"""`groove validate`: frontmatter against the [validate] schema of a real groove.toml, over a real folder;
every finding with path and line, GitHub annotations, --fail-fast, exit codes."""

from __future__ import annotations

import json
import os
import sys

import pytest

from groove.config import load_settings
from groove.ops import validate
from tests.support.common import write

SCHEMA = """
[validate]
required = ["title"]
date_format = "%Y-%m-%d"

[validate.fields.status]
type = "string"
allowed = ["draft", "done"]
required = true

[validate.fields.date]
type = "date"

[validate.fields.tags]
type = "list"
allowed = ["geo", "food"]

[validate.fields.priority]
type = "integer"
"""


@pytest.fixture
def vault(kb, tmp_path):
    write(kb / "good.md", "---\ntitle: Good\nstatus: done\ndate: 2024-05-01\ntags: [geo]\npriority: 2\n---\n\n# Good\n")
    write(kb / "quoted-date.md", "---\ntitle: Quoted\nstatus: draft\ndate: '2024-05-01'\n---\nbody\n")
    write(kb / "bad.md", "---\ntitle: Bad\nstatus: finished\ndate: 01/05/2024\ntags:\n  - geo\n  - music\npriority: high\n---\nbody\n")
    write(kb / "sub/none.md", "# No frontmatter at all\n")
    write(kb / "broken.md", "---\ntitle: [unclosed\nstatus: done\n---\nbody\n")
    config = write(tmp_path / "groove.toml", f'kb_path = "{kb}"\nindex_path = "{tmp_path / "i.sqlite"}"\n' + SCHEMA)
    return config


def findings(report) -> list[tuple[str, int, str | None]]:
    return [(f["path"], f["line"], f["key"]) for f in report["findings"]]


def test_every_finding_has_the_path_and_the_line_of_the_key(vault):
    report = validate.validate(load_settings(vault))
    assert findings(report) == [
        ("bad.md", 3, "status"),      # finished: not allowed
        ("bad.md", 4, "date"),        # 01/05/2024: not %Y-%m-%d
        ("bad.md", 7, "tags"),        # the list item `music`, on its own line
        ("bad.md", 8, "priority"),    # high: not an integer
        ("broken.md", 3, None),       # YAML error where the parser noticed it
        ("sub/none.md", 1, "title"),  # no frontmatter: required keys missing at line 1
        ("sub/none.md", 1, "status"),
    ]
    messages = {(f["path"], f["key"]): f["message"] for f in report["findings"]}
    assert messages[("bad.md", "status")] == "`status` value 'finished' is not allowed; allowed: 'draft', 'done'"
    assert messages[("bad.md", "priority")] == "`priority` should be a whole number, got 'high'"
    assert "(format %Y-%m-%d)" in messages[("bad.md", "date")]
    assert report["notes_checked"] == 5 and report["exit_code"] == 1


def test_a_folder_that_fits_the_schema_passes(vault, kb):
    for name in ("bad.md", "sub/none.md", "broken.md"):
        (kb / name).unlink()
    report = validate.validate(load_settings(vault))
    assert report["findings"] == [] and report["exit_code"] == 0


def test_without_a_schema_only_broken_frontmatter_is_reported(kb, make_settings):
    write(kb / "ok.md", "---\nanything: goes\n---\n")
    write(kb / "broken.md", "---\ntitle: [unclosed\n---\n")
    write(kb / "open.md", "---\ntitle: never closed\n")
    report = validate.validate(make_settings(kb))
    assert findings(report) == [("broken.md", 2, None), ("open.md", 1, None)]
    assert not report["schema"] and "no [validate] schema" in validate.format_text(report)


def test_the_cli_prints_github_annotations_and_stops_early_with_fail_fast(spawn, vault, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "groove.cli", "validate", "--config", str(vault)]
    gh = spawn.run(cmd + ["--format", "github"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert gh.returncode == 1
    lines = gh.stdout.splitlines()
    assert len(lines) == 7
    assert lines[0] == ("::error file=notes/bad.md,line=3,title=groove validate::"
                        "`status` value 'finished' is not allowed; allowed: 'draft', 'done'")
    fast = spawn.run(cmd + ["--fail-fast", "--format", "json"], cwd=tmp_path, env=env, capture_output=True, text=True)
    report = json.loads(fast.stdout)
    assert fast.returncode == 1 and len(report["findings"]) == 1 and report["stopped_early"]
    text = spawn.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "notes/sub/none.md:1: required key `title` is missing" in text.stdout


def test_a_schema_with_an_unknown_type_is_a_config_error_that_names_the_key(spawn, vault, tmp_path):
    write(vault, vault.read_text() + '\n[validate.fields.mood]\ntype = "feeling"\n')
    proc = spawn.run([sys.executable, "-m", "groove.cli", "validate", "--config", str(vault)],
                          cwd=tmp_path, env={**os.environ}, capture_output=True, text=True)
    assert proc.returncode == 2 and "validate.fields.mood.type" in proc.stderr
