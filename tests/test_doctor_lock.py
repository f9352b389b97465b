"""`groove doctor --fix` is a writer (issue 20 point 8): it takes the index's `writer_lock.WriterLock` like `groove index`
and `groove serve`, so beside a running daemon it is refused at once, naming the daemon, and touches nothing;
`groove doctor` without --fix takes no lock and reports beside it. Real processes, real files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from groove.ops import doctor
from groove.store.sqlite import connection, writer_lock
from groove.store.sqlite import doctor as sqlite_doctor
from tests.support.common import ROOT, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once
from tests.support.server import FAKE_GROOVE, server_env

REFUSED = "is being written by another groove process"
GHOST = 9999  # a row of the CJK bigram table that belongs to no chunk: damage only `doctor --fix` repairs


def groove(spawn, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    return spawn.run([*FAKE_GROOVE, *argv], cwd=ROOT, env=server_env(tmp_path), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def notes(kb: Path) -> None:
    write(kb / "a.md", "# Tides\n\nNotes about the spring tides and the moon.\n")
    write(kb / "b.md", "# Bread\n\nSourdough starter and long fermentation.\n")


def add_ghost_row(index: Path) -> None:
    con = connection.connect_sync(index)
    con.execute(f"INSERT INTO fts_cjk(rowid, heading, context, content) VALUES ({GHOST}, '', '', 'ghost')")
    con.close()


def ghost_rows(index: Path) -> int:
    con = connection.connect_sync(index, readonly=True)
    try:
        return con.execute("SELECT count(*) FROM fts_cjk WHERE rowid = ?", (GHOST,)).fetchone()[0]
    finally:
        con.close()


def checks(report: dict) -> set[str]:
    return {f["check"] for f in report["findings"]}


def test_doctor_fix_beside_a_running_daemon_is_refused_naming_it_and_the_index_is_untouched(spawn, kb, tmp_path):
    notes(kb)
    index = tmp_path / "index.sqlite"
    built = groove(spawn, tmp_path, "index", "--kb", str(kb), "--index", str(index))
    assert built.returncode == 0, built.stderr
    add_ghost_row(index)  # before the daemon starts: the test writes beside no one
    server = spawn.server(kb, index, tmp_path, command=FAKE_GROOVE)
    try:
        server.wait_healthy()
        server.wait_indexed(2)

        fix = groove(spawn, tmp_path, "doctor", "--fix", "--kb", str(kb), "--index", str(index))
        assert fix.returncode == 1  # as every refused writer (IndexLockedError), not a doctor verdict
        assert REFUSED in fix.stderr and f"pid {server.proc.pid}" in fix.stderr and "groove serve" in fix.stderr
        assert "`groove doctor` without --fix" in fix.stderr
        assert len(fix.stderr.strip().splitlines()) == 1 and "Traceback" not in fix.stderr
        assert fix.stdout == ""  # refused before any check ran
        assert ghost_rows(index) == 1  # nothing repaired
        assert json.loads(writer_lock.lock_path(index).read_text())["pid"] == server.proc.pid  # the daemon still holds it

        as_json = groove(spawn, tmp_path, "doctor", "--fix", "--kb", str(kb), "--index", str(index), "--format", "json")
        assert as_json.returncode == 1 and REFUSED in json.loads(as_json.stdout)["error"]

        # The checks alone take no lock: they report beside the daemon.
        report = groove(spawn, tmp_path, "doctor", "--kb", str(kb), "--index", str(index), "--format", "json")
        found = json.loads(report.stdout)
        assert report.returncode == 2, report.stderr  # the ghost row is an error
        assert "fts_rows_without_chunks" in checks(found) and found["fixed"] == []
        assert ghost_rows(index) == 1
        server.wait_healthy(10)  # the daemon still runs
    finally:
        code, _ = server.terminate()
    assert code == 0

    # Once it has stopped, --fix goes ahead.
    after = groove(spawn, tmp_path, "doctor", "--fix", "--kb", str(kb), "--index", str(index), "--format", "json")
    fixed = json.loads(after.stdout)
    assert fixed["fixed"] == ["rebuilt the three full-text tables from the chunks"], after.stderr
    assert not checks(fixed) & {"fts_rows_without_chunks", "fts_chunks_missing", "fts_integrity"}
    assert ghost_rows(index) == 0


def test_doctor_fix_holds_the_writer_lock_while_it_repairs_and_gives_it_back(kb, make_settings, monkeypatch):
    notes(kb)
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    index = settings.resolved_index_path()
    add_ghost_row(index)
    real_repair = sqlite_doctor.repair
    refusals: list[str] = []

    def repair_while_another_writer_tries(*args, **kwargs):
        with pytest.raises(writer_lock.IndexLockedError) as refused:  # e.g. a `groove serve` starting meanwhile
            writer_lock.WriterLock(index).acquire()
        refusals.append(str(refused.value))
        return real_repair(*args, **kwargs)

    monkeypatch.setattr(sqlite_doctor, "repair", repair_while_another_writer_tries)
    report = doctor.diagnose(settings, fix=True)
    assert report["fixed"] == ["rebuilt the three full-text tables from the chunks"] and ghost_rows(index) == 0
    assert refusals and REFUSED in refusals[0]
    after = writer_lock.WriterLock(index)
    after.acquire()  # given back once doctor is done
    after.release()


def test_doctor_without_fix_takes_no_lock_so_it_reports_while_a_writer_holds_it(kb, make_settings):
    notes(kb)
    settings = make_settings(kb)
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    index = settings.resolved_index_path()
    add_ghost_row(index)
    holder = writer_lock.WriterLock(index)
    holder.acquire()
    try:
        assert "fts_rows_without_chunks" in checks(doctor.diagnose(settings))
        with pytest.raises(writer_lock.IndexLockedError, match=REFUSED):
            doctor.diagnose(settings, fix=True)
        assert ghost_rows(index) == 1
    finally:
        holder.release()
