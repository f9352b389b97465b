"""The daemon keeps the index live: real files changing on disk, the real watcher.

Tests about meaning (and the crash test, whose index the CLI builds) use the real
model; the others use the bag-of-words fake (tests/support/fakes.py), which loads nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio

from groove.api.service import ListRequest
from groove.daemon import BusyError, Daemon
from groove.store.sqlite import connection
from groove.sync.report import IndexReport
from tests.support.common import ROOT, eventually, section_text, write
from tests.support.daemon import fast, idle, paths_for, running
from tests.support.fakes import BagOfWordsEmbedder


async def counter(daemon: Daemon) -> int:
    return (await daemon.service.status()).embeddings_computed


async def test_a_note_written_while_the_daemon_runs_is_found_by_its_words_then_by_meaning(real_model, kb, make_settings):
    write(kb / "base.md", "# Base\n\nA note about sourdough bread and long fermentation.\n")
    async with running(fast(make_settings, kb)) as daemon:
        write(kb / "new.md", "# Volcanoes\n\nThe caldera of the stratovolcano collapsed after the eruption.\n")

        async def by_words() -> bool:
            return "new.md" in await paths_for(daemon, "stratovolcano", retriever="fts")

        await eventually(by_words, "the new note to be found by its words")

        async def by_meaning() -> bool:
            return (await paths_for(daemon, "mountain that erupts lava", retriever="vector"))[:1] == ["new.md"]

        await eventually(by_meaning, "the new note to be found by meaning")


async def test_an_edit_of_one_paragraph_embeds_one_chunk(kb, make_settings):
    sections = [section_text(i) for i in range(12)]
    write(kb / "long.md", "# Long\n\n" + "".join(sections))
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        await idle(daemon)
        before = await counter(daemon)
        sections[5] = sections[5].replace("This section talks", "This freshly edited section talks")
        write(kb / "long.md", "# Long\n\n" + "".join(sections))

        async def edited() -> bool:
            return "long.md" in await paths_for(daemon, "freshly edited", retriever="fts")

        await eventually(edited, "the edit to be searchable")
        await idle(daemon)
        assert await counter(daemon) - before == 1


async def test_a_deleted_note_disappears(kb, make_settings):
    write(kb / "keep.md", "# Keep\n\nPermanent note about tidal energy.\n")
    write(kb / "doomed.md", "# Doomed\n\nTemporary note about quasicrystal lattices.\n")
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        assert "doomed.md" in await paths_for(daemon, "quasicrystal", retriever="fts")
        (kb / "doomed.md").unlink()

        async def gone() -> bool:
            return "doomed.md" not in await paths_for(daemon, "quasicrystal")

        await eventually(gone, "the deleted note to disappear")
        assert (await daemon.service.status()).documents == 1


async def test_a_renamed_directory_s_notes_follow_it_without_reembedding(kb, make_settings):
    write(kb / "trips" / "alps.md", "# Alps\n\nHiking the Haute Route from Chamonix to Zermatt.\n")
    write(kb / "trips" / "kyoto.md", "# Kyoto\n\nTemples and moss gardens in the autumn rain.\n")
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        await idle(daemon)
        before = await counter(daemon)
        os.rename(kb / "trips", kb / "travel")

        async def moved() -> bool:
            docs = await daemon.service.list_documents(ListRequest())
            return sorted(d.path for d in docs.documents) == ["travel/alps.md", "travel/kyoto.md"]

        await eventually(moved, "the notes to follow their renamed folder")
        assert await paths_for(daemon, "Zermatt", retriever="fts") == ["travel/alps.md"]
        await idle(daemon)
        assert await counter(daemon) == before


async def test_a_rename_the_watcher_sees_as_a_deletion_then_an_addition_embeds_nothing_even_across_a_restart(
        kb, make_settings):
    text = "# Long\n\n" + "".join(section_text(i) for i in range(30))
    write(kb / "long.md", text)
    write(kb / "other.md", "# Other\n\nA note about tidal energy.\n")

    async def documents(daemon: Daemon) -> list[str]:
        return sorted(d.path for d in (await daemon.service.list_documents(ListRequest())).documents)

    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        await idle(daemon)
        before = await counter(daemon)
        (kb / "long.md").unlink()  # the first half of `mv long.md long1.md`, in a batch of its own

        async def deleted() -> bool:
            return await documents(daemon) == ["other.md"]

        await eventually(deleted, "the deletion to be written")
        write(kb / "long1.md", text)  # the second half, a batch later

        async def back() -> bool:
            return await documents(daemon) == ["long1.md", "other.md"]

        await eventually(back, "the note to be back under its new name")
        await idle(daemon)
        assert await counter(daemon) == before  # its 31 sections took their vectors back: none embedded
        (kb / "long1.md").unlink()
        await eventually(deleted, "the second deletion to be written")
    write(kb / "long2.md", text)  # while no groove runs: the next start finds it
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        await idle(daemon)
        assert await documents(daemon) == ["long2.md", "other.md"]
        assert await counter(daemon) == before


async def test_notes_created_inside_a_new_directory_are_caught(kb, make_settings):
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        (kb / "deep" / "er").mkdir(parents=True)
        write(kb / "deep" / "er" / "n.md", "# Nested\n\nA note about bioluminescent plankton.\n")

        async def found() -> bool:
            return "deep/er/n.md" in await paths_for(daemon, "bioluminescent", retriever="fts")

        await eventually(found, "a note in a new folder to be indexed")


async def test_an_atomic_save_replaces_the_note(kb, make_settings):
    write(kb / "a.md", "# A\n\nOriginal text about the harpsichord.\n")
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        tmp = kb / ".a.md.tmp"
        tmp.write_text("# A\n\nReplaced text about the theremin.\n", encoding="utf-8")
        os.replace(tmp, kb / "a.md")

        async def replaced() -> bool:
            return await paths_for(daemon, "theremin", retriever="fts") == ["a.md"] and not await paths_for(
                daemon, "harpsichord", retriever="fts"
            )

        await eventually(replaced, "the atomic save to be indexed")


async def test_a_grooveignore_change_applies_while_running(kb, make_settings):
    write(kb / "public.md", "# Public\n\nShared note about marmalade.\n")
    write(kb / "secret" / "s.md", "# Secret\n\nPrivate note about marmalade recipes.\n")
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        assert "secret/s.md" in await paths_for(daemon, "marmalade", retriever="fts")
        write(kb / ".grooveignore", "secret/\n")

        async def ignored() -> bool:
            return await paths_for(daemon, "marmalade", retriever="fts") == ["public.md"]

        await eventually(ignored, "the ignored folder to leave the index")


async def test_a_second_reindex_while_one_runs_gets_a_clear_error(kb, make_settings):
    for i in range(5):
        write(kb / f"n{i}.md", f"# Note {i}\n\nText {i} about ordinary things.\n")
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        results: list[object] = []

        async def call() -> None:
            try:
                results.append(await daemon.service.reindex())
            except BusyError as exc:
                results.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            tg.start_soon(call)
        errors = [r for r in results if isinstance(r, BusyError)]
        assert len(errors) == 1 and "already running" in str(errors[0])
        assert [r for r in results if isinstance(r, IndexReport)][0].unchanged == 5


async def test_concurrent_queries_are_embedded_together(kb, make_settings):
    write(kb / "a.md", "# A\n\nSomething to search.\n")
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        calls_before = daemon.index.queries.calls
        queries = [f"question number {i} about fermentation" for i in range(8)]
        async with anyio.create_task_group() as tg:
            for q in queries:
                tg.start_soon(daemon.index.queries.embed, q)
        calls = daemon.index.queries.calls - calls_before
        assert 1 <= calls < len(queries)


def consistency(path: Path) -> dict[str, int]:
    con = connection.connect_sync(path)
    try:
        q = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
        con.execute("INSERT INTO fts_chunks(fts_chunks) VALUES ('integrity-check')")
        return {
            "orphan_chunks": q("SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)"),
            "dangling_vectors": q("SELECT count(*) FROM chunks WHERE embedding_id IS NOT NULL AND embedding_id NOT IN (SELECT id FROM embeddings)"),
            "vec_rows_missing": q("SELECT count(*) FROM embeddings WHERE id NOT IN (SELECT rowid FROM vec_embeddings)"),
            "pending": q("SELECT count(*) FROM chunks WHERE embedding_id IS NULL"),
            "documents": q("SELECT count(*) FROM documents"),
            "chunks": q("SELECT count(*) FROM chunks"),
        }
    finally:
        con.close()


async def test_kill_9_during_a_large_index_then_restart_ends_complete_and_consistent(real_model, spawn, kb, make_settings, tmp_path):
    n_notes = 150
    for i in range(n_notes):
        write(kb / f"bulk/n{i:03}.md", f"# Bulk {i}\n\n" + "".join(section_text(i * 3 + j) for j in range(2)))
    index = tmp_path / "killed.sqlite"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = spawn.popen(
        [sys.executable, "-m", "groove.cli", "index", "--kb", str(kb), "--index", str(index)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600  # the model loads first: slow on a loaded machine
        killed_mid_embedding = False
        while time.monotonic() < deadline and proc.poll() is None:
            if index.exists():
                try:
                    con = connection.connect_sync(index, readonly=True)
                    done = con.execute("SELECT count(*) FROM embeddings").fetchone()[0]
                    con.close()
                except connection.DBError:
                    done = 0
                if done >= 32:
                    proc.send_signal(signal.SIGKILL)
                    killed_mid_embedding = True
                    break
            await anyio.sleep(0.05)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed_mid_embedding, "the index finished before it could be killed; make the corpus larger"
    after_kill = consistency(index)
    assert after_kill["pending"] > 0

    settings = fast(make_settings, kb, index_path=index)
    async with running(settings) as daemon:
        # ~270 chunks with the real model: minutes on a loaded 2-core machine (a bound, not a timing claim).
        await idle(daemon, timeout=900.0)
    final = consistency(index)
    assert final["documents"] == n_notes
    assert final["pending"] == 0
    assert final["orphan_chunks"] == 0 and final["dangling_vectors"] == 0 and final["vec_rows_missing"] == 0


async def test_a_burst_of_files_like_a_git_checkout_is_all_indexed(kb, make_settings):
    async with running(fast(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        for i in range(400):
            write(kb / f"checkout/d{i % 7}/f{i:04d}.md", f"# File {i}\n\nBurst note number {i} about checkout{i:04d}.\n")

        async def all_there() -> bool:
            return (await daemon.service.status()).documents == 400

        await eventually(all_there, "all 400 notes of the burst to be indexed", timeout=120)
        assert await paths_for(daemon, "checkout0399", retriever="fts") == ["checkout/d0/f0399.md"]
