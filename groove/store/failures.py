"""What a failed write means to a person, whichever store failed: one sentence, and what to do.

Each backend knows its own driver's errors (`write_failure` in `groove.store.sqlite.connection` and
`groove.store.postgres.connection`); this module asks the ones this process has loaded, so a command
that never touched PostgreSQL never imports its driver.
"""

from __future__ import annotations

import sys

_BACKENDS = ("groove.store.sqlite.connection", "groove.store.postgres.connection")


def write_failure(exc: BaseException) -> tuple[str, str] | None:
    """(what happened, what to do) for a write that failed for a reason a person can fix (a full disk, a
    read-only index, a database that went away), else None."""
    for name in _BACKENDS:
        module = sys.modules.get(name)
        if module is not None:
            known = module.write_failure(exc)
            if known is not None:
                return known
    if isinstance(exc, OSError) and getattr(exc, "errno", None) == 28:
        return f"the disk holding the index is full ({exc})", "free some space"
    return None


def store_errors() -> tuple[type[BaseException], ...]:
    """The error classes of the store drivers this process has loaded (a write that failed in the store)."""
    found: list[type[BaseException]] = []
    for name in _BACKENDS:
        module = sys.modules.get(name)
        if module is not None:
            found.append(module.DBError)
    return tuple(found)


def describe_write_error(exc: BaseException, *, resumes: bool = True) -> str:
    """One sentence for a failed write: what happened and what to do (disk full, read-only index), else the
    exception itself. The daemon (`resumes`) shows it in index_status and /healthz and retries; `groove
    index` says to run it again."""
    then = (
        "writing resumes by itself and searches keep working meanwhile"
        if resumes
        else "then run groove index again (what was written so far is kept)"
    )
    known = write_failure(exc)
    if known:
        return f"{known[0]}: {known[1]}; {then}"
    return repr(exc)
