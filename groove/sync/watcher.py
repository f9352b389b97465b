"""Watch the notes folder and hand debounced batches of changed paths to the writer.

watchfiles groups events within `debounce_ms`. A renamed folder arrives as the
folder alone and files created inside a new folder can be missed, so folder
paths are passed on as they are and the indexer rescans them; the periodic
reconcile is the safety net for anything the watcher misses.

A file name that is not valid UTF-8 makes watchfiles fail the whole batch
(`WatchfilesRustInternalError: Unable to decode path`): the watcher logs it
once, starts watching again at once and asks for a full reconcile
(`on_lost`), which reports the file and picks up whatever else that batch
held. Such a name never stops the watcher.
"""

from __future__ import annotations

from pathlib import Path
from typing import Awaitable, Callable

import anyio
import watchfiles
from watchfiles._rust_notify import WatchfilesRustInternalError  # not re-exported by watchfiles

from groove.corpus.scan import ALWAYS_SKIPPED_DIRS, IGNORE_FILE
from groove.logs import get_logger

log = get_logger(__name__)


def relevant(kb: Path, path: str, extensions: tuple[str, ...], index_path: Path | None) -> str | None:
    """The relative path to reconcile for a raw event path, or None to drop it."""
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
    if name == IGNORE_FILE:
        return rel
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
) -> None:
    """Hand batches of changed paths to `on_batch` until `stop_event`; `on_lost` when a batch was lost."""
    if on_state:
        on_state("watching")
    log.info("watch_started", kb=str(kb), debounce_ms=debounce_ms)
    lost = 0
    try:
        while stop_event is None or not stop_event.is_set():
            try:
                async for changes in watchfiles.awatch(
                    kb,
                    # A batch is handed on once the folder has been quiet for `debounce_ms` (watchfiles'
                    # `step`); during non-stop activity at most every 10 x debounce_ms (its `debounce`).
                    step=max(debounce_ms, 1),
                    debounce=max(debounce_ms * 10, 1000),
                    stop_event=stop_event,
                    recursive=True,
                    watch_filter=None,
                    yield_on_timeout=False,
                ):
                    rels = {r for _, path in changes if (r := relevant(kb, path, extensions, index_path)) is not None}
                    if rels:
                        log.debug("watch_batch", paths=len(rels))
                        await on_batch(rels)
                return  # stopped
            except Exception as exc:  # noqa: BLE001 - only the undecodable-name error is handled
                if not _undecodable(exc):
                    raise
                # A name watchfiles cannot decode (not UTF-8) failed the batch it was in.
                lost += 1
                if lost == 1:
                    log.warning("watch_batch_lost", error=str(exc),
                                action="watching again; a full reconcile reports the file and picks up the rest")
                if on_lost is not None:
                    await on_lost()
                await anyio.sleep(min(0.05 * lost, 1.0))  # never a busy loop, whatever the folder holds
    finally:
        if on_state:
            on_state("stopped")
