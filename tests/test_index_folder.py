"""An index folder groove cannot write (issue 22 point 9): `groove index` and `groove serve` say so in one
line naming the folder, without a traceback. Real processes: as root, the command runs as `nobody` (root
writes anywhere), and a read-only file system is a read-only bind mount in a mount namespace of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

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
