"""`groove service`: run groove in the background as a user service.

On Linux a systemd user unit (~/.config/systemd/user/groove.service), on macOS
a launchd agent (~/Library/LaunchAgents/com.groove.agent.plist). Both run

    <groove> serve --transport http --config <absolute groove.toml>

(`groove service install --kb PATH` adds `--kb <absolute PATH>`, and `--index` likewise: then the
config file is optional, and the notes folder is the one named.)

Named instances (`groove service install --name work --kb ~/work [--port N]`) run beside that one:
each its own unit (groove-work.service, launchd label com.groove.agent.work), notes folder, index
and port, all written into its `groove serve` command (`--kb`, `--index`, `--bind`), so the unit
file is the one record of an instance: `groove service list` reads them back from there. Two
instances never share a notes folder, an index or a port. Without --name everything is as it was.

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
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

from groove.config import ServeSettings, default_index_path, read_config_file
from groove.errors import ConfigError, GrooveError
from groove.folders import Folders, NotesFolder, parse_folders

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

# Named instances. "default" is what `service list` calls the instance installed without --name.
DEFAULT_INSTANCE = "default"
INSTANCE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?")
DEFAULT_BIND: str = ServeSettings.model_fields["bind"].default  # [serve] bind when a config file does not set it
FIRST_PORT, PORTS_TRIED = 3101, 100  # a named instance without --port gets the first free port from here


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
        raise ServiceError(f"--name {DEFAULT_INSTANCE} means the instance installed without --name: "
                           "leave --name out to install, check or remove that one")
    if not INSTANCE_NAME.fullmatch(name):
        raise ServiceError(
            f"--name {name!r} is not an instance name: use 1 to 32 lowercase letters (a-z), digits and "
            "hyphens, starting and ending with a letter or digit, e.g. --name work or --name notes-2024"
        )
    return name


def check_port(port: int | None) -> int | None:
    if port is not None and not 1 <= port <= 65535:
        raise ServiceError(f"--port {port}: a port is a number from 1 to 65535 (leave --port out to have a free one chosen)")
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


# --- rendering -------------------------------------------------------------------------------

SYSTEMD_TEMPLATE = """\
# groove as a systemd user service: local search over Markdown notes, served over MCP (HTTP).
#
# `{install}` writes this file to ~/.config/systemd/user/{unit}
# with the paths filled in. The repository copy (systemd/groove.service) has
# @GROOVE_BIN@ and @GROOVE_CONFIG@ where the paths go; docs/service.md shows how
# to install it by hand. Generated by groove/service.py: change it there.

[Unit]
Description=groove{instance}: local search over Markdown notes (MCP over HTTP)
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


def render_systemd_unit(command: Sequence[str], config: str | None, flags: Sequence[str] = (),
                        name: str | None = None) -> str:
    """The unit file for `command` (the groove executable, as argv), `config` and `flags`; `name`: a named instance."""
    argv = serve_argv(command, config, flags)
    exec_start = " ".join(systemd_quote(a, program=i == 0) for i, a in enumerate(argv))
    return SYSTEMD_TEMPLATE.format(
        exec_start=exec_start, unit=unit_name(name), instance="" if name is None else f" ({name})",
        install="groove service install" + ("" if name is None else f" --name {name}"),
    )


def log_files(logs: str, name: str | None = None) -> tuple[str, str]:
    """macOS: the instance's stdout and stderr files in the log folder."""
    stem = short_name(name)
    return f"{logs}/{stem}.out.log", f"{logs}/{stem}.err.log"


def render_launchd_plist(command: Sequence[str], config: str | None, logs: str, flags: Sequence[str] = (),
                         name: str | None = None) -> str:
    """The LaunchAgent plist. KeepAlive restarts groove when it exits with an error."""
    argv = serve_argv(command, config, flags)
    for arg in (*argv, logs):
        _check_arg(arg)
    out, err = log_files(logs, name)
    agent: dict[str, Any] = {
        "Label": launchd_label(name),
        "ProgramArguments": argv,
        "EnvironmentVariables": {"HF_HUB_OFFLINE": "1"},
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        "ExitTimeOut": 10,
        "StandardOutPath": out,
        "StandardErrorPath": err,
    }
    return plistlib.dumps(agent, sort_keys=False).decode("utf-8")


@dataclass(frozen=True)
class Rendered:
    platform: Platform
    path: Path
    text: str


def render(platform: Platform, config: Path | None, *, command: Sequence[str] | None = None,
           env: Mapping[str, str] | None = None, flags: Sequence[str] = (), name: str | None = None) -> Rendered:
    """The file to install on this machine and where it goes; `name`: a named instance (None: the default one)."""
    env = os.environ if env is None else env
    command = groove_command() if command is None else list(command)
    config_str = str(Path(os.path.abspath(config))) if config is not None else None
    if platform == "macos":
        text = render_launchd_plist(command, config_str, str(log_dir(env)), flags, name)
    else:
        text = render_systemd_unit(command, config_str, flags, name)
    return Rendered(platform, unit_path(platform, env, name), text)


def example_files() -> dict[str, str]:
    """The repository copies, relative to the repository root."""
    return {
        "systemd/groove.service": render_systemd_unit([PLACEHOLDER_BIN], PLACEHOLDER_CONFIG),
        f"launchd/{LAUNCHD_LABEL}.plist": render_launchd_plist([PLACEHOLDER_BIN], PLACEHOLDER_CONFIG, PLACEHOLDER_LOG_DIR),
    }


def check_config(config_file: Path | None, suggested: Path, kb: Path | Sequence[str] | None = None) -> Path | None:
    """The config file a service will read (None: none, when `kb` names the notes folders on the command
    line); refuse when the service would have no notes folder."""
    if kb is not None:  # `groove service install --kb PATH`: the unit passes --kb itself
        for folder in _folders_of([str(kb)] if isinstance(kb, Path) else list(kb), None, "--kb"):
            if not folder.path.is_dir():
                raise ServiceError(f"the notes folder {folder.path} (--kb) does not exist or is not a folder")
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
    kb_path = read_config_file(config).get("kb_path")
    if not kb_path:
        raise ServiceError(
            f"{config} does not set kb_path, so the service would have no notes folder; "
            'add a line like kb_path = "~/notes" to it and run `groove service install` again'
        )
    for folder in _folders_of(kb_path, None, f"kb_path in {config}"):
        if not folder.path.is_dir():
            raise ServiceError(f"the notes folder {folder.path} (kb_path in {config}) does not exist or is not a folder")
    return config


def _folders_of(value: Any, base: Path | None, where: str) -> tuple[NotesFolder, ...]:
    """kb_path's value (a folder or a list, `name = path` each) or --kb's specs as folders; a ServiceError
    saying `where` when they are not."""
    try:
        return parse_folders(value if isinstance(value, list) else [value], base=base)
    except ConfigError as exc:
        raise ServiceError(f"{where}: {exc}") from None


# --- instances: the units read back, a new one planned ------------------------------------------

def split_exec_start(value: str) -> list[str]:
    """The words of an ExecStart= value as `render_systemd_unit` writes them (the inverse of
    `systemd_quote`): double-quoted words with \\\\ and \\" escapes, `%%` for %, `$$` for $ in arguments."""
    words: list[str] = []
    i, n = 0, len(value)
    while i < n:
        if value[i].isspace():
            i += 1
            continue
        if value[i] == '"':
            i += 1
            word = []
            while i < n and value[i] != '"':
                if value[i] == "\\" and i + 1 < n:
                    i += 1
                word.append(value[i])
                i += 1
            i += 1  # the closing quote
            raw = "".join(word)
        else:
            start = i
            while i < n and not value[i].isspace():
                i += 1
            raw = value[start:i]
        raw = raw.replace("%%", "%")
        words.append(raw if not words else raw.replace("$$", "$"))
    return words


def unit_argv(platform: Platform, text: str) -> list[str] | None:
    """The command an installed unit file or plist runs, or None when it has none that can be read."""
    if platform == "macos":
        try:
            argv = plistlib.loads(text.encode("utf-8")).get("ProgramArguments")
        except Exception:  # noqa: BLE001 - a plist that does not parse is reported as unreadable
            return None
        return [str(a) for a in argv] if isinstance(argv, list) else None
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            return split_exec_start(line[len("ExecStart="):])
    return None


def flag_list(argv: Sequence[str], flag: str) -> list[str]:
    """Every value of a repeated flag (`--kb` once per notes folder), in order."""
    found = []
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith(flag + "="):
            found.append(arg[len(flag) + 1:])
    return found


def flag_values(argv: Sequence[str]) -> dict[str, str]:
    """`--config`, `--kb`, `--index` and `--bind` of a `groove serve` command (the last of each)."""
    found: dict[str, str] = {}
    for i, arg in enumerate(argv):
        for flag in ("--config", "--kb", "--index", "--bind"):
            if arg == flag and i + 1 < len(argv):
                found[flag] = argv[i + 1]
            elif arg.startswith(flag + "="):
                found[flag] = arg[len(flag) + 1:]
    return found


def split_bind(bind: str) -> tuple[str, int | None]:
    """HOST:PORT ([::1]:3100 for IPv6) -> (host, port); the port is None when it is not a number."""
    host, _, port = bind.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host, int(port) if port.isdigit() else None


def join_bind(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class Instance:
    """One installed groove service, as its unit file (or plist) and config file say."""

    name: str            # DEFAULT_INSTANCE for the one installed without --name
    platform: Platform
    path: Path           # the unit file or plist
    config: str | None = None
    folder: str | None = None  # its notes folder (several: `name = path; ...`)
    folders: list[str] = field(default_factory=list)  # each notes folder's path
    index: str | None = None
    bind: str | None = None
    port: int | None = None
    state: str = "unknown"
    detail: str = ""

    @property
    def unit(self) -> str:
        arg = None if self.name == DEFAULT_INSTANCE else self.name
        return launchd_label(arg) if self.platform == "macos" else unit_name(arg)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "path": str(self.path), "folder": self.folder,
                "folders": self.folders,
                "index": self.index, "bind": self.bind, "port": self.port, "config": self.config,
                "state": self.state, "detail": self.detail}


def _same_path(a: str | Path | None, b: str | Path | None) -> bool:
    return a is not None and b is not None and os.path.realpath(a) == os.path.realpath(b)


def read_instance(platform: Platform, path: Path, name: str) -> Instance:
    """What an installed unit serves: its flags first, then its config file (what `groove serve` would read).
    Values that cannot be known (a config file gone or broken) stay None, with the reason in `detail`."""
    inst = Instance(name=name, platform=platform, path=path)
    try:
        argv = unit_argv(platform, path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        inst.detail = f"cannot read {path}: {exc}"
        return inst
    if argv is None:
        inst.detail = f"{path} runs no command groove can read"
        return inst
    flags = flag_values(argv)
    inst.config = flags.get("--config")
    file: dict[str, Any] = {}
    if inst.config:
        try:
            file = read_config_file(Path(inst.config))
        except GrooveError as exc:
            inst.detail = str(exc)
    kb = flag_list(argv, "--kb") or file.get("kb_path")
    folders = None
    if kb:
        try:
            folders = Folders(parse_folders(kb if isinstance(kb, list) else [kb]))
        except GrooveError as exc:
            inst.detail = inst.detail or str(exc)
    if folders is not None:
        inst.folder = folders.describe()
        inst.folders = [str(f.path) for f in folders]
    index = flags.get("--index") or file.get("index_path")
    if index:
        inst.index = str(Path(index).expanduser())
    elif folders is not None:
        inst.index = str(default_index_path(folders))
    serve = file.get("serve")
    inst.bind = flags.get("--bind") or (serve.get("bind") if isinstance(serve, dict) else None) or DEFAULT_BIND
    inst.port = split_bind(inst.bind)[1]
    return inst


def installed_instances(platform: Platform, env: Mapping[str, str] | None = None) -> list[Instance]:
    """Every installed instance, the default one first, then by name (states not asked: see `list_instances`)."""
    folder = unit_dir(platform, env)
    found: list[Instance] = []
    default = unit_path(platform, env)
    if default.is_file():
        found.append(read_instance(platform, default, DEFAULT_INSTANCE))
    if platform == "macos":
        pattern, prefix, suffix = f"{LAUNCHD_LABEL}.*.plist", f"{LAUNCHD_LABEL}.", ".plist"
    else:
        pattern, prefix, suffix = "groove-*.service", "groove-", ".service"
    for path in sorted(folder.glob(pattern)) if folder.is_dir() else ():
        name = path.name[len(prefix):-len(suffix)]
        if INSTANCE_NAME.fullmatch(name) and path.is_file():
            found.append(read_instance(platform, path, name))
    return found


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could listen on host:port now (SO_REUSEADDR, as `groove serve` binds)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServiceError(f"cannot listen on {host}: unknown host ({exc.strerror}); check [serve] bind") from None
    family, type_, proto, _, address = infos[0]
    with socket.socket(family, type_, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError:
            return False
    return True


def choose_port(host: str, taken: set[int], probe: Callable[[str, int], bool] = port_is_free) -> int:
    """The first port from FIRST_PORT that no installed instance claims and nothing listens on now."""
    for port in range(FIRST_PORT, FIRST_PORT + PORTS_TRIED):
        if port not in taken and probe(host, port):
            return port
    raise ServiceError(f"no free port from {FIRST_PORT} to {FIRST_PORT + PORTS_TRIED - 1} on {host}: "
                       "pick one with --port N")


@dataclass
class Plan:
    """What `install` writes for an instance: its `groove serve` flags, and what they come to."""

    name: str | None
    config: Path | None
    flags: list[str]
    folder: str | None  # its notes folder (several: `name = path; ...`)
    index: Path | None
    bind: str
    port: int | None
    port_chosen: bool = False


def plan_install(platform: Platform, *, name: str | None, config: Path | None, kb: Path | Sequence[str] | None,
                 index: Path | None, port: int | None, host: str, env: Mapping[str, str] | None = None,
                 probe: Callable[[str, int], bool] = port_is_free) -> Plan:
    """The flags of an instance's `groove serve`, refused when another installed instance has its notes
    folder, its index or its port.

    The default instance (`name` None) keeps the flags it always had (`--kb`, `--index` as given; `--bind`
    only with `port`). A named one gets all three, absolute: its folder (`kb`, else the config's kb_path),
    its index (`index`, else the config's index_path, else the folder's default index), its port (`port`,
    else the one it had, else a free one from FIRST_PORT) on `host`."""
    check_name(name)
    check_port(port)
    file = read_config_file(config) if config is not None else {}
    if kb is not None:
        chosen_folders = _folders_of([str(kb)] if isinstance(kb, Path) else list(kb), Path.cwd(), "--kb")
    elif file.get("kb_path"):
        chosen_folders = _folders_of(file["kb_path"], None, f"kb_path in {config}")
    else:
        chosen_folders = ()
    notes = Folders(chosen_folders) if chosen_folders else None
    if name is not None and notes is None:
        raise ServiceError(f"--name {name}: a named instance needs its notes folder: pass --kb PATH "
                           "(or --config FILE with kb_path in it)")
    index_path = index if index is not None else (Path(file["index_path"]).expanduser() if file.get("index_path") else None)
    index_abs = (Path(os.path.abspath(index_path.expanduser())) if index_path is not None
                 else default_index_path(notes) if notes is not None else None)
    installed = installed_instances(platform, env)
    others = [i for i in installed if i.name != (name or DEFAULT_INSTANCE)]
    me = next((i for i in installed if i.name == (name or DEFAULT_INSTANCE)), None)
    for other in others:
        shared = [f.path for f in notes or () if any(_same_path(o, f.path) for o in other.folders)]
        if shared:
            raise ServiceError(
                f"the notes folder {shared[0]} is already served by the groove service instance '{other.name}' "
                f"({other.unit}); two instances of one folder would index it twice. Remove that one first "
                f"(`groove service uninstall{_name_flag(other.name)}`) or pick another folder"
            )
        if index_abs is not None and _same_path(other.index, index_abs):
            raise ServiceError(
                f"the index {index_abs} is already used by the groove service instance '{other.name}' "
                f"({other.unit}); give this one its own with --index PATH"
            )
    serve = file.get("serve")
    file_bind = (serve.get("bind") if isinstance(serve, dict) else None) or DEFAULT_BIND
    claimed = {i.port: i for i in others if i.port is not None}
    chosen = False
    if port is None and name is not None:
        if me is not None and me.port is not None and me.port not in claimed:
            port = me.port  # a reinstall keeps the instance's address: its clients are configured for it
        else:
            port, chosen = choose_port(host, set(claimed), probe), True
    effective = port if port is not None else split_bind(file_bind)[1]
    if effective is not None and effective in claimed:
        other = claimed[effective]
        raise ServiceError(f"port {effective} is already the port of the groove service instance '{other.name}' "
                           f"({other.unit}); pick another with --port N, or leave --port out to have a free one chosen")
    if port is not None and not chosen and not (me is not None and me.port == port) and not probe(host, port):
        raise ServiceError(f"port {port} on {host} is in use by another program; pick another with --port N, "
                           "or leave --port out to have a free one chosen")
    flags: list[str] = []
    if (name is not None or kb is not None) and notes is not None:
        for flag in notes.kb_flags():
            flags += ["--kb", flag]
    if name is not None or index is not None:
        flags += ["--index", str(index_abs)]
    bind = join_bind(host, port) if port is not None else file_bind
    if port is not None:
        flags += ["--bind", bind]
    return Plan(name=name, config=config, flags=flags, folder=notes.describe() if notes is not None else None,
                index=index_abs, bind=bind,
                port=effective, port_chosen=chosen)


def _name_flag(name: str) -> str:
    return "" if name == DEFAULT_INSTANCE else f" --name {name}"


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


def _start_hint(platform: Platform, path: Path, name: str | None = None) -> str:
    if platform == "macos":
        return _shell(["launchctl", "bootstrap", _launchd_domain(), str(path)])
    return f"systemctl --user daemon-reload && systemctl --user enable --now {short_name(name)}"


def _status_command(name: str | None) -> str:
    return "groove service status" + ("" if name is None else f" --name {name}")


def install(platform: Platform, dry_run: bool = False, *, config: Path | None,
            command: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
            runner: Runner = run_command, start: bool = True, flags: Sequence[str] = (),
            name: str | None = None) -> Report:
    """Write the unit (or plist) for `config` and `flags` (`--kb`, `--index`, `--bind`) and, unless `start` is
    False, start it now. `name`: a named instance (`plan_install` gives its flags), None: the default one."""
    check_name(name)
    rendered = render(platform, config, command=command, env=env, flags=flags, name=name)
    path, text = rendered.path, rendered.text
    report = Report(data={"platform": platform, "path": str(path)})
    if name is not None:
        report.data["name"] = name
    if dry_run:
        report.out += [f"would write {path}:", "", text.rstrip("\n"), "",
                       f"then run: {_start_hint(platform, path, name)}"]
        return report

    previous = path.read_text(encoding="utf-8") if path.is_file() else None
    if platform == "macos":
        log_dir(env).mkdir(parents=True, exist_ok=True)
    _write_atomic(path, text)
    report.out.append(f"wrote {path}")
    if platform == "macos":
        return _install_launchd(path, report, runner, start, env, name)
    return _install_systemd(path, report, runner, start, changed=previous is not None and previous != text, name=name)


def _install_systemd(path: Path, report: Report, runner: Runner, start: bool, changed: bool,
                     name: str | None = None) -> Report:
    unit, short = unit_name(name), short_name(name)
    r = runner(_systemctl("daemon-reload"))
    if r.returncode != 0:
        return report.fail(
            f"systemd user session not available ({_first_line(r)}): unit written to {path}; "
            f"start it from your login session with `{_start_hint('linux', path, name)}`"
        )
    r = runner(_systemctl("enable", *(["--now"] if start else []), unit))
    if r.returncode != 0:
        return report.fail(
            f"unit written to {path}, but `systemctl --user enable{' --now' if start else ''} {short}` "
            f"failed: {_first_line(r)}; see `journalctl --user -u {short}`"
        )
    if not start:
        report.out.append(f"enabled: groove starts at your next login; start it now with `systemctl --user start {short}`")
        return report
    if changed:
        # enable --now leaves an already running groove on the old unit.
        r = runner(_systemctl("try-restart", unit))
        if r.returncode != 0:
            return report.fail(f"the unit changed but `systemctl --user restart {short}` failed: {_first_line(r)}")
    report.out.append(f"enabled and started; `{_status_command(name)}` checks it, "
                      f"`journalctl --user -u {short} -f` follows its log")
    return report


def _install_launchd(path: Path, report: Report, runner: Runner, start: bool,
                     env: Mapping[str, str] | None, name: str | None = None) -> Report:
    if not start:
        report.out.append(f"launchd loads it at your next login; load it now with `{_start_hint('macos', path)}`")
        return report
    target = f"{_launchd_domain()}/{launchd_label(name)}"
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
            f"groove's own messages are in {log_files(str(log_dir(env)), name)[1]}"
        )
    report.out.append(f"loaded and started; `{_status_command(name)}` checks it, logs are in {log_dir(env)}")
    return report


def _not_installed(platform: Platform, env: Mapping[str, str] | None, name: str) -> ServiceError:
    """A named instance that is not installed: an error naming the ones that are (a typo must not pass)."""
    names = [i.name for i in installed_instances(platform, env)]
    return ServiceError(f"no groove service instance named '{name}' is installed ("
                        + (f"installed: {', '.join(names)}; `groove service list` shows them)" if names
                           else "none is installed)"))


def uninstall(platform: Platform, *, env: Mapping[str, str] | None = None, runner: Runner = run_command,
              name: str | None = None, purge: bool = False) -> Report:
    """Stop and disable the service, then remove its file; with `purge`, its index too. Logs are left in place."""
    check_name(name)
    path = unit_path(platform, env, name)
    report = Report(data={"platform": platform, "path": str(path)})
    if not path.is_file():
        if name is not None:
            raise _not_installed(platform, env, name)
        report.out.append(f"not installed: {path} does not exist")
        return report
    index = read_instance(platform, path, name or DEFAULT_INSTANCE).index if purge else None
    label, short, unit = launchd_label(name), short_name(name), unit_name(name)
    if platform == "macos":
        r = runner(["launchctl", "bootout", f"{_launchd_domain()}/{label}"])
        path.unlink()
        report.out.append(f"removed {path}")
        if r.returncode == 127:
            report.fail(f"launchd not available ({_first_line(r)}); if groove is still running, "
                        f"stop it with `launchctl bootout {_launchd_domain()}/{label}`")
        return _purge(index, report) if purge else report
    r = runner(_systemctl("daemon-reload"))  # also tells whether the user manager answers
    if r.returncode != 0:
        path.unlink()
        report.out.append(f"removed {path}")
        report.fail(
            f"systemd user session not available ({_first_line(r)}): the unit file is removed; "
            "if groove is still running in your login session, stop it there with "
            f"`systemctl --user disable --now {short} && systemctl --user daemon-reload`"
        )
        return _purge(index, report) if purge else report
    r = runner(_systemctl("disable", "--now", unit))
    path.unlink()
    report.out.append(f"removed {path}")
    runner(_systemctl("daemon-reload"))
    runner(_systemctl("reset-failed", unit))  # forget a failed state; fails harmlessly otherwise
    if r.returncode != 0:
        report.fail(f"`systemctl --user disable --now {short}` failed: {_first_line(r)}; "
                    f"check `systemctl --user status {short}`")
    else:
        report.out.append("stopped and disabled")
    return _purge(index, report) if purge else report


INDEX_COMPANIONS = ("-wal", "-shm", ".eval.jsonl", ".lock")  # SQLite's WAL files, eval history, the writer lock


def _purge(index: str | None, report: Report) -> Report:
    """Delete the index of an uninstalled instance and its companion files (never the notes). Refused when
    the file is not a groove index, or when a process still writes it (its writer lock is held)."""
    from groove.store import db  # lazy: SQLite and the store only for --purge

    if index is None:
        return report.fail("--purge: cannot tell which index the instance used (its config file is gone?); "
                           "nothing deleted")
    path = Path(index)
    report.data["index"] = str(path)
    if not path.exists():
        report.out.append(f"no index to delete: {path} does not exist")
        return report
    lock = db.WriterLock(path)
    try:
        lock.acquire()  # a groove that still writes the index (the service did not stop) keeps it
    except db.IndexError_ as exc:
        return report.fail(f"--purge: the index {path} was kept: {exc}")
    companions = [Path(str(path) + suffix) for suffix in INDEX_COMPANIONS]
    present = [c.name for c in companions if c.exists()]
    try:
        db.remove_index_files(path)  # the index and its WAL files; refused for a file that is not a groove index
        for companion in companions[2:-1]:
            companion.unlink(missing_ok=True)
    except db.IndexError_ as exc:
        return report.fail(f"--purge: {str(exc).replace('--rebuild', '--purge')}")
    finally:
        lock.release()
    companions[-1].unlink(missing_ok=True)
    report.out.append(f"deleted the index {path}" + (f" and {', '.join(present)}" if present else ""))
    return report


_LAUNCHCTL_FIELD = re.compile(r"^\s*(state|pid|last exit code) = (.+?)\s*$", re.MULTILINE)


def _state(platform: Platform, name: str | None, runner: Runner) -> tuple[str, str, int]:
    """(state, detail, exit code) of an instance as the service manager tells it."""
    if platform == "macos":
        r = runner(["launchctl", "print", f"{_launchd_domain()}/{launchd_label(name)}"])
        if r.returncode == 127:
            return "unknown", f"launchd not available: {_first_line(r)}", STATUS_UNKNOWN
        if r.returncode != 0:
            return "not loaded", "", STATUS_NOT_RUNNING
        fields: dict[str, str] = {}
        for key, value in _LAUNCHCTL_FIELD.findall(r.stdout):
            fields.setdefault(key, value)
        state = fields.get("state", "loaded")
        detail = ", ".join(f"{k} {v}" for k, v in fields.items() if k != "state")
        return state, detail, STATUS_RUNNING if state == "running" else STATUS_NOT_RUNNING
    r = runner(_systemctl("is-active", unit_name(name)))
    state = r.stdout.strip()
    if state:  # is-active always names a state when it reaches the manager
        return state, "", STATUS_RUNNING if state == "active" else STATUS_NOT_RUNNING
    return "unknown", f"systemd user session not available: {_first_line(r)}", STATUS_UNKNOWN


def status(platform: Platform, *, env: Mapping[str, str] | None = None, runner: Runner = run_command,
           name: str | None = None) -> Report:
    """Whether the file is installed and what the service manager says.
    Exit code: 0 running, 3 not running (or not installed), 4 unknown."""
    check_name(name)
    path = unit_path(platform, env, name)
    installed = path.is_file()
    data: dict[str, Any] = {"platform": platform, "path": str(path), "installed": installed,
                            "state": "unknown", "detail": ""}
    if name is not None:
        data["name"] = name
    data["state"], data["detail"], code = _state(platform, name, runner)
    if not installed and code == STATUS_RUNNING:
        data["detail"] = ", ".join(filter(None, [data["detail"], "but its file is gone: reinstall, or stop it"]))
    report = Report(exit_code=code, data=data)
    report.out += [
        f"{'unit file' if platform == 'linux' else 'plist'}: {path} ({'installed' if installed else 'not installed'})",
        f"state:     {data['state']}" + (f" ({data['detail']})" if data["detail"] else ""),
    ]
    if installed and name is not None:
        inst = read_instance(platform, path, name)
        data.update(folder=inst.folder, index=inst.index, bind=inst.bind, port=inst.port)
        report.out += [f"notes:     {inst.folder}", f"index:     {inst.index}", f"listens:   {inst.bind}"]
    return report


def list_instances(platform: Platform, *, env: Mapping[str, str] | None = None,
                   runner: Runner = run_command) -> Report:
    """Every installed instance: name, notes folder, port and state (a table; `data` for --format json)."""
    instances = installed_instances(platform, env)
    problems = [f"{i.name}: {i.detail}" for i in instances if i.detail]  # a unit or config that cannot be read
    unreachable = ""
    for inst in instances:
        inst.state, detail, code = _state(platform, None if inst.name == DEFAULT_INSTANCE else inst.name, runner)
        if code == STATUS_UNKNOWN:
            unreachable = detail
        inst.detail = "; ".join(filter(None, [inst.detail, detail]))
    report = Report(data={"platform": platform, "instances": [i.as_dict() for i in instances]})
    if not instances:
        report.out.append("no groove service is installed "
                          "(`groove service install [--name NAME] --kb PATH` installs one)")
        return report
    rows = [("NAME", "FOLDER", "PORT", "STATE")]
    rows += [(i.name, i.folder or "?", str(i.port) if i.port is not None else "?", i.state) for i in instances]
    widths = [max(len(row[c]) for row in rows) for c in range(3)]
    report.out += ["  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "  " + row[3] for row in rows]
    report.err += problems + ([f"{unreachable}: the states are unknown"] if unreachable else [])
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
