"""Every path search returns opens (issue 22 point 12): a real daemon over a real index, the MCP server
in process. A backslash and a `%` are ordinary characters of a POSIX file name; what no note's path can
be (`..`, an absolute path, NUL) is still refused, and so is a backslash or an encoded separator that
names no note."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from groove.daemon import Daemon
from groove.search.pipeline import SearchRequest
from groove.serve.mcp.server import build_server
from tests.support.common import write
from tests.support.fakes import BagOfWordsEmbedder

ODD_NAMES = ["back\\slash.md", "%2e%2e%2fx.md", "dir/50%25 off.md", "dir/a\\..\\b.md"]


@asynccontextmanager
async def served(settings) -> AsyncIterator[tuple[Daemon, Client]]:
    daemon = Daemon(settings, embedder=BagOfWordsEmbedder())
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        with anyio.fail_after(60):
            await daemon.reconciled.wait()
        try:
            async with Client(build_server(daemon)) as client:
                yield daemon, client
        finally:
            daemon.stop()


async def test_a_note_named_with_a_backslash_or_percent_signs_opens_as_search_returned_it(kb: Path, make_settings):
    for i, name in enumerate(ODD_NAMES):
        write(kb / name, f"# Odd {i}\n\noddnameword{i} sits in this note.\n")
    write(kb / "outside-ish.md", "# Plain\n\nplainword\n")
    async with served(make_settings(kb)) as (daemon, client):
        for i, name in enumerate(ODD_NAMES):
            found = await daemon.index.search(SearchRequest(query=f"oddnameword{i}", retriever="fts", limit=5))
            hit = (found if isinstance(found, dict) else found.model_dump(mode="json"))["results"][0]
            assert hit["path"] == name
            doc = await client.call_tool("get_document", {"path": hit["path"]})
            assert not doc.is_error, doc.content
            assert doc.structured_content["path"] == name and f"oddnameword{i}" in doc.structured_content["content"]
            read = await client.read_resource(doc.structured_content["uri"])
            assert f"oddnameword{i}" in read.contents[0].text
            related = await client.call_tool("related", {"path": name})
            assert not related.is_error or "no vectors yet" in related.content[0].text


@pytest.mark.parametrize("path, reason", [
    ("..\\outside\\secret.md", "contains a backslash"),
    ("..%2Foutside%2Fsecret.md", "percent-encoded"),
    ("../outside/secret.md", "steps out of the notes folder"),
    ("/etc/passwd", "is absolute"),
])
async def test_a_traversal_that_names_no_note_is_still_refused(kb: Path, make_settings, path, reason):
    write(kb / "back\\slash.md", "# Odd\n\noddword\n")
    async with served(make_settings(kb)) as (_, client):
        refused = await client.call_tool("get_document", {"path": path})  # a tool error the model reads
        with pytest.raises(MCPError) as unread:  # a resource read: JSON-RPC invalid params
            await client.read_resource("groove://note/" + path.replace("\\", "%5C").lstrip("/"))
    assert refused.is_error and reason in refused.content[0].text
    assert unread.value.error.code == types.INVALID_PARAMS
