"""Tests for groove.search.compiler: the query -> FTS5 MATCH compiler.

Comparing strings never proves SQLite accepts an expression, so every rule
that produces an expression is also run through a real FTS5 MATCH on a
trigram table (see ``_fts``), and a property test does the same for
arbitrary input.

groove searches the seeds' phrases in the folded spelling (decision 0018;
groove/corpus/normalize.py): hiragana as katakana, among others. So the
seeds' ``"の評価" OR "について"`` is expected here as ``"ノ評価" OR "ニツイテ"``,
and the test table holds its rows folded, as the index does.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import sqlean
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from groove.corpus.normalize import fold
from groove.search.compiler import (
    CompiledQuery,
    QueryError,
    apply_trigram_floor,
    compile_query,
    quote_phrase,
    split_groups,
    split_scripts,
    split_separators,
)

# ---------------------------------------------------------------------------
# A real FTS5 trigram table
# ---------------------------------------------------------------------------

ROWS = [
    (1, "Rust", "", "rust async runtime with tokio"),
    (2, "Rust", "", "rust borrow checker"),
    (3, "再ランキング", "検索", "再ランキングの評価について書く。"),
    (4, "学習", "", "ランキング学習の基礎"),
    (5, "Foundry Local の設定", "", 'AI と ML, a"b, -foo and NEAR AND NOT'),
    (6, "システム", "", "システム化の手順"),
]


@functools.lru_cache(maxsize=1)
def _fts() -> sqlean.Connection:
    con = sqlean.connect(":memory:")
    con.execute(
        "CREATE VIRTUAL TABLE t USING fts5(heading, context, content, tokenize='trigram')"
    )
    con.executemany("INSERT INTO t(rowid, heading, context, content) VALUES (?, ?, ?, ?)",
                    [(rowid, *(fold(text) for text in texts)) for rowid, *texts in ROWS])
    con.commit()
    return con


def fts_rowids(expr: str) -> set[int]:
    """Run ``expr`` through a real MATCH, plain and bm25-ranked; return the rowids."""
    con = _fts()
    plain = {r[0] for r in con.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,))}
    ranked = [
        r[0]
        for r in con.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t, 2.0, 1.0, 1.0) LIMIT 50",
            (expr,),
        )
    ]
    assert set(ranked) == plain
    return plain


def expr_of(query: str) -> str | None:
    return compile_query(query).match_expr


# ---------------------------------------------------------------------------
# The examples of the retrieval-pipeline document, verbatim
# ---------------------------------------------------------------------------


def test_a_japanese_sentence_compiles_to_one_phrase_per_script_run_joined_with_or():
    compiled = compile_query("再ランキングの評価について")
    assert compiled.match_expr == '"再ランキング" OR "ランキング" OR "ノ評価" OR "ニツイテ"'
    assert compiled.positives == ("再ランキング", "ランキング", "ノ評価", "ニツイテ")
    assert not compiled.fallback and not compiled.vector_only
    assert fts_rowids(compiled.match_expr) == {3, 4}


def test_script_boundaries_cut_a_japanese_sentence_into_the_documented_runs():
    assert split_scripts("再ランキングの評価について") == ["再", "ランキング", "の", "評価", "について"]


def test_a_quoted_region_is_kept_as_one_verbatim_phrase():
    compiled = compile_query('"Foundry Local" の設定')
    assert compiled.match_expr == '"Foundry Local" OR "ノ設定"'
    assert fts_rowids(compiled.match_expr) == {5}


def test_a_short_word_with_no_neighbour_in_its_group_is_dropped():
    compiled = compile_query("AI について")
    assert compiled.positives == ("ニツイテ",)
    assert compiled.match_expr == '"ニツイテ"'


def test_a_short_english_word_is_dropped_and_the_long_one_kept():
    compiled = compile_query("ML pipelines")
    assert compiled.positives == ("pipelines",)
    assert compiled.match_expr == '"pipelines"'


def test_a_query_where_no_phrase_survives_falls_back_to_the_whole_trimmed_query():
    compiled = compile_query("  AI と ML  ")
    assert compiled.fallback
    assert compiled.positives == ("AI ト ML",)
    assert compiled.match_expr == '"AI ト ML"'
    assert fts_rowids(compiled.match_expr) == {5}


def test_a_short_tail_extends_the_span_before_it_and_that_span_is_emitted_too():
    compiled = compile_query("システム化")
    assert compiled.positives == ("システム化", "システム")
    assert fts_rowids(compiled.match_expr) == {6}


def test_a_short_head_joins_the_run_after_it_and_that_run_is_emitted_too():
    assert apply_trigram_floor(["再", "ランキング"]) == ["再ランキング", "ランキング"]


def test_a_hyphen_led_group_is_excluded_not_searched():
    compiled = compile_query("rust -async")
    assert compiled.positives == ("rust",)
    assert compiled.negatives == ("async",)
    assert compiled.match_expr == '("rust") NOT ("async")'
    assert compiled.negative_expr == '"async"'
    assert compiled.vector_text == "rust"


def test_an_exclusion_is_accepted_by_fts5_and_removes_the_matching_rows():
    compiled = compile_query("rust -async")
    assert fts_rowids(compiled.match_expr) == {2}
    assert fts_rowids(compiled.negative_expr) == {1}


def test_the_exclusion_applies_to_every_positive_phrase_not_just_the_last():
    compiled = compile_query("rust checker -async")
    assert compiled.match_expr == '("rust" OR "checker") NOT ("async")'
    # without the parentheses NOT would bind to "checker" alone and row 1 would match
    assert fts_rowids(compiled.match_expr) == {2}


def test_an_unquoted_exclusion_is_tokenized_like_a_positive_phrase():
    compiled = compile_query("rust -再ランキング")
    assert compiled.negatives == ("再ランキング", "ランキング")
    assert compiled.match_expr == '("rust") NOT ("再ランキング" OR "ランキング")'


def test_a_quoted_exclusion_excludes_only_the_compound():
    compiled = compile_query('ランキング -"再ランキング"')
    assert compiled.negatives == ("再ランキング",)
    assert fts_rowids(compiled.match_expr) == {4}
    assert fts_rowids(expr_of("ランキング -再ランキング")) == set()


def test_an_exclusion_under_the_trigram_floor_excludes_nothing():
    compiled = compile_query("rust -ab")
    assert compiled.negatives == ()
    assert compiled.negative_expr is None
    assert compiled.match_expr == '"rust"'
    assert compiled.vector_text == "rust"


def test_a_hyphen_inside_quotes_is_searched_as_a_literal_leading_hyphen():
    compiled = compile_query('"-foo"')
    assert compiled.positives == ("-foo",)
    assert compiled.negatives == ()
    assert compiled.match_expr == '"-foo"'
    assert fts_rowids(compiled.match_expr) == {5}


@pytest.mark.parametrize("query", ["-async", "-async -tokio", '-"再ランキング"', "-ab", "  -async  "])
def test_a_query_made_only_of_exclusions_is_refused_with_a_clear_message(query):
    with pytest.raises(QueryError, match="only excludes"):
        compile_query(query)


# ---------------------------------------------------------------------------
# Exclusion groups
# ---------------------------------------------------------------------------


def test_a_hyphen_inside_a_word_is_a_separator_not_an_exclusion():
    compiled = compile_query("foo-bar")
    assert compiled.positives == ("foo", "bar")
    assert compiled.negatives == ()


def test_an_exclusion_may_follow_any_whitespace_including_an_ideographic_space():
    compiled = compile_query("rust\u3000-async\t-tokio")
    assert compiled.positives == ("rust",)
    assert compiled.negatives == ("async", "tokio")


def test_a_lone_hyphen_is_punctuation_not_an_exclusion():
    compiled = compile_query("rust - async")
    assert compiled.positives == ("rust", "async")
    assert compiled.negatives == ()


def test_an_exclusion_group_runs_to_the_next_whitespace_outside_quotes():
    groups = split_groups('-"a b c"d e')
    assert [g.negative for g in groups] == [True, False]
    assert [(p.quoted, p.text) for p in groups[0].pieces] == [(True, "a b c"), (False, "d")]


def test_vector_text_is_the_query_with_exclusions_cut_out_and_whitespace_normalised():
    compiled = compile_query('  -tokio  rust\t\t"Foundry   Local"  -async  の設定 ')
    assert compiled.vector_text == 'rust "Foundry Local" の設定'
    assert compiled.text == '-tokio  rust\t\t"Foundry   Local"  -async  の設定'


def test_exclusions_with_a_vector_only_positive_part_keep_the_negative_expression():
    compiled = compile_query("AI -async")
    assert compiled.vector_only
    assert compiled.match_expr is None
    assert compiled.negative_expr == '"async"'
    assert compiled.vector_text == "AI"


def test_the_fallback_phrase_is_the_positive_query_with_exclusions_cut_out():
    compiled = compile_query("AI -async と ML")
    assert compiled.fallback
    assert compiled.positives == ("AI ト ML",)
    assert compiled.match_expr == '("AI ト ML") NOT ("async")'
    assert fts_rowids(compiled.match_expr) == {5}


def test_negatives_are_deduplicated_like_positives():
    assert compile_query("rust -async -async").negatives == ("async",)


# ---------------------------------------------------------------------------
# Quoted regions
# ---------------------------------------------------------------------------


def test_a_doubled_quote_inside_a_quoted_region_is_a_literal_quote():
    compiled = compile_query('"a""b"')
    assert compiled.positives == ('a"b',)
    assert compiled.match_expr == '"a""b"'
    assert fts_rowids(compiled.match_expr) == {5}


def test_a_quoted_phrase_under_three_characters_is_dropped():
    compiled = compile_query('"AI" について')
    assert compiled.positives == ("ニツイテ",)


def test_quoting_a_region_wide_enough_to_clear_the_floor_rescues_a_short_word():
    compiled = compile_query('"AI と ML" pipelines')
    assert compiled.positives == ("AI ト ML", "pipelines")


def test_an_unterminated_quote_runs_to_the_end_of_the_query():
    compiled = compile_query('rust "async runtime')
    assert compiled.positives == ("rust", "async runtime")
    assert fts_rowids(compiled.match_expr) == {1, 2}


def test_an_unterminated_quote_in_an_exclusion_excludes_the_rest_of_the_query():
    compiled = compile_query('rust -"async runtime')
    assert compiled.negatives == ("async runtime",)
    assert fts_rowids(compiled.match_expr) == {2}


def test_a_join_never_crosses_into_or_out_of_a_quoted_region():
    compiled = compile_query('ab"cdef"gh')
    assert compiled.positives == ("cdef",)


def test_a_quoted_region_keeps_fts_operators_and_whitespace_verbatim():
    compiled = compile_query('"NEAR(a b) * OR"')
    assert compiled.positives == ("NEAR(a b) * OR",)
    fts_rowids(compiled.match_expr)


# ---------------------------------------------------------------------------
# Separators, scripts and the trigram floor
# ---------------------------------------------------------------------------


def test_punctuation_and_symbols_cut_groups_like_whitespace():
    assert split_separators("検索、評価。rust/async_io+α★β") == ["検索", "評価", "rust", "async", "io", "α", "β"]


def test_a_run_shorter_than_three_characters_joins_its_neighbours_within_its_group():
    compiled = compile_query("の評価について")
    assert compiled.positives == ("ノ評価", "ニツイテ")


def test_several_short_runs_join_until_the_span_reaches_three_characters():
    assert apply_trigram_floor(["の", "A", "再", "ランキング"]) == ["のA再", "ランキング"]


def test_a_short_run_between_two_standalone_runs_joins_rightwards():
    compiled = compile_query("ランキングの評価方法")
    assert compiled.positives == ("ランキング", "ノ評価方法", "評価方法")


def test_a_short_tail_after_a_joined_span_extends_it_and_keeps_every_earlier_span():
    assert apply_trigram_floor(["再", "ランキング", "化"]) == ["再ランキング化", "再ランキング", "ランキング"]


def test_a_join_never_crosses_a_separator():
    # "ab" + "cd" would reach the floor, but whitespace and "," separate them
    assert compile_query("ab cd,ef pipelines").positives == ("pipelines",)
    assert compile_query("ab,cd").fallback


def test_a_group_that_never_reaches_three_characters_is_dropped():
    assert apply_trigram_floor(["A", "と"]) == []
    assert apply_trigram_floor([]) == []


def test_the_long_vowel_mark_belongs_to_katakana():
    assert split_scripts("サーバーの") == ["サーバー", "の"]
    # Cut before it is folded; each phrase ending in a long vowel mark is followed by its spelling
    # without it (サーバー and サーバ: decision 0018).
    assert compile_query("サーバーの").positives == ("サーバーノ", "サーバノ", "サーバー", "サーバ")


def test_the_iteration_marks_belong_to_kanji():
    assert split_scripts("時々刻々の〆切") == ["時々刻々", "の", "〆切"]


def test_halfwidth_katakana_including_its_sound_marks_is_katakana():
    assert split_scripts("ﾃﾞｰﾀの") == ["ﾃﾞｰﾀ", "の"]


def test_a_combining_mark_stays_with_its_base_character():
    assert split_scripts("カ\u3099ラスの") == ["カ\u3099ラス", "の"]
    assert split_scripts("cafe\u0301の") == ["cafe\u0301", "の"]


def test_lengths_are_counted_in_characters_not_bytes():
    assert compile_query("日本").vector_only  # 2 characters, 6 bytes
    assert compile_query("日本語").positives == ("日本語",)  # 3 characters
    assert compile_query("e\u0332t").positives == ("e\u0332t",)  # 3 code points
    # NFKC (decision 0018) makes e + U+0301 one character, é: 2 characters, the whole query's fallback.
    assert compile_query("e\u0301t").positives == ("\u00e9t",) and compile_query("e\u0301t").fallback


# ---------------------------------------------------------------------------
# Dedupe, cap, empty, vector-only, hostile input
# ---------------------------------------------------------------------------


def test_duplicate_phrases_are_emitted_once_in_first_occurrence_order():
    compiled = compile_query("ランキング 再ランキング rust ランキング rust")
    assert compiled.positives == ("ランキング", "再ランキング", "rust")


def test_phrases_beyond_the_cap_are_dropped_and_counted():
    compiled = compile_query(" ".join(f"word{i:02d}" for i in range(40)))
    assert len(compiled.positives) == 32
    assert compiled.positives[-1] == "word31"
    assert compiled.truncated == 8
    assert fts_rowids(compiled.match_expr) == set()


def test_the_truncation_is_logged_as_a_warning():
    with capture_logs() as logs:
        compile_query(" ".join(f"word{i:02d}" for i in range(40)))
    assert {"event": "fts_phrases_truncated", "kept": 32, "dropped": 8, "log_level": "warning"} in logs


def test_no_warning_is_logged_when_nothing_is_truncated():
    with capture_logs() as logs:
        compile_query("再ランキングの評価について")
    assert logs == []


def test_negatives_are_capped_separately_at_the_same_limit():
    query = " ".join(f"pos{i:02d}" for i in range(32)) + " " + " ".join(f"-neg{i:02d}" for i in range(35))
    with capture_logs() as logs:
        compiled = compile_query(query)
    assert len(compiled.positives) == 32
    assert len(compiled.negatives) == 32
    assert compiled.truncated == 3
    assert any(e["event"] == "fts_negative_phrases_truncated" and e["dropped"] == 3 for e in logs)
    fts_rowids(compiled.match_expr)


def test_a_custom_cap_is_honoured_and_a_cap_below_one_is_rejected():
    assert compile_query("alpha beta gamma", max_phrases=2).positives == ("alpha", "beta")
    with pytest.raises(ValueError):
        compile_query("alpha", max_phrases=0)


@pytest.mark.parametrize("query", ["", "   ", "\t\n", "\u3000", "\x00", " \x00 "])
def test_an_empty_or_whitespace_only_query_is_refused(query):
    with pytest.raises(QueryError, match="empty"):
        compile_query(query)


def test_a_query_error_is_a_value_error():
    assert issubclass(QueryError, ValueError)


@pytest.mark.parametrize("query", ["AI", "ab", "日本", " x ", "-"])
def test_a_query_under_three_characters_searches_vector_only(query):
    compiled = compile_query(query)
    assert compiled.vector_only
    assert compiled.match_expr is None
    assert compiled.positives == ()
    assert not compiled.fallback


def test_fts_operators_typed_by_the_user_are_searched_as_plain_text():
    compiled = compile_query("NEAR(a b) AND c* OR ^d : (x) + -y NOT z {heading}:x")
    assert compiled.positives == ("NEAR", "AND", "NOT", "heading")
    assert compiled.match_expr == '"NEAR" OR "AND" OR "NOT" OR "heading"'
    assert fts_rowids(compiled.match_expr) == {5}


def test_a_query_of_only_fts_syntax_falls_back_to_a_quoted_literal_fts5_accepts():
    compiled = compile_query('" AND ( OR * ^')
    # the unterminated quote makes the rest one verbatim region
    assert compiled.positives == (" AND ( OR * ^",)
    fts_rowids(compiled.match_expr)
    compiled = compile_query("() * ^ :")
    assert compiled.fallback
    assert compiled.match_expr == '"() * ^ :"'
    fts_rowids(compiled.match_expr)


def test_nul_characters_are_treated_as_whitespace():
    compiled = compile_query("rust\x00async")
    assert compiled.positives == ("rust", "async")
    compiled = compile_query('"rust\x00async"')
    assert compiled.positives == ("rust async",)
    fts_rowids(compiled.match_expr)


def test_lone_surrogates_are_treated_as_whitespace():
    compiled = compile_query('rust\ud800async "tok\udfffio"')
    assert compiled.positives == ("rust", "async", "tok io")
    fts_rowids(compiled.match_expr)


def test_quote_phrase_wraps_in_quotes_and_doubles_embedded_quotes():
    assert quote_phrase("plain") == '"plain"'
    assert quote_phrase('a"b') == '"a""b"'
    assert quote_phrase('""') == '""""""'


def test_the_compiled_query_is_immutable():
    compiled = compile_query("rust")
    with pytest.raises(dataclasses.FrozenInstanceError):
        compiled.match_expr = "x"  # type: ignore[misc]


def test_the_text_field_is_the_trimmed_query():
    assert compile_query("  AI と ML \n").text == "AI と ML"


# ---------------------------------------------------------------------------
# Headroom under the cap
# ---------------------------------------------------------------------------

REALISTIC_QUERIES = [
    "再ランキングモデルの評価指標としてMRRとnDCGのどちらを使うべきか、ハイブリッド検索の構成で教えてください",
    "ベクトル検索と全文検索を組み合わせたときにRRFの定数kはどのように決めればよいですか",
    "How should I choose the reciprocal rank fusion constant when combining vector search with full-text search?",
    'What does the parent retriever do when a hit chunk is below the "whole document" threshold?',
]


@pytest.mark.parametrize("query", REALISTIC_QUERIES)
def test_realistic_queries_keep_at_least_twice_the_headroom_under_the_cap(query):
    compiled = compile_query(query)
    assert compiled.truncated == 0
    assert len(compiled.positives) <= 32 // 2
    fts_rowids(compiled.match_expr)


# ---------------------------------------------------------------------------
# Property: nothing a user types makes FTS5 raise
# ---------------------------------------------------------------------------

_SPECIAL = list('"-*:^()+{}., \t\n\u3000\x00\ud800\udfff') + list("再ランキングの評価についてシステム化ーｰﾃﾞ々〆")
_WORDS = [
    "AND", "OR", "NOT", "NEAR", "NEAR(", "rust", "-async", '"Foundry Local"', '""', '"',
    "再ランキング", "の評価", " -", "- ", "col:", "{heading content}:", "*", "^",
]
_ALPHABET = st.one_of(st.characters(), st.sampled_from(_SPECIAL))
QUERIES = st.one_of(
    st.text(),
    st.text(alphabet=_ALPHABET, max_size=80),
    st.lists(st.one_of(st.sampled_from(_WORDS), st.text(alphabet=_ALPHABET, max_size=6)), max_size=50).map(
        "".join
    ),
)


def _clean(query: str) -> str:
    return "".join(" " if ch == "\x00" or "\ud800" <= ch <= "\udfff" else ch for ch in query)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(QUERIES)
def test_every_compiled_expression_is_accepted_by_a_real_fts5_match(query):
    try:
        compiled = compile_query(query)
    except QueryError:
        return
    assert isinstance(compiled, CompiledQuery)

    # (a) a real MATCH accepts both expressions, plain and bm25-ranked
    for expr in (compiled.match_expr, compiled.negative_expr):
        if expr is not None:
            fts_rowids(expr)

    # (b) both sides respect the cap
    assert len(compiled.positives) <= 32
    assert len(compiled.negatives) <= 32
    assert (compiled.match_expr is None) == compiled.vector_only

    # (c) every phrase comes from the input, folded (decision 0018): verbatim for unquoted text, and
    # after the "" -> " unescape for quoted regions
    source = _clean(query)
    unescaped = source.replace('""', '"')
    phrases = list(compiled.negatives)
    if compiled.fallback:
        # the fallback is the positive query with exclusion groups cut out
        assert len(compiled.positives) == 1
        assert all(part in fold(source) for part in compiled.positives[0].split())
    else:
        phrases += compiled.positives
    for phrase in phrases:
        assert len(phrase) >= 3
        assert fold(phrase) == phrase
        assert phrase in fold(unescaped) or phrase.replace('"', '""') in fold(source)
