import pytest

from groove.search.hits import Hit
from groove.search.parent import ChunkInfo, apply_parent, expand, tokens_of


def doc(*specs):
    """Chunks from (level, tokens) specs; each chunk is one line 'c<ordinal>\\n'.

    tokens may be None (unknown count), and a spec may carry a content string
    as a third item.
    """
    chunks = []
    for ordinal, spec in enumerate(specs):
        level, tokens = spec[0], spec[1]
        content = spec[2] if len(spec) > 2 else f"c{ordinal}\n"
        line = ordinal * 10 + 1
        chunks.append(
            ChunkInfo(
                ordinal=ordinal, level=level, heading=f"h{ordinal}", content=content,
                start_line=line, end_line=line + 9, token_count=tokens,
            )
        )
    return chunks


def make_hit(chunk, doc_id=1, **overrides):
    fields = dict(
        chunk_id=1000 + chunk.ordinal, doc_id=doc_id, path=f"notes/{doc_id}.md", title="Title",
        heading=chunk.heading, level=chunk.level, context="ctx", content=chunk.content, tags=["t"],
        date="2026-01-01", start_line=chunk.start_line, end_line=chunk.end_line, ordinal=chunk.ordinal,
        token_count=chunk.token_count, score=0.0328, fts_rank=1, vec_rank=3,
        match_spans=[(0, 2)],
    )
    fields.update(overrides)
    return Hit(**fields)


# --- tokens_of ------------------------------------------------------------------


def test_tokens_of_uses_the_stored_token_count():
    assert tokens_of(ChunkInfo(0, 1, "h", "x" * 400, 1, 1, token_count=7)) == 7


def test_tokens_of_falls_back_to_a_quarter_of_the_characters_when_the_count_is_unknown():
    assert tokens_of(ChunkInfo(0, 1, "h", "x" * 403, 1, 1, token_count=None)) == 100


def test_tokens_of_is_at_least_one_for_a_short_chunk_without_a_count():
    assert tokens_of(ChunkInfo(0, 1, "h", "ab", 1, 1, token_count=None)) == 1


# --- whole-document fallback -----------------------------------------------------


def test_a_small_hit_returns_the_whole_document_when_it_fits_under_the_cap():
    chunks = doc((1, 40), (2, 30), (2, 20), (2, 50))
    content, source = expand(2, chunks, whole_doc_threshold_tokens=100, max_expanded_tokens=2000)
    assert content == "c0\nc1\nc2\nc3\n"
    assert source == {"mode": "whole_doc", "start_line": 1, "end_line": 40, "ordinals": [0, 1, 2, 3]}


def test_the_whole_document_ignores_heading_levels():
    chunks = doc((1, 10), (3, 10), (2, 10))
    _, source = expand(1, chunks)
    assert source["ordinals"] == [0, 1, 2]


def test_the_whole_document_is_capped_by_taking_chunks_alternately_outward_from_the_hit():
    chunks = doc((1, 50), (1, 50), (1, 10), (1, 50), (1, 50))
    # hit 10, +before 50 = 60, +after 50 = 110, next before would be 160 > 120
    content, source = expand(2, chunks, whole_doc_threshold_tokens=100, max_expanded_tokens=120)
    assert source["ordinals"] == [1, 2, 3]
    assert content == "c1\nc2\nc3\n"
    assert sum(tokens_of(chunks[o]) for o in source["ordinals"]) <= 120


def test_when_one_side_cannot_grow_the_other_side_keeps_filling_the_cap():
    chunks = doc((1, 500), (1, 10), (1, 30), (1, 30), (1, 30))
    _, source = expand(1, chunks, whole_doc_threshold_tokens=100, max_expanded_tokens=100)
    assert source["ordinals"] == [1, 2, 3, 4]


def test_the_cap_holds_for_chunks_without_a_token_count_by_counting_a_quarter_of_their_characters():
    body = "x" * 399 + "\n"  # 400 characters -> 100 estimated tokens
    chunks = doc((1, None, body), (1, None, body), (1, 5, "hit\n"), (1, None, body), (1, None, body))
    content, source = expand(2, chunks, whole_doc_threshold_tokens=100, max_expanded_tokens=250)
    # 5 + 100 (before) + 100 (after) = 205; one more would be 305 > 250
    assert source["ordinals"] == [1, 2, 3]
    assert content == body + "hit\n" + body


def test_a_hit_alone_over_the_cap_is_returned_unchanged_without_expansion():
    chunks = doc((1, 10), (1, 50), (1, 10))
    content, source = expand(1, chunks, whole_doc_threshold_tokens=100, max_expanded_tokens=40)
    assert (content, source) == ("c1\n", None)


def test_a_single_chunk_document_has_nothing_to_add():
    assert expand(0, doc((1, 5))) == ("c0\n", None)


def test_a_hit_exactly_at_the_threshold_uses_sibling_merge_not_the_whole_document():
    chunks = doc((1, 10), (2, 100), (2, 10))
    _, source = expand(1, chunks, whole_doc_threshold_tokens=100)
    assert source["mode"] == "siblings"
    assert source["ordinals"] == [1, 2]
    _, source = expand(1, chunks, whole_doc_threshold_tokens=101)
    assert source["mode"] == "whole_doc"
    assert source["ordinals"] == [0, 1, 2]


# --- adjacent-sibling merge --------------------------------------------------------


def test_sibling_merge_takes_contiguous_neighbours_at_the_hits_heading_level_only():
    chunks = doc((2, 150), (3, 150), (3, 150), (3, 150), (2, 150), (3, 150))
    content, source = expand(2, chunks, whole_doc_threshold_tokens=100, max_expanded_tokens=2000)
    # stops at the level-2 chunks on both sides; chunk 5 is level 3 but not contiguous
    assert source == {"mode": "siblings", "start_line": 11, "end_line": 40, "ordinals": [1, 2, 3]}
    assert content == "c1\nc2\nc3\n"


def test_sibling_merge_stops_at_the_cap():
    chunks = doc((2, 150), (2, 150), (2, 150), (2, 150), (2, 150))
    _, source = expand(2, chunks, whole_doc_threshold_tokens=100, max_expanded_tokens=400)
    assert source["ordinals"] == [1, 2]  # 150 + 150 = 300; + 150 = 450 > 400


def test_a_hit_with_no_same_level_neighbour_is_unchanged():
    chunks = doc((1, 150), (2, 150), (1, 150))
    assert expand(1, chunks) == ("c1\n", None)


def test_expanded_content_is_the_exact_original_text_of_the_merged_chunks():
    lines = ["# Title\n", "intro ß 日本語\n", "\n", "## A\n", "alpha\n", "\n", "## B\n", "beta\n"]
    chunks = [
        ChunkInfo(0, 1, "Title", "".join(lines[0:3]), 1, 3, 150),
        ChunkInfo(1, 2, "A", "".join(lines[3:6]), 4, 6, 150),
        ChunkInfo(2, 2, "B", "".join(lines[6:8]), 7, 8, 150),
    ]
    content, source = expand(2, chunks)
    assert content == "".join(lines[3:8])
    assert (source["start_line"], source["end_line"]) == (4, 8)


def test_chunks_given_out_of_order_are_merged_in_ordinal_order():
    chunks = doc((2, 150), (2, 150), (2, 150))
    content, source = expand(1, list(reversed(chunks)))
    assert content == "c0\nc1\nc2\n"
    assert source["ordinals"] == [0, 1, 2]


def test_an_ordinal_missing_from_the_document_is_a_lookup_error():
    with pytest.raises(LookupError, match="ordinal 9"):
        expand(9, doc((1, 10)))


@pytest.mark.parametrize("kwargs", [{"whole_doc_threshold_tokens": -1}, {"max_expanded_tokens": 0}])
def test_out_of_range_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match="at least"):
        expand(0, doc((1, 10)), **kwargs)


# --- apply_parent -------------------------------------------------------------------


def test_expansion_changes_only_content_and_expanded_from():
    chunks = doc((1, 10), (1, 10), (1, 10))
    hit = make_hit(chunks[1])
    [out] = apply_parent([hit], {1: chunks}, whole_doc_threshold_tokens=100, max_expanded_tokens=2000)
    assert out.content == "c0\nc1\nc2\n"
    assert out.expanded_from == {"mode": "whole_doc", "start_line": 1, "end_line": 30, "ordinals": [0, 1, 2]}
    before, after = hit.to_dict(), out.to_dict()
    for key in ("content", "expanded_from"):
        before.pop(key), after.pop(key)
    assert before == after  # score, ranks, path, spans, lines, ... untouched


def test_expansion_builds_new_hits_and_leaves_the_input_untouched_and_in_order():
    chunks_a = doc((1, 10), (1, 10))
    chunks_b = doc((1, 150), (2, 150))
    hits = [make_hit(chunks_b[0], doc_id=2, score=0.5), make_hit(chunks_a[1], doc_id=1, score=0.4)]
    out = apply_parent(hits, {1: chunks_a, 2: chunks_b}, whole_doc_threshold_tokens=100, max_expanded_tokens=2000)
    assert [h.chunk_id for h in out] == [h.chunk_id for h in hits]
    assert out[0] is not hits[0] and out[1] is not hits[1]
    assert out[0].content == "c0\n" and out[0].expanded_from is None  # level-1 hit, level-2 neighbour
    assert out[1].content == "c0\nc1\n"
    assert hits[1].content == "c1\n" and hits[1].expanded_from is None


def test_a_hit_whose_document_chunks_are_missing_is_kept_unchanged():
    chunks = doc((1, 10), (1, 10))
    hits = [make_hit(chunks[0], doc_id=7), make_hit(ChunkInfo(5, 1, "h", "gone\n", 1, 1, 3), doc_id=1)]
    out = apply_parent(hits, {1: chunks}, whole_doc_threshold_tokens=100, max_expanded_tokens=2000)
    assert [h.to_dict() for h in out] == [h.to_dict() for h in hits]


def test_the_hits_own_content_is_kept_when_nothing_is_merged():
    # the hit's content (e.g. already trimmed) wins over the stored chunk text when there is no expansion
    chunks = doc((1, 150), (2, 150))
    hit = make_hit(chunks[0], content="as retrieved\n")
    [out] = apply_parent([hit], {1: chunks}, whole_doc_threshold_tokens=100, max_expanded_tokens=2000)
    assert out.content == "as retrieved\n"


def test_hit_to_dict_is_json_ready_with_a_stable_key_order():
    import json

    chunks = doc((1, 10), (1, 10))
    [out] = apply_parent([make_hit(chunks[0])], {1: chunks}, whole_doc_threshold_tokens=100, max_expanded_tokens=2000)
    data = out.to_dict()
    assert list(data)[:3] == ["chunk_id", "doc_id", "path"]
    assert list(data)[-4:] == ["fts_rank", "vec_rank", "expanded_from", "match_spans"]
    assert json.loads(json.dumps(data)) == data
    assert data["match_spans"] == [[0, 2]]
