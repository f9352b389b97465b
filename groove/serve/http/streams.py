"""Event streams (`StreamGuard`): how many long-lived `/mcp` responses may be open, per client and in all,
and for how long one may stay silent.

An event stream is a response that does not end by itself: a handshake session's `GET /mcp` and a
2026-07-28 `subscriptions/listen` request. Each holds a connection (and, for a session, keeps it busy
so the session cap cannot end it). Unbounded, a few hundred of them take every connection slot and
every session: `/healthz` and new clients are locked out until the sockets close. So:

- one peer address holds at most `per_client` streams; its next one ends its oldest (a client that
  reopens its stream without closing the last one replaces it instead of piling up);
- at most `max_streams` are open in all, never more than half of `max_connections` or of
  `max_sessions` (the other half is kept for requests, `/healthz` and new sessions). At the cap a new
  stream ends the oldest stream of the peer holding the most, if that peer holds more than the
  newcomer; otherwise the newcomer gets 503 with `Retry-After`;
- a stream that has sent no event (keep-alive pings do not count) for `idle_s` is ended.

Ending a stream finishes its response cleanly (the last chunk of a chunked body), so the client sees
the stream end and reconnects when it wants to. Each end and refusal is counted in the storm log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import anyio
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from groove.config import HTTPSettings
from groove.serve.http.peers import peer_of
from groove.serve.http.sessions import MCP_PATH
from groove.serve.http.storm import StormLog

LISTEN_METHOD = b"subscriptions/listen"
RETRY_AFTER_S = 5


@dataclass(frozen=True)
class StreamLimits:
    """The effective caps: the settings, bounded so that streams never take more than half of the
    connection slots or sessions."""

    max_streams: int
    per_client: int
    idle_s: float

    @classmethod
    def of(cls, http: HTTPSettings) -> StreamLimits:
        total = max(1, min(http.max_streams, http.max_connections // 2, http.max_sessions // 2))
        return cls(total, max(1, min(http.max_streams_per_client, total)), http.stream_idle_s)


@dataclass(eq=False)
class _Stream:
    peer: str
    opened: float
    last_event: float
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ended: str | None = None

    def end(self, reason: str) -> None:
        self.ended = reason
        self.scope.cancel()


class StreamGuard:
    """Counts and bounds the open event streams on `/mcp` (see the module's docstring)."""

    def __init__(self, app: ASGIApp, limits: StreamLimits, storm: StormLog):
        self.app = app
        self.limits = limits
        self.storm = storm
        self.by_peer: dict[str, list[_Stream]] = {}  # each peer's open streams, oldest first
        self.total = 0

    def open_streams(self) -> int:
        return self.total

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != MCP_PATH or scope.get("method") not in ("GET", "POST"):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "POST":
            first = await receive()
            receive = _replay(first, receive)
            if not _is_listen(first):
                await self.app(scope, receive, send)
                return
        peer = peer_of(scope)
        if not self._admit(peer):
            self.storm.count("stream_refused_at_cap")
            text = (
                f"too many event streams are open ([serve.http] max_streams = {self.limits.max_streams}); "
                f"retry in {RETRY_AFTER_S} s\n"
            )
            await PlainTextResponse(text, status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})(
                scope, receive, send
            )
            return
        now = anyio.current_time()
        stream = _Stream(peer, now, now)
        self.by_peer.setdefault(peer, []).append(stream)
        self.total += 1
        started = finished = False

        async def watched_send(message: Message) -> None:
            nonlocal started, finished
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body":
                if not message.get("more_body", False):
                    finished = True
                if not _only_comments(message.get("body", b"")):
                    stream.last_event = anyio.current_time()
            await send(message)

        async def idle_watch() -> None:
            while True:
                left = stream.last_event + self.limits.idle_s - anyio.current_time()
                if left <= 0:
                    self._end(stream, "stream_idle_ended")
                    return
                await anyio.sleep(left)

        try:
            with stream.scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(idle_watch)
                    await self.app(scope, receive, watched_send)
                    tg.cancel_scope.cancel()
        finally:
            self._forget(stream)
        if stream.ended is None or finished:
            return
        if started:  # end the chunked body cleanly: the client sees the stream end, not a broken connection
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            await PlainTextResponse(
                "event stream ended before it started\n", status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)}
            )(scope, receive, send)

    def _admit(self, peer: str) -> bool:
        """Make room for one more stream of `peer`, or False when it must be refused."""
        mine = self.by_peer.get(peer, [])
        if len(mine) >= self.limits.per_client:
            self._end(mine[0], "stream_replaced_per_client")
            return True
        if self.total < self.limits.max_streams:
            return True
        biggest = max(self.by_peer.values(), key=len, default=[])
        if len(biggest) > len(mine):
            self._end(biggest[0], "stream_ended_for_new_client")
            return True
        return False

    def _end(self, stream: _Stream, reason: str) -> None:
        if stream.ended is None:
            self.storm.count(reason)
            stream.end(reason)
        self._forget(stream)

    def _forget(self, stream: _Stream) -> None:
        streams = self.by_peer.get(stream.peer)
        if streams is None or stream not in streams:
            return
        streams.remove(stream)
        self.total -= 1
        if not streams:
            del self.by_peer[stream.peer]


def _replay(first: Message, receive: Receive) -> Receive:
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _is_listen(message: Message) -> bool:
    """Whether a (whole, already buffered) POST body is a JSON-RPC `subscriptions/listen` request."""
    body = message.get("body", b"") if message.get("type") == "http.request" else b""
    if LISTEN_METHOD not in body:
        return False
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("method") == LISTEN_METHOD.decode()


def _only_comments(body: bytes) -> bool:
    """A keep-alive ping (`: ping`), or nothing: SSE comment lines only."""
    return all(not line.strip() or line.startswith(b":") for line in body.split(b"\n"))


__all__ = ["StreamGuard", "StreamLimits"]
