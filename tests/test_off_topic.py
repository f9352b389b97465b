"""off_topic (issue 21, decision 0017): the pure calibration and decision, the abstention rates
`groove eval` reports, the regression gate over them, unanswerable golden queries, and the flag
on a real index (a deterministic fake embedder: these tests are not about the model; the flag's
quality is tests/test_quality_bilingual.py's, with the real one)."""

from __future__ import annotations

import json

import anyio
import pytest

from groove.evaluate import golden
from groove.evaluate.history import compare
from groove.evaluate.metrics import abstention, auroc
from groove.search import offtopic
from groove.search.answers import search_answer, search_text
from groove.search.offtopic import Calibration, calibrate, features, is_off_topic, score, synthetic_query
from groove.search.pipeline import SearchRequest
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.off_topic import TOPICS
from tests.support.oneshot import eval_once, index_once, search_once

CAL = Calibration(answered=0.90, unanswered=0.86, queries=64, vectors=1000, model="m")


def vector_leg(top: float, tenth: float) -> list[tuple[int, float]]:
    step = (top - tenth) / 9
    return [(i + 1, top - i * step) for i in range(20)]


# --- the calibration ---------------------------------------------------------------------------

def test_a_synthetic_query_is_a_window_of_words_of_spaced_text_and_of_characters_of_japanese():
    english = " ".join(f"word{i}" for i in range(40))
    q = synthetic_query(english, seed=5)
    assert q.split() == [f"word{i}" for i in range(5, 5 + offtopic.WINDOW_WORDS)]
    japanese = "東大寺は奈良県にある寺院で、八世紀に聖武天皇の発願で建てられた。大仏殿は世界最大級の木造建築である。"
    q = synthetic_query(japanese, seed=3)
    assert len(q) == offtopic.WINDOW_CHARS and q in japanese
    assert synthetic_query("## Heading\n\n**bold** text", seed=0) == "Heading bold text"


def test_the_calibration_is_the_median_top_cosine_with_and_without_the_querys_note():
    cal = calibrate([0.9] * 5 + [0.8] * 4, [0.85] * 5 + [0.7] * 4, model="m", vectors=50)
    assert cal == Calibration(answered=0.9, unanswered=0.85, queries=9, vectors=50, model="m")


def test_no_calibration_from_too_few_synthetic_queries_or_references_that_do_not_separate():
    assert calibrate([0.9] * 7, [0.8] * 7, model="m", vectors=7) is None
    assert calibrate([0.8] * 20, [0.8] * 20, model="m", vectors=20) is None


def test_a_calibration_serves_the_same_model_while_the_collection_moves_by_five_percent_or_64_vectors():
    big = Calibration(answered=0.9, unanswered=0.8, queries=64, vectors=10_000, model="m")
    assert big.serves("m", 10_500) and big.serves("m", 9_500) and not big.serves("m", 10_501)
    assert not big.serves("other model", 10_000)
    small = Calibration(answered=0.9, unanswered=0.8, queries=20, vectors=40, model="m")
    assert small.serves("m", 104) and not small.serves("m", 105)
    assert Calibration.from_dict(json.loads(json.dumps(CAL.to_dict()))) == CAL


# --- the decision ------------------------------------------------------------------------------

def test_a_calibration_serves_only_the_quality_floor_it_was_measured_under():
    floored = Calibration(answered=0.9, unanswered=0.86, queries=64, vectors=1000, model="m", min_quality=0.3)
    assert floored.serves("m", 1000, 0.3) and not floored.serves("m", 1000, None) and not floored.serves("m", 1000, 0.5)
    assert not CAL.serves("m", 1000, 0.3)  # one stored before the floor was part of it is measured again
    assert Calibration.from_dict(json.loads(json.dumps(floored.to_dict()))) == floored
    old = {k: v for k, v in CAL.to_dict().items() if k != "min_quality"}
    assert Calibration.from_dict(old).min_quality is None


def test_the_top_cosine_is_placed_between_the_indexs_own_references():
    f = features({"vector": vector_leg(0.88, 0.86)}, {}, CAL)
    assert f["vector_position"] == pytest.approx(0.5) and f["vector_gap"] == pytest.approx(0.5)
    assert f["evidence"] == 0.0 and f["agreement"] is False


def test_on_a_scale_narrower_than_min_scale_the_distance_below_unanswered_is_read_on_min_scale():
    # A dense collection (SciFact's abstracts, a cmdlet reference): its references 0.015 apart. A question
    # 0.015 below `unanswered`, with what full text finds of it, read -1.0 on that scale and was flagged.
    narrow = Calibration(answered=0.90, unanswered=0.885, queries=64, vectors=5000, model="m")
    f = features({"vector": vector_leg(0.87, 0.86), "words": [(50, 9.0)]}, {"words": 0.2}, narrow)
    assert f["vector_position"] == pytest.approx(-0.015 / offtopic.MIN_SCALE, abs=1e-3)
    assert f["vector_gap"] == pytest.approx(0.01 / 0.015, abs=1e-3)  # the standout keeps the scale's own units
    assert f["vector_position"] > -1.0 and not is_off_topic(f, has_results=True)
    # a query from elsewhere still sits far below, and a scale wider than the floor keeps its own width
    far = features({"vector": vector_leg(0.77, 0.76)}, {"words": 0.05}, narrow)
    assert far["vector_position"] <= -3 and is_off_topic(far, has_results=True)
    assert offtopic.MIN_SCALE <= CAL.answered - CAL.unanswered
    assert features({"vector": vector_leg(0.88, 0.86)}, {}, CAL)["vector_position"] == pytest.approx(0.5)


def test_a_query_as_close_as_the_notes_own_passages_is_not_off_topic():
    f = features({"vector": vector_leg(0.90, 0.87)}, {}, CAL)
    assert not is_off_topic(f, has_results=True)


def test_a_query_below_the_in_domain_unanswered_reference_with_no_words_in_the_notes_is_off_topic():
    f = features({"vector": vector_leg(0.84, 0.83), "words": [(50, 3.0)]}, {"words": 0.1}, CAL)
    assert f["vector_position"] < 0 and is_off_topic(f, has_results=True)


def test_full_text_evidence_and_agreement_raise_the_score_and_can_clear_the_flag():
    legs = {"vector": vector_leg(0.855, 0.85), "words": [(1, 9.0), (7, 3.0)]}
    weak = features(legs, {"words": 0.0}, CAL)
    strong = features(legs, {"words": 0.9}, CAL)
    assert strong["agreement"] and not weak["agreement"]  # a leg without evidence does not agree
    assert score(strong) == pytest.approx(score(weak) + offtopic.COSINE.evidence * 0.9 + offtopic.COSINE.agreement)
    assert is_off_topic(weak, has_results=True) and not is_off_topic(strong, has_results=True)


# --- a mixed-language index: the centred scale (decision 0017, 2026-12-04) -----------------------

CENTRED_CAL = Calibration(answered=0.90, unanswered=0.86, queries=64, vectors=1000, model="m",
                          answered_centred=0.14, unanswered_centred=0.08)


def test_a_mixed_language_calibration_keeps_both_scales_and_survives_a_round_trip():
    cal = calibrate([0.9] * 9, [0.85] * 9, model="m", vectors=50, answered_centred=[0.14] * 9,
                    unanswered_centred=[0.08] * 9)
    assert cal.centred and (cal.answered_centred, cal.unanswered_centred) == (0.14, 0.08)
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal
    # centred references that do not separate are left out: that index reads raw cosines
    flat = calibrate([0.9] * 9, [0.85] * 9, model="m", vectors=50, answered_centred=[0.1] * 9,
                     unanswered_centred=[0.1] * 9)
    assert flat is not None and not flat.centred


def test_a_calibration_without_centred_references_does_not_serve_an_index_with_language_centres():
    assert CAL.serves("m", 1000) and not CAL.serves("m", 1000, None, True)
    assert CENTRED_CAL.serves("m", 1000, None, True) and CENTRED_CAL.serves("m", 1000)


def test_a_cross_language_answer_is_placed_on_the_centred_scale_not_on_raw_cosines():
    # A Japanese question's English answer: a raw cosine below the in-domain unanswered reference
    # (a language apart), a centred score near the answered one.
    raw = features({"vector": vector_leg(0.84, 0.83)}, {}, CENTRED_CAL)
    centred = features({"vector": vector_leg(0.135, 0.09)}, {}, CENTRED_CAL, centred=True)
    assert raw["scale"] == "cosine" and is_off_topic(raw, has_results=True)
    assert centred["scale"] == "centred" and centred["vector_position"] == pytest.approx(0.9167, abs=1e-3)
    assert not is_off_topic(centred, has_results=True)
    assert offtopic.thresholds(centred)["threshold"] == offtopic.CENTRED.threshold
    # an off-topic query sits below the centred unanswered reference
    assert is_off_topic(features({"vector": vector_leg(0.07, 0.05)}, {}, CENTRED_CAL, centred=True), has_results=True)


def test_without_centred_references_the_centred_leg_is_read_as_cosines():
    f = features({"vector": vector_leg(0.88, 0.86)}, {}, CAL, centred=True)
    assert f["scale"] == "cosine" and f["vector_position"] == pytest.approx(0.5)


def test_without_a_calibrated_vector_leg_the_full_text_evidence_alone_decides():
    assert is_off_topic(features({"words": [(1, 2.0)]}, {"words": 0.1}, None), has_results=True)
    assert not is_off_topic(features({"words": [(1, 2.0)]}, {"words": 0.8}, None), has_results=True)
    assert score(features({"vector": vector_leg(0.9, 0.8)}, {}, None)) is None


def test_a_search_that_found_nothing_is_off_topic():
    assert is_off_topic(features({}, {}, CAL), has_results=False)


def test_the_text_rendering_says_what_each_flag_means():
    answer = search_answer({"results": [], "low_confidence": True, "off_topic": True, "filter_applied": None,
                            "pending_chunks": 0, "vectors_degraded": False})
    text = search_text(answer)
    assert "off_topic: true (the notes most likely do not answer this" in text
    assert "low_confidence: true (no note stands out from the next" in text


# --- groove eval: unanswerable queries and the two rates -----------------------------------------

def test_the_abstention_rates_are_the_shares_of_each_kind_flagged():
    flags = [(False, False), (False, True), (False, False), (False, False), (True, True), (True, False)]
    assert abstention(flags) == {"off_topic_answerable": 0.25, "off_topic_unanswerable": 0.5}
    assert abstention([(False, False)]) == {"off_topic_answerable": 0.0}


def test_auroc_is_the_chance_a_positive_outscores_a_negative():
    assert auroc([3, 4], [1, 2]) == 1.0 and auroc([1], [2]) == 0.0 and auroc([1, 2], [2]) == 0.25
    assert auroc([], [1]) is None


def test_a_rise_in_answerable_flagged_or_a_fall_in_unanswerable_flagged_is_a_regression():
    fp = {"golden": "x"}
    base = [{"fingerprint": fp, "metrics": {"ndcg@10": 0.8, "off_topic_answerable": 0.05, "off_topic_unanswerable": 0.8}}]
    ok = compare(base, fp, {"ndcg@10": 0.8, "off_topic_answerable": 0.02, "off_topic_unanswerable": 0.9}, 0.02)
    assert ok["status"] == "ok"
    more_alarms = compare(base, fp, {"ndcg@10": 0.8, "off_topic_answerable": 0.10, "off_topic_unanswerable": 0.8}, 0.02)
    assert more_alarms["regressions"] == ["off_topic_answerable"]
    fewer_caught = compare(base, fp, {"ndcg@10": 0.8, "off_topic_answerable": 0.05, "off_topic_unanswerable": 0.7}, 0.02)
    assert fewer_caught["regressions"] == ["off_topic_unanswerable"]


def test_a_golden_query_with_an_empty_expected_list_is_unanswerable(tmp_path):
    path = tmp_path / "golden.yaml"
    path.write_text("queries:\n  - {id: a, query: rice, expected: [rice.md]}\n  - {id: b, query: helm chart, expected: []}\n")
    loaded = golden.load(path)
    assert [q.unanswerable for q in loaded] == [False, True]
    path.write_text("queries:\n  - {id: a, query: rice}\n")
    with pytest.raises(golden.GoldenError, match=r"\[\] for a query the notes do not answer"):
        golden.load(path)


def test_a_beir_query_without_qrels_is_unanswerable_only_when_its_row_says_so(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    rows = [{"_id": "q1", "text": "answered"}, {"_id": "q2", "text": "no qrels, left out"},
            {"_id": "q3", "text": "flagged", "unanswerable": True},
            {"_id": "q4", "text": "flagged in metadata", "metadata": {"unanswerable": True}}]
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = {q.id: q.unanswerable for q in golden.load(tmp_path)}
    assert loaded == {"q1": False, "q3": True, "q4": True}


# --- on a real index (fake embedder) -----------------------------------------------------------

def test_every_search_answer_carries_off_topic_and_explain_shows_its_evidence(topics_vault):
    embedder = BagOfWordsEmbedder()
    req = SearchRequest(query="quantum chromodynamics lattice", limit=5, explain=True)
    answer = anyio.run(lambda: search_once(topics_vault, req, embedder=embedder))
    assert answer.off_topic is True and answer.results  # flagged, and the results are still there
    o = answer.explain["off_topic"]
    assert {"vector_top", "vector_position", "vector_gap", "evidence", "agreement", "score", "threshold"} <= set(o)
    assert o["calibration"]["queries"] >= 8 and o["calibration"]["answered"] > o["calibration"]["unanswered"]
    assert "off_topic:" in search_text(answer)
    on_topic = anyio.run(lambda: search_once(topics_vault, SearchRequest(query="knead the bread dough", limit=5),
                                             embedder=embedder))
    assert on_topic.off_topic is False and on_topic.results[0].path == "bread.md"
    assert "off_topic" in on_topic.script_json()


def test_the_flag_does_not_change_the_results_or_their_order(topics_vault):
    embedder = BagOfWordsEmbedder()
    req = SearchRequest(query="quantum chromodynamics lattice", limit=10)
    flagged = anyio.run(lambda: search_once(topics_vault, req, embedder=embedder))
    plain = anyio.run(lambda: search_once(topics_vault, req.model_copy(update={"retriever": "vector"}), embedder=embedder))
    assert flagged.off_topic and [h.path for h in flagged.results]  # the nearest passages stay
    assert len(flagged.results) == len(plain.results)


def test_groove_index_stores_the_calibration_with_the_index(topics_vault):
    from groove.store.sqlite import connection
    con = connection.connect_sync(topics_vault.resolved_index_path(), readonly=True)
    try:
        stored = con.execute("SELECT value FROM meta WHERE key = 'off_topic_calibration'").fetchone()
    finally:
        con.close()
    cal = Calibration.from_dict(json.loads(stored[0]))
    assert cal.model == BagOfWordsEmbedder().identity and cal.queries >= 8


def test_with_the_quality_filter_on_the_calibration_is_measured_on_the_chunks_a_search_shows(kb, make_settings):
    # A scale measured over every chunk put a searched top cosine lower than it is (the hidden stubs are
    # not searched) and flagged answerable queries: the sample and its searches keep to the shown chunks.
    from groove.store.sqlite.search import calibration_passages
    from groove.store.sqlite import connection

    for name, parts in TOPICS.items():
        write(kb / f"{name}.md", f"# {name.title()}\n\n" + "\n\n".join(f"{p.capitalize()}." for p in parts) + "\n")
    for i in range(12):
        write(kb / f"stub{i}.md", f"# Stub {i}\n\nTODO TBD FIXME WIP TODO TBD\n")  # long enough, no substance
    settings = make_settings(kb, **{"quality_filter.enabled": True})
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    con = connection.connect_sync(settings.resolved_index_path(), readonly=True)
    try:
        stored = json.loads(con.execute("SELECT value FROM meta WHERE key = 'off_topic_calibration'").fetchone()[0])
        hidden = {r[0] for r in con.execute("SELECT id FROM chunks WHERE quality < 0.3 AND length(content) >= 20")}
    finally:
        con.close()
    assert stored["min_quality"] == settings.quality_filter.threshold == 0.3
    assert len(hidden) >= 12

    async def sampled(floor):
        conn = await connection.connect(settings.resolved_index_path(), readonly=True)
        try:
            return {cid for cid, _, _ in await calibration_passages(conn, 1000, floor)}
        finally:
            await conn.close()

    assert hidden <= anyio.run(sampled, None)  # every chunk, unfloored
    shown = anyio.run(sampled, 0.3)
    assert shown and not (shown & hidden)


def test_eval_reports_both_rates_beside_recall(topics_vault, tmp_path):
    path = tmp_path / "golden.yaml"
    path.write_text("queries:\n"
                    "  - {id: a, query: knead the bread dough, expected: [bread.md]}\n"
                    "  - {id: b, query: quantum chromodynamics lattice, expected: []}\n")
    result = anyio.run(lambda: eval_once(topics_vault, path, embedder=BagOfWordsEmbedder(), record=False))
    m = result.metrics
    assert m["recall@1"] == 1.0 and m["off_topic_answerable"] == 0.0 and m["off_topic_unanswerable"] == 1.0
    assert result.answerable == 1 and result.unanswerable == 1


def test_while_one_search_measures_a_moved_index_the_others_keep_the_last_scale_instead_of_waiting(topics_vault, monkeypatch):
    from groove.index import Index
    from groove.search.pipeline import Searcher

    stale = Calibration(answered=0.9, unanswered=0.5, queries=64, vectors=1, model=BagOfWordsEmbedder().identity)
    started, release = anyio.Event(), anyio.Event()
    fresh = Calibration(answered=0.8, unanswered=0.4, queries=64, vectors=1, model=stale.model)

    async def slow_measure(self, reading, model, size, floor=None, centres=None):  # fault injection: a measurement that takes its time
        started.set()
        await release.wait()
        return fresh

    monkeypatch.setattr(Searcher, "_measure_calibration", slow_measure)
    got: dict[str, Calibration | None] = {}

    async def main() -> None:
        async with Index.open(topics_vault, readonly=True, embedder=BagOfWordsEmbedder()) as index:
            searcher = index.searcher
            searcher.calibration = stale  # measured when the index held 1 vector: it no longer serves
            state = (stale.model, 500, None)  # the index now holds 500 vectors

            async def first() -> None:
                got["first"] = await searcher.calibration_for(index.reading, state)

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await started.wait()
                with anyio.fail_after(5):
                    got["second"] = await searcher.calibration_for(index.reading, state)
                release.set()

    anyio.run(main)
    assert got["second"] is stale and got["first"] is fresh


def test_a_japanese_query_weighs_its_full_text_evidence_more_than_an_english_one():
    legs = {"vector": vector_leg(0.855, 0.85)}
    english = features(legs, {"words": 0.2}, CAL)
    japanese = features(legs, {"trigram": 0.2}, CAL, cjk=True)
    assert offtopic.weights(japanese) == offtopic.COSINE_CJK and offtopic.weights(english) == offtopic.COSINE
    assert score(english) == pytest.approx(-0.125 + 2.0 * 0.2 + 1.0 * 0.125, abs=1e-4)  # position, evidence, gap
    assert score(japanese) == pytest.approx(-0.125 + 3.0 * 0.2 + 0.25 * 0.125, abs=1e-4)  # rounded to 4 places
    assert is_off_topic(english, has_results=True) and not is_off_topic(japanese, has_results=True)
    # a cross-language best passage is read on the centred scale, whatever the query's language
    centred = features({"vector": vector_leg(0.135, 0.09)}, {}, CENTRED_CAL, centred=True, cjk=True)
    assert offtopic.weights(centred) == offtopic.CENTRED


def test_a_japanese_query_without_a_full_text_leg_keeps_the_english_weights():
    # The Japanese weights lean on the full-text evidence; the vector retriever has none to give
    # (on JaQuAD, `--retriever vector` flagged 24% of the answerable with them, 12.5% without).
    vector_only = features({"vector": vector_leg(0.855, 0.85)}, {}, CAL, cjk=True)
    assert vector_only["full_text"] is False and offtopic.weights(vector_only) == offtopic.COSINE
    hybrid = features({"vector": vector_leg(0.855, 0.85)}, {"trigram": 0.0}, CAL, cjk=True)
    assert hybrid["full_text"] is True and offtopic.weights(hybrid) == offtopic.COSINE_CJK
