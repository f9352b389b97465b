"""Which service manager, where its files go, what an instance is called, and the one way out to it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from groove.errors import GrooveError

Platform = Literal["linux", "macos", "windows"]
PLATFORMS: tuple[Platform, ...] = ("linux", "macos", "windows")

UNIT_NAME = "groove.service"
LAUNCHD_LABEL = "com.groove.agent"
TASK_NAME = "groove"  # Windows: the Task Scheduler task, \groove or \groove-NAME

# Exit codes of `groove service status`, after the LSB init-script convention.
STATUS_RUNNING, STATUS_NOT_RUNNING, STATUS_UNKNOWN = 0, 3, 4

# A start blocks until groove sends READY=1 (Type=notify) or systemd gives up.
COMMAND_TIMEOUT_S = 150.0

# Named instances. "default" is what `service list` calls the instance installed without --name.
DEFAULT_INSTANCE = "default"
INSTANCE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?")


class ServiceError(GrooveError):
    """Something a person can fix; printed as `groove: error: ...`."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


# --- the one way out to the service manager ------------------------------------------------

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def run_command(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run a command and capture its output. Never raises: a missing program
    comes back as exit 127 and a hung one as exit 124, like a shell's."""
    argv = list(argv)
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"{argv[0]}: no answer after {COMMAND_TIMEOUT_S:.0f} s")


def _first_line(result: subprocess.CompletedProcess[str]) -> str:
    for text in (result.stderr, result.stdout):
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return f"exit status {result.returncode}"


def _shell(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


# --- where things are ------------------------------------------------------------------------


def detect_platform(sys_platform: str | None = None) -> Platform:
    name = sys.platform if sys_platform is None else sys_platform
    if name.startswith("linux"):
        return "linux"
    if name == "darwin":
        return "macos"
    if name == "win32":
        return "windows"
    raise ServiceError(
        f"groove service knows systemd (Linux), launchd (macOS) and Task Scheduler (Windows), not {name}; "
        "run `groove serve --transport http --config FILE` under your own service manager"
    )


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def check_name(name: str | None) -> str | None:
    """An instance name as given to --name (None: the default instance), or ServiceError saying what a name is."""
    if name is None:
        return None
    if name == DEFAULT_INSTANCE:
        raise ServiceError(
            f"--name {DEFAULT_INSTANCE} means the instance installed without --name: "
            "leave --name out to install, check or remove that one"
        )
    if not INSTANCE_NAME.fullmatch(name):
        raise ServiceError(
            f"--name {name!r} is not an instance name: use 1 to 32 lowercase letters (a-z), digits and "
            "hyphens, starting and ending with a letter or digit, e.g. --name work or --name notes-2024"
        )
    return name


def check_port(port: int | None) -> int | None:
    if port is not None and not 1 <= port <= 65535:
        raise ServiceError(
            f"--port {port}: a port is a number from 1 to 65535 (leave --port out to have a free one chosen)"
        )
    return port


def unit_name(name: str | None = None) -> str:
    """groove.service, or groove-NAME.service for a named instance."""
    return UNIT_NAME if name is None else f"groove-{name}.service"


def short_name(name: str | None = None) -> str:
    """The unit as systemctl and journalctl take it: groove, groove-NAME."""
    return unit_name(name).removesuffix(".service")


def launchd_label(name: str | None = None) -> str:
    """com.groove.agent, or com.groove.agent.NAME for a named instance."""
    return LAUNCHD_LABEL if name is None else f"{LAUNCHD_LABEL}.{name}"


def task_name(name: str | None = None) -> str:
    """Windows: the Task Scheduler task of an instance, groove or groove-NAME."""
    return TASK_NAME if name is None else f"{TASK_NAME}-{name}"


def _windows_data(env: Mapping[str, str]) -> Path:
    """Windows: groove's data folder, %LOCALAPPDATA%\\groove\\groove, as groove.dirs has it (from `env`, so that
    a test or another machine's environment names it; Windows' default place when the variable is not set)."""
    local = env.get("LOCALAPPDATA") or os.path.join(env.get("USERPROFILE") or str(_home(env)), "AppData", "Local")
    return Path(os.path.join(local, "groove", "groove"))


def unit_dir(platform: Platform, env: Mapping[str, str] | None = None) -> Path:
    """The folder of the unit files or plists: systemd reads $XDG_CONFIG_HOME/systemd/user. On Windows the task
    files: Task Scheduler keeps its own copy, this one is the instance's record and what `schtasks /Create /XML`
    reads."""
    env = os.environ if env is None else env
    if platform == "windows":
        return Path(os.path.join(_windows_data(env), "tasks"))
    if platform == "macos":
        return _home(env) / "Library" / "LaunchAgents"
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else _home(env) / ".config"
    return base / "systemd" / "user"


def unit_path(platform: Platform, env: Mapping[str, str] | None = None, name: str | None = None) -> Path:
    """Where the unit file, plist or task file of an instance (None: the default one) goes."""
    if platform == "windows":
        return Path(os.path.join(unit_dir(platform, env), f"{task_name(name)}.xml"))
    if platform == "macos":
        return unit_dir(platform, env) / f"{launchd_label(name)}.plist"
    return unit_dir(platform, env) / unit_name(name)


def log_dir(env: Mapping[str, str] | None = None, platform: Platform = "macos") -> Path:
    """Where launchd (macOS) or the launcher (Windows) writes groove's stdout and stderr (systemd uses the
    journal)."""
    env = os.environ if env is None else env
    if platform == "windows":
        return Path(os.path.join(_windows_data(env), "Logs"))
    return _home(env) / "Library" / "Logs" / "groove"


def read_unit(platform: Platform, path: Path) -> str:
    """An installed unit file, plist or task file (UTF-16 with its BOM on Windows, as schtasks reads it best)."""
    return path.read_text(encoding="utf-16" if platform == "windows" else "utf-8")


def groove_command(argv0: str | None = None, executable: str | None = None) -> list[str]:
    """The absolute command that starts this very groove.

    The `groove` script being run, else the `groove` script beside this Python
    (the same virtualenv), else `python -m groove.cli`. Not `shutil.which`:
    the first groove on PATH may belong to another installation. Paths are made
    absolute but symlinks are kept: resolving a venv's python would leave the venv.
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if argv0 and Path(argv0).name == "groove":
        script = Path(os.path.abspath(argv0))
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script)]
    python = Path(os.path.abspath(executable))
    sibling = python.parent / "groove"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return [str(sibling)]
    return [str(python), "-m", "groove.cli"]


LAUNCHER_MODULE = "groove.autostart.launcher"


def launcher_command(executable: str | None = None) -> list[str]:
    """Windows: the console-less command that starts groove, `pythonw.exe -m groove.autostart.launcher`.

    pythonw.exe is the Python of this groove (its virtualenv's Scripts folder) built for the Windows
    subsystem: Windows opens no console window for it, as GrooveSeek's groove-svc.exe does for groove.exe.
    The launcher gives groove log files for the stdout and stderr pythonw lacks, then runs it in-process,
    so the task's exit code is groove's (Task Scheduler restarts it on a failure)."""
    python = Path(os.path.abspath(sys.executable if executable is None else executable))
    windowless = python.with_name("pythonw.exe")
    if not windowless.is_file():
        raise ServiceError(
            f"no pythonw.exe beside {python}: the task would open a console window at every login; "
            "install groove with a Python from python.org or the Microsoft Store (both have pythonw.exe)"
        )
    return [str(windowless), "-m", LAUNCHER_MODULE]
