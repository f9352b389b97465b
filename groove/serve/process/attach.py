"""`groove serve --transport stdio` beside a running service: attach to it instead of failing.

The normal set-up is a service in the background (`groove serve --transport http`, the systemd unit
or the launchd agent) and an MCP client (Claude Desktop, Claude Code, Cursor) that starts `groove
serve --transport stdio` itself. The second process cannot open the index as a writer (one writer
per index), and should not load a second model. So before it opens anything, the stdio process asks
the local endpoint beside the index (`serve/process/local.py`, a 0600 socket of the same user) whether a
service runs for this index and where its HTTP endpoint is; if one answers, this process becomes a
bridge: JSON-RPC messages from stdin go to the service's Streamable HTTP endpoint and everything
the service sends (responses, notifications on the session's event stream: `resources/updated`,
`list_changed`) goes to stdout. No index, no model, no writer here: live updates and subscriptions
are the service's own.

The bridge speaks the handshake protocol (2025-11-25 and before), what stdio clients use: it learns
the negotiated version from the `initialize` answer and sends it on every later request, as an HTTP
client must. A `server/discover` probe (2026-07-28) is answered "method not found", which makes an
`auto` client fall back to the handshake.

When no service runs, `groove serve --transport stdio` serves the index itself, as before; the log
says which it did (`stdio_attached` or `stdio_serves_the_index`).
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from groove.logs import get_logger

log = get_logger(__name__)

PROTOCOL_VERSION_HEADER = "MCP-Protocol-Version"
METHOD_NOT_FOUND = -32601
MODERN_PROBE = "server/discover"


class Bridge:
    """Messages between one stdio client and the service's HTTP endpoint, both ways, until either side ends."""

    def __init__(self, url: str, token: str | None):
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.version: str | None = None  # the protocol version `initialize` settled on
        self._initialize_id: Any = None
        self.forwarded = 0

    def metadata(self) -> ClientMessageMetadata | None:
        """The headers an HTTP client sends after the handshake: the negotiated protocol version."""
        return ClientMessageMetadata(headers={PROTOCOL_VERSION_HEADER: self.version}) if self.version else None

    async def run(self, stdio_read: Any, stdio_write: Any) -> None:
        client = httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0))
        async with client, streamable_http_client(self.url, http_client=client) as (http_read, http_write):
            async with anyio.create_task_group() as tg:

                async def up() -> None:  # the client -> the service
                    async for item in stdio_read:
                        if isinstance(item, Exception):  # a line that is not JSON-RPC: the stdio transport says so
                            log.warning("stdio_bad_message", error=repr(item))
                            continue
                        message = item.message
                        if isinstance(message, JSONRPCRequest):
                            if message.method == MODERN_PROBE:
                                await stdio_write.send(
                                    SessionMessage(
                                        JSONRPCError(
                                            jsonrpc="2.0",
                                            id=message.id,
                                            error={
                                                "code": METHOD_NOT_FOUND,
                                                "message": f"{MODERN_PROBE}: this stdio bridge speaks the handshake "
                                                "protocol; send initialize",
                                            },
                                        )
                                    )
                                )
                                continue
                            if message.method == "initialize":
                                self._initialize_id = message.id
                        await http_write.send(SessionMessage(message, metadata=self.metadata()))
                        self.forwarded += 1
                    tg.cancel_scope.cancel()  # stdin closed: the client is gone

                async def down() -> None:  # the service -> the client
                    async for item in http_read:
                        if isinstance(item, Exception):
                            log.warning("service_message_failed", error=repr(item))
                            continue
                        message = item.message
                        if (
                            isinstance(message, JSONRPCResponse)
                            and self._initialize_id is not None
                            and message.id == self._initialize_id
                        ):
                            self.version = str((message.result or {}).get("protocolVersion") or "") or None
                        await stdio_write.send(SessionMessage(message))
                    log.warning("service_gone", url=self.url)
                    tg.cancel_scope.cancel()

                tg.start_soon(up)
                tg.start_soon(down)


async def run_bridge(url: str, token: str | None, stdio_read: Any, stdio_write: Any) -> int:
    """Bridge one stdio client to the service at `url`; the messages forwarded to it."""
    bridge = Bridge(url, token)
    await bridge.run(stdio_read, stdio_write)
    return bridge.forwarded


__all__ = ["Bridge", "run_bridge"]
