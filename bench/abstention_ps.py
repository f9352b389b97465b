"""The PowerShell docs vault of `python -m bench abstention build ps`: questions written blind (issue 37, 8).

The docs vault of bench/abstention_docs.py holds one-command tldr pages; this set is the kind of
docs tree issue 37 met the flag crying wolf on: Microsoft's PowerShell reference in Japanese
(machine-translated, `powershell-docs-ja` in the shared data folder), whose cmdlet and about_
pages are long, templated and near each other. The vault is drawn from one version of it,
`reference/7.2` (489 pages: the cmdlets of 15 modules and the about_ topics; the other versions are
near duplicates of the same pages): the 100 pages questions were asked of and 100 others drawn with
the same seed, 200 pages in all (the whole version is 10,079 chunks, over an hour to embed on the
shared 2-core machine the set was measured on; 200 pages keep every module and many neighbours of
each asked page).

The questions (`bench/data/abstention_ps_questions.jsonl`) were written on 2026-12-06 by a
helper reading one page each (the page's opening, front matter left out, as `tasks` writes it),
without searching the vault and before any flag was computed on it: 60 pages (seed 20261206)
got a Japanese question and 40 other pages an English one, each asked the way a user who does
not know the cmdlet's name might ask, most of them a task ("how do I ...") and some naming the
cmdlet or the topic. The unanswerable questions (20 Japanese, 20 English) ask about PowerShell
work the reference does not document: modules outside it (Active Directory, Exchange, Azure,
Pester, the VS Code extension), Windows administration cmdlets of other modules, and the
products around it; they were written from what those modules do, not from the vault.

    python -m bench abstention tasks-ps /tmp/abst/ps-tasks   # the pages to write questions for
    python -m bench abstention build ps /tmp/abst/ps         # notes/, tune/ and test/ (BEIR)
    groove index --kb /tmp/abst/ps/notes --index /tmp/abst/ps/index.sqlite
    python -m bench abstention score /tmp/abst/ps --part test
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

from bench.abstention import write_halves

SEED = 20261206
VERSION = "7.2"
DATA = Path(__file__).resolve().parent / "data"
QUESTIONS = DATA / "abstention_ps_questions.jsonl"
OPENING = 2500  # characters of a page a question was written from
OTHERS = 100  # pages of the vault no question was asked of

_FRONT = re.compile(r"\A---\n.*?\n---\n", re.S)


def _root(data: Path) -> Path:
    return data / "powershell-docs-ja" / "reference" / VERSION


def pages(data: Path) -> list[str]:
    """The vault's pages a question may be asked of: every page but a module's landing page (a list
    of its cmdlets, named as its folder)."""
    root = _root(data)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.md") if p.stem != p.parent.name)


def sample(data: Path, seed: int = SEED, ja: int = 60, en: int = 40) -> dict[str, list[str]]:
    """The pages asked in Japanese and those asked in English (distinct pages)."""
    chosen = random.Random(seed).sample(pages(data), ja + en)
    return {"ja": sorted(chosen[:ja]), "en": sorted(chosen[ja:])}


def vault(data: Path, seed: int = SEED, others: int = OTHERS) -> list[str]:
    """The vault's pages: every asked page and `others` more, drawn from the rest with the seed."""
    s = sample(data, seed)
    asked = set(s["ja"]) | set(s["en"])
    rest = sorted(p for p in (str(q.relative_to(_root(data))) for q in _root(data).rglob("*.md")) if p not in asked)
    return sorted(asked | set(random.Random(seed + 2).sample(rest, others)))


def opening(path: Path) -> str:
    """What a question was written from: the page without its front matter, cut at OPENING characters."""
    return _FRONT.sub("", path.read_text(encoding="utf-8"), count=1)[:OPENING]


def tasks(data: Path, out: Path) -> dict:
    """The pages to write questions for, one file per language, each row a page and its opening."""
    out.mkdir(parents=True, exist_ok=True)
    s = sample(data)
    for lang, chosen in s.items():
        with open(out / f"task_{lang}.jsonl", "w", encoding="utf-8") as f:
            for page in chosen:
                row = {"page": page, "lang": lang, "text": opening(_root(data) / page)}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {lang: len(chosen) for lang, chosen in s.items()} | {"out": str(out)}


def build(data: Path, out: Path) -> dict:
    """The vault (`vault`'s pages of reference/VERSION) and the questions cut in a tune and a test half."""
    notes = out / "notes"
    for page in vault(data):
        (notes / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_root(data) / page, notes / page)
    with open(QUESTIONS, encoding="utf-8") as f:
        written = [json.loads(line) for line in f if line.strip()]
    rows = []
    for i, q in enumerate(written):
        row = {"_id": f"ps-{q['lang']}-{i:03d}", "text": q["question"], "lang": q["lang"]}
        if q.get("page"):
            if not (notes / q["page"]).is_file():
                raise ValueError(f"question {row['_id']}: no page {q['page']} in the vault")
            row.update(kind="answerable", page=q["page"])
        else:
            row.update(kind="off_docs", unanswerable=True)
        rows.append(row)
    random.Random(SEED + 1).shuffle(rows)
    parts = write_halves(out, rows, lambda r: [Path(r["page"]).stem])  # eval: corpus id = file stem
    counts = {
        part: {
            f"{k} {lang}": sum(1 for r in chunk if r["kind"] == k and r["lang"] == lang)
            for k in ("answerable", "off_docs")
            for lang in ("en", "ja")
        }
        for part, chunk in parts.items()
    }
    return {"notes": sum(1 for _ in notes.rglob("*.md")), "seed": SEED, **counts}
