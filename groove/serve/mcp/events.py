"""Change notifications: who hears about which note, and the daemon listener that tells them.

- handshake versions (up to 2025-11-25): `resources/subscribe` records the connection per note;
  `notifications/resources/updated` goes to the connections subscribed to a changed note and
  `notifications/resources/list_changed` to every live connection when notes are added, removed or
  renamed. A connection is forgotten when it closes (its exit stack), or when a send to it fails or
  stalls.
- 2026-07-28: clients open `subscriptions/listen`; the same events are published as
  `ResourceUpdated` / `ResourcesListChanged` on the SDK's subscription bus, which filters per stream.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from groove.logs import get_logger
from groove.search.answers import note_uri
from groove.serve.mcp import sdk
from groove.serve.mcp.paths import parse_uri

log = get_logger(__name__)

SEND_TIMEOUT_S = 2.0  # a connection that cannot take a notification this fast is dropped
# Notes one connection may be subscribed to at once: a client that watches a few notes is far under it, while
# 20,000 subscriptions in one session once held 53 MB. Past it, a subscription is refused naming the bound.
MAX_SUBSCRIPTIONS = 1_000


class NoteEvents:
    """Who hears about which note, and the daemon listener that tells them."""

    def __init__(self, bus: InMemorySubscriptionBus):
        self.bus = bus
        self._connections: set[Connection] = set()  # live handshake-era connections
        self._subscriptions: dict[Connection, dict[str, str]] = {}  # -> {path: the URI as the client wrote it}

    # -- connection tracking (a server middleware sees every request) ---------------
    async def track(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        connection = sdk.connection_of(ctx)
        if (
            connection is not None
            and connection.has_standalone_channel
            and connection.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            self._know(connection)
        return await call_next(ctx)

    def _know(self, connection: Connection) -> None:
        if connection not in self._connections:
            self._connections.add(connection)
            connection.exit_stack.callback(self.forget, connection)  # runs when the connection closes

    def forget(self, connection: Connection) -> None:
        self._connections.discard(connection)
        self._subscriptions.pop(connection, None)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def subscriber_count(self, path: str) -> int:
        return sum(1 for subs in self._subscriptions.values() if path in subs)

    # -- resources/subscribe, resources/unsubscribe -----------------------------------
    async def subscribe(self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        path = parse_uri(params.uri)
        connection = sdk.connection_of(ctx)
        if connection is None:
            raise MCPError(code=INTERNAL_ERROR, message="this transport cannot deliver resource notifications")
        self._know(connection)
        subs = self._subscriptions.setdefault(connection, {})
        if path not in subs and len(subs) >= MAX_SUBSCRIPTIONS:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"this connection is subscribed to {MAX_SUBSCRIPTIONS} notes, the most groove keeps for one: "
                "unsubscribe from some first (resources/list_changed tells of every added or removed note)",
            )
        subs[path] = params.uri
        log.debug("resource_subscribed", path=path)
        return EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        path = parse_uri(params.uri)
        connection = sdk.connection_of(ctx)
        if connection is not None:
            subs = self._subscriptions.get(connection)
            if subs is not None:
                subs.pop(path, None)
        return EmptyResult()

    # -- the daemon listener ------------------------------------------------------------
    async def on_change(self, paths: list[str], list_changed: bool) -> None:
        """Called by the daemon after a write: `paths` changed (or were deleted)."""
        # 2026-07-28: the bus filters per listen stream.
        for path in paths:
            await self.bus.publish(ResourceUpdated(uri=note_uri(path)))
        if list_changed:
            await self.bus.publish(ResourcesListChanged())
        # Handshake versions: this connection's subscriptions, plus list_changed to all.
        touched = set(paths)
        sends: list[tuple[Connection, list[str]]] = []
        for connection in list(self._connections):
            uris = [uri for path, uri in self._subscriptions.get(connection, {}).items() if path in touched]
            if uris or list_changed:
                sends.append((connection, uris))
        if not sends:
            return
        async with anyio.create_task_group() as tg:
            for connection, uris in sends:
                tg.start_soon(self._send, connection, uris, list_changed)

    async def _send(self, connection: Connection, uris: list[str], list_changed: bool) -> None:
        try:
            with anyio.fail_after(SEND_TIMEOUT_S):
                for uri in uris:
                    await connection.send_resource_updated(uri)
                if list_changed:
                    await connection.send_resource_list_changed()
        except Exception as exc:  # noqa: BLE001 - a dead or stuck client is dropped quietly
            log.debug("notification_dropped", error=repr(exc))
            self.forget(connection)


__all__ = ["NoteEvents", "SEND_TIMEOUT_S"]
