"""The `[search.off_topic] threshold_offset` a golden set supports (`groove tune`, decision 0017). Pure.

The flag's threshold is fixed across indexes and fits notes like encyclopaedia paragraphs and paper
abstracts; in a vault of short how-to pages the same score sits higher for every question, and the flag
caught one unanswerable question in five (docs/decisions/0017, "a docs vault"). A vault owner who has
judged queries of both kinds (`expected: []` for the unanswerable ones) can move the line: the offset
is the largest that flags at most MAX_ANSWERABLE_FLAGGED of the answerable queries, and it is judged by
leave-one-query-out cross-validation (each query flagged or not by the offset chosen on the others),
as `groove tune` judges a fusion setting.

A query is (unanswerable, margin, flagged now): `margin` is the combined score minus its scale's
threshold (search/offtopic.py `margin`; flagged when margin < offset), None when the search had no
calibrated vector position (then the flag reads the full-text evidence, and no offset moves it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from groove.evaluate.metrics import flagged_shares

MAX_ANSWERABLE_FLAGGED = 0.05  # the bound on false alarms
MIN_ANSWERABLE = 10  # fewer: 5% of them is no query at all, and the offset is noise
MIN_UNANSWERABLE = 5
OFFSET_RANGE = (-3.0, 3.0)  # the setting's bounds (config.OffTopicSettings)
MIN_CHANGE = 0.05  # a smaller move is not worth a line in groove.toml
MIN_GAIN = 0.05  # nor is catching fewer than 5 more unanswerable queries in 100

Row = tuple[bool, float | None, bool]


def choose(answerable_margins: Sequence[float], max_flagged: float = MAX_ANSWERABLE_FLAGGED) -> float:
    """The largest offset, in hundredths, that flags at most `max_flagged` of these answerable queries."""
    a = sorted(answerable_margins)
    allowed = math.floor(max_flagged * len(a) + 1e-9)
    if not a or allowed >= len(a):
        return OFFSET_RANGE[1]
    return min(max(math.floor(a[allowed] * 100) / 100, OFFSET_RANGE[0]), OFFSET_RANGE[1])


def rates(rows: Sequence[Row], flagged: Sequence[bool]) -> tuple[float | None, float | None]:
    """(share of answerable flagged, share of unanswerable flagged), as `groove eval` counts them
    (unrounded); None for a kind with no query."""
    return flagged_shares([(un, f) for (un, _, _), f in zip(rows, flagged, strict=True)])


def _flag(row: Row, offset: float) -> bool:
    _, m, now = row
    return now if m is None else m < offset


def cross_validate(rows: Sequence[Row]) -> tuple[float | None, float | None]:
    """The two rates when each query is flagged by the offset chosen on all the others."""
    margins = [(i, m) for i, (un, m, _) in enumerate(rows) if not un and m is not None]
    flagged = []
    for i, row in enumerate(rows):
        offset = choose([m for j, m in margins if j != i])
        flagged.append(_flag(row, offset))
    return rates(rows, flagged)


@dataclass(frozen=True)
class Proposal:
    offset: float  # chosen on every query
    now: tuple[float | None, float | None]
    held_out: tuple[float | None, float | None]
    recommend: bool
    reason: str


def propose(rows: Sequence[Row], current: float) -> Proposal | None:
    """The offset these judged queries support, and whether to move to it; None without unanswerable queries."""
    n_ans = sum(1 for un, _, _ in rows if not un)
    n_un = sum(1 for un, _, _ in rows if un)
    if n_un == 0:
        return None
    now = rates(rows, [f for _, _, f in rows])
    offset = choose([m for un, m, _ in rows if not un and m is not None])
    held = cross_validate(rows)
    if n_ans < MIN_ANSWERABLE or n_un < MIN_UNANSWERABLE:
        return Proposal(
            offset,
            now,
            held,
            False,
            f"needs at least {MIN_ANSWERABLE} answerable and "
            f"{MIN_UNANSWERABLE} unanswerable queries (has {n_ans} and {n_un})",
        )
    (ans_now, un_now), (ans_held, un_held) = now, held
    assert ans_now is not None and un_now is not None and ans_held is not None and un_held is not None
    if abs(offset - current) < MIN_CHANGE:
        return Proposal(offset, now, held, False, "the current offset is already where these queries put it")
    # held out, each answerable query is flagged by a line drawn on the others: one query over the bound
    # is the granularity of leave-one-out, not a worse line
    bound = max(MAX_ANSWERABLE_FLAGGED, ans_now) + 1 / n_ans
    fewer_false = ans_now > MAX_ANSWERABLE_FLAGGED and ans_held < ans_now
    more_caught = un_held >= un_now + MIN_GAIN and ans_held <= bound
    if fewer_false or more_caught:
        return Proposal(
            offset,
            now,
            held,
            True,
            "held out, it flags "
            + (
                f"fewer answerable queries ({ans_held:.1%} against {ans_now:.1%})"
                if fewer_false
                else f"more unanswerable queries ({un_held:.1%} against {un_now:.1%}), answerable {ans_held:.1%}"
            ),
        )
    if ans_held > bound:
        why = f"held out, it flags {ans_held:.1%} of the answerable queries"
    elif un_held > un_now:
        why = (
            f"held out, it catches {100 * (un_held - un_now):.1f} more unanswerable queries in 100; "
            f"{100 * MIN_GAIN:.0f} make a move"
        )
    else:
        why = f"held out, it catches no more unanswerable queries ({un_held:.1%} against {un_now:.1%})"
    return Proposal(offset, now, held, False, why)


def block(offset: float) -> str:
    return f"[search.off_topic]\nthreshold_offset = {offset:.2f}\n"
