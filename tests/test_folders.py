"""Several notes folders in one service (issue 24 point 2): `--kb` repeats and `kb_path` takes a list, each
folder's notes are answered under its name, each keeps its own ignore rules and watcher, one writer and one
index file, and adding or removing a folder re-embeds nothing of the others.

Real files on disk, a real SQLite index (the bag-of-words fake embedder: these tests are not about the
model), the real watcher in the daemon, a real `groove serve` over HTTP with a real MCP client, the command
line, and the service planner writing real unit files.
"""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import anyio
import pytest

from groove.api.service import ListRequest, SearchRequest
from groove.autostart import install as installer
from groove.autostart import instances, platforms
from groove.config import ConfigError, load_settings
from groove.daemon import Daemon
from groove.errors import UsageError
from groove.index import Index
from tests.support.browser import hit_paths, load, note_path, open_hit, run_search, wait_for
from tests.support.common import eventually, write
from tests.support.daemon import running
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once
from tests.support.server import FAKE_GROOVE, serve_argv, server_env

TIMEOUT = 60.0


def note(title: str, body: str) -> str:
    return f"# {title}\n\n{body}\n"


@pytest.fixture
def two(tmp_path: Path) -> dict[str, Path]:
    """Two vaults: `alpha` (English) and `beta` (Japanese and English), each with a drafts/ folder."""
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    write(alpha / "tea.md", note("Tea", "Green tea is brewed at eighty degrees for a gentle cup."))
    write(alpha / "drafts" / "idea.md", note("Idea", "An unfinished thought about kettles."))
    write(alpha / ".grooveignore", "drafts/\n")  # alpha's own rule: beta's drafts stay indexed
    write(beta / "coffee.md", note("Coffee", "Espresso wants a fine grind. Compare [[tea]] and [[sencha]]."))
    write(beta / "sencha.md", note("煎茶", "煎茶は七十度のお湯で淹れる。取り扱いに注意。"))
    write(beta / "drafts" / "grinder.md", note("Grinder", "Burr grinders keep espresso even."))
    return {"alpha": alpha, "beta": beta}


def settings_of(tmp_path: Path, *folders: object, **overrides):
    overrides.setdefault("index_path", tmp_path / "index.sqlite")
    return load_settings(None, kb_path=list(folders), **overrides)


async def paths_in(settings) -> set[str]:
    async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as index:
        page = await index.list_documents(limit=500)
    return {d.path for d in page.documents}


# --- naming folders ---------------------------------------------------------------------------------

def test_a_folder_is_named_by_its_base_name_unless_given_one_and_japanese_names_work(tmp_path, two):
    settings = settings_of(tmp_path, str(two["alpha"]), f"仕事={two['beta']}")
    assert [(f.name, f.path) for f in settings.kb_path] == [("alpha", two["alpha"]), ("仕事", two["beta"])]
    # `name = path` with spaces, as in groove.toml, and a path with '=' in it is a path
    odd = write(tmp_path / "a=b" / "x.md", "x")
    settings = settings_of(tmp_path, f"work = {two['alpha']}", f"{odd.parent}/")
    assert [f.name for f in settings.kb_path] == ["work", "a-b"]


@pytest.mark.parametrize("make, message", [
    (lambda d: [f"x={d['alpha']}", f"x={d['beta']}"], "two notes folders are named 'x'"),
    (lambda d: [str(d["alpha"]), str(d["alpha"])], "is given twice"),
    (lambda d: [str(d["alpha"]), str(d["alpha"] / "drafts")], "is inside the notes folder"),
    (lambda d: [{"name": "../up", "path": str(d["alpha"])}], "cannot name a notes folder"),
    (lambda d: [{"name": "a", "where": str(d["alpha"])}], "a notes folder is written"),
    (lambda d: ["x=", str(d["beta"])], None),  # "x=" is a folder named "x=" relative to the cwd: must exist
])
def test_folders_that_cannot_be_served_together_are_refused_with_a_way_out(tmp_path, two, make, message):
    if message is None:
        with pytest.raises(ConfigError, match="does not exist or is not a folder"):
            settings_of(tmp_path, *make(two)).folders()
        return
    with pytest.raises(ConfigError, match=message):
        settings_of(tmp_path, *make(two))


def test_a_clash_of_base_names_says_how_to_name_one(tmp_path):
    a, b = tmp_path / "one" / "notes", tmp_path / "two" / "notes"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    with pytest.raises(ConfigError) as err:
        settings_of(tmp_path, str(a), str(b))
    assert "two notes folders are named 'notes'" in str(err.value) and f"--kb notes2={b}" in str(err.value)


def test_kb_path_as_a_list_in_groove_toml_is_read_relative_to_the_file(tmp_path, two):
    cfg = write(tmp_path / "groove.toml",
                'kb_path = ["alpha", "b = beta", {name = "again", path = "./alpha/drafts/../../beta/drafts"}]\n')
    with pytest.raises(ConfigError, match="is inside the notes folder"):
        load_settings(cfg)  # beta/drafts is inside beta
    write(cfg, 'kb_path = ["alpha", "b = beta"]\nindex_path = "i.sqlite"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    settings = load_settings(cfg)
    assert [(f.name, f.path) for f in settings.kb_path] == [("alpha", two["alpha"]), ("b", two["beta"])]


def test_every_relative_folder_of_a_list_is_read_against_the_same_base(tmp_path, two):
    from groove.folders import parse_folders

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)  # not the base: a path read against the cwd would be elsewhere/alpha
    folders = parse_folders(["alpha", "b = beta"], base=tmp_path)
    assert [(f.name, f.path) for f in folders] == [("alpha", two["alpha"]), ("b", two["beta"])]


def test_groove_kb_path_takes_one_folder_or_a_json_list(tmp_path, two, monkeypatch):
    monkeypatch.setenv("GROOVE_KB_PATH", str(two["alpha"]))
    assert [f.name for f in load_settings(None).kb_path] == ["alpha"]
    monkeypatch.setenv("GROOVE_KB_PATH", json.dumps([str(two["alpha"]), f"b={two['beta']}"]))
    assert [f.name for f in load_settings(None).kb_path] == ["alpha", "b"]
    monkeypatch.setenv("GROOVE_KB_PATH", "[not json")
    with pytest.raises(ConfigError, match="starts like a JSON list but is not one"):
        load_settings(None)


# --- one index over several folders -------------------------------------------------------------------

async def test_each_folders_notes_are_answered_under_its_name_with_its_own_ignore_rules(tmp_path, two):
    settings = settings_of(tmp_path, two["alpha"], two["beta"])
    report = await index_once(settings, embedder=BagOfWordsEmbedder())
    # alpha's .grooveignore leaves out alpha/drafts only; beta's drafts are beta's business
    assert await paths_in(settings) == {"alpha/tea.md", "beta/coffee.md", "beta/sencha.md", "beta/drafts/grinder.md"}
    assert report.added == 4 and report.kb_path == f"alpha = {two['alpha']}; beta = {two['beta']}"
    async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as index:
        everywhere = await index.search(SearchRequest(query="espresso", retriever="fts"))
        assert {h.path for h in everywhere.results} == {"beta/coffee.md", "beta/drafts/grinder.md"}
        only_alpha = await index.search(SearchRequest(query="tea", path_globs=["alpha/**"], retriever="fts"))
        assert {h.path for h in only_alpha.results} == {"alpha/tea.md"}
        listed = await index.list_documents(folder="beta/drafts")
        assert [d.path for d in listed.documents] == ["beta/drafts/grinder.md"]
        # links resolve across folders, Obsidian-style (the shortest unique name)
        links = await index.links("beta/coffee.md")
        assert sorted(link.path for link in links.outgoing) == ["alpha/tea.md", "beta/sencha.md"]
        # a file path on disk names the note under its folder
        assert index.note_path(str(two["beta"] / "sencha.md")) == "beta/sencha.md"
        status = await index.status()
        assert [(f.name, f.notes) for f in status.folders] == [("alpha", 1), ("beta", 3)]


async def test_adding_or_removing_a_folder_re_embeds_nothing_of_the_others(tmp_path, two):
    embedder = BagOfWordsEmbedder()
    alone = await index_once(settings_of(tmp_path, two["alpha"]), embedder=embedder)
    assert await paths_in(settings_of(tmp_path, two["alpha"])) == {"tea.md"}  # one folder: paths as they always were
    assert alone.chunks_embedded >= 1
    both = settings_of(tmp_path, two["alpha"], two["beta"])
    added = await index_once(both, embedder=embedder)
    # alpha's note moved under its name (a rename: same bytes), and only beta's three notes were embedded
    assert (added.renamed, added.added) == (1, 3)
    beta_only = settings_of(tmp_path / "other", two["beta"], index_path=tmp_path / "beta-alone.sqlite")
    beta_chunks = (await index_once(beta_only, embedder=embedder)).chunks_written
    assert added.chunks_embedded == beta_chunks
    assert await paths_in(both) == {"alpha/tea.md", "beta/coffee.md", "beta/sencha.md", "beta/drafts/grinder.md"}
    removed = await index_once(settings_of(tmp_path, f"alpha={two['alpha']}", f"gamma={tmp_path / 'beta'}"),
                               embedder=embedder)
    # beta renamed gamma: every note a rename, nothing embedded; then alpha taken out: its note deleted
    assert (removed.renamed, removed.added, removed.chunks_embedded) == (3, 0, 0)
    dropped = await index_once(settings_of(tmp_path, f"gamma={two['beta']}", f"delta={two['alpha'] / 'drafts'}"),
                               embedder=embedder)
    assert dropped.deleted == 1 and dropped.chunks_embedded == dropped.chunks_written  # delta's one new note only
    assert await paths_in(settings_of(tmp_path, f"gamma={two['beta']}", f"delta={two['alpha'] / 'drafts'}")) == {
        "gamma/coffee.md", "gamma/sencha.md", "gamma/drafts/grinder.md", "delta/idea.md"}


@asynccontextmanager
async def serving(settings) -> AsyncIterator[Daemon]:
    """A daemon over the folders (test_vault_extras' `running`: its startup scan done), every folder watched."""
    async with running(settings, BagOfWordsEmbedder()) as daemon:
        await eventually(lambda: _holds(daemon.watcher_state == "watching"), "every folder watched")
        yield daemon


async def listed(daemon: Daemon) -> set[str]:
    page = await daemon.service.list_documents(ListRequest(limit=500))
    return {d.path for d in page.documents}


async def _holds(value: bool) -> bool:
    return value


async def _lists(daemon: Daemon, expected: set[str]) -> bool:
    return await listed(daemon) == expected


async def test_the_service_watches_every_folder_and_its_status_names_each(tmp_path, two):
    settings = settings_of(tmp_path, two["alpha"], two["beta"], **{"watch.debounce_ms": 50})
    async with serving(settings) as daemon:
        write(two["beta"] / "new.md", note("New", "A fresh note about matcha."))
        (two["alpha"] / "tea.md").unlink()
        write(two["alpha"] / "drafts" / "still-ignored.md", note("No", "ignored by alpha's rules"))
        expected = {"beta/new.md", "beta/coffee.md", "beta/sencha.md", "beta/drafts/grinder.md"}
        await eventually(lambda: _lists(daemon, expected),
                         "a new note in beta and a deleted one in alpha, each under its folder")
        status = await daemon.service.status()
        assert status.watcher == "watching" and status.healthy
        assert [(f.name, f.notes, f.path) for f in status.folders] == [
            ("alpha", 0, str(two["alpha"])), ("beta", 4, str(two["beta"]))]


async def test_a_folder_gone_while_serving_keeps_its_notes_and_health_names_it_until_it_is_back(tmp_path, two):
    settings = settings_of(tmp_path, two["alpha"], two["beta"], **{"watch.debounce_ms": 50})
    async with serving(settings) as daemon:
        before = await listed(daemon)
        two["beta"].rename(tmp_path / "beta.away")
        await eventually(lambda: _holds(daemon.watcher_state.startswith("beta: waiting")), "beta named as missing")
        healthy, reasons = daemon.health()
        assert not healthy and any("beta: waiting" in r for r in reasons)
        await daemon.request_full()  # a full reconcile meanwhile keeps beta's notes
        assert await listed(daemon) == before
        (tmp_path / "beta.away").rename(two["beta"])
        write(two["beta"] / "back.md", note("Back", "written as the folder came back"))
        await eventually(lambda: _holds(daemon.watcher_state == "watching"), "beta watched again")
        await eventually(lambda: _lists(daemon, before | {"beta/back.md"}), "the reconcile after its return")


# --- the front ends -----------------------------------------------------------------------------------

def test_over_mcp_a_client_searches_both_folders_reads_a_note_and_sees_each_folder(spawn, tmp_path, two):
    server = spawn.server(two["alpha"], tmp_path / "index.sqlite", tmp_path, extra=("--kb", f"茶={two['beta']}"),
                           command=FAKE_GROOVE)
    try:
        health = server.wait_healthy()
        assert health["ok"] is True
        server.wait_indexed(4)

        async def session() -> tuple[list[str], str, list[dict]]:
            async with server.client() as client:
                hits = await client.call_tool("search", {"query": "espresso", "retriever": "fts"})
                paths = [h["path"] for h in hits.structured_content["results"]]
                doc = await client.call_tool("get_document", {"path": "茶/sencha.md"})
                status = await client.call_tool("index_status", {})
            return paths, doc.structured_content["content"], status.structured_content["folders"]

        paths, content, folders = anyio.run(session)
        assert set(paths) == {"茶/coffee.md", "茶/drafts/grinder.md"}
        assert "七十度" in content
        assert [(f["name"], f["notes"]) for f in folders] == [("alpha", 1), ("茶", 3)]
        assert f"alpha = {two['alpha']}; 茶 = {two['beta']}" in server.log()  # serve_start names both
    finally:
        server.terminate()


async def test_over_stdio_two_folders_whose_notes_share_a_name_are_two_notes_and_a_link_stays_in_its_folder(spawn, 
        tmp_path, two):
    from mcp import Client

    write(two["beta"] / "tea.md", note("Tea too", "Hojicha is roasted green tea."))  # alpha/tea.md exists as well
    argv = serve_argv(two["alpha"], tmp_path / "index.sqlite", "--kb", str(two["beta"]), "--transport", "stdio",
                      command=FAKE_GROOVE)
    params = spawn.stdio(command=argv[0], args=argv[1:], env=server_env(tmp_path), cwd=str(tmp_path))
    with anyio.fail_after(120):
        async with Client(params) as client:
            async def listed() -> bool:
                page = await client.call_tool("list_documents", {"limit": 50})
                return len(page.structured_content["documents"]) == 5

            await eventually(listed, "the startup scan of both folders")
            teas = await client.call_tool("search", {"query": "tea", "retriever": "fts", "path_globs": ["*/tea.md"]})
            assert {h["path"] for h in teas.structured_content["results"]} == {"alpha/tea.md", "beta/tea.md"}
            alpha = await client.call_tool("get_document", {"path": "alpha/tea.md"})
            beta = await client.call_tool("get_document", {"path": "beta/tea.md"})
            assert "eighty degrees" in alpha.structured_content["content"]
            assert "Hojicha" in beta.structured_content["content"]
            # [[tea]] in beta/coffee.md: two notes are named tea; the one in the linking note's own folder wins
            links = await client.call_tool("links", {"path": "beta/coffee.md"})
            assert sorted(o["path"] for o in links.structured_content["outgoing"]) == ["beta/sencha.md", "beta/tea.md"]
            outside = await client.call_tool("get_document", {"path": "gamma/tea.md"})
            assert outside.is_error


def _cli(spawn, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    return spawn.run([*FAKE_GROOVE, *argv], cwd=tmp_path, env=server_env(tmp_path), capture_output=True,
                          text=True, timeout=120)


def test_the_command_line_indexes_reports_and_checks_each_folder(spawn, tmp_path, two):
    kb = ("--kb", str(two["alpha"]), "--kb", f"b={two['beta']}", "--index", str(tmp_path / "i.sqlite"))
    done = _cli(spawn, tmp_path, "index", *kb)
    assert done.returncode == 0, done.stderr
    assert f"indexed alpha = {two['alpha']}; b = {two['beta']}" in done.stdout
    status = _cli(spawn, tmp_path, "status", *kb)
    assert f"folder:       alpha/ = {two['alpha']} (1 notes)" in status.stdout
    assert f"folder:       b/ = {two['beta']} (3 notes)" in status.stdout
    doctor = _cli(spawn, tmp_path, "doctor", *kb, "--format", "json")
    report = json.loads(doctor.stdout)
    assert [(f["name"], f["notes"]) for f in report["folders"]] == [("alpha", 1), ("b", 3)]
    assert not [f for f in report["findings"] if f["check"] in ("notes_not_indexed", "notes_gone")]
    write(two["beta"] / "late.md", note("Late", "written after the index"))
    doctor = _cli(spawn, tmp_path, "doctor", *kb, "--format", "json")
    [missing] = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "notes_not_indexed"]
    assert missing["examples"] == ["b/late.md"]
    got = _cli(spawn, tmp_path, "get", str(two["beta"] / "sencha.md"), *kb)
    assert got.returncode == 0 and "七十度" in got.stdout
    outside = _cli(spawn, tmp_path, "get", str(tmp_path / "elsewhere.md"), *kb)
    assert outside.returncode == 2 and "is not inside the notes folders" in outside.stderr


def test_a_service_instance_serves_several_folders_and_another_may_not_take_one_of_them(tmp_path, two):
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    specs = [str(two["alpha"]), f"b={two['beta']}"]
    plan = instances.plan_install("linux", name="work", config=None, kb=specs, index=None, port=None,
                                host="127.0.0.1", env=env, probe=lambda host, port: True)
    assert plan.flags[:4] == ["--kb", f"alpha={two['alpha']}", "--kb", f"b={two['beta']}"]
    installer.install("linux", config=None, command=["/opt/groove/bin/groove"], env=env, runner=_NoManager(),
                    flags=plan.flags, name="work")
    [inst] = instances.installed_instances("linux", env)
    assert inst.folders == [str(two["alpha"]), str(two["beta"])]
    assert inst.folder == f"alpha = {two['alpha']}; b = {two['beta']}"
    with pytest.raises(platforms.ServiceError, match=f"the notes folder {two['beta']} is already served by the groove "
                                                   "service instance 'work'"):
        instances.plan_install("linux", name="home", config=None, kb=[str(two["beta"])], index=None, port=None,
                             host="127.0.0.1", env=env, probe=lambda host, port: True)


class _NoManager:
    """systemctl, not run (the unit file is what is tested here)."""

    def __call__(self, argv, **kwargs):
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_client_config_hands_the_client_every_folder(spawn, tmp_path, two):
    done = _cli(spawn, tmp_path, "client-config", "claude-code", "--kb", str(two["alpha"]), "--kb", f"b={two['beta']}")
    assert done.returncode == 0, done.stderr
    assert f"alpha={two['alpha']}" in done.stdout and f"b={two['beta']}" in done.stdout



# --- the web view, in a real browser ----------------------------------------------------------------



def test_the_web_view_shows_each_folder_and_opens_a_note_of_the_second_in_its_own_obsidian_vault(spawn, 
        tmp_path, two, browser):
    from selenium.webdriver.common.by import By

    write(two["beta"] / ".obsidian" / "app.json", "{}\n")  # beta is an Obsidian vault; alpha is not
    server = spawn.server(two["alpha"], tmp_path / "index.sqlite", tmp_path, extra=("--kb", f"my-beta={two['beta']}"),
                           command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        server.wait_indexed(4)
        driver = browser.driver()
        try:
            load(driver, f"{server.base}/ui")
            wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#status div[data-folder]")) == 2,
                  "one status entry a folder")
            entries = [(e.get_attribute("data-folder"), e.text.replace("\n", " "))
                       for e in driver.find_elements(By.CSS_SELECTOR, "#status div[data-folder]")]
            assert entries == [("alpha", "alpha/ 1 notes"), ("my-beta", "my-beta/ 3 notes")]
            assert driver.find_element(By.ID, "kb").text == "alpha · my-beta"
            run_search(driver, "espresso", explain=False)
            shown = hit_paths(driver)  # hybrid: every note comes back in so small a vault, each under its folder
            assert {"my-beta/coffee.md", "my-beta/drafts/grinder.md"} <= set(shown)
            assert all(p.startswith(("alpha/", "my-beta/")) for p in shown)
            open_hit(driver, hit_paths(driver).index("my-beta/coffee.md"))
            assert note_path(driver) == "my-beta/coffee.md"
            link = driver.find_element(By.ID, "note-obsidian")
            assert link.get_attribute("href") == "obsidian://open?vault=beta&file=coffee.md"
        finally:
            driver.quit()
    finally:
        server.terminate()


def test_the_mcp_instructions_name_the_folders_only_when_there_are_several(tmp_path, two):
    from groove.serve.mcp.server import INSTRUCTIONS, instructions_for

    assert instructions_for(settings_of(tmp_path, two["alpha"]).folders()) == INSTRUCTIONS
    several = instructions_for(settings_of(tmp_path, two["alpha"], f"仕事={two['beta']}").folders())
    assert several.startswith(INSTRUCTIONS) and "2 folders: alpha/, 仕事/" in several and '["NAME/**"]' in several


def test_validate_checks_every_folder_and_points_at_the_real_file(spawn, tmp_path, two):
    write(two["beta"] / "broken.md", "---\ntitle: [unclosed\n---\n# Broken\n")
    done = _cli(spawn, tmp_path, "validate", "--kb", str(two["alpha"]), "--kb", str(two["beta"]))
    assert done.returncode == 1, done.stderr
    assert f"{two['beta'].relative_to(tmp_path)}/broken.md:" in done.stdout  # the file on disk, not beta/broken.md
    assert "5 note(s) checked" in done.stdout


def test_a_note_named_by_its_file_on_disk_is_found_under_its_folder_from_anywhere(tmp_path, two, monkeypatch):
    folders = settings_of(tmp_path, two["alpha"], two["beta"]).folders()
    assert folders.relative(str(two["beta"] / "sencha.md")) == "beta/sencha.md"  # absolute
    monkeypatch.chdir(two["beta"])
    assert folders.relative("sencha.md") == "beta/sencha.md"  # relative to where the command runs
    assert folders.relative("alpha/tea.md") == "alpha/tea.md"  # an index path stays one
    with pytest.raises(UsageError, match="is not inside the notes folders"):
        folders.relative(str(tmp_path / "elsewhere.md"))
