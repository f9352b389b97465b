"""The installed instances read back from their unit files, and a new one planned against them."""

from __future__ import annotations

import os
import plistlib
import socket
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groove.autostart.platforms import (
    DEFAULT_INSTANCE,
    INSTANCE_NAME,
    LAUNCHD_LABEL,
    Platform,
    ServiceError,
    _shell,
    check_name,
    check_port,
    launchd_label,
    read_unit,
    task_name,
    unit_dir,
    unit_name,
    unit_path,
)
from groove.config import ServeSettings, default_index_path, read_config_file
from groove.errors import ConfigError, GrooveError
from groove.folders import Folders, NotesFolder, parse_folders
from groove.store.address import address, redact

DEFAULT_BIND: str = ServeSettings.model_fields["bind"].default  # [serve] bind when a config file does not set it
FIRST_PORT, PORTS_TRIED = 3101, 100  # a named instance without --port gets the first free port from here


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
            raise ServiceError(
                f"the notes folder {folder.path} (kb_path in {config}) does not exist or is not a folder"
            )
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


def split_windows_command_line(line: str) -> list[str]:
    """The arguments of a Windows command line as the C runtime splits them (the inverse of
    `subprocess.list2cmdline`): whitespace separates outside double quotes; 2n backslashes before a quote are n
    backslashes and the quote opens or closes, 2n+1 are n and a literal quote; other backslashes are themselves."""
    words: list[str] = []
    word: list[str] = []
    in_word = quoted = False
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            run = 0
            while i < n and line[i] == "\\":
                run += 1
                i += 1
            if i < n and line[i] == '"':
                word.append("\\" * (run // 2))
                if run % 2:
                    word.append('"')
                    i += 1
            else:
                word.append("\\" * run)
            in_word = True
            continue
        if ch == '"':
            if quoted and i + 1 < n and line[i + 1] == '"':  # "" inside quotes: a literal quote
                word.append('"')
                i += 2
                continue
            quoted = not quoted
            in_word = True
        elif ch in " \t" and not quoted:
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
        else:
            word.append(ch)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(word))
    return words


TASK_NS = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}


def task_argv(text: str) -> list[str] | None:
    """Windows: `groove serve ...` as a task file's launcher runs it (what follows the launcher's `--`), or None."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    command = root.findtext("t:Actions/t:Exec/t:Command", namespaces=TASK_NS)
    arguments = root.findtext("t:Actions/t:Exec/t:Arguments", namespaces=TASK_NS) or ""
    if not command:
        return None
    argv = [command, *split_windows_command_line(arguments)]
    return argv[argv.index("--") + 1 :] if "--" in argv else argv


def unit_argv(platform: Platform, text: str) -> list[str] | None:
    """The command an installed unit file or plist runs, or None when it has none that can be read."""
    if platform == "windows":
        return task_argv(text)
    if platform == "macos":
        try:
            argv = plistlib.loads(text.encode("utf-8")).get("ProgramArguments")
        except Exception:  # noqa: BLE001 - a plist that does not parse is reported as unreadable
            return None
        return [str(a) for a in argv] if isinstance(argv, list) else None
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            return split_exec_start(line[len("ExecStart=") :])
    return None


def flag_list(argv: Sequence[str], flag: str) -> list[str]:
    """Every value of a repeated flag (`--kb` once per notes folder), in order."""
    found = []
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith(flag + "="):
            found.append(arg[len(flag) + 1 :])
    return found


def flag_values(argv: Sequence[str]) -> dict[str, str]:
    """`--config`, `--kb`, `--index`, `--store` and `--bind` of a `groove serve` command (the last of each)."""
    found: dict[str, str] = {}
    for i, arg in enumerate(argv):
        for flag in ("--config", "--kb", "--index", "--store", "--bind"):
            if arg == flag and i + 1 < len(argv):
                found[flag] = argv[i + 1]
            elif arg.startswith(flag + "="):
                found[flag] = arg[len(flag) + 1 :]
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

    name: str  # DEFAULT_INSTANCE for the one installed without --name
    platform: Platform
    path: Path  # the unit file or plist
    config: str | None = None
    folder: str | None = None  # its notes folder (several: `name = path; ...`)
    folders: list[str] = field(default_factory=list)  # each notes folder's path
    index: str | None = None
    store: str | None = None  # a shared store's URL (`--store`, `[store] url`); its password is never shown
    bind: str | None = None
    port: int | None = None
    state: str = "unknown"
    detail: str = ""

    @property
    def unit(self) -> str:
        arg = None if self.name == DEFAULT_INSTANCE else self.name
        if self.platform == "windows":
            return task_name(arg)
        return launchd_label(arg) if self.platform == "macos" else unit_name(arg)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "path": str(self.path),
            "folder": self.folder,
            "folders": self.folders,
            "index": self.index,
            "store": redact(self.store) if self.store else None,
            "bind": self.bind,
            "port": self.port,
            "config": self.config,
            "state": self.state,
            "detail": self.detail,
        }


def _same_path(a: str | Path | None, b: str | Path | None) -> bool:
    return a is not None and b is not None and os.path.realpath(a) == os.path.realpath(b)


def read_instance(platform: Platform, path: Path, name: str) -> Instance:
    """What an installed unit serves: its flags first, then its config file (what `groove serve` would read).
    Values that cannot be known (a config file gone or broken) stay None, with the reason in `detail`."""
    inst = Instance(name=name, platform=platform, path=path)
    try:
        argv = unit_argv(platform, read_unit(platform, path))
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
    section = file.get("store")
    inst.store = flags.get("--store") or (section.get("url") if isinstance(section, dict) else None) or None
    if inst.store:
        inst.index = str(address(inst.store, Path()).anchor)  # the local name of a shared store (its eval history)
    elif index:
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
    if platform == "windows":
        pattern, prefix, suffix = f"{task_name()}-*.xml", f"{task_name()}-", ".xml"
    elif platform == "macos":
        pattern, prefix, suffix = f"{LAUNCHD_LABEL}.*.plist", f"{LAUNCHD_LABEL}.", ".plist"
    else:
        pattern, prefix, suffix = "groove-*.service", "groove-", ".service"
    for path in sorted(folder.glob(pattern)) if folder.is_dir() else ():
        name = path.name[len(prefix) : -len(suffix)]
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
    raise ServiceError(
        f"no free port from {FIRST_PORT} to {FIRST_PORT + PORTS_TRIED - 1} on {host}: pick one with --port N"
    )


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


def plan_install(
    platform: Platform,
    *,
    name: str | None,
    config: Path | None,
    kb: Path | Sequence[str] | None,
    index: Path | None,
    port: int | None,
    host: str,
    store: str | None = None,
    env: Mapping[str, str] | None = None,
    probe: Callable[[str, int], bool] = port_is_free,
) -> Plan:
    """The flags of an instance's `groove serve`, refused when another installed instance has its notes
    folder, its index or its port.

    The default instance (`name` None) keeps the flags it always had (`--kb`, `--index` as given; `--bind`
    only with `port`). A named one gets all three, absolute: its folder (`kb`, else the config's kb_path),
    its index (`index`, else the config's index_path, else the folder's default index), its port (`port`,
    else the one it had, else a free one from FIRST_PORT) on `host`. `store` (`--store URL`) goes into the
    flags as given; a shared store, given or in the config file, stands for the index."""
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
        raise ServiceError(
            f"--name {name}: a named instance needs its notes folder: pass --kb PATH "
            "(or --config FILE with kb_path in it)"
        )
    index_path = (
        index if index is not None else (Path(file["index_path"]).expanduser() if file.get("index_path") else None)
    )
    section = file.get("store")
    shared_store = store or (section.get("url") if isinstance(section, dict) else None) or None
    index_abs = (
        address(shared_store, Path()).anchor  # a shared store's local name: one service of it per machine
        if shared_store
        else Path(os.path.abspath(index_path.expanduser()))
        if index_path is not None
        else default_index_path(notes)
        if notes is not None
        else None
    )
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
        raise ServiceError(
            f"port {effective} is already the port of the groove service instance '{other.name}' "
            f"({other.unit}); pick another with --port N, or leave --port out to have a free one chosen"
        )
    if port is not None and not chosen and not (me is not None and me.port == port) and not probe(host, port):
        raise ServiceError(
            f"port {port} on {host} is in use by another program; pick another with --port N, "
            "or leave --port out to have a free one chosen"
        )
    flags: list[str] = []
    if (name is not None or kb is not None) and notes is not None:
        for flag in notes.kb_flags():
            flags += ["--kb", flag]
    if store is not None:
        flags += ["--store", store]  # a shared store: no SQLite file (better in the config file, with ~/.pgpass)
    elif (name is not None or index is not None) and not shared_store:
        flags += ["--index", str(index_abs)]
    bind = join_bind(host, port) if port is not None else file_bind
    if port is not None:
        flags += ["--bind", bind]
    return Plan(
        name=name,
        config=config,
        flags=flags,
        folder=notes.describe() if notes is not None else None,
        index=index_abs,
        bind=bind,
        port=effective,
        port_chosen=chosen,
    )


def _name_flag(name: str) -> str:
    return "" if name == DEFAULT_INSTANCE else f" --name {name}"
