"""`groove service`: run groove in the background as a user service.

On Linux a systemd user unit (~/.config/systemd/user/groove.service), on macOS
a launchd agent (~/Library/LaunchAgents/com.groove.agent.plist). Both run

    <groove> serve --transport http --config <absolute groove.toml>

(`groove service install --kb PATH` adds `--kb <absolute PATH>`, and `--index` likewise: then the
config file is optional, and the notes folder is the one named.)

This module is the single source of both files. `systemd/groove.service` and
`launchd/com.groove.agent.plist` at the top of the repository are the same
renderings with placeholders (@GROOVE_BIN@, @GROOVE_CONFIG@, @GROOVE_LOG_DIR@)
for installing by hand; `python -m groove.service` regenerates them and a test
fails when they drift.

Rendering and locating are pure functions. `install`, `uninstall` and `status`
write real files and send every systemctl/launchctl command through one
`runner`, so tests fault-inject the service manager and nothing else.
"""

from __future__ import annotations

import os
import shlex
import plistlib
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

from groove.config import read_config_file
from groove.errors import GrooveError

Platform = Literal["linux", "macos"]
PLATFORMS: tuple[Platform, ...] = ("linux", "macos")

UNIT_NAME = "groove.service"
LAUNCHD_LABEL = "com.groove.agent"

PLACEHOLDER_BIN = "@GROOVE_BIN@"
PLACEHOLDER_CONFIG = "@GROOVE_CONFIG@"
PLACEHOLDER_LOG_DIR = "@GROOVE_LOG_DIR@"

SERVE_ARGS = ("serve", "--transport", "http")

# Exit codes of `groove service status`, after the LSB init-script convention.
STATUS_RUNNING, STATUS_NOT_RUNNING, STATUS_UNKNOWN = 0, 3, 4

# A start blocks until groove sends READY=1 (Type=notify) or systemd gives up.
COMMAND_TIMEOUT_S = 150.0


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


def unit_path(platform: Platform, env: Mapping[str, str] | None = None) -> Path:
    """Where the unit file or plist goes: systemd reads $XDG_CONFIG_HOME/systemd/user."""
    env = os.environ if env is None else env
    if platform == "macos":
        return _home(env) / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else _home(env) / ".config"
    return base / "systemd" / "user" / UNIT_NAME


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


# --- rendering -------------------------------------------------------------------------------

SYSTEMD_TEMPLATE = """\
# groove as a systemd user service: local search over Markdown notes, served over MCP (HTTP).
#
# `groove service install` writes this file to ~/.config/systemd/user/groove.service
# with the paths filled in. The repository copy (systemd/groove.service) has
# @GROOVE_BIN@ and @GROOVE_CONFIG@ where the paths go; docs/service.md shows how
# to install it by hand. Generated by groove/service.py: change it there.

[Unit]
Description=groove: local search over Markdown notes (MCP over HTTP)
# Give up after 5 failed starts in 2 minutes instead of restarting forever.
StartLimitIntervalSec=120
StartLimitBurst=5

[Service]
# groove sends READY=1 over $NOTIFY_SOCKET once it accepts connections.
Type=notify
NotifyAccess=main
ExecStart={exec_start}
Environment=HF_HUB_OFFLINE=1
Restart=on-failure
RestartSec=5
# Exit status 2 is a configuration error: restarting would not fix it.
RestartPreventExitStatus=2
KillSignal=SIGTERM
TimeoutStopSec=10

# Hardening that keeps the home directory (notes, index, model cache) readable and
# writable. No ProtectHome= for that reason; no MemoryDenyWriteExecute= because
# PyTorch generates code at run time. If your systemd cannot set up PrivateTmp= for
# user services (the unit fails with status=226/NAMESPACE), delete that line.
NoNewPrivileges=yes
PrivateTmp=yes
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
SystemCallArchitectures=native

[Install]
WantedBy=default.target
"""

_SYSTEMD_PLAIN = re.compile(r"[A-Za-z0-9@%$_+=:,./-]+")


def _check_arg(arg: str) -> None:
    if not arg or any(ord(ch) < 32 or ord(ch) == 127 for ch in arg):
        raise ServiceError(f"cannot put {arg!r} in a service definition: it is empty or has control characters; move the file to a plain path")


def systemd_quote(arg: str, *, program: bool = False) -> str:
    """One word of an ExecStart= line: `%` doubled (specifiers), `$` doubled in
    arguments (variables; systemd does not expand them in the program path),
    double quotes and backslashes escaped, quoted if it has spaces."""
    _check_arg(arg)
    escaped = arg.replace("%", "%%")
    if not program:
        escaped = escaped.replace("$", "$$")
    if _SYSTEMD_PLAIN.fullmatch(arg):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def serve_argv(command: Sequence[str], config: str | None, flags: Sequence[str] = ()) -> list[str]:
    """`groove serve` for the service: the config file when there is one, then `flags` (`--kb`, `--index`)."""
    return [*command, *SERVE_ARGS, *(("--config", config) if config else ()), *flags]


def render_systemd_unit(command: Sequence[str], config: str | None, flags: Sequence[str] = ()) -> str:
    """The unit file for `command` (the groove executable, as argv), `config` and `flags`."""
    argv = serve_argv(command, config, flags)
    exec_start = " ".join(systemd_quote(a, program=i == 0) for i, a in enumerate(argv))
    return SYSTEMD_TEMPLATE.format(exec_start=exec_start)


def render_launchd_plist(command: Sequence[str], config: str | None, logs: str, flags: Sequence[str] = ()) -> str:
    """The LaunchAgent plist. KeepAlive restarts groove when it exits with an error."""
    argv = serve_argv(command, config, flags)
    for arg in (*argv, logs):
        _check_arg(arg)
    agent: dict[str, Any] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": argv,
        "EnvironmentVariables": {"HF_HUB_OFFLINE": "1"},
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        "ExitTimeOut": 10,
        "StandardOutPath": f"{logs}/groove.out.log",
        "StandardErrorPath": f"{logs}/groove.err.log",
    }
    return plistlib.dumps(agent, sort_keys=False).decode("utf-8")


@dataclass(frozen=True)
class Rendered:
    platform: Platform
    path: Path
    text: str


def render(platform: Platform, config: Path | None, *, command: Sequence[str] | None = None,
           env: Mapping[str, str] | None = None, flags: Sequence[str] = ()) -> Rendered:
    """The file to install on this machine and where it goes."""
    env = os.environ if env is None else env
    command = groove_command() if command is None else list(command)
    config_str = str(Path(os.path.abspath(config))) if config is not None else None
    if platform == "macos":
        text = render_launchd_plist(command, config_str, str(log_dir(env)), flags)
    else:
        text = render_systemd_unit(command, config_str, flags)
    return Rendered(platform, unit_path(platform, env), text)


def example_files() -> dict[str, str]:
    """The repository copies, relative to the repository root."""
    return {
        "systemd/groove.service": render_systemd_unit([PLACEHOLDER_BIN], PLACEHOLDER_CONFIG),
        f"launchd/{LAUNCHD_LABEL}.plist": render_launchd_plist([PLACEHOLDER_BIN], PLACEHOLDER_CONFIG, PLACEHOLDER_LOG_DIR),
    }


def check_config(config_file: Path | None, suggested: Path, kb: Path | None = None) -> Path | None:
    """The config file a service will read (None: none, when `kb` names the notes folder on the command
    line); refuse when the service would have no notes folder."""
    if kb is not None:  # `groove service install --kb PATH`: the unit passes --kb itself
        if not kb.is_dir():
            raise ServiceError(f"the notes folder {kb} (--kb) does not exist or is not a folder")
        if config_file is None:
            return None
        config = Path(os.path.abspath(config_file))
        read_config_file(config)  # a file the service could not load fails here, not at every start
        return config
    if config_file is None:
        raise ServiceError(
            "no config file found, and a service needs one: it starts without command-line flags, "
            "so its config file is where it learns the notes folder. Create one from groove.toml.example "
            "and set kb_path in it:\n"
            f"  mkdir -p {_shell([str(suggested.parent)])} && cp groove.toml.example {_shell([str(suggested)])}\n"
            "(groove.toml.example is at the top of the groove repository), then run "
            "`groove service install` again, or pass --config PATH (or --kb PATH: the unit then names the folder)"
        )
    config = Path(os.path.abspath(config_file))
    kb = read_config_file(config).get("kb_path")
    if not kb:
        raise ServiceError(
            f"{config} does not set kb_path, so the service would have no notes folder; "
            'add a line like kb_path = "~/notes" to it and run `groove service install` again'
        )
    if not Path(kb).expanduser().is_dir():
        raise ServiceError(f"the notes folder {kb} (kb_path in {config}) does not exist or is not a folder")
    return config


# --- install / uninstall / status ------------------------------------------------------------

@dataclass
class Report:
    """What a service command did: `out` for stdout, `err` for stderr."""

    exit_code: int = 0
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def fail(self, message: str) -> Report:
        """Record a failure (exit code 1, `message` on stderr); returns the report to return from a command."""
        self.exit_code = 1
        self.err.append(message)
        return self


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _systemctl(*args: str) -> list[str]:
    return ["systemctl", "--user", *args]


def _launchd_domain() -> str:
    return f"gui/{os.getuid()}"


def _start_hint(platform: Platform, path: Path) -> str:
    if platform == "macos":
        return _shell(["launchctl", "bootstrap", _launchd_domain(), str(path)])
    return "systemctl --user daemon-reload && systemctl --user enable --now groove"


def install(platform: Platform, dry_run: bool = False, *, config: Path | None,
            command: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
            runner: Runner = run_command, start: bool = True, flags: Sequence[str] = ()) -> Report:
    """Write the unit (or plist) for `config` and `flags` (`--kb`, `--index`) and, unless `start` is False,
    start it now."""
    rendered = render(platform, config, command=command, env=env, flags=flags)
    path, text = rendered.path, rendered.text
    report = Report(data={"platform": platform, "path": str(path)})
    if dry_run:
        report.out += [f"would write {path}:", "", text.rstrip("\n"), "",
                       f"then run: {_start_hint(platform, path)}"]
        return report

    previous = path.read_text(encoding="utf-8") if path.is_file() else None
    if platform == "macos":
        log_dir(env).mkdir(parents=True, exist_ok=True)
    _write_atomic(path, text)
    report.out.append(f"wrote {path}")
    if platform == "macos":
        return _install_launchd(path, report, runner, start, env)
    return _install_systemd(path, report, runner, start, changed=previous is not None and previous != text)


def _install_systemd(path: Path, report: Report, runner: Runner, start: bool, changed: bool) -> Report:
    r = runner(_systemctl("daemon-reload"))
    if r.returncode != 0:
        return report.fail(
            f"systemd user session not available ({_first_line(r)}): unit written to {path}; "
            f"start it from your login session with `{_start_hint('linux', path)}`"
        )
    r = runner(_systemctl("enable", *(["--now"] if start else []), UNIT_NAME))
    if r.returncode != 0:
        return report.fail(
            f"unit written to {path}, but `systemctl --user enable{' --now' if start else ''} groove` "
            f"failed: {_first_line(r)}; see `journalctl --user -u groove`"
        )
    if not start:
        report.out.append("enabled: groove starts at your next login; start it now with `systemctl --user start groove`")
        return report
    if changed:
        # enable --now leaves an already running groove on the old unit.
        r = runner(_systemctl("try-restart", UNIT_NAME))
        if r.returncode != 0:
            return report.fail(f"the unit changed but `systemctl --user restart groove` failed: {_first_line(r)}")
    report.out.append("enabled and started; `groove service status` checks it, `journalctl --user -u groove -f` follows its log")
    return report


def _install_launchd(path: Path, report: Report, runner: Runner, start: bool,
                     env: Mapping[str, str] | None) -> Report:
    if not start:
        report.out.append(f"launchd loads it at your next login; load it now with `{_start_hint('macos', path)}`")
        return report
    target = f"{_launchd_domain()}/{LAUNCHD_LABEL}"
    r = runner(["launchctl", "bootout", target])  # unload an older copy; fails when none is loaded
    if r.returncode == 127:
        return report.fail(
            f"launchd not available ({_first_line(r)}): plist written to {path}; "
            f"load it on the Mac with `{_start_hint('macos', path)}`"
        )
    runner(["launchctl", "enable", target])  # undo an earlier `launchctl disable`
    r = runner(["launchctl", "bootstrap", _launchd_domain(), str(path)])
    if r.returncode != 0:
        return report.fail(
            f"plist written to {path}, but `launchctl bootstrap` failed: {_first_line(r)}; "
            f"groove's own messages are in {log_dir(env)}/groove.err.log"
        )
    report.out.append(f"loaded and started; `groove service status` checks it, logs are in {log_dir(env)}")
    return report


def uninstall(platform: Platform, *, env: Mapping[str, str] | None = None, runner: Runner = run_command) -> Report:
    """Stop and disable the service, then remove its file. Logs are left in place."""
    path = unit_path(platform, env)
    report = Report(data={"platform": platform, "path": str(path)})
    if not path.is_file():
        report.out.append(f"not installed: {path} does not exist")
        return report
    if platform == "macos":
        r = runner(["launchctl", "bootout", f"{_launchd_domain()}/{LAUNCHD_LABEL}"])
        path.unlink()
        report.out.append(f"removed {path}")
        if r.returncode == 127:
            report.fail(f"launchd not available ({_first_line(r)}); if groove is still running, "
                        f"stop it with `launchctl bootout {_launchd_domain()}/{LAUNCHD_LABEL}`")
        return report
    r = runner(_systemctl("daemon-reload"))  # also tells whether the user manager answers
    if r.returncode != 0:
        path.unlink()
        report.out.append(f"removed {path}")
        return report.fail(
            f"systemd user session not available ({_first_line(r)}): the unit file is removed; "
            "if groove is still running in your login session, stop it there with "
            "`systemctl --user disable --now groove && systemctl --user daemon-reload`"
        )
    r = runner(_systemctl("disable", "--now", UNIT_NAME))
    path.unlink()
    report.out.append(f"removed {path}")
    runner(_systemctl("daemon-reload"))
    runner(_systemctl("reset-failed", UNIT_NAME))  # forget a failed state; fails harmlessly otherwise
    if r.returncode != 0:
        return report.fail(f"`systemctl --user disable --now groove` failed: {_first_line(r)}; "
                           "check `systemctl --user status groove`")
    report.out.append("stopped and disabled")
    return report


_LAUNCHCTL_FIELD = re.compile(r"^\s*(state|pid|last exit code) = (.+?)\s*$", re.MULTILINE)


def status(platform: Platform, *, env: Mapping[str, str] | None = None, runner: Runner = run_command) -> Report:
    """Whether the file is installed and what the service manager says.
    Exit code: 0 running, 3 not running (or not installed), 4 unknown."""
    path = unit_path(platform, env)
    installed = path.is_file()
    data: dict[str, Any] = {"platform": platform, "path": str(path), "installed": installed,
                            "state": "unknown", "detail": ""}
    if platform == "macos":
        r = runner(["launchctl", "print", f"{_launchd_domain()}/{LAUNCHD_LABEL}"])
        if r.returncode == 127:
            data["detail"] = f"launchd not available: {_first_line(r)}"
            code = STATUS_UNKNOWN
        elif r.returncode != 0:
            data["state"] = "not loaded"
            code = STATUS_NOT_RUNNING
        else:
            fields: dict[str, str] = {}
            for key, value in _LAUNCHCTL_FIELD.findall(r.stdout):
                fields.setdefault(key, value)
            data["state"] = fields.get("state", "loaded")
            data["detail"] = ", ".join(f"{k} {v}" for k, v in fields.items() if k != "state")
            code = STATUS_RUNNING if data["state"] == "running" else STATUS_NOT_RUNNING
    else:
        r = runner(_systemctl("is-active", UNIT_NAME))
        state = r.stdout.strip()
        if state:  # is-active always names a state when it reaches the manager
            data["state"] = state
            code = STATUS_RUNNING if state == "active" else STATUS_NOT_RUNNING
        else:
            data["detail"] = f"systemd user session not available: {_first_line(r)}"
            code = STATUS_UNKNOWN
    if not installed and code == STATUS_RUNNING:
        data["detail"] = ", ".join(filter(None, [data["detail"], "but its file is gone: reinstall, or stop it"]))
    report = Report(exit_code=code, data=data)
    report.out += [
        f"{'unit file' if platform == 'linux' else 'plist'}: {path} ({'installed' if installed else 'not installed'})",
        f"state:     {data['state']}" + (f" ({data['detail']})" if data["detail"] else ""),
    ]
    return report


def write_examples(root: Path) -> list[Path]:
    """Regenerate the repository copies under `root`."""
    written = []
    for rel, text in example_files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # python -m groove.service: regenerate systemd/ and launchd/ in the checkout
    for written_path in write_examples(Path(__file__).resolve().parent.parent):
        print(f"wrote {written_path}")
