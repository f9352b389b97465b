"""What the tool definitions cost: every conversation pays for `tools/list` (each tool's name, title,
description, input and output schema and annotations) before the user says a word, so their size is a budget
(docs/mcp.md, "What the tool definitions cost"), pinned here through a real MCP client session, in process.

`python -m tests.test_mcp_tool_definitions` prints the characters per tool.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

from groove.serve.mcp.server import build_server
from tests.support.daemon import RecordingDaemon

BUDGET = 15_000  # characters of all the tools' definitions together (issue 37: 49,041 before)
TOOLS = {
    "search", "get_document", "list_documents", "index_status", "reindex", "related", "topics", "links", "changes",
}  # fmt: skip


async def listed_tools() -> list[types.Tool]:
    async with Client(build_server(RecordingDaemon())) as client:  # type: ignore[arg-type]
        return (await client.list_tools()).tools


def characters(tool: types.Tool) -> int:
    """The tool as tools/list returns it, as JSON (json.dumps: `", "` and `": "` between items, a little more than
    the wire's compact form)."""
    return len(json.dumps(tool.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False))


def table(tools: list[types.Tool]) -> str:
    sizes = sorted(((characters(t), t.name) for t in tools), reverse=True)
    rows = [f"{name:16} {size:6,}" for size, name in sizes]
    return "\n".join([*rows, f"{'total':16} {sum(s for s, _ in sizes):6,}"])


def _nodes(schema: Any, path: str = ""):
    """Every subschema of `schema` with its path (properties, items, $defs, anyOf ...), the schema first."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key, value in schema.items():
        if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            for name, sub in value.items():
                yield from _nodes(sub, f"{path}.{key}.{name}")
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from _nodes(sub, f"{path}.{key}[{i}]")
        elif key in ("items", "additionalProperties", "not", "contains", "propertyNames"):
            yield from _nodes(value, f"{path}.{key}")


async def test_the_definitions_of_all_tools_together_fit_in_15000_characters():
    tools = await listed_tools()
    assert {t.name for t in tools} == TOOLS
    total = sum(characters(t) for t in tools)
    assert total <= BUDGET, f"the tool definitions take {total:,} characters, over {BUDGET:,}:\n{table(tools)}"


async def test_every_argument_of_every_tool_is_described():
    for tool in await listed_tools():
        assert tool.description.strip(), tool.name
        for path, node in _nodes(tool.input_schema):
            for name, prop in (node.get("properties") or {}).items():
                assert isinstance(prop, dict) and prop.get("description", "").strip(), f"{tool.name}{path}.{name}"


# What the MCP Inspector's --strict lint (its CLI's schema lint, @modelcontextprotocol/inspector 2.12) warns about
# in a tool's input or output schema: a `type` array (type-union), a `$ref` out of the document (remote-ref), a
# schema with no validation keyword, `{}` included (untyped-schema), and a bare boolean where a schema goes.
# tests/test_mcp_stdio.py runs the Inspector itself.
CONSTRAINING = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
    "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "contentSchema", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required", "dependentRequired",
    "allOf", "anyOf", "oneOf", "not", "items", "prefixItems", "contains", "additionalItems", "unevaluatedItems",
    "properties", "patternProperties", "additionalProperties", "unevaluatedProperties", "propertyNames",
    "dependentSchemas", "dependencies", "$ref", "$dynamicRef", "$recursiveRef",
}


async def test_no_tool_schema_has_what_the_inspectors_strict_mode_warns_about():
    for tool in await listed_tools():
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", tool.name
        for kind, schema in (("inputSchema", tool.input_schema), ("outputSchema", tool.output_schema)):
            for path, node in _nodes(schema):
                where = f"{tool.name} {kind}{path}"
                assert not isinstance(node.get("type"), list), f"{where}: a type array"
                assert str(node.get("$ref", "#")).startswith("#"), f"{where}: a $ref out of the schema"
                assert CONSTRAINING & set(node), f"{where}: no validation keyword (an untyped schema)"
                for key in ("items", "not", "contains", "propertyNames"):
                    assert not isinstance(node.get(key), bool), f"{where}.{key}: a bare boolean"


if __name__ == "__main__":
    print(table(anyio.run(listed_tools)))
