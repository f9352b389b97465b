"""`groove eval` history: the last runs beside the index, each with a configuration fingerprint.

A run's fingerprint holds everything that changes its numbers besides the
index itself: the model identity, the reranker, the result limit, the
cut-offs, a hash of the golden set, the metric and query-compiler versions,
the retriever and the fusion / MMR / parent settings in effect, and the
quality filter's threshold while it hides chunks. Two runs are
compared only when their fingerprints are equal, so a changed setting never
shows up as a regression (or hides one).

The file is `<index>.eval.jsonl`: one JSON object per line, oldest first,
the last `[eval] history` runs. A run that failed the gate is recorded with
`"regressed": true` and is never a baseline, so running again does not make a
regression pass.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groove.config import QualityFilterSettings, SearchSettings
from groove.evaluate.golden import JudgedQuery
from groove.evaluate.metrics import LOWER_IS_BETTER, METRIC_VERSION
from groove.search.compiler import COMPILER_VERSION


def golden_hash(queries: Sequence[JudgedQuery]) -> str:
    """sha256 of the judged queries as loaded (ids, texts, expected items): the same set, the same hash."""
    rows = [[q.id, q.query, [[e.path, e.heading, e.stem] for e in q.expected]] for q in queries]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def fingerprint(
    *,
    model: str,
    reranker: str | None,
    retriever: str,
    limit: int,
    ks: Sequence[int],
    queries: Sequence[JudgedQuery],
    search: SearchSettings,
    request_options: dict[str, Any] | None = None,
    quality: QualityFilterSettings | None = None,
) -> dict[str, Any]:
    """The configuration a run's numbers depend on; request options override the settings as in search."""
    opts = request_options or {}
    quality = quality or QualityFilterSettings(enabled=False)

    def pick(key: str, default: Any) -> Any:
        return default if opts.get(key) is None else opts[key]

    return {
        "model": model,
        "reranker": reranker,
        "retriever": retriever,
        "limit": limit,
        "ks": list(ks),
        "golden": golden_hash(queries),
        "metric_version": METRIC_VERSION,
        "compiler_version": COMPILER_VERSION,
        "fusion": search.fusion.model_dump(),
        "mmr": {
            "enabled": bool(pick("mmr", search.mmr.enabled)),
            "lambda": pick("mmr_lambda", search.mmr.lambda_),
            "same_doc_penalty": pick("mmr_same_doc_penalty", search.mmr.same_doc_penalty),
        },
        "parent_retriever": {
            "enabled": bool(pick("parent_retriever", search.parent_retriever.enabled)),
            "whole_doc_threshold_tokens": search.parent_retriever.whole_doc_threshold_tokens,
            "max_expanded_tokens": search.parent_retriever.max_expanded_tokens,
        },
        # only when turned off, so the default's fingerprint (and the runs recorded under it) stays as it was
        **({"language_centres": False} if not search.language_centres else {}),
        # only while it hides something (decision 0020): a run without it compares with the runs recorded before it
        **({"quality_filter": {"threshold": quality.threshold}} if quality.enabled and quality.threshold else {}),
        # only when moved from 0 (decision 0017): the runs recorded before the setting existed still compare
        **(
            {"off_topic": {"threshold_offset": search.off_topic.threshold_offset}}
            if search.off_topic.threshold_offset
            else {}
        ),
    }


def differing_fields(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of the fingerprint fields whose values differ (`fusion.rrf_k`, `golden`)."""
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += differing_fields(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}")
    return out


def load(path: Path) -> list[dict[str, Any]]:
    """The runs recorded in a history file, oldest first (`parse`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return parse(text.splitlines())


def parse(lines: Sequence[str]) -> list[dict[str, Any]]:
    """The recorded runs, oldest first; unreadable lines are skipped (a hand-edited file must not stop eval)."""
    runs = []
    for line in lines:
        try:
            run = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(run, dict) and isinstance(run.get("fingerprint"), dict) and isinstance(run.get("metrics"), dict):
            runs.append(run)
    return runs


def line(run: dict[str, Any]) -> str:
    """One run as the history keeps it."""
    return json.dumps(run, ensure_ascii=False)


def deltas(current: dict[str, float], base: dict[str, float]) -> dict[str, float]:
    return {k: round(v - base[k], 4) for k, v in current.items() if isinstance(base.get(k), (int, float))}


def compare(
    runs: Sequence[dict[str, Any]], fp: dict[str, Any], metrics: dict[str, float], threshold: float
) -> dict[str, Any]:
    """This run against the history.

    status:
      "no-history"   nothing recorded yet: this run becomes the baseline;
      "changed"      no earlier run has this fingerprint: `differs` names the fields that
                     differ from the latest run, and nothing is compared;
      "ok"           compared with the latest run of the same fingerprint (that did not
                     regress): no metric fell by more than `threshold` (and
                     `off_topic_answerable`, the false alarms, rose by no more);
      "regression"   some did: `regressions` names them.
    `exit_code` is what `--fail-on-regression` exits with: 0, 2 (cannot compare), 0, 1.
    """
    if not runs:
        return {
            "status": "no-history",
            "exit_code": 0,
            "baseline": None,
            "deltas": {},
            "regressions": [],
            "differs": [],
        }
    same = [r for r in runs if r["fingerprint"] == fp and not r.get("regressed")]
    if not same:
        return {
            "status": "changed",
            "exit_code": 2,
            "baseline": None,
            "deltas": {},
            "regressions": [],
            "differs": differing_fields(runs[-1]["fingerprint"], fp),
            "latest_at": runs[-1].get("at"),
        }
    base = same[-1]
    d = deltas(metrics, base["metrics"])
    bad = sorted(k for k, v in d.items() if (v > threshold + 1e-9 if k in LOWER_IS_BETTER else v < -threshold - 1e-9))
    return {
        "status": "regression" if bad else "ok",
        "exit_code": 1 if bad else 0,
        "baseline": {"at": base.get("at"), "metrics": base["metrics"]},
        "deltas": d,
        "regressions": bad,
        "differs": [],
        "threshold": threshold,
    }


def record(
    fp: dict[str, Any], metrics: dict[str, float], *, count: int, source: str, regressed: bool
) -> dict[str, Any]:
    return {
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "fingerprint": fp,
        "metrics": metrics,
        "count": count,
        "source": source,
        "regressed": regressed,
    }
