"""The connection cap and the header timeout, in a uvicorn h11 protocol subclass (`GuardedH11Protocol`).

At most `max_connections` live connections are open (one already closing, its client gone or itself
shed, is on its way out and does not count); past it a new connection makes room by closing one of the
peer address holding the most connections (`make_room`, the pure rule): its oldest connection that has
not sent a request yet, or, when all of its connections are busy and it holds more than the newcomer's
address, its oldest busy one. Another client's connection is never closed for a flood (a connection
accepted while the server was behind once lost to it); when the newcomer's own address is the one
holding the most, the newcomer is closed itself. A connection that has not sent its request headers
within `header_timeout_s` is closed. Both are counted in the storm log, never logged once per connection.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from groove.config import HTTPSettings
from groove.serve.http.storm import StormLog


@dataclass(frozen=True)
class Slot:
    """One open connection as the cap sees it: its peer address, whether it is idle (no request in
    progress) and when it connected or last finished a response (oldest first to go)."""

    peer: str
    idle: bool
    since: float


def make_room(newcomer: Slot, live: list[Slot]) -> int | None:
    """Which of `live` (the other open connections) closes so `newcomer` may stay, or None: the newcomer
    is refused. Always one of the peer address holding the most connections (counting the newcomer), so
    one address flooding the server sheds its own connections, never another client's fresh one: its
    oldest idle connection; when all of them are busy (bodies trickling in, requests in flight) and that
    address holds more than the newcomer's own, its oldest busy one."""
    held: dict[str, int] = {newcomer.peer: 1}
    for slot in live:
        held[slot.peer] = held.get(slot.peer, 0) + 1
    top = max(held, key=lambda p: held[p])
    theirs = [i for i, slot in enumerate(live) if slot.peer == top]
    idle = [i for i in theirs if live[i].idle]
    if idle:
        return min(idle, key=lambda i: live[i].since)
    if theirs and top != newcomer.peer and held[top] > held[newcomer.peer]:
        return min(theirs, key=lambda i: live[i].since)
    return None


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a cap on open connections and a timeout for the request headers.

    Subclassed per server by `guarded_protocol` (class attributes carry the limits and the storm log).
    A connection is idle while it has no request in progress: before its first request's headers are
    complete, or between requests on a kept-alive connection.
    """

    max_connections = 256
    header_timeout_s = 10.0
    storm: StormLog = StormLog("http_connections_shed")

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature
        super().connection_made(transport)
        self._idle_since = time.monotonic()
        self._arm_header_timer()
        # Only live connections count: one already closing (its client hung up, or it was shed) frees its
        # slot within a loop turn, and counting it once refused a client's connection beside it.
        live = [
            c
            for c in self.connections
            if isinstance(c, GuardedH11Protocol) and c is not self and not c.transport.is_closing()
        ]
        if len(live) + 1 > self.max_connections:
            victim = make_room(self._slot(), [c._slot() for c in live])
            if victim is not None:
                shed = live[victim]
                shed._close("idle_closed_at_cap" if shed._idle() else "busy_closed_at_cap")
            else:
                self._close("refused_at_cap")

    def _slot(self) -> Slot:
        return Slot(peer=str(self.client[0]) if self.client else "", idle=self._idle(), since=self._idle_since)

    def _idle(self) -> bool:
        return (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing()

    def _arm_header_timer(self) -> None:
        expected = self.cycle
        self.loop.call_later(self.header_timeout_s, self._header_deadline, expected)

    def _header_deadline(self, expected: Any) -> None:
        # Still the same (finished or absent) request: nothing complete arrived in time.
        if self.cycle is expected and self._idle():
            self._close("header_timeout")

    def _close(self, reason: str) -> None:
        self.storm.count(reason)
        if not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._idle_since = time.monotonic()
        self._arm_header_timer()


def guarded_protocol(http: HTTPSettings, storm: StormLog) -> type[GuardedH11Protocol]:
    """A GuardedH11Protocol class carrying this server's limits."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {
            "max_connections": http.max_connections,
            "header_timeout_s": http.header_timeout_s,
            "storm": storm,
        },
    )


__all__ = ["GuardedH11Protocol", "Slot", "guarded_protocol", "make_room"]
