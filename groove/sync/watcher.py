"""Watch the notes folder and hand debounced batches of changed paths to the writer.

watchfiles groups events within `debounce_ms`. A renamed folder arrives as the
folder alone and files created inside a new folder can be missed, so folder
paths are passed on as they are and the indexer rescans them; the periodic
reconcile is the safety net for anything the watcher misses. A path the ignore
rules leave out (`.grooveignore`, a git repository's `.gitignore` files:
`Ignore.path_ignored`) is dropped here, so an ignored folder that churns (a
build output) never wakes the writer; a change to an ignore file itself is
handed on, and the indexer reconciles everything under the new rules.

A file name that is not valid UTF-8 makes watchfiles fail the whole batch
(`WatchfilesRustInternalError: Unable to decode path`): the watcher logs it
once, starts watching again at once and asks for a full reconcile
(`on_lost`), which reports the file and picks up whatever else that batch
held. Such a name never stops the watcher.

inotify watches a folder, not a path: when the notes folder is renamed away,
deleted, or replaced by another one (``mv kb kb.old && cp -r kb.old kb``), the
old watch reports nothing more. The watcher checks the folder's identity
(device + inode) every second and after each batch; when it changed, the state
says the watch is not live (``FOLDER_MISSING``: `/healthz` fails and
`index_status` says so) until there is a folder at the path again, the watch is
attached to it, and `on_lost` asks for a full reconcile. While the folder is
missing, a reconcile keeps the notes the index has (corpus/scan.py).

A notes folder given as a symlink (`link`) is checked through the link, followed anew each time: when the
link is re-pointed at another folder, the identity changes as for a replaced folder, and the watcher raises
`FolderRepointed` with the new real folder; the daemon re-points the folder (the indexer reads the new
one), watches it and a full reconcile indexes its notes and removes the old folder's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Literal

import anyio
import watchfiles
from watchfiles._rust_notify import WatchfilesRustInternalError  # not re-exported by watchfiles

from groove.corpus.scan import ALWAYS_SKIPPED_DIRS, GITIGNORE_FILE, IGNORE_FILE
from groove.errors import GrooveError
from groove.logs import get_logger

log = get_logger(__name__)


def relevant(
    kb: Path,
    path: str,
    extensions: tuple[str, ...],
    index_path: Path | None,
    ignored: Callable[[str], bool] | None = None,
) -> str | None:
    """The relative path to reconcile for a raw event path, or None to drop it (`ignored`: the ignore rules'
    verdict, `Ignore.path_ignored`: what .grooveignore and .gitignore leave out never wakes the writer)."""
    p = Path(path)
    try:
        rel = p.relative_to(kb).as_posix()
    except ValueError:
        return None
    if rel in (".", ""):
        return None
    parts = rel.split("/")
    if any(part in ALWAYS_SKIPPED_DIRS for part in parts):
        return None
    if index_path is not None and (p == index_path or p.name.startswith(index_path.name)):
        return None
    name = parts[-1]
    if name in (IGNORE_FILE, GITIGNORE_FILE):
        return rel  # the rules changed: the indexer reconciles everything
    if ignored is not None and ignored(rel):
        return None
    if name.lower().endswith(extensions):
        return rel
    # Anything else may be a folder (created, deleted or renamed): let the indexer decide.
    if "." not in name or p.is_dir():
        return rel
    return None


def _undecodable(exc: BaseException) -> bool:
    """watchfiles' error for a path it cannot decode, bare or inside awatch's exception group."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_undecodable(e) for e in exc.exceptions)
    return isinstance(exc, WatchfilesRustInternalError)


WATCH_CHECK_S = 1.0  # how often the watcher checks that the notes folder is still the one it watches

#: The watcher's states besides "watching" and "stopped" (the daemon's health is ok only while "watching").
FOLDER_MISSING = "waiting: the notes folder is not there"
FOLDER_REPLACED = "re-attaching: the notes folder was replaced"


class FolderRepointed(GrooveError):
    """The notes folder given as a symlink now leads to another real folder (`target`) than the one watched."""

    def __init__(self, link: Path, kb: Path, target: Path):
        super().__init__(f"the notes folder link {link} now leads to {target} (was {kb})")
        self.link = link
        self.kb = kb
        self.target = target


def folder_identity(kb: Path) -> tuple[int, int] | None:
    """(device, inode) of the notes folder, or None when there is no folder at that path."""
    try:
        st = os.stat(kb)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _real(link: Path) -> Path:
    """The real folder a path leads to now (its symlinks followed)."""
    return Path(os.path.realpath(link))


def _stopped(stop_event: anyio.Event | None) -> bool:
    return stop_event is not None and stop_event.is_set()


async def _wait_for_folder(kb: Path, stop_event: anyio.Event | None) -> tuple[int, int] | None:
    """Wait until there is a folder at `kb` again; its identity, or None when stopped first."""
    while not _stopped(stop_event):
        identity = folder_identity(kb)
        if identity is not None:
            return identity
        with anyio.move_on_after(WATCH_CHECK_S):
            if stop_event is not None:
                await stop_event.wait()
            else:
                await anyio.sleep(WATCH_CHECK_S)
    return None


async def watch(
    kb: Path,
    on_batch: Callable[[set[str]], Awaitable[None]],
    *,
    debounce_ms: int,
    extensions: tuple[str, ...],
    index_path: Path | None = None,
    stop_event: anyio.Event | None = None,
    on_state: Callable[[str], None] | None = None,
    on_lost: Callable[[], Awaitable[None]] | None = None,
    ignored: Callable[[str], bool] | None = None,
    link: Path | None = None,
) -> None:
    """Hand batches of changed paths to `on_batch` until `stop_event` (not those `ignored` says the rules leave
    out); `on_lost` when a batch was lost, and when the notes folder came back or was replaced (the watch is attached
    to the new folder first). `link`: the path as the user gave it, when a symlink makes it differ from `kb`;
    raises FolderRepointed when it leads to another folder than `kb`."""
    given = link if link is not None else kb

    def state(value: str) -> None:
        if on_state:
            on_state(value)

    identity = folder_identity(given)
    attached_before = False
    try:
        while not _stopped(stop_event):
            if identity is None:
                state(FOLDER_MISSING)
                log.warning(
                    "watch_folder_missing",
                    kb=str(kb),
                    action="waiting for it; the index keeps its notes, and a full reconcile follows its return",
                )
                identity = await _wait_for_folder(given, stop_event)
                if identity is None:
                    return  # stopped
            if link is not None and (target := _real(link)) != kb:
                state(FOLDER_REPLACED)
                log.warning(
                    "watch_folder_repointed",
                    kb=str(link),
                    was=str(kb),
                    now=str(target),
                    action="watching the new folder; a full reconcile indexes its notes and removes the old ones",
                )
                raise FolderRepointed(link, kb, target)
            state("watching")
            if attached_before:
                log.warning("watch_reattached", kb=str(kb), action="a full reconcile picks up what changed meanwhile")
                if on_lost is not None:
                    await on_lost()
            else:
                log.info("watch_started", kb=str(kb), debounce_ms=debounce_ms)
            attached_before = True
            moved = await _watch_folder(
                kb,
                identity,
                given,
                on_batch,
                debounce_ms=debounce_ms,
                extensions=extensions,
                index_path=index_path,
                stop_event=stop_event,
                on_lost=on_lost,
                ignored=ignored,
            )
            if moved is False:
                return  # stopped
            identity = moved
            if identity is not None:
                state(FOLDER_REPLACED)
    finally:
        state("stopped")


async def _watch_folder(
    kb: Path,
    identity: tuple[int, int],
    given: Path,
    on_batch: Callable[[set[str]], Awaitable[None]],
    *,
    debounce_ms: int,
    extensions: tuple[str, ...],
    index_path: Path | None,
    stop_event: anyio.Event | None,
    on_lost: Callable[[], Awaitable[None]] | None,
    ignored: Callable[[str], bool] | None = None,
) -> tuple[int, int] | None | Literal[False]:
    """Watch the folder that has `identity` until it is stopped (False) or the folder at `kb` is no longer
    that folder: moved away or deleted (None), or replaced by another (the new one's identity). `given`: the
    path whose identity is checked (the link as given, followed; else `kb`).

    inotify watches a folder, not a path: once the folder is renamed or deleted, watchfiles reports
    nothing more, ever, so the path is checked every WATCH_CHECK_S (and after each batch)."""
    lost = 0
    while not _stopped(stop_event):
        try:
            async with aclosing(
                watchfiles.awatch(
                    kb,
                    # A batch is handed on once the folder has been quiet for `debounce_ms` (watchfiles'
                    # `step`); during non-stop activity at most every 10 x debounce_ms (its `debounce`).
                    step=max(debounce_ms, 1),
                    debounce=max(debounce_ms * 10, 1000),
                    stop_event=stop_event,
                    recursive=True,
                    watch_filter=None,
                    rust_timeout=int(WATCH_CHECK_S * 1000),
                    yield_on_timeout=True,  # an empty batch every WATCH_CHECK_S: the folder check below
                )
            ) as batches:
                async for changes in batches:
                    now = folder_identity(given)  # through the link as given: a re-pointed link is a new folder
                    if now != identity:
                        log.warning(
                            "watch_folder_gone" if now is None else "watch_folder_replaced",
                            kb=str(given),
                            action="the watch is attached again when there is a folder there",
                        )
                        return now
                    rels = {
                        r
                        for _, path in changes
                        if (r := relevant(kb, path, extensions, index_path, ignored)) is not None
                    }
                    if rels:
                        log.debug("watch_batch", paths=len(rels))
                        await on_batch(rels)
            return False  # stopped
        except Exception as exc:  # only the undecodable-name error is handled
            if not _undecodable(exc):
                raise
            # A name watchfiles cannot decode (not UTF-8) failed the batch it was in.
            lost += 1
            if lost == 1:
                log.warning(
                    "watch_batch_lost",
                    error=str(exc),
                    action="watching again; a full reconcile reports the file and picks up the rest",
                )
            if on_lost is not None:
                await on_lost()
            await anyio.sleep(min(0.05 * lost, 1.0))  # never a busy loop, whatever the folder holds
    return False
