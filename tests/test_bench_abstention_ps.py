"""The PowerShell docs set of `python -m bench abstention build ps` (issue 37, point 8) is what it claims to be.

Its rates are only worth reading if every answerable question names a page that is in the vault
(200 pages of reference/7.2: the asked ones and 100 more) and was drawn by the seeded sample, in the
language the sample drew it for; the unanswerable ones name none; and the built folders judge exactly
the answerable ones, by the page's file stem as `groove eval` matches a hit. `rescore` decides the
flag again from the signals `score` kept. Skips without ../shared/data (a user's checkout).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import abstention_ps as ps
from bench.__main__ import main as bench
from tests.support.common import DATA

needs_data = pytest.mark.skipif(
    not (DATA / "powershell-docs-ja" / "reference" / ps.VERSION).is_dir(),
    reason="needs ../shared/data/powershell-docs-ja (not in a user's checkout)",
)

KANA = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def _lines(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@needs_data
def test_each_answerable_question_names_a_sampled_page_in_the_language_it_was_drawn_for():
    s = ps.sample(DATA)
    assert s == ps.sample(DATA) and len(s["ja"]) == 60 and len(s["en"]) == 40 and not set(s["ja"]) & set(s["en"])
    written = _lines(ps.QUESTIONS)
    for lang in ("ja", "en"):
        asked = [q for q in written if q["lang"] == lang and q["page"]]
        assert sorted(q["page"] for q in asked) == s[lang]
        for q in asked:
            assert (DATA / "powershell-docs-ja" / "reference" / ps.VERSION / q["page"]).is_file()
    for q in written:
        assert q["question"].strip() and bool(KANA.search(q["question"])) == (q["lang"] == "ja"), q
    off = [q for q in written if not q["page"]]
    assert sum(q["lang"] == "ja" for q in off) == 20 and sum(q["lang"] == "en" for q in off) == 20


@needs_data
def test_the_built_folders_judge_the_answerable_questions_by_their_pages_stem_and_only_those(tmp_path: Path):
    out = tmp_path / "ps"
    assert bench(["--data", str(DATA), "--json", str(tmp_path / "c.json"), "abstention", "build", "ps", str(out)]) == 0
    counts = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    assert counts["notes"] == sum(1 for _ in (out / "notes").rglob("*.md")) == len(ps.vault(DATA)) == 200
    asked = ps.sample(DATA)
    assert all((out / "notes" / page).is_file() for lang in ("ja", "en") for page in asked[lang])
    stems = {p.stem for p in (out / "notes").rglob("*.md")}
    rows = []
    for part in ("tune", "test"):
        chunk = _lines(out / part / "queries.jsonl")
        with open(out / part / "qrels" / "train.tsv", encoding="utf-8") as f:
            qrels = {q: c for q, c, _ in (line.split("\t") for line in f.read().splitlines()[1:])}
        for r in chunk:
            assert (r["_id"] in qrels) == (r["kind"] == "answerable") != r.get("unanswerable", False)
            if r["kind"] == "answerable":
                assert qrels[r["_id"]] == Path(r["page"]).stem and qrels[r["_id"]] in stems
        rows += chunk
    assert len(rows) == 140 and sum(r["kind"] == "answerable" for r in rows) == 100


def test_rescore_decides_the_flag_again_from_the_signals_a_row_kept(tmp_path: Path):
    # Rows as `score` writes them: one whose stored flag is stale (a calibrated query far below its
    # threshold, stored as not flagged), one that found nothing; both come back flagged.
    far = {
        "vector_top": 0.5,
        "vector_position": -3.0,
        "vector_gap": 0.0,
        "evidence": 0.0,
        "agreement": False,
        "scale": "cosine",
        "query_cjk": False,
        "full_text": True,
    }
    near = {**far, "vector_position": 1.0, "vector_gap": 1.0, "evidence": 0.9, "agreement": True}
    rows = [
        {"id": "a", "unanswerable": True, "top": ["x.md"], "off_topic": False, "off_topic_evidence": far},
        {"id": "b", "unanswerable": True, "top": [], "off_topic": False, "off_topic_evidence": near},
        {"id": "c", "unanswerable": False, "top": ["x.md"], "off_topic": True, "off_topic_evidence": near},
    ]
    path = tmp_path / "test.hybrid.rows.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    assert bench(["--json", str(tmp_path / "r.json"), "abstention", "rescore", str(path)]) == 0
    out = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert out["off_topic_unanswerable"] == 1.0 and out["off_topic_answerable"] == 0.0
    assert bench(["--json", str(tmp_path / "missing.json"), "abstention", "rescore", str(tmp_path / "none.json")]) != 0
