"""Request bodies (`BodyDeadline`, the outermost ASGI layer): a deadline for the whole body, a bound on
the bodies one peer may be sending at once, and a quiet end for a client that hangs up mid-body.

- The whole body must arrive within `body_timeout_s` of the request's headers, or the request gets 408
  and its connection is closed (a body trickled in a byte at a time would otherwise hold a connection
  slot and a task forever).
- At most `max_bodies_per_client` requests from one peer address may be waiting for bytes of their body at
  once; one more cuts the one of that peer's that has waited longest (408, connection closed). A body that
  has arrived whole, still in the server's buffer until the app reads it, waits for nothing and is never
  counted, so a burst of whole requests from one address (every local agent on a laptop) passes, while
  trickling connections from one address hold at most that many slots, and `/healthz` and other clients
  keep the rest. Only bodies that have waited BODY_GRACE_S count: on 2 busy cores a body of one of 32 or 64
  local clients may arrive a second after its headers (cut at once, 17 of 2,223 and 12 of 2,919 requests
  were; `python -m bench load`), where a trickling one waits for good.
- A client that disconnects before its body arrived is counted (`client_gone`) and nothing is run for
  it: no traceback, no half-read request handed to the app.

Requests without a body (no Content-Length, or 0, and no Transfer-Encoding: GET, the event stream) pass
through as they are; a long response is not a body. Everything is counted in the storm log.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import anyio
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from groove.serve.http.peers import peer_of
from groove.serve.http.storm import StormLog

# A body counts against the bound once it has waited this long for its bytes: a client that means it sends its
# body at once, but one of 64 clients in a busy process may send it a second after its headers, and a saturated
# server may leave it unread in the socket as long. The connection cap's stalled rule uses the same grace.
BODY_GRACE_S = 2.0


class _BodyCut(Exception):
    """Raised from `BodyDeadline`'s receive when the body missed its deadline or was cut; caught there."""


class _ClientGone(Exception):
    """Raised from `BodyDeadline`'s receive when the client disconnected before its body arrived."""


class _Arriving:
    """One request whose body is still arriving: its deadline's cancel scope, and why it was cut."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.cut_reason: str | None = None
        self.since: float | None = None  # when it first waited for bytes (its headers had come)

    def cut(self, reason: str) -> None:
        self.cut_reason = reason
        if self.scope is not None:
            self.scope.cancel()


class BodyDeadline:
    """The whole request body within `timeout_s` of its headers, at most `per_client` bodies arriving per peer.

    Wraps `receive` with a cancel scope whose deadline starts when uvicorn hands the request over (its
    headers are complete) and ends once the last body chunk (`more_body` false) has arrived; after that
    `receive` is untouched, so an SSE stream waiting for the disconnect is never cut. The SDK's body-limit
    middleware inside reads the whole body before the app runs, so a cut always falls before a response
    has started: the answer is a one-line 408 with `Connection: close`, which makes uvicorn's h11 protocol
    close the connection (and free its slot under `max_connections`).
    """

    def __init__(self, app: ASGIApp, timeout_s: float, storm: StormLog, per_client: int = 16):
        self.app = app
        self.timeout_s = timeout_s
        self.storm = storm
        self.per_client = max(1, per_client)
        self.arriving: dict[str, deque[_Arriving]] = {}  # peer -> its bodies waiting for bytes, longest first
        self._trimming: set[str] = set()  # peers with a trim pending
        self._tasks: set[asyncio.Task[None]] = set()

    async def _trim(self, peer: str) -> None:
        """While `peer` has more bodies waiting than the bound: once more than the bound have waited BODY_GRACE_S,
        cut the longest waiting of them; else wait until the next one has."""
        try:
            while (queue := self.arriving.get(peer)) is not None and len(queue) > self.per_client:
                now = anyio.current_time()
                late = sorted(
                    (a for a in queue if a.since is not None and now - a.since >= BODY_GRACE_S),
                    key=lambda a: a.since or 0.0,
                )
                for body in late[: max(0, len(late) - self.per_client)]:
                    queue.remove(body)
                    body.cut("body_cut_per_client")
                starts = [a.since for a in queue if a.since is not None and now - a.since < BODY_GRACE_S]
                if not starts:
                    break
                await anyio.sleep(min(starts) + BODY_GRACE_S - now)
        finally:
            self._trimming.discard(peer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _declares_body(scope):
            await self.app(scope, receive, send)
            return
        deadline = anyio.current_time() + self.timeout_s
        peer = peer_of(scope)
        mine = _Arriving()
        body_done = False
        started = False

        def waiting(yes: bool) -> None:
            """Count this body among its peer's waiting for bytes (the longest waiting first), or no longer."""
            queue = self.arriving.get(peer)
            if yes:
                queue = self.arriving.setdefault(peer, deque())
                if mine.since is None:
                    mine.since = anyio.current_time()
                queue.append(mine)
                if len(queue) > self.per_client and peer not in self._trimming:  # the longest waiting make room
                    self._trimming.add(peer)
                    task = asyncio.get_running_loop().create_task(self._trim(peer))
                    self._tasks.add(task)  # held until done (the loop keeps only a weak reference)
                    task.add_done_callback(self._tasks.discard)
            elif queue is not None:
                if mine in queue:
                    queue.remove(mine)
                if not queue:
                    self.arriving.pop(peer, None)

        def finished() -> None:
            nonlocal body_done
            body_done = True
            waiting(False)

        async def timed_receive() -> Any:
            if body_done:
                return await receive()
            if mine.cut_reason is not None:
                raise _BodyCut
            with anyio.CancelScope(deadline=deadline) as cancel:
                mine.scope = cancel
                waiting(True)  # a body already whole in the buffer returns below without letting anyone in
                try:
                    message = await receive()
                finally:
                    waiting(False)
            mine.scope = None
            if cancel.cancelled_caught or message is None:
                mine.cut_reason = mine.cut_reason or "body_timeout"
                raise _BodyCut
            if message["type"] == "http.disconnect":
                raise _ClientGone
            if not message.get("more_body", False):
                finished()
            return message

        async def watched_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except _ClientGone:
            self.storm.count("client_gone")  # nobody to answer
        except _BodyCut:
            if started:  # not reached behind the body-limit middleware; nothing sensible left to answer
                raise
            reason = mine.cut_reason or "body_timeout"
            self.storm.count(reason)
            await PlainTextResponse(self._message(reason), status_code=408, headers={"Connection": "close"})(
                scope, receive, send
            )
        finally:
            finished()

    def _message(self, reason: str) -> str:
        if reason == "body_cut_per_client":
            return (
                f"request body cut: more than [serve.http] max_bodies_per_client = {self.per_client} request "
                "bodies from this address were arriving at once; send each body whole, promptly\n"
            )
        return (
            f"request body not received within [serve.http] body_timeout_s = {self.timeout_s:g} s of its "
            "headers; send the whole body at once, or raise body_timeout_s for very slow links\n"
        )


def _declares_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"0", b"")):
            return True
    return False


__all__ = ["BodyDeadline"]
