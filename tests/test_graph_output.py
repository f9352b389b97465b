"""`groove related --format dot|svg` (issue 38, point 3): the related notes as a Graphviz graph.

The DOT is checked against hand-written text (no DOT parser ships with groove's venv, nor Graphviz here); the
command runs in process on a real index built with the fake embedder; svg without Graphviz's `dot` on PATH
says so in one line, and with a stand-in `dot` the DOT goes to `dot -Tsvg` and its output to stdout.
"""

from __future__ import annotations

import json
import shutil
import re
import sys
from pathlib import Path

import anyio
import pytest

from groove.api.answers import NoteRef, RelatedAnswer, RelatedNote
from groove.api.graph import dot_string, related_dot
from groove.cli import SVG_NEEDS_DOT, main
from tests.support.common import note, write
from tests.support.oneshot import index_once

NOTES = {
    "cooking/teriyaki.md": note("Chicken teriyaki", "Soy sauce, mirin and sugar glaze the chicken in a hot pan."),
    "work/retrieval.md": note("Hybrid retrieval", "Fusing full-text search with vector search improves recall."),
    "work/vectors.md": note("Vector search", "Vector search finds notes by meaning; full-text search by words."),
    "work/日本語.md": note('検索の "評価"', "Search evaluation: recall and vector search on notes."),
}


def related_note(path: str, title: str, score: float, via: list[str]) -> RelatedNote:
    return RelatedNote(uri=f"groove://note/{path}", path=path, title=title, score=score, depth=len(via) - 1,
                       via=via, chunk=None)


def answer_of(source: tuple[str, str], related: list[RelatedNote]) -> RelatedAnswer:
    return RelatedAnswer(source=NoteRef(uri="groove://note/" + source[0], path=source[0], title=source[1]),
                         related=related, bounded_by=[], elapsed_ms=1.0, params={})


def test_a_label_keeps_quotes_backslashes_line_breaks_and_japanese_as_written():
    assert dot_string('say "hi"') == r'"say \"hi\""'
    assert dot_string("C:\\notes\\N") == r'"C:\\notes\\N"'  # \N would otherwise be Graphviz's node name
    assert dot_string("one\ntwo\r\nthree\rfour") == r'"one\ntwo\nthree\nfour"'
    assert dot_string("検索の評価") == '"検索の評価"'


def test_the_dot_has_the_source_its_related_notes_and_an_edge_to_each_scored_to_three_places():
    answer = answer_of(("work/retrieval.md", "Hybrid retrieval"), [
        related_note("work/日本語.md", '検索の "評価"', 0.81234, ["work/retrieval.md", "work/日本語.md"]),
        related_note("a\\b.md", "back\\slash\nand line", 0.5, ["work/retrieval.md", "a\\b.md"]),
    ])
    assert related_dot(answer) == (
        "digraph related {\n"
        "  rankdir=LR;\n"
        "  node [shape=box];\n"
        '  "work/retrieval.md" [label="Hybrid retrieval\\nwork/retrieval.md", style=bold];\n'
        '  "work/日本語.md" [label="検索の \\"評価\\"\\nwork/日本語.md"];\n'
        '  "a\\\\b.md" [label="back\\\\slash\\nand line\\na\\\\b.md"];\n'
        '  "work/retrieval.md" -> "work/日本語.md" [label="0.812"];\n'
        '  "work/retrieval.md" -> "a\\\\b.md" [label="0.500"];\n'
        "}\n"
    )


def test_a_note_two_hops_out_hangs_from_the_note_it_was_reached_from_even_one_left_out_of_the_answer():
    answer = answer_of(("s.md", "S"), [
        related_note("a.md", "A", 0.9, ["s.md", "a.md"]),
        related_note("c.md", "C", 0.42, ["s.md", "a.md", "c.md"]),
        related_note("d.md", "D", 0.3, ["s.md", "b.md", "d.md"]),  # b.md: cut by the limit
    ])
    assert related_dot(answer) == (
        "digraph related {\n"
        "  rankdir=LR;\n"
        "  node [shape=box];\n"
        '  "s.md" [label="S\\ns.md", style=bold];\n'
        '  "a.md" [label="A\\na.md"];\n'
        '  "c.md" [label="C\\nc.md"];\n'
        '  "d.md" [label="D\\nd.md"];\n'
        '  "b.md" [label="b.md"];\n'
        '  "s.md" -> "a.md" [label="0.900"];\n'
        '  "a.md" -> "c.md" [label="0.420"];\n'
        '  "b.md" -> "d.md" [label="0.300"];\n'
        "}\n"
    )


@pytest.fixture
def indexed(kb: Path, make_settings, tmp_path: Path) -> list[str]:
    for rel, text in NOTES.items():
        write(kb / rel, text)
    anyio.run(lambda: index_once(make_settings(kb)))
    return ["--kb", str(kb), "--index", str(tmp_path / "index.sqlite"), "--no-daemon"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_related_format_dot_prints_the_answer_of_the_index_as_a_graph_on_stdout(indexed, capsys):
    code, out, _ = run(capsys, "related", "work/retrieval.md", *indexed, "--format", "json")
    assert code == 0
    found = json.loads(out)
    assert found["related"], found
    code, out, _ = run(capsys, "related", "work/retrieval.md", *indexed, "--format", "dot")
    assert code == 0
    lines = out.splitlines()
    assert lines[:3] == ["digraph related {", "  rankdir=LR;", "  node [shape=box];"] and lines[-1] == "}"
    assert lines[3] == '  "work/retrieval.md" [label="Hybrid retrieval\\nwork/retrieval.md", style=bold];'
    nodes = [line for line in lines if re.fullmatch(r'  "[^"]+" \[label=.*\];', line) and " -> " not in line]
    edges = [line for line in lines if " -> " in line]
    assert len(nodes) == 1 + len(found["related"]) and len(edges) == len(found["related"])
    for n, edge in zip(found["related"], edges):
        assert edge == f'  "work/retrieval.md" -> "{n["path"]}" [label="{n["score"]:.3f}"];'
    if any(n["path"] == "work/日本語.md" for n in found["related"]):
        assert '  "work/日本語.md" [label="検索の \\"評価\\"\\nwork/日本語.md"];' in lines


def test_related_format_svg_without_graphviz_exits_2_with_one_line_saying_how_to_get_it(indexed, capsys, monkeypatch,
                                                                                         tmp_path):
    empty = tmp_path / "no-dot"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, out, err = run(capsys, "related", "work/retrieval.md", *indexed, "--format", "svg")
    assert code == 2 and out == ""
    assert err == f"groove: error: {SVG_NEEDS_DOT}\n"
    assert "apt install graphviz" in err and "--format dot" in err


def stand_in_dot(folder: Path, script: str) -> None:
    folder.mkdir()
    dot = folder / "dot"
    dot.write_text(f"#!{sys.executable}\nimport sys\n{script}\n", encoding="utf-8")
    dot.chmod(0o755)


def test_related_format_svg_pipes_the_dot_through_dot_tsvg_and_prints_what_it_draws(indexed, capsys, monkeypatch,
                                                                                    tmp_path, spawn):
    stand_in_dot(tmp_path / "bin", "text = sys.stdin.buffer.read().decode('utf-8')\n"
                                   "sys.stdout.write('<svg args=%r>' % sys.argv[1:] + text + '</svg>\\n')")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    code, dot_out, _ = run(capsys, "related", "work/retrieval.md", *indexed, "--format", "dot")
    assert code == 0
    code, out, _ = run(capsys, "related", "work/retrieval.md", *indexed, "--format", "svg")
    assert code == 0
    assert out == "<svg args=['-Tsvg']>" + dot_out + "</svg>\n"


def test_related_format_svg_says_what_graphviz_said_when_it_fails(indexed, capsys, monkeypatch, tmp_path, spawn):
    stand_in_dot(tmp_path / "bin", "sys.stderr.write('Error: syntax error in line 1\\n'); sys.exit(1)")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    code, out, err = run(capsys, "related", "work/retrieval.md", *indexed, "--format", "svg")
    assert code == 1 and out == ""
    assert "Graphviz's dot could not draw the graph: Error: syntax error in line 1" in err


# --- the graph steered as GrooveSeek's: seed strategy, max seed chunks, max nodes, path and tag filters -----------

def words(stem: str, n: int = 70) -> str:
    """A paragraph of n distinct words of one topic (the fake embedder hashes words: a topic is its own direction)."""
    return " ".join(f"{stem}{i}" for i in range(n)) + "."


STEERED = {
    # a long note: its first section shares the ferry words, its second the tomato words, the rest are its own
    "work/long.md": "# Long\n\n## Ferries\n\n" + words("ferry") + "\n\n## Tomatoes\n\n" + words("tomato") + "".join(
        f"\n\n## Part {k}\n\n" + words(f"own{k}x") for k in range(6)),
    "travel/ferry.md": note("Ferry", words("ferry"), tags=["travel"]),
    "garden/tomato.md": note("Tomato", words("tomato"), tags=["garden"]),
}


@pytest.fixture
def steered(kb: Path, make_settings, tmp_path: Path) -> list[str]:
    for rel, text in STEERED.items():
        write(kb / rel, text)
    anyio.run(lambda: index_once(make_settings(kb)))
    return ["--kb", str(kb), "--index", str(tmp_path / "index.sqlite"), "--no-daemon", "--format", "json"]


def scores(capsys, *argv: str) -> dict[str, float]:
    code, out, err = run(capsys, "related", "work/long.md", *argv)
    assert code == 0, err
    return {n["path"]: n["score"] for n in json.loads(out)["related"]}


def test_all_chunks_finds_the_notes_each_section_matches_which_the_centroid_of_a_long_note_ranks_far(steered, capsys):
    centroid = scores(capsys, *steered)
    each = scores(capsys, *steered, "--seed-strategy", "all_chunks")
    assert set(each) >= {"travel/ferry.md", "garden/tomato.md"}
    # each section meets its twin whole; the mean of eight sections meets it at a fraction
    assert each["travel/ferry.md"] > 0.95 and each["garden/tomato.md"] > 0.95
    assert centroid["travel/ferry.md"] < 0.6 and centroid["garden/tomato.md"] < 0.6
    assert scores(capsys, *steered, "--seed-strategy", "all-chunks") == each  # GrooveSeek's spelling too
    # a similarity floor between the two keeps the twins for all_chunks, drops them for the centroid
    assert "travel/ferry.md" not in scores(capsys, *steered, "--min-similarity", "0.8")
    assert "travel/ferry.md" in scores(capsys, *steered, "--min-similarity", "0.8", "--seed-strategy", "all_chunks")


def test_max_seed_chunks_seeds_a_note_with_its_first_chunks_only(steered, capsys):
    first = scores(capsys, *steered, "--seed-strategy", "all_chunks", "--max-seed-chunks", "1")  # Ferries only
    assert first["travel/ferry.md"] > 0.95 and first.get("garden/tomato.md", 0.0) < 0.3
    two = scores(capsys, *steered, "--seed-strategy", "all_chunks", "--max-seed-chunks", "2")
    assert two["garden/tomato.md"] > 0.95
    # the centroid of the first two sections lies between the twins: nearer each than the whole note's centroid
    assert scores(capsys, *steered, "--max-seed-chunks", "2")["garden/tomato.md"] > scores(capsys, *steered)[
        "garden/tomato.md"]


def test_path_and_tag_filters_keep_only_their_notes_in_the_graph(steered, capsys):
    assert set(scores(capsys, *steered, "--seed-strategy", "all_chunks", "--tag", "garden")) == {"garden/tomato.md"}
    assert set(scores(capsys, *steered, "--seed-strategy", "all_chunks", "--path", "travel/**")) == {"travel/ferry.md"}


@pytest.mark.parametrize("argv, says", [
    (("--max-seed-chunks", "0"), "max_seed_chunks must be between 1 and 256, got 0"),
    (("--max-seed-chunks", "257"), "max_seed_chunks must be between 1 and 256, got 257"),
    (("--max-nodes", "201"), "max_nodes must be between 1 and 200, got 201"),
])
def test_a_seed_or_node_bound_out_of_range_is_one_line(steered, capsys, argv, says):
    code, out, err = run(capsys, "related", "work/long.md", *steered[:-2], *argv)
    assert code != 0 and out == "" and says in err and err.count("\n") == 1


async def test_the_mcp_related_tool_takes_max_nodes_the_seed_strategy_and_the_filters(kb: Path, make_settings):
    from contextlib import AsyncExitStack

    from mcp import Client

    from groove.daemon import Daemon
    from groove.serve.mcp.server import build_server
    from tests.support.fakes import BagOfWordsEmbedder

    for rel, text in STEERED.items():
        write(kb / rel, text)
    daemon = Daemon(make_settings(kb), embedder=BagOfWordsEmbedder())
    async with anyio.create_task_group() as tg, AsyncExitStack() as stack:
        await tg.start(daemon.run_background)
        stack.callback(daemon.stop)
        with anyio.fail_after(60):
            await daemon.reconciled.wait()
            while (await daemon.index.status()).pending_chunks:
                await anyio.sleep(0.1)
        client = await stack.enter_async_context(Client(build_server(daemon)))

        async def related(**arguments) -> dict:
            result = await client.call_tool("related", {"path": "work/long.md", **arguments})
            assert not result.is_error, result.content[0].text
            return {n["path"]: n["score"] for n in result.structured_content["related"]}

        each = await related(seed_strategy="all_chunks", max_nodes=5, max_seed_chunks=2)
        assert each["travel/ferry.md"] > 0.95 and each["garden/tomato.md"] > 0.95
        assert (await related())["travel/ferry.md"] < 0.6  # the centroid, by default
        assert set(await related(seed_strategy="all_chunks", filters={"tags_any": ["travel"]})) == {"travel/ferry.md"}
        assert set(await related(max_nodes=1)) == {next(iter(await related()))}  # the node budget cuts the walk
        bad = await client.call_tool("related", {"path": "work/long.md", "max_seed_chunks": 0})
        assert bad.is_error and "max_seed_chunks must be between 1 and 256, got 0" in bad.content[0].text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_graphviz_accepts_the_dot_of_a_two_hop_walk_and_draws_every_note_and_edge(steered, capsys, spawn):
    code, dot_text, err = run(capsys, "related", "work/long.md", *steered[:-2], "--format", "dot", "--depth", "2",
                              "--seed-strategy", "all_chunks")
    assert code == 0, err
    drawn = spawn.run([shutil.which("dot"), "-Tsvg"], input=dot_text.encode("utf-8"), capture_output=True, timeout=60)
    assert drawn.returncode == 0, drawn.stderr
    svg = drawn.stdout.decode("utf-8")
    nodes = re.findall(r'^  ("[^"]+") \[label=', dot_text, re.M)
    edges = re.findall(r"^  .+ -> .+;$", dot_text, re.M)
    assert svg.count('class="node"') == len(nodes) and svg.count('class="edge"') == len(edges) >= 2
    assert "<title>work/long.md</title>" in svg
