"""The session cap (`SessionGuard`): at `max_sessions` open handshake-era sessions, the one idle the
longest is ended so a new handshake is never refused while some session sits unused."""

from __future__ import annotations

import time
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from groove.serve.http.storm import StormLog
from groove.serve.mcp import sdk

MCP_PATH = "/mcp"  # where the SDK app serves MCP (groove.serve.http.server mounts it there)


class SessionGuard:
    """Keeps room for new handshakes: at `max_sessions` open sessions, the one idle the longest is ended.

    Tracks, per `Mcp-Session-Id`, when it was last used and how many of its requests are in flight
    (an open GET stream counts as in flight, so a listening client is never the one ended; the stream
    limits of `groove.serve.http.streams` keep enough of them unheld). The SDK's own cap (set one above ours)
    only answers 503 when every session is busy.
    """

    def __init__(self, app: ASGIApp, server: MCPServer, max_sessions: int, storm: StormLog | None = None):
        self.app = app
        self.server = server
        self.max_sessions = max_sessions
        self.storm = storm or StormLog("mcp_sessions_ended")
        self.last_used: dict[str, float] = {}
        self.in_flight: dict[str, int] = {}
        self.ended = 0
        # Handshakes let in whose session the SDK has not opened yet: each holds a place, so handshakes that
        # arrive together at the cap each end a distinct idle session (one at a time, under the lock).
        self.opening = 0
        self._room = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != MCP_PATH:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        sid = headers.get("mcp-session-id")
        if sid is None:
            if scope.get("method") != "POST" or headers.get("mcp-protocol-version") in MODERN_PROTOCOL_VERSIONS:
                await self.app(scope, receive, self._watch(send))
                return
            await self._make_room()  # holds a place in `opening` until the SDK has opened (or refused) it
            opened: list[str] = []
            try:
                await self.app(scope, receive, self._watch(send, opened))
            finally:
                self.opening -= 1
                for new in opened:  # its handshake has answered: the session is idle now, like any other
                    self._done(new)
            return
        if sid not in sdk.open_sessions(self.server):  # unknown or ended: the SDK answers 404; nothing to track
            await self.app(scope, receive, send)
            return
        self.in_flight[sid] = self.in_flight.get(sid, 0) + 1
        self.last_used[sid] = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            self._done(sid)

    def _done(self, sid: str) -> None:
        """One request of session `sid` has finished."""
        left = self.in_flight.get(sid, 1) - 1
        if left > 0:
            self.in_flight[sid] = left
        else:
            self.in_flight.pop(sid, None)
        if sid in sdk.open_sessions(self.server):
            self.last_used[sid] = time.monotonic()
        else:
            self.last_used.pop(sid, None)

    def _watch(self, send: Send, opened: list[str] | None = None) -> Send:
        """`send`, noting the session a handshake's answer opens: busy (never the one ended to make room for
        another handshake) until that answer is complete."""

        async def watching(message: Any) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        sid = value.decode("latin-1")
                        self.last_used[sid] = time.monotonic()
                        if opened is not None and sid not in opened:
                            opened.append(sid)
                            self.in_flight[sid] = self.in_flight.get(sid, 0) + 1
            await send(message)

        return watching

    async def _make_room(self) -> None:
        """A place for one more handshake: when the open sessions and the handshakes being opened fill the cap,
        the session idle the longest is ended first. One handshake at a time makes its room."""
        async with self._room:
            await self._end_one_if_full()
            self.opening += 1

    async def _end_one_if_full(self) -> None:
        sessions = sdk.open_sessions(self.server)
        if len(self.last_used) > 2 * self.max_sessions:  # forget sessions that ended on their own
            for sid in [s for s in self.last_used if s not in sessions]:
                self.last_used.pop(sid, None)
        if len(sessions) + self.opening < self.max_sessions:
            return
        # Idle: no request in flight, and its handshake has answered (a session the SDK has just opened for a
        # handshake still being answered is not in last_used yet: ending it would fail that handshake).
        idle = [sid for sid in sessions if not self.in_flight.get(sid) and sid in self.last_used]
        if not idle:
            return  # every session is busy: the SDK answers 503
        oldest = min(idle, key=lambda sid: self.last_used.get(sid, 0.0))
        await sdk.end_session(self.server, oldest)
        self.last_used.pop(oldest, None)
        self.ended += 1
        self.storm.count("idle_session_ended_at_cap")
        with anyio.move_on_after(1.0):  # the SDK forgets it once its server task has wound down
            while oldest in sessions:  # noqa: ASYNC110 - the SDK's dict of sessions has no event to wait on
                await anyio.sleep(0.005)


__all__ = ["SessionGuard"]
