"""Where `off_topic`'s line sits in each kind of vault, and three ways to move it measured offline
(issue 21, docs/decisions/0017 "a docs vault").

Every query of five held-out sets runs once through groove's real hybrid search (`groove eval`'s rows:
each query's features, score and flag); the index's calibration is then measured again with other
references, and every row is scored again on them without searching again (a row keeps its top cosine
and its gap in cosine units, so any other references place it anew):

    python -m bench.abstention_scale rows      # ROOT/rows/<set>.json, the sets of bench.abstention,
                                               # bench.abstention_docs and tests/fixtures/bilingual/heldout
    python -m bench.abstention_scale refs [w12 ...]  # ROOT/refs.json: references per synthetic-query maker
    python -m bench.abstention_scale score w12 first_sentence sentence w12_clean    # rates per set and language
    python -m bench.abstention_scale score --fixed 0.0127 0.02 0.03                 # one scale for every index
    python -m bench.abstention_scale perlang   # references split by the synthetic query's script
    python -m bench.abstention_scale gaprefs   # ROOT/gaprefs.json: the synthetic queries' standout per index
    python -m bench.abstention_scale gapscore  # the standout placed on each index's own, rates per set
    python -m bench.abstention_scale refit     # the three weight sets fitted again on every tune half at once

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
    from tests.support.oneshot import eval_once
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


async def refs(only: list[str] | None = None) -> None:
    from groove.index import Index
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
                    if only and name not in only:
                        continue
                    offtopic.synthetic_query = make  # the one the calibration calls
                    idx.searcher.calibration = None
                    cal = await idx.searcher.calibration_for(idx.reading, (model, size, None))  # measured, not stored
                    out[f"{index}:{name}"] = cal.to_dict() if cal else None
                    print(json.dumps({"index": index, "maker": name, **(cal.to_dict() if cal else {})}), flush=True)
    finally:
        offtopic.synthetic_query = today
    (ROOT / "refs.json").write_text(json.dumps(out, indent=1))


async def perlang(k: int = 128) -> None:
    from groove.index import Index
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


async def gaprefs() -> None:
    """Per index, the synthetic queries' standout (best score minus the GAP_DEPTH-th, in the scale's own
    units), with their note in the results (`answered`) and left out (`unanswered`), on raw cosines
    and, in a mixed-language index, on the centred scale: the same passages, queries and KNNs as the
    calibration (Searcher._measure_calibration), read one step further."""
    from groove.index import Index
    from groove.search import offtopic
    from groove.search.pipeline import _as_reading, centred_vector_leg

    out: dict[str, Any] = {}
    g = offtopic.GAP_DEPTH
    for index in INDEXES:
        async with Index.open(_settings(index), readonly=True) as idx:
            se = idx.searcher
            reading = _as_reading(idx.reading, se.vectors, se.quality.floor())
            async with reading() as store:
                model, size, _ = await store.calibration_state()
            centres = await se.centres_for(idx.reading, (model, size, None)) if se.settings.language_centres else None
            async with reading() as store:
                passages = await store.calibration_passages(offtopic.CALIBRATION_QUERIES)
            queries = [offtopic.synthetic_query(t, c) for c, _, t in passages]
            vectors = [await se.embed_query(q) for q in queries]
            gaps: dict[str, list[float]] = {"answered": [], "unanswered": [], "answered_centred": [],
                                            "unanswered_centred": []}
            async with reading() as store:
                for (_, doc, _), text, vec in zip(passages, queries, vectors):
                    if centres is not None:
                        near, weighed, _ = await centred_vector_leg(store, centres, vec, text,
                                                                    offtopic.CALIBRATION_DEPTH, None, None)
                    else:
                        near, weighed = await store.vector_scored(vec, offtopic.CALIBRATION_DEPTH, None, None), []
                    scored = [(c, 1.0 - d * d / 2.0) for c, d in near]
                    docs = await store.chunk_docs(list({c for c, _ in scored + weighed}))
                    for ranked, suffix in ((scored, ""), (weighed, "_centred")):
                        if len(ranked) >= g:
                            gaps["answered" + suffix].append(ranked[0][1] - ranked[g - 1][1])
                        others = [s_ for c, s_ in ranked if docs.get(c) != doc]
                        if len(others) >= g:
                            gaps["unanswered" + suffix].append(others[0] - others[g - 1])
            out[index] = {k: round(statistics.median(v), 5) if len(v) >= 8 else None for k, v in gaps.items()}
            print(json.dumps({"index": index, **out[index]}), flush=True)
    (ROOT / "gaprefs.json").write_text(json.dumps(out, indent=1))


def _gap_placed(f: dict, cal: dict, gref: dict, side: str, shift: float) -> dict:
    """The row's standout less its index's synthetic standout (`side`: answered or unanswered, on the
    row's scale), plus one constant `shift` for every index, in the scale's units."""
    f = dict(f)
    if f.get("vector_gap") is None or f.get("vector_position") is None:
        return f
    centred = f.get("scale") == "centred"
    a, u = ("answered_centred", "unanswered_centred") if centred else ("answered", "unanswered")
    ref = gref.get(side + ("_centred" if centred else ""))
    if ref is None:
        return f
    f["vector_gap"] = f["vector_gap"] - ref / (cal[a] - cal[u]) + shift
    return f


def gapscore(side: str, shifts: list[float]) -> None:
    """Every set's rates per language with the standout placed on its index's own (`_gap_placed`),
    for each `shift`; with no shift, today's rows as they are, for the side-by-side."""
    refs_ = json.loads((ROOT / "refs.json").read_text())
    gref = json.loads((ROOT / "gaprefs.json").read_text())
    docs_lang = _docs_lang()
    for shift in [None, *shifts]:
        for name, (index, _) in SETS.items():
            line = _per_language(name, docs_lang, lambda f: f if shift is None else
                                 _gap_placed(f, refs_[f"{index}:w12"], gref[index], side, shift))
            print(json.dumps({"standout": "today" if shift is None else f"{side} {shift:+g}", "set": name, **line}))


def _docs_lang() -> dict[str, str]:
    docs_lang = {}
    for part in ("tune", "test"):
        with open(ROOT / "docs" / part / "queries.jsonl", encoding="utf-8") as f:
            docs_lang.update({r["_id"]: r["lang"] for r in map(json.loads, f)})
    return docs_lang


def _per_language(name: str, docs_lang: dict[str, str], place: Callable[[dict], dict]) -> dict[str, str]:
    """A set's flag counts per language, each row's features first placed by `place`."""
    from groove.search import offtopic
    rs = _rows(name)
    line: dict[str, str] = {}
    for lang in ("en", "ja"):
        flags = [(r["unanswerable"], offtopic.is_off_topic(place(r["off_topic_evidence"]), has_results=bool(r.get("top"))))
                 for r in rs if _lang(name, r, docs_lang) == lang]
        a = [f for un, f in flags if not un]
        u = [f for un, f in flags if un]
        if a or u:
            line[lang] = f"answerable {sum(a)}/{len(a)}, unanswerable {sum(u)}/{len(u)}"
    return line


def _rows(name: str) -> list[dict]:
    rs = json.loads((ROOT / "rows" / f"{name}.json").read_text())
    if name.startswith("mix"):
        rs = [r for r in rs if not r["id"].startswith("x-")]  # same-language questions only
    return rs


_TODAY_GROUPS = ("cosine", "cjk", "centred")


def _group(f: dict) -> str | None:
    """Which of offtopic's weight sets decides this row (offtopic.weights), None without a position."""
    from groove.search import offtopic
    if f.get("vector_position") is None:
        return None
    w = offtopic.weights(f)
    return {offtopic.COSINE: "cosine", offtopic.COSINE_CJK: "cjk", offtopic.CENTRED: "centred"}[w]


def _rates(weights: dict[str, tuple[float, float, float, float]], part: str) -> dict[str, tuple[int, int, int, int]]:
    """Per set of `part` (fx_golden counts as tune): answerable flagged, answerable, unanswerable
    flagged, unanswerable, with `weights` (group -> evidence, gap, agreement, threshold)."""
    from groove.search import offtopic
    out = {}
    for name in SETS:
        if part not in name and not (part == "tune" and name == "fx_golden"):
            continue
        fa = a = fu = u = 0
        for r in _rows(name):
            f, g = r["off_topic_evidence"], _group(r["off_topic_evidence"])
            if g is None or not r.get("top"):
                flag = offtopic.is_off_topic(f, has_results=bool(r.get("top")))
            else:
                we, wg, wa, th = weights[g]
                flag = (offtopic._clip(f["vector_position"], offtopic.POSITION_RANGE) + we * f["evidence"]
                        + wg * offtopic._clip(f.get("vector_gap") or 0.0, offtopic.GAP_RANGE)
                        + wa * float(f["agreement"])) < th
            if r["unanswerable"]:
                u, fu = u + 1, fu + flag
            else:
                a, fa = a + 1, fa + flag
        out[name] = (fa, a, fu, u)
    return out


def refit() -> None:
    """Each weight set in turn (the others held), on a grid, chosen on every tune half at once: at most
    5% of each set's answerable flagged (one more for 40 or more), the most unanswerable caught on
    average over the sets; then today's and the fitted weights' rates on both halves."""
    from groove.search import offtopic

    def ok_and_catch(w: dict) -> tuple[bool, float]:
        rates = _rates(w, "tune").values()
        ok = all(fa <= max(1, round(0.05 * a)) + (a >= 40) for fa, a, _, _ in rates if a)
        catches = [fu / u for _, _, fu, u in rates if u]
        return ok, sum(catches) / len(catches)

    today = {g: (w.evidence, w.gap, w.agreement, w.threshold) for g, w in
             zip(_TODAY_GROUPS, (offtopic.COSINE, offtopic.COSINE_CJK, offtopic.CENTRED))}
    best = dict(today)
    for g in _TODAY_GROUPS:
        found = []
        for we in (0.0, 1.0, 2.0, 3.0):
            for wg in (0.0, 0.25, 0.5, 1.0):
                for wa in (0.0, 0.5):
                    for th in (x / 20 for x in range(-20, 41)):
                        ok, c = ok_and_catch({**best, g: (we, wg, wa, th)})
                        if ok:
                            found.append((c, (we, wg, wa, th)))
        found.sort(reverse=True)
        print(json.dumps({"group": g, "today": today[g], "today_ok_catch": ok_and_catch(best),
                          "best": found[:3]}))
        if found:
            best[g] = found[0][1]
    for label, w in (("today", today), ("fitted", best)):
        for part in ("tune", "test"):
            print(json.dumps({"weights": label, "part": part, **{k: "{}/{}, {}/{}".format(*v)
                                                                  for k, v in _rates(w, part).items()}}))


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
    refs_ = json.loads((ROOT / "refs.json").read_text())
    docs_lang = _docs_lang()
    runs = [(m, None) for m in makers_] + [("w12", c) for c in fixed]
    for maker, c in runs:
        for name, (index, _) in SETS.items():
            old, new = refs_[f"{index}:w12"], refs_[f"{index}:{maker}"]
            line = _per_language(name, docs_lang, lambda f: _placed(f, old, new, c))
            print(json.dumps({"references": maker if c is None else f"fixed scale {c}", "set": name, **line}))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.abstention_scale", description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=("rows", "refs", "score", "perlang", "gaprefs", "gapscore", "refit"))
    p.add_argument("makers", nargs="*", default=[], help="score: the references to score with (refs.json keys); refs: the makers to measure (all)")
    p.add_argument("--fixed", type=float, nargs="*", default=[], help="score: one scale for every index instead")
    p.add_argument("--side", choices=("answered", "unanswered"), default="unanswered",
                   help="gapscore: which synthetic standout a row's is placed on")
    p.add_argument("--shift", type=float, nargs="*", default=[], help="gapscore: the constants to add back")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if a.step == "rows":
        asyncio.run(rows())
    elif a.step == "refs":
        asyncio.run(refs(a.makers))
    elif a.step == "perlang":
        asyncio.run(perlang())
    elif a.step == "gaprefs":
        asyncio.run(gaprefs())
    elif a.step == "gapscore":
        gapscore(a.side, a.shift)
    elif a.step == "refit":
        refit()
    else:
        score(a.makers or ["w12"], a.fixed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
