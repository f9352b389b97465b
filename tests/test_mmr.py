import numpy as np
import pytest

from groove.search.hits import Hit
from groove.search.mmr import apply_mmr, mmr_select


def v(*xs):
    return np.array(xs, dtype=np.float32)


def make_hit(chunk_id, score, doc_id):
    return Hit(
        chunk_id=chunk_id, doc_id=doc_id, path=f"n{doc_id}.md", title="t", heading="h", level=1,
        context="", content=f"chunk {chunk_id}\n", tags=[], date=None, start_line=1, end_line=1,
        ordinal=0, token_count=3, score=score,
    )


def test_lambda_one_reproduces_the_relevance_order_even_among_duplicates():
    candidates = [(1, 0.9, 1), (2, 0.8, 1), (3, 0.7, 2), (4, 0.1, 3)]
    vectors = {1: v(1, 0), 2: v(1, 0), 3: v(1, 0.01), 4: v(0, 1)}
    assert mmr_select(candidates, vectors, limit=4, lambda_=1.0) == [1, 2, 3, 4]


def test_a_near_duplicate_of_the_top_hit_is_pushed_below_a_different_one():
    # rel_norm: 1 -> 1.0, 2 -> 0.95, 3 -> 0.9, 4 -> 0.0
    # after picking 1: cand 2 = 0.7*0.95 - 0.3*~1.0 = 0.365; cand 3 = 0.7*0.9 - 0 = 0.63
    candidates = [(1, 1.0, 1), (2, 0.95, 2), (3, 0.9, 3), (4, 0.0, 4)]
    vectors = {1: v(1, 0, 0), 2: v(0.99, 0.01, 0), 3: v(0, 1, 0), 4: v(0, 0, 1)}
    assert mmr_select(candidates, vectors, limit=4, lambda_=0.7) == [1, 3, 2, 4]
    assert mmr_select(candidates, vectors, limit=4, lambda_=1.0) == [1, 2, 3, 4]


def test_a_candidate_stays_penalised_for_resembling_any_earlier_pick_not_just_the_last():
    # rel_norm: 1 -> 1.0, 2 -> 0.9, 3 -> 0.85, 4 -> 0.5, 5 -> 0.0 ; 3 duplicates 1
    candidates = [(1, 1.0, 1), (2, 0.9, 2), (3, 0.85, 3), (4, 0.5, 4), (5, 0.0, 5)]
    vectors = {1: v(1, 0, 0), 2: v(0, 1, 0), 3: v(1, 0, 0), 4: v(0, 0, 1)}
    # after 1: 2 = 0.63, 3 = 0.595 - 0.3 = 0.295, 4 = 0.35 -> 2
    # after 2: 3 is still a duplicate of 1: 0.295 < 4 = 0.35 -> 4, then 3, then 5
    assert mmr_select(candidates, vectors, limit=5, lambda_=0.7) == [1, 2, 4, 3, 5]


def test_same_doc_penalty_spreads_results_across_documents():
    candidates = [(1, 1.0, 10), (2, 0.9, 10), (3, 0.8, 20)]
    # no vectors: similarity 0 everywhere, only relevance and the penalty act
    assert mmr_select(candidates, {}, limit=3, lambda_=0.7) == [1, 2, 3]
    # cand 2 = 0.7*0.5 - 0.5 = -0.15 < cand 3 = 0.7*0 = 0
    assert mmr_select(candidates, {}, limit=3, lambda_=0.7, same_doc_penalty=0.5) == [1, 3, 2]


def test_a_hand_computed_example_picks_what_the_formula_says():
    # rel 3,2,1 -> rel_norm A=1.0, B=0.5, C=0.0; cos(B,A)=cos(B,C)=1/sqrt(2), cos(A,C)=0
    candidates = [(100, 3.0, 1), (200, 2.0, 1), (300, 1.0, 2)]
    vectors = {100: v(1, 0), 200: v(1, 1), 300: v(0, 1)}
    # lambda 0.8, no penalty, after A:
    #   B = 0.8*0.5 - 0.2*0.7071 = 0.2586   C = 0.8*0 - 0.2*0 = 0   -> B
    #   then C alone
    assert mmr_select(candidates, vectors, limit=3, lambda_=0.8) == [100, 200, 300]
    # with penalty 0.3: B = 0.2586 - 0.3 = -0.0414 < C = 0 -> C, then B
    assert mmr_select(candidates, vectors, limit=3, lambda_=0.8, same_doc_penalty=0.3) == [100, 300, 200]
    # lambda 0.5, no penalty: B = 0.25 - 0.5*0.7071 = -0.1036 < C = 0 -> C
    assert mmr_select(candidates, vectors, limit=3, lambda_=0.5) == [100, 300, 200]


def test_scores_are_min_max_normalised_so_their_scale_does_not_matter():
    vectors = {1: v(1, 0), 2: v(1, 0.2), 3: v(0, 1)}
    rrf_scale = [(1, 0.0328, 1), (2, 0.0320, 2), (3, 0.0160, 3)]
    reranker_scale = [(1, 8.0, 1), (2, 7.0, 2), (3, -9.0, 3)]
    scaled = [(i, s * 1000 + 5, d) for i, s, d in reranker_scale]
    # rel_norm of both: 1.0, ~0.95, 0.0 -> the same picks
    a = mmr_select(rrf_scale, vectors, limit=3, lambda_=0.6)
    b = mmr_select(reranker_scale, vectors, limit=3, lambda_=0.6)
    c = mmr_select(scaled, vectors, limit=3, lambda_=0.6)
    assert a == b == c


def test_the_first_pick_is_the_most_relevant_candidate_even_when_the_pool_is_not_sorted():
    candidates = [(1, 0.2, 1), (2, 0.9, 2), (3, 0.5, 3)]
    assert mmr_select(candidates, {}, limit=1, lambda_=0.0)[0] == 2
    assert mmr_select(candidates, {}, limit=3, lambda_=0.7) == [2, 3, 1]


def test_ties_go_to_the_earlier_candidate():
    candidates = [(5, 1.0, 1), (3, 1.0, 2), (9, 1.0, 3), (1, 1.0, 4)]
    assert mmr_select(candidates, {}, limit=4) == [5, 3, 9, 1]


def test_a_candidate_without_a_vector_counts_as_dissimilar_to_everything():
    candidates = [(1, 1.0, 1), (2, 0.9, 2), (3, 0.8, 3)]
    # rel_norm 1.0, 0.5, 0.0 ; lambda 0.5
    # 2 duplicates 1: 0.25 - 0.5 = -0.25 < 3 (no vector): 0.0 -> 3 first
    assert mmr_select(candidates, {1: v(1, 0), 2: v(1, 0)}, limit=3, lambda_=0.5) == [1, 3, 2]
    # 2 without a vector: 0.25 > 3 (duplicate of 1): 0 - 0.5 -> 2 first
    assert mmr_select(candidates, {1: v(1, 0), 3: v(1, 0)}, limit=3, lambda_=0.5) == [1, 2, 3]


def test_an_all_zero_vector_counts_as_dissimilar_to_everything():
    candidates = [(1, 1.0, 1), (2, 0.9, 2), (3, 0.8, 3)]
    vectors = {1: v(1, 0), 2: v(0, 0), 3: v(1, 0)}
    # 2 (zero vector): 0.25 - 0 beats 3 (duplicate of 1): 0 - 0.5
    assert mmr_select(candidates, vectors, limit=3, lambda_=0.5) == [1, 2, 3]
    # and it is not ranked above a better, dissimilar candidate either:
    # rel_norm 1.0, 0.8, 0.0 ; after 1: 2 = 0.4 - 0 beats 3 (zero vector) = 0 - 0
    candidates = [(1, 1.0, 1), (2, 0.9, 2), (3, 0.5, 3)]
    vectors = {1: v(1, 0), 2: v(0, 1), 3: v(0, 0)}
    assert mmr_select(candidates, vectors, limit=3, lambda_=0.5) == [1, 2, 3]


def test_the_result_has_min_of_limit_and_pool_size_ids_without_repeats():
    candidates = [(i, 1.0 / (i + 1), i % 3) for i in range(8)]
    vectors = {i: v(np.cos(i), np.sin(i)) for i in range(8)}
    assert len(mmr_select(candidates, vectors, limit=5)) == 5
    every = mmr_select(candidates, vectors, limit=50)
    assert sorted(every) == list(range(8))
    assert mmr_select(candidates, vectors, limit=0) == []
    assert mmr_select([], vectors, limit=5) == []


@pytest.mark.parametrize("lambda_", [-0.01, 1.01])
def test_a_lambda_outside_zero_to_one_is_refused_with_the_valid_range(lambda_):
    with pytest.raises(ValueError, match=r"between 0\.0 and 1\.0"):
        mmr_select([(1, 1.0, 1)], {}, limit=1, lambda_=lambda_)


def test_a_negative_same_doc_penalty_is_refused_with_the_valid_range():
    with pytest.raises(ValueError, match=r"at least 0\.0"):
        mmr_select([(1, 1.0, 1)], {}, limit=1, same_doc_penalty=-0.1)


def test_vectors_of_different_dimensions_are_refused():
    with pytest.raises(ValueError, match="same dimension"):
        mmr_select([(1, 1.0, 1), (2, 0.5, 2)], {1: v(1, 0), 2: v(1, 0, 0)}, limit=2)


def test_a_pool_with_a_repeated_chunk_id_is_refused():
    with pytest.raises(ValueError, match="distinct"):
        mmr_select([(1, 1.0, 1), (1, 0.5, 1)], {}, limit=2)


def test_mmr_on_returns_the_picked_hits_themselves_in_pick_order_with_scores_untouched():
    hits = [make_hit(1, 1.0, 10), make_hit(2, 0.9, 10), make_hit(3, 0.8, 20)]
    picked = apply_mmr(hits, {}, limit=2, lambda_=0.7, same_doc_penalty=0.5)
    assert [h.chunk_id for h in picked] == [1, 3]
    assert picked[0] is hits[0] and picked[1] is hits[2]
    assert [h.score for h in picked] == [1.0, 0.8]
