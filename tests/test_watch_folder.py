"""The notes folder itself moved, deleted or replaced while the daemon runs (issue 22 point 4): the real
watcher on real folders, the bag-of-words embedder. inotify watches a folder, not a path, so the watcher
checks the folder's identity; health says the watch is not live while there is no folder to watch."""

from __future__ import annotations

import shutil
from pathlib import Path

from groove.search.request import SearchRequest
from tests.support.common import eventually, write
from tests.support.daemon import running
from tests.support.fakes import BagOfWordsEmbedder


def settings_of(make_settings, kb: Path):
    return make_settings(kb, **{"watch.debounce_ms": 50, "watch.reconcile_interval_s": 0})  # no periodic safety net


def plain(answer) -> dict:
    """An answer as a dict (a dict, or a pydantic answer model)."""
    return answer if isinstance(answer, dict) else answer.model_dump(mode="json")


async def found(daemon, word: str) -> list[str]:
    resp = plain(await daemon.index.search(SearchRequest(query=word, retriever="fts", limit=10)))
    return [r["path"] for r in resp["results"]]


async def documents(daemon) -> int:
    return plain(await daemon.index.status())["documents"]


async def test_a_notes_folder_replaced_by_a_copy_is_watched_again_and_its_new_notes_are_found(kb: Path, make_settings):
    for i in range(5):
        write(kb / f"n{i}.md", f"# Note {i}\n\ncopyword{i} here.\n")
    async with running(settings_of(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        kb.rename(kb.with_name("notes.old"))
        shutil.copytree(kb.with_name("notes.old"), kb)
        write(kb / "new.md", "# New\n\nreplacedfolderword arrives after the copy.\n")

        async def new_note_found() -> bool:
            return await found(daemon, "replacedfolderword") == ["new.md"]

        await eventually(new_note_found, "the note written into the copied folder to be indexed", timeout=30)
        assert daemon.health() == (True, [])
        # The watch is live on the new folder (not only the reconcile after re-attaching): an edit is seen.
        write(kb / "n0.md", "# Note 0\n\neditedinthecopy now.\n")

        async def edit_found() -> bool:
            return await found(daemon, "editedinthecopy") == ["n0.md"]

        await eventually(edit_found, "an edit in the copied folder to be indexed", timeout=30)
        assert await documents(daemon) == 6 and daemon.watcher_state == "watching" and daemon.health()[0]


async def test_a_deleted_notes_folder_fails_health_until_it_is_recreated_and_then_every_note_is_indexed(
        kb: Path, make_settings):
    for i in range(5):
        write(kb / f"n{i}.md", f"# Note {i}\n\noldword{i} here.\n")
    async with running(settings_of(make_settings, kb), BagOfWordsEmbedder()) as daemon:
        shutil.rmtree(kb)

        async def not_live() -> bool:
            return not daemon.health()[0]

        await eventually(not_live, "health to say the watch is not live", timeout=30)
        assert "not there" in daemon.watcher_state  # what index_status shows as `watcher` (and healthy: false)
        assert any("watcher waiting" in r for r in daemon.health()[1])  # /healthz's reasons
        assert await documents(daemon) == 5  # a folder that is gone (an unmounted disk?) does not empty the index

        for i in range(7):
            write(kb / f"r{i}.md", f"# Recreated {i}\n\nrecreatedword{i} here.\n")

        async def all_indexed() -> bool:
            return await documents(daemon) == 7 and daemon.health()[0]

        await eventually(all_indexed, "the recreated folder's notes to replace the old ones, health ok", timeout=30)
        assert await found(daemon, "recreatedword3") == ["r3.md"] and await found(daemon, "oldword1") == []
        write(kb / "later.md", "# Later\n\nlaterword after the re-attach.\n")

        async def later_found() -> bool:
            return await found(daemon, "laterword") == ["later.md"]

        await eventually(later_found, "a note written after the re-attach to be indexed", timeout=30)
