"""Who a request comes from, and a per-peer backoff for failed bearer tokens.

A peer is the client's IP address as the socket sees it (`scope["client"]`), never a header a client
could write (X-Forwarded-For). Every per-client limit of the HTTP front end (event streams, trickling
bodies, failed tokens) is kept per peer; on a loopback bind every local client is the same peer.
"""

from __future__ import annotations

import time
from collections import OrderedDict
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


__all__ = ["FailureBackoff", "UNKNOWN_PEER", "peer_of"]
