"""A notes folder given as a symlink and re-pointed while the daemon runs (issue 36, point 10): the real watcher
on real folders and real links, the bag-of-words embedder. The link is followed anew every second, so a
re-pointed link is a replaced folder; a link re-pointed at another served folder indexes nothing twice."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from groove.config import load_settings
from groove.errors import ConfigError
from groove.search.request import SearchRequest
from tests.support.common import eventually, write
from tests.support.daemon import running
from tests.support.fakes import BagOfWordsEmbedder

FAST = {"watch.debounce_ms": 50, "watch.reconcile_interval_s": 0}  # no periodic safety net


def plain(answer) -> dict:
    return answer if isinstance(answer, dict) else answer.model_dump(mode="json")


async def found(daemon, word: str) -> list[str]:
    resp = plain(await daemon.index.search(SearchRequest(query=word, retriever="fts", limit=10)))
    return sorted(r["path"] for r in resp["results"])


async def documents(daemon) -> int:
    return plain(await daemon.index.status())["documents"]


def repoint(link: Path, target: Path) -> None:
    """Point `link` at `target` in one step (a new link renamed over the old one), as `ln -sfn` does."""
    fresh = link.with_name(link.name + ".new")
    fresh.symlink_to(target, target_is_directory=True)
    os.replace(fresh, link)


async def test_a_notes_folder_link_re_pointed_while_serving_indexes_the_new_folder_and_drops_the_old_notes(
    tmp_path: Path,
):
    old, new = tmp_path / "old", tmp_path / "new"
    for i in range(3):
        write(old / f"o{i}.md", f"# Old {i}\n\noldtargetword{i} here.\n")
    for i in range(2):
        write(new / f"n{i}.md", f"# New {i}\n\nnewtargetword{i} here.\n")
    link = tmp_path / "notes"
    link.symlink_to(old, target_is_directory=True)
    settings = load_settings(None, kb_path=link, index_path=tmp_path / "index.sqlite", **FAST)
    async with running(settings, BagOfWordsEmbedder()) as daemon:
        assert await found(daemon, "oldtargetword1") == ["o1.md"]
        repoint(link, new)

        async def converged() -> bool:
            return (
                await found(daemon, "newtargetword1") == ["n1.md"]
                and await found(daemon, "oldtargetword1") == []
                and await documents(daemon) == 2
            )

        await eventually(converged, "the re-pointed link's notes indexed and the old target's removed", timeout=30)
        # The watch is live on the new target: an edit there is seen (not only the reconcile after re-attaching).
        write(new / "n0.md", "# New 0\n\neditedinthenewtarget now.\n")

        async def edit_found() -> bool:
            return await found(daemon, "editedinthenewtarget") == ["n0.md"]

        await eventually(edit_found, "an edit in the new target to be indexed", timeout=30)
        # ... and an edit in the old target is not.
        write(old / "o2.md", "# Old 2\n\neditedintheoldtarget now.\n")
        write(new / "n1.md", "# New 1\n\nlaterinthenewtarget.\n")

        async def later_found() -> bool:
            return await found(daemon, "laterinthenewtarget") == ["n1.md"]

        await eventually(later_found, "a later edit in the new target to be indexed", timeout=30)
        assert await found(daemon, "editedintheoldtarget") == []
        assert await documents(daemon) == 2 and daemon.watcher_state == "watching" and daemon.health()[0]


async def test_a_folder_link_re_pointed_at_another_served_folder_is_skipped_with_one_warning_not_indexed_twice(
    tmp_path: Path,
):
    work, home = tmp_path / "work", tmp_path / "home"
    write(work / "plan.md", "# Plan\n\nsharedplanword here.\n")
    write(home / "diary.md", "# Diary\n\nhomediaryword here.\n")
    link = tmp_path / "home-link"
    link.symlink_to(home, target_is_directory=True)
    settings = load_settings(
        None, kb_path=[f"work={work}", f"home={link}"], index_path=tmp_path / "index.sqlite", **FAST
    )
    with capture_logs() as logs:
        async with running(settings, BagOfWordsEmbedder()) as daemon:
            assert await found(daemon, "homediaryword") == ["home/diary.md"]
            repoint(link, work)

            async def converged() -> bool:
                return await found(daemon, "homediaryword") == [] and await documents(daemon) == 1

            await eventually(converged, "the home folder's old notes removed", timeout=30)
            assert await found(daemon, "sharedplanword") == ["work/plan.md"]  # once, under its own folder
            write(work / "plan.md", "# Plan\n\nsharedplanword edited, editedplanword.\n")

            async def edit_found() -> bool:
                return await found(daemon, "editedplanword") == ["work/plan.md"]

            await eventually(edit_found, "an edit in the shared folder to be indexed once", timeout=30)
            assert await documents(daemon) == 1

            # Pointed at a folder of its own again: indexed again.
            repoint(link, home)

            async def back() -> bool:
                return await found(daemon, "homediaryword") == ["home/diary.md"] and await documents(daemon) == 2

            await eventually(back, "the home folder indexed again once its link leads to it", timeout=30)
    warned = [e for e in logs if e["event"] == "folder_duplicate_skipped"]
    assert len(warned) == 1, warned
    assert warned[0]["folder"] == "home" and warned[0]["other"] == "work" and warned[0]["other_path"] == str(work)


def test_two_folders_that_are_one_real_folder_through_a_link_are_refused_at_start_naming_both(tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    link = tmp_path / "also-work"
    link.symlink_to(work, target_is_directory=True)
    with pytest.raises(ConfigError) as err:
        load_settings(None, kb_path=[f"work={work}", f"also={link}"], index_path=tmp_path / "index.sqlite")
    message = str(err.value)
    assert "'work'" in message and "'also'" in message and str(link) in message and "twice" in message
