"""The bilingual quality gate: the default configuration on a Japanese + English vault the project owns.

tests/fixtures/bilingual holds 28 notes (Japanese, English, mixed) and 40
paraphrase queries that avoid the notes' own headings and distinctive nouns,
with English questions for Japanese notes and the reverse. The real default
model embeds them (no fake): this is the test that fails if a change makes
groove worse at what its users do. Floors sit a little under what was measured
when the default was chosen (docs/decisions/0007: hybrid recall@1 0.775,
MRR 0.826, vectors alone the same, full text alone 0.075 / 0.14).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import yaml

from groove.app import eval_once, index_once
from groove.config import load_settings

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "bilingual"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict[str, dict]:
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
    m = evaluated["hybrid"]["metrics"]
    assert m["recall@1"] >= 0.70
    assert m["mrr"] >= 0.78
    assert m["recall@10"] >= 0.90


def test_the_default_hybrid_never_scores_below_either_half(evaluated):
    hybrid = evaluated["hybrid"]["metrics"]
    for half in ("fts", "vector"):
        for metric in ("ndcg@10", "mrr", "recall@1"):
            assert hybrid[metric] >= evaluated[half]["metrics"][metric], (half, metric)
    # Paraphrases share few words with their notes: keyword matches are accidents here,
    # and the hybrid must not let them push the answers down (plain RRF did: MRR 0.52).
    assert hybrid["mrr"] > evaluated["fts"]["metrics"]["mrr"] + 0.4


def test_english_questions_find_japanese_notes(evaluated):
    queries = yaml.safe_load((FIXTURE / "golden.yaml").read_text(encoding="utf-8"))["queries"]
    cross = {q["id"] for q in queries if q["lang"] == "en-to-ja"}
    ranks = [q["ranks"][0] for q in evaluated["hybrid"]["queries"] if q["id"] in cross]
    assert sum(1 for r in ranks if r is not None and r <= 10) >= len(ranks) - 1


def test_low_confidence_marks_the_searches_whose_top_note_is_more_often_wrong(evaluated):
    c = evaluated["hybrid"]["confidence"]
    assert 0.0 < c["flagged_share"] < 0.7
    assert c["top1_unflagged"] >= c["top1_flagged"] + 0.15
