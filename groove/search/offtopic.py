"""`off_topic`: the notes most likely do not answer the query (pure; docs/decisions/0017).

A search always returns something, and no one raw score says whether it answers: the top
cosine of an unrelated query over a dense vault can exceed that of a real answer over a sparse
one, and bm25 ranks whatever matches. The flag weighs three things the pipeline already has:

- **vector similarity against the collection's own scale**: the best hit's cosine, placed
  between two references measured on this index with synthetic queries (windows of the notes'
  own passages, embedded as queries): `answered`, the median top cosine of such a query (its
  own passage is in the notes), and `unanswered`, the median top cosine once the query's whole
  note is left out (a question in the notes' domain that they do not answer).
  `vector_position` = (top cosine - unanswered) / (answered - unanswered): about 1 for a query
  like the notes' own passages, 0 for an in-domain question without its note, below 0 for a
  query from elsewhere. The references move with the model, the language and the collection's
  size, which a fixed cosine threshold does not;
- **full-text evidence**: the share of the query's information the best full-text hits contain
  (`run.evidence`, decision 0007), already relative (idf-weighted, 0..1);
- **standout**: how far the best cosine stands above the 10th (`vector_gap`, on the same scale);
- **agreement**: the vector leg's best passage is among the top passages of a full-text leg.

off_topic = vector_position + EVIDENCE_WEIGHT x evidence + GAP_WEIGHT x vector_gap
            + AGREEMENT_WEIGHT x agreement < THRESHOLD,
with the constants measured on the tune halves of JaQuAD and SciFact sets and the bilingual
fixture (decision 0017). Without a calibrated vector leg (full text only, vectors degraded, or
nothing embedded yet) the evidence alone decides: off_topic when it is below FTS_ONLY_THRESHOLD.
An empty result list is off topic. The flag never changes the results or their order.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Sequence

CALIBRATION_QUERIES = 64   # synthetic queries per calibration (one embedding and one KNN each)
CALIBRATION_DEPTH = 20     # neighbours read per synthetic query to find the best one of another note
REUSE_DRIFT = 0.05         # a calibration serves while the vector count moved by at most this share,
REUSE_MIN = 64             # or by this many vectors (a few notes added to a small vault keep its scale)
GAP_DEPTH = 10             # the standout: the best cosine minus the 10th, on the calibrated scale
AGREEMENT_DEPTH = 10       # the vector leg's best passage counts as agreed on within a leg's top 10

# Measured on the tune halves of the JaQuAD and SciFact sets and on the bilingual fixture
# (bench/abstention.py, docs/decisions/0017): the most unanswerable queries flagged with at
# most about 5% of the answerable ones on each.
EVIDENCE_WEIGHT = 2.0
GAP_WEIGHT = 1.0
AGREEMENT_WEIGHT = 0.5
THRESHOLD = 0.45
FTS_ONLY_THRESHOLD = 0.2
POSITION_RANGE = (-3.0, 3.0)  # a far-off query or a quote of a passage says no more beyond these
GAP_RANGE = (-3.0, 6.0)

WINDOW_WORDS = 12          # a synthetic query from spaced text: this many consecutive words
WINDOW_CHARS = 40          # from unspaced (Japanese / Chinese) text: this many characters

_MARKUP = re.compile(r"[#*`>\[\]()|_~]+")


@dataclass(frozen=True)
class Calibration:
    """The index's own similarity scale, measured with `queries` synthetic queries."""

    answered: float      # median top cosine of a synthetic query (its own passage in the notes)
    unanswered: float    # median top cosine with the query's whole note left out
    queries: int
    vectors: int         # vectors in the index when measured (size = max id - removed)
    model: str
    min_quality: float | None = None  # the quality floor searches use by default, measured under (decision 0020)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Calibration":
        floor = d.get("min_quality")
        return cls(answered=float(d["answered"]), unanswered=float(d["unanswered"]), queries=int(d["queries"]),
                   vectors=int(d["vectors"]), model=str(d["model"]),
                   min_quality=float(floor) if floor is not None else None)

    def serves(self, model: str, vectors: int, min_quality: float | None = None) -> bool:
        """Still this index's scale: the same model and quality floor, and the collection grew or shrank by
        at most REUSE_DRIFT of itself or REUSE_MIN vectors, whichever is more."""
        return (model == self.model and min_quality == self.min_quality
                and abs(vectors - self.vectors) <= max(REUSE_DRIFT * self.vectors, REUSE_MIN))


def synthetic_query(text: str, seed: int) -> str:
    """A window of a passage, as a question about it might read: WINDOW_WORDS consecutive words
    of spaced text, WINDOW_CHARS characters of unspaced text, starting at a seeded place."""
    clean = " ".join(_MARKUP.sub(" ", text).split())
    words = clean.split(" ")
    if len(words) >= WINDOW_WORDS and sum(len(w) for w in words) / len(words) < 15:
        start = seed % max(1, len(words) - WINDOW_WORDS + 1)
        return " ".join(words[start:start + WINDOW_WORDS])
    start = seed % max(1, len(clean) - WINDOW_CHARS + 1)
    return clean[start:start + WINDOW_CHARS]


def calibrate(answered: Sequence[float], unanswered: Sequence[float], *, model: str, vectors: int,
              min_quality: float | None = None) -> Calibration | None:
    """The references from the synthetic queries' top cosines (with and without their note);
    None when too few were measured or the two do not separate (a degenerate collection)."""
    if len(answered) < 8 or len(unanswered) < 8:
        return None
    a, u = statistics.median(answered), statistics.median(unanswered)
    if a - u < 1e-3:
        return None
    return Calibration(answered=round(a, 5), unanswered=round(u, 5), queries=len(answered), vectors=vectors, model=model,
                       min_quality=min_quality)


def features(legs: dict[str, Sequence[tuple[int, float]]], evidence: dict[str, float],
             cal: Calibration | None) -> dict[str, Any]:
    """What the decision reads: the vector leg's top cosine, its place on the calibrated scale
    (`vector_position`) and how far it stands above the 10th (`vector_gap`, on the same scale), the
    best full-text evidence, and whether the legs agree on the best passage. `legs` hold
    (chunk id, score) best first, the vector leg's score a cosine."""
    vector = legs.get("vector") or []
    top = float(vector[0][1]) if vector else None
    position = gap = None
    if top is not None and cal is not None:
        scale = cal.answered - cal.unanswered
        position = round((top - cal.unanswered) / scale, 4)
        if len(vector) >= GAP_DEPTH:
            gap = round((top - float(vector[GAP_DEPTH - 1][1])) / scale, 4)
    agreement = False
    if vector:
        best = vector[0][0]
        agreement = any(best in {cid for cid, _ in scored[:AGREEMENT_DEPTH]}
                        for name, scored in legs.items() if name != "vector" and evidence.get(name, 0.0) > 0)
    return {"vector_top": None if top is None else round(top, 5), "vector_position": position,
            "vector_gap": gap, "evidence": round(float(max(evidence.values(), default=0.0)), 4),
            "agreement": agreement}


def _clip(x: float, bounds: tuple[float, float]) -> float:
    return min(max(x, bounds[0]), bounds[1])


def score(f: dict[str, Any]) -> float | None:
    """The combined score (higher: more likely answered); None without a calibrated vector position."""
    if f.get("vector_position") is None:
        return None
    return round(_clip(f["vector_position"], POSITION_RANGE) + EVIDENCE_WEIGHT * f["evidence"]
                 + GAP_WEIGHT * _clip(f.get("vector_gap") or 0.0, GAP_RANGE)
                 + AGREEMENT_WEIGHT * float(f["agreement"]), 4)


def is_off_topic(f: dict[str, Any], *, has_results: bool) -> bool:
    """The decision (module docstring): the combined score below THRESHOLD; without a calibrated
    vector position, the evidence below FTS_ONLY_THRESHOLD; always when nothing was found."""
    if not has_results:
        return True
    s = score(f)
    if s is None:
        return f["evidence"] < FTS_ONLY_THRESHOLD
    return s < THRESHOLD


def thresholds() -> dict[str, float]:
    """The decision's constants, for explain."""
    return {"evidence_weight": EVIDENCE_WEIGHT, "gap_weight": GAP_WEIGHT, "agreement_weight": AGREEMENT_WEIGHT,
            "threshold": THRESHOLD, "fts_only_threshold": FTS_ONLY_THRESHOLD}
