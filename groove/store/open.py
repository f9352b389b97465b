"""Opening the store an address names: the backend's module is imported only when it is used."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from groove.store.address import StoreAddress
from groove.store.protocols import Store


async def open_store(where: StoreAddress, **options: Any) -> Store:
    """Open the store at `where` (the backend imported only when used). `options`: writer_, pool, model,
    dimension, describe, settings_json, any_model, rebuild, and for PostgreSQL the notes folders it claims."""
    if where.kind == "sqlite":
        from groove.store.sqlite.store import SqliteStore

        assert where.path is not None
        options.pop("claims", None)
        options.pop("pool_size", None)
        return await SqliteStore.open(where.path, **options)
    from groove.store.postgres.store import PostgresStore

    assert where.url is not None
    return await PostgresStore.open(where.url, **options)


@contextmanager
def open_doctor(where: StoreAddress, settings: Any) -> Iterator[Any]:
    """The store's side of `groove doctor` (its checks of itself and its safe repairs), open for one run."""
    if where.kind == "sqlite":
        from groove.store.sqlite.doctor import SqliteDoctor

        assert where.path is not None
        doctor: Any = SqliteDoctor(where.path)
    else:
        from groove.store.postgres.doctor import PostgresDoctor

        assert where.url is not None
        doctor = PostgresDoctor(where.url, settings)
    try:
        yield doctor
    finally:
        doctor.close()
