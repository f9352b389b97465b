"""What only the shared store does, against a real PostgreSQL server with pgvector (tests/support/postgres.py).

The reads and writes every store answers alike are tests/test_store_contract.py's. Here: how a database that
cannot be used is refused (no driver, no server, a wrong password, no pgvector, a newer schema, another
program's tables), each in one line that never shows the password; one indexer per notes folder; two
indexers' embedding workers never taking one text; a change one process commits reaching another's
listeners; the eval history kept in the store; `groove store copy` both ways answering every search alike;
and, as separate processes over real HTTP, two indexers and a search node, one of them killed with SIGKILL.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from groove.api.service import ChangesRequest, EvalRequest, Service
from groove.cli import main
from groove.config import load_settings
from groove.index import Index
from groove.ops.doctor import diagnose
from groove.search.request import SearchRequest
from groove.store.address import address, redact
from groove.store.copy import copy_store
from groove.store.postgres.schema import SCHEMA_VERSION
from groove.store.protocols import StoreError
from groove.sync.report import iso_time
from tests.support.common import EXAMPLES, note, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.postgres import with_database
from tests.support.server import FAKE_GROOVE

SECRET = "hunter2-never-shown"


def notes(kb: Path, **texts: str) -> Path:
    for name, body in texts.items():
        write(kb / f"{name}.md", note(name.replace("_", " ").title(), body))
    return kb


def settings_for(kb: Path | None, url: str, **overrides: Any) -> Any:
    return load_settings(None, kb_path=kb, **{"store.url": url, **overrides})


async def index_into(settings: Any, embedder: Any = None) -> Any:
    async with Index.open(settings, embedder=embedder or BagOfWordsEmbedder()) as ix:
        return await Service(ix).reindex()


async def search(settings: Any, query: str, retriever: str = "hybrid") -> list[str]:
    async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as ix:
        answer = await Service(ix).search(SearchRequest(query=query, retriever=retriever))
    return [h.path for h in answer.results]


def groove_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def until(check: Any, what: str, timeout: float = 30.0) -> None:
    """Poll `check` (a blocking call) until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.2)


def with_password(url: str, password: str) -> str:
    """The same URL with `password` in it (the test server trusts its local users: the password is ignored)."""
    scheme, rest = url.split("://", 1)
    user, _, host = rest.partition("@")
    return f"{scheme}://{user.split(':', 1)[0]}:{password}@{host}"


# --- a database that cannot be used -------------------------------------------------------------------------


def test_without_its_driver_the_postgresql_store_says_how_to_install_it(monkeypatch, capsys, kb):
    for name in [m for m in sys.modules if m == "groove.store.postgres" or m.startswith("groove.store.postgres.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as on an install without the [postgres] extra
    code, _, err = groove_cli(capsys, "status", "--kb", str(kb), "--store", "postgresql://groove@db.example/groove")
    assert code == 1
    assert err.strip() == (
        "groove: error: the PostgreSQL store needs its driver, which is not installed (psycopg is missing): "
        "pip install 'groove[postgres]'"
    )


def test_a_server_that_cannot_be_reached_is_named_in_one_line_without_its_password(capsys, kb):
    url = f"postgresql://groove:{SECRET}@127.0.0.1:1/groove"  # nothing listens on port 1
    code, _, err = groove_cli(capsys, "index", "--kb", str(notes(kb, a="text")), "--store", url)
    errors = [line for line in err.splitlines() if line.startswith("groove: error:")]
    assert code == 1 and len(errors) == 1
    assert "cannot reach the PostgreSQL server of postgresql://groove:***@127.0.0.1:1/groove" in err
    assert SECRET not in err


def test_a_wrong_password_is_refused_saying_where_the_right_one_goes_and_never_shown(postgres_server, kb, monkeypatch):
    role = postgres_server.role("groove_pw", "the-right-one", superuser=True)
    database = with_database(role, postgres_server.database().split("?")[0].rsplit("/", 1)[-1])
    settings = settings_for(notes(kb, a="alpha text"), with_password(database, SECRET))
    with pytest.raises(StoreError) as refused:
        anyio.run(index_into, settings)
    message = str(refused.value)
    assert message.startswith(f"PostgreSQL refused the password for {with_password(database, '***')}")
    assert "PGPASSWORD or ~/.pgpass" in message and SECRET not in message
    monkeypatch.setenv("PGPASSWORD", "the-right-one")  # where libpq reads it: the URL needs none
    report = anyio.run(index_into, settings_for(kb, database))
    assert report.added == 1


def test_a_user_who_may_not_create_pgvector_is_told_to_ask_the_database_owner(postgres_server, kb):
    owner = postgres_server.role("groove_owner")  # owns its database, may not create untrusted extensions
    url = postgres_server.owned_database(owner)
    with pytest.raises(StoreError, match=r"has no vector extension and this user may not create it: ask its owner "
                                         r"to run CREATE EXTENSION vector;"):
        anyio.run(index_into, settings_for(notes(kb, a="alpha"), url))


def test_processes_starting_together_on_a_new_database_all_create_the_extensions_without_an_error(postgres):
    # CREATE EXTENSION IF NOT EXISTS does not lock: two indexers launched at once on a fresh database both saw
    # no pgvector, both created it, and the second one failed with a unique violation (CI, 2026-12-06).
    from groove.store.postgres.connection import EXTENSIONS, ensure_extensions

    async def together() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(ensure_extensions, postgres)

    anyio.run(together)
    with psycopg.connect(postgres) as conn:
        have = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
    assert set(EXTENSIONS) <= have


def test_a_store_written_by_a_newer_groove_is_refused_and_left_as_it_was(postgres, kb):
    settings = settings_for(notes(kb, a="alpha text", b="beta text"), postgres)
    anyio.run(index_into, settings)
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    for readonly in (False, True):
        with pytest.raises(StoreError, match=r"has schema version 99, written by a newer groove than this one "
                                             rf"\(it understands {SCHEMA_VERSION}\): upgrade groove on this machine"):
            anyio.run(lambda: Index.open(settings, readonly=readonly, embedder=BagOfWordsEmbedder()).__aenter__())
    with psycopg.connect(postgres, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM documents").fetchone() == (2,)
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("99",)


def test_a_store_of_schema_1_is_migrated_on_open_and_searches_as_before(postgres, kb):
    """Version 2 carries tf and dl in the postings' index (an index-only scan for bm25): a version-1 store gets it
    when a writer opens it, in place, with its notes and rankings unchanged; a reader is told to run one first."""
    settings = settings_for(notes(kb, a="alpha text about quokkas", b="beta text", c="quokka quokka gamma"), postgres)
    anyio.run(index_into, settings)
    now = {r: anyio.run(search, settings, "quokka text", r) for r in ("fts", "hybrid")}
    with psycopg.connect(postgres, autocommit=True) as conn:  # as version 1 made it
        conn.execute("ALTER TABLE postings DROP CONSTRAINT postings_pkey, ADD PRIMARY KEY (kind, term, chunk_id)")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=r"has schema version 1; run `groove index --store URL` once to upgrade it "
                                         r"\(nothing is embedded again\)"):
        anyio.run(search, settings, "quokka text", "fts")  # a reader does not change the store: it says what will
    anyio.run(index_into, settings)
    with psycopg.connect(postgres, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        definition = conn.execute("SELECT pg_get_indexdef('postings_pkey'::regclass)").fetchone()[0]
        assert definition.endswith("(kind, term, chunk_id) INCLUDE (tf, dl)"), definition
        assert conn.execute("SELECT count(*) FROM documents").fetchone() == (3,)
    assert {r: anyio.run(search, settings, "quokka text", r) for r in now} == now
    assert set(now["fts"][:2]) == {"notes/a.md", "notes/c.md"}


def test_a_database_holding_another_programs_tables_is_refused_and_left_as_it_was(postgres, kb):
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int PRIMARY KEY, total numeric)")
    with pytest.raises(StoreError, match=r"holds other tables \(invoices\) and no groove store: give groove a "
                                         r"database of its own"):
        anyio.run(index_into, settings_for(notes(kb, a="alpha"), postgres))
    with psycopg.connect(postgres, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    assert tables == ["invoices"]


def test_searching_a_database_nobody_indexed_into_says_what_to_run_first(postgres, capsys):
    code, _, err = groove_cli(capsys, "search", "--store", postgres, "anything")
    assert code == 1
    assert "no groove store in the database" in err and "run `groove index --store URL` first" in err


# --- several processes, one store ------------------------------------------------------------------------------


def test_a_second_indexer_of_the_same_folder_is_refused_naming_the_first_until_it_stops(postgres, kb):
    settings = settings_for(notes(kb, a="alpha text"), postgres)

    async def go() -> str:
        async with Index.open(settings, embedder=BagOfWordsEmbedder()):
            with pytest.raises(StoreError) as refused:
                await Index.open(settings, embedder=BagOfWordsEmbedder()).__aenter__()
        async with Index.open(settings, embedder=BagOfWordsEmbedder()) as again:  # the first one closed
            assert again.writable
        return str(refused.value)

    message = anyio.run(go)
    assert message.startswith(f"the notes folder '{kb.name}' is already indexed into ")
    assert "(pid " in message and "search nodes need no folder" in message


def test_two_indexers_embedding_at_once_never_take_the_same_text_and_a_released_one_is_taken_again(
        postgres, tmp_path):
    first = notes(tmp_path / "first", **{f"n{i}": f"first folder note number {i} about topic{i}" for i in range(12)})
    second = notes(tmp_path / "second", **{f"m{i}": f"second folder note {i} about theme{i}" for i in range(12)})

    async def go() -> None:
        async with Index.open(settings_for(first, postgres), embedder=BagOfWordsEmbedder()) as a, \
                Index.open(settings_for(second, postgres), embedder=BagOfWordsEmbedder()) as b:
            await a.reconcile()
            await b.reconcile()
            qa, qb = a.store.queue(), b.store.queue()
            pending = await qa.pending_count()
            assert pending == 24
            taken: dict[str, list[str]] = {}

            async def take(name: str, queue: Any) -> None:
                taken[name] = [h for h, _ in await queue.pending_batch(10)]

            async with anyio.create_task_group() as tg:
                tg.start_soon(take, "a", qa)
                tg.start_soon(take, "b", qb)
            # Rows one worker is taking are skipped by the other (SKIP LOCKED), so under contention a batch may
            # come back short; what must hold is that no text is handed to both.
            assert taken["a"] and taken["b"] and not set(taken["a"]) & set(taken["b"])
            held = set(taken["a"]) | set(taken["b"])
            mine = set(taken["a"])  # a process passes the texts its own workers are embedding (EmbedQueue.inflight)
            while more := [h for h, _ in await qa.pending_batch(10, exclude=mine)]:
                assert not set(more) & held
                held |= set(more)
                mine |= set(more)
            assert len(held) == 24  # every text handed out once, and none is left
            assert await qb.pending_batch(10, exclude=set(taken["b"])) == []
            await qb.release(taken["b"])  # a worker that gives its texts back (its batch failed)
            assert sorted(h for h, _ in await qa.pending_batch(20, exclude=mine)) == sorted(taken["b"])

    anyio.run(go)


def test_a_change_one_process_commits_reaches_the_listeners_of_another(postgres, tmp_path):
    folder = notes(tmp_path / "work", a="alpha text")
    anyio.run(index_into, settings_for(folder, postgres))
    heard: list[tuple[list[str], bool]] = []

    async def go() -> None:
        async with Index.open(settings_for(None, postgres), readonly=True, embedder=BagOfWordsEmbedder()) as node:
            listening = anyio.Event()

            async def listener(paths: list[str], list_changed: bool) -> None:
                heard.append((paths, list_changed))

            async with anyio.create_task_group() as tg:
                tg.start_soon(node.store.listen, listener, listening.set)
                await listening.wait()
                write(folder / "b.md", note("B", "beta text"))
                await index_into(settings_for(folder, postgres))
                with anyio.fail_after(10):
                    while not heard:
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()

    anyio.run(go)
    assert heard[0] == (["work/b.md"], True)


def test_the_eval_history_is_kept_in_the_store_so_every_machine_compares_with_the_same_runs(postgres, kb, tmp_path):
    settings = settings_for(notes(kb, tide="the moon pulls the ocean twice a day", bread="flour water and salt"),
                            postgres)
    anyio.run(index_into, settings)
    golden = write(tmp_path / "golden.yaml", "queries:\n  - id: q1\n    query: ocean and the moon\n"
                                             "    expected: [tide.md]\n")

    async def evaluate(settings: Any) -> Any:
        async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as ix:
            return await Service(ix).evaluate(EvalRequest(source=golden))

    first = anyio.run(evaluate, settings)
    again = anyio.run(evaluate, settings_for(None, postgres))  # another machine: a search node, no folder
    assert first.history.recorded and again.history.recorded
    assert again.history.path == f"the eval_history table of {redact(postgres)}"
    assert again.history.status == "ok" and again.metrics == first.metrics
    with psycopg.connect(postgres) as conn:
        assert conn.execute("SELECT count(*) FROM eval_history").fetchone() == (2,)


def test_a_copy_between_the_stores_answers_every_search_alike_both_ways_and_embeds_nothing(postgres, kb, tmp_path):
    notes(kb, wal="readers run beside one writer in write-ahead logging",
          japanese="トライグラムとバイグラムで日本語を検索する。首都は東京です。",
          rerank="cross-encoder rerankers helped the properties queries")
    sqlite = load_settings(None, kb_path=kb, index_path=tmp_path / "source.sqlite")
    anyio.run(index_into, sqlite)
    queries = ["write-ahead logging", "首都", "property rerankers", "日本語の検索"]
    before = {(q, r): anyio.run(search, sqlite, q, r) for q in queries for r in ("fts", "vector", "hybrid")}

    copied_at = time.time()
    report = copy_store(address(None, tmp_path / "source.sqlite"), address(postgres, Path()), folder=kb.name)
    assert report.rows["chunks"] >= 3
    shared = settings_for(None, postgres)
    for (q, r), paths in before.items():
        assert anyio.run(search, shared, q, r) == [f"{kb.name}/{p}" for p in paths], (q, r)

    back = tmp_path / "back.sqlite"
    copy_store(address(postgres, Path()), address(None, back))
    returned = load_settings(None, kb_path=kb, index_path=back)
    for (q, r), paths in before.items():
        assert anyio.run(search, returned, q, r) == paths, (q, r)

    async def status(settings: Any) -> Any:
        async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as ix:
            return await Service(ix).status()

    source, copied, again = (anyio.run(status, s) for s in (sqlite, shared, returned))

    async def changes(settings: Any) -> Any:
        async with Index.open(settings, readonly=True, embedder=BagOfWordsEmbedder()) as ix:
            return await Service(ix).changes(ChangesRequest(since="1h"))

    # the change history is not copied: each copy's begins when it was made, and says so
    for settings in (shared, returned):
        history = anyio.run(changes, settings)
        assert history.notes == [] and history.history_from >= iso_time(copied_at), history
    assert (copied.documents, copied.chunks, copied.vectors) == (source.documents, source.chunks, source.vectors)
    assert copied.embeddings_computed == source.embeddings_computed == again.embeddings_computed
    with pytest.raises(StoreError, match="already holds a groove store: copy into a new database"):
        copy_store(address(None, tmp_path / "source.sqlite"), address(postgres, Path()), folder=kb.name)


def test_doctor_checks_this_machines_folders_against_their_notes_in_the_store_and_leaves_the_others_alone(
        postgres, tmp_path):
    home = notes(tmp_path / "home", a="alpha text", b="beta text")
    work = notes(tmp_path / "work", c="gamma text")
    for folder in (home, work):  # two machines, one folder each
        anyio.run(index_into, settings_for(folder, postgres))
    (home / "b.md").unlink()
    report = diagnose(settings_for(home, postgres))
    assert folder_findings(report) == [("notes_gone", ["home/b.md"])]
    assert report["folders"] == [{"name": "home", "path": str(home), "notes": 2}]
    assert folder_findings(diagnose(settings_for(work, postgres))) == []  # home's note is not work's business
    node = diagnose(settings_for(None, postgres))  # a search node: the store's own checks
    assert folder_findings(node) == [] and node["folders"] == []
    fixed = diagnose(settings_for(home, postgres), fix=True)
    assert folder_findings(fixed) == [] and "removed 1 note(s) that no longer exist from the store" in fixed["fixed"]
    assert diagnose(settings_for(home, postgres))["folders"][0]["notes"] == 1
    assert diagnose(settings_for(work, postgres))["folders"][0]["notes"] == 1


def folder_findings(report: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The doctor's findings about notes against their folders (the model's are another test's: these notes
    were embedded by the fake, not the configured model)."""
    return [(f["check"], f["examples"]) for f in report["findings"] if f["check"].startswith("notes_")]

def test_an_index_of_several_folders_copied_into_the_store_is_served_with_every_folder(postgres, tmp_path):
    work = notes(tmp_path / "work", plan="the quarterly plan for the team")
    home = notes(tmp_path / "home", soup="a recipe for miso soup")
    index = tmp_path / "both.sqlite"
    anyio.run(index_into, load_settings(None, kb_path=[str(work), str(home)], index_path=index))
    copy_store(address(None, index), address(postgres, Path()))

    async def status() -> Any:
        async with Index.open(settings_for(None, postgres), readonly=True, embedder=BagOfWordsEmbedder()) as ix:
            return await Service(ix).status()

    held = anyio.run(status)
    assert [(f.name, f.path, f.notes) for f in held.folders] == [("home", str(home), 1), ("work", str(work), 1)]
    assert anyio.run(search, settings_for(None, postgres), "miso", "fts") == ["home/soup.md"]


# --- separate processes over real HTTP --------------------------------------------------------------------------


def machine(tmp_path: Path, name: str) -> Path:
    """A folder standing for one machine: its working folder, config and data dirs."""
    (tmp_path / name).mkdir()
    return tmp_path / name


def call(server: Any, tool: str, arguments: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with server.client() as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(go)


def found(server: Any, query: str) -> list[str]:
    return [h["path"] for h in call(server, "search", {"query": query, "retriever": "fts"}).structured_content["results"]]


def test_two_indexers_and_a_search_node_serve_one_store_and_an_edit_reaches_the_node(spawn, postgres, tmp_path):
    url = with_password(postgres, SECRET)
    home = notes(tmp_path / "home", garden="tomatoes and basil grow in the garden")
    work = notes(tmp_path / "work", quantum="量子コンピューターの論文を読む")
    indexers = [spawn.server(folder, None, machine(tmp_path, name), extra=("--store", url), command=FAKE_GROOVE)
                for name, folder in (("m1", home), ("m2", work))]
    for s in indexers:
        s.wait_healthy()
    node = spawn.server(None, None, machine(tmp_path, "m3"), extra=("--store", url), command=FAKE_GROOVE)
    try:
        node.wait_healthy()
        status = call(node, "index_status", {}).structured_content
        assert [f["name"] for f in status["folders"]] == ["home", "work"]
        assert all(f["host"] for f in status["folders"]) and status["documents"] == 2  # each machine's folder
        assert found(node, "basil") == ["home/garden.md"]
        assert found(node, "量子コンピューター") == ["work/quantum.md"]
        note_text = call(node, "get_document", {"path": "work/quantum.md"}).structured_content["content"]
        assert "量子コンピューターの論文を読む" in note_text
        tools = anyio.run(lambda: _tool_names(node))
        assert "reindex" not in tools and "search" in tools  # a search node indexes nothing

        write(home / "peppers.md", note("Peppers", "chili peppers beside the tomatoes"))
        until(lambda: found(node, "chili peppers") == ["home/peppers.md"], "the new note found on the search node")
        until(lambda: call(node, "search", {"query": "chili peppers", "retriever": "vector"})
              .structured_content["results"][0]["path"] == "home/peppers.md",
              "the new note's vector in the search node's in-memory copy")
        (work / "quantum.md").unlink()
        until(lambda: found(node, "量子コンピューター") == [], "the deleted note gone from the search node")
    finally:
        logs = "".join(s.log() for s in (*indexers, node))
        for s in (*indexers, node):
            s.terminate()
    assert SECRET not in logs and "postgresql://postgres:***@" in logs


async def _tool_names(server: Any) -> list[str]:
    async with server.client() as client:
        return [t.name for t in (await client.list_tools()).tools]


def test_an_indexer_killed_mid_embedding_frees_its_folder_and_its_restart_embeds_the_rest(spawn, postgres, tmp_path):
    folder = notes(tmp_path / "notes", **{f"n{i:02d}": f"note {i} about subject{i} and more words" for i in range(40)})
    slow = {"FAKE_EMBED_DELAY_S": "0.2"}
    first = spawn.server(folder, None, machine(tmp_path, "m1"), extra=("--store", postgres), command=FAKE_GROOVE, env=slow)
    first.wait_healthy()

    def embedded() -> int:
        with psycopg.connect(postgres) as conn:
            return int(conn.execute("SELECT count(*) FROM chunks WHERE embedding_id IS NOT NULL").fetchone()[0])

    until(embedded, "the first indexer embedded some texts", timeout=60)
    first.proc.kill()  # SIGKILL: no clean-up of its own
    first.proc.wait()
    with psycopg.connect(postgres) as conn:
        assert int(conn.execute("SELECT count(*) FROM queue").fetchone()[0]) > 0  # it died with texts waiting
    second = spawn.server(folder, None, machine(tmp_path, "m2"), extra=("--store", postgres), command=FAKE_GROOVE)
    try:
        second.wait_healthy()
        status = second.wait_indexed(40)  # its claim succeeded: the dead session's locks went with it
        assert status["pending_chunks"] == 0 and status["chunks"] == status["vectors"] == 40
        with psycopg.connect(postgres) as conn:
            assert conn.execute("SELECT count(*) FROM queue").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM documents").fetchone() == (40,)
    finally:
        second.terminate()


def test_the_example_notes_rank_alike_in_postgresql_and_sqlite_with_the_real_model(spawn, real_model, postgres,
                                                                                   tmp_path):
    """The README's example notes and judged queries, each half and both languages, through the real command and
    the real model: the figures of a search node of the shared store equal those of the SQLite index."""
    golden = str(EXAMPLES.parent / "golden.yaml")
    indexed = spawn.groove("index", "--examples", "--store", postgres, home=tmp_path)
    assert indexed.returncode == 0, indexed.stderr
    assert spawn.groove("index", "--examples", home=tmp_path).returncode == 0
    for retriever in ("fts", "vector", "hybrid"):
        figures = []
        for where in (("--store", postgres), ("--examples",)):  # the search node names no folder
            run = spawn.groove("eval", golden, *where, "--retriever", retriever, "--format", "json", home=tmp_path)
            assert run.returncode == 0, run.stderr
            report = json.loads(run.stdout)
            figures.append((report["count"], report["metrics"]))
        assert figures[0] == figures[1], retriever
        assert figures[0][0] == 16 and figures[0][1]["recall@10"] > 0.5


def test_a_search_node_on_a_read_replica_answers_and_hears_of_changes_though_it_cannot_listen(
        spawn, postgres_server, postgres, tmp_path):
    folder = notes(tmp_path / "notes", alpha="alpha text about gardens")
    anyio.run(index_into, settings_for(folder, postgres))
    database = postgres.split("?")[0].rsplit("/", 1)[-1]
    heard: list[tuple[list[str], bool]] = []

    async def listen_on(replica: str) -> None:
        async with Index.open(settings_for(None, replica), readonly=True, embedder=BagOfWordsEmbedder()) as node:
            listening = anyio.Event()

            async def listener(paths: list[str], list_changed: bool) -> None:
                heard.append((paths, list_changed))

            async with anyio.create_task_group() as tg:
                tg.start_soon(node.store.listen, listener, listening.set)
                await listening.wait()
                write(folder / "beta.md", note("Beta", "beta text about kettles"))
                await index_into(settings_for(folder, postgres))  # written on the primary
                with anyio.fail_after(30):
                    while not heard:
                        await anyio.sleep(0.1)
                tg.cancel_scope.cancel()

    with postgres_server.replica() as admin:
        replica = with_database(admin, database)
        anyio.run(listen_on, replica)
        assert heard[0] == (["notes/beta.md"], True)
        node = spawn.server(None, None, machine(tmp_path, "node"), extra=("--store", replica), command=FAKE_GROOVE)
        try:
            node.wait_healthy()
            assert found(node, "kettles") == ["notes/beta.md"]
            write(folder / "gamma.md", note("Gamma", "gamma text about lanterns"))
            anyio.run(index_into, settings_for(folder, postgres))
            until(lambda: found(node, "lanterns") == ["notes/gamma.md"], "the primary's new note on the replica")
            evaluated = spawn.groove("eval", str(write(tmp_path / "golden.yaml", "queries:\n  - id: q\n    query: "
                                                       "kettles\n    expected: [beta.md]\n")),
                                     "--store", replica, home=machine(tmp_path, "cli"), command=FAKE_GROOVE)
            assert evaluated.returncode == 0, evaluated.stderr
            assert "is a read replica: the run is not recorded" in evaluated.stderr
        finally:
            log = node.log()
            node.terminate()
        assert "a replica cannot LISTEN" in log

