"""Filters run in SQL with one folding rule: search and list_documents agree on every tag.

Real notes on disk, a real index, the real daemon's two service calls.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import anyio
import pytest

from groove.api.service import ListRequest
from groove.daemon import Daemon
from groove.search.filters import Filters
from groove.search.pipeline import SearchRequest
from groove.store.sqlite import connection, schema
from tests.support.common import write
from tests.support.oneshot import index_once, search_once


def note(title: str, tags: list[str], date: str | None = None) -> str:
    front = f"tags: {json.dumps(tags, ensure_ascii=False)}\n" + (f"date: {date}\n" if date else "")
    return f"---\n{front}---\n# {title}\n\nShared words about gardening and compost for every note.\n"


@pytest.fixture
def tagged_kb(kb: Path) -> Path:
    write(kb / "umlaut.md", note("Umlaut", ["Ünïcode"]))
    write(kb / "nihongo.md", note("Nihongo", ["日本語", "Ünïcode"]))
    write(kb / "fullwidth.md", note("Fullwidth", ["ＡＢＣ"]))
    write(kb / "plain.md", note("Plain", ["plain"]))
    return kb


@asynccontextmanager
async def running(settings) -> AsyncIterator[Daemon]:
    daemon = Daemon(settings)
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        with anyio.fail_after(60):
            await daemon.reconciled.wait()
        try:
            yield daemon
        finally:
            daemon.stop()


async def searched(daemon: Daemon, **filters) -> list[str]:
    req = SearchRequest(query="gardening compost", limit=10, retriever="fts", filters=Filters.build(**filters))
    return sorted(r.path for r in (await daemon.service.search(req)).results)


async def listed(daemon: Daemon, tags: list[str]) -> list[str]:
    return sorted(d.path for d in (await daemon.service.list_documents(ListRequest(tags=tags))).documents)


@pytest.mark.parametrize(
    "asked, expected",
    [
        (["ünïcode"], ["nihongo.md", "umlaut.md"]),
        (["ÜNÏCODE"], ["nihongo.md", "umlaut.md"]),
        (["#Ünïcode"], ["nihongo.md", "umlaut.md"]),
        (["日本語"], ["nihongo.md"]),
        (["ＡＢＣ"], ["fullwidth.md"]),   # full-width as written
        (["abc"], ["fullwidth.md"]),      # NFKC: full-width letters are the ASCII ones
        (["ABC"], ["fullwidth.md"]),
        (["ｕｎｉｃｏｄｅ"], []),           # folding is not accent stripping
    ],
)
async def test_a_non_ascii_tag_matches_the_same_notes_in_search_and_in_list_documents(
    tagged_kb, make_settings, asked, expected
):
    async with running(make_settings(tagged_kb)) as daemon:
        assert await searched(daemon, tags_any=asked) == expected
        assert await listed(daemon, asked) == expected


async def test_tags_all_needs_every_tag_under_the_same_folding(tagged_kb, make_settings):
    async with running(make_settings(tagged_kb)) as daemon:
        assert await searched(daemon, tags_all=["ÜNÏCODE", "日本語"]) == ["nihongo.md"]
        assert await searched(daemon, tags_all=["ünïcode", "plain"]) == []


def test_the_index_stores_tags_folded_and_shows_them_as_written(tagged_kb, make_settings):
    settings = make_settings(tagged_kb)
    anyio.run(lambda: index_once(settings))
    con = connection.connect_sync(settings.resolved_index_path(), readonly=True)
    try:
        stored = {t for (t,) in con.execute("SELECT tag FROM doc_tags")}
        shown = json.loads(con.execute("SELECT tags FROM documents WHERE path = 'fullwidth.md'").fetchone()[0])
    finally:
        con.close()
    assert stored == {"ünïcode", "日本語", "abc", "plain"}
    assert shown == ["ＡＢＣ"]


def test_date_bounds_are_inclusive_days_and_a_datetime_counts_as_its_day(kb, make_settings):
    write(kb / "before.md", note("Before", ["x"], "2026-03-03"))
    write(kb / "morning.md", note("Morning", ["x"], "2026-03-04 23:59"))
    write(kb / "day.md", note("Day", ["x"], "2026-03-05"))
    write(kb / "after.md", note("After", ["x"], "2026-03-06"))
    write(kb / "undated.md", note("Undated", ["x"]))
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings))

    def paths(**filters) -> list[str]:
        req = SearchRequest(query="gardening compost", limit=10, retriever="fts", filters=Filters.build(**filters))
        return sorted(r.path for r in anyio.run(lambda: search_once(settings, req)).results)

    assert paths(date_from="2026-03-04", date_to="2026-03-05") == ["day.md", "morning.md"]
    assert paths(date_to="2026-03-04") == ["before.md", "morning.md"]
    assert paths(date_from="2026-03-06") == ["after.md"]
    assert paths(date_to="9999-12-31") == ["after.md", "before.md", "day.md", "morning.md"]
    # Globs and frontmatter fields still apply on top of the SQL part.
    assert paths(date_from="2026-03-04", path_globs=["!day.md"]) == ["after.md", "morning.md"]


def test_an_index_from_schema_1_gets_its_tags_folded_by_the_next_reconcile(tagged_kb, make_settings):
    settings = make_settings(tagged_kb)
    anyio.run(lambda: index_once(settings))
    path = settings.resolved_index_path()
    con = connection.connect_sync(path)
    try:  # what a version-1 index held: the tags as written
        con.execute("DELETE FROM doc_tags")
        con.execute(
            "INSERT INTO doc_tags(doc_id, tag) SELECT d.id, j.value FROM documents d, json_each(d.tags) j"
        )
        con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    finally:
        con.close()
    anyio.run(lambda: index_once(settings))
    con = connection.connect_sync(path, readonly=True)
    try:
        version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        stored = {t for (t,) in con.execute("SELECT tag FROM doc_tags")}
    finally:
        con.close()
    assert int(version) == schema.SCHEMA_VERSION
    assert stored == {"ünïcode", "日本語", "abc", "plain"}
