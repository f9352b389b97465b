"""What the MCP tools answer, as a client sees it over Streamable HTTP: real output schemas, structured
content that validates against them, compact text content, a resource URI on every hit, no internal ids
unless asked, ISO-8601 times, and the topics listing as a resource.

A real `groove serve --transport http` subprocess over real note files and a real SQLite index; the
bag-of-words fake embedder (tests/support/fake_groove.py): these tests are about the answers, not the model.
The oracle for a schema is the `jsonschema` package reading the schema the server advertises, never
groove's own models.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support.common import note, write
from tests.support.server import FAKE_GROOVE, ServerProcess

NOTES = {
    "garden/tomatoes.md": note("Tomatoes", "Pinch the side shoots of cordon tomatoes every week; water the roots, not "
                               "the leaves.\n\n## Feeding\n\nFeed tomatoes with potash once the first truss sets.",
                               tags=["garden", "vegetables"], date="2024-05-01"),
    "garden/roses.md": note("Roses", "Prune roses in late winter, just above an outward facing bud.", tags=["garden"]),
    "kitchen/tomato-soup.md": note("Tomato soup", "Roast the tomatoes with garlic before blending the soup.",
                                   tags=["recipes", "vegetables"], date="2024-06-10"),
    "kitchen/bread.md": note("Bread", "A long cold proof gives sourdough bread its flavour.", tags=["recipes"]),
    "日本語/家庭菜園.md": note("家庭菜園", "トマトの脇芽は毎週摘む。水は根元に与える。", tags=["garden"]),
    "inbox.md": note("Inbox", "Buy tomato stakes and twine."),
}
NON_NULL_TIMES = ("last_indexed_at", "last_change_at")


@pytest.fixture(scope="module")
def served(spawn, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("mcp-answers")
    kb = root / "notes"
    for path, text in NOTES.items():
        write(kb / path, text)
    started = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    server = spawn.server(kb, root / "index.sqlite", root, command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        server.wait_indexed(len(NOTES))  # every chunk embedded: related needs vectors
        server.started = started  # type: ignore[attr-defined]
        server.index = root / "index.sqlite"  # type: ignore[attr-defined]
        server.kb = kb  # type: ignore[attr-defined]
        yield server
    finally:
        server.terminate()


def _run(served: ServerProcess, fn) -> Any:
    async def go() -> Any:
        async with served.client() as client:
            return await fn(client)

    return anyio.run(go)


def _call(served: ServerProcess, tool: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
    result = _run(served, lambda c: c.call_tool(tool, arguments or {}))
    assert not result.is_error, result.content
    return result


def _text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


def _schemas(served: ServerProcess) -> dict[str, dict[str, Any]]:
    tools = _run(served, lambda c: c.list_tools()).tools
    return {t.name: t.output_schema for t in tools}


# Every tool called once with arguments that succeed on this folder.
CALLS = {
    "search": {"query": "tomatoes"},
    "get_document": {"path": "garden/tomatoes.md"},
    "list_documents": {},
    "topics": {},
    "index_status": {},
    "related": {"path": "garden/tomatoes.md"},
    "links": {"path": "garden/tomatoes.md"},
    "reindex": {},
    "changes": {"since": "30d"},
}
FIELDS = {
    "search": {"results", "low_confidence", "off_topic", "filter_applied", "pending_chunks", "vectors_degraded",
               "startup_reconcile_done"},
    "get_document": {"uri", "path", "title", "tags", "date", "frontmatter", "warnings", "indexed_at", "size", "content",
                     "backlinks"},
    "list_documents": {"documents", "next_cursor"},
    "topics": {"notes", "notes_at_top_level", "folders", "folders_total", "tags"},
    # tasks, last_change_at, uptime_s: in the answer, not the schema (docs/mcp.md, "What the tool definitions cost")
    "index_status": {"documents", "chunks", "pending_chunks", "model", "last_indexed_at", "watcher", "healthy",
                     "startup_reconcile_done", "skipped"},
    "related": {"source", "related", "bounded_by"},  # elapsed_ms: in the answer only
    "links": {"source", "outgoing", "backlinks", "unresolved", "outgoing_total", "backlinks_total", "unresolved_total"},
    "reindex": {"added", "changed", "renamed", "deleted", "unchanged", "skipped", "pending_chunks", "finished_at"},
    "changes": {"since", "notes", "more"},
}


# --- output schemas ----------------------------------------------------------------------------

def test_every_tool_advertises_an_object_output_schema_that_names_its_fields(served):
    schemas = _schemas(served)
    assert set(schemas) == set(CALLS)
    for name, schema in schemas.items():
        assert schema is not None, f"{name} advertises no outputSchema"
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema.get("additionalProperties") is not True, name
        assert FIELDS[name] <= set(schema["properties"]), (name, FIELDS[name] - set(schema["properties"]))
        assert FIELDS[name] & set(schema.get("required", [])), f"{name} requires none of its fields"
    hit = schemas["search"]["properties"]["results"]["items"]  # a definition used once is inlined
    assert {"uri", "path", "heading", "score", "start_line", "end_line", "content"} <= set(hit["required"])
    assert "chunk_id" not in hit["required"] and "doc_id" not in hit["required"]


@pytest.mark.parametrize("tool", list(CALLS))
def test_the_structured_content_of_each_tool_validates_against_its_advertised_schema(served, tool):
    schema = _schemas(served)[tool]
    structured = _call(served, tool, CALLS[tool]).structured_content
    jsonschema.validate(structured, schema, cls=jsonschema.Draft202012Validator)
    # The schema is not vacuous: the same answer without a field it requires is refused.
    required = schema["required"][0]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in structured.items() if k != required}, schema,
                            cls=jsonschema.Draft202012Validator)


# --- text content --------------------------------------------------------------------------------

def test_the_search_text_is_one_block_per_hit_naming_its_path_score_and_lines_not_json(served):
    result = _call(served, "search", {"query": "tomatoes", "limit": 4})
    text, hits = _text(result), result.structured_content["results"]
    assert len(hits) >= 2
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    blocks = text.split("\n\n[")[1:]
    assert len(blocks) == len(hits)
    for rank, (block, hit) in enumerate(zip(blocks, hits), 1):
        head, meta = block.splitlines()[:2]
        assert head.startswith(f"{rank}] {hit['path']}")
        assert f"score {hit['score']:.4g}" in meta and f"lines {hit['start_line']}-{hit['end_line']}" in meta
        assert hit["content"].strip() in block
    assert '"results"' not in text and "chunk_id" not in text
    assert len(text.encode()) < len(json.dumps(result.structured_content, indent=2).encode())


def test_the_search_text_ends_with_the_flags_that_matter_and_only_those():
    from groove.search.answers import search_answer, search_text

    hit = {"chunk_id": 7, "doc_id": 3, "path": "a.md", "title": "A", "heading": "", "level": 0, "context": "A",
           "content": "alpha beta", "tags": [], "date": None, "start_line": 1, "end_line": 3, "ordinal": 0,
           "token_count": 2, "score": 0.5, "position": {"page": 4}, "fts_rank": 1, "vec_rank": None,
           "expanded_from": None, "match_spans": []}
    calm = {"results": [hit], "low_confidence": False, "filter_applied": None, "pending_chunks": 0,
            "vectors_degraded": False, "startup_reconcile_done": True}
    text = search_text(search_answer(calm))
    assert text.splitlines()[-1] == "alpha beta"
    assert "score 0.5 · lines 1-3 · page 4" in text and "chunk_id" not in text
    worried = {**calm, "low_confidence": True, "off_topic": True, "pending_chunks": 12, "vectors_degraded": True}
    last = search_text(search_answer(worried)).splitlines()[-1]
    assert "low_confidence: true" in last and "pending_chunks: 12" in last and "vectors_degraded: true" in last
    assert "off_topic: true" in last and "off_topic" not in search_text(search_answer(calm))


def test_get_document_text_is_the_note_itself_under_a_one_line_header(served):
    result = _call(served, "get_document", {"path": "garden/tomatoes.md"})
    header, rest = _text(result).split("\n---\n", 1)
    assert header.startswith("garden/tomatoes.md (Tomatoes)") and "#vegetables" in header and "2024-05-01" in header
    assert rest == result.structured_content["content"]
    assert "Feed tomatoes with potash" in rest


def test_the_other_tools_answer_text_a_reader_can_scan(served):
    listed = _text(_call(served, "list_documents", {}))
    assert [line.split(" ")[0] for line in listed.splitlines()[1:]] == sorted(NOTES)
    topics = _text(_call(served, "topics", {}))
    assert "  garden: 2" in topics and "  kitchen: 2" in topics and "  #garden: 3" in topics
    status = _text(_call(served, "index_status", {}))
    assert status.startswith(f"{len(NOTES)} note(s)") and "healthy yes" in status
    related = _text(_call(served, "related", {"path": "garden/tomatoes.md"}))
    assert "related to garden/tomatoes.md (Tomatoes)" in related.splitlines()[0]
    for text in (listed, topics, status, related):
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)


# --- uri, ids, times --------------------------------------------------------------------------------

def test_every_hit_carries_its_notes_uri_and_resources_read_opens_that_note(served):
    found = _call(served, "search", {"query": "tomatoes", "limit": 10}).structured_content["results"]
    near = _call(served, "related", {"path": "garden/tomatoes.md"}).structured_content
    listed = _call(served, "list_documents", {}).structured_content["documents"]
    hits = [(h["uri"], h["path"]) for h in found] + [(n["uri"], n["path"]) for n in near["related"]] \
        + [(d["uri"], d["path"]) for d in listed] + [(near["source"]["uri"], near["source"]["path"])]
    assert {path for _, path in hits} >= {p for p in NOTES if "tomato" in p}
    assert any(path.startswith("日本語/") for _, path in hits)

    async def read_all(client: Client) -> dict[str, str]:
        return {uri: (await client.read_resource(uri)).contents[0].text for uri in {u for u, _ in hits}}

    texts = _run(served, read_all)
    for uri, path in hits:
        assert uri.isascii()
        body = (served.kb / path).read_text(encoding="utf-8").split("---\n")[-1]  # the note without its frontmatter
        assert texts[uri].strip() == body.strip(), path
    for hit in found:
        assert hit["content"].strip() in texts[hit["uri"]]


def test_answers_carry_no_internal_ids_unless_a_search_asks_for_them(served):
    plain = _call(served, "search", {"query": "tomatoes"}).structured_content
    near = _call(served, "related", {"path": "garden/tomatoes.md"}).structured_content
    for hit in plain["results"]:
        assert not {"chunk_id", "doc_id", "ordinal", "token_count"} & set(hit)
    assert all("chunk_id" not in n["chunk"] for n in near["related"]) and near["related"]
    asked = _call(served, "search", {"query": "tomatoes", "include_ids": True})
    hits = asked.structured_content["results"]
    with sqlite3.connect(f"file:{served.index}?mode=ro", uri=True) as db:
        for hit in hits:
            row = db.execute("SELECT d.id, d.path, c.ordinal FROM chunks c JOIN documents d ON d.id = c.doc_id "
                             "WHERE c.id = ?", (hit["chunk_id"],)).fetchone()
            assert row == (hit["doc_id"], hit["path"], hit["ordinal"])
    assert f"chunk_id {hits[0]['chunk_id']}" in _text(asked)


def test_include_ids_takes_only_a_boolean(served):
    async def call(client: Client) -> types.CallToolResult:
        return await client.call_tool("search", {"query": "tomatoes", "include_ids": "yes"})

    refused = _run(served, call)  # a tool error the model reads (SEP-1303), not a JSON-RPC error
    assert refused.is_error and refused.structured_content is None
    assert "include_ids must be true or false" in _text(refused)


def _utc(value: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    assert parsed.tzinfo is not None and parsed.utcoffset() == dt.timedelta(0), value
    return parsed


def test_index_status_gives_every_time_as_iso_8601_utc(served):
    st = _call(served, "index_status", {}).structured_content
    now = dt.datetime.now(dt.timezone.utc)
    times = [st[k] for k in NON_NULL_TIMES] + [st["last_reconcile"]["at"]] \
        + [t["last_ok_at"] for t in st["tasks"].values()]
    for value in times:
        assert isinstance(value, str) and served.started <= _utc(value) <= now, value  # type: ignore[attr-defined]
    for task in st["tasks"].values():
        assert task["retry_at"] is None and task["last_error_at"] is None
    doc = _call(served, "get_document", {"path": "inbox.md"}).structured_content
    assert served.started <= _utc(doc["indexed_at"]) <= now  # type: ignore[attr-defined]


# --- topics as a resource ---------------------------------------------------------------------------------

def _counts_on_disk(kb: Path) -> tuple[dict[str, int], int]:
    folders: dict[str, int] = {}
    for p in kb.rglob("*.md"):
        rel = p.relative_to(kb)
        if len(rel.parts) > 1:
            folders[rel.parts[0]] = folders.get(rel.parts[0], 0) + 1
    return folders, sum(1 for _ in kb.rglob("*.md"))


def test_the_topics_resource_lists_the_same_counts_as_the_tool_and_the_folder(served):
    async def read(client: Client) -> tuple[list[types.ResourceTemplate], dict[str, Any]]:
        templates = (await client.list_resource_templates()).resource_templates
        kinds = {}
        for kind in ("all", "folders", "tags"):
            contents = (await client.read_resource(f"groove://topics/{kind}")).contents[0]
            assert contents.mime_type == "application/json"
            kinds[kind] = json.loads(contents.text)
        return templates, kinds

    templates, kinds = _run(served, read)
    assert "groove://topics/{kind}" in [t.uri_template for t in templates]
    tool = _call(served, "topics", {}).structured_content
    assert kinds["all"] == tool
    assert kinds["folders"]["folders"] == tool["folders"] and "tags" not in kinds["folders"]
    assert kinds["tags"]["tags"] == tool["tags"] and "folders" not in kinds["tags"]
    folders, total = _counts_on_disk(served.kb)  # type: ignore[attr-defined]
    assert {f["folder"]: f["notes"] for f in kinds["all"]["folders"]} == folders
    assert kinds["all"]["notes"] == total
    assert {t["tag"]: t["notes"] for t in kinds["tags"]["tags"]}["garden"] == 3


def test_an_unknown_topics_listing_is_invalid_params_naming_the_ones_there_are(served):
    async def read(client: Client) -> MCPError:
        with pytest.raises(MCPError) as refused:
            await client.read_resource("groove://topics/colours")
        return refused.value

    refused = _run(served, read)
    assert refused.error.code == types.INVALID_PARAMS
    assert "groove://topics/all" in refused.error.message and "groove://topics/tags" in refused.error.message
