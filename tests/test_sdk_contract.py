"""One test per reach into the mcp SDK's private parts (groove/serve/mcp/sdk.py): when an SDK upgrade
removes or changes one, the test named after it fails with a message saying what to look at."""

from __future__ import annotations

import inspect
from importlib.metadata import version
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.connection import Connection
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp_types import ListResourcesResult, PaginatedRequestParams

from groove.serve.mcp import sdk

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")

HINT = "the mcp SDK changed (groove pins mcp=={pinned}, found {found}); update groove/serve/mcp/sdk.py: {what}"


def hint(what: str) -> str:
    return HINT.format(pinned=sdk.SDK_VERSION, found=version("mcp"), what=what)


def test_the_installed_sdk_is_the_pinned_one():
    assert version("mcp") == sdk.SDK_VERSION, hint("re-check every reach below, then bump SDK_VERSION and pyproject")


def test_reach_1_mcpserver_has_a_lowlevel_server():
    server = MCPServer("contract")
    low = getattr(server, "_lowlevel_server", None)
    assert low is not None, hint("MCPServer._lowlevel_server is gone")
    for name in ("add_request_handler", "get_request_handler", "create_initialization_options", "run"):
        assert callable(getattr(low, name, None)), hint(f"Server.{name} is gone")


def test_reach_2_and_4_a_lowlevel_handler_is_called_and_sees_its_connection():
    server = MCPServer("contract")
    seen: list[Any] = []

    async def list_resources(ctx, params: PaginatedRequestParams) -> ListResourcesResult:
        seen.append(sdk.connection_of(ctx))
        return ListResourcesResult(resources=[])

    sdk.add_request_handler(server, "resources/list", PaginatedRequestParams, list_resources)

    async def main() -> None:
        async with Client(server) as client:
            await client.list_resources()

    anyio.run(main)
    assert len(seen) == 1, hint("add_request_handler no longer routes resources/list to the handler")
    assert isinstance(seen[0], Connection), hint("ServerSession._connection is gone or no longer a Connection")
    assert "connection" in inspect.signature(ServerSession.__init__).parameters, hint("ServerSession(connection=...) changed")


def test_reach_3_initialization_options_advertise_resources_list_changed():
    server = MCPServer("contract")
    before = sdk.lowlevel(server).create_initialization_options()
    sdk.advertise_resources_list_changed(server)
    after = sdk.lowlevel(server).create_initialization_options()
    resources = after.capabilities.resources
    assert resources is not None and resources.list_changed is True, hint(
        "create_initialization_options(NotificationOptions(resources_changed=True)) no longer sets listChanged")


def test_reach_5_the_listen_handler_can_be_closed():
    server = MCPServer("contract", subscriptions=InMemorySubscriptionBus())
    entry = sdk.lowlevel(server).get_request_handler("subscriptions/listen")
    assert entry is not None, hint("no subscriptions/listen handler is registered for a server with a bus")
    assert callable(getattr(entry.handler, "close", None)), hint("the listen handler has no close()")
    sdk.close_listen_streams(server)  # and closing twice is harmless
    sdk.close_listen_streams(server)


def test_reach_6_the_session_manager_keeps_its_sessions_by_id():
    server = MCPServer("contract")
    server.streamable_http_app()
    sessions = getattr(server.session_manager, "_server_instances", None)
    assert isinstance(sessions, dict), hint("StreamableHTTPSessionManager._server_instances is gone")
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    assert inspect.iscoroutinefunction(StreamableHTTPServerTransport.terminate), hint("transport.terminate() changed")
    anyio.run(sdk.terminate_sessions, server, 1.0)  # no sessions: returns at once


def test_reach_8_a_live_session_is_listed_by_id_and_ending_it_makes_its_id_answer_404():
    import httpx

    server = MCPServer("contract")
    app = server.streamable_http_app()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    async def main() -> None:
        async with server.session_manager.run():
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://127.0.0.1:8000") as http:
                sid = (await http.post("/mcp", json=init, headers=headers)).headers["mcp-session-id"]
                assert sid in sdk.open_sessions(server), hint("_server_instances no longer maps session IDs to transports")
                assert await sdk.end_session(server, sid) is True
                with anyio.fail_after(5):
                    while sid in sdk.open_sessions(server):
                        await anyio.sleep(0.01)
                ping = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                                       headers={**headers, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
                assert ping.status_code == 404, hint("an ended session's ID no longer answers 404")
                assert await sdk.end_session(server, sid) is False

    anyio.run(main)


def test_reach_7_run_takes_streams_and_options():
    params = list(inspect.signature(sdk.lowlevel(MCPServer("contract")).run).parameters)
    assert params[:3] == ["read_stream", "write_stream", "initialization_options"], hint(f"Server.run{params}")


def test_groove_state_is_kept_beside_the_server_not_injected_into_it():
    server = MCPServer("contract")
    marker = object()
    sdk.attach_events(server, marker)
    assert sdk.events_of(server) is marker
    assert not hasattr(server, "groove_events")
