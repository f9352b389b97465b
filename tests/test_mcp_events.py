"""Change notifications and resource pages, in process against a stand-in daemon (no model, no files).

The end-to-end tests (test_mcp_http.py) prove the whole path from a file edit
to a client; these pin the bookkeeping: who hears what, and that a client
that went away is forgotten.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from groove.api.answers import DocumentAnswer, DocumentPage, document_answer, document_page
from groove.api.service import ListRequest
from groove.errors import NotFoundError
from groove.folders import Folders, NotesFolder
from groove.search.compiler import QueryError
from groove.serve.mcp.server import build_server, events_of, note_uri

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")


class StandInDaemon:
    """The parts of Daemon the MCP layer uses, over an in-memory dict of notes: its listeners, and the
    service API (`daemon.service`, a `groove.api.service.Service`), which the stand-in answers itself."""

    def __init__(self, notes: dict[str, str]):
        self.notes = dict(notes)
        self.listeners: list[Any] = []
        self.reconciled = anyio.Event()
        self.reconciled.set()
        self.service = self
        self.folders = Folders([NotesFolder("notes", Path("/notes"))])  # one folder, as the service has it
        self.search_only = False  # a daemon that indexes its folder (not a search node of a shared store)

    async def list_documents(self, req: ListRequest) -> DocumentPage:
        cursor, limit = req.cursor, req.limit
        try:
            after = bytes.fromhex(cursor).decode() if cursor else ""
        except ValueError as exc:  # as the real index does: a groove error with the reason
            raise QueryError("invalid cursor; pass next_cursor from the previous page unchanged") from exc
        paths = sorted(p for p in self.notes if p > after)
        page = paths[:limit]
        more = len(paths) > limit
        return document_page({
            "documents": [{"path": p, "title": p.rsplit("/", 1)[-1], "tags": [], "date": None} for p in page],
            "next_cursor": page[-1].encode().hex() if more else None,
        })

    async def get_document(self, path: str) -> DocumentAnswer:
        if path not in self.notes:
            raise NotFoundError(f"no indexed note at {path!r}")
        return document_answer({"path": path, "title": path.rsplit("/", 1)[-1], "tags": [], "date": None,
                                "frontmatter": {}, "warnings": [], "indexed_at": None,
                                "size": len(self.notes[path].encode()), "content": self.notes[path]})

    async def changed(self, paths: list[str], list_changed: bool) -> None:
        for listener in self.listeners:
            await listener(paths, list_changed)


async def _wait_for(items: list[Any], predicate, what: str) -> None:
    """Wait until some item satisfies predicate; fail naming `what` and what did arrive."""
    with anyio.move_on_after(5):
        while not any(predicate(i) for i in items):
            await anyio.sleep(0.01)
        return
    raise AssertionError(f"timed out waiting for {what}; heard {items!r}")


def _updated(m: Any) -> bool:
    return isinstance(m, types.ResourceUpdatedNotification)


async def test_a_subscriber_hears_only_its_notes_and_everyone_hears_list_changes():
    daemon = StandInDaemon({"a.md": "A", "b.md": "B"})
    server = build_server(daemon)  # type: ignore[arg-type]
    events = events_of(server)
    heard_1: list[Any] = []
    heard_2: list[Any] = []

    async def h1(m: Any) -> None:
        heard_1.append(m)

    async def h2(m: Any) -> None:
        heard_2.append(m)

    async with Client(server, mode="legacy", message_handler=h1) as one, \
            Client(server, mode="legacy", message_handler=h2) as two:
        await one.subscribe_resource(note_uri("a.md"))
        await two.list_tools()  # any request makes a connection known
        assert events.connection_count == 2 and events.subscriber_count("a.md") == 1

        await daemon.changed(["b.md"], False)
        await daemon.changed(["a.md"], False)
        await _wait_for(heard_1, _updated, "resources/updated for a.md")
        assert [m.params.uri for m in heard_1 if isinstance(m, types.ResourceUpdatedNotification)] == [note_uri("a.md")]
        assert heard_2 == []

        await daemon.changed(["c.md"], True)
        for heard in (heard_1, heard_2):
            await _wait_for(heard, lambda m: isinstance(m, types.ResourceListChangedNotification), "resources/list_changed")

        await one.unsubscribe_resource(note_uri("a.md"))
        assert events.subscriber_count("a.md") == 0
    # Both connections closed: forgotten, and a change after that sends nothing anywhere.
    with anyio.fail_after(5):
        while events.connection_count:
            await anyio.sleep(0.01)
    counts = (len(heard_1), len(heard_2))
    await daemon.changed(["a.md"], True)  # must not fail on, or deliver to, the closed connections
    assert events.connection_count == 0 and events.subscriber_count("a.md") == 0
    # A new subscriber hears the next change exactly once; the closed ones hear nothing more.
    heard_3: list[Any] = []

    async def h3(m: Any) -> None:
        heard_3.append(m)

    async with Client(server, mode="legacy", message_handler=h3) as three:
        await three.subscribe_resource(note_uri("a.md"))
        await daemon.changed(["a.md"], False)
        await _wait_for(heard_3, _updated, "the new subscriber's resources/updated")
        await three.list_tools()  # a round trip: anything else already sent has arrived by now
    assert [m.params.uri for m in heard_3 if _updated(m)] == [note_uri("a.md")]
    assert (len(heard_1), len(heard_2)) == counts


async def test_subscribing_to_something_that_is_not_a_note_uri_is_invalid_params():
    server = build_server(StandInDaemon({}))  # type: ignore[arg-type]
    async with Client(server, mode="legacy") as client:
        with pytest.raises(MCPError) as err:
            await client.subscribe_resource("https://example.com/x")
    assert err.value.error.code == types.INVALID_PARAMS


async def test_one_connection_holds_at_most_a_thousand_subscriptions_and_the_next_is_refused_naming_the_bound():
    notes = {f"n{i:04d}.md": "x" for i in range(1_001)}
    server = build_server(StandInDaemon(notes))  # type: ignore[arg-type]
    async with Client(server, mode="legacy") as client:
        for path in list(notes)[:1_000]:
            await client.subscribe_resource(note_uri(path))
        await client.subscribe_resource(note_uri("n0000.md"))  # again: still one subscription
        with pytest.raises(MCPError) as err:
            await client.subscribe_resource(note_uri("n1000.md"))
        assert err.value.error.code == types.INVALID_PARAMS
        assert "subscribed to 1000 notes, the most groove keeps for one" in err.value.error.message
        await client.unsubscribe_resource(note_uri("n0001.md"))
        await client.subscribe_resource(note_uri("n1000.md"))  # room again
    assert events_of(server).connection_count == 0  # the closed connection and its subscriptions are forgotten


async def test_a_listen_stream_gets_the_events_it_asked_for():
    from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated

    daemon = StandInDaemon({"a.md": "A"})
    server = build_server(daemon)  # type: ignore[arg-type]
    async with Client(server) as client:
        async with client.listen(resources_list_changed=True, resource_subscriptions=[note_uri("a.md")]) as sub:
            await daemon.changed(["z.md"], False)      # not asked for
            await daemon.changed(["a.md"], False)
            await daemon.changed(["new.md"], True)
            got: list[Any] = []
            with anyio.fail_after(5):
                async for event in sub:
                    got.append(event)
                    if isinstance(event, ResourcesListChanged):
                        break
    assert ResourceUpdated(uri=note_uri("a.md")) in got
    assert ResourceUpdated(uri=note_uri("z.md")) not in got


async def test_resources_come_in_pages_of_100_with_a_cursor():
    daemon = StandInDaemon({f"n/{i:03d}.md": str(i) for i in range(250)})
    server = build_server(daemon)  # type: ignore[arg-type]
    async with Client(server) as client:
        pages = [await client.list_resources()]
        while pages[-1].next_cursor:
            pages.append(await client.list_resources(cursor=pages[-1].next_cursor))
        assert [len(p.resources) for p in pages] == [100, 100, 50]
        read = await client.read_resource(note_uri("n/249.md"))
        assert read.contents[0].text == "249"
        with pytest.raises(MCPError) as bad:
            await client.list_resources(cursor="zz")
    assert bad.value.error.code == types.INVALID_PARAMS
