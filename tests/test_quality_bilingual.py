"""The bilingual quality gate: the default configuration on a Japanese + English vault the project owns.

tests/fixtures/bilingual holds 28 notes (Japanese, English, mixed) and 40
paraphrase queries that avoid the notes' own headings and distinctive nouns,
with English questions for Japanese notes and the reverse. The real default
model embeds them (no fake): this is the test that fails if a change makes
groove worse at what its users do. Floors sit a little under what was measured
when the default was chosen (docs/decisions/0007: hybrid recall@1 0.775,
MRR 0.826, vectors alone the same, full text alone 0.075 / 0.14).

Twelve off-topic questions (six Japanese, six English; `expected: []`) gate the
`off_topic` flag (docs/decisions/0017): measured at its introduction, it fired on
2 of the 40 answerable queries (both English questions about Japanese notes) and
on 8 of the 12 off-topic ones.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import yaml

from groove.app import eval_once, index_once
from groove.config import load_settings
from groove.evaluate.report import EvalReport

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "bilingual"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict[str, EvalReport]:
    settings = load_settings(None, kb_path=FIXTURE / "notes", index_path=tmp_path_factory.mktemp("bilingual") / "index.sqlite")
    anyio.run(lambda: index_once(settings))
    return {
        retriever: anyio.run(lambda: eval_once(settings, FIXTURE / "golden.yaml", retriever=retriever))
        for retriever in ("fts", "vector", "hybrid")
    }


def test_the_fixture_has_the_mix_the_gate_promises():
    queries = yaml.safe_load((FIXTURE / "golden.yaml").read_text(encoding="utf-8"))["queries"]
    kinds = {q["lang"] for q in queries}
    assert len(queries) >= 30 and {"ja-to-ja", "en-to-en", "en-to-ja", "ja-to-en"} <= kinds
    assert len(list((FIXTURE / "notes").rglob("*.md"))) >= 20


def test_the_default_hybrid_finds_notes_by_meaning_across_both_languages(evaluated):
    m = evaluated["hybrid"].metrics
    assert m["recall@1"] >= 0.70
    assert m["mrr"] >= 0.78
    assert m["recall@10"] >= 0.90


def test_the_default_hybrid_never_scores_below_either_half(evaluated):
    hybrid = evaluated["hybrid"].metrics
    for half in ("fts", "vector"):
        for metric in ("ndcg@10", "mrr", "recall@1"):
            assert hybrid[metric] >= evaluated[half].metrics[metric], (half, metric)
    # Paraphrases share few words with their notes: keyword matches are accidents here,
    # and the hybrid must not let them push the answers down (plain RRF did: MRR 0.52).
    assert hybrid["mrr"] > evaluated["fts"].metrics["mrr"] + 0.4


def test_english_questions_find_japanese_notes(evaluated):
    queries = yaml.safe_load((FIXTURE / "golden.yaml").read_text(encoding="utf-8"))["queries"]
    cross = {q["id"] for q in queries if q["lang"] == "en-to-ja"}
    ranks = [q.ranks[0] for q in evaluated["hybrid"].queries if q.id in cross]
    assert sum(1 for r in ranks if r is not None and r <= 10) >= len(ranks) - 1


def test_low_confidence_marks_the_searches_whose_top_note_is_more_often_wrong(evaluated):
    c = evaluated["hybrid"].confidence
    assert 0.0 < c.flagged_share < 0.7
    if c.top1_flagged == 1.0:  # every flagged search has its note first: nothing for the flag to warn of
        assert c.top1_unflagged >= 0.95  # (the language centres, decision 0019, made the fixture's top-1 1.0)
    else:
        assert c.top1_unflagged >= c.top1_flagged + 0.15


def _flags(evaluated) -> dict[str, tuple[str, bool]]:
    queries = yaml.safe_load((FIXTURE / "golden.yaml").read_text(encoding="utf-8"))["queries"]
    lang = {q["id"]: q["lang"] for q in queries}
    return {r.id: (lang[r.id], r.off_topic) for r in evaluated["hybrid"].queries}


def test_the_fixture_has_off_topic_questions_in_both_languages():
    queries = yaml.safe_load((FIXTURE / "golden.yaml").read_text(encoding="utf-8"))["queries"]
    off = [q for q in queries if q["expected"] == []]
    assert sum(q["lang"] == "off-topic-ja" for q in off) >= 5 and sum(q["lang"] == "off-topic-en" for q in off) >= 5


def test_off_topic_never_fires_on_an_answerable_question_in_the_notes_own_language(evaluated):
    flagged = [qid for qid, (lang, off) in _flags(evaluated).items() if lang in ("ja-to-ja", "en-to-en", "mixed") and off]
    assert flagged == []


def test_off_topic_fires_on_at_most_two_answerable_questions_in_all(evaluated):
    flagged = [qid for qid, (lang, off) in _flags(evaluated).items() if not lang.startswith("off-topic") and off]
    assert len(flagged) <= 2, flagged


def test_off_topic_fires_on_most_off_topic_questions_in_each_language(evaluated):
    flags = _flags(evaluated)
    for lang, floor in (("off-topic-ja", 5), ("off-topic-en", 3)):
        caught = [qid for qid, (l, off) in flags.items() if l == lang and off]
        assert len(caught) >= floor, (lang, caught)
    m = evaluated["hybrid"].metrics
    assert m["off_topic_answerable"] <= 0.05 and m["off_topic_unanswerable"] >= 0.66


def test_the_issues_example_of_an_unrelated_query_is_flagged_and_keeps_its_results(evaluated):
    row = next(r for r in evaluated["hybrid"].queries if r.query == "kubernetes helm chart values override")
    assert row.off_topic and row.top
