"""Who a request comes from, a per-peer backoff for failed bearer tokens, and a bound on them all together.

A peer is the client's IP address as the socket sees it (`scope["client"]`), never a header a client
could write (X-Forwarded-For). Every per-client limit of the HTTP front end (event streams, trickling
bodies, failed tokens) is kept per peer; on a loopback bind every local client is the same peer. A
guesser with many addresses (an IPv6 /64, 127.0.0.0/8) gets each address's free failures, so failures are
also bounded across every peer (`GlobalFailures`), without ever slowing a right token.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import Scope

UNKNOWN_PEER = "unknown"


def peer_of(scope: Scope) -> str:
    """The client's address (without its port); "unknown" when the server was not told (a test harness)."""
    client = scope.get("client")
    return str(client[0]) if client else UNKNOWN_PEER


@dataclass
class _Failures:
    count: int = 0
    locked_until: float = 0.0
    last: float = 0.0


class FailureBackoff:
    """Failed attempts per peer, and how long that peer must wait before its next attempt is even checked.

    The first `free` failures cost nothing (a typo); each one after that locks the peer out for
    `base_s`, then twice as long, ... at most `max_s`. A success, or `forget_s` without a failure, clears
    the peer. At most `max_peers` are remembered (the least recently failed are forgotten first), so a
    flood of addresses cannot grow the table.
    """

    def __init__(
        self,
        *,
        free: int = 5,
        base_s: float = 1.0,
        max_s: float = 60.0,
        forget_s: float = 600.0,
        max_peers: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.free, self.base_s, self.max_s, self.forget_s, self.max_peers = free, base_s, max_s, forget_s, max_peers
        self.clock = clock
        self._peers: OrderedDict[str, _Failures] = OrderedDict()

    def wait_s(self, peer: str) -> float:
        """Seconds until `peer` may try again (0: now)."""
        entry = self._peers.get(peer)
        if entry is None:
            return 0.0
        now = self.clock()
        if now - entry.last > self.forget_s:
            del self._peers[peer]
            return 0.0
        return max(0.0, entry.locked_until - now)

    def failed(self, peer: str) -> float:
        """Count a failure; returns the lockout it starts (0 while still within the free ones)."""
        now = self.clock()
        entry = self._peers.pop(peer, None) or _Failures()
        if now - entry.last > self.forget_s:
            entry = _Failures()
        entry.count += 1
        entry.last = now
        over = entry.count - self.free
        lockout = min(self.max_s, self.base_s * 2 ** (over - 1)) if over > 0 else 0.0
        entry.locked_until = now + lockout
        self._peers[peer] = entry
        while len(self._peers) > self.max_peers:
            self._peers.popitem(last=False)
        return lockout

    def succeeded(self, peer: str) -> None:
        self._peers.pop(peer, None)


class GlobalFailures:
    """Failed tokens from every peer together. Past `free_per_s` a second (over the last `window_s`), the limiter
    trips for `calm_s` (renewed by each failure meanwhile): each failure's answer then waits its turn, answers
    leaving at `pace_per_s` a second at most (a wait of at most `max_delay_s`, so the connection cap bounds the
    rest), and is a 429 with Retry-After. It counts and delays failures only: a right token is checked and
    answered at once, whatever the limiter's state, so a flood of guesses never locks the owner out."""

    def __init__(
        self,
        *,
        free_per_s: float = 10.0,
        window_s: float = 2.0,
        pace_per_s: float = 5.0,
        max_delay_s: float = 10.0,
        calm_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.window_s, self.pace_per_s, self.max_delay_s, self.calm_s = window_s, pace_per_s, max_delay_s, calm_s
        self.clock = clock
        self._free = max(1, int(free_per_s * window_s))  # failures let through per window
        self._recent: deque[float] = deque(maxlen=self._free + 1)  # the last ones only: O(1) however many come
        self._tripped_until = 0.0
        self._next_answer = 0.0

    def tripped(self) -> bool:
        return self.clock() < self._tripped_until

    def retry_after_s(self) -> int:
        """Seconds until failures are answered at once again (at least 1)."""
        return max(1, math.ceil(self._tripped_until - self.clock()))

    def failed(self) -> float:
        """Count a failure; the seconds its answer must wait (0 while under the bound)."""
        now = self.clock()
        self._recent.append(now)
        over = len(self._recent) > self._free and now - self._recent[0] <= self.window_s
        if over or now < self._tripped_until:
            self._tripped_until = now + self.calm_s
        if now >= self._tripped_until:
            return 0.0
        self._next_answer = min(max(self._next_answer, now) + 1.0 / self.pace_per_s, now + self.max_delay_s)
        return self._next_answer - now


__all__ = ["FailureBackoff", "GlobalFailures", "UNKNOWN_PEER", "peer_of"]
