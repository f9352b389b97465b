"""`groove changes` and the MCP tool `changes` (issue 38, point 6): the notes and sections added, edited, renamed or
deleted since a time, from the index's change history, for an assistant starting a session.

A real `groove serve` watches a real notes folder; the files change on disk and the answer comes from the running
service (the local socket, the MCP SDK client over HTTP) and from the index opened in process (`--no-daemon`),
alike. How each store records the history and nets it is tests/test_store_contract.py's (both stores); the netting
of a history's rows is tested here on rows as the stores write them.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client

from groove.sync.history import net_changes, parse_since
from tests.support.common import GROOVE, note, section_text, write
from tests.support.server import server_env

NOTES = {
    "cooking/teriyaki.md": note("Chicken teriyaki", "Soy sauce, mirin and sugar glaze the chicken thighs in a hot pan."),
    "garden/tomatoes.md": note("Growing tomatoes", "Tomato plants want full sun, deep watering and a stake to climb."),
}


def plan(sections: dict[str, int]) -> str:
    return "# Plan\n\n" + "".join(section_text(i, 60).replace(f"## Section {i}", f"## {h}") for h, i in sections.items())


def groove(spawn, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return spawn.run([*GROOVE, *argv], cwd=cwd, env=server_env(cwd), stdin=subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180)


@pytest.fixture(scope="module")
def served(spawn, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("changes")
    kb = root / "notes"
    for rel, text in NOTES.items():
        write(kb / rel, text)
    write(kb / "work/plan.md", plan({"Goals": 1, "Risks": 2, "Budget": 3}))
    index = root / "index.sqlite"
    server = spawn.server(kb, index, root)
    try:
        server.wait_healthy()
        server.wait_indexed(3)
        time.sleep(0.05)
        yield server, kb, index, root, exact(time.time())
    finally:
        server.terminate()


def exact(at: float) -> str:
    """An ISO time to the microsecond: the writes of the first scan and the edits of a test share a second."""
    return dt.datetime.fromtimestamp(at, tz=dt.UTC).isoformat()


def wait_for(check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def test_changes_from_the_running_service_and_in_process_list_the_same_edits_made_on_disk(spawn, served):
    server, kb, index, root, ready = served
    write(kb / "work/plan.md", plan({"Goals": 4, "Timeline": 5, "Budget": 3}))  # Goals edited, Risks gone
    (kb / "garden/tomatoes.md").unlink()
    write(kb / "journal/today.md", note("Today", "Ferries leave the harbour at nine."))

    def listed(*how: str) -> dict[str, Any]:
        done = groove(spawn, "changes", "--since", ready, "--kb", str(kb), "--index", str(index), "--format", "json",
                      *how, cwd=root)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def settled() -> dict[str, Any] | None:
        answer = listed()
        return answer if {n["path"] for n in answer["notes"]} >= {"work/plan.md", "garden/tomatoes.md",
                                                                   "journal/today.md"} else None

    answer = wait_for(settled)
    assert answer, f"the service never listed the three changes the watcher saw: {listed()}"
    alone = listed("--no-daemon")
    assert alone["notes"] == answer["notes"]  # one answer, whoever gives it
    by_path = {n["path"]: n for n in answer["notes"]}
    assert by_path["garden/tomatoes.md"]["change"] == "deleted" and by_path["journal/today.md"]["change"] == "added"
    assert by_path["work/plan.md"]["change"] == "edited"
    assert [(s["heading"], s["change"]) for s in by_path["work/plan.md"]["sections"]] == [
        ("Goals", "edited"), ("Timeline", "added"), ("Risks", "deleted")]

    text = groove(spawn, "changes", "--since", ready, "--kb", str(kb), "--index", str(index), cwd=root)
    assert text.returncode == 0 and "note(s) changed since" in text.stdout and "- garden/tomatoes.md (deleted" in text.stdout
    assert f"(pid {server.proc.pid})" in text.stderr and "loading model" not in text.stderr


def test_changes_names_each_section_edited_added_or_deleted_since_a_time_after_the_note_was_indexed(spawn, served):
    server, kb, index, root, ready = served
    before = time.time()
    write(kb / "work/roadmap.md", plan({"Goals": 11, "Timeline": 12, "Budget": 13}))

    def roadmap(since: str) -> dict[str, Any] | None:
        done = groove(spawn, "changes", "--since", since, "--kb", str(kb), "--index", str(index), "--format", "json",
                      cwd=root)
        assert done.returncode == 0, done.stderr
        found = [n for n in json.loads(done.stdout)["notes"] if n["path"] == "work/roadmap.md"]
        return found[0] if found else None

    assert wait_for(lambda: roadmap(exact(before)))["change"] == "added"
    time.sleep(1.1)
    since = time.time()
    time.sleep(1.1)  # the ISO time below is to the second, as a person writes it
    write(kb / "work/roadmap.md", plan({"Goals": 16, "Timeline": 12, "Budget": 17, "Notes": 18}))
    entry = wait_for(lambda: roadmap(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since + 1))))
    assert entry and entry["change"] == "edited"
    assert [(s["heading"], s["change"]) for s in entry["sections"]] == [
        ("Goals", "edited"), ("Budget", "edited"), ("Notes", "added")]


def test_the_mcp_changes_tool_answers_what_its_schema_says_and_a_bad_time_is_a_tool_error(spawn, served):
    server, kb, index, root, ready = served
    write(kb / "cooking/miso.md", note("Miso soup", "Dashi, miso and tofu; never boil the miso."))

    async def call(arguments: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        async with Client(server.url) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return await client.call_tool("changes", arguments), tools["changes"].output_schema

    def has_miso() -> tuple[Any, dict[str, Any]] | None:
        result, schema = anyio.run(call, {"since": "1h"})
        paths = [n["path"] for n in result.structured_content["notes"]]
        return (result, schema) if "cooking/miso.md" in paths else None

    got = wait_for(has_miso)
    assert got, "the tool never listed the note written on disk"
    result, schema = got
    assert not result.is_error
    jsonschema.validate(result.structured_content, schema, cls=jsonschema.Draft202012Validator)
    miso = next(n for n in result.structured_content["notes"] if n["path"] == "cooking/miso.md")
    assert miso["change"] == "added" and miso["uri"].startswith("groove://note/")
    assert "+ cooking/miso.md (added" in result.content[0].text

    bad, _ = anyio.run(call, {"since": "last tuesday"})
    assert bad.is_error and bad.content[0].text.startswith("since 'last tuesday' is neither a span back from now")
    limited, _ = anyio.run(call, {"since": "1h", "limit": 1})
    assert len(limited.structured_content["notes"]) == 1 and limited.structured_content["more"] >= 1


def test_a_bad_since_on_the_command_line_is_one_line_with_examples_and_exit_2(spawn, served):
    server, kb, index, root, ready = served
    for since, says in (("yesterday", "is neither a span back from now nor an ISO date/time (e.g. 7d, 24h"),
                        ("2999-01-01", "is in the future")):
        done = groove(spawn, "changes", "--since", since, "--kb", str(kb), "--index", str(index), cwd=root)
        assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith("groove: error: since"), done.stderr
        assert says in done.stderr
    as_json = groove(spawn, "changes", "--since", "nope", "--kb", str(kb), "--index", str(index), "--format", "json",
                     cwd=root)
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["exit_code"] == 2


# --- the netting, on rows as the stores write them (at, path, change, old path, file hash, sections JSON) -------


def rows(*events: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return [(float(i), *e) for i, e in enumerate(events)]


def test_a_note_added_then_deleted_since_the_time_is_not_listed_and_one_edited_then_deleted_is_deleted():
    entries = net_changes(rows(
        ("a.md", "added", None, "h1", "[]"),
        ("a.md", "edited", None, "h2", '[["edited", "Intro"]]'),
        ("a.md", "deleted", None, "h2", "[]"),
        ("b.md", "edited", None, "h3", '[["added", "New"]]'),
        ("b.md", "deleted", None, "h3", "[]"),
    ))
    assert [(e.path, e.change) for e in entries] == [("b.md", "deleted")]


def test_sections_net_added_then_edited_is_added_and_added_then_deleted_is_gone():
    [entry] = net_changes(rows(
        ("a.md", "edited", None, "h1", '[["added", "One"], ["added", "Two"], ["edited", "Three"]]'),
        ("a.md", "edited", None, "h2", '[["edited", "One"], ["deleted", "Two"], ["deleted", "Three"]]'),
    ))
    assert entry.change == "edited" and entry.sections == {"One": "added", "Three": "deleted"}


def test_a_rename_chain_is_one_rename_from_the_first_path_and_a_rename_back_with_no_edit_is_nothing():
    entries = net_changes(rows(
        ("b.md", "renamed", "a.md", "h1", "[]"),
        ("c.md", "renamed", "b.md", "h1", '[["edited", "Intro"]]'),
        ("y.md", "renamed", "x.md", "h2", "[]"),
        ("x.md", "renamed", "y.md", "h2", "[]"),
    ))
    assert [(e.path, e.change, e.old_path, e.sections) for e in entries] == [
        ("c.md", "renamed", "a.md", {"Intro": "edited"})]


def test_deleted_and_back_with_the_same_bytes_is_nothing_and_with_other_bytes_is_edited():
    same = net_changes(rows(("a.md", "deleted", None, "h1", "[]"), ("a.md", "added", None, "h1", "[]")))
    other = net_changes(rows(("a.md", "deleted", None, "h1", "[]"), ("a.md", "added", None, "h2", "[]")))
    assert same == [] and [(e.path, e.change) for e in other] == [("a.md", "edited")]


@pytest.mark.parametrize("text, back", [("30m", 1800), ("24h", 86400), ("7d", 7 * 86400), ("2w", 14 * 86400),
                                        (" 7D ", 7 * 86400), ("1.5h", 5400)])
def test_a_span_is_read_back_from_now(text, back):
    assert parse_since(text, 1_000_000_000.0) == 1_000_000_000.0 - back


def test_an_iso_time_with_a_zone_is_that_instant_and_a_date_is_local_midnight(monkeypatch):
    now = 2_000_000_000.0
    assert parse_since("2026-12-01T09:00:00+09:00", now) == parse_since("2026-12-01T00:00:00Z", now) == 1_796_083_200.0
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert parse_since("2026-12-01", now) == 1_796_083_200.0 - 9 * 3600
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_the_whats_new_prompt_starts_from_the_changes_tool_with_a_since_the_tool_takes(spawn, served):
    server, kb, index, root, ready = served

    async def go() -> tuple[str, Any]:
        async with Client(server.url) as client:
            prompt = (await client.get_prompt("whats_new", {})).messages[0].content.text
            since = prompt.split("1. Call `changes` with since '", 1)[1].split("'", 1)[0]
            return prompt, await client.call_tool("changes", {"since": since})

    prompt, result = anyio.run(go)
    assert prompt.index("`changes`") < prompt.index("`search`")  # the history first, then the dated notes
    assert not result.is_error and "note(s) changed since" in result.content[0].text
