"""Links and backlinks (issue 24 point 1): `[[wiki links]]`, embeds and Markdown links parsed outside code, resolved
as Obsidian resolves them, kept in the index in the note's own transaction, and answered by the `links` tool, the
`related` walk (`by: links | both`), `groove doctor`, `groove links` and a note's backlink count.

Real note files, a real SQLite index, the bag-of-words fake embedder (tests/support/fakes.py: these tests are about links,
not the model), a real `groove serve` reacting to real file changes, and real MCP clients over stdio and HTTP.
"""

from __future__ import annotations

import json
import subprocess
import time
import unicodedata
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

from groove.api.service import LinksRequest, RelatedRequest, Service
from groove.corpus import links as links_mod
from groove.corpus.links import links_in, note_names, resolve
from groove.corpus.markdown import parse_note
from groove.index import Index
from groove.ops import doctor
from groove.search.answers import note_uri
from groove.serve.mcp.resources import BACKLINKS_META
from groove.store.sqlite import connection, schema
from tests.support.common import ROOT, eventually, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once
from tests.support.server import FAKE_GROOVE, serve_argv, server_env

# --- parsing ----------------------------------------------------------------------------------------

BODY = """# Links

See [[Alpha]], [[beta|the second]], [[Gamma#Setup|setup]] and [[delta#^quote-1]].
An embed ![[Epsilon]] and an image ![[diagram.png]] that is no note.
A [relative](sub/dir/Note%20One.md#Install) link, an [encoded](%E6%97%A5%E8%A8%98/%E4%BB%8A%E6%97%A5.md),
a [plain one](日記/明日.md), a [web page](https://example.com/page.md) and [mail](mailto:a@b.md).

| note | why |
|------|-----|
| [[Zeta\\|z]] | in a table |
"""


def test_wiki_links_embeds_and_markdown_links_are_found_with_their_heading_alias_block_and_line():
    found = [(l.line, l.kind, l.target, l.heading, l.block, l.alias) for l in links_in(BODY, first_line=1)]
    assert found == [
        (3, "wiki", "Alpha", None, None, None),
        (3, "wiki", "beta", None, None, "the second"),
        (3, "wiki", "Gamma", "Setup", None, "setup"),
        (3, "wiki", "delta", None, "quote-1", None),
        (4, "embed", "Epsilon", None, None, None),
        (5, "markdown", "sub/dir/Note One.md", "Install", None, "relative"),
        (5, "markdown", "日記/今日.md", None, None, "encoded"),
        (6, "markdown", "日記/明日.md", None, None, "plain one"),
        (10, "wiki", "Zeta", None, None, "z"),
    ]


def test_a_link_inside_a_code_block_or_inline_code_is_not_a_link():
    body = (
        "Real: [[kept]].\n\n"
        "```markdown\n[[fenced]] and [x](fenced.md)\n```\n\n"
        "    [[indented]] in an indented code block\n\n"
        "Inline `[[spanned]]` and ``[y](spanned.md)`` are code; \\[[escaped]] is text.\n\n"
        "~~~\nan unclosed fence runs to the end: [[never]]\n"
    )
    assert [l.target for l in links_in(body)] == ["kept"]


def test_a_paragraph_too_large_for_the_inline_parser_is_read_alike_by_the_linear_scan_and_brackets_cost_little():
    line = ("See [[A]], `[[code]]`, ``a ` [[c2]] ``, [m](b%20c.md#H), ![[E]], \\[[esc]], [[T\\|al]], ![i](n.md)\n"
            "then [[B#^blk|x]]. ")
    unclosed = line + "An unclosed ` before [[U]]."
    assert links_mod._scan(unclosed) == links_mod._parsed(unclosed, {})  # the two readers agree
    times = links_mod.INLINE_PARSE_CHARS // len(line) + 2
    big = line * times  # one paragraph over the inline parser's budget: the linear scan reads it
    found = links_in(big)
    assert [l.target for l in found] == ["A", "b c.md", "E", "T", "n.md", "B"] * times
    assert found[-1].line == big.count("\n") + 1  # lines counted all the same
    started = time.perf_counter()
    assert links_in("[[" * 500_000 + "\n\n" + "[" * 500_000 + "]]") == ()  # a hostile note of brackets
    assert time.perf_counter() - started < 10  # markdown-it's inline parser alone: minutes (quadratic here)


def test_the_line_of_a_link_is_the_files_own_line_frontmatter_counted():
    text = "---\ntitle: T\ntags: [a]\n---\n# T\n\nIntro.\n\n## Part\n\nSee [[Far]].\n"
    parsed = parse_note(text, stem="t")
    assert [(l.line, l.target) for l in parsed.links] == [(11, "Far")]
    assert text.splitlines()[10] == "See [[Far]]."


# --- resolution -------------------------------------------------------------------------------------

NOTES = [(1, "Alpha.md", 0), (2, "archive/alpha.md", 0), (3, "projects/deep/alpha.md", 0)]


def test_a_bare_name_resolves_case_insensitively_to_the_shortest_path_or_the_linking_notes_own_folder():
    assert resolve("alpha", "wiki", "inbox.md", NOTES) == 1           # the exact spelling is not needed ...
    assert resolve("ALPHA", "wiki", "inbox.md", NOTES) == 1           # ... and the shortest path wins
    assert resolve("alpha", "wiki", "archive/index.md", NOTES) == 2   # unless one sits beside the linking note
    assert resolve("alpha", "wiki", "x.md", NOTES[1:]) == 2           # fewest folders
    assert resolve("alpha", "wiki", "x.md", []) is None


def test_a_path_resolves_from_the_linking_note_then_from_the_top_then_as_the_end_of_a_path():
    assert resolve("deep/alpha", "wiki", "inbox.md", NOTES) == 3                   # the end of a path
    assert resolve("archive/alpha", "wiki", "projects/x.md", NOTES) == 2           # from the top
    assert resolve("../archive/alpha.md", "markdown", "projects/x.md", NOTES) == 2  # relative to the linking note
    assert resolve("alpha.md", "markdown", "archive/x.md", NOTES) == 2              # a Markdown link is relative
    assert resolve("/Alpha.md", "markdown", "archive/x.md", NOTES) == 1             # '/': the top of the folder
    assert resolve("nowhere/alpha", "wiki", "x.md", NOTES) is None                  # a path that names no note
    assert resolve("../../../alpha.md", "markdown", "a/b.md", NOTES) is None        # above the folder: nothing


def test_japanese_names_resolve_whatever_their_unicode_form_or_width():
    nfd = unicodedata.normalize("NFD", "議事録/ガイドライン.md")  # as macOS writes file names
    half = "ﾒﾓ.md"
    notes = [(1, nfd, 0), (2, half, 0)]
    name = lambda path: note_names(path, None, {})[0][0]  # noqa: E731
    assert name(nfd) == name("ガイドライン.md") and name(half) == name("メモ.md")
    assert resolve("ガイドライン", "wiki", "x.md", [c for c in notes if name(c[1]) == name("ガイドライン")]) == 1
    assert resolve("メモ", "wiki", "x.md", [c for c in notes if name(c[1]) == name("メモ")]) == 2


def test_an_alias_or_title_names_a_note_only_when_no_file_has_that_name():
    names = dict(note_names("ref/sqlite-wal.md", "SQLite WAL mode", {"aliases": ["WAL", "write-ahead log"]}))
    assert names == {"sqlite-wal": 0, "sqlite wal mode": 1, "wal": 1, "write-ahead log": 1}
    assert resolve("WAL", "wiki", "x.md", [(7, "ref/sqlite-wal.md", 1)]) == 7
    assert resolve("WAL", "wiki", "x.md", [(7, "ref/sqlite-wal.md", 1), (8, "WAL.md", 0)]) == 8
    assert resolve("ref/WAL", "wiki", "x.md", [(7, "ref/sqlite-wal.md", 1)]) is None  # a path is a file's


# --- the index ----------------------------------------------------------------------------------------

VAULT = {
    "index.md": "# Index\n\n- [[会議メモ]]\n- [[Project Plan#Goals|goals]]\n- [[missing note]]\n- ![[photo.jpg]]\n",
    "work/会議メモ.md": "# 会議メモ\n\n決定事項は [[project plan]] に書く。\n\n```\n[[not a link]]\n```\n",
    "work/Project Plan.md": "---\naliases: [plan]\ntags: [work]\n---\n# Project Plan\n\n## Goals\n\nShip it. See [the notes](%E4%BC%9A%E8%AD%B0%E3%83%A1%E3%83%A2.md).\n",
    "journal/today.md": "# Today\n\nRead the [[plan]] again; `[[index]]` is code.\n",
}


def vault(kb: Path) -> None:
    for path, text in VAULT.items():
        write(kb / path, text)


def build(settings, embedder: BagOfWordsEmbedder | None = None):
    return anyio.run(lambda: index_once(settings, embedder=embedder or BagOfWordsEmbedder()))


async def _service(settings, fn):
    async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as index:
        return await fn(Service(index))


def ask(settings, fn) -> Any:
    return anyio.run(lambda: _service(settings, fn))


def links_of(settings, path: str) -> dict[str, Any]:
    return ask(settings, lambda s: s.links(LinksRequest(path=path))).model_dump(mode="json")


def test_indexing_stores_each_notes_links_resolved_and_a_note_knows_its_backlinks(kb, make_settings):
    vault(kb)
    settings = make_settings(kb)
    build(settings)
    top = links_of(settings, "index.md")
    assert [(o["path"], o["line"], o["heading"], o["alias"]) for o in top["outgoing"]] == [
        ("work/会議メモ.md", 3, None, None), ("work/Project Plan.md", 4, "Goals", "goals")]
    assert [(u["path"], u["line"], u["uri"]) for u in top["unresolved"]] == [("missing note", 5, None)]
    plan = links_of(settings, "work/Project Plan.md")
    # [[project plan]] (any case), [[Project Plan#Goals]] and [[plan]] (its alias); the code span is no link.
    assert [(b["path"], b["line"]) for b in plan["backlinks"]] == [
        ("index.md", 4), ("journal/today.md", 3), ("work/会議メモ.md", 3)]
    assert plan["backlink_notes"] == 3 and plan["backlinks"][0]["uri"] == note_uri("index.md")
    assert [o["path"] for o in plan["outgoing"]] == ["work/会議メモ.md"]  # the URL-encoded Markdown link
    doc = ask(settings, lambda s: s.get_document("work/会議メモ.md"))
    assert doc.backlinks == 2  # index.md and Project Plan.md; a note linking twice counts once


def test_an_index_of_schema_6_is_upgraded_with_links_filled_from_its_chunks_and_nothing_embedded(
        kb, make_settings, monkeypatch):
    vault(kb)
    settings = make_settings(kb)
    build(settings)
    path = settings.resolved_index_path()
    con = connection.connect_sync(path)
    fresh = con.execute("SELECT source_id, line, kind, target, name, heading, block, alias, target_id FROM links"
                        " ORDER BY id").fetchall()
    before = con.execute("SELECT id, indexed_at FROM documents ORDER BY id").fetchall()
    computed = schema.get_meta_sync(con, "embeddings_computed")
    con.execute("DROP TABLE links")  # what an index of schema 6 was: no link tables
    con.execute("DROP TABLE note_names")
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()
    for later in range(7, schema.SCHEMA_VERSION):  # only the links step runs here: the later ones are other tests'
        monkeypatch.setitem(schema.MIGRATIONS, later, "")
    embedder = BagOfWordsEmbedder()
    again = build(settings, embedder)
    assert again.unchanged == len(VAULT) and embedder.document_calls == 0  # nothing read again, nothing embedded
    con = connection.connect_sync(path, readonly=True)
    try:
        assert con.execute("SELECT source_id, line, kind, target, name, heading, block, alias, target_id FROM links"
                           " ORDER BY source_id, line, id").fetchall() == sorted(fresh, key=lambda r: (r[0], r[1]))
        assert con.execute("SELECT id, indexed_at FROM documents ORDER BY id").fetchall() == before
        assert schema.get_meta_sync(con, "embeddings_computed") == computed
        assert int(schema.get_meta_sync(con, "schema_version")) == schema.SCHEMA_VERSION
    finally:
        con.close()


def test_doctor_lists_each_unresolved_link_with_its_path_and_line_as_information(kb, make_settings):
    vault(kb)
    settings = make_settings(kb)
    build(settings)
    found = {f["check"]: f for f in doctor.diagnose(settings)["findings"]}
    assert found["links_unresolved"]["level"] == "info" and found["links_unresolved"]["count"] == 1
    assert found["links_unresolved"]["examples"] == ["index.md:5 [[missing note]]"]  # not the photo: no note
    write(kb / "missing note.md", "# Missing note\n\nHere now.\n")
    build(settings)
    assert "links_unresolved" not in {f["check"] for f in doctor.diagnose(settings)["findings"]}


def test_doctor_finds_links_resolved_to_the_wrong_note_and_fix_resolves_them_again(kb, make_settings):
    vault(kb)
    settings = make_settings(kb)
    build(settings)
    con = connection.connect_sync(settings.resolved_index_path())
    con.execute("UPDATE links SET target_id = NULL")
    con.close()
    assert doctor.diagnose(settings)["exit_code"] == 1
    fixed = doctor.diagnose(settings, fix=True)
    assert "resolved every link again from the notes' names" in fixed["fixed"]
    assert "links_stale" not in {f["check"] for f in fixed["findings"]}
    assert links_of(settings, "work/Project Plan.md")["backlink_notes"] == 3


def related(settings, **kw) -> dict[str, Any]:
    return ask(settings, lambda s: s.related(RelatedRequest(**kw))).model_dump(mode="json", exclude_unset=True)


def test_related_walks_links_both_ways_and_the_graph_controls_leave_notes_out(kb, make_settings):
    vault(kb)
    settings = make_settings(kb)
    build(settings)
    walked = related(settings, path="work/Project Plan.md", by="links")
    by_path = {n["path"]: n for n in walked["related"]}
    assert set(by_path) == {"index.md", "journal/today.md", "work/会議メモ.md"}
    assert by_path["work/会議メモ.md"]["link"]["direction"] == "both" and by_path["work/会議メモ.md"]["link"]["links"] == 2
    assert by_path["index.md"]["link"] == {"direction": "backlink", "links": 1, "line": 4, "heading": "Goals",
                                           "alias": "goals"}
    assert all(n["by"] == "links" and n["chunk"] is None and n["score"] == 1.0 for n in walked["related"])
    two = related(settings, path="journal/today.md", by="links", depth=2)
    assert {(n["path"], n["depth"]) for n in two["related"]} == {
        ("work/Project Plan.md", 1), ("index.md", 2), ("work/会議メモ.md", 2)}
    kept = related(settings, path="work/Project Plan.md", by="links", exclude_paths=["work/**"],
                   filters={"path_globs": ["!journal/**"]})
    assert [n["path"] for n in kept["related"]] == ["index.md"]
    assert kept["params"]["exclude_paths"] == ["work/**"] and kept["params"]["by"] == "links"
    both = related(settings, path="work/Project Plan.md", by="both", fan_out=5)
    assert {"index.md", "journal/today.md", "work/会議メモ.md"} <= {n["path"] for n in both["related"]}
    meaning = related(settings, path="work/Project Plan.md")  # the default: as before, no link fields
    assert meaning["related"] and all("link" not in n and n["chunk"] for n in meaning["related"])
    assert related(settings, path="work/Project Plan.md", min_similarity=1.0)["related"] == []


# --- the daemon, real file changes, a real MCP client over HTTP, and `groove links` -----------------------

def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def groove(spawn, *argv: str, root: Path) -> subprocess.CompletedProcess[str]:
    return spawn.run([*FAKE_GROOVE, *argv], cwd=ROOT, env=server_env(root), capture_output=True, text=True,
                          timeout=120)


def test_over_http_the_daemon_keeps_backlinks_current_as_notes_are_renamed_deleted_and_created(spawn, tmp_path):
    kb = tmp_path / "notes"
    write(kb / "hub.md", "# Hub\n\nStart at [[target]].\n\n```\n[[target]] in code\n```\n")
    write(kb / "target.md", "# Target\n\nThe note everything points at.\n")
    index = tmp_path / "index.sqlite"
    server = spawn.server(kb, index, tmp_path, command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        server.wait_indexed(2)

        async def links(client: Client, path: str) -> dict[str, Any]:
            result = await client.call_tool("links", {"path": path})
            assert not result.is_error, _text(result)
            return result.structured_content

        async def scenario() -> None:
            async with server.client() as client:
                assert [(b["path"], b["line"]) for b in (await links(client, "target.md"))["backlinks"]] == [("hub.md", 3)]

                (kb / "archive").mkdir()
                (kb / "target.md").rename(kb / "archive" / "target.md")  # a rename: the backlinks move with it

                async def moved() -> bool:
                    try:
                        found = await links(client, "archive/target.md")
                    except AssertionError:
                        return False
                    return [b["path"] for b in found["backlinks"]] == ["hub.md"]
                await eventually(moved, "the renamed note's backlinks")
                hub = await links(client, "hub.md")
                assert [o["path"] for o in hub["outgoing"]] == ["archive/target.md"] and not hub["unresolved"]
                doc = (await client.call_tool("get_document", {"path": "archive/target.md"})).structured_content
                assert doc["backlinks"] == 1
                read = await client.read_resource(note_uri("archive/target.md"))
                assert read.contents[0].meta == {BACKLINKS_META: 1}

                (kb / "archive" / "target.md").unlink()  # a delete: the link names nothing now

                async def dangling() -> bool:
                    found = await links(client, "hub.md")
                    return [(u["path"], u["line"]) for u in found["unresolved"]] == [("target", 3)]
                await eventually(dangling, "the hub's link to the deleted note unresolved")

                write(kb / "Target.md", "# Target again\n\nBack, spelled with a capital.\n")  # created: resolved

                async def back() -> bool:
                    found = await links(client, "hub.md")
                    return [o["path"] for o in found["outgoing"]] == ["Target.md"] and not found["unresolved"]
                await eventually(back, "the hub's link resolved to the new note")

                walked = await client.call_tool("related", {"path": "hub.md", "by": "links"})
                assert not walked.is_error, _text(walked)
                assert [n["path"] for n in walked.structured_content["related"]] == ["Target.md"]

                for bad, says in (({"path": "nope.md"}, "no indexed note at 'nope.md'"),
                                  ({"path": "../outside.md"}, "outside"),
                                  ({"path": "hub.md", "limit": 0}, "limit must be between 1 and 500")):
                    refused = await client.call_tool("links", bad)
                    assert refused.is_error and says in _text(refused), (bad, _text(refused))
                    assert "\n" not in _text(refused)

        anyio.run(scenario)

        # `groove links` asks the running daemon, and answers in process without one, alike.
        for how in ((), ("--no-daemon",)):
            done = groove(spawn, "links", str(kb / "Target.md"), "--kb", str(kb), "--index", str(index), "--format",
                          "json", *how, root=tmp_path)
            assert done.returncode == 0, done.stderr
            assert [b["path"] for b in json.loads(done.stdout)["backlinks"]] == ["hub.md"], how
            assert ("asked the running groove serve" in done.stderr) == (not how)
        text = groove(spawn, "links", "hub.md", "--kb", str(kb), "--index", str(index), root=tmp_path)
        assert "line 3 [[target]] → Target.md" in text.stdout
        bad = groove(spawn, "links", "nope.md", "--kb", str(kb), "--index", str(index), "--no-daemon", root=tmp_path)
        assert bad.returncode != 0 and "no indexed note at 'nope.md'" in bad.stderr
    finally:
        server.terminate()


# --- a real MCP client over stdio -----------------------------------------------------------------------

def test_the_links_tool_answers_a_real_client_over_stdio_with_japanese_note_names(spawn, tmp_path, make_settings):
    kb = tmp_path / "notes"
    vault(kb)
    index = tmp_path / "index.sqlite"
    build(make_settings(kb, index_path=index))  # the server starts on an up-to-date index
    argv = serve_argv(kb, index, "--transport", "stdio", command=FAKE_GROOVE)
    params = spawn.stdio(command=argv[0], args=argv[1:], env=server_env(tmp_path), cwd=str(tmp_path))

    async def scenario() -> None:
        with anyio.fail_after(120):
            async with Client(params) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert "links" in tools and "backlinks" in tools["links"].description
                assert set(tools["related"].input_schema["properties"]["by"]["enum"]) == {"meaning", "links", "both"}
                found = await client.call_tool("links", {"path": "work/会議メモ.md"})
                assert not found.is_error, _text(found)
                answer = found.structured_content
                assert [(b["path"], b["line"]) for b in answer["backlinks"]] == [("index.md", 3),
                                                                                  ("work/Project Plan.md", 9)]
                assert answer["outgoing"][0]["path"] == "work/Project Plan.md"
                assert "index.md:3 [[会議メモ]]" in _text(found)
                refused = await client.call_tool("links", {"path": "work/存在しない.md"})
                assert refused.is_error and "no indexed note" in _text(refused)

    anyio.run(scenario)
