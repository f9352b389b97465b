"""What a vault owner expects besides: .gitignore respected in a git repository, a service without a watcher
(`[watch] enabled = false`, `groove serve --no-watch`), `groove validate --schema FILE`, and Japanese dates in
frontmatter understood by the date filters (a date that cannot be read is a warning naming the note).

Real files changing on disk, a real SQLite index (the bag-of-words fake embedder), the real watcher, git
itself as the judge of what .gitignore leaves out, `groove serve` over HTTP, and the command line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from groove.api.service import ListRequest, SearchRequest
from groove.corpus.frontmatter import DateError, date_from, read_date
from groove.daemon import Daemon
from groove.search.compiler import QueryError
from tests.support.common import GROOVE, eventually, write
from tests.support.daemon import running
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once
from tests.support.server import FAKE_GROOVE, server_env

TIMEOUT = 60.0


def note(title: str, body: str = "A note about tea.", date: str | None = None) -> str:
    head = f"---\ntitle: {title}\ndate: {date}\n---\n" if date is not None else ""
    return f"{head}# {title}\n\n{body}\n"


async def indexed_paths(settings) -> set[str]:
    from groove.index import Index

    async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as index:
        page = await index.list_documents(limit=500)
    return {d.path for d in page.documents}


async def listed(daemon: Daemon) -> set[str]:
    page = await daemon.service.list_documents(ListRequest(limit=500))
    return {d.path for d in page.documents}


# --- .gitignore ----------------------------------------------------------------------------------------------

GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _git(spawn, kb: Path, *argv: str) -> str:
    return spawn.run(["git", *argv], cwd=kb, env={**os.environ, **GIT_ENV}, capture_output=True, text=True,
                          check=True).stdout


def _repository(spawn, kb: Path) -> None:
    """A git repository whose .gitignore files (at three depths) and .git/info/exclude leave notes out."""
    _git(spawn, kb, "init", "-q")
    write(kb / ".git/info/exclude", "local.md\n")
    write(kb / ".gitignore", "drafts/\n*.tmp.md\n!keep.tmp.md\n/top-only.md\nbuild\n")
    write(kb / "drafts/.gitignore", "!d.md\n")  # cannot re-include: its folder is ignored
    write(kb / "projects/.gitignore", "private.md\n*.md\n!public.md\n")
    write(kb / "projects/deep/.gitignore", "!private.md\n")  # a deeper file decides first
    for rel in ("a.md", "drafts/d.md", "x.tmp.md", "keep.tmp.md", "top-only.md", "sub/top-only.md", "build/b.md",
                "local.md", "projects/private.md", "projects/public.md", "projects/other.md",
                "projects/deep/private.md", "projects/deep/other.md"):
        write(kb / rel, note(rel))


GIT_KEEPS = {"a.md", "keep.tmp.md", "sub/top-only.md", "projects/public.md", "projects/deep/private.md"}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_a_git_repository_s_gitignore_files_leave_out_exactly_what_git_leaves_out(spawn, kb, make_settings):
    _repository(spawn, kb)
    git_sees = {p for p in _git(spawn, kb, "ls-files", "--others", "--exclude-standard").split("\n") if p.endswith(".md")}
    assert git_sees == GIT_KEEPS  # git's own verdict, the judge
    settings = make_settings(kb)
    report = await index_once(settings, embedder=BagOfWordsEmbedder())
    assert await indexed_paths(settings) == GIT_KEEPS and report.added == len(GIT_KEEPS)


async def test_gitignore_false_indexes_what_the_gitignore_files_name(kb, make_settings):
    write(kb / ".git/HEAD", "ref: refs/heads/main\n")
    write(kb / ".gitignore", "drafts/\n")
    write(kb / "a.md", note("a"))
    write(kb / "drafts/d.md", note("d"))
    settings = make_settings(kb, **{"index.gitignore": False})
    await index_once(settings, embedder=BagOfWordsEmbedder())
    assert await indexed_paths(settings) == {"a.md", "drafts/d.md"}


async def test_a_folder_that_is_not_a_git_repository_keeps_what_a_stray_gitignore_names(kb, make_settings):
    write(kb / ".gitignore", "drafts/\n")
    write(kb / "a.md", note("a"))
    write(kb / "drafts/d.md", note("d"))
    settings = make_settings(kb)
    await index_once(settings, embedder=BagOfWordsEmbedder())
    assert await indexed_paths(settings) == {"a.md", "drafts/d.md"}


async def test_gitignore_changes_apply_while_running_and_the_watcher_drops_what_is_ignored(kb, make_settings):
    write(kb / ".git/HEAD", "ref: refs/heads/main\n")
    write(kb / ".gitignore", "scratch/\n")
    write(kb / "a.md", note("a"))
    write(kb / "sub/secret.md", note("secret"))
    batches: list[set[str]] = []
    async with running(make_settings(kb, **{"watch.debounce_ms": 50}), BagOfWordsEmbedder(), batches=batches) as daemon:
        assert await listed(daemon) == {"a.md", "sub/secret.md"}
        write(kb / "scratch/n.md", note("n"))       # ignored: the watcher does not hand it on
        write(kb / "scratch/deeper/m.md", note("m"))
        write(kb / "visible.md", note("visible"))   # written after: once it is in, the ignored ones were seen

        async def visible() -> bool:
            return "visible.md" in await listed(daemon)

        await eventually(visible, "the new note to be indexed")
        seen = set().union(*batches)
        assert "visible.md" in seen and not any(p.startswith("scratch") for p in seen), seen
        assert "scratch/n.md" not in await listed(daemon)

        write(kb / "sub/.gitignore", "secret.md\n")  # a nested .gitignore written while running

        async def secret_gone() -> bool:
            return "sub/secret.md" not in await listed(daemon)

        await eventually(secret_gone, "the note the new .gitignore names to leave the index")
        write(kb / ".gitignore", "visible.md\n")  # scratch/ no longer ignored, visible.md now is

        async def swapped() -> bool:
            return await listed(daemon) == {"a.md", "scratch/n.md", "scratch/deeper/m.md"}

        await eventually(swapped, "the edited .gitignore to apply")


# --- a service without a watcher -----------------------------------------------------------------------------

async def test_with_the_watcher_off_the_service_indexes_at_start_stays_healthy_and_reindex_picks_up_changes(kb, make_settings):
    write(kb / "a.md", note("a"))
    settings = make_settings(kb, **{"watch.enabled": False, "watch.reconcile_interval_s": 0, "watch.debounce_ms": 50})
    async with running(settings, BagOfWordsEmbedder()) as daemon:
        assert await listed(daemon) == {"a.md"}
        status = await daemon.service.status()
        assert status.watcher.startswith("off ([watch] enabled = false)") and status.healthy
        assert daemon.health() == (True, [])
        write(kb / "deployed.md", note("deployed"))
        await anyio.sleep(1.5)  # a watcher with 50 ms debounce would have indexed it by now
        assert await listed(daemon) == {"a.md"}
        report = await daemon.service.reindex()
        assert report.added == 1 and await listed(daemon) == {"a.md", "deployed.md"}


async def test_with_the_watcher_off_the_periodic_reconcile_still_picks_up_changes(kb, make_settings):
    write(kb / "a.md", note("a"))
    async with running(make_settings(kb, **{"watch.enabled": False, "watch.reconcile_interval_s": 0.3}),
                       BagOfWordsEmbedder()) as daemon:
        write(kb / "deployed.md", note("deployed"))

        async def picked_up() -> bool:
            return "deployed.md" in await listed(daemon)

        await eventually(picked_up, "the periodic reconcile to index the deployed note")


def test_groove_serve_no_watch_is_healthy_says_the_watcher_is_off_and_reindexes_on_request(spawn, tmp_path):
    kb = tmp_path / "notes"
    write(kb / "a.md", note("a"))
    server = spawn.server(kb, tmp_path / "index.sqlite", tmp_path, extra=("--no-watch",), command=FAKE_GROOVE)
    try:
        assert server.wait_healthy()["ok"] is True
        status = server.wait_indexed(1)
        assert status["watcher"].startswith("off") and status["healthy"] is True
        assert status["tasks"]["watcher"]["state"].startswith("off")
        write(kb / "deployed.md", note("deployed"))

        async def reindex() -> dict[str, Any]:
            async with server.client() as client:
                result = await client.call_tool("reindex", {})
                return result.structured_content

        assert anyio.run(reindex)["added"] == 1
        assert httpx.get(f"{server.base}/healthz", timeout=5).json()["ok"] is True
    finally:
        server.terminate()


# --- groove validate --schema ---------------------------------------------------------------------------------

SCHEMA_TOML = """\
required = ["title"]

[fields.status]
type = "string"
allowed = ["draft", "done"]
required = true

[fields.priority]
type = "integer"
"""

SCHEMA_YAML = """\
required: [title]
fields:
  status:
    type: string
    allowed: [draft, done]
    required: true
  priority:
    type: integer
"""


@pytest.fixture
def schema_vault(kb: Path, tmp_path: Path) -> dict[str, Path]:
    write(kb / "good.md", "---\ntitle: Good\nstatus: done\npriority: 2\n---\nbody\n")
    write(kb / "bad.md", "---\ntitle: Bad\nstatus: finished\npriority: high\n---\nbody\n")
    write(kb / "none.md", "# No frontmatter\n")
    # The configuration's own schema requires a key no note has: --schema replaces it.
    config = write(tmp_path / "groove.toml", f'kb_path = "{kb}"\n[validate]\nrequired = ["nowhere"]\n')
    return {"kb": kb, "config": config, "toml": write(tmp_path / "schema.toml", SCHEMA_TOML),
            "yaml": write(tmp_path / "schema.yaml", SCHEMA_YAML),
            "table": write(tmp_path / "other-groove.toml", "[validate]\n" + SCHEMA_TOML.replace("[fields.", "[validate.fields.")),
            "bare": write(tmp_path / "schema", SCHEMA_YAML)}


def _validate(spawn, paths: dict[str, Path], *argv: str) -> subprocess.CompletedProcess:
    return spawn.run([*GROOVE, "validate", "--config", str(paths["config"]), *argv], capture_output=True,
                          text=True, env=server_env(paths["kb"].parent), timeout=120)


def test_validate_schema_reads_a_toml_or_yaml_schema_file_instead_of_the_configuration_s(spawn, schema_vault):
    expected = [("bad.md", 3, "status"), ("bad.md", 4, "priority"), ("none.md", 1, "title"), ("none.md", 1, "status")]
    for kind in ("toml", "yaml", "table", "bare"):
        proc = _validate(spawn, schema_vault, "--schema", str(schema_vault[kind]), "--format", "json")
        assert proc.returncode == 1, (kind, proc.stderr)
        report = json.loads(proc.stdout)
        assert [(f["path"], f["line"], f["key"]) for f in report["findings"]] == expected, kind
        assert report["schema_file"] == str(schema_vault[kind])
    own = json.loads(_validate(spawn, schema_vault, "--format", "json").stdout)
    assert {f["key"] for f in own["findings"]} == {"nowhere"}  # without --schema: the configuration's
    text = _validate(spawn, schema_vault, "--schema", str(schema_vault["yaml"])).stdout
    assert "bad.md:3: `status` value 'finished' is not allowed" in text and "3 note(s) checked: 4 finding(s)" in text


def test_validate_schema_refuses_a_bad_schema_file_in_one_line(spawn, schema_vault, tmp_path):
    cases = {
        "unknown.toml": ('required = ["title"]\nrequire = ["x"]\n', "unknown key `require` in schema file"),
        "badtype.yaml": ("fields:\n  status:\n    type: text\n", "invalid value for `fields.status.type` in schema file"),
        "broken.yaml": ("fields: [unclosed\n", "is not valid YAML (line"),
        "broken.toml": ("required = [\n", "is not valid TOML"),
        "list.yaml": ("- title\n- status\n", "holds a list, not the keys of [validate] (required, date_format, fields, values_as_written)"),
    }
    for name, (text, message) in cases.items():
        proc = _validate(spawn, schema_vault, "--schema", str(write(tmp_path / name, text)))
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().split("\n")
        assert len(lines) == 1 and lines[0].startswith("groove: error: ") and message in lines[0], (name, proc.stderr)
    missing = _validate(spawn, schema_vault, "--schema", str(tmp_path / "nowhere.toml"))
    assert missing.returncode == 2 and "schema file" in missing.stderr and "does not exist" in missing.stderr


# --- Japanese dates ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("written, iso", [
    ("2024年5月14日", "2024-05-14"),
    ("2024年05月14日", "2024-05-14"),
    ("２０２４年５月１４日", "2024-05-14"),
    ("令和6年5月14日", "2024-05-14"),
    ("令和６年５月１４日", "2024-05-14"),
    ("令和元年5月1日", "2019-05-01"),
    ("㋿6年5月14日", "2024-05-14"),
    ("平成31年4月30日", "2019-04-30"),
    ("昭和64年1月7日", "1989-01-07"),
    ("R6.5.14", "2024-05-14"),
    ("H31/4/30", "2019-04-30"),
    ("2024年5月14日(火)", "2024-05-14"),
    ("2024年5月14日（火曜日） 10:30", "2024-05-14T10:30:00"),
    ("2024年5月14日 10時30分", "2024-05-14T10:30:00"),
    ("2024-05-14", "2024-05-14"),
    ("2024/5/14", "2024-05-14"),
])
def test_a_japanese_date_is_read_as_its_iso_day(written, iso):
    assert read_date(written) == iso
    warnings: list[str] = []
    assert date_from(written, warnings) == iso and warnings == []


@pytest.mark.parametrize("written, why", [
    ("平成31年5月1日", "平成 ended on 2019-04-30; 2019-05-01 is in 令和"),
    ("令和1年4月1日", "令和 began on 2019-05-01, after 2019-04-01"),
    ("2024年2月30日", "day is out of range for month"),
    ("平成0年1月1日", "平成0年 is no year: the first year of an era is 元年 (1)"),
    ("いつか", "expected YYYY-MM-DD, 2024年5月14日, 令和6年5月14日 or R6.5.14"),
])
def test_a_date_that_cannot_be_read_is_a_warning_that_says_why(written, why):
    with pytest.raises(DateError):
        read_date(written)
    warnings: list[str] = []
    assert date_from(written, warnings) is None
    assert warnings == [f"frontmatter date {written!r} is not a date ({why}); left the note undated (date filters leave it out)"]


@pytest.fixture
def dated(kb: Path) -> Path:
    for name, date in (("western", "2024年5月14日"), ("reiwa", "令和6年5月20日"), ("letter", "R6.6.1"),
                       ("wide", "２０２４年４月３０日"), ("iso", "2024-07-01"), ("before-reiwa", "令和1年4月1日"),
                       ("someday", "いつか")):
        write(kb / f"{name}.md", note(name, "Tea tasting notes for the season.", date=date))
    return kb


async def test_japanese_dates_are_understood_by_the_date_filters_and_an_unreadable_one_is_a_warning_naming_the_note(
        dated, make_settings):
    settings = make_settings(dated)
    report = await index_once(settings, embedder=BagOfWordsEmbedder())
    warned = {w["path"]: w["warnings"] for w in report.note_warnings}
    assert set(warned) == {"before-reiwa.md", "someday.md"}
    assert "令和 began on 2019-05-01" in warned["before-reiwa.md"][0]

    from groove.api.service import Service
    from groove.index import Index

    async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as index:
        service = Service(index)

        async def between(date_from: str | None = None, date_to: str | None = None) -> set[str]:
            found = await service.search(SearchRequest(query="tea tasting", retriever="fts", limit=20,
                                                       date_from=date_from, date_to=date_to))
            return {h.path for h in found.results}

        assert await between("2024-05-01", "2024-05-31") == {"western.md", "reiwa.md"}
        assert await between("令和6年6月1日") == {"letter.md", "iso.md"}            # a filter may be written so too
        assert await between(date_to="２０２４年４月３０日") == {"wide.md"}
        assert (await service.get_document("reiwa.md")).date == "2024-05-20"
        status = await service.status()
        assert {w.path for w in status.warnings} == {"before-reiwa.md", "someday.md"}
        with pytest.raises(QueryError) as err:
            await between("来週")
        assert "date_from must be an ISO date like 2026-01-31 (or as notes write it" in str(err.value)


def test_groove_status_and_index_name_the_note_whose_date_cannot_be_read(spawn, dated, tmp_path):
    argv = ["--kb", str(dated), "--index", str(tmp_path / "i.sqlite")]
    env = server_env(tmp_path)
    index = spawn.run([*FAKE_GROOVE, "index", *argv], capture_output=True, text=True, env=env, timeout=120)
    assert index.returncode == 0, index.stderr
    assert "warning someday.md: frontmatter date 'いつか' is not a date" in index.stdout
    status = spawn.run([*FAKE_GROOVE, "status", *argv, "--no-daemon"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert "  before-reiwa.md: frontmatter date '令和1年4月1日' is not a date (令和 began on 2019-05-01" in status.stdout
