"""One writer per index: a second `groove index` or `groove serve` on an index another groove process
writes is refused at once, naming that process; read-only commands work beside it; a writer killed with
kill -9 leaves no lock behind (the OS drops a flock with its process). Real processes, real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from groove.index import Index
from groove.store.sqlite.writer_lock import IndexLockedError, lock_path
from tests.support.common import GROOVE, ROOT, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.server import free_port, server_env

REFUSED = "is being written by another groove process"


def groove(spawn, tmp_path: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return spawn.run([*GROOVE, *argv], cwd=ROOT, env=server_env(tmp_path), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def notes(kb: Path) -> None:
    write(kb / "a.md", "# Tides\n\nNotes about the spring tides and the moon.\n")
    write(kb / "b.md", "# Bread\n\nSourdough starter and long fermentation.\n")


def test_a_second_writer_beside_a_running_daemon_is_refused_naming_it_and_readers_work(spawn, kb, tmp_path):
    notes(kb)
    index = tmp_path / "index.sqlite"
    server = spawn.server(kb, index, tmp_path)
    try:
        server.wait_healthy()
        server.wait_indexed(2)
        holder = json.loads(lock_path(index).read_text())
        assert holder["pid"] == server.proc.pid and "serve" in holder["command"]

        second_index = groove(spawn, tmp_path, "index", "--kb", str(kb), "--index", str(index))
        assert second_index.returncode != 0
        assert REFUSED in second_index.stderr and f"pid {server.proc.pid}" in second_index.stderr
        assert "groove serve" in second_index.stderr and "since " in second_index.stderr
        assert "Traceback" not in second_index.stderr

        port = free_port()
        second_serve = groove(spawn, tmp_path, "serve", "--kb", str(kb), "--index", str(index), "--transport", "http",
                              "--bind", f"127.0.0.1:{port}", timeout=120)
        assert second_serve.returncode != 0
        assert REFUSED in second_serve.stderr and f"pid {server.proc.pid}" in second_serve.stderr

        # The read-only commands take no lock.
        status = groove(spawn, tmp_path, "status", "--kb", str(kb), "--index", str(index), "--format", "json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["documents"] == 2
        found = groove(spawn, tmp_path, "search", "spring tides", "--kb", str(kb), "--index", str(index), "--format", "json")
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["results"][0]["path"] == "a.md"
        # The daemon still runs and still writes.
        server.wait_healthy(10)
    finally:
        code, _ = server.terminate()
    assert code == 0
    # Once it has stopped, the next writer goes ahead.
    after = groove(spawn, tmp_path, "index", "--kb", str(kb), "--index", str(index), "--format", "json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["unchanged"] == 2


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from groove.store.sqlite.writer_lock import WriterLock
    lock = WriterLock(Path(sys.argv[1]))
    lock.acquire()
    print("locked", flush=True)
    time.sleep(600)
""")


def test_a_writer_killed_with_kill_9_leaves_no_lock_behind(spawn, kb, tmp_path):
    notes(kb)
    index = tmp_path / "index.sqlite"
    holder = spawn.popen([sys.executable, "-c", HOLDER, str(index)], cwd=ROOT, env=server_env(tmp_path),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        refused = groove(spawn, tmp_path, "index", "--kb", str(kb), "--index", str(index))
        assert refused.returncode != 0 and REFUSED in refused.stderr and f"pid {holder.pid}" in refused.stderr
        assert not index.exists()  # refused before anything was created
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
    stale = json.loads(lock_path(index).read_text())
    assert stale["pid"] == holder.pid  # the file stays, with the dead process in it ...
    done = groove(spawn, tmp_path, "index", "--kb", str(kb), "--index", str(index), "--format", "json")
    assert done.returncode == 0, done.stderr  # ... and blocks nobody
    assert json.loads(done.stdout)["added"] == 2


async def test_two_writers_in_one_process_are_refused_too_and_the_lock_is_released_on_close(kb, make_settings):
    notes(kb)
    settings = make_settings(kb)
    embedder = BagOfWordsEmbedder()
    async with Index.open(settings, embedder=embedder):
        with pytest.raises(IndexLockedError, match=f"pid {os.getpid()}"):
            async with Index.open(settings, embedder=embedder):
                pass
        async with Index.open(settings, readonly=True, embedder=embedder) as reader:
            assert (await reader.status()).documents == 0
    async with Index.open(settings, embedder=embedder) as again:
        assert (await again.reconcile()).added == 2


def test_groove_index_on_a_full_disk_says_so_instead_of_a_traceback(kb, tmp_path, monkeypatch, capsys):
    """SQLite's page limit on the writer's connection stands in for a full disk (SQLITE_FULL)."""
    from groove import cli
    from groove.store.sqlite import connection

    for i in range(30):
        write(kb / f"n{i}.md", f"# Note {i}\n\n" + f"Paragraph {i} about the estuary and its herons. " * 40 + "\n")
    real_connect = connection.connect_sync

    def small_disk(path, *, readonly=False):
        con = real_connect(path, readonly=readonly)
        if not readonly:
            con.execute("PRAGMA max_page_count = 40")
        return con

    monkeypatch.setattr(connection, "connect_sync", small_disk)
    code = cli.main(["index", "--kb", str(kb), "--index", str(tmp_path / "full.sqlite")])
    err = capsys.readouterr().err
    assert code == 1
    assert "groove: error: could not write the index" in err and "the disk holding the index is full" in err
    assert "free some space; then run groove index again" in err and "Traceback" not in err


def test_a_hard_link_to_the_index_under_another_name_is_refused_while_the_daemon_runs(spawn, kb, tmp_path):
    """Issue 22 point 16: the lock is on the file's identity (device + inode) too, not only on its name."""
    from tests.support.server import FAKE_GROOVE

    notes(kb)
    index = tmp_path / "index.sqlite"
    server = spawn.server(kb, index, tmp_path, command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        server.wait_indexed(2)
        hard = tmp_path / "elsewhere" / "hard.sqlite"
        hard.parent.mkdir()
        os.link(index, hard)
        refused = groove(spawn, tmp_path, "index", "--kb", str(kb), "--index", str(hard))
        assert refused.returncode != 0
        assert REFUSED in refused.stderr and f"pid {server.proc.pid}" in refused.stderr
        assert f"as {index}" in refused.stderr and "hard link" in refused.stderr
        assert "Traceback" not in refused.stderr
        server.wait_healthy(10)
    finally:
        code, _ = server.terminate()
    assert code == 0
    after = groove(spawn, tmp_path, "index", "--kb", str(kb), "--index", str(hard), "--format", "json")
    assert after.returncode == 0, after.stderr  # once the daemon has stopped, the link is an index like any other


async def test_a_writer_through_a_hard_link_is_refused_in_one_process_too_and_after_close_it_goes_ahead(
        kb, make_settings, tmp_path):
    notes(kb)
    settings = make_settings(kb)
    embedder = BagOfWordsEmbedder()
    hard = tmp_path / "hard.sqlite"
    async with Index.open(settings, embedder=embedder) as first:
        await first.reconcile()
        os.link(settings.resolved_index_path(), hard)
        linked = make_settings(kb, index_path=hard)
        with pytest.raises(IndexLockedError, match="the same file under another name"):
            async with Index.open(linked, embedder=embedder):
                pass
        assert (await first.reconcile()).unchanged == 2  # the first writer is untouched
    async with Index.open(make_settings(kb, index_path=hard), embedder=embedder) as again:
        assert (await again.reconcile()).unchanged == 2
