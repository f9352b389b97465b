"""The analysis half of bench/abstention_features.py: per-feature AUROCs on the tune halves, small
combinations fitted on the tune halves (threshold: at most 5% of the answerable flagged on each tune
half and on the fixture's answerable queries), and their rates on the test halves next to today's."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

TODAY = ("vector_position", "evidence", "vector_gap", "agreement")
MAX_FALSE = 0.05


def load(base: Path) -> dict[str, list[dict]]:
    sets = {}
    for name, path in (("ja_tune", "ja/features.tune.jsonl"), ("ja_test", "ja/features.test.jsonl"),
                       ("en_tune", "en/features.tune.jsonl"), ("en_test", "en/features.test.jsonl"),
                       ("fx", "fx/features.all.jsonl")):
        with open(base / path, encoding="utf-8") as f:
            sets[name] = [json.loads(line) for line in f if line.strip()]
    return sets


def val(r: dict, k: str) -> float:
    v = r["f"].get(k)
    if v is None:
        return -9.0 if k in ("score", "vector_position") else 0.0
    return float(v)


def auroc(ans: list[float], un: list[float]) -> float:
    """P(an answerable query scores above an unanswerable one), ties half."""
    a, u = np.asarray(ans)[:, None], np.asarray(un)[None, :]
    return float(((a > u).sum() + 0.5 * (a == u).sum()) / (a.size * u.size))


def split(rows: list[dict], kind: str | None = None) -> tuple[list[dict], list[dict]]:
    ans = [r for r in rows if not r["unanswerable"]]
    un = [r for r in rows if r["unanswerable"] and (kind is None or r["kind"] == kind)]
    return ans, un


def feature_table(sets: dict, feats: list[str]) -> list[tuple]:
    out = []
    for k in feats:
        row = [k]
        for name, kind in (("ja_tune", None), ("ja_tune", "held_out"), ("en_tune", None), ("en_tune", "held_out"),
                           ("fx", None)):
            ans, un = split(sets[name], kind)
            row.append(auroc([val(r, k) for r in ans], [val(r, k) for r in un]))
        out.append(tuple(row))
    return out


def rates(scores_ans: np.ndarray, scores_un: np.ndarray, thr: float) -> tuple[float, float]:
    return float((scores_ans < thr).mean()), float((scores_un < thr).mean())


def threshold_for(score_sets: list[np.ndarray]) -> float:
    """The highest threshold (flag: score < threshold) with at most MAX_FALSE of each answerable set flagged."""
    best = np.inf
    for s in score_sets:
        s = np.sort(s)
        allowed = int(np.floor(MAX_FALSE * len(s) + 1e-9))  # this many may fall below
        best = min(best, s[allowed])  # flag < s[allowed]: exactly `allowed` (ties aside) flagged
    return float(best)


class Model:
    def __init__(self, feats: list[str], w: np.ndarray, b: float, mu: np.ndarray, sd: np.ndarray, clip: float = 4.0):
        self.feats, self.w, self.b, self.mu, self.sd, self.clip = feats, w, b, mu, sd, clip

    def X(self, rows: list[dict]) -> np.ndarray:
        x = np.array([[val(r, k) for k in self.feats] for r in rows], dtype=float)
        return np.clip((x - self.mu) / self.sd, -self.clip, self.clip)

    def score(self, rows: list[dict]) -> np.ndarray:
        return self.X(rows) @ self.w + self.b

    def raw_weights(self) -> dict:
        """The same score in the raw features' units (before the clip): sum w_k x_k + c."""
        w = self.w / self.sd
        return {"weights": dict(zip(self.feats, np.round(w, 4).tolist())),
                "intercept": round(float(self.b - (self.w * self.mu / self.sd).sum()), 4),
                "clip_note": f"standardised features clipped at +-{self.clip} sd"}


def fit(feats: list[str], train: list[tuple[list[dict], float]], C: float = 1.0) -> Model:
    from sklearn.linear_model import LogisticRegression
    rows = [r for rs, _ in train for r in rs]
    x = np.array([[val(r, k) for k in feats] for r in rows], dtype=float)
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
    m = Model(feats, np.zeros(len(feats)), 0.0, mu, sd)
    X = m.X(rows)
    y = np.array([0 if r["unanswerable"] else 1 for r in rows])
    # each set weighted equally, classes balanced within it
    sw = []
    for rs, weight in train:
        na = sum(1 for r in rs if not r["unanswerable"])
        nu = len(rs) - na
        sw += [weight / (2 * (na if not r["unanswerable"] else nu)) for r in rs]
    lr = LogisticRegression(C=C, max_iter=2000)
    lr.fit(X, y, sample_weight=np.array(sw) * len(rows))
    m.w, m.b = lr.coef_[0], float(lr.intercept_[0])
    return m


def by_kind(s, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The scores of the answerable rows and of the unanswerable ones."""
    return (np.array([x for x, r in zip(s, rows) if not r["unanswerable"]]),
            np.array([x for x, r in zip(s, rows) if r["unanswerable"]]))


def evaluate(score_fn, sets: dict, thr: float) -> dict:
    out = {}
    for name in ("ja_tune", "en_tune", "fx", "ja_test", "en_test"):
        rows = sets[name]
        s = score_fn(rows)
        ans, un = by_kind(s, rows)
        fa, fu = rates(ans, un, thr)
        d = {"answerable": round(fa, 3), "unanswerable": round(fu, 3),
             "auroc": round(auroc(ans.tolist(), un.tolist()), 3)}
        for kind in ("held_out", "cross_language"):
            k = np.array([x for x, r in zip(s, rows) if r["kind"] == kind])
            if len(k):
                d[kind] = round(float((k < thr).mean()), 3)
                d[f"auroc_{kind}"] = round(auroc(ans.tolist(), k.tolist()), 3)
        out[name] = d
    return out


def today_score(rows: list[dict]) -> np.ndarray:
    return np.array([val(r, "score") for r in rows])


def today_flag_rates(sets: dict) -> dict:
    out = {}
    for name, rows in sets.items():
        ans, un = split(rows)
        d = {"answerable": round(float(np.mean([r["f"]["flag"] for r in ans])), 3),
             "unanswerable": round(float(np.mean([r["f"]["flag"] for r in un])), 3),
             "auroc": round(auroc([val(r, "score") for r in ans], [val(r, "score") for r in un]), 3),
             "n": [len(ans), len(un)]}
        for kind in ("held_out", "cross_language"):
            k = [r for r in rows if r["kind"] == kind]
            if k:
                d[kind] = round(float(np.mean([r["f"]["flag"] for r in k])), 3)
                d[f"auroc_{kind}"] = round(auroc([val(r, "score") for r in ans], [val(r, "score") for r in k]), 3)
        out[name] = d
    return out


def recall_at_constraint(model: Model, sets: dict, tune_sets=("ja_tune", "en_tune", "fx")) -> tuple[float, float]:
    thr = threshold_for([model.score(split(sets[n])[0]) for n in tune_sets])
    rec = [rates(model.score(split(sets[n])[0]), model.score(split(sets[n])[1]), thr)[1]
           for n in ("ja_tune", "en_tune")]
    return thr, min(rec)


def analyze(base: Path) -> None:
    sets = load(base)
    feats = [k for k, v in sets["ja_tune"][0]["f"].items() if k not in ("flag", "search_ms") and not isinstance(v, str)]
    print("== today's flag, as the pipeline decided it (this run) ==")
    print(json.dumps(today_flag_rates(sets), indent=None))
    print("\n== AUROC (answerable above unanswerable), tune halves; held = held-out only ==")
    print(f"{'feature':22s} {'ja':>6s} {'ja held':>8s} {'en':>6s} {'en held':>8s} {'fixture':>8s}")
    table = feature_table(sets, feats)
    for row in sorted(table, key=lambda r: -(r[3] + r[4])):
        print(f"{row[0]:22s} " + " ".join(f"{x:8.3f}" for x in row[1:]))

    train = [(sets["ja_tune"], 1.0), (sets["en_tune"], 1.0), (sets["fx"], 1.0)]
    print("\n== today's score with its threshold re-chosen on the tune halves + fixture (same rule as below) ==")
    thr0 = threshold_for([today_score(split(sets[n])[0]) for n in ("ja_tune", "en_tune", "fx")])
    print("threshold", round(thr0, 4), json.dumps(evaluate(today_score, sets, thr0)))

    print("\n== logistic fits (ja tune + en tune + fixture, each set weighted equally) ==")
    base_feats = list(TODAY)
    m0 = fit(base_feats, train)
    thr, rec = recall_at_constraint(m0, sets)
    print("today's 4 features refit: min tune recall", round(rec, 3))
    candidates = [k for k in feats if k not in TODAY and k not in ("score", "vector_top", "qlen_neg")]
    # one and two new features on top of today's four
    results = []
    for extra in [(c,) for c in candidates] + list(itertools.combinations(candidates, 2)):
        m = fit(base_feats + list(extra), train)
        thr, rec = recall_at_constraint(m, sets)
        results.append((rec, extra, m, thr))
    results.sort(key=lambda x: -x[0])
    print("best single/pair additions by min(ja tune, en tune) recall at the tune constraint:")
    for rec, extra, m, thr in results[:12]:
        print(f"  {rec:.3f}  + {', '.join(extra)}")
    # also: new features alone (without today's), pairs/triples from the top AUROC ones
    alone = []
    top_new = [r[0] for r in sorted(table, key=lambda r: -(r[3] + r[5])) if r[0] in candidates][:10]
    for combo in list(itertools.combinations(top_new, 2)) + list(itertools.combinations(top_new, 3)):
        m = fit(list(combo), train)
        thr, rec = recall_at_constraint(m, sets)
        alone.append((rec, combo, m, thr))
    alone.sort(key=lambda x: -x[0])
    print("best combinations of new features only (2-3):")
    for rec, combo, m, thr in alone[:6]:
        print(f"  {rec:.3f}  {', '.join(combo)}")

    print("\n== the chosen ones, on the TEST halves ==")
    show = [("today (pipeline flag)", None, None)]
    show.append(("today's 4 refit", m0, recall_at_constraint(m0, sets)[0]))
    for rec, extra, m, thr in results[:3]:
        show.append(("today + " + ", ".join(extra), m, thr))
    for rec, combo, m, thr in alone[:2]:
        show.append(("new only: " + ", ".join(combo), m, thr))
    for label, m, thr in show:
        if m is None:
            print(f"-- {label}:", json.dumps({k: v for k, v in today_flag_rates(sets).items()}))
            continue
        print(f"-- {label}: threshold {thr:.4f} ; {json.dumps(m.raw_weights())}")
        print("   ", json.dumps(evaluate(m.score, sets, thr)))


HAND = [
    ["csls_top1", "evidence", "vector_gap", "agreement"],
    ["csls_max", "evidence", "vector_gap", "agreement"],
    ["vector_position", "csls_top1", "evidence", "vector_gap", "agreement"],
    ["csls_top1", "qp_top1", "evidence", "vector_gap"],
    ["csls_top1", "evidence", "vcov3", "vector_gap"],
    ["csls_top1", "qp_revrank_log", "evidence", "vector_gap", "agreement"],
    ["vector_position", "evidence", "vector_gap", "agreement", "v_docz"],
    ["csls_top1", "v_minus_rp", "evidence", "vector_gap", "agreement"],
]


def analyze_more(base: Path) -> None:
    """Hand-picked sets (today's structure with the vector term swapped for a hub-corrected one), and
    every pair addition ranked with the fixture's unanswerable recall as a guard (>= 0.5)."""
    sets = load(base)
    train = [(sets["ja_tune"], 1.0), (sets["en_tune"], 1.0), (sets["fx"], 1.0)]
    for feats in HAND:
        m = fit(feats, train)
        thr, rec = recall_at_constraint(m, sets)
        print(f"-- {', '.join(feats)}: min tune recall {rec:.3f}; threshold {thr:.4f}; {json.dumps(m.raw_weights())}")
        print("   ", json.dumps(evaluate(m.score, sets, thr)))
    feats_all = [k for k, v in sets["ja_tune"][0]["f"].items() if k not in ("flag", "search_ms", "score", "vector_top",
                                                                            "qlen_neg") and not isinstance(v, str)]
    cands = [k for k in feats_all if k not in TODAY]
    res = []
    for extra in [(c,) for c in cands] + list(itertools.combinations(cands, 2)):
        m = fit(list(TODAY) + list(extra), train)
        thr, rec = recall_at_constraint(m, sets)
        s_fx = m.score(sets["fx"])
        fx_un = float(np.mean([x < thr for x, r in zip(s_fx, sets["fx"]) if r["unanswerable"]]))
        if fx_un >= 0.5:
            res.append((rec, extra, m, thr, fx_un))
    res.sort(key=lambda x: -x[0])
    print("\nbest additions to today's four with fixture unanswerable recall >= 0.5 (min ja/en tune recall, fx recall):")
    for rec, extra, m, thr, fx_un in res[:10]:
        print(f"  {rec:.3f} fx {fx_un:.3f} + {', '.join(extra)}")
    for rec, extra, m, thr, fx_un in res[:3]:
        print(f"-- today + {', '.join(extra)}: threshold {thr:.4f}; {json.dumps(m.raw_weights())}")
        print("   ", json.dumps(evaluate(m.score, sets, thr)))


def recall_at_5(ans: np.ndarray, un: np.ndarray) -> float:
    """The share of unanswerable flagged at the best threshold that flags at most 5% of these answerable
    (an oracle threshold on the same half: the ceiling a score allows, threshold noise aside)."""
    thr = threshold_for([ans])
    return float((un < thr).mean())


CEILING = [
    ["score"],
    list(TODAY),
    ["csls_max", "evidence", "vector_gap", "agreement"],
    ["csls_top1", "qp_top1", "evidence", "vector_gap"],
    ["vector_position", "evidence", "vector_gap", "agreement", "v_docz", "distinct_notes_neg"],
    ["vector_position", "evidence", "vector_gap", "agreement", "qp_revrank_log", "vcov3"],
    ["vector_position", "evidence", "vector_gap", "agreement", "fts_z_max", "overlap10"],
]


def ceilings(base: Path) -> None:
    sets = load(base)
    train = [(sets["ja_tune"], 1.0), (sets["en_tune"], 1.0), (sets["fx"], 1.0)]
    print("recall of unanswerable (and of held-out only) at <= 5% answerable flagged, threshold chosen on the "
          "half itself (oracle), models fitted on the tune halves + fixture:")
    for feats in CEILING:
        fn = (lambda rows: np.array([val(r, "score") for r in rows])) if feats == ["score"] else fit(feats, train).score
        out = {}
        for name in ("ja_tune", "ja_test", "en_tune", "en_test", "fx"):
            rows = sets[name]
            s = fn(rows)
            ans, un = by_kind(s, rows)
            held = np.array([x for x, r in zip(s, rows) if r["kind"] == "held_out"])
            out[name] = (round(recall_at_5(ans, un), 3), round(recall_at_5(ans, held), 3) if len(held) else None)
        print(f"  {'+'.join(feats) if feats != ['score'] else 'today score (fixed weights)'}: {json.dumps(out)}")


def beside_score(root: Path, sets: dict[str, list[dict]], features: tuple[str, ...],
                 combos: tuple[tuple[str, ...], ...]) -> None:
    """One candidate signal's rows (`sets`: tune and test, each row today's `score` and the candidate
    `features`) against today's score: each feature's AUROC (all unanswerable / held-out only), then
    today's score plus each combination, fitted on the tune half with its threshold at MAX_FALSE of
    tune's answerable, and the test half's rates (bench/abstention_sae.py, bench/abstention_maxsim.py)."""
    for part, rows in sets.items():
        held = [r for r in rows if r["kind"] != "cross_language"]
        line = {}
        for k in ("score",) + features:
            ans, un = by_kind([val(r, k) for r in rows], rows)
            ans_h, un_h = by_kind([val(r, k) for r in held], held)
            line[k] = f"{auroc(ans.tolist(), un.tolist()):.3f} / {auroc(ans_h.tolist(), un_h.tolist()):.3f}"
        print(json.dumps({"root": str(root), "part": part, "auroc all / held-out only": line}))
    for extra in combos:
        feats = ["score", *extra]
        model = fit(feats, [(sets["tune"], 1.0)])
        thr = threshold_for([by_kind(model.score(sets["tune"]), sets["tune"])[0]])
        ans, un = by_kind(model.score(sets["test"]), sets["test"])
        fa, fu = rates(ans, un, thr)
        held = [r for r in sets["test"] if r["kind"] != "cross_language"]
        print(json.dumps({"root": str(root), "features": "+".join(feats), "test_auroc": round(auroc(ans.tolist(), un.tolist()), 3),
                          "test_answerable_flagged": round(fa, 3), "test_unanswerable_flagged": round(fu, 3),
                          "test_held_out_flagged": round(rates(*by_kind(model.score(held), held), thr)[1], 3)}))
