"""`groove service`: rendering the unit and plist, installing them as real files
under a temporary home, the service manager fault-injected through the runner,
and sd_notify over a real datagram socket."""

from __future__ import annotations

import os
import plistlib
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, write
from groove import service
from groove.cli import main
from groove.serve.sdnotify import notify

NO_BUS = "Failed to connect to bus: No medium found"


class FakeManager:
    """Stands in for systemctl/launchctl: records every command, answers as told.

    `answers` maps a subcommand (`daemon-reload`, `is-active`, `bootstrap`, ...)
    to (exit status, stdout, stderr); anything else succeeds silently."""

    def __init__(self, **answers: tuple[int, str, str]):
        self.answers = {k.replace("_", "-"): v for k, v in answers.items()}
        self.calls: list[list[str]] = []

    def __call__(self, argv):
        argv = list(argv)
        self.calls.append(argv)
        sub = argv[2] if argv[:2] == ["systemctl", "--user"] else argv[1]
        rc, out, err = self.answers.get(sub, (0, "", ""))
        return subprocess.CompletedProcess(argv, rc, out, err)


def no_session(argv):
    """systemctl --user where no user manager is reachable (as in this container)."""
    return subprocess.CompletedProcess(list(argv), 1, "", NO_BUS + "\n")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


@pytest.fixture
def config(tmp_path: Path, kb: Path) -> Path:
    return write(tmp_path / "conf" / "groove.toml", f'kb_path = "{kb}"\n')


GROOVE = ["/opt/groove/bin/groove"]


# --- rendering -----------------------------------------------------------------------------

def test_the_systemd_unit_runs_this_groove_over_http_with_the_absolute_config(config: Path, env):
    r = service.render("linux", config, command=GROOVE, env=env)
    assert r.path == Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user" / "groove.service"
    lines = r.text.splitlines()
    assert f"ExecStart=/opt/groove/bin/groove serve --transport http --config {config}" in lines
    for line in ("Type=notify", "Restart=on-failure", "RestartSec=5", "Environment=HF_HUB_OFFLINE=1",
                 "KillSignal=SIGTERM", "TimeoutStopSec=10", "NoNewPrivileges=yes", "PrivateTmp=yes",
                 "WantedBy=default.target"):
        assert line in lines
    assert "ProtectHome" not in r.text.replace("No ProtectHome=", "")  # the notes live under home
    assert "@GROOVE" not in "\n".join(l for l in lines if not l.startswith("#"))


def test_the_launchd_plist_parses_back_to_the_same_program_and_log_paths(config: Path, env, home: Path):
    r = service.render("macos", config, command=GROOVE, env=env)
    assert r.path == home / "Library" / "LaunchAgents" / "com.groove.agent.plist"
    agent = plistlib.loads(r.text.encode())
    assert agent["Label"] == "com.groove.agent"
    assert agent["ProgramArguments"] == [*GROOVE, "serve", "--transport", "http", "--config", str(config)]
    assert agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["EnvironmentVariables"] == {"HF_HUB_OFFLINE": "1"}
    logs = home / "Library" / "Logs" / "groove"
    assert Path(agent["StandardOutPath"]).parent == logs
    assert Path(agent["StandardErrorPath"]).parent == logs


def test_xml_characters_in_paths_survive_the_plist():
    odd = "/Users/a&b/<notes> \"q\"/groove.toml"
    agent = plistlib.loads(service.render_launchd_plist(["/x/groove"], odd, "/Users/a&b/Library/Logs/groove").encode())
    assert agent["ProgramArguments"][-1] == odd


@pytest.mark.parametrize("arg, rendered", [
    ("/usr/bin/groove", "/usr/bin/groove"),
    ("/home/me/my notes/groove.toml", '"/home/me/my notes/groove.toml"'),
    ("/home/me/100%/g.toml", "/home/me/100%%/g.toml"),
    ("/home/$USER/g.toml", "/home/$$USER/g.toml"),
    ('/a "b"\\c', '"/a \\"b\\"\\\\c"'),
])
def test_exec_start_arguments_are_escaped_for_systemd(arg: str, rendered: str):
    assert service.systemd_quote(arg) == rendered


def test_a_dollar_in_the_program_path_stays_single_because_systemd_does_not_expand_it_there():
    assert service.systemd_quote("/home/$me/groove", program=True) == "/home/$me/groove"
    assert service.render_systemd_unit(["/h/$me/groove"], "/h/$me/g.toml").count("ExecStart=/h/$me/groove serve --transport http --config /h/$$me/g.toml") == 1


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemds_own_parser_finds_an_executable_at_a_path_with_spaces_percent_and_dollar(tmp_path: Path, config: Path):
    folder = tmp_path / "my venv" / "100% $HOME"
    exe = write(folder / "groove", "#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    good = service.render_systemd_unit([str(exe)], str(config))
    (tmp_path / "good").mkdir()
    write(tmp_path / "good" / "groove.service", good)
    ok = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "good" / "groove.service")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    # The control: the same path unescaped is split at the space and not found.
    bad = good.replace(service.systemd_quote(str(exe), program=True), str(exe))
    assert bad != good
    (tmp_path / "bad").mkdir()
    write(tmp_path / "bad" / "groove.service", bad)
    ko = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "bad" / "groove.service")],
                        capture_output=True, text=True)
    assert ko.returncode != 0


@pytest.mark.parametrize("platform", service.PLATFORMS)
def test_a_path_with_a_newline_is_refused_rather_than_written(platform, tmp_path: Path, env):
    with pytest.raises(service.ServiceError, match="control characters"):
        service.render(platform, tmp_path / "a\nb.toml", command=GROOVE, env=env)


def test_the_repository_copies_are_the_renderings_with_placeholders():
    for rel, text in service.example_files().items():
        assert (ROOT / rel).read_text(encoding="utf-8") == text, f"{rel} drifted: run `python -m groove.service`"
    unit = (ROOT / "systemd" / "groove.service").read_text()
    assert "ExecStart=@GROOVE_BIN@ serve --transport http --config @GROOVE_CONFIG@" in unit
    agent = plistlib.loads((ROOT / "launchd" / "com.groove.agent.plist").read_bytes())
    assert agent["ProgramArguments"][0] == "@GROOVE_BIN@"
    assert agent["StandardErrorPath"].startswith("@GROOVE_LOG_DIR@/")


# --- which groove, where -------------------------------------------------------------------

def _executable(path: Path) -> Path:
    write(path, "#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_running_groove_script_is_the_command(tmp_path: Path):
    script = _executable(tmp_path / "pipx" / "bin" / "groove")
    assert service.groove_command(str(script), "/usr/bin/python3") == [str(script)]


def test_otherwise_the_groove_beside_this_python_is_the_command(tmp_path: Path):
    script = _executable(tmp_path / "venv" / "bin" / "groove")
    python = tmp_path / "venv" / "bin" / "python"
    assert service.groove_command("/usr/lib/pytest", str(python)) == [str(script)]


def test_without_a_groove_script_python_dash_m_runs_groove_for_real(tmp_path: Path):
    command = service.groove_command("/usr/lib/pytest", str(tmp_path / "python"))
    assert command == [str(tmp_path / "python"), "-m", "groove.cli"]
    # The same form with the real interpreter does start groove.
    real = [sys.executable, "-m", "groove.cli", "--version"]
    out = subprocess.run(real, capture_output=True, text=True, check=True).stdout
    assert out.startswith("groove ")


def test_the_unit_goes_under_xdg_config_home_else_home_dot_config(home: Path):
    assert service.unit_path("linux", {"HOME": str(home), "XDG_CONFIG_HOME": "/x/cfg"}) == Path("/x/cfg/systemd/user/groove.service")
    assert service.unit_path("linux", {"HOME": str(home)}) == home / ".config/systemd/user/groove.service"
    assert service.unit_path("linux", {"HOME": str(home), "XDG_CONFIG_HOME": "relative"}) == home / ".config/systemd/user/groove.service"


def test_platforms_other_than_linux_and_macos_are_refused_with_a_way_out():
    assert service.detect_platform("linux") == "linux"
    assert service.detect_platform("darwin") == "macos"
    with pytest.raises(service.ServiceError, match="groove serve --transport http"):
        service.detect_platform("win32")


# --- config ----------------------------------------------------------------------------------

def test_without_a_config_file_install_refuses_and_says_how_to_make_one(tmp_path: Path):
    suggested = tmp_path / "cfg" / "groove" / "groove.toml"
    with pytest.raises(service.ServiceError) as err:
        service.check_config(None, suggested)
    assert "groove.toml.example" in str(err.value)
    assert f"cp groove.toml.example {suggested}" in str(err.value)


def test_a_config_without_kb_path_is_refused(tmp_path: Path):
    cfg = write(tmp_path / "groove.toml", "[search]\ndefault_limit = 5\n")
    with pytest.raises(service.ServiceError, match="does not set kb_path"):
        service.check_config(cfg, tmp_path / "x")


def test_a_config_whose_notes_folder_is_missing_is_refused(tmp_path: Path):
    cfg = write(tmp_path / "groove.toml", 'kb_path = "gone"\n')
    with pytest.raises(service.ServiceError, match="does not exist"):
        service.check_config(cfg, tmp_path / "x")


def test_a_relative_kb_path_counts_from_the_config_file(tmp_path: Path):
    (tmp_path / "notes").mkdir()
    cfg = write(tmp_path / "groove.toml", 'kb_path = "notes"\n')
    assert service.check_config(cfg, tmp_path / "x") == cfg


# --- install ---------------------------------------------------------------------------------

def test_install_writes_the_unit_and_enables_it_now(config: Path, env):
    mgr = FakeManager()
    report = service.install("linux", config=config, command=GROOVE, env=env, runner=mgr)
    path = service.unit_path("linux", env)
    assert report.exit_code == 0, report.err
    assert path.read_text() == service.render_systemd_unit(GROOVE, str(config))
    assert mgr.calls == [["systemctl", "--user", "daemon-reload"],
                         ["systemctl", "--user", "enable", "--now", "groove.service"]]
    assert f"wrote {path}" in report.out


def test_reinstalling_a_changed_unit_restarts_a_running_groove_and_an_unchanged_one_does_not(config: Path, env):
    service.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    same = FakeManager()
    service.install("linux", config=config, command=GROOVE, env=env, runner=same)
    assert ["systemctl", "--user", "try-restart", "groove.service"] not in same.calls
    moved = FakeManager()
    service.install("linux", config=config, command=["/new/venv/bin/groove"], env=env, runner=moved)
    assert moved.calls[-1] == ["systemctl", "--user", "try-restart", "groove.service"]
    assert "/new/venv/bin/groove serve" in service.unit_path("linux", env).read_text()


def test_no_start_enables_without_starting(config: Path, env):
    mgr = FakeManager()
    report = service.install("linux", config=config, command=GROOVE, env=env, runner=mgr, start=False)
    assert mgr.calls[-1] == ["systemctl", "--user", "enable", "groove.service"]
    assert "next login" in report.out[-1]


def test_without_a_systemd_user_session_the_unit_is_still_written_and_the_way_to_start_it_is_said(config: Path, env):
    report = service.install("linux", config=config, command=GROOVE, env=env, runner=no_session)
    path = service.unit_path("linux", env)
    assert path.is_file()
    assert report.exit_code == 1
    [message] = report.err
    assert message.startswith("systemd user session not available")
    assert f"unit written to {path}" in message
    assert "systemctl --user enable --now groove" in message
    assert NO_BUS in message


def test_a_start_that_fails_points_at_the_journal(config: Path, env):
    mgr = FakeManager(enable=(1, "", "Job for groove.service failed because a timeout was exceeded.\n"))
    report = service.install("linux", config=config, command=GROOVE, env=env, runner=mgr)
    assert report.exit_code == 1
    assert "timeout was exceeded" in report.err[0] and "journalctl --user -u groove" in report.err[0]


def test_dry_run_prints_the_unit_and_its_destination_and_touches_nothing(config: Path, env):
    mgr = FakeManager()
    report = service.install("linux", True, config=config, command=GROOVE, env=env, runner=mgr)
    path = service.unit_path("linux", env)
    assert report.out[0] == f"would write {path}:"
    assert service.render_systemd_unit(GROOVE, str(config)).rstrip("\n") in report.out
    assert not path.exists() and mgr.calls == []


def test_install_on_macos_writes_the_plist_makes_the_log_folder_and_bootstraps_it(config: Path, env, home: Path):
    mgr = FakeManager(bootout=(3, "", "Boot-out failed: 3: No such process\n"))
    report = service.install("macos", config=config, command=GROOVE, env=env, runner=mgr)
    path = home / "Library" / "LaunchAgents" / "com.groove.agent.plist"
    assert report.exit_code == 0, report.err
    assert plistlib.loads(path.read_bytes())["Label"] == "com.groove.agent"
    assert (home / "Library" / "Logs" / "groove").is_dir()
    domain = f"gui/{os.getuid()}"
    assert mgr.calls == [["launchctl", "bootout", f"{domain}/com.groove.agent"],
                         ["launchctl", "enable", f"{domain}/com.groove.agent"],
                         ["launchctl", "bootstrap", domain, str(path)]]


def test_without_launchctl_the_plist_is_written_and_the_load_command_is_said(config: Path, env, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # the real runner finds no launchctl
    report = service.install("macos", config=config, command=GROOVE, env=env)
    assert service.unit_path("macos", env).is_file()
    assert report.exit_code == 1
    assert report.err[0].startswith("launchd not available (launchctl: command not found)")
    assert "launchctl bootstrap gui/" in report.err[0]


# --- uninstall / status ------------------------------------------------------------------------

def test_uninstall_stops_disables_and_removes_the_unit(config: Path, env):
    service.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    mgr = FakeManager()
    report = service.uninstall("linux", env=env, runner=mgr)
    assert report.exit_code == 0
    assert not service.unit_path("linux", env).exists()
    assert ["systemctl", "--user", "disable", "--now", "groove.service"] in mgr.calls
    assert mgr.calls.index(["systemctl", "--user", "disable", "--now", "groove.service"]) < len(mgr.calls) - 1


def test_uninstall_without_a_session_still_removes_the_file_and_says_so(config: Path, env):
    service.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    report = service.uninstall("linux", env=env, runner=no_session)
    assert not service.unit_path("linux", env).exists()
    assert report.exit_code == 1 and report.err[0].startswith("systemd user session not available")


def test_uninstall_when_nothing_is_installed_changes_nothing(env):
    mgr = FakeManager()
    report = service.uninstall("linux", env=env, runner=mgr)
    assert report.exit_code == 0 and "not installed" in report.out[0] and mgr.calls == []


def test_uninstall_on_macos_boots_out_and_removes_the_plist(config: Path, env):
    service.install("macos", config=config, command=GROOVE, env=env, runner=FakeManager())
    mgr = FakeManager()
    service.uninstall("macos", env=env, runner=mgr)
    assert mgr.calls == [["launchctl", "bootout", f"gui/{os.getuid()}/com.groove.agent"]]
    assert not service.unit_path("macos", env).exists()


@pytest.mark.parametrize("answer, state, code", [
    ((0, "active\n", ""), "active", 0),
    ((3, "inactive\n", ""), "inactive", 3),
    ((3, "failed\n", ""), "failed", 3),
    ((1, "", NO_BUS), "unknown", 4),
])
def test_status_reports_the_file_and_what_systemctl_is_active_says(config: Path, env, answer, state, code):
    service.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    mgr = FakeManager(is_active=answer)
    report = service.status("linux", env=env, runner=mgr)
    assert mgr.calls == [["systemctl", "--user", "is-active", "groove.service"]]
    assert report.exit_code == code
    assert report.data["installed"] is True and report.data["state"] == state
    assert report.data["path"] == str(service.unit_path("linux", env))
    if code == 4:
        assert "systemd user session not available" in report.data["detail"]


LAUNCHCTL_PRINT = """\
gui/501/com.groove.agent = {
\tactive count = 1
\tpath = /Users/me/Library/LaunchAgents/com.groove.agent.plist
\tstate = running

\tprogram = /Users/me/venv/bin/groove
\tpid = 4242
\tlast exit code = (never exited)
\tendpoints = {
\t\tstate = active
\t}
}
"""


def test_status_on_macos_reads_state_and_pid_from_launchctl_print(env):
    report = service.status("macos", env=env, runner=FakeManager(print=(0, LAUNCHCTL_PRINT, "")))
    assert report.exit_code == 0
    assert report.data["state"] == "running" and "pid 4242" in report.data["detail"]
    assert report.data["installed"] is False and "file is gone" in report.data["detail"]
    not_loaded = service.status("macos", env=env, runner=FakeManager(print=(113, "", "Could not find service")))
    assert not_loaded.exit_code == 3 and not_loaded.data["state"] == "not loaded"


# --- the command line, end to end ---------------------------------------------------------------

@pytest.fixture
def fake_systemctl(tmp_path: Path, monkeypatch) -> Path:
    """A `systemctl` first on PATH that logs its arguments and cannot reach a bus."""
    bin_dir = tmp_path / "bin"
    log = tmp_path / "systemctl.log"
    script = write(bin_dir / "systemctl", f'#!/bin/sh\necho "$@" >> "{log}"\necho "{NO_BUS}" >&2\nexit 1\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_cli_install_in_a_container_writes_the_unit_and_explains(config, home, monkeypatch, capsys, fake_systemctl):
    monkeypatch.setenv("HOME", str(home))
    code = main(["service", "install", "--platform", "linux", "--config", str(config)])
    out, err = capsys.readouterr()
    unit = Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "groove.service"
    assert code == 1
    assert f"wrote {unit}" in out
    assert f"groove: warning: systemd user session not available ({NO_BUS}): unit written to {unit}" in err
    assert f"--config {config}" in unit.read_text()
    assert fake_systemctl.read_text().splitlines() == ["--user daemon-reload"]


def test_cli_dry_run_prints_to_stdout_and_runs_nothing(config, home, monkeypatch, capsys, fake_systemctl):
    monkeypatch.setenv("HOME", str(home))
    assert main(["service", "install", "--dry-run", "--platform", "macos", "--config", str(config)]) == 0
    out, _ = capsys.readouterr()
    plist = home / "Library" / "LaunchAgents" / "com.groove.agent.plist"
    assert out.startswith(f"would write {plist}:\n")
    assert f"<string>{config}</string>" in out
    assert not plist.exists() and not fake_systemctl.exists()


def test_cli_install_without_any_config_refuses_and_writes_nothing(home, monkeypatch, capsys, fake_systemctl):
    monkeypatch.setenv("HOME", str(home))
    assert main(["service", "install", "--platform", "linux"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("groove: error: no config file found") and "groove.toml.example" in err
    assert not (Path(os.environ["XDG_CONFIG_HOME"]) / "systemd").exists()


def test_cli_install_with_a_kb_flag_puts_it_in_the_unit_beside_the_config(config, kb, home, monkeypatch, capsys, fake_systemctl):
    monkeypatch.setenv("HOME", str(home))
    assert main(["service", "install", "--dry-run", "--platform", "linux", "--config", str(config), "--kb", str(kb)]) == 0
    [exec_start] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("ExecStart=")]
    assert exec_start.endswith(f"serve --transport http --config {config} --kb {kb}")
    assert not fake_systemctl.exists()


def test_cli_status_as_json(config, home, monkeypatch, capsys, fake_systemctl):
    monkeypatch.setenv("HOME", str(home))
    assert main(["service", "status", "--platform", "linux", "--format", "json"]) == 4
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["installed"] is False and data["state"] == "unknown"


# --- sd_notify -------------------------------------------------------------------------------

@pytest.fixture
def short_dir():
    # AF_UNIX paths are limited to ~108 bytes; pytest's tmp_path can be longer.
    d = tempfile.mkdtemp(prefix="gsd", dir="/tmp" if os.path.isdir("/tmp") else None)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_notify_sends_the_state_to_the_socket_systemd_names(short_dir: Path, monkeypatch):
    path = str(short_dir / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(path)
        server.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        assert notify("READY=1") is True
        assert notify("STATUS=indexing 3/10\nSTOPPING=1") is True
        assert server.recv(4096) == b"READY=1"
        assert server.recv(4096) == b"STATUS=indexing 3/10\nSTOPPING=1"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets are Linux only")
def test_notify_reaches_an_abstract_namespace_socket_named_with_an_at_sign():
    name = f"groove-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(5)
        assert notify("READY=1", env={"NOTIFY_SOCKET": "@" + name}) is True
        assert server.recv(4096) == b"READY=1"


def test_notify_without_a_manager_does_nothing(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify("READY=1") is False
    assert notify("READY=1", env={"NOTIFY_SOCKET": "vsock:2:1234"}) is False


def test_notify_to_a_vanished_socket_returns_false_instead_of_raising(short_dir: Path):
    assert notify("READY=1", env={"NOTIFY_SOCKET": str(short_dir / "gone")}) is False
