"""The off_topic sets of `python -m bench abstention build` (decision 0017) are what they claim to be.

The docs vault (bench/abstention_docs.py): its rates are only worth reading if a left-out command is
really gone from the vault in both languages, every question was written for a page of its own
language, and the judged "covered" questions are the left-out ones groove's search was shown. The
SciFact set: the judged held-out claims another abstract answers are neither answerable nor
unanswerable. Skips without ../shared/data (a user's checkout).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import abstention_docs as docs
from bench.__main__ import main as bench
from tests.support.common import DATA, ROOT

pytestmark = pytest.mark.skipif(not (DATA / "tldr-pages" / "pages.ja").is_dir(),
                                reason="needs ../shared/data/tldr-pages (not in a user's checkout)")

KANA = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def _lines(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_a_left_out_command_is_gone_from_the_vault_in_both_languages_and_the_sample_is_fixed():
    s = docs.sample(DATA)
    assert s == docs.sample(DATA)
    vault = set(s["vault"])
    assert len(vault) == len(s["vault"]) == 1232 and len(s["left_out"]) == 100
    for page in s["left_out"]:
        assert f"en/{page}" not in vault and f"ja/{page}" not in vault
    asked = set(s["ask"])
    assert len(asked) == len(s["ask"]) == 350
    kept = [p for p in s["ask"] if p in vault]
    assert len(kept) == 190  # 100 English and 90 Japanese answerable pages, the rest left out


def test_questions_are_asked_only_of_pages_with_content_of_their_own_in_their_own_language():
    s = docs.sample(DATA)
    written = {r["page"]: r for r in _lines(docs.QUESTIONS)}
    assert set(written) == set(s["ask"])
    for page in s["ask"]:
        assert not docs._is_alias(docs._source(DATA, page)), page
        question = written[page]["question"]
        assert question.strip()
        assert bool(KANA.search(question)) == page.startswith("ja/"), (page, question)


def test_only_left_out_questions_are_judged_and_each_names_the_notes_it_was_shown():
    s = docs.sample(DATA)
    gone = {f"{lang}/{p}" for p in s["left_out"] for lang in ("en", "ja")}
    ids_of_gone = {"q-" + p.replace("/", "-").removesuffix(".md") for p in s["ask"] if p in gone}
    judged = _lines(docs.JUDGMENTS)
    assert {r["id"] for r in judged} == ids_of_gone
    for r in judged:
        assert len(r["shown"]) == 3
        if r["covered"]:
            assert r["note"] in r["shown"] and r["note"] in set(s["vault"])


def _built(tmp_path: Path, *argv: str) -> dict:
    """`python -m bench --json PATH abstention build ...`: the set's counts, as printed and written."""
    assert bench(["--data", str(DATA), "--json", str(tmp_path / "counts.json"), "abstention", "build", *argv]) == 0
    return json.loads((tmp_path / "counts.json").read_text(encoding="utf-8"))


def test_the_built_folders_mark_left_out_questions_unanswerable_without_qrels(tmp_path: Path):
    out = tmp_path / "docs"
    counts = _built(tmp_path, "docs", str(out))
    assert sum(1 for _ in (out / "notes").rglob("*.md")) == counts["notes"] == 1232
    covered = {r["id"] for r in _lines(docs.JUDGMENTS) if r["covered"]}
    for part in ("tune", "test"):
        rows = _lines(out / part / "queries.jsonl")
        with open(out / part / "qrels" / "train.tsv", encoding="utf-8") as f:
            qrels = [line.split("\t") for line in f.read().splitlines()[1:]]
        judged_ids = {q for q, _, _ in qrels}
        for r in rows:
            assert r.get("unanswerable", False) == (r["kind"] == "held_out")
            assert (r["_id"] in judged_ids) == (r["kind"] == "answerable")
            assert (r["kind"] == "held_out_covered") == (r["_id"] in covered)
        stems = {p.stem for p in (out / "notes").rglob("*.md")}
        assert all(stem in stems for _, stem, _ in qrels)


def test_the_scifact_set_leaves_the_judged_covered_claims_out_of_the_unanswerable_ones(tmp_path: Path):
    if not (DATA / "scifact" / "qrels" / "train.tsv").is_file() or not (DATA / "jaquad").is_dir():
        pytest.skip("needs ../shared/data/scifact and jaquad")
    out = tmp_path / "en"
    counts = _built(tmp_path, "scifact", str(out))
    assert counts["docs"] == 1000
    covered = {r["id"] for r in _lines(ROOT / "bench" / "data" / "abstention_judgments_scifact.jsonl") if r["covered"]}
    assert len(covered) == 12  # of the 150 held-out claims (decision 0017)
    rows = [r for part in ("tune", "test") for r in _lines(out / part / "queries.jsonl")]
    assert {r["_id"] for r in rows if r["kind"] == "held_out_covered"} == covered
    assert sum(counts[part]["held_out"] + counts[part]["held_out_covered"] for part in ("tune", "test")) == 150
    assert all(r.get("unanswerable", False) == (r["kind"] in ("held_out", "cross_language")) for r in rows)
