"""Where `off_topic`'s line sits in each kind of vault, and three ways to move it measured offline
(issue 21, docs/decisions/0017 "a docs vault").

Every query of five held-out sets runs once through groove's real hybrid search (`groove eval`'s rows:
each query's features, score and flag); the index's calibration is then measured again with other
references, and every row is scored again on them without searching again (a row keeps its top cosine
and its gap in cosine units, so any other references place it anew):

    python -m bench.abstention_scale rows      # ROOT/rows/<set>.json, the sets of bench.abstention,
                                               # bench.abstention_docs and tests/fixtures/bilingual/heldout
    python -m bench.abstention_scale refs      # ROOT/refs.json: references per synthetic-query maker
    python -m bench.abstention_scale score w12 first_sentence sentence w12_clean    # rates per set and language
    python -m bench.abstention_scale score --fixed 0.0127 0.02 0.03                 # one scale for every index
    python -m bench.abstention_scale perlang   # references split by the synthetic query's script

The indexes are those the other abstention benches build (ROOT /tmp/abst: en, ja, mix = both notes
folders in one index, fx = tests/fixtures/bilingual, docs). `w12` (today's 12-word windows) reproduces
each set's flags exactly, which checks the offline scoring.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path("/tmp/abst")
FX = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "bilingual"
INDEXES = {"en": ROOT / "en", "ja": ROOT / "ja", "mix": ROOT / "mix", "fx": ROOT / "fx", "docs": ROOT / "docs"}
# set -> (index, golden source)
SETS: dict[str, tuple[str, Path]] = {
    **{f"{lang}_{part}": (lang, ROOT / lang / part) for lang in ("en", "ja") for part in ("tune", "test")},
    **{f"mix_{lang}_{part}": ("mix", ROOT / lang / part) for lang in ("en", "ja") for part in ("tune", "test")},
    "fx_golden": ("fx", FX / "golden.yaml"),
    **{f"fx_{kind[:3]}_{part}": ("fx", FX / "heldout" / f"{kind}.{part}.yaml")
       for kind in ("answerable", "offtopic") for part in ("tune", "test")},
    **{f"docs_{part}": ("docs", ROOT / "docs" / part) for part in ("tune", "test")},
}


def _notes(index: str) -> Path:
    return FX / "notes" if index == "fx" else INDEXES[index] / "notes"


def _settings(index: str):  # noqa: ANN202
    from groove.config import load_settings
    return load_settings(None, kb_path=_notes(index), index_path=INDEXES[index] / "index.sqlite")


async def rows() -> None:
    from groove.app import eval_once
    from groove.evaluate.report import to_json

    (ROOT / "rows").mkdir(exist_ok=True)
    for name, (index, source) in SETS.items():
        res = to_json(await eval_once(_settings(index), source, retriever="hybrid", record=False))
        (ROOT / "rows" / f"{name}.json").write_text(json.dumps(res["queries"], ensure_ascii=False))
        print(json.dumps({"set": name, "queries": len(res["queries"]),
                          **{k: v for k, v in res["metrics"].items() if k.startswith("off_topic")}}), flush=True)


# --- synthetic-query makers ------------------------------------------------------------------------------

_SENT = re.compile(r"(?<=[.!?。！？])\s*")


def _clean(text: str) -> str:
    """Without fenced code, code spans and URLs, then without markup."""
    from groove.search.offtopic import _MARKUP
    t = re.sub(r"```.*?```", " ", text, flags=re.S)
    t = re.sub(r"`[^`]*`", " ", t)
    t = re.sub(r"<?https?://\S+>?", " ", t)
    return " ".join(_MARKUP.sub(" ", t).split())


def _cut(s: str) -> str:
    words = s.split(" ")
    return " ".join(words[:20]) if len(words) > 1 and sum(map(len, words)) / len(words) < 15 else s[:60]


def _sentences(text: str) -> list[str]:
    c = _clean(text)
    return [p.strip() for p in _SENT.split(c) if len(p.strip()) >= 8] or [c]


def _window(n_words: int, n_chars: int) -> Callable[[str, int], str]:
    def make(text: str, seed: int) -> str:
        t = _clean(text)
        words = t.split(" ")
        if len(words) >= n_words and sum(map(len, words)) / len(words) < 15:
            start = seed % max(1, len(words) - n_words + 1)
            return " ".join(words[start:start + n_words])
        start = seed % max(1, len(t) - n_chars + 1)
        return t[start:start + n_chars]
    return make


def makers() -> dict[str, Callable[[str, int], str]]:
    from groove.search import offtopic
    return {"w12": offtopic.synthetic_query, "w12_clean": _window(12, 40), "w6_clean": _window(6, 20),
            "first_sentence": lambda text, seed: _cut(_sentences(text)[0]),
            "sentence": lambda text, seed: _cut(_sentences(text)[seed % len(_sentences(text))])}


async def refs() -> None:
    from groove.app import Index
    from groove.search import offtopic
    from groove.search.retrievers import SqliteSearchReads

    out: dict[str, Any] = {}
    today = offtopic.synthetic_query
    try:
        for index in INDEXES:
            async with Index.open(_settings(index), readonly=True) as idx:
                async with idx.reading() as conn:
                    model, size, _ = await SqliteSearchReads(conn, None, None).calibration_state()
                for name, make in makers().items():
                    offtopic.synthetic_query = make  # the one the calibration calls
                    idx.searcher.calibration = None
                    cal = await idx.searcher.calibration_for(idx.reading, (model, size, None))  # measured, not stored
                    out[f"{index}:{name}"] = cal.to_dict() if cal else None
                    print(json.dumps({"index": index, "maker": name, **(cal.to_dict() if cal else {})}), flush=True)
    finally:
        offtopic.synthetic_query = today
    (ROOT / "refs.json").write_text(json.dumps(out, indent=1))


async def perlang(k: int = 128) -> None:
    from groove.app import Index
    from groove.search import language, offtopic
    from groove.search.pipeline import _as_reading

    for index in INDEXES:
        async with Index.open(_settings(index), readonly=True) as idx:
            se = idx.searcher
            reading = _as_reading(idx.reading, se.vectors, se.quality.floor())
            async with reading() as store:
                passages = await store.calibration_passages(k)
            queries = [offtopic.synthetic_query(t, c) for c, _, t in passages]
            vectors = [await se.embed_query(q) for q in queries]
            measured = []
            async with reading() as store:
                for (_, doc, _), q, v in zip(passages, queries, vectors):
                    near = [(c, 1 - d * d / 2) for c, d in await store.vector_scored(v, offtopic.CALIBRATION_DEPTH, None, None)]
                    if near:
                        docs = await store.chunk_docs([c for c, _ in near])
                        measured.append((language.is_cjk_text(q), near[0][1],
                                         next((s for c, s in near if docs.get(c) != doc), None)))
        for side, sel in (("all 64", measured[:64]), (f"all {k}", measured),
                          ("cjk", [m for m in measured if m[0]]), ("latin", [m for m in measured if not m[0]])):
            u = [m[2] for m in sel if m[2] is not None]
            print(json.dumps({"index": index, "side": side, "n": len(sel),
                              "answered": round(statistics.median([m[1] for m in sel]), 5) if sel else None,
                              "unanswered": round(statistics.median(u), 5) if u else None}))


# --- scoring again ---------------------------------------------------------------------------------------

def _lang(name: str, r: dict, docs_lang: dict[str, str]) -> str:
    if name.startswith("docs"):
        return docs_lang[r["id"]]
    if name.startswith("fx"):
        from groove.search.language import is_cjk_text
        return "ja" if is_cjk_text(r["query"]) else "en"
    return "ja" if "ja" in name else "en"


def _placed(f: dict, old: dict, new: dict | None, fixed: float | None) -> dict:
    """The row's features on other references (`new`), or on one scale for every index (`fixed`)."""
    f = dict(f)
    if f.get("vector_position") is None or (fixed is not None and f.get("scale") == "centred"):
        return f
    a, u = ("answered_centred", "unanswered_centred") if f.get("scale") == "centred" else ("answered", "unanswered")
    was = old[a] - old[u]
    top = f["vector_position"] * was + old[u]
    ref = old if new is None else new
    scale = fixed if fixed is not None else ref[a] - ref[u]
    f["vector_position"] = (top - ref[u]) / scale
    if f.get("vector_gap") is not None:
        f["vector_gap"] = f["vector_gap"] * was / scale
    return f


def score(makers_: list[str], fixed: list[float]) -> None:
    from groove.search import offtopic

    refs_ = json.loads((ROOT / "refs.json").read_text())
    docs_lang = {}
    for part in ("tune", "test"):
        with open(ROOT / "docs" / part / "queries.jsonl", encoding="utf-8") as f:
            docs_lang.update({r["_id"]: r["lang"] for r in map(json.loads, f)})
    runs = [(m, None) for m in makers_] + [("w12", c) for c in fixed]
    for maker, c in runs:
        for name, (index, _) in SETS.items():
            rs = json.loads((ROOT / "rows" / f"{name}.json").read_text())
            if name.startswith("mix"):
                rs = [r for r in rs if not r["id"].startswith("x-")]  # same-language questions only
            old, new = refs_[f"{index}:w12"], refs_[f"{index}:{maker}"]
            line: dict[str, str] = {}
            for lang in ("en", "ja"):
                sel = [r for r in rs if _lang(name, r, docs_lang) == lang]
                flags = [(r["unanswerable"], offtopic.is_off_topic(_placed(r["off_topic_evidence"], old, new, c),
                                                                   has_results=bool(r.get("top")))) for r in sel]
                a = [f for un, f in flags if not un]
                u = [f for un, f in flags if un]
                if a or u:
                    line[lang] = f"answerable {sum(a)}/{len(a)}, unanswerable {sum(u)}/{len(u)}"
            print(json.dumps({"references": maker if c is None else f"fixed scale {c}", "set": name, **line}))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.abstention_scale", description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=("rows", "refs", "score", "perlang"))
    p.add_argument("makers", nargs="*", default=[], help="score: the references to score with (refs.json keys)")
    p.add_argument("--fixed", type=float, nargs="*", default=[], help="score: one scale for every index instead")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if a.step == "rows":
        asyncio.run(rows())
    elif a.step == "refs":
        asyncio.run(refs())
    elif a.step == "perlang":
        asyncio.run(perlang())
    else:
        score(a.makers or ["w12"], a.fixed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
