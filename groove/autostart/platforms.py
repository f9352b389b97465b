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

Platform = Literal["linux", "macos"]
PLATFORMS: tuple[Platform, ...] = ("linux", "macos")

UNIT_NAME = "groove.service"
LAUNCHD_LABEL = "com.groove.agent"

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
    raise ServiceError(
        f"groove service knows systemd (Linux) and launchd (macOS), not {name}; "
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


def unit_dir(platform: Platform, env: Mapping[str, str] | None = None) -> Path:
    """The folder of the unit files or plists: systemd reads $XDG_CONFIG_HOME/systemd/user."""
    env = os.environ if env is None else env
    if platform == "macos":
        return _home(env) / "Library" / "LaunchAgents"
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else _home(env) / ".config"
    return base / "systemd" / "user"


def unit_path(platform: Platform, env: Mapping[str, str] | None = None, name: str | None = None) -> Path:
    """Where the unit file or plist of an instance (None: the default one) goes."""
    if platform == "macos":
        return unit_dir(platform, env) / f"{launchd_label(name)}.plist"
    return unit_dir(platform, env) / unit_name(name)


def log_dir(env: Mapping[str, str] | None = None) -> Path:
    """macOS only: launchd writes groove's stdout and stderr here (systemd uses the journal)."""
    env = os.environ if env is None else env
    return _home(env) / "Library" / "Logs" / "groove"


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
