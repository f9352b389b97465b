"""`groove related --format dot|svg` (issue 38, point 3): the related notes as a Graphviz graph.

The DOT is checked against hand-written text (no DOT parser ships with groove's venv, nor Graphviz here); the
command runs in process on a real index built with the fake embedder; svg without Graphviz's `dot` on PATH
says so in one line, and with a stand-in `dot` the DOT goes to `dot -Tsvg` and its output to stdout.
"""

from __future__ import annotations

import json
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
