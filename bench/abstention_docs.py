"""The docs vault of `python -m bench abstention build docs`: how-to pages, questions written for them (0017).

SciFact and JaQuAD (bench/abstention.py) measure abstention on corpora of near-neighbours:
hundreds of abstracts on one disease, paragraphs of one encyclopaedia. This set measures it on
the kind of folder people keep: how-to pages, in English and Japanese, from tldr-pages in the
shared data folder (one command a page; 492 Japanese pages have an English twin at the same
path). `groove tune`'s off_topic offset (`[search.off_topic] threshold_offset`) was measured on it.

The vault (seed 20261204): 800 English pages from `pages/common` and `pages/linux` (those
without a Japanese twin) and every Japanese page, less 100 commands left out: 60 with a Japanese
twin (gone in both languages) and 40 English-only. Questions are asked only of pages with content
of their own; alias stubs ("This command is an alias of ...": 77% of the Japanese pages, 2% of the
English ones) stay in the vault as its noise. The questions
(`bench/data/abstention_docs_questions.jsonl`) were written by people reading one page each,
blind to which pages stay in the vault, to the flag and to search: 100 English and 90 Japanese
questions of kept pages (answerable), 100 English and 60 Japanese of left-out pages
(unanswerable), about half naming the command, half describing the task without it. A left-out
page's question that another page answers after all (e.g. `ss` left out, `netstat` kept) was
judged by reading the three notes groove shows first (`bench/data/abstention_judgments_docs.jsonl`)
and is not counted as unanswerable.

    python -m bench abstention tasks /tmp/abst/docs-tasks    # the pages to write questions for
    python -m bench abstention build docs /tmp/abst/docs     # notes/, tune/ and test/ (BEIR)
    groove index --kb /tmp/abst/docs/notes --index /tmp/abst/docs/index.sqlite
    python -m bench abstention score /tmp/abst/docs --part test
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from bench.abstention import write_halves

SEED = 20261204
DATA = Path(__file__).resolve().parent / "data"
QUESTIONS = DATA / "abstention_docs_questions.jsonl"
JUDGMENTS = DATA / "abstention_judgments_docs.jsonl"


ALIAS = ("This command is an alias of", "のエイリアスです")


def _is_alias(path: Path) -> bool:
    """A stub that only names the command it stands for: no question of its own to ask."""
    head = path.read_text(encoding="utf-8")[:400]
    return any(a in head for a in ALIAS)


def sample(
    data: Path,
    seed: int = SEED,
    english: int = 800,
    left_out_twins: int = 60,
    left_out_english: int = 40,
    answerable_en: int = 100,
    answerable_ja: int = 90,
) -> dict:
    """Which pages the vault keeps, which commands it leaves out, which pages get questions.

    A page is named by its language and path under pages/ (`en/common/tar.md`, `ja/common/tar.md`).
    Questions are asked only of pages with content of their own (not alias stubs, which stay in the
    vault). Left out: commands with a Japanese twin (asked in both languages) and English-only ones."""
    root = data / "tldr-pages"
    rng = random.Random(seed)
    ja = sorted(str(p.relative_to(root / "pages.ja")) for p in (root / "pages.ja").rglob("*.md"))
    ja_own = [p for p in ja if not _is_alias(root / "pages.ja" / p)]
    twins = [p for p in ja_own if (root / "pages" / p).is_file() and not _is_alias(root / "pages" / p)]
    gone_twins = set(rng.sample(twins, left_out_twins))
    en_pool = sorted(
        str(p.relative_to(root / "pages"))
        for sub in ("common", "linux")
        for p in (root / "pages" / sub).glob("*.md")
        if str(p.relative_to(root / "pages")) not in ja
    )
    en_own = [p for p in en_pool if not _is_alias(root / "pages" / p)]
    gone_english = set(rng.sample(en_own, left_out_english))
    gone = gone_twins | gone_english
    en_keep = sorted(rng.sample([p for p in en_pool if p not in gone], english))
    ja_keep = [p for p in ja if p not in gone]
    en_keep_own = [p for p in en_keep if not _is_alias(root / "pages" / p)]
    ja_keep_own = [p for p in ja_keep if p in ja_own]
    return {
        "vault": [f"en/{p}" for p in en_keep] + [f"ja/{p}" for p in ja_keep],
        "left_out": sorted(gone),
        "ask": (
            [f"en/{p}" for p in sorted(rng.sample(en_keep_own, answerable_en))]
            + [f"ja/{p}" for p in sorted(rng.sample(ja_keep_own, min(answerable_ja, len(ja_keep_own))))]
            + [f"en/{p}" for p in sorted(gone)]
            + [f"ja/{p}" for p in sorted(gone_twins)]
        ),
    }


def _source(data: Path, page: str) -> Path:
    lang, rel = page.split("/", 1)
    return data / "tldr-pages" / ("pages" if lang == "en" else "pages.ja") / rel


def tasks(data: Path, out: Path, parts: int = 4) -> dict:
    """The pages to write questions for, shuffled and cut in `parts` files, none marked kept or left out."""
    s = sample(data)
    pages = list(s["ask"])
    random.Random(SEED + 1).shuffle(pages)
    out.mkdir(parents=True, exist_ok=True)
    for i in range(parts):
        with open(out / f"task{i}.jsonl", "w", encoding="utf-8") as f:
            for page in pages[i::parts]:
                f.write(
                    json.dumps(
                        {"page": page, "lang": page[:2], "text": _source(data, page).read_text(encoding="utf-8")},
                        ensure_ascii=False,
                    )
                    + "\n"
                )
    return {"pages": len(pages), "parts": parts, "out": str(out)}


def _judged_covered() -> set[str]:
    if not JUDGMENTS.is_file():
        return set()
    with open(JUDGMENTS, encoding="utf-8") as f:
        return {r["id"] for r in map(json.loads, f) if r.get("covered")}


def build(data: Path, out: Path, judged: bool = True) -> dict:
    s = sample(data)
    notes = out / "notes"
    for page in s["vault"]:
        dest = notes / page
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(_source(data, page).read_text(encoding="utf-8"), encoding="utf-8")
    gone = {f"{lang}/{p}" for p in s["left_out"] for lang in ("en", "ja")}  # both twins leave the vault
    covered = _judged_covered() if judged else set()
    with open(QUESTIONS, encoding="utf-8") as f:
        written = {r["page"]: r for r in map(json.loads, f)}
    rows = []
    for page in s["ask"]:
        q = written[page]
        qid = "q-" + page.replace("/", "-").removesuffix(".md")
        row = {"_id": qid, "text": q["question"], "lang": page[:2], "page": page}
        if page not in gone:
            row["kind"] = "answerable"
        elif qid in covered:
            row["kind"] = "held_out_covered"  # another page answers it after all: not unanswerable
        else:
            row.update(kind="held_out", unanswerable=True)
        rows.append(row)
    random.Random(SEED + 2).shuffle(rows)
    parts = write_halves(out, rows, lambda r: [Path(r["page"]).stem])  # eval: corpus id = file stem
    counts = {
        part: {
            f"{k} {lang}": sum(1 for r in chunk if r["kind"] == k and r["lang"] == lang)
            for k in ("answerable", "held_out", "held_out_covered")
            for lang in ("en", "ja")
        }
        for part, chunk in parts.items()
    }
    return {"notes": len(s["vault"]), "left_out_commands": len(s["left_out"]), "seed": SEED, **counts}
