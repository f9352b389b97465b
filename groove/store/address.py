"""Which store an index lives in.

`[store] url` in groove.toml (`GROOVE_STORE__URL`, `--store URL`) names a PostgreSQL database
(`postgresql://user@host:port/db`); without it the index is the SQLite file `index_path` names,
as always. The password never comes from a URL shown anywhere: libpq reads it from its usual
places (`PGPASSWORD`, `~/.pgpass`, a service file), and `shown` prints the URL without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from groove.store.protocols import StoreError

POSTGRES_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class StoreAddress:
    """Where an index lives: a SQLite file, or a PostgreSQL database URL."""

    kind: str  # "sqlite" | "postgresql"
    path: Path | None = None
    url: str | None = None

    @property
    def anchor(self) -> Path:
        """A local path standing for this index (the SQLite file itself): where its running service's local socket
        and its eval history live. For a database, a name under the user data folder keyed by the URL without
        its password (no file is made there)."""
        if self.path is not None:
            return self.path
        import hashlib

        from groove.dirs import user_dirs

        key = hashlib.sha256(self.shown.encode("utf-8")).hexdigest()[:16]
        return user_dirs().stores / f"postgresql-{key}"

    @property
    def shown(self) -> str:
        """For messages and logs: the file, or the URL without its password."""
        if self.kind == "sqlite":
            return str(self.path)
        return redact(self.url or "")


def redact(url: str) -> str:
    """The URL with any password replaced by `***` (query parameters `password=` too)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        cred, _, host = netloc.rpartition("@")
        user, _, password = cred.partition(":")
        netloc = f"{user}:***@{host}" if password else f"{user}@{host}"
    query = "&".join(
        "password=***" if kv.split("=", 1)[0].lower() == "password" else kv for kv in parts.query.split("&") if kv
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def anchor_of(url: str | None, index_path: Callable[[], Path]) -> Path:
    """The local path that stands for the index `[store] url` or the SQLite file names (its running service's
    socket is keyed by it); `index_path` is asked only without a url (it needs a notes folder)."""
    return address(url, Path() if url else index_path()).anchor


def address(url: str | None, index_path: Path) -> StoreAddress:
    """The store of `[store] url` (a PostgreSQL URL), else the SQLite file at `index_path`."""
    if not url:
        return StoreAddress("sqlite", path=index_path)
    scheme = urlsplit(url).scheme.lower()
    if scheme in POSTGRES_SCHEMES:
        return StoreAddress("postgresql", url=url)
    if scheme in ("sqlite", "file"):
        raw = urlsplit(url).path
        return StoreAddress("sqlite", path=Path(raw).expanduser())
    raise StoreError(
        f"[store] url {redact(url)!r} names no store groove knows: use postgresql://user@host/db (PostgreSQL with "
        "pgvector), or leave it out for the SQLite file of index_path"
    )
