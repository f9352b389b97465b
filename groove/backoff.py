"""The one backoff formula: the wait before attempt `attempt + 1` after `attempt` failures in a row.

`first`, `2 x first`, `4 x first` ... never over `cap`. The daemon's tasks (a failed write, a dead
watcher), the embedding queue's set-aside texts and the remote embedder's retries all wait this long
(the remote embedder adds jitter on top). Like `errors` and `logs`, it sits beside every room.
"""

from __future__ import annotations


def doubling(failures: int, first: float, cap: float) -> float:
    """Seconds to wait after `failures` failures in a row (1 -> first; each more doubles it; at most cap)."""
    return min(cap, first * 2 ** max(0, failures - 1))


__all__ = ["doubling"]
