"""glibc's malloc, tuned for `groove serve` (issue 36, point 5).

Two defaults of glibc's allocator made the daemon's memory grow burst after burst of searches and
edits, and never go back when idle:

- Arenas: a thread that finds the arenas busy gets a new one, up to 8 per core. The daemon runs
  searches, reads and the model's calls on anyio's worker threads, which come and go (they end after
  10 s idle), so a burst's memory is spread over up to 16 arenas on 2 cores, each keeping its free
  pages. Capped at MALLOC_ARENAS.
- The mmap threshold: a block of 128 KB or more is mapped on its own and given back when freed, but
  glibc raises that threshold to the size of each mapped block freed (up to 32 MB), so once the
  model's activations (several MB a batch) have been freed, later ones come from the heap, whose
  free middle is never given back. Fixed at MMAP_THRESHOLD, which turns the raising off.

Measured in docs/operations.md, "Memory under load". `MALLOC_ARENA_MAX` and `MALLOC_MMAP_THRESHOLD_`
in the environment, which glibc reads itself, win; other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

from groove.logs import get_logger

log = get_logger(__name__)

MALLOC_ARENAS = 2
MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value, kept
M_MMAP_THRESHOLD = -3  # glibc's malloc.h
M_ARENA_MAX = -8


def tune_malloc(arenas: int = MALLOC_ARENAS, mmap_threshold: int = MMAP_THRESHOLD) -> dict[str, int]:
    """Set glibc's arena cap and a fixed mmap threshold for what is allocated from now on (call it before
    the daemon's threads start). Returns what was set: empty when this is not glibc."""
    if not sys.platform.startswith("linux"):
        return {}
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only (musl has no such symbol)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return {}
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done: dict[str, int] = {}
    if not os.environ.get("MALLOC_ARENA_MAX") and mallopt(M_ARENA_MAX, arenas) == 1:
        done["arenas"] = arenas
    if not os.environ.get("MALLOC_MMAP_THRESHOLD_") and mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1:
        done["mmap_threshold"] = mmap_threshold
    if done:
        log.debug("malloc_tuned", **done)
    return done
