"""What `groove eval` and `groove tune` answer: typed reports, whose JSON is the command's `--format json`.

The JSON is a script interface (docs/evaluation.md): `model_dump()` of these models keeps the keys it
has always had, and tests/test_cli.py pins them. A key that only some answers carry (a judged query's
scores, a history comparison's baseline) is left out of the JSON when it does not apply, as before.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer


class _Report(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class QueryRow(_Report):
    """One judged query of an eval run: its first ranks and scores (answerable ones) and its flags."""

    id: str
    query: str
    unanswerable: bool
    ranks: list[int | None] | None = Field(
        None, description="the rank of each expected item's first hit (null: not in the results)"
    )
    recall_at_10: float | None = Field(None, alias="recall@10")
    rr: float | None = None
    ndcg_at_10: float | None = Field(None, alias="ndcg@10")
    top: list[str] = Field(default_factory=list, description="the paths of the first three hits")
    low_confidence: bool = False
    off_topic: bool = False
    off_topic_evidence: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _json(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if self.unanswerable:  # scored only by its off_topic flag: no ranks, no scores
            for key in ("ranks", "recall@10", "recall_at_10", "rr", "ndcg@10", "ndcg_at_10"):
                out.pop(key, None)
        return out


class Confidence(_Report):
    """Does `low_confidence` mean something: top-1 accuracy of flagged against unflagged queries."""

    flagged_share: float
    top1_flagged: float | None
    top1_unflagged: float | None


class Leak(_Report):
    """A judged query that a note quotes verbatim (its score overstates quality)."""

    id: str
    query: str
    paths: list[str]


class Baseline(_Report):
    at: str | None
    metrics: dict[str, float]


class HistoryComparison(_Report):
    """This run against the runs recorded beside the index (groove/evaluate/history.py `compare`)."""

    status: str = Field(description="no-history, changed, ok or regression")
    exit_code: int = Field(description="what --fail-on-regression exits with")
    baseline: Baseline | None = None
    deltas: dict[str, float] = Field(default_factory=dict)
    regressions: list[str] = Field(default_factory=list)
    differs: list[str] = Field(default_factory=list)
    latest_at: str | None = Field(None, description="status changed: when the latest run was")
    threshold: float | None = Field(None, description="status ok / regression: the regression threshold")
    path: str = Field("", description="the history file")
    recorded: bool = False

    @model_serializer(mode="wrap")
    def _json(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if self.status != "changed":
            out.pop("latest_at", None)
        if self.status not in ("ok", "regression"):
            out.pop("threshold", None)
        return out


class EvalRun(_Report):
    """Judged queries through the search pipeline (`Index.evaluate`)."""

    metrics: dict[str, float] = Field(
        description="recall@k, mrr, ndcg@10 over the answerable queries; the abstention rates"
    )
    ks: list[int]
    confidence: Confidence
    answerable: int
    unanswerable: int
    queries: list[QueryRow]
    count: int
    retriever: str


class EvalReport(EvalRun):
    """`groove eval`: a run, where it came from, what a note leaks, and how it compares with the history."""

    index_path: str
    source: str
    leaks: list[Leak]
    history: HistoryComparison
    fingerprint: dict[str, Any] = Field(description="the configuration the run is compared under")


class CrossValidation(_Report):
    """Leave-one-query-out over the fusion grid (groove/evaluate/tune.py `cross_validate`)."""

    best: int
    best_in_sample: float
    current: float
    heldout: float
    gain: float
    interval: list[float]
    wins: int
    losses: int
    sign_p: float
    folds_choosing_best: int
    queries: int


class OffTopicTuning(_Report):
    """Where the golden set puts `[search.off_topic] threshold_offset` (groove/evaluate/offtopic_offset.py)."""

    answerable: int
    unanswerable: int
    current_offset: float
    offset: float = Field(
        description="the largest offset flagging at most 5% of the answerable queries, on all of them"
    )
    now: dict[str, float | None] = Field(description="answerable and unanswerable flagged with the current offset")
    held_out: dict[str, float | None] = Field(
        description="the same, each query flagged by the offset chosen on the others"
    )
    recommend: bool
    reason: str
    block: str | None = Field(description="a paste-ready [search.off_topic] table when recommended")


class TuneReport(_Report):
    """`groove tune`: every fusion setting scored offline, and whether to change the current one."""

    metric: str
    settings_tried: int
    cv: CrossValidation
    current: dict[str, Any] = Field(description="the [search.fusion] settings in effect")
    best: dict[str, Any] = Field(description="the best setting on all queries")
    recommend: bool
    block: str | None = Field(description="a paste-ready [search.fusion] table when recommended")
    source: str
    index_path: str
    count: int
    skipped: list[str]
    limit: int
    refine_stages_ignored: list[str]
    off_topic: OffTopicTuning | None = Field(
        None, description="with unanswerable queries in the set: the off_topic offset"
    )


def to_json(report: BaseModel) -> dict[str, Any]:
    """A report as its command prints it with `--format json`."""
    return report.model_dump(mode="json", by_alias=True)


__all__ = [
    "Baseline",
    "Confidence",
    "CrossValidation",
    "EvalReport",
    "EvalRun",
    "HistoryComparison",
    "Leak",
    "OffTopicTuning",
    "QueryRow",
    "TuneReport",
    "to_json",
]
