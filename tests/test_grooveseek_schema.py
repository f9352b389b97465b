"""GrooveSeek's groove-schema.toml in `groove validate` (issue 38, point 2): every rule it defines (required, type,
pattern, enum, min_length, max_length, allow_empty), the same verdicts on the same notes. Each case is a real note
file; its expected violations were worked out by hand from GrooveSeek's documented semantics (its schema example's
header and docs/clients.md "Frontmatter schema validation"):

- required: a missing key, an empty string or an empty array is a violation, unless allow_empty; a key written
  without a value (`depth:`) counts as missing;
- type: "string" for title/date/topic/depth, "array" for tags; every single value is read as the text it is
  written as (an unquoted 2026-01-05 is the text "2026-01-05", depth: 2 is "2");
- min_length / max_length: characters of a string (not bytes), items of an array, both bounds inclusive;
- pattern: a match anywhere in the string (anchor it with ^ and $), or in every item of an array;
- enum: the string, or every item of an array, equal to one of the values;
- a frontmatter block that is not YAML is one violation; a note without one misses every required key.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from groove.ops import validate
from tests.support.common import ROOT, write

FIXTURES = ROOT / "tests" / "fixtures" / "grooveseek"
GOOD = "title: RRF の話\ndate: 2026-01-05\ntopic: search\ntags: [fusion, rrf]\n"


def note(front: str | None) -> str:
    return "# A note\n\nbody\n" if front is None else f"---\n{front}---\n\n# A note\n\nbody\n"


# name -> (frontmatter, the violations GrooveSeek reports: {(key, kind)}), against tests/fixtures/grooveseek/
# groove-schema.toml (title: required string, 2+ characters; date: required string matching ^\d{4}-\d{2}-\d{2}$;
# topic: required string in [search, notes, ops]; depth: optional string in ["1", "2", "3"]; tags: required
# array of 1 to 3 items).
EXAMPLE_CASES: dict[str, tuple[str | None, set[tuple[str | None, str]]]] = {
    "all-good": (GOOD, set()),
    "unquoted-date-and-number-depth": (GOOD + "depth: 2\n", set()),
    "quoted-date": (GOOD.replace("2026-01-05", "'2026-01-05'"), set()),
    "two-kanji-title": (GOOD.replace("RRF の話", "検索"), set()),  # 2 characters, 6 bytes
    "one-character-title": (GOOD.replace("RRF の話", "A"), {("title", "length")}),
    "empty-title": (GOOD.replace("RRF の話", "''"), {("title", "missing")}),
    "title-without-value": (GOOD.replace("RRF の話", ""), {("title", "missing")}),
    "no-title": (GOOD.replace("title: RRF の話\n", ""), {("title", "missing")}),
    "slashed-date": (GOOD.replace("2026-01-05", "2026/01/05"), {("date", "pattern")}),
    "date-with-time": (GOOD.replace("2026-01-05", "'2026-01-05T10:00'"), {("date", "pattern")}),
    "topic-not-listed": (GOOD.replace("topic: search", "topic: music"), {("topic", "enum")}),
    "topic-wrong-case": (GOOD.replace("topic: search", "topic: Search"), {("topic", "enum")}),
    "depth-not-listed": (GOOD + "depth: 4\n", {("depth", "enum")}),
    "depth-without-value": (GOOD + "depth:\n", set()),  # a key with no value is absent, and depth is optional
    "no-tags": (GOOD.replace("tags: [fusion, rrf]\n", ""), {("tags", "missing")}),
    "empty-tags": (GOOD.replace("[fusion, rrf]", "[]"), {("tags", "missing")}),
    "three-tags": (GOOD.replace("[fusion, rrf]", "[a, b, c]"), set()),
    "four-tags": (GOOD.replace("[fusion, rrf]", "[a, b, c, d]"), {("tags", "length")}),
    "several-at-once": (
        "title: X\ndate: 05/01/2026\ntopic: music\ntags: [a, b, c, d]\n",
        {("title", "length"), ("date", "pattern"), ("topic", "enum"), ("tags", "length")},
    ),
    "no-frontmatter": (None, {("title", "missing"), ("date", "missing"), ("topic", "missing"), ("tags", "missing")}),
    "not-yaml": ("title: [unclosed\ndate: 2026-01-05\n", {(None, "unparsed")}),
}

# Against tests/fixtures/grooveseek/groove-schema.allow-empty.toml (topic: required string, allow_empty; tags:
# required array, allow_empty, at most 2 items, each matching ^[a-z0-9-]+$).
ALLOW_EMPTY_CASES: dict[str, tuple[str | None, set[tuple[str | None, str]]]] = {
    "empty-string-allowed": ("topic: ''\ntags: [ok]\n", set()),
    "empty-array-allowed": ("topic: x\ntags: []\n", set()),
    "missing-is-still-missing": ("tags: [ok]\n", {("topic", "missing")}),
    "no-value-is-still-missing": ("topic:\ntags: [ok]\n", {("topic", "missing")}),
    "pattern-on-each-item": ("topic: x\ntags: [ok-1, Bad Tag]\n", {("tags", "pattern")}),
    "every-bad-item-once": ("topic: x\ntags: [A, B]\n", {("tags", "pattern")}),
    "too-many-items": ("topic: x\ntags: [a, b, c]\n", {("tags", "length")}),
}


def kind(message: str) -> str:
    """The GrooveSeek violation a groove finding is (groove words them as sentences)."""
    for fragment, name in (
        ("is missing", "missing"),
        ("has no value", "missing"),
        ("is empty", "missing"),
        ("does not match pattern", "pattern"),
        ("is not one of", "enum"),
        ("should have", "length"),
        ("should be", "type"),
        ("not valid YAML", "unparsed"),
    ):
        if fragment in message:
            return name
    raise AssertionError(f"a finding of no known kind: {message}")


def verdicts(kb: Path, schema: Path, cases: dict, make_settings) -> dict[str, set[tuple[str | None, str]]]:
    """Each case as a note in `kb`, the schema as GrooveSeek places it (<kb>/groove-schema.toml), groove validate."""
    shutil.copy(schema, kb / "groove-schema.toml")
    for name, (front, _) in cases.items():
        write(kb / f"{name}.md", note(front))
    report = validate.validate(make_settings(kb))
    assert report["schema_file"] == str(kb / "groove-schema.toml") and report["notes_checked"] == len(cases)
    found: dict[str, set[tuple[str | None, str]]] = {name: set() for name in cases}
    for f in report["findings"]:
        found[f["path"].removesuffix(".md")].add((f["key"], kind(f["message"])))
    return found


@pytest.mark.parametrize(
    ("schema", "cases"),
    [("groove-schema.toml", EXAMPLE_CASES), ("groove-schema.allow-empty.toml", ALLOW_EMPTY_CASES)],
    ids=["example", "allow-empty"],
)
def test_grooveseeks_schema_gives_grooveseeks_verdicts_on_each_note(kb, make_settings, schema, cases):
    found = verdicts(kb, FIXTURES / schema, cases, make_settings)
    wrong = {name: (found[name], want) for name, (_, want) in cases.items() if found[name] != want}
    assert not wrong, f"(got, GrooveSeek's) differ: {wrong}"


def test_a_rule_that_fails_names_the_value_and_the_rule(kb, make_settings):
    shutil.copy(FIXTURES / "groove-schema.toml", kb / "groove-schema.toml")
    write(kb / "n.md", note("title: X\ndate: 2026/01/05\ntopic: music\ntags: [a, b, c, d]\n"))
    report = validate.validate(make_settings(kb))
    messages = {f["key"]: (f["line"], f["message"]) for f in report["findings"]}
    assert messages == {
        "title": (2, "`title` has 1 character(s), should have at least 2"),
        "date": (3, r"`date` value '2026/01/05' does not match pattern ^\d{4}-\d{2}-\d{2}$"),
        "topic": (4, "`topic` value 'music' is not one of 'search', 'notes', 'ops'"),
        "tags": (5, "`tags` has 4 item(s), should have at least 1 and at most 3"),
    }


def test_groove_s_own_string_type_still_wants_text_unless_values_are_read_as_written(kb, make_settings):
    # groove's own schema keeps its reading (a YAML date is a date, not text); GrooveSeek's file reads as written.
    write(kb / "n.md", note("date: 2026-01-05\n"))
    own = make_settings(kb, **{"validate.fields": {"date": {"type": "string", "pattern": "^2026"}}})
    assert [kind(f["message"]) for f in validate.validate(own)["findings"]] == ["type"]
    written = make_settings(
        kb, **{"validate.fields": {"date": {"type": "string", "pattern": "^2026"}}, "validate.values_as_written": True}
    )
    assert validate.validate(written)["findings"] == []


def test_the_cli_finds_the_schema_in_the_notes_folder_and_exits_1_on_violations(spawn, kb, tmp_path):
    shutil.copy(FIXTURES / "groove-schema.toml", kb / "groove-schema.toml")
    write(kb / "good.md", note(GOOD))
    write(kb / "bad.md", note(GOOD.replace("topic: search", "topic: music")))
    proc = spawn.groove("validate", "--kb", str(kb), "--format", "json", home=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and [(f["path"], f["key"]) for f in report["findings"]] == [("bad.md", "topic")]
    (kb / "bad.md").unlink()
    clean = spawn.groove("validate", "--kb", str(kb), home=tmp_path)
    assert clean.returncode == 0 and "1 note(s) checked: all valid" in clean.stdout


def test_a_broken_grooveseek_schema_is_one_line_and_exit_2(spawn, kb, tmp_path):
    write(kb / "groove-schema.toml", "[fields.title]\npattern = '(unclosed'\n")
    proc = spawn.groove("validate", "--kb", str(kb), home=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "fields.title.pattern" in proc.stderr and "is not a regular expression" in proc.stderr


def test_a_grooveseek_schema_under_another_name_reads_the_same_through_schema(kb, make_settings, tmp_path):
    elsewhere = Path(shutil.copy(FIXTURES / "groove-schema.toml", tmp_path / "ci-schema.toml"))
    write(kb / "n.md", note(GOOD + "depth: 2\n"))  # an unquoted date and a number: text to GrooveSeek
    assert validate.validate(make_settings(kb), schema=elsewhere)["findings"] == []
    own = write(tmp_path / "own.toml", '[fields.date]\ntype = "string"\n')  # groove's own shape: a date is a date
    assert [kind(f["message"]) for f in validate.validate(make_settings(kb), schema=own)["findings"]] == ["type"]
