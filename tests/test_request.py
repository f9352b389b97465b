"""The one search request model: each bound is written once, bad input is one line a person can act on,
and the MCP tool's schema is the model's."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from groove.errors import GrooveError
from groove.search.compiler import QueryError
from groove.search.request import MAX_FILTER_ITEMS, SearchRequest
from groove.serve.mcp.server import build_server
from tests.support.daemon import RecordingDaemon


@pytest.mark.parametrize("arguments,message", [
    ({"query": ""}, "the query is empty"),
    ({"query": "   "}, "the query is empty"),
    ({"query": "é" * 600}, "the query is 1200 bytes; the limit is 1024 bytes (1 KiB)"),
    ({"query": "x", "limit": 0}, "limit must be between 1 and 100, got 0"),
    ({"query": "x", "limit": 101}, "limit must be between 1 and 100, got 101"),
    ({"query": "x", "limit": "5"}, "limit must be a whole number, got '5'"),
    ({"query": "x", "limit": True}, "limit must be a whole number, got True"),
    ({"query": "x", "retriever": "bm25"}, "retriever must be hybrid, fts or vector, got 'bm25'"),
    ({"query": "x", "mmr_lambda": 1.5}, "mmr_lambda must be between 0.0 and 1.0, got 1.5"),
    ({"query": "x", "mmr_same_doc_penalty": -0.5}, "mmr_same_doc_penalty must be 0 or more, got -0.5"),
    ({"query": "x", "tags_any": ["t"] * (MAX_FILTER_ITEMS + 1)}, "tags_any has 501 items; at most 500 are allowed"),
    ({"query": "x", "filters": {"path_globs": ["*"] * 501}}, "path_globs has 501 items"),
    ({"query": "x", "date_from": "yesterday"}, "date_from must be an ISO date"),
    ({"query": "x", "date_from": "2026-02-01", "date_to": "2026-01-01"}, "is after date_to"),
    ({"query": "x", "colour": "red"}, "unknown argument 'colour'"),
])
def test_out_of_bounds_input_is_one_line_that_names_the_field_and_the_bound(arguments, message):
    with pytest.raises(QueryError) as err:
        SearchRequest.from_arguments(arguments)
    text = str(err.value)
    assert message in text
    assert "\n" not in text and "pydantic" not in text and "http" not in text
    assert isinstance(err.value, GrooveError)


def test_flat_and_nested_filters_are_the_same_request():
    flat = SearchRequest.from_arguments({"query": "x", "tags_any": ["#Work"], "date_from": "2026-01-05T10:00"})
    nested = SearchRequest(query="x", filters={"tags_any": ["#Work"], "date_from": "2026-01-05T10:00"})
    assert flat == nested
    assert flat.compiled_filters.to_dict() == {"tags_any": ["work"], "date_from": "2026-01-05"}


async def test_the_mcp_search_tool_takes_its_schema_and_its_checks_from_the_request_model():
    daemon = RecordingDaemon()
    async with Client(build_server(daemon)) as client:  # type: ignore[arg-type]
        tools = {t.name: t for t in (await client.list_tools()).tools}
        props = tools["search"].input_schema["properties"]
        fields = SearchRequest.model_fields
        # a count's floor of 1 is checked, not advertised (lean_schema); its ceiling is advertised
        assert "minimum" not in props["limit"] and props["limit"]["maximum"] == 100
        assert props["mmr_lambda"]["maximum"] == 1.0  # an optional argument has no null branch (lean_schema)
        assert props["tags_any"]["maxItems"] == MAX_FILTER_ITEMS
        assert props["query"]["description"] == fields["query"].description
        assert tools["search"].input_schema["required"] == ["query"]

        # invalid arguments: a tool error with one line the model can act on (SEP-1303), before the tool runs
        as_string = await client.call_tool("search", {"query": "tea", "limit": "5"})
        assert as_string.is_error and as_string.content[0].text == "limit must be a whole number, got '5'"
        assert daemon.requests == []
        floor = await client.call_tool("search", {"query": "tea", "limit": 0})
        assert floor.is_error and floor.content[0].text == "limit must be between 1 and 100, got 0"
        assert daemon.requests == []
        with pytest.raises(MCPError) as unknown:  # an unknown tool stays a JSON-RPC error
            await client.call_tool("find", {"query": "tea"})
        assert unknown.value.error.code == INVALID_PARAMS and "unknown tool 'find'" in unknown.value.error.message

        ok = await client.call_tool("search", {"query": "tea", "limit": 5, "tags_all": ["A", "b"]})
        assert not ok.is_error
    [req] = daemon.requests
    assert req.limit == 5 and req.compiled_filters.tags_all == ("a", "b")
