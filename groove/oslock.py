"""Exclusive locks on open files, one code path for POSIX and Windows (decision 0023).

POSIX: `fcntl.flock` on the whole file. Windows: `msvcrt.locking` on one byte at LOCK_OFFSET, far past anything
groove writes in a lock file: Windows byte-range locks are mandatory (a locked byte cannot be read by another
handle), and a lock file holds the JSON of its holder at offset 0, which a refused process reads to name it.
Either lock goes with its process: the OS drops it when the descriptor closes or the process dies (kill -9,
a crash), so a stale lock file never blocks anyone.

`read_at` / `write_at` stand in for `os.pread` / `os.pwrite`, which Windows lacks. The branch is picked per call
from `sys.platform`, so a test runs the Windows one here with a stand-in `msvcrt` module (tests/test_windows.py).
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
import time
from collections.abc import Callable
from typing import Any

LOCK_OFFSET = 1 << 30  # Windows: the locked byte, 1 GiB in (locking past the end of a file is allowed)
POLL_S = 0.05  # Windows: how often a blocking `lock` asks again (msvcrt's own LK_LOCK gives up after 10 s)
_REFUSED = {errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK, getattr(errno, "EDEADLOCK", errno.EDEADLK), errno.EDEADLK}


def windows() -> bool:
    return sys.platform == "win32"


def try_lock(fd: int) -> bool:
    """Take the exclusive lock on the open file `fd` without waiting: False when another handle holds it."""
    if windows():
        msvcrt = _msvcrt()
        try:
            _at_lock_byte(fd, lambda: msvcrt.locking(fd, msvcrt.LK_NBLCK, 1))
        except OSError as exc:
            if exc.errno in _REFUSED:
                return False
            raise
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def lock(fd: int) -> None:
    """Take the exclusive lock on `fd`, waiting for as long as another handle holds it."""
    if windows():
        while not try_lock(fd):
            time.sleep(POLL_S)
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_EX)


def unlock(fd: int) -> None:
    """Drop the lock `fd` holds (closing `fd` drops it too; Windows asks for an unlock before the close)."""
    if windows():
        msvcrt = _msvcrt()
        _at_lock_byte(fd, lambda: msvcrt.locking(fd, msvcrt.LK_UNLCK, 1))
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


def release(fd: int) -> None:
    """Unlock and close `fd` (the close alone would drop the lock; an unlock that fails does not stop it)."""
    try:
        unlock(fd)
    except OSError:
        pass
    os.close(fd)


def held_elsewhere(fd: int) -> bool:
    """Whether another handle holds the lock on `fd`'s file: takes it and gives it back at once when free."""
    if not try_lock(fd):
        return True
    unlock(fd)
    return False


def read_at(fd: int, size: int, offset: int = 0) -> bytes:
    """Up to `size` bytes from `offset` (`os.pread` where there is one)."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def write_at(fd: int, data: bytes, offset: int = 0) -> None:
    """`data` at `offset` (`os.pwrite` where there is one)."""
    if hasattr(os, "pwrite"):
        os.pwrite(fd, data, offset)
        return
    os.lseek(fd, offset, os.SEEK_SET)
    os.write(fd, data)


def _msvcrt() -> Any:
    """Windows' msvcrt module (imported by name: its stubs exist for win32 only, and a test puts a stand-in there)."""
    return importlib.import_module("msvcrt")


def _at_lock_byte(fd: int, call: Callable[[], object]) -> None:
    """Run `call` (an msvcrt.locking call, which locks from the file position) with the position at LOCK_OFFSET."""
    os.lseek(fd, LOCK_OFFSET, os.SEEK_SET)
    try:
        call()
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
