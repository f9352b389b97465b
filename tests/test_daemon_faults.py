"""A task of the daemon that fails says so: a reconcile that raises, a watcher that dies, a disk that is
full, an index file that cannot be written. Real index files, real notes on disk, the real watcher, the
real HTTP app for /healthz and the Python SDK's client for the tools; faults are injected where they
start (the reconcile, the watcher, SQLite's own page limit and query_only switch)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from groove import daemon as daemon_module
from groove.daemon import Daemon
from groove.search.request import SearchRequest
from groove.serve.mcp.server import build_server
from tests.support.common import eventually, write
from tests.support.daemon import FullDisk, fast, idle, paths_for, running
from tests.support.daemon import healthz_client as healthz
from tests.support.fakes import BagOfWordsEmbedder, InjectedFault


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries after 0.2 s, 0.4 s, ... so a test sees a failure and the recovery within seconds."""
    monkeypatch.setattr(daemon_module, "RETRY_FIRST_S", 0.2)
    monkeypatch.setattr(daemon_module, "RETRY_MAX_S", 1.0)


class FailingReconcile:
    """Wraps Index.reconcile: raises while `failing` is set (full reconciles only, or every one)."""

    def __init__(self, real, *, paths_too: bool = False):
        self.real = real
        self.failing = False
        self.paths_too = paths_too
        self.raised = 0

    async def __call__(self, paths=None, progress=None, **options):
        if self.failing and (paths is None or self.paths_too):
            self.raised += 1
            raise InjectedFault("injected: the reconcile blew up")
        return await self.real(paths, progress=progress, **options)


def notes(kb, n: int = 3) -> None:
    for i in range(n):
        write(kb / f"n{i}.md", f"# Note {i}\n\nA note number {i} about lanterns{i} and rivers.\n")


async def test_reindex_whose_reconcile_fails_is_a_tool_error_and_status_and_health_show_it(kb, make_settings):
    notes(kb)
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        fault = FailingReconcile(daemon.index.reconcile)
        daemon.index.reconcile = fault  # type: ignore[method-assign]
        server = build_server(daemon)
        async with Client(server) as client, healthz(daemon) as http:
            assert (await http.get("/healthz")).status_code == 200
            good = await client.call_tool("reindex", {})
            assert not good.is_error and good.structured_content["unchanged"] == 3

            fault.failing = True
            bad = await client.call_tool("reindex", {})
            assert bad.is_error
            text = bad.content[0].text
            assert "the full reconcile failed" in text and "injected: the reconcile blew up" in text
            assert "unchanged" not in text  # not the previous run's figures

            status = (await client.call_tool("index_status", {})).structured_content
            assert "injected" in status["tasks"]["reconcile"]["last_error"]
            assert status["tasks"]["reconcile"]["state"] == "failed"
            assert status["tasks"]["writer"]["state"] == "failing" and status["healthy"] is False
            r = await http.get("/healthz")
            assert r.status_code == 503
            assert r.json()["ok"] is False and "writer failing" in r.json()["error"] and "injected" in r.json()["error"]

            # The failed reconcile is retried with backoff; once it goes through, all is well again.
            fault.failing = False

            async def recovered() -> bool:
                return (await http.get("/healthz")).status_code == 200

            await eventually(recovered, "the retried reconcile to succeed and /healthz to be 200 again", timeout=20)
            status = (await client.call_tool("index_status", {})).structured_content
            assert status["tasks"]["reconcile"]["state"] == "ok" and status["tasks"]["reconcile"]["failures_in_a_row"] == 0
            assert "injected" in status["tasks"]["reconcile"]["last_error"]  # the last error stays on record
            again = await client.call_tool("reindex", {})
            assert not again.is_error and again.structured_content["unchanged"] == 3


async def test_a_failed_startup_reconcile_is_not_reported_done_and_is_retried_until_it_succeeds(kb, make_settings):
    notes(kb)
    daemon = Daemon(fast(make_settings, kb), embedder=BagOfWordsEmbedder())
    fault = FailingReconcile(daemon.index.reconcile)
    fault.failing = True
    daemon.index.reconcile = fault  # type: ignore[method-assign]
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        try:
            with anyio.fail_after(30):
                await daemon.reconciled.wait()  # the first attempt is over
            status = await daemon.service.status()
            assert status.startup_reconcile_done is False and status.documents == 0
            assert "injected" in status.tasks["reconcile"].last_error

            async def retried() -> bool:
                return fault.raised >= 2

            await eventually(retried, "the failed startup reconcile to be tried again", timeout=20)
            fault.failing = False

            async def done() -> bool:
                st = await daemon.service.status()
                return st.startup_reconcile_done and st.documents == 3

            await eventually(done, "a retried startup reconcile to index the folder", timeout=20)
        finally:
            daemon.stop()


async def test_a_crashed_watcher_is_visible_while_dead_and_restarted_with_backoff(kb, make_settings, monkeypatch):
    notes(kb, 1)
    real_watch = daemon_module.watch
    crashes = {"left": 3, "calls": 0}

    async def flaky_watch(*args: Any, **kwargs: Any) -> None:
        crashes["calls"] += 1
        if crashes["left"] > 0:
            crashes["left"] -= 1
            raise InjectedFault("injected: the watcher died")
        await real_watch(*args, **kwargs)

    monkeypatch.setattr(daemon_module, "watch", flaky_watch)
    monkeypatch.setattr(daemon_module, "RETRY_FIRST_S", 0.5)
    monkeypatch.setattr(daemon_module, "RETRY_MAX_S", 2.0)
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon, healthz(daemon) as http:
        # While it is dead: status and /healthz say so, with the error.
        async def seen_dead() -> bool:
            return daemon.watcher_state.startswith("failed")

        await eventually(seen_dead, "the watcher's death to show")
        status = await daemon.service.status()
        assert status.watcher.startswith("failed, restarting in")
        assert "injected: the watcher died" in status.tasks["watcher"].last_error
        r = await http.get("/healthz")
        assert r.status_code == 503 and "watcher failed" in r.json()["error"]
        # A note written while nobody watches is picked up by the full reconcile after the restart.
        write(kb / "while-dead.md", "# Dead\n\nWritten while the watcher was down: periwinkle.\n")

        async def watching_again() -> bool:
            return daemon.watcher_state == "watching"

        await eventually(watching_again, "the watcher to be restarted", timeout=30)
        assert crashes["calls"] == 4
        # Backoff: three failures in a row waited 0.5 s, 1 s and 2 s, not one retry per loop turn.
        watcher = (await daemon.service.status()).tasks["watcher"]
        assert watcher.state == "watching" and watcher.failures_in_a_row == 3 and watcher.retry_at is None

        async def found() -> bool:
            return await paths_for(daemon, "periwinkle", retriever="fts") == ["while-dead.md"]

        await eventually(found, "the note written while the watcher was dead to be indexed")
        assert (await http.get("/healthz")).status_code == 200
        # And the restarted watcher works: a new edit arrives through it.
        write(kb / "after.md", "# After\n\nWritten after the restart: marigold.\n")

        async def live() -> bool:
            return await paths_for(daemon, "marigold", retriever="fts") == ["after.md"]

        await eventually(live, "an edit after the restart to arrive through the watcher")


async def _fill_until_full(daemon: Daemon) -> None:
    """Let the database grow no further: SQLite answers SQLITE_FULL as a full disk would."""
    conn = daemon.index.store.wconn
    assert conn is not None
    pages = (await (await conn.execute("PRAGMA page_count")).fetchone())[0]
    await conn.execute(f"PRAGMA max_page_count = {pages}")


async def test_a_full_disk_is_reported_searches_go_on_and_writing_resumes_when_space_returns(kb, make_settings):
    notes(kb)
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon, healthz(daemon) as http:
        await idle(daemon)
        await _fill_until_full(daemon)
        big = "".join(f"## Part {i}\n\nA long paragraph {i} about the saxifrage meadow number {i}. " * 20 + "\n\n"
                      for i in range(60))
        write(kb / "big.md", "# Saxifrage\n\n" + big)

        async def refused() -> bool:
            return daemon.tasks["writer"].state == "failing"

        await eventually(refused, "the write of the new note to fail on the full disk")
        error = daemon.tasks["writer"].last_error or ""
        assert "the disk holding the index is full" in error and "free some space" in error
        r = await http.get("/healthz")
        assert r.status_code == 503 and "disk holding the index is full" in r.json()["error"]
        # Searches keep working over what the index has.
        assert await paths_for(daemon, "lanterns1", retriever="fts") == ["n1.md"]
        assert "n2.md" in await paths_for(daemon, "lanterns2 rivers")
        assert "big.md" not in await paths_for(daemon, "saxifrage", retriever="fts")

        # Space returns: the failed write is retried by itself.
        await daemon.index.store.wconn.execute("PRAGMA max_page_count = 1073741823")

        async def resumed() -> bool:
            return set(await paths_for(daemon, "saxifrage", retriever="fts")) == {"big.md"}

        await eventually(resumed, "the note to be written once space returned", timeout=20)
        assert daemon.tasks["writer"].state == "running"
        assert (await http.get("/healthz")).status_code == 200
        await idle(daemon)  # and its vectors follow


async def test_an_index_that_cannot_be_written_is_reported_searches_go_on_and_writing_resumes(kb, make_settings):
    notes(kb)
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        await idle(daemon)
        conn = daemon.index.store.wconn
        assert conn is not None
        await conn.execute("PRAGMA query_only = ON")  # the writer's connection now refuses every write
        write(kb / "n0.md", "# Note 0\n\nRewritten while the index is read-only: hollyhock.\n")

        async def refused() -> bool:
            return daemon.tasks["writer"].state == "failing"

        await eventually(refused, "the write to fail on the read-only index")
        error = daemon.tasks["writer"].last_error or ""
        assert "the index file cannot be written" in error and "writable" in error
        status = await daemon.service.status()
        assert status.healthy is False and status.tasks["writer"].retry_at is not None
        assert await paths_for(daemon, "lanterns0", retriever="fts") == ["n0.md"]  # the old text, still served

        await conn.execute("PRAGMA query_only = OFF")

        async def resumed() -> bool:
            return await paths_for(daemon, "hollyhock", retriever="fts") == ["n0.md"]

        await eventually(resumed, "the rewrite to be indexed once the index is writable", timeout=20)
        assert await paths_for(daemon, "lanterns0", retriever="fts") == []


async def test_embedding_workers_back_off_while_the_database_refuses_their_vectors(kb, make_settings):
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        write(kb / "a.md", "# A\n\nFirst note about cormorants.\n")

        async def indexed() -> bool:
            return await paths_for(daemon, "cormorants", retriever="fts") == ["a.md"]

        await eventually(indexed, "the note to be written")
        await idle(daemon)
        conn = daemon.index.store.wconn
        assert conn is not None
        # Block the vector store only: the chunk can be written, its vector cannot.
        await conn.execute("CREATE TEMP TRIGGER refuse_vectors BEFORE INSERT ON embeddings "
                           "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        write(kb / "b.md", "# B\n\nSecond note about pelicans.\n")

        async def failing() -> bool:
            return daemon.tasks["embedding"].state == "failing"

        await eventually(failing, "the embedding worker to report the refused store")
        assert "disk holding the index is full" in (daemon.tasks["embedding"].last_error or "")
        assert await daemon.index.pending() >= 1
        assert await paths_for(daemon, "pelicans", retriever="fts") == ["b.md"]  # findable by its words
        await conn.execute("DROP TRIGGER refuse_vectors")
        await idle(daemon)
        assert daemon.tasks["embedding"].state == "running"
        resp = await daemon.service.search(SearchRequest(query="pelicans", limit=3, retriever="vector"))
        assert resp.results[0].path == "b.md"


async def test_a_watcher_that_dies_soon_after_every_start_keeps_backing_off(kb, make_settings, monkeypatch):
    seen: list[tuple[int, str]] = []  # (failures in a row, state) as each new life starts
    holder: dict[str, Daemon] = {}

    async def dies_after_starting(*args: Any, on_state=None, **kwargs: Any) -> None:
        health = holder["daemon"].tasks["watcher"]
        seen.append((health.failures, health.state))
        if on_state:
            on_state("watching")
        await anyio.sleep(0.05)
        raise InjectedFault("injected: the watcher died after it started")

    monkeypatch.setattr(daemon_module, "watch", dies_after_starting)
    monkeypatch.setattr(daemon_module, "RETRY_MAX_S", 10.0)
    daemon = Daemon(fast(make_settings, kb), embedder=BagOfWordsEmbedder())
    holder["daemon"] = daemon
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        try:
            async def four_lives() -> bool:
                return len(seen) >= 4

            await eventually(four_lives, "the watcher to be restarted three times", timeout=20)
        finally:
            daemon.stop()
    # Its short lives as "watching" do not reset the series: each restart waits twice as long.
    assert [f for f, _ in seen[:4]] == [0, 1, 2, 3]
    assert [st for _, st in seen[1:4]] == ["failed, restarting in 0.2 s", "failed, restarting in 0.4 s",
                                           "failed, restarting in 0.8 s"]


async def test_healthz_fails_while_the_vectors_cannot_be_stored_and_before_the_first_scan(kb, make_settings):
    notes(kb)
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon, healthz(daemon) as http:
        await idle(daemon)
        disk = FullDisk(daemon)
        write(kb / "new.md", "# New\n\nA fresh note about kingfishers.\n")

        async def failing() -> bool:
            return daemon.tasks["embedding"].state == "failing"

        await eventually(failing, "the vectors of the new note to be refused")
        r = await http.get("/healthz")
        assert r.status_code == 503 and r.json()["error"].startswith("embedding failing: ")
        assert "disk is full" in r.json()["error"] and r.json()["pending"] >= 1
        disk.full = False  # space returns: the retried batch is stored

        async def healthy() -> bool:
            return (await http.get("/healthz")).status_code == 200

        await eventually(healthy, "/healthz to be 200 once the vectors are stored", timeout=20)
        assert (await http.get("/healthz")).json()["pending"] == 0


async def test_healthz_says_starting_until_the_first_scan_of_the_folder_is_done(kb, make_settings, monkeypatch):
    notes(kb)
    release = anyio.Event()
    daemon = Daemon(fast(make_settings, kb), embedder=BagOfWordsEmbedder())
    real = daemon.index.reconcile

    async def slow_first_scan(paths=None, progress=None, **options):
        if paths is None:
            await release.wait()
        return await real(paths, progress=progress, **options)

    daemon.index.reconcile = slow_first_scan  # type: ignore[method-assign]
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        async with healthz(daemon) as http:
            r = await http.get("/healthz")
            assert r.status_code == 503
            assert r.json()["error"] == "starting: the first scan of the notes folder is not done"
            release.set()

            async def healthy() -> bool:
                return (await http.get("/healthz")).status_code == 200

            await eventually(healthy, "/healthz to be 200 after the first scan", timeout=20)
        daemon.stop()
