"""Eval metrics above rank 1: numbers worked out by hand (in the comments), not by the code under test."""

from __future__ import annotations

import pytest

from groove.evaluate.metrics import aggregate, first_ranks, score_query

# log2(2) = 1, log2(3) = 1.5849625, log2(4) = 2  ->  1/log2(3) = 0.6309298


def test_two_of_three_relevant_notes_at_ranks_2_and_3():
    s = score_query([2, None, 3], n_expected=3)
    # DCG  = 1/log2(3) + 1/log2(4)            = 0.6309298 + 0.5       = 1.1309298
    # IDCG = 1/log2(2) + 1/log2(3) + 1/log2(4) = 1 + 0.6309298 + 0.5   = 2.1309298
    # nDCG = 1.1309298 / 2.1309298 = 0.5307210
    assert s.ndcg10 == pytest.approx(0.5307210, abs=1e-6)
    assert s.rr == 0.5  # the first relevant note is at rank 2
    assert s.recall == {1: 0.0, 5: pytest.approx(2 / 3), 10: pytest.approx(2 / 3)}


def test_a_relevant_note_below_rank_10_counts_for_nothing_in_ndcg_at_10():
    s = score_query([12, 1], n_expected=2)
    # DCG = 1/log2(2) = 1 (rank 12 is past the cut); IDCG = 1 + 0.6309298 = 1.6309298
    # nDCG = 1 / 1.6309298 = 0.6131472
    assert s.ndcg10 == pytest.approx(0.6131472, abs=1e-6)
    assert s.rr == 1.0
    assert s.recall == {1: 0.5, 5: 0.5, 10: 0.5}


def test_the_ideal_dcg_stops_at_ten_relevant_notes():
    # Twelve relevant notes, ten of them at ranks 1..10: the best a top 10 can do, so nDCG = 1.
    s = score_query(list(range(1, 11)) + [None, None], n_expected=12)
    assert s.ndcg10 == pytest.approx(1.0)
    assert s.recall[10] == pytest.approx(10 / 12)


def test_the_aggregate_is_the_mean_over_queries_rounded_to_four_places():
    a = score_query([2, None, 3], n_expected=3)
    b = score_query([12, 1], n_expected=2)
    m = aggregate([a, b])
    # nDCG: (0.5307210 + 0.6131472) / 2 = 0.5719341; MRR: (0.5 + 1) / 2 = 0.75
    # recall@1: (0 + 0.5) / 2 = 0.25; recall@5: (2/3 + 1/2) / 2 = 0.5833333
    assert m == {"recall@1": 0.25, "recall@5": 0.5833, "recall@10": 0.5833, "mrr": 0.75, "ndcg@10": 0.5719}


def test_each_expected_note_counts_once_at_its_first_matching_rank():
    hits = ["x", "a", "b", "a", "c"]
    assert first_ranks(hits, ["a", "c", "z"], lambda h, e: h == e) == [2, 5, None]
    # DCG = 1/log2(3) + 1/log2(6) = 0.6309298 + 0.3868528 = 1.0177826; IDCG(3) = 2.1309298
    assert score_query([2, 5, None], 3).ndcg10 == pytest.approx(1.0177826 / 2.1309298, abs=1e-6)
