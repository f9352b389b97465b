import math

import pytest

from groove.search.fusion import low_confidence, rrf


def ids(fused):
    return [chunk_id for chunk_id, _ in fused]


# --- rrf ---------------------------------------------------------------------


def test_rrf_scores_are_the_sum_of_reciprocal_one_based_ranks_over_the_legs():
    fused = dict(rrf({"fts": [1, 2], "vec": [2, 3]}, k=60))
    assert fused[1] == pytest.approx(1 / 61)
    assert fused[2] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[3] == pytest.approx(1 / 62)
    assert set(fused) == {1, 2, 3}


def test_rrf_uses_the_given_k():
    fused = dict(rrf({"fts": [7]}, k=1.0))
    assert fused[7] == 0.5


def test_rrf_sorts_by_fused_score_descending():
    fused = rrf({"fts": [1, 2, 3, 4], "vec": [4, 3, 9]})
    scores = [score for _, score in fused]
    assert scores == sorted(scores, reverse=True)
    assert ids(fused)[:3] == [4, 3, 1]  # 4: 1/64 + 1/61 > 3: 1/63 + 1/62 > 1: 1/61


def test_fts_decides_the_top_rank_when_the_vector_leg_prefers_another_chunk():
    # The vector leg alone would put chunk 20 first; the full-text leg's
    # first chunk (10) is only third in the vector leg.
    vec = [20, 30, 10]
    assert ids(rrf({"vec": vec}))[0] == 20
    fused = rrf({"fts": [10, 40], "vec": vec})
    assert ids(fused)[0] == 10


def test_a_chunk_first_in_fts_and_absent_from_the_vector_leg_outranks_every_chunk_below_the_vector_top():
    fused = rrf({"fts": [10, 11], "vec": [20, 30, 40, 50]})
    order = ids(fused)
    assert order.index(10) < min(order.index(30), order.index(40), order.index(50), order.index(11))


def test_a_chunk_first_in_fts_and_absent_from_the_vector_leg_ties_the_vector_top_and_the_smaller_id_wins():
    # Both score 1/(k+1) and both have best rank 1: the id decides, whichever leg is listed first.
    assert ids(rrf({"fts": [10], "vec": [20]})) == [10, 20]
    assert ids(rrf({"vec": [20], "fts": [10]})) == [10, 20]
    assert ids(rrf({"fts": [20], "vec": [10]})) == [10, 20]


def test_equal_fused_scores_are_ordered_by_best_single_rank_before_id():
    # k=1: chunk 5 gets 1/4 + 1/4 = 0.5 from rank 3 in both legs;
    # chunk 9 gets 1/2 = 0.5 from rank 1 in one leg. Exact binary fractions.
    fused = rrf({"fts": [9, 100, 5], "vec": [200, 300, 5]}, k=1.0)
    assert dict(fused)[5] == dict(fused)[9] == 0.5
    order = ids(fused)
    assert order.index(9) < order.index(5)


def test_fused_scores_do_not_depend_on_the_order_the_legs_are_listed_in():
    legs = {
        "a": [1, 2, 3, 4, 5, 6],
        "b": [6, 5, 4, 3, 2, 1],
        "c": [3, 1, 6, 2, 5, 4],
    }
    forward = rrf(legs, k=0.3)
    backward = rrf(dict(reversed(list(legs.items()))), k=0.3)
    rotated = rrf({"c": legs["c"], "a": legs["a"], "b": legs["b"]}, k=0.3)
    assert forward == backward == rotated


def test_an_id_listed_twice_in_one_leg_counts_once_at_its_best_position():
    fused = dict(rrf({"fts": [1, 2, 1]}))
    assert fused[1] == pytest.approx(1 / 61)
    assert fused[2] == pytest.approx(1 / 62)


def test_rrf_of_no_legs_or_empty_legs_is_empty():
    assert rrf({}) == []
    assert rrf({"fts": [], "vec": []}) == []


@pytest.mark.parametrize("bad_k", [0, -1.0, math.nan, math.inf])
def test_rrf_rejects_a_k_that_is_not_a_positive_finite_number(bad_k):
    with pytest.raises(ValueError, match="greater than 0"):
        rrf({"fts": [1]}, k=bad_k)


# --- low_confidence -----------------------------------------------------------


def test_a_flat_score_list_is_low_confidence():
    assert low_confidence([0.0164, 0.0163, 0.0162, 0.0161, 0.016]) is True


def test_a_top_score_that_stands_out_is_not_low_confidence():
    assert low_confidence([0.0328, 0.01, 0.01, 0.01]) is False  # 0.0328 / 0.0157 > 1.5


def test_a_ratio_exactly_at_the_threshold_is_not_low_confidence():
    # mean (3 + 1 + 1 + 1) / 4 = 1.5 -> ratio 3 / 1.5 = exactly 2.0
    assert low_confidence([3.0, 1.0, 1.0, 1.0], ratio=2.0) is False
    assert low_confidence([3.0, 1.0, 1.0, 1.0], ratio=2.0000001) is True


def test_low_confidence_compares_against_the_top_n_scores_only():
    scores = [4.0, 2.0, 2.0] + [0.0] * 20
    # top 3: mean 8/3, ratio 4 / (8/3) = 1.5 < 1.6 -> low confidence
    assert low_confidence(scores, ratio=1.6, n=3) is True
    # over all 23 scores the mean is tiny and the top stands out
    assert low_confidence(scores, ratio=1.6, n=23) is False


def test_low_confidence_does_not_depend_on_the_order_of_the_scores():
    assert low_confidence([0.01, 0.0328, 0.01, 0.01]) is False
    assert low_confidence([1.0, 1.0, 0.9, 1.0]) is True


def test_fewer_than_two_scores_is_not_low_confidence():
    assert low_confidence([]) is False
    assert low_confidence([0.5]) is False
    assert low_confidence([0.0]) is False


def test_all_zero_scores_are_low_confidence():
    assert low_confidence([0.0, 0.0, 0.0]) is True


def test_low_confidence_rejects_negative_scores_instead_of_answering_nonsense():
    with pytest.raises(ValueError, match="non-negative"):
        low_confidence([2.0, -1.0])


@pytest.mark.parametrize("kwargs", [{"ratio": 0}, {"ratio": -1.0}, {"n": 1}, {"n": 0}])
def test_low_confidence_rejects_a_ratio_or_n_outside_its_range(kwargs):
    with pytest.raises(ValueError):
        low_confidence([1.0, 0.5], **kwargs)


# --- evidence fusion ------------------------------------------------------------

from groove.search.evidence import coverage, idf, term_weights  # noqa: E402
from groove.search.fusion import evidence_weight, weighted_rrf, z_fusion  # noqa: E402


def test_weighted_rrf_scales_each_legs_contribution():
    fused = dict(weighted_rrf({"fts": [1, 2], "vector": [2, 1]}, {"fts": 0.5, "vector": 1.0}, k=60))
    assert fused[1] == pytest.approx(0.5 / 61 + 1 / 62)
    assert fused[2] == pytest.approx(0.5 / 62 + 1 / 61)


def test_a_leg_with_weight_zero_adds_nothing_to_z_fusion():
    fused = z_fusion({"trigram": [(7, 9.0), (8, 1.0)], "vector": [(1, 0.9), (2, 0.8), (3, 0.7)]},
                     {"trigram": 0.0, "vector": 1.0})
    assert [cid for cid, _ in fused] == [1, 2, 3]


def test_z_fusion_keeps_a_leg_whose_top_stands_far_above_the_rest():
    # Hand computed: trigram scores 10, 1, 1 -> mean 4, sd sqrt(18) = 4.2426; shifted by the
    # minimum: chunk 5 gets 9 / 4.2426 = 2.1213, chunks 6 and 7 get 0.
    # vector scores 0.9, 0.8, 0.7 -> sd 0.08165; chunk 6 gets 0.2 / 0.08165 = 2.4495,
    # chunk 7 1.2247, chunk 5 (absent) 0.
    fused = dict(z_fusion({"trigram": [(5, 10.0), (6, 1.0), (7, 1.0)], "vector": [(6, 0.9), (7, 0.8), (8, 0.7)]},
                          {"trigram": 1.0, "vector": 1.0}))
    assert fused[5] == pytest.approx(2.1213, abs=1e-4)
    assert fused[6] == pytest.approx(2.4495, abs=1e-4)
    assert fused[7] == pytest.approx(1.2247, abs=1e-4)
    assert fused[8] == pytest.approx(0.0)


def test_a_complete_full_text_leg_that_found_one_chunk_lifts_it_above_the_other_legs_favourite():
    # A rare word's only note: without an anchor its one score is also its list's last (0).
    legs = {"words": [(5, 7.0)], "vector": [(6, 0.9), (5, 0.8), (7, 0.7)]}
    weights = {"words": 1.0, "vector": 1.0}
    assert [cid for cid, _ in z_fusion(legs, weights)][0] == 6
    # Hand computed: words 7 and the anchor 0 -> mean 3.5, sd 3.5, chunk 5 gets 7 / 3.5 = 2;
    # vector sd 0.08165: chunk 6 gets 2.4495, chunk 5 1.2247 -> chunk 5 3.2247 leads.
    fused = z_fusion(legs, weights, complete={"words": 0.0})
    assert fused[0][0] == 5 and fused[0][1] == pytest.approx(3.2247, abs=1e-4)
    assert dict(fused)[6] == pytest.approx(2.4495, abs=1e-4)


def test_the_complete_legs_are_the_full_text_legs_that_returned_fewer_than_asked():
    from groove.search.pipeline import complete_legs

    legs = {"words": [(1, 2.0)], "trigram": [(i, 1.0) for i in range(50)], "bigram": [(2, 1.0)], "vector": [(3, 0.5)]}
    assert complete_legs(legs, 50) == {"words": 0.0, "bigram": 0.0}  # the vector leg never is: every chunk has a distance


def test_z_fusion_refuses_scores_that_are_not_finite():
    with pytest.raises(ValueError, match="not finite"):
        z_fusion({"vector": [(1, float("nan"))]}, {})


def test_evidence_weight_is_zero_below_low_one_above_high_and_linear_between():
    assert evidence_weight(0.1, 0.25, 0.5) == 0.0
    assert evidence_weight(0.375, 0.25, 0.5) == pytest.approx(0.5)
    assert evidence_weight(0.9, 0.25, 0.5) == 1.0
    assert evidence_weight(0.3, 0.4, 0.4) == 0.0 and evidence_weight(0.4, 0.4, 0.4) == 1.0


def test_coverage_is_the_idf_share_of_the_query_found_in_the_best_text():
    terms = ["how", "cook", "chicken"]
    weights = [0.1, 1.0, 2.0]
    assert coverage(terms, weights, ["How are you", "nothing"]) == pytest.approx(0.1 / 3.1)
    assert coverage(terms, weights, ["how", "Chicken to cook"]) == pytest.approx(3.0 / 3.1)
    assert coverage([], [], ["x"]) == 0.0


def test_a_term_seen_everywhere_weighs_less_than_a_rare_one():
    w = term_weights(["the", "zyxquartz", "unseen"], {"the": 900, "zyxquartz": 1}, 1000)
    assert w[0] < w[1] == pytest.approx(w[2])
    assert idf(1000, 1000) > 0
