"""Windows as far as this Linux machine can tell it (issue 38, point 5): the Task Scheduler task rendered and
parsed back, installed and removed through the runner seam (schtasks fault-injected, as systemctl is in
tests/test_autostart.py), the console-less launcher run for real, the file lock's Windows branch under a
stand-in `msvcrt` that enforces exclusivity between handles and its POSIX branch across real processes, and
groove's folders under `ntpath`. docs/service.md says what only a real Windows machine can show."""

from __future__ import annotations

import errno
import ntpath
import os
import subprocess
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path, PureWindowsPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groove import dirs, oslock
from groove.autostart import install as installer
from groove.autostart import instances, platforms, render
from groove.embed import e5onnx
from groove.store.sqlite.writer_lock import IndexLockedError, WriterLock
from tests.support.common import ROOT, write

NS = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
PYTHONW = r"C:\Program Files\Python312\pythonw.exe"
LAUNCHER = [PYTHONW, "-m", "groove.autostart.launcher"]


class FakeMsvcrt(types.ModuleType):
    """Stands in for Windows' msvcrt: records every `locking` call (descriptor, mode, file position, length) and
    refuses, as Windows does with EACCES, a range another handle of the same file holds, or an unlock of a range
    the handle does not hold. Ranges are compared whole (groove locks one byte, always the same)."""

    LK_UNLCK, LK_LOCK, LK_NBLCK, LK_RLCK, LK_NBRLCK = 0, 1, 2, 3, 4

    def __init__(self) -> None:
        super().__init__("msvcrt")
        self.calls: list[tuple[int, int, int, int]] = []
        self.held: dict[tuple[int, int, int, int], int] = {}

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        st_ = os.fstat(fd)
        position = os.lseek(fd, 0, os.SEEK_CUR)
        self.calls.append((fd, mode, position, nbytes))
        key = (st_.st_dev, st_.st_ino, position, nbytes)
        if mode == self.LK_UNLCK:
            if self.held.get(key) != fd:
                raise OSError(errno.EACCES, "Permission denied")
            del self.held[key]
            return
        if key in self.held:
            raise OSError(errno.EACCES, "Permission denied")
        self.held[key] = fd


@pytest.fixture
def windows(monkeypatch, tmp_path: Path) -> FakeMsvcrt:
    """This process as Windows to groove: sys.platform win32, the stand-in msvcrt, %LOCALAPPDATA% under tmp
    (platformdirs reads the known folders from the environment, its own way where neither the shell API nor the
    registry answers)."""
    import platformdirs.windows

    fake = FakeMsvcrt()
    monkeypatch.setattr(platformdirs.windows, "_RESOLVE_WIN_FOLDER", platformdirs.windows.get_win_folder_from_env_vars)
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setitem(sys.modules, "msvcrt", fake)
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "AppData" / "Local"))
    monkeypatch.setenv("APPDATA", str(tmp_path / "AppData" / "Roaming"))
    return fake


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


# --- the lock: Windows branch under the stand-in msvcrt -------------------------------------------------


def test_on_windows_a_second_handle_is_refused_the_lock_until_the_first_unlocks_it(windows: FakeMsvcrt, tmp_path):
    path = tmp_path / "x.lock"
    a, b = _open(path), _open(path)
    try:
        assert oslock.try_lock(a) is True
        assert oslock.try_lock(b) is False
        assert oslock.held_elsewhere(b) is True
        oslock.unlock(a)
        assert oslock.try_lock(b) is True
        assert oslock.try_lock(a) is False
    finally:
        os.close(a)
        os.close(b)
    modes = [(fd, mode) for fd, mode, _, _ in windows.calls]
    assert modes == [
        (a, windows.LK_NBLCK),
        (b, windows.LK_NBLCK),
        (b, windows.LK_NBLCK),
        (a, windows.LK_UNLCK),
        (b, windows.LK_NBLCK),
        (a, windows.LK_NBLCK),
    ]
    # One byte, far past the holder's record at offset 0 (Windows locks are mandatory: a locked byte cannot be
    # read), and the file position put back where reads and writes expect it.
    assert {(position, n) for _, _, position, n in windows.calls} == {(oslock.LOCK_OFFSET, 1)}
    assert oslock.LOCK_OFFSET > 4096


def test_on_windows_a_second_writer_of_an_index_is_refused_naming_the_first_and_the_locks_are_unlocked(
    windows: FakeMsvcrt, tmp_path
):
    index = write(tmp_path / "index.sqlite", "")
    first, second = WriterLock(index), WriterLock(index)
    first.acquire()
    try:
        assert len(windows.held) == 2  # <index>.lock and the lock on the file's identity
        with pytest.raises(IndexLockedError, match=f"pid {os.getpid()}"):
            second.acquire()
        assert not second.held
        # The identity lock lives in the Windows data folder, not in an XDG runtime folder.
        identity = Path(os.environ["LOCALAPPDATA"]) / "groove" / "groove" / "locks"
        assert [p.suffix for p in identity.iterdir()] == [".lock"]
    finally:
        first.release()
    assert windows.held == {}
    assert windows.calls[-1][1] == windows.LK_UNLCK
    second.acquire()
    second.release()


def test_on_windows_a_lock_refused_for_another_reason_is_an_error_not_a_holder(windows: FakeMsvcrt, tmp_path):
    def broken(fd: int, mode: int, nbytes: int) -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")

    windows.locking = broken  # type: ignore[method-assign]
    fd = _open(tmp_path / "x.lock")
    try:
        with pytest.raises(OSError, match="Bad file descriptor"):
            oslock.try_lock(fd)
    finally:
        os.close(fd)


def test_read_at_and_write_at_work_without_pread_and_pwrite(monkeypatch, tmp_path):
    monkeypatch.delattr(os, "pread")
    monkeypatch.delattr(os, "pwrite")
    fd = _open(tmp_path / "x")
    try:
        oslock.write_at(fd, b"hello world", 0)
        oslock.write_at(fd, b"W", 6)
        assert oslock.read_at(fd, 100, 0) == b"hello World"
        assert oslock.read_at(fd, 5, 6) == b"World"
    finally:
        os.close(fd)


# --- the lock: POSIX branch across real processes --------------------------------------------------------

HOLDER = """
import os, sys
from groove import oslock
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
oslock.lock(fd)
print("held", flush=True)
sys.stdin.read()
"""


def test_on_posix_a_lock_held_by_another_process_is_refused_until_that_process_dies(spawn, tmp_path):
    path = tmp_path / "build" / e5onnx.BUILD_LOCK
    path.parent.mkdir()
    child = spawn.popen(
        [sys.executable, "-c", HOLDER, str(path)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "held"
        fd = _open(path)
        try:
            assert oslock.try_lock(fd) is False
            assert e5onnx._lock_held(path) is True  # the e5 engine's build lock asks through the same module
            child.kill()  # kill -9: the OS drops the lock with the process
            child.wait(timeout=30)
            assert e5onnx._lock_held(path) is False
            assert oslock.try_lock(fd) is True
        finally:
            os.close(fd)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)


# --- folders under ntpath ------------------------------------------------------------------------------


def test_groove_folders_on_windows_are_under_localappdata(windows: FakeMsvcrt, monkeypatch):
    from groove.config import default_index_path, user_config_file
    from groove.trust import default_store_path

    local = r"C:\Users\taro\AppData\Local"
    monkeypatch.setenv("LOCALAPPDATA", local)
    monkeypatch.setenv("APPDATA", r"C:\Users\taro\AppData\Roaming")
    env = {"LOCALAPPDATA": local}
    with monkeypatch.context() as m:
        m.setattr(os, "path", ntpath)
        found = dirs.user_dirs()  # this machine, as sys.platform says: win32
        tasks = platforms.unit_path("windows", env, "work")
        logs = platforms.log_dir(env, "windows")
        index = default_index_path(Path("/n/notes"))
        config_file, trust_file, engines = user_config_file(), default_store_path(), e5onnx.engine_cache_root()
    base = PureWindowsPath(r"C:\Users\taro\AppData\Local\groove\groove")
    assert dirs.this_os() == "windows"
    assert PureWindowsPath(str(found.config)) == base
    assert PureWindowsPath(str(found.data)) == base
    assert PureWindowsPath(str(found.indexes)) == base / "indexes"
    assert PureWindowsPath(str(found.engines)) == base / "engines"
    assert PureWindowsPath(str(found.logs)) == base / "Logs"
    assert PureWindowsPath(str(found.locks)) == base / "locks"
    assert str(tasks) == str(base / "tasks" / "groove-work.xml")
    assert str(logs) == str(base / "Logs")
    # Where groove puts its index, reads its config file, records trust and builds the e5 engine: the same folders.
    assert PureWindowsPath(str(index)).parent == base / "indexes" and PureWindowsPath(str(index)).name.startswith("notes-")
    assert PureWindowsPath(str(config_file)) == base / "groove.toml"
    assert PureWindowsPath(str(trust_file)) == base / "trusted.json"
    assert PureWindowsPath(str(engines)) == base / "engines"


def test_groove_folders_on_linux_follow_xdg_and_the_index_default_is_in_them(monkeypatch, tmp_path):
    from groove.config import default_index_path
    from groove.folders import Folders, parse_folders

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    found = dirs.user_dirs("linux")
    assert found.config == tmp_path / "cfg" / "groove"
    assert found.indexes == tmp_path / "data" / "groove" / "indexes"
    assert found.logs == tmp_path / "state" / "groove" / "log"
    assert found.locks == tmp_path / "run" / f"groove-locks-{os.getuid()}"
    kb = tmp_path / "notes"
    kb.mkdir()
    assert default_index_path(Folders(parse_folders([str(kb)]))).parent == found.indexes


# --- the task: rendered and parsed back ------------------------------------------------------------------


@pytest.fixture
def win_env(tmp_path: Path) -> dict[str, str]:
    return {"LOCALAPPDATA": str(tmp_path / "Local"), "USERNAME": "taro", "USERDOMAIN": "DESKTOP-1"}


@pytest.fixture
def config(tmp_path: Path, kb: Path) -> Path:
    return write(tmp_path / "conf" / "groove.toml", f'kb_path = "{kb}"\n')


def parse_task(path: Path) -> ET.Element:
    data = path.read_bytes()
    assert data[:2] == b"\xff\xfe"  # UTF-16 LE with its byte-order mark, as schtasks reads it on every locale
    return ET.fromstring(data)


def test_the_task_runs_the_console_less_launcher_at_logon_restarts_on_failure_and_never_times_out(
    tmp_path, config: Path, win_env
):
    notes = tmp_path / "my notes"
    notes.mkdir()
    rendered = render.render(
        "windows",
        config,
        command=LAUNCHER,
        env=win_env,
        name="work",
        flags=["--kb", str(notes), "--bind", "127.0.0.1:3101"],
    )
    path = tmp_path / "task.xml"
    path.write_bytes(render.task_bytes(rendered.text))
    task = parse_task(path)

    assert task.tag == "{%s}Task" % NS["t"] and task.get("version") == "1.4"
    assert task.findtext("t:RegistrationInfo/t:URI", namespaces=NS) == r"\groove-work"
    assert task.findtext("t:Triggers/t:LogonTrigger/t:Enabled", namespaces=NS) == "true"
    assert task.findtext("t:Triggers/t:LogonTrigger/t:UserId", namespaces=NS) == r"DESKTOP-1\taro"
    assert task.findtext("t:Principals/t:Principal/t:LogonType", namespaces=NS) == "InteractiveToken"
    assert task.findtext("t:Principals/t:Principal/t:RunLevel", namespaces=NS) == "LeastPrivilege"
    assert task.findtext("t:Settings/t:RestartOnFailure/t:Interval", namespaces=NS) == "PT1M"
    assert task.findtext("t:Settings/t:RestartOnFailure/t:Count", namespaces=NS) == "5"
    assert task.findtext("t:Settings/t:ExecutionTimeLimit", namespaces=NS) == "PT0S"
    assert task.findtext("t:Settings/t:MultipleInstancesPolicy", namespaces=NS) == "IgnoreNew"
    assert task.findtext("t:Actions/t:Exec/t:Command", namespaces=NS) == PYTHONW
    logs = win_env["LOCALAPPDATA"] + "/groove/groove/Logs"
    assert task.findtext("t:Actions/t:Exec/t:Arguments", namespaces=NS) == subprocess.list2cmdline(
        [
            "-m",
            "groove.autostart.launcher",
            "--out",
            f"{logs}/groove-work.out.log",
            "--err",
            f"{logs}/groove-work.err.log",
            "--",
            "serve",
            "--transport",
            "http",
            "--config",
            str(config),
            "--kb",
            str(notes),
            "--bind",
            "127.0.0.1:3101",
        ]
    )
    assert '"' + str(notes) + '"' in task.findtext("t:Actions/t:Exec/t:Arguments", namespaces=NS)
    assert (
        task.findtext("t:Actions/t:Exec/t:WorkingDirectory", namespaces=NS)
        == win_env["LOCALAPPDATA"] + "/groove/groove"
    )
    assert rendered.path == Path(win_env["LOCALAPPDATA"]) / "groove/groove/tasks/groove-work.xml"


def test_xml_characters_in_a_path_survive_the_task(tmp_path, win_env):
    odd = tmp_path / "R&D <notes>"
    odd.mkdir()
    text = render.render("windows", None, command=LAUNCHER, env=win_env, flags=["--kb", str(odd)]).text
    assert instances.task_argv(text) == ["serve", "--transport", "http", "--kb", str(odd)]
    assert "R&amp;D &lt;notes&gt;" in text


def test_a_path_with_a_control_character_is_refused_rather_than_written(win_env):
    with pytest.raises(platforms.ServiceError, match="control characters"):
        render.render("windows", None, command=LAUNCHER, env=win_env, flags=["--kb", "C:\\notes\n2"])


@given(st.lists(st.text(alphabet='ab \\"\t日:'), max_size=6))
def test_windows_command_lines_split_back_to_the_arguments_list2cmdline_joined(args):
    assert instances.split_windows_command_line(subprocess.list2cmdline(args)) == args


def test_the_launcher_is_pythonw_beside_this_python_or_a_clear_refusal(tmp_path):
    python = write(tmp_path / "Scripts" / "python.exe", "")
    with pytest.raises(platforms.ServiceError, match="no pythonw.exe beside"):
        platforms.launcher_command(str(python))
    write(tmp_path / "Scripts" / "pythonw.exe", "")
    assert platforms.launcher_command(str(python)) == [
        str(tmp_path / "Scripts" / "pythonw.exe"),
        "-m",
        "groove.autostart.launcher",
    ]


# --- install, uninstall, status, list through the runner seam ----------------------------------------------


class FakeSchtasks:
    """Stands in for schtasks.exe: records every command, answers as told by its first flag (/Create, /Run,
    /Query, ...): (exit status, stdout, stderr); anything else succeeds silently."""

    def __init__(self, **answers: tuple[int, str, str]):
        self.answers = {"/" + k.capitalize(): v for k, v in answers.items()}
        self.calls: list[list[str]] = []

    def __call__(self, argv):
        argv = list(argv)
        self.calls.append(argv)
        rc, out, err = self.answers.get(argv[1], (0, "", ""))
        return subprocess.CompletedProcess(argv, rc, out, err)


def test_install_writes_the_task_file_and_registers_it_with_schtasks_create_xml_then_runs_it(config, win_env):
    mgr = FakeSchtasks()
    report = installer.install("windows", config=config, command=LAUNCHER, env=win_env, runner=mgr)
    path = platforms.unit_path("windows", win_env)
    assert report.exit_code == 0, report.err
    assert mgr.calls == [
        ["schtasks", "/Create", "/TN", "groove", "/XML", str(path), "/F"],
        ["schtasks", "/End", "/TN", "groove"],
        ["schtasks", "/Run", "/TN", "groove"],
    ]
    assert parse_task(path).findtext("t:Actions/t:Exec/t:Command", namespaces=NS) == PYTHONW
    assert platforms.log_dir(win_env, "windows").is_dir()
    assert "registered and started" in report.out[-1]


def test_install_without_start_registers_and_says_how_to_start(config, win_env):
    mgr = FakeSchtasks()
    report = installer.install("windows", config=config, command=LAUNCHER, env=win_env, runner=mgr, start=False)
    assert [c[1] for c in mgr.calls] == ["/Create"]
    assert "schtasks /Run /TN groove" in report.out[-1]


def test_without_schtasks_the_task_file_is_written_and_the_command_to_register_it_is_said(config, win_env):
    report = installer.install(
        "windows",
        config=config,
        command=LAUNCHER,
        env=win_env,
        runner=FakeSchtasks(create=(127, "", "schtasks: command not found")),
    )
    path = platforms.unit_path("windows", win_env)
    assert report.exit_code == 1 and path.is_file()
    assert "Task Scheduler not available" in report.err[0]
    assert f"schtasks /Create /TN groove /XML {path} /F && schtasks /Run /TN groove" in report.err[0]


def test_a_refused_schtasks_create_says_how_to_register_the_task_from_powershell(config, win_env):
    report = installer.install(
        "windows",
        config=config,
        command=LAUNCHER,
        env=win_env,
        runner=FakeSchtasks(create=(1, "", "ERROR: Access is denied.")),
    )
    assert report.exit_code == 1
    assert "ERROR: Access is denied." in report.err[0]
    assert "Register-ScheduledTask -TaskName groove -Xml (Get-Content -Raw" in report.err[0]


def test_dry_run_prints_the_task_and_the_schtasks_commands_and_touches_nothing(config, win_env):
    mgr = FakeSchtasks()
    report = installer.install("windows", True, config=config, command=LAUNCHER, env=win_env, runner=mgr)
    path = platforms.unit_path("windows", win_env)
    assert mgr.calls == [] and not path.exists()
    assert report.out[0] == f"would write {path}:"
    assert any("<LogonTrigger>" in line for line in report.out)
    assert report.out[-1] == f"then run: schtasks /Create /TN groove /XML {path} /F && schtasks /Run /TN groove"


def test_uninstall_ends_and_deletes_the_task_and_removes_its_file(config, win_env):
    installer.install("windows", config=config, command=LAUNCHER, env=win_env, runner=FakeSchtasks(), name="work")
    mgr = FakeSchtasks()
    report = installer.uninstall("windows", env=win_env, runner=mgr, name="work")
    assert mgr.calls == [
        ["schtasks", "/End", "/TN", "groove-work"],
        ["schtasks", "/Delete", "/TN", "groove-work", "/F"],
    ]
    assert not platforms.unit_path("windows", win_env, "work").exists()
    assert report.exit_code == 0 and "ended and unregistered the task groove-work" in report.out


def test_a_failed_schtasks_delete_is_reported_with_how_to_check(config, win_env):
    installer.install("windows", config=config, command=LAUNCHER, env=win_env, runner=FakeSchtasks())
    report = installer.uninstall(
        "windows", env=win_env, runner=FakeSchtasks(delete=(1, "", "ERROR: Access is denied."))
    )
    assert report.exit_code == 1 and "schtasks /Query /TN groove" in report.err[0]


CSV_RUNNING = '"\\groove-work","N/A","Running"\r\n'
CSV_READY_JA = '"\\groove","2026/12/07 9:00:00","準備完了"\r\n'


def test_list_reads_the_instances_back_from_their_task_files_and_asks_schtasks_their_state(tmp_path, kb, win_env):
    work = tmp_path / "work notes"
    work.mkdir()
    installer.install(
        "windows", config=None, command=LAUNCHER, env=win_env, runner=FakeSchtasks(), flags=["--kb", str(kb)]
    )
    installer.install(
        "windows",
        config=None,
        command=LAUNCHER,
        env=win_env,
        runner=FakeSchtasks(),
        name="work",
        flags=["--kb", str(work), "--index", str(tmp_path / "w.sqlite"), "--bind", "127.0.0.1:3101"],
    )

    def schtasks(argv):
        out = CSV_RUNNING if argv[3] == "groove-work" else CSV_READY_JA
        return subprocess.CompletedProcess(list(argv), 0, out, "")

    report = installer.list_instances("windows", env=win_env, runner=schtasks)
    rows = {i["name"]: i for i in report.data["instances"]}
    assert list(rows) == ["default", "work"]
    assert rows["work"]["unit"] == "groove-work" and rows["work"]["folder"] == str(work)
    assert rows["work"]["port"] == 3101 and rows["work"]["index"] == str(tmp_path / "w.sqlite")
    assert rows["work"]["state"] == "Running" and rows["default"]["state"] == "準備完了"
    assert rows["default"]["folder"] == str(kb)
    status = installer.status("windows", env=win_env, runner=schtasks, name="work")
    assert status.exit_code == platforms.STATUS_RUNNING
    assert status.out[0].startswith("task file: ")
    gone = installer.status("windows", env=win_env, runner=FakeSchtasks(query=(1, "", "ERROR: not found")))
    assert gone.exit_code == platforms.STATUS_NOT_RUNNING and gone.data["state"] == "not registered"


# --- the launcher, run for real -------------------------------------------------------------------------------


def test_the_launcher_sends_groove_output_to_its_log_files_and_exits_with_groove_exit_code(spawn, tmp_path):
    out, err = tmp_path / "logs" / "groove.out.log", tmp_path / "logs" / "groove.err.log"
    launcher = [sys.executable, "-m", "groove.autostart.launcher", "--out", str(out), "--err", str(err), "--"]
    quiet = {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "cwd": ROOT,
        "timeout": 120,
        "text": True,
    }

    version = spawn.run([*launcher, "--version"], **quiet)
    assert version.returncode == 0 and version.stdout == "" and version.stderr == ""
    assert out.read_text(encoding="utf-8").startswith("groove ")

    missing = tmp_path / "no such folder"
    failed = spawn.run([*launcher, "status", "--kb", str(missing)], **quiet)
    assert failed.returncode != 0 and failed.stderr == ""
    assert "groove: error:" in err.read_text(encoding="utf-8") and str(missing) in err.read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8").count("groove ") == 1  # appended to, never truncated

    bad = spawn.run([sys.executable, "-m", "groove.autostart.launcher", "--out", str(out), "status"], **quiet)
    assert bad.returncode == 2 and "no -- before groove's arguments" in bad.stderr


# --- the command line ------------------------------------------------------------------------------------------


def test_cli_install_for_windows_dry_run_prints_the_task_with_pythonw_beside_this_python(
    tmp_path, kb, monkeypatch, capsys
):
    from groove.cli import main

    python = write(tmp_path / "venv" / "Scripts" / "python.exe", "")
    pythonw = write(tmp_path / "venv" / "Scripts" / "pythonw.exe", "")
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "Local"))
    assert main(["service", "install", "--platform", "windows", "--dry-run", "--kb", str(kb)]) == 0
    out = capsys.readouterr().out
    task = tmp_path / "Local" / "groove" / "groove" / "tasks" / "groove.xml"
    assert out.startswith(f"would write {task}:")
    assert f"<Command>{pythonw}</Command>" in out
    assert f"-- serve --transport http --kb {kb}</Arguments>" in out
    assert out.rstrip().endswith(f"then run: schtasks /Create /TN groove /XML {task} /F && schtasks /Run /TN groove")
    assert not task.exists()


def test_cli_install_for_windows_without_pythonw_is_refused_in_one_line(tmp_path, kb, monkeypatch, capsys):
    from groove.cli import main

    monkeypatch.setattr(sys, "executable", str(write(tmp_path / "venv" / "Scripts" / "python.exe", "")))
    assert main(["service", "install", "--platform", "windows", "--dry-run", "--kb", str(kb)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("groove: error: no pythonw.exe beside") and "Traceback" not in err
