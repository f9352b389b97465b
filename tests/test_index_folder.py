"""An index folder groove cannot write (issue 22 point 9): `groove index` and `groove serve` say so in one
line naming the folder, without a traceback. Real processes: as root, the command runs as `nobody` (root
writes anywhere), and a read-only file system is a read-only bind mount in a mount namespace of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.common import QUALITY_FILTER_OFF
from tests.support.server import FAKE_GROOVE

IS_ROOT = os.geteuid() == 0


@pytest.fixture
def world(tmp_path: Path):
    """A folder every user can reach (pytest's own is private to root): notes, a home, a folder not to write."""
    base = Path(tempfile.mkdtemp(prefix="groove-ro-", dir="/tmp"))
    os.chmod(base, 0o755)
    (base / "notes").mkdir()
    (base / "notes" / "a.md").write_text("# A\n\nunwritableword\n", encoding="utf-8")
    (base / "home").mkdir(mode=0o777)
    os.chmod(base / "home", 0o777)
    (base / "locked").mkdir()
    os.chmod(base / "locked", 0o555)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def run(spawn, base: Path, *argv: str, as_nobody: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROOVE_", "XDG_"))}
    env.update(HOME=str(base / "home"), XDG_CONFIG_HOME=str(base / "home"), XDG_DATA_HOME=str(base / "home"),
               HF_HUB_OFFLINE="1")
    env.setdefault(*QUALITY_FILTER_OFF)  # the one-line note is a hit
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_nobody else []
    return spawn.run([*prefix, *FAKE_GROOVE, *argv], cwd=base, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("groove: error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.mark.skipif(IS_ROOT and shutil.which("setpriv") is None, reason="root writes anywhere; needs setpriv to drop it")
@pytest.mark.parametrize("command", [["index"], ["serve", "--transport", "http", "--bind", "127.0.0.1:0"]])
def test_an_index_folder_without_write_permission_is_one_line_naming_the_folder(spawn, world: Path, command):
    index = world / "locked" / "index.sqlite"
    proc = run(spawn, world, *command, "--kb", str(world / "notes"), "--index", str(index), as_nobody=IS_ROOT)
    line = one_line_error(proc)
    assert f"cannot write in the index folder {world / 'locked'} (permission denied)" in line


@pytest.mark.skipif(not IS_ROOT or shutil.which("unshare") is None, reason="a read-only bind mount needs root")
def test_an_index_folder_on_a_read_only_file_system_is_one_line_naming_the_folder(spawn, world: Path):
    ro = world / "ro"
    ro.mkdir()
    script = (f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && exec \"$@\"")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROOVE_", "XDG_"))}
    env.update(HOME=str(world / "home"), XDG_CONFIG_HOME=str(world / "home"), XDG_DATA_HOME=str(world / "home"),
               HF_HUB_OFFLINE="1")
    probe = spawn.run(["unshare", "-m", "sh", "-c", f"mount --bind {ro} {ro}"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no mount namespace here")
    proc = spawn.run(["unshare", "-m", "sh", "-c", script, "sh", *FAKE_GROOVE, "index", "--kb",
                           str(world / "notes"), "--index", str(ro / "index.sqlite")],
                          cwd=world, env=env, capture_output=True, text=True, timeout=120)
    line = one_line_error(proc)
    assert f"cannot write in the index folder {ro} (it is on a read-only file system)" in line


# --- reading an index whose folder cannot be written (issue 36 point 10) ----------------------------------------
# A WAL index is read through its -shm file, which SQLite creates beside it: in a folder that cannot be written the
# read-only commands gave a traceback ("unable to open database file"). They now read it (immutable, when no writes
# wait in a -wal file), or say in one line which folder and what to do.

READ_COMMANDS = [["search", "unwritableword"], ["status"], ["doctor"], ["get", "a.md"]]


def _env(world: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROOVE_", "XDG_"))}
    env.update(HOME=str(world / "home"), XDG_CONFIG_HOME=str(world / "home"), XDG_DATA_HOME=str(world / "home"),
               HF_HUB_OFFLINE="1")
    env.setdefault(*QUALITY_FILTER_OFF)
    return env


def _indexed(spawn, world: Path, folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    index = folder / "index.sqlite"
    proc = run(spawn, world, "index", "--kb", str(world / "notes"), "--index", str(index), as_nobody=False)
    assert proc.returncode == 0, proc.stderr
    os.chmod(index, 0o644)
    return index


def _leave_writes_in_the_wal(spawn, index: Path) -> None:
    """A writer that ends without closing (kill -9): its last write stays in index.sqlite-wal."""
    code = ("import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('PRAGMA wal_autocheckpoint = 0'); "
            "c.execute(\"INSERT OR REPLACE INTO meta(key, value) VALUES ('probe', '1')\"); os._exit(0)")
    spawn.run([sys.executable, "-c", code, str(index)], check=True, timeout=60)
    assert Path(f"{index}-wal").stat().st_size > 0
    Path(f"{index}-shm").unlink()  # as a copy of the folder, or a reboot of a tmpfs -shm, leaves it


def _read_only(spawn, world: Path, folder: Path, *argv: str) -> subprocess.CompletedProcess:
    """`groove ARGV` in a mount namespace where `folder` is a read-only bind mount of itself."""
    script = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec \"$@\""
    return spawn.run(["unshare", "-m", "sh", "-c", script, "sh", *FAKE_GROOVE, *argv], cwd=world, env=_env(world),
                     capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def _no_mount_namespace(spawn, folder: Path) -> bool:
    probe = spawn.run(["unshare", "-m", "sh", "-c", f"mount --bind {folder} {folder}"], capture_output=True)
    return probe.returncode != 0


def _answered(proc: subprocess.CompletedProcess, argv: list[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    # doctor's exit 1: its warning that the fake embedder's index is not the configured model's
    assert proc.returncode in ((0, 1) if argv[0] == "doctor" else (0,)), (argv, proc.stderr)
    if argv[0] == "search":
        assert "a.md" in proc.stdout
    elif argv[0] == "status":
        assert "documents:    1" in proc.stdout
    elif argv[0] == "get":
        assert "unwritableword" in proc.stdout
    else:  # doctor: every check but FTS5's integrity check (a write to SQLite) ran, and it says so
        assert "fts_integrity_skipped" in proc.stdout and "0 error(s)" in proc.stdout, proc.stdout


@pytest.mark.skipif(not IS_ROOT or shutil.which("unshare") is None, reason="a read-only bind mount needs root")
def test_search_status_doctor_and_get_read_an_index_on_a_read_only_file_system(spawn, world: Path):
    ro = world / "ro"
    index = _indexed(spawn, world, ro)
    if _no_mount_namespace(spawn, ro):
        pytest.skip("no mount namespace here")
    where = ["--kb", str(world / "notes"), "--index", str(index), "--no-daemon"]
    for argv in READ_COMMANDS:
        _answered(_read_only(spawn, world, ro, *argv, *where[: 4 if argv[0] == "doctor" else 5]), argv)
    fix = _read_only(spawn, world, ro, "doctor", "--fix", *where[:4])
    assert "cannot write in the index folder" in one_line_error(fix) or "cannot --fix" in one_line_error(fix)

    _leave_writes_in_the_wal(spawn, index)
    for argv in READ_COMMANDS:
        line = one_line_error(_read_only(spawn, world, ro, *argv, *where[: 4 if argv[0] == "doctor" else 5]))
        assert f"its folder {ro} cannot be written (it is on a read-only file system)" in line
        assert "index.sqlite-wal; make the folder writable" in line


@pytest.mark.skipif(IS_ROOT and shutil.which("setpriv") is None, reason="root reads anywhere; needs setpriv to drop it")
def test_search_status_doctor_and_get_read_an_index_in_a_folder_without_write_permission(spawn, world: Path):
    folder = world / "shut"
    index = _indexed(spawn, world, folder)
    os.chmod(folder, 0o555)
    where = ["--kb", str(world / "notes"), "--index", str(index), "--no-daemon"]
    for argv in READ_COMMANDS:
        _answered(run(spawn, world, *argv, *where[: 4 if argv[0] == "doctor" else 5], as_nobody=IS_ROOT), argv)

    os.chmod(folder, 0o755)
    _leave_writes_in_the_wal(spawn, index)
    os.chmod(folder, 0o555)
    line = one_line_error(run(spawn, world, "status", *where, as_nobody=IS_ROOT))
    assert f"its folder {folder} cannot be written (permission denied)" in line
