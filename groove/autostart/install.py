"""install, uninstall, status and list: the unit files written and removed, the service manager asked."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groove.autostart.instances import DEFAULT_INSTANCE, installed_instances, read_instance
from groove.autostart.platforms import (
    STATUS_NOT_RUNNING,
    STATUS_RUNNING,
    STATUS_UNKNOWN,
    Platform,
    Runner,
    ServiceError,
    _first_line,
    _shell,
    check_name,
    launchd_label,
    log_dir,
    read_unit,
    run_command,
    short_name,
    task_name,
    unit_name,
    unit_path,
)
from groove.autostart.render import log_files, render, task_bytes

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


def _write_atomic(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text if isinstance(text, bytes) else text.encode("utf-8"))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _systemctl(*args: str) -> list[str]:
    return ["systemctl", "--user", *args]


def _launchd_domain() -> str:
    return f"gui/{os.getuid()}"


def _schtasks_create(path: Path, name: str | None) -> list[str]:
    """Register (or replace: /F) the task from its file."""
    return ["schtasks", "/Create", "/TN", task_name(name), "/XML", str(path), "/F"]


def _start_hint(platform: Platform, path: Path, name: str | None = None) -> str:
    if platform == "windows":
        run = ["schtasks", "/Run", "/TN", task_name(name)]
        return f"{subprocess.list2cmdline(_schtasks_create(path, name))} && {subprocess.list2cmdline(run)}"
    if platform == "macos":
        return _shell(["launchctl", "bootstrap", _launchd_domain(), str(path)])
    return f"systemctl --user daemon-reload && systemctl --user enable --now {short_name(name)}"


def _status_command(name: str | None) -> str:
    return "groove service status" + ("" if name is None else f" --name {name}")


def install(
    platform: Platform,
    dry_run: bool = False,
    *,
    config: Path | None,
    command: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    runner: Runner = run_command,
    start: bool = True,
    flags: Sequence[str] = (),
    name: str | None = None,
) -> Report:
    """Write the unit (or plist) for `config` and `flags` (`--kb`, `--index`, `--bind`) and, unless `start` is
    False, start it now. `name`: a named instance (`plan_install` gives its flags), None: the default one."""
    check_name(name)
    rendered = render(platform, config, command=command, env=env, flags=flags, name=name)
    path, text = rendered.path, rendered.text
    report = Report(data={"platform": platform, "path": str(path)})
    if name is not None:
        report.data["name"] = name
    if dry_run:
        report.out += [
            f"would write {path}:",
            "",
            text.rstrip("\n"),
            "",
            f"then run: {_start_hint(platform, path, name)}",
        ]
        return report

    previous = read_unit(platform, path) if path.is_file() else None
    if platform in ("macos", "windows"):
        log_dir(env, platform).mkdir(parents=True, exist_ok=True)
    _write_atomic(path, task_bytes(text) if platform == "windows" else text)
    report.out.append(f"wrote {path}")
    if platform == "windows":
        return _install_task(path, report, runner, start, env, name)
    if platform == "macos":
        return _install_launchd(path, report, runner, start, env, name)
    return _install_systemd(path, report, runner, start, changed=previous is not None and previous != text, name=name)


def _install_systemd(
    path: Path, report: Report, runner: Runner, start: bool, changed: bool, name: str | None = None
) -> Report:
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
        report.out.append(
            f"enabled: groove starts at your next login; start it now with `systemctl --user start {short}`"
        )
        return report
    if changed:
        # enable --now leaves an already running groove on the old unit.
        r = runner(_systemctl("try-restart", unit))
        if r.returncode != 0:
            return report.fail(f"the unit changed but `systemctl --user restart {short}` failed: {_first_line(r)}")
    report.out.append(
        f"enabled and started; `{_status_command(name)}` checks it, `journalctl --user -u {short} -f` follows its log"
    )
    return report


def _install_launchd(
    path: Path, report: Report, runner: Runner, start: bool, env: Mapping[str, str] | None, name: str | None = None
) -> Report:
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


def _install_task(
    path: Path, report: Report, runner: Runner, start: bool, env: Mapping[str, str] | None, name: str | None = None
) -> Report:
    """Windows: register the task from its file (`schtasks /Create /XML`, replacing an older one) and run it now."""
    task = task_name(name)
    r = runner(_schtasks_create(path, name))
    if r.returncode == 127:
        return report.fail(
            f"Task Scheduler not available ({_first_line(r)}): task file written to {path}; "
            f"register it on the Windows machine with `{_start_hint('windows', path, name)}`"
        )
    if r.returncode != 0:
        return report.fail(
            f"task file written to {path}, but `schtasks /Create` failed: {_first_line(r)}; where schtasks wants "
            "an administrator for a task at the root folder, register it as yourself from PowerShell with "
            f"`Register-ScheduledTask -TaskName {task} -Xml (Get-Content -Raw '{path}')`"
        )
    if not start:
        report.out.append(f"registered: groove starts at your next login; start it now with `schtasks /Run /TN {task}`")
        return report
    runner(["schtasks", "/End", "/TN", task])  # a groove that runs the old task stops; fails when none runs
    r = runner(["schtasks", "/Run", "/TN", task])
    if r.returncode != 0:
        return report.fail(
            f"task {task} registered, but `schtasks /Run` failed: {_first_line(r)}; "
            f"groove's own messages are in {log_files_windows(env, name)[1]}"
        )
    report.out.append(
        f"registered and started; `{_status_command(name)}` checks it, logs are in {log_dir(env, 'windows')}"
    )
    return report


def log_files_windows(env: Mapping[str, str] | None, name: str | None = None) -> tuple[str, str]:
    """Windows: the launcher's stdout and stderr files of an instance."""
    logs = log_dir(env, "windows")
    return str(logs / f"{short_name(name)}.out.log"), str(logs / f"{short_name(name)}.err.log")


def _not_installed(platform: Platform, env: Mapping[str, str] | None, name: str) -> ServiceError:
    """A named instance that is not installed: an error naming the ones that are (a typo must not pass)."""
    names = [i.name for i in installed_instances(platform, env)]
    return ServiceError(
        f"no groove service instance named '{name}' is installed ("
        + (f"installed: {', '.join(names)}; `groove service list` shows them)" if names else "none is installed)")
    )


def uninstall(
    platform: Platform,
    *,
    env: Mapping[str, str] | None = None,
    runner: Runner = run_command,
    name: str | None = None,
    purge: bool = False,
) -> Report:
    """Stop and disable the service, then remove its file; with `purge`, its index too. Logs are left in place."""
    check_name(name)
    path = unit_path(platform, env, name)
    report = Report(data={"platform": platform, "path": str(path)})
    if not path.is_file():
        if name is not None:
            raise _not_installed(platform, env, name)
        report.out.append(f"not installed: {path} does not exist")
        return report
    instance = read_instance(platform, path, name or DEFAULT_INSTANCE) if purge else None
    index = instance.index if instance is not None else None
    store = instance.store if instance is not None else None
    label, short, unit = launchd_label(name), short_name(name), unit_name(name)
    if platform == "windows":
        task = task_name(name)
        runner(["schtasks", "/End", "/TN", task])  # stop a running groove; fails harmlessly when none runs
        r = runner(["schtasks", "/Delete", "/TN", task, "/F"])
        path.unlink()
        report.out.append(f"removed {path}")
        if r.returncode == 127:
            report.fail(
                f"Task Scheduler not available ({_first_line(r)}); on the Windows machine remove the task with "
                f"`schtasks /Delete /TN {task} /F`"
            )
        elif r.returncode != 0:
            report.fail(
                f"`schtasks /Delete /TN {task} /F` failed: {_first_line(r)}; `schtasks /Query /TN {task}` shows it"
            )
        else:
            report.out.append(f"ended and unregistered the task {task}")
        return _purge(index, report, store) if purge else report
    if platform == "macos":
        r = runner(["launchctl", "bootout", f"{_launchd_domain()}/{label}"])
        path.unlink()
        report.out.append(f"removed {path}")
        if r.returncode == 127:
            report.fail(
                f"launchd not available ({_first_line(r)}); if groove is still running, "
                f"stop it with `launchctl bootout {_launchd_domain()}/{label}`"
            )
        return _purge(index, report, store) if purge else report
    r = runner(_systemctl("daemon-reload"))  # also tells whether the user manager answers
    if r.returncode != 0:
        path.unlink()
        report.out.append(f"removed {path}")
        report.fail(
            f"systemd user session not available ({_first_line(r)}): the unit file is removed; "
            "if groove is still running in your login session, stop it there with "
            f"`systemctl --user disable --now {short} && systemctl --user daemon-reload`"
        )
        return _purge(index, report, store) if purge else report
    r = runner(_systemctl("disable", "--now", unit))
    path.unlink()
    report.out.append(f"removed {path}")
    runner(_systemctl("daemon-reload"))
    runner(_systemctl("reset-failed", unit))  # forget a failed state; fails harmlessly otherwise
    if r.returncode != 0:
        report.fail(
            f"`systemctl --user disable --now {short}` failed: {_first_line(r)}; "
            f"check `systemctl --user status {short}`"
        )
    else:
        report.out.append("stopped and disabled")
    return _purge(index, report, store) if purge else report


INDEX_COMPANIONS = ("-wal", "-shm", ".eval.jsonl", ".lock")  # SQLite's WAL files, eval history, the writer lock


def _purge(index: str | None, report: Report, store: str | None = None) -> Report:
    """Delete the index of an uninstalled instance and its companion files (never the notes). Refused when
    the file is not a groove index, or when a process still writes it (its writer lock is held). A shared
    store (PostgreSQL) is never dropped, nor anything in it: other machines may index into it and search it."""
    from groove.store.sqlite import connection, schema, writer_lock  # lazy: SQLite and the store only for --purge

    if store is not None:
        from groove.store.address import redact

        shown = redact(store)
        report.data["store"] = shown
        report.out.append(
            f"kept the shared store {shown}: --purge never drops a database other machines may index into and "
            "search; when none uses it, drop it yourself (dropdb), or clear it with "
            "`groove index --rebuild --store URL`"
        )
        return report

    if index is None:
        return report.fail(
            "--purge: cannot tell which index the instance used (its config file is gone?); nothing deleted"
        )
    path = Path(index)
    report.data["index"] = str(path)
    if not path.exists():
        report.out.append(f"no index to delete: {path} does not exist")
        return report
    lock = writer_lock.WriterLock(path)
    try:
        lock.acquire()  # a groove that still writes the index (the service did not stop) keeps it
    except connection.IndexError_ as exc:
        return report.fail(f"--purge: the index {path} was kept: {exc}")
    companions = [Path(str(path) + suffix) for suffix in INDEX_COMPANIONS]
    present = [c.name for c in companions if c.exists()]
    try:
        schema.remove_index_files(path)  # the index and its WAL files; refused for a file that is not a groove index
        for companion in companions[2:-1]:
            companion.unlink(missing_ok=True)
    except connection.IndexError_ as exc:
        return report.fail(f"--purge: {str(exc).replace('--rebuild', '--purge')}")
    finally:
        lock.release()
    companions[-1].unlink(missing_ok=True)
    report.out.append(f"deleted the index {path}" + (f" and {', '.join(present)}" if present else ""))
    return report


TASK_RUNNING = ("Running", "実行中")  # schtasks /Query's Status column, English and Japanese Windows

_LAUNCHCTL_FIELD = re.compile(r"^\s*(state|pid|last exit code) = (.+?)\s*$", re.MULTILINE)


def _state(platform: Platform, name: str | None, runner: Runner) -> tuple[str, str, int]:
    """(state, detail, exit code) of an instance as the service manager tells it."""
    if platform == "windows":
        r = runner(["schtasks", "/Query", "/TN", task_name(name), "/FO", "CSV", "/NH"])
        if r.returncode == 127:
            return "unknown", f"Task Scheduler not available: {_first_line(r)}", STATUS_UNKNOWN
        if r.returncode != 0:
            return "not registered", "", STATUS_NOT_RUNNING
        rows = [row for row in csv.reader(r.stdout.splitlines()) if row]
        state = rows[0][-1].strip() if rows and len(rows[0]) >= 3 else "registered"
        return state, "", STATUS_RUNNING if state in TASK_RUNNING else STATUS_NOT_RUNNING
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


UNIT_LABEL = {"linux": "unit file", "macos": "plist", "windows": "task file"}


def status(
    platform: Platform, *, env: Mapping[str, str] | None = None, runner: Runner = run_command, name: str | None = None
) -> Report:
    """Whether the file is installed and what the service manager says.
    Exit code: 0 running, 3 not running (or not installed), 4 unknown."""
    check_name(name)
    path = unit_path(platform, env, name)
    installed = path.is_file()
    data: dict[str, Any] = {
        "platform": platform,
        "path": str(path),
        "installed": installed,
        "state": "unknown",
        "detail": "",
    }
    if name is not None:
        data["name"] = name
    data["state"], data["detail"], code = _state(platform, name, runner)
    if not installed and code == STATUS_RUNNING:
        data["detail"] = ", ".join(filter(None, [data["detail"], "but its file is gone: reinstall, or stop it"]))
    report = Report(exit_code=code, data=data)
    report.out += [
        f"{UNIT_LABEL[platform]}: {path} ({'installed' if installed else 'not installed'})",
        f"state:     {data['state']}" + (f" ({data['detail']})" if data["detail"] else ""),
    ]
    if installed and name is not None:
        inst = read_instance(platform, path, name)
        data.update(folder=inst.folder, index=inst.index, bind=inst.bind, port=inst.port)
        report.out += [f"notes:     {inst.folder}", f"index:     {inst.index}", f"listens:   {inst.bind}"]
    return report


def list_instances(platform: Platform, *, env: Mapping[str, str] | None = None, runner: Runner = run_command) -> Report:
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
        report.out.append(
            "no groove service is installed (`groove service install [--name NAME] --kb PATH` installs one)"
        )
        return report
    rows = [("NAME", "FOLDER", "PORT", "STATE")]
    rows += [(i.name, i.folder or "?", str(i.port) if i.port is not None else "?", i.state) for i in instances]
    widths = [max(len(row[c]) for row in rows) for c in range(3)]
    report.out += [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3] for row in rows
    ]
    report.err += problems + ([f"{unreachable}: the states are unknown"] if unreachable else [])
    return report
