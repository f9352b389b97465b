"""The connection cap and the header timeout, in a uvicorn h11 protocol subclass (`GuardedH11Protocol`).

At most `max_connections` live connections are open (one already closing, its client gone or itself
shed, is on its way out and does not count); past it a new connection makes room (`make_room`, the pure
rule), fairly whoever floods and from however many addresses:

1. A stalled connection goes first, the oldest: one that has not delivered a whole request within
   STALL_GRACE_S of connecting or of its last response (no request at all, or a body still missing
   bytes). A client that means it sends its request at once; 300 connections from 300 addresses that
   send nothing cannot hold the room.
2. Otherwise a connection still arriving (no whole request yet, within the grace) of the address with the
   most connections arriving: the oldest. 300 addresses reconnecting with one
   empty connection each shed their own, oldest first, while a client's connection, which delivers its
   request at once, is never the one closed, however many of its other connections are busy.
3. Otherwise, by the connections each address holds: when the newcomer's own address is among those
   holding the most, its own oldest idle connection; when it holds the most alone and all of them are busy,
   the newcomer is closed (a flood from one address never closes another client's connection); else, of
   the other addresses holding the most, the oldest idle connection, or, when such an address holds more
   than the newcomer's, its oldest busy one.

A connection that has not sent its request headers within `header_timeout_s` is closed. Both are counted
in the storm log, never logged once per connection.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from groove.config import HTTPSettings
from groove.serve.http.storm import StormLog

STALL_GRACE_S = 2.0  # a connection that has not delivered a whole request within this is the first to go


@dataclass(frozen=True)
class Slot:
    """One open connection as the cap sees it: its peer address, whether it is idle (no request in
    progress), when it connected or last finished a response (oldest first to go), and whether it is
    stalled (no whole request delivered within STALL_GRACE_S of that)."""

    peer: str
    idle: bool
    since: float
    stalled: bool = False
    arriving: bool = False  # no whole request delivered yet, within the grace (nothing sent, or a body coming)


def make_room(newcomer: Slot, live: list[Slot]) -> int | None:
    """Which of `live` (the other open connections) closes so `newcomer` may stay, or None: the newcomer is
    refused (the module's rule: the oldest stalled connection; else one of the addresses holding the most
    other than the newcomer's; else the newcomer's own address sheds its own)."""
    stalled = [i for i, slot in enumerate(live) if slot.stalled]
    if stalled:
        return min(stalled, key=lambda i: live[i].since)
    # A connection still arriving, of the address with the most arriving (a client opening two connections at
    # once does not count its newcomer against its first).
    coming: dict[str, int] = {}
    for slot in live:
        if slot.arriving:
            coming[slot.peer] = coming.get(slot.peer, 0) + 1
    arriving = [i for i, slot in enumerate(live) if slot.arriving]
    if arriving:
        most_coming = max(coming[live[i].peer] for i in arriving)
        return min((i for i in arriving if coming[live[i].peer] == most_coming), key=lambda i: live[i].since)
    held: dict[str, int] = {newcomer.peer: 1}
    for slot in live:
        held[slot.peer] = held.get(slot.peer, 0) + 1
    most = max(held.values())
    tops = {p for p, n in held.items() if n == most}
    if newcomer.peer in tops:  # the newcomer's own address is among those holding the most: it gives way first
        own = [i for i, slot in enumerate(live) if slot.peer == newcomer.peer and slot.idle]
        if own:
            return min(own, key=lambda i: live[i].since)
        if tops == {newcomer.peer}:
            return None  # it holds the most alone, all busy: a flood never closes another client's connection
    theirs = [i for i, slot in enumerate(live) if slot.peer in tops and slot.peer != newcomer.peer]
    idle = [i for i in theirs if live[i].idle]
    if idle:
        return min(idle, key=lambda i: live[i].since)
    if theirs and most > held[newcomer.peer]:
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
        self._served = False  # no response finished on it yet
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
        idle = self._idle()
        late = time.monotonic() - self._idle_since > STALL_GRACE_S
        # Stalled: nothing whole since it connected or its last response: no request, or a body missing bytes.
        waiting = idle or (self.cycle is not None and getattr(self.cycle, "more_body", False))
        return Slot(
            peer=str(self.client[0]) if self.client else "",
            idle=idle,
            since=self._idle_since,
            stalled=late and waiting,
            arriving=waiting and not late and not (idle and self._served),
        )

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
        self._served = True
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
