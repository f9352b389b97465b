import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groove.corpus.normalize import fold, fold_aligned
from groove.search.hits import Hit
from groove.search.spans import apply_match_spans, match_spans


def texts(content, spans):
    raw = content.encode("utf-8")
    return [raw[a:b].decode("utf-8") for a, b in spans]


def test_japanese_phrases_are_found_at_their_utf8_byte_offsets():
    content = "再ランキングの評価について\n"
    spans = match_spans(content, ["ランキング", "について"])
    # 再 is 3 bytes; ランキング is 5 x 3 bytes; 再ランキングの評価 is 9 characters = 27 bytes
    assert spans == [(3, 18), (27, 39)]
    assert texts(content, spans) == ["ランキング", "について"]


def test_mixed_script_content_matches_case_insensitively():
    content = "groove の Search 設定と SEARCH の評価"
    spans = match_spans(content, ["search", "の評価"])
    assert texts(content, spans) == ["Search", "SEARCH", "の評価"]


def test_offsets_after_a_multibyte_character_point_into_the_original_bytes():
    content = "ßx ABC"
    assert match_spans(content, ["abc"]) == [(4, 7)]


def test_a_phrase_matches_text_whose_casefold_has_a_different_length():
    content = "Straße, STRASSE, strasse"
    spans = match_spans(content, ["STRASSE"])
    assert texts(content, spans) == ["Straße", "STRASSE", "strasse"]
    assert texts(content, match_spans(content, ["straße"])) == ["Straße", "STRASSE", "strasse"]


def test_offsets_stay_right_after_characters_that_expand_when_folded():
    content = "İİ ﬁle ẞ end"
    spans = match_spans(content, ["END", "file"])
    assert texts(content, spans) == ["ﬁle", "end"]
    assert spans[1] == (len("İİ ﬁle ẞ ".encode()), len(content.encode()))


def test_a_phrase_never_matches_part_of_one_characters_fold():
    assert match_spans("ß", ["s"]) == []
    assert match_spans("ßa", ["sa"]) == []
    assert match_spans("ßa", ["ssa"]) == [(0, 3)]


def test_overlapping_occurrences_of_different_phrases_merge_into_one_span():
    assert match_spans("xx abcdef yy", ["abcd", "cdef"]) == [(3, 9)]


def test_adjacent_occurrences_merge_but_separated_ones_do_not():
    assert match_spans("abcdef", ["abc", "def"]) == [(0, 6)]
    assert match_spans("abc def", ["abc", "def"]) == [(0, 3), (4, 7)]


def test_overlapping_occurrences_of_one_phrase_are_all_covered():
    assert match_spans("aaaa b", ["aa"]) == [(0, 4)]


def test_spans_are_sorted_by_position():
    content = "gamma beta alpha beta"
    assert texts(content, match_spans(content, ["alpha", "beta", "gamma"])) == ["gamma", "beta", "alpha", "beta"]


def test_spans_are_capped_at_max_spans_keeping_the_first_ones():
    content = "ab " * 150
    spans = match_spans(content, ["ab"], max_spans=100)
    assert len(spans) == 100
    assert spans[0] == (0, 2) and spans[-1] == (297, 299)
    assert len(match_spans(content, ["ab"])) == 100  # the default cap
    assert len(match_spans(content, ["ab"], max_spans=1000)) == 150


def test_content_over_the_byte_limit_is_skipped_counting_bytes_not_characters():
    content = "日本語" * 100  # 300 characters, 900 bytes
    assert match_spans(content, ["日本"], max_content_bytes=899) == []
    assert len(match_spans(content, ["日本"], max_content_bytes=900, max_spans=1000)) == 100


def test_content_over_the_default_256_kib_is_skipped():
    big = "needle " + "x" * (256 * 1024)
    assert match_spans(big, ["needle"]) == []
    assert match_spans(big[: 256 * 1024], ["needle"]) == [(0, 6)]


def test_no_phrases_or_only_empty_phrases_give_no_spans():
    assert match_spans("anything", []) == []
    assert match_spans("anything", [""]) == []
    assert match_spans("anything", ["", "thing"]) == [(3, 8)]


def test_empty_content_gives_no_spans():
    assert match_spans("", ["a"]) == []


def test_a_phrase_longer_than_the_content_gives_no_spans():
    assert match_spans("ab", ["abc"]) == []


def test_a_negative_max_spans_is_refused():
    with pytest.raises(ValueError, match="max_spans"):
        match_spans("a", ["a"], max_spans=-1)


def test_apply_match_spans_computes_spans_over_each_hits_final_content():
    hit = Hit(
        chunk_id=1, doc_id=1, path="a.md", title="t", heading="h", level=1, context="",
        content="前 Search 後\n", tags=[], date=None, start_line=1, end_line=1, ordinal=0,
        token_count=3, score=0.5, match_spans=[],
    )
    [out] = apply_match_spans([hit], ["search"])
    assert out.match_spans == [(4, 10)]
    assert hit.match_spans == []
    assert out.score == hit.score and out.content == hit.content


# --- properties -------------------------------------------------------------------

# Characters chosen to exercise folding that changes length (ß ẞ İ ﬁ), folding
# that does not (Σ ς σ, ı), combining marks, multi-byte scripts and astral
# characters.
ALPHABET = "aAsSßẞiIİıfﬁΣσς\u0307再ランの日本 😀"

contents = st.text(alphabet=ALPHABET, max_size=24)
phrase_lists = st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=3), min_size=1, max_size=4)


def brute_force_spans(content, phrases):
    """Every run of whole characters of the folded content (decision 0018: NFKC joins a letter and its
    combining mark, hiragana are katakana) whose casefold is a folded phrase's casefold, as the original
    characters it came from, merged."""
    aligned = fold_aligned(content)
    text, starts, ends = ((aligned.text, aligned.starts, aligned.ends) if aligned else
                          (content, range(len(content)), range(1, len(content) + 1)))
    # What one stretch of the original folded to is matched whole or not at all.
    stretch = list(zip(starts, ends))
    firsts = {i for i in range(len(text)) if i == 0 or stretch[i - 1] != stretch[i]}
    lasts = {i for i in range(len(text)) if i == len(text) - 1 or stretch[i + 1] != stretch[i]}
    folds = {fold(p).casefold() for p in phrases if p}
    intervals = sorted(
        (starts[i], ends[j - 1])
        for i in range(len(text))
        for j in range(i + 1, len(text) + 1)
        if i in firsts and j - 1 in lasts and text[i:j].casefold() in folds
    )
    merged = []
    for i, j in intervals:
        if merged and i <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], j)
        else:
            merged.append([i, j])
    return [(len(content[:i].encode()), len(content[:j].encode())) for i, j in merged]


@settings(max_examples=400, deadline=None)
@given(contents, phrase_lists)
def test_spans_are_exactly_the_merged_case_insensitive_occurrences(content, phrases):
    assert match_spans(content, phrases, max_spans=10_000) == brute_force_spans(content, phrases)


@settings(max_examples=400, deadline=None)
@given(contents, phrase_lists)
def test_every_span_is_valid_utf8_that_starts_and_ends_with_an_occurrence_of_a_phrase(content, phrases):
    spans = match_spans(content, phrases, max_spans=10_000)
    folds = [fold(p).casefold() for p in phrases]
    for (a, b), (c, _) in zip(spans, spans[1:]):
        assert a < b < c  # sorted, disjoint and not touching
    for text in texts(content, spans):
        folded = fold(text).casefold()
        assert any(folded.startswith(f) for f in folds)
        assert any(folded.endswith(f) for f in folds)


ASCII_ALPHABET = "aAbB sS-."
ascii_contents = st.text(alphabet=ASCII_ALPHABET, max_size=40)
ascii_phrases = st.lists(st.text(alphabet=ASCII_ALPHABET, min_size=1, max_size=3), min_size=1, max_size=4)


@settings(max_examples=400, deadline=None)
@given(ascii_contents, ascii_phrases)
def test_ascii_content_spans_are_exactly_the_merged_case_insensitive_occurrences(content, phrases):
    # ASCII content takes the path without a byte-offset table: offsets are character positions
    assert match_spans(content, phrases, max_spans=10_000) == brute_force_spans(content, phrases)


@settings(max_examples=200, deadline=None)
@given(st.one_of(contents, ascii_contents), st.one_of(phrase_lists, ascii_phrases), st.integers(0, 4))
def test_the_span_cap_keeps_the_first_merged_spans_whole(content, phrases, cap):
    assert match_spans(content, phrases, max_spans=cap) == brute_force_spans(content, phrases)[:cap]


def test_a_phrase_finds_the_spellings_the_fold_makes_one_and_marks_them_as_written():
    content = "ｻｰﾊﾞｰとサーバの取り扱い、りんご"
    assert texts(content, match_spans(content, ["サーバ"])) == ["ｻｰﾊﾞ", "サーバ"]
    assert texts(content, match_spans(content, ["取扱", "リンゴ"])) == ["取り扱い", "りんご"]


def test_a_run_of_one_repeated_character_is_one_span_over_every_overlapping_occurrence():
    content = "x" + "a" * 5000 + "x"
    assert match_spans(content, ["aa", "A"]) == [(1, 5001)]
    assert match_spans("é" + "a" * 5000, ["aaa"]) == [(2, 5002)]
