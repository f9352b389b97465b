"""One writer per index: an advisory lock beside the index file, and one on the file's identity."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from groove.store.sqlite.connection import IndexError_

# --- one writer per index: an advisory lock beside it ------------------------------------------


class IndexLockedError(IndexError_):
    """Another groove process writes this index."""


class IndexFolderError(IndexError_):
    """The folder of the index cannot be written (permissions, a read-only file system)."""


def unwritable_folder(index: Path, exc: OSError) -> IndexFolderError:
    """One line naming the index's folder and why it cannot be written, for a writer that must create files there
    (the index, its lock, SQLite's -wal and -shm files)."""
    import errno

    why = exc.strerror or str(exc)
    if exc.errno == errno.EROFS:
        why = "it is on a read-only file system"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why = "permission denied"
    return IndexFolderError(
        f"cannot write in the index folder {index.parent} ({why}): make it writable, or give "
        "--index (or index_path) a file in a folder you can write; read-only commands "
        "(search, status) still work on an index that is there"
    )


def lock_path(path: Path) -> Path:
    return Path(str(path) + ".lock")


def _identity_lock_dir() -> Path:
    """Where the locks on index files' identities live: one folder per user (groove.dirs: the runtime folder on
    POSIX, the data folder on Windows)."""
    from groove.dirs import user_dirs

    return user_dirs().locks


def identity_lock_path(index: Path) -> Path | None:
    """The lock of the index file's identity (device + inode), or None while there is no file."""
    import os

    try:
        st = os.stat(index)
    except OSError:
        return None
    return _identity_lock_dir() / f"{st.st_dev}-{st.st_ino}.lock"


class WriterLock:
    """An exclusive lock (groove.oslock: flock on POSIX, msvcrt.locking on Windows) on `<index>.lock`, holding
    JSON {pid, command, started_at, index} of the process that writes,
    and on the index file's identity (device + inode: a lock file in a per-user folder of the runtime folder).

    Every writer (`groove index`, `groove serve`) takes it when it opens the index for writing and keeps
    it until it closes; a second writer is refused at once with a message naming the first. The OS
    drops the lock when its process dies (kill -9 included), so a stale file never blocks anyone.
    Read-only commands never take it. The identity lock refuses a writer that reaches the same file
    under another name (a hard link, a bind mount): `hold_identity` takes it as soon as the file
    exists (at once for an existing index; after creating a new one).
    """

    def __init__(self, path: Path):
        self.index = Path(path)
        self.path = lock_path(self.index)
        self._fd: int | None = None
        self._identity_fd: int | None = None

    def _info(self) -> bytes:
        import os
        import sys

        return json.dumps(
            {
                "pid": os.getpid(),
                "command": " ".join(["groove", *sys.argv[1:]]) if sys.argv else "groove",
                "started_at": time.time(),
                "index": str(self.index),
            }
        ).encode("utf-8")

    def acquire(self) -> None:
        import os

        if self._fd is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        except OSError as exc:
            raise unwritable_folder(self.index, exc) from None
        self._fd = self._take(fd)
        try:
            self.hold_identity()
        except BaseException:
            self.release()
            raise

    def hold_identity(self) -> None:
        """Lock the index file's identity too; nothing to do while there is no file yet (call again once
        it exists). IndexLockedError when another writer holds it through another name."""
        import os

        if self._identity_fd is not None:
            return
        path = identity_lock_path(self.index)
        if path is None:
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0)  # Windows: no newline translation
        self._identity_fd = self._take(os.open(path, flags, 0o600), identity=True)

    def _take(self, fd: int, *, identity: bool = False) -> int:
        """Lock `fd` (closed when it cannot be), write who holds it, and return it. IndexLockedError names the
        holder; for the identity lock, the other name the holder has the file under."""
        import os

        from groove import oslock

        try:
            taken = oslock.try_lock(fd)
        except BaseException:
            os.close(fd)
            raise
        if not taken:
            holder = _read_holder(fd)
            os.close(fd)
            other = holder.get("index") if identity else None
            through = f" as {other} (the same file under another name: a hard link?)" if other else ""
            raise IndexLockedError(_locked_message(self.index, holder, through))
        os.ftruncate(fd, 0)
        oslock.write_at(fd, self._info(), 0)
        return fd

    def release(self) -> None:
        import os

        from groove import oslock

        for name in ("_identity_fd", "_fd"):
            fd = getattr(self, name)
            if fd is None:
                continue
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            oslock.release(fd)  # unlock and close
            setattr(self, name, None)

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read_holder(fd: int) -> dict[str, Any]:
    from groove import oslock

    try:
        data = oslock.read_at(fd, 4096, 0)
        holder = json.loads(data.decode("utf-8")) if data else {}
        return holder if isinstance(holder, dict) else {}
    except (OSError, ValueError):
        return {}


def _locked_message(index: Path, holder: dict[str, Any], through: str = "") -> str:
    who = []
    if holder.get("pid"):
        who.append(f"pid {holder['pid']}")
    if holder.get("command"):
        who.append(f"`{holder['command']}`")
    if isinstance(holder.get("started_at"), (int, float)):
        who.append("since " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["started_at"])))
    named = f" ({', '.join(who)})" if who else ""
    return (
        f"the index {index} is being written by another groove process{named}{through}; stop that process first "
        "(or use its MCP tools, e.g. reindex), or give this command another --index. Read-only commands "
        "(search, status, related) work beside it"
    )
