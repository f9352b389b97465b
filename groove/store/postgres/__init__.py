"""The PostgreSQL store (pgvector): an index several machines share (docs/scale-out.md, decision 0022).

Its driver is an extra (`pip install 'groove[postgres]'`): importing this package without it is a
StoreError that says so, so `--store postgresql://...` on an install without it fails with that one
line rather than a traceback.
"""

from __future__ import annotations

from groove.store.protocols import StoreError

try:
    import pgvector.psycopg  # noqa: F401 - imported to learn whether the extra is installed
    import psycopg  # noqa: F401 - imported to learn whether the extra is installed
    import psycopg_pool  # noqa: F401 - imported to learn whether the extra is installed
except ImportError as exc:  # pragma: no cover - exercised by a test in a process without the extra
    raise StoreError(
        f"the PostgreSQL store needs its driver, which is not installed ({exc.name} is missing): "
        "pip install 'groove[postgres]'"
    ) from None
