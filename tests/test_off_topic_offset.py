"""`[search.off_topic] threshold_offset` and the offset `groove tune` proposes (decision 0017, a docs vault).

The pure choice and its cross-validation (groove/evaluate/offtopic_offset.py), then the setting on a real
index: it moves the flag of a real search, explain shows it, eval's fingerprint carries it, a bad value is
refused, and `groove tune` reports the offset from a golden set's unanswerable queries (the fake embedder:
these tests are not about the model; the docs-vault figures are decision 0017's).
"""

from __future__ import annotations

import math

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from groove.config import ConfigError, load_settings, replace_settings
from groove.evaluate import offtopic_offset as oo
from groove.search import offtopic
from groove.search.answers import search_text
from groove.search.pipeline import SearchRequest
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.off_topic import TOPICS
from tests.support.oneshot import eval_once, search_once, tune_once

# --- the choice (pure) -----------------------------------------------------------------------------------


def test_the_offset_is_the_largest_that_flags_at_most_five_percent_of_the_answerable_queries():
    margins = [i / 10 for i in range(40)]  # 0.0 .. 3.9: 5% of 40 is 2 queries
    offset = oo.choose(margins)
    assert offset == 0.2
    assert sum(m < offset for m in margins) == 2
    assert sum(m < offset + 0.01 for m in margins) == 3  # any higher line flags a third


@given(st.lists(st.floats(min_value=-2.5, max_value=2.5, allow_nan=False), min_size=1, max_size=200))
def test_the_chosen_offset_never_flags_more_than_five_percent_of_the_queries_it_was_chosen_on(margins):
    offset = oo.choose(margins)
    assert sum(m < offset for m in margins) <= math.floor(0.05 * len(margins) + 1e-9)
    assert oo.OFFSET_RANGE[0] <= offset <= oo.OFFSET_RANGE[1]


def test_held_out_each_query_is_flagged_by_the_line_drawn_on_the_others():
    # 20 answerable at 1.0 .. 2.9 and one at -1.0. Drawn on 20 others, the line lets one of them under
    # it: held out, the low one meets a line at 1.0 (flagged), the one at 1.0 a line at 1.1 (flagged:
    # the low one used the allowance), every other one a line at 1.0 (not flagged).
    rows = [(False, 1.0 + i / 10, False) for i in range(20)] + [(False, -1.0, True)]
    rows += [(True, 0.5, False), (True, 2.0, False), (True, None, True)]
    ans, un = oo.cross_validate(rows)
    assert ans == pytest.approx(2 / 21)
    assert un == pytest.approx(2 / 3)    # 0.5 under every line, 2.0 over; no margin: its flag stays


def a_docs_vault(n_ans: int = 60, n_un: int = 40) -> list[oo.Row]:
    """Answerable margins 0.5 .. 3.5, unanswerable 0.0 .. 1.2: today's line (0) catches almost none."""
    return ([(False, 0.5 + 3.0 * i / n_ans, False) for i in range(n_ans)]
            + [(True, 1.2 * i / n_un, False) for i in range(n_un)])


def test_a_vault_whose_unanswerable_questions_score_above_the_line_is_told_to_raise_it():
    p = oo.propose(a_docs_vault(), current=0.0)
    assert p is not None and p.recommend
    assert p.offset > 0.5 and p.held_out[1] > p.now[1] + 0.3 and p.held_out[0] <= 0.05 + 1 / 60
    assert "more unanswerable" in p.reason
    assert oo.block(p.offset) == f"[search.off_topic]\nthreshold_offset = {p.offset:.2f}\n"


def test_no_proposal_to_move_when_the_line_already_sits_where_the_queries_put_it():
    p = oo.propose(a_docs_vault(), current=oo.propose(a_docs_vault(), current=0.0).offset)
    assert p is not None and not p.recommend and "already" in p.reason


def test_too_few_judged_queries_or_too_small_a_gain_is_not_a_recommendation():
    few = oo.propose(a_docs_vault(n_ans=6, n_un=3), current=0.0)
    assert few is not None and not few.recommend and "at least 10 answerable" in few.reason
    # unanswerable queries far below every line: today already catches them all, a move gains nothing
    caught = [(False, 1.0 + i / 20, False) for i in range(40)] + [(True, -2.0, True)] * 20
    p = oo.propose(caught, current=0.0)
    assert p is not None and not p.recommend
    assert oo.propose([(False, 1.0, False)] * 20, current=0.0) is None  # nothing unanswerable to judge by


def test_a_line_that_flags_too_many_answerable_queries_is_told_to_come_down():
    rows = [(False, -0.5 + i / 20, i < 10) for i in range(40)] + [(True, -1.0, True)] * 10
    p = oo.propose(rows, current=0.0)
    assert p is not None and p.recommend and p.offset < 0 and "fewer answerable" in p.reason


# --- the setting, on a real index ------------------------------------------------------------------------


def test_the_offset_moves_the_flag_of_a_real_search_and_explain_shows_it(topics_vault):
    embedder = BagOfWordsEmbedder()
    req = SearchRequest(query="tune strings and chords", limit=5, explain=True)
    plain = anyio.run(lambda: search_once(topics_vault, req, embedder=embedder))
    m = offtopic.margin(plain.explain["off_topic"])
    assert m is not None and plain.off_topic is False and 0 < m < 2.9  # answered, within the setting's reach
    strict = replace_settings(topics_vault, **{"search.off_topic.threshold_offset": math.ceil(m * 100 + 1) / 100})
    flagged = anyio.run(lambda: search_once(strict, req, embedder=embedder))
    assert flagged.off_topic is True  # the line moved above this query's score
    assert [h.chunk_id for h in flagged.results] == [h.chunk_id for h in plain.results]  # it informs, never hides
    o = flagged.explain["off_topic"]
    assert o["threshold_offset"] == strict.search.off_topic.threshold_offset
    assert o["threshold"] == pytest.approx(plain.explain["off_topic"]["threshold"] + o["threshold_offset"])
    assert f"threshold_offset {o['threshold_offset']:+g}" in search_text(flagged)  # --explain names the setting
    assert "threshold_offset" not in search_text(plain)


def test_eval_compares_runs_only_under_the_same_offset(topics_vault, tmp_path):
    path = write(tmp_path / "golden.yaml", "queries:\n  - {id: a, query: knead the bread dough, expected: [bread.md]}\n")
    base = anyio.run(lambda: eval_once(topics_vault, path, embedder=BagOfWordsEmbedder(), record=False))
    moved = replace_settings(topics_vault, **{"search.off_topic.threshold_offset": 0.5})
    other = anyio.run(lambda: eval_once(moved, path, embedder=BagOfWordsEmbedder(), record=False))
    assert "off_topic" not in base.fingerprint  # the default keeps the fingerprints recorded before the setting
    assert other.fingerprint["off_topic"] == {"threshold_offset": 0.5}


def test_an_offset_outside_its_range_is_refused_with_the_key_named(tmp_path):
    cfg = write(tmp_path / "groove.toml", "[search.off_topic]\nthreshold_offset = 7\n")
    with pytest.raises(ConfigError, match="search.off_topic.threshold_offset"):
        load_settings(cfg)


def test_tune_reports_the_offset_from_the_golden_sets_unanswerable_queries(topics_vault, tmp_path):
    lines = ["queries:"]
    for name, parts in TOPICS.items():
        for i, p in enumerate(parts):
            lines.append(f"  - {{id: {name}{i}, query: '{p}', expected: [{name}.md]}}")
    for i, q in enumerate(["quantum chromodynamics lattice", "tax return deadline", "jupiter moons orbit",
                           "violin bow rosin", "chess opening theory", "mortgage interest rate"]):
        lines.append(f"  - {{id: u{i}, query: '{q}', expected: []}}")
    path = write(tmp_path / "golden.yaml", "\n".join(lines) + "\n")
    report = anyio.run(lambda: tune_once(topics_vault, path, embedder=BagOfWordsEmbedder()))
    answerable = sum(len(p) for p in TOPICS.values())
    assert report.count == answerable and report.skipped == []  # unanswerable ones are not "queries that do not compile"
    t = report.off_topic
    assert t is not None and (t.answerable, t.unanswerable) == (answerable, 6)
    assert t.current_offset == 0.0 and set(t.now) == set(t.held_out) == {"answerable_flagged", "unanswerable_flagged"}
    assert (t.block is not None) == t.recommend


def test_a_small_gain_is_named_as_such_not_recommended():
    # held out, the move catches 2 more unanswerable queries in 100: not worth a line in groove.toml
    rows = [(False, 0.2 + i / 25, False) for i in range(100)]
    rows += [(True, -1.0, True)] * 96 + [(True, 0.15, False), (True, 0.15, False)] + [(True, 2.0, False)] * 2
    p = oo.propose(rows, current=0.0)
    assert p is not None and not p.recommend
    assert p.held_out[1] - p.now[1] == pytest.approx(0.02)
    assert "2.0 more unanswerable queries in 100" in p.reason
