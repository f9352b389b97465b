"""The search controls GrooveSeek had (issue 38, point 4): sections under excluded headings, a per-query
low_confidence ratio. Real notes, a real SQLite index, the real daemon; the MCP tool through the SDK's client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client

from groove import cli
from groove.daemon import Daemon
from groove.errors import GrooveError
from groove.search.request import SearchRequest
from groove.serve.mcp.server import build_server
from tests.support.common import eventually, write
from tests.support.daemon import idle
from tests.support.oneshot import index_once
from tests.support.fakes import BagOfWordsEmbedder

NOTES = 60  # more than a leg's pool (50): a filter applied after ranking would leave nothing


def reference_note(i: int) -> str:
    """A note whose body mentions compost once and whose link sections repeat it."""
    body = (
        f"Garden journal {i}. Turning the compost heap every week keeps it warm; the beds got mulch, the "
        f"tomatoes were staked and the seedlings watered before the heat of the afternoon on day {i}."
    )
    links = " ".join(["compost heap guide compost bins compost tea compost worms"] * 4)
    return (
        f"# Journal {i}\n\n## Work\n\n{body}\n\n## 参考リンク\n\n{links} 参考 {i}\n\n"
        f"## Further reading\n\n### Books\n\n{links} books {i}\n"
    )


@pytest.fixture
def reference_kb(kb: Path) -> Path:
    for i in range(NOTES):
        write(kb / f"journal-{i:02d}.md", reference_note(i))
    return kb


@asynccontextmanager
async def served(settings) -> AsyncIterator[tuple[Daemon, Client]]:
    daemon = Daemon(settings, embedder=BagOfWordsEmbedder())
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        with anyio.fail_after(120):
            await daemon.reconciled.wait()
        await idle(daemon)  # every chunk has its vector: the vector leg sees them all
        try:
            async with Client(build_server(daemon)) as client:
                yield daemon, client
        finally:
            daemon.stop()


def excluded(context: str) -> bool:
    return "参考リンク" in context or "Further reading" in context


def headings_of(results: list[dict]) -> list[str]:
    return [r["context"] for r in results]


async def call(client: Client, **arguments) -> dict:
    result = await client.call_tool("search", arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def test_sections_under_excluded_headings_never_come_back_and_the_search_still_fills_its_limit(
    reference_kb, make_settings
):
    async with served(make_settings(reference_kb, **{"index.min_chunk_tokens": 0})) as (_, client):
        plain = await call(client, query="compost heap", limit=10)
        # Without the control the link sections win: they say compost four times as often.
        assert any(excluded(c) for c in headings_of(plain["results"]))
        for retriever in ("hybrid", "fts", "vector"):
            kept = await call(
                client,
                query="compost heap",
                limit=10,
                retriever=retriever,
                exclude_headings=["参考リンク", "further READING"],  # any case; a parent heading covers ### Books
            )
            contexts = headings_of(kept["results"])
            assert len(contexts) == 10, (retriever, contexts)
            assert not any(excluded(c) for c in contexts), (retriever, contexts)
            assert kept["filter_applied"] == {"exclude_headings": ["参考リンク", "further READING"]}


async def test_the_settings_list_applies_to_every_search_and_a_search_s_own_list_replaces_it(
    reference_kb, make_settings
):
    settings = make_settings(
        reference_kb, **{"index.min_chunk_tokens": 0, "search.exclude_headings": ["参考リンク", "Further reading"]}
    )
    async with served(settings) as (_, client):
        default = await call(client, query="compost heap", limit=10)
        assert len(default["results"]) == 10
        assert not any(excluded(c) for c in headings_of(default["results"]))
        everything = await call(client, query="compost heap", limit=10, exclude_headings=[])
        assert any(excluded(c) for c in headings_of(everything["results"]))
        only_links = await call(client, query="compost heap", limit=10, exclude_headings=["参考リンク"])
        contexts = headings_of(only_links["results"])
        assert not any("参考リンク" in c for c in contexts)
        assert any("Further reading" in c for c in contexts)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"exclude_headings": ["参考リンク", "  "]}, "exclude_headings has an empty heading"),
        ({"exclude_headings": ["##"]}, "exclude_headings has an empty heading"),
        ({"exclude_headings": "参考リンク"}, "exclude_headings has the wrong type"),
        ({"min_confidence_ratio": 0}, "min_confidence_ratio must be greater than 0, got 0"),
        ({"min_confidence_ratio": -1.5}, "min_confidence_ratio must be greater than 0, got -1.5"),
        ({"min_confidence_ratio": 1000}, "min_confidence_ratio must be 100 or less, got 1000"),
    ],
)
def test_bad_search_controls_are_refused_in_one_line(arguments, message):
    with pytest.raises(GrooveError) as caught:
        SearchRequest(query="compost", **arguments)
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


async def test_the_mcp_tool_refuses_an_empty_heading_and_a_ratio_of_zero_as_tool_errors(kb, make_settings):
    write(kb / "a.md", "# A\n\nCompost heap notes.\n")
    async with served(make_settings(kb)) as (_, client):
        for arguments, message in (
            ({"exclude_headings": [""]}, "exclude_headings has an empty heading"),
            ({"min_confidence_ratio": 0}, "min_confidence_ratio must be greater than 0"),
        ):
            result = await client.call_tool("search", {"query": "compost", **arguments})
            assert result.is_error
            assert message in result.content[0].text


async def test_a_query_s_min_confidence_ratio_decides_low_confidence_by_top_over_the_mean_of_the_top_ten(
    reference_kb, make_settings
):
    async with served(make_settings(reference_kb, **{"index.min_chunk_tokens": 0})) as (_, client):
        base = await call(client, query="compost heap", limit=10)
        scores = [r["score"] for r in base["results"]]
        ratio = scores[0] / (sum(scores) / len(scores))  # what the rule compares: top / mean(top 10)
        below = await call(client, query="compost heap", limit=10, min_confidence_ratio=ratio * 0.9)
        above = await call(client, query="compost heap", limit=10, min_confidence_ratio=ratio * 1.1)
        assert below["low_confidence"] is False
        assert above["low_confidence"] is True


def test_the_command_line_leaves_out_excluded_headings_and_refuses_an_empty_one(reference_kb, tmp_path, capsys):
    index = str(tmp_path / "cli.sqlite")
    where = ["--kb", str(reference_kb), "--index", index]
    assert cli.main(["index", *where]) == 0
    capsys.readouterr()
    asked = ["search", "compost heap", *where, "--no-daemon", "--format", "json", "--limit", "10"]
    assert cli.main([*asked, "--exclude-heading", "参考リンク", "--exclude-heading", "FURTHER reading"]) == 0
    contexts = [r["context"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert len(contexts) == 10 and not any(excluded(c) for c in contexts), contexts
    assert cli.main(asked) == 0
    assert any(excluded(r["context"]) for r in json.loads(capsys.readouterr().out)["results"])
    for flags, message in (
        (["--exclude-heading", " "], "exclude_headings has an empty heading"),
        (["--min-confidence-ratio", "0"], "min_confidence_ratio must be greater than 0, got 0.0"),
    ):
        assert cli.main([*asked[:-4], *flags]) != 0
        assert message in capsys.readouterr().err


def test_a_ratio_on_the_command_line_flags_low_confidence_as_the_mcp_argument_does(reference_kb, tmp_path, capsys):
    index = str(tmp_path / "cli.sqlite")
    where = ["--kb", str(reference_kb), "--index", index]
    assert cli.main(["index", *where]) == 0
    capsys.readouterr()
    asked = ["search", "compost heap", *where, "--no-daemon", "--format", "json", "--limit", "10"]
    assert cli.main(asked) == 0
    scores = [r["score"] for r in json.loads(capsys.readouterr().out)["results"]]
    ratio = scores[0] / (sum(scores) / len(scores))
    for factor, flagged in ((0.9, False), (1.1, True)):
        assert cli.main([*asked, "--min-confidence-ratio", str(ratio * factor)]) == 0
        assert json.loads(capsys.readouterr().out)["low_confidence"] is flagged


def sectioned_note(i: int) -> str:
    return f"# Note {i}\n\n" + "".join(f"## Part {j}\n\nWords of part {j} of note {i}.\n\n" for j in range(4))


async def test_reindex_without_force_is_incremental_and_force_parses_every_note_by_the_settings_now(
    kb, make_settings, tmp_path
):
    for i in range(3):
        write(kb / f"note-{i}.md", sectioned_note(i))
    index = tmp_path / "force.sqlite"
    # Indexed with every section a chunk of its own; then served with sections merged up to 500 tokens.
    await index_once(make_settings(kb, index_path=index, **{"index.min_chunk_tokens": 0}))
    async with served(make_settings(kb, index_path=index, **{"index.min_chunk_tokens": 500})) as (_, client):

        async def chunks() -> int:
            return (await client.call_tool("index_status", {})).structured_content["chunks"]

        before = await chunks()
        assert before == 3 * 5  # the title line's chunk and four parts, each note: the files were not read again
        plain = await client.call_tool("reindex", {})
        assert not plain.is_error and plain.structured_content["unchanged"] == 3
        assert await chunks() == before  # incremental: unchanged files are skipped
        forced = await client.call_tool("reindex", {"force": True})
        assert not forced.is_error and forced.structured_content["unchanged"] == 3  # the same bytes
        assert await chunks() == 3  # every note parsed again: each one chunk now
        refused = await client.call_tool("reindex", {"force": "yes"})
        assert refused.is_error and refused.content[0].text == "reindex: force must be true or false, got 'yes'"


async def test_a_section_added_under_an_excluded_heading_while_serving_is_left_out_too(kb, make_settings):
    write(kb / "a.md", "# Kiln\n\n## Firing\n\nThe kiln fires stoneware at cone six overnight.\n")
    settings = make_settings(kb, **{"index.min_chunk_tokens": 0, "watch.debounce_ms": 50})
    async with served(settings) as (_, client):
        asked = {"query": "kiln stoneware cone", "retriever": "fts", "exclude_headings": ["参考リンク"]}
        before = await call(client, **asked)  # the labels read and matched: kept while the index is unchanged
        assert {r["path"] for r in before["results"]} == {"a.md"}
        write(kb / "b.md", "# Glazes\n\n## 参考リンク\n\nkiln stoneware cone kiln stoneware cone: the glaze chart.\n")

        async def indexed() -> bool:
            plain = await call(client, **{**asked, "exclude_headings": []})
            return "b.md" in [r["path"] for r in plain["results"]]

        await eventually(indexed, "the new note to be indexed")
        after = await call(client, **asked)
        assert {r["path"] for r in after["results"]} == {"a.md"}, after["results"]
