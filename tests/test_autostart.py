"""`groove service` (groove/autostart/): rendering the unit and plist, installing them as real files
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

from groove.autostart import install as installer
from groove.autostart import instances, platforms, render
from groove.cli import main
from groove.config import default_index_path
from groove.serve.process.sdnotify import notify
from tests.support.common import ROOT, write

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
    r = render.render("linux", config, command=GROOVE, env=env)
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
    r = render.render("macos", config, command=GROOVE, env=env)
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
    agent = plistlib.loads(render.render_launchd_plist(["/x/groove"], odd, "/Users/a&b/Library/Logs/groove").encode())
    assert agent["ProgramArguments"][-1] == odd


@pytest.mark.parametrize("arg, rendered", [
    ("/usr/bin/groove", "/usr/bin/groove"),
    ("/home/me/my notes/groove.toml", '"/home/me/my notes/groove.toml"'),
    ("/home/me/100%/g.toml", "/home/me/100%%/g.toml"),
    ("/home/$USER/g.toml", "/home/$$USER/g.toml"),
    ('/a "b"\\c', '"/a \\"b\\"\\\\c"'),
])
def test_exec_start_arguments_are_escaped_for_systemd(arg: str, rendered: str):
    assert render.systemd_quote(arg) == rendered


def test_a_dollar_in_the_program_path_stays_single_because_systemd_does_not_expand_it_there():
    assert render.systemd_quote("/home/$me/groove", program=True) == "/home/$me/groove"
    assert render.render_systemd_unit(["/h/$me/groove"], "/h/$me/g.toml").count("ExecStart=/h/$me/groove serve --transport http --config /h/$$me/g.toml") == 1


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemds_own_parser_finds_an_executable_at_a_path_with_spaces_percent_and_dollar(spawn, tmp_path: Path, config: Path):
    folder = tmp_path / "my venv" / "100% $HOME"
    exe = write(folder / "groove", "#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    good = render.render_systemd_unit([str(exe)], str(config))
    (tmp_path / "good").mkdir()
    write(tmp_path / "good" / "groove.service", good)
    ok = spawn.run(["systemd-analyze", "verify", str(tmp_path / "good" / "groove.service")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    # The control: the same path unescaped is split at the space and not found.
    bad = good.replace(render.systemd_quote(str(exe), program=True), str(exe))
    assert bad != good
    (tmp_path / "bad").mkdir()
    write(tmp_path / "bad" / "groove.service", bad)
    ko = spawn.run(["systemd-analyze", "verify", str(tmp_path / "bad" / "groove.service")],
                        capture_output=True, text=True)
    assert ko.returncode != 0


@pytest.mark.parametrize("platform", platforms.PLATFORMS)
def test_a_path_with_a_newline_is_refused_rather_than_written(platform, tmp_path: Path, env):
    with pytest.raises(platforms.ServiceError, match="control characters"):
        render.render(platform, tmp_path / "a\nb.toml", command=GROOVE, env=env)


def test_the_repository_copies_are_the_renderings_with_placeholders():
    for rel, text in render.example_files().items():
        assert (ROOT / rel).read_text(encoding="utf-8") == text, f"{rel} drifted: run `python -m groove.autostart.render`"
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
    assert platforms.groove_command(str(script), "/usr/bin/python3") == [str(script)]


def test_otherwise_the_groove_beside_this_python_is_the_command(tmp_path: Path):
    script = _executable(tmp_path / "venv" / "bin" / "groove")
    python = tmp_path / "venv" / "bin" / "python"
    assert platforms.groove_command("/usr/lib/pytest", str(python)) == [str(script)]


def test_without_a_groove_script_python_dash_m_runs_groove_for_real(spawn, tmp_path: Path):
    command = platforms.groove_command("/usr/lib/pytest", str(tmp_path / "python"))
    assert command == [str(tmp_path / "python"), "-m", "groove.cli"]
    # The same form with the real interpreter does start groove.
    real = [sys.executable, "-m", "groove.cli", "--version"]
    out = spawn.run(real, capture_output=True, text=True, check=True).stdout
    assert out.startswith("groove ")


def test_the_unit_goes_under_xdg_config_home_else_home_dot_config(home: Path):
    assert platforms.unit_path("linux", {"HOME": str(home), "XDG_CONFIG_HOME": "/x/cfg"}) == Path("/x/cfg/systemd/user/groove.service")
    assert platforms.unit_path("linux", {"HOME": str(home)}) == home / ".config/systemd/user/groove.service"
    assert platforms.unit_path("linux", {"HOME": str(home), "XDG_CONFIG_HOME": "relative"}) == home / ".config/systemd/user/groove.service"


def test_platforms_other_than_linux_macos_and_windows_are_refused_with_a_way_out():
    assert platforms.detect_platform("linux") == "linux"
    assert platforms.detect_platform("darwin") == "macos"
    assert platforms.detect_platform("win32") == "windows"
    with pytest.raises(platforms.ServiceError, match="groove serve --transport http"):
        platforms.detect_platform("freebsd14")


# --- config ----------------------------------------------------------------------------------

def test_without_a_config_file_install_refuses_and_says_how_to_make_one(tmp_path: Path):
    suggested = tmp_path / "cfg" / "groove" / "groove.toml"
    with pytest.raises(platforms.ServiceError) as err:
        instances.check_config(None, suggested)
    assert "groove.toml.example" in str(err.value)
    assert f"cp groove.toml.example {suggested}" in str(err.value)


def test_a_config_without_kb_path_is_refused(tmp_path: Path):
    cfg = write(tmp_path / "groove.toml", "[search]\ndefault_limit = 5\n")
    with pytest.raises(platforms.ServiceError, match="does not set kb_path"):
        instances.check_config(cfg, tmp_path / "x")


def test_a_config_whose_notes_folder_is_missing_is_refused(tmp_path: Path):
    cfg = write(tmp_path / "groove.toml", 'kb_path = "gone"\n')
    with pytest.raises(platforms.ServiceError, match="does not exist"):
        instances.check_config(cfg, tmp_path / "x")


def test_a_relative_kb_path_counts_from_the_config_file(tmp_path: Path):
    (tmp_path / "notes").mkdir()
    cfg = write(tmp_path / "groove.toml", 'kb_path = "notes"\n')
    assert instances.check_config(cfg, tmp_path / "x") == cfg


# --- install ---------------------------------------------------------------------------------

def test_install_writes_the_unit_and_enables_it_now(config: Path, env):
    mgr = FakeManager()
    report = installer.install("linux", config=config, command=GROOVE, env=env, runner=mgr)
    path = platforms.unit_path("linux", env)
    assert report.exit_code == 0, report.err
    assert path.read_text() == render.render_systemd_unit(GROOVE, str(config))
    assert mgr.calls == [["systemctl", "--user", "daemon-reload"],
                         ["systemctl", "--user", "enable", "--now", "groove.service"]]
    assert f"wrote {path}" in report.out


def test_reinstalling_a_changed_unit_restarts_a_running_groove_and_an_unchanged_one_does_not(config: Path, env):
    installer.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    same = FakeManager()
    installer.install("linux", config=config, command=GROOVE, env=env, runner=same)
    assert ["systemctl", "--user", "try-restart", "groove.service"] not in same.calls
    moved = FakeManager()
    installer.install("linux", config=config, command=["/new/venv/bin/groove"], env=env, runner=moved)
    assert moved.calls[-1] == ["systemctl", "--user", "try-restart", "groove.service"]
    assert "/new/venv/bin/groove serve" in platforms.unit_path("linux", env).read_text()


def test_no_start_enables_without_starting(config: Path, env):
    mgr = FakeManager()
    report = installer.install("linux", config=config, command=GROOVE, env=env, runner=mgr, start=False)
    assert mgr.calls[-1] == ["systemctl", "--user", "enable", "groove.service"]
    assert "next login" in report.out[-1]


def test_without_a_systemd_user_session_the_unit_is_still_written_and_the_way_to_start_it_is_said(config: Path, env):
    report = installer.install("linux", config=config, command=GROOVE, env=env, runner=no_session)
    path = platforms.unit_path("linux", env)
    assert path.is_file()
    assert report.exit_code == 1
    [message] = report.err
    assert message.startswith("systemd user session not available")
    assert f"unit written to {path}" in message
    assert "systemctl --user enable --now groove" in message
    assert NO_BUS in message


def test_a_start_that_fails_points_at_the_journal(config: Path, env):
    mgr = FakeManager(enable=(1, "", "Job for groove.service failed because a timeout was exceeded.\n"))
    report = installer.install("linux", config=config, command=GROOVE, env=env, runner=mgr)
    assert report.exit_code == 1
    assert "timeout was exceeded" in report.err[0] and "journalctl --user -u groove" in report.err[0]


def test_dry_run_prints_the_unit_and_its_destination_and_touches_nothing(config: Path, env):
    mgr = FakeManager()
    report = installer.install("linux", True, config=config, command=GROOVE, env=env, runner=mgr)
    path = platforms.unit_path("linux", env)
    assert report.out[0] == f"would write {path}:"
    assert render.render_systemd_unit(GROOVE, str(config)).rstrip("\n") in report.out
    assert not path.exists() and mgr.calls == []


def test_install_on_macos_writes_the_plist_makes_the_log_folder_and_bootstraps_it(config: Path, env, home: Path):
    mgr = FakeManager(bootout=(3, "", "Boot-out failed: 3: No such process\n"))
    report = installer.install("macos", config=config, command=GROOVE, env=env, runner=mgr)
    path = home / "Library" / "LaunchAgents" / "com.groove.agent.plist"
    assert report.exit_code == 0, report.err
    assert plistlib.loads(path.read_bytes())["Label"] == "com.groove.agent"
    assert (home / "Library" / "Logs" / "groove").is_dir()
    domain = f"gui/{os.getuid()}"
    assert mgr.calls == [["launchctl", "bootout", f"{domain}/com.groove.agent"],
                         ["launchctl", "enable", f"{domain}/com.groove.agent"],
                         ["launchctl", "bootstrap", domain, str(path)]]


def test_without_launchctl_the_plist_is_written_and_the_load_command_is_said(spawn, config: Path, env, tmp_path: Path, monkeypatch):
    # The real runner tries to start launchctl (a child process, hence `spawn`) and finds none on PATH.
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    report = installer.install("macos", config=config, command=GROOVE, env=env)
    assert platforms.unit_path("macos", env).is_file()
    assert report.exit_code == 1
    assert report.err[0].startswith("launchd not available (launchctl: command not found)")
    assert "launchctl bootstrap gui/" in report.err[0]


# --- uninstall / status ------------------------------------------------------------------------

def test_uninstall_stops_disables_and_removes_the_unit(config: Path, env):
    installer.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    mgr = FakeManager()
    report = installer.uninstall("linux", env=env, runner=mgr)
    assert report.exit_code == 0
    assert not platforms.unit_path("linux", env).exists()
    assert ["systemctl", "--user", "disable", "--now", "groove.service"] in mgr.calls
    assert mgr.calls.index(["systemctl", "--user", "disable", "--now", "groove.service"]) < len(mgr.calls) - 1


def test_uninstall_without_a_session_still_removes_the_file_and_says_so(config: Path, env):
    installer.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    report = installer.uninstall("linux", env=env, runner=no_session)
    assert not platforms.unit_path("linux", env).exists()
    assert report.exit_code == 1 and report.err[0].startswith("systemd user session not available")


def test_uninstall_when_nothing_is_installed_changes_nothing(env):
    mgr = FakeManager()
    report = installer.uninstall("linux", env=env, runner=mgr)
    assert report.exit_code == 0 and "not installed" in report.out[0] and mgr.calls == []


def test_uninstall_on_macos_boots_out_and_removes_the_plist(config: Path, env):
    installer.install("macos", config=config, command=GROOVE, env=env, runner=FakeManager())
    mgr = FakeManager()
    installer.uninstall("macos", env=env, runner=mgr)
    assert mgr.calls == [["launchctl", "bootout", f"gui/{os.getuid()}/com.groove.agent"]]
    assert not platforms.unit_path("macos", env).exists()


@pytest.mark.parametrize("answer, state, code", [
    ((0, "active\n", ""), "active", 0),
    ((3, "inactive\n", ""), "inactive", 3),
    ((3, "failed\n", ""), "failed", 3),
    ((1, "", NO_BUS), "unknown", 4),
])
def test_status_reports_the_file_and_what_systemctl_is_active_says(config: Path, env, answer, state, code):
    installer.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    mgr = FakeManager(is_active=answer)
    report = installer.status("linux", env=env, runner=mgr)
    assert mgr.calls == [["systemctl", "--user", "is-active", "groove.service"]]
    assert report.exit_code == code
    assert report.data["installed"] is True and report.data["state"] == state
    assert report.data["path"] == str(platforms.unit_path("linux", env))
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
    report = installer.status("macos", env=env, runner=FakeManager(print=(0, LAUNCHCTL_PRINT, "")))
    assert report.exit_code == 0
    assert report.data["state"] == "running" and "pid 4242" in report.data["detail"]
    assert report.data["installed"] is False and "file is gone" in report.data["detail"]
    not_loaded = installer.status("macos", env=env, runner=FakeManager(print=(113, "", "Could not find service")))
    assert not_loaded.exit_code == 3 and not_loaded.data["state"] == "not loaded"


# --- the command line, end to end ---------------------------------------------------------------

@pytest.fixture
def fake_systemctl(spawn, tmp_path: Path, monkeypatch) -> Path:
    """A `systemctl` first on PATH that logs its arguments and cannot reach a bus (a script the installer runs as
    a child process: `spawn` marks the tests that use it)."""
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


# --- named instances -------------------------------------------------------------------------

class PerUnitManager(FakeManager):
    """FakeManager whose `is-active` / `launchctl print` answer per unit (`states`: unit or label -> state)."""

    def __init__(self, states: dict[str, str], **answers):
        super().__init__(**answers)
        self.states = states

    def __call__(self, argv):
        argv = list(argv)
        if argv[:3] == ["systemctl", "--user", "is-active"]:
            self.calls.append(argv)
            state = self.states.get(argv[3], "inactive")
            return subprocess.CompletedProcess(argv, 0 if state == "active" else 3, state + "\n", "")
        if argv[:2] == ["launchctl", "print"]:
            self.calls.append(argv)
            label = argv[2].rsplit("/", 1)[1]
            if label not in self.states:
                return subprocess.CompletedProcess(argv, 113, "", "Could not find service\n")
            return subprocess.CompletedProcess(argv, 0, f"{argv[2]} = {{\n\tstate = {self.states[label]}\n}}\n", "")
        return super().__call__(argv)


def never_busy(host, port):
    return True


def install_instance(platform, name, folder: Path, env, *, port=None, index=None, config=None, probe=never_busy,
                     runner=None):
    """plan_install + install, as `groove service install --name NAME --kb FOLDER` does."""
    plan = instances.plan_install(platform, name=name, config=config, kb=folder, index=index, port=port,
                                host="127.0.0.1", env=env, probe=probe)
    report = installer.install(platform, config=config, command=GROOVE, env=env, runner=runner or FakeManager(),
                             flags=plan.flags, name=name)
    return plan, report


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    made = {n: tmp_path / n for n in ("work", "home notes", "third")}
    for path in made.values():
        path.mkdir()
    return made


def _exec_start(unit_text: str) -> list[str]:
    [line] = [l for l in unit_text.splitlines() if l.startswith("ExecStart=")]
    return instances.split_exec_start(line[len("ExecStart="):])


def test_two_named_systemd_instances_get_their_own_unit_folder_index_and_port(folders, env):
    work, home = folders["work"], folders["home notes"]
    mgr = FakeManager()
    plan_w, report_w = install_instance("linux", "work", work, env, runner=mgr)
    plan_h, report_h = install_instance("linux", "home", home, env)
    assert report_w.exit_code == 0 == report_h.exit_code, report_w.err + report_h.err
    units = Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user"
    text_w = (units / "groove-work.service").read_text()
    text_h = (units / "groove-home.service").read_text()
    assert not (units / "groove.service").exists()  # the default instance is untouched
    assert "Description=groove (work): local search" in text_w and "Description=groove (home): local search" in text_h
    assert "groove service install --name work` writes this file to ~/.config/systemd/user/groove-work.service" in text_w
    argv_w, argv_h = _exec_start(text_w), _exec_start(text_h)
    assert argv_w == [*GROOVE, "serve", "--transport", "http", "--kb", str(work), "--index", str(plan_w.index),
                      "--bind", "127.0.0.1:3101"]
    assert argv_h == [*GROOVE, "serve", "--transport", "http", "--kb", str(home), "--index", str(plan_h.index),
                      "--bind", "127.0.0.1:3102"]  # the space in "home notes" survives the quoting
    assert f'--kb "{home}"' in text_h
    assert plan_w.index != plan_h.index and plan_w.port_chosen and (plan_w.port, plan_h.port) == (3101, 3102)
    assert mgr.calls == [["systemctl", "--user", "daemon-reload"],
                         ["systemctl", "--user", "enable", "--now", "groove-work.service"]]
    assert "journalctl --user -u groove-work -f" in report_w.out[-1]
    assert "groove service status --name work" in report_w.out[-1]
    # Everything else in the two files is the same unit.
    strip = lambda t: [l for l in t.splitlines() if not l.startswith(("ExecStart=", "Description=", "# `groove"))]
    assert strip(text_w) == strip(text_h) == strip(render.render_systemd_unit(GROOVE, None))


def test_two_named_launchd_instances_get_their_own_label_plist_logs_and_port(folders, env, home: Path):
    work, other = folders["work"], folders["home notes"]
    mgr = FakeManager(bootout=(3, "", "Boot-out failed: 3: No such process\n"))
    plan_w, report_w = install_instance("macos", "work", work, env, runner=mgr)
    plan_h, _ = install_instance("macos", "home", other, env)
    assert report_w.exit_code == 0, report_w.err
    agents = home / "Library" / "LaunchAgents"
    w = plistlib.loads((agents / "com.groove.agent.work.plist").read_bytes())
    h = plistlib.loads((agents / "com.groove.agent.home.plist").read_bytes())
    assert not (agents / "com.groove.agent.plist").exists()
    assert (w["Label"], h["Label"]) == ("com.groove.agent.work", "com.groove.agent.home")
    assert w["ProgramArguments"] == [*GROOVE, "serve", "--transport", "http", "--kb", str(work), "--index",
                                     str(plan_w.index), "--bind", "127.0.0.1:3101"]
    assert h["ProgramArguments"][-6:] == ["--kb", str(other), "--index", str(plan_h.index), "--bind", "127.0.0.1:3102"]
    logs = home / "Library" / "Logs" / "groove"
    assert (w["StandardErrorPath"], h["StandardErrorPath"]) == (f"{logs}/groove-work.err.log", f"{logs}/groove-home.err.log")
    assert w["StandardOutPath"] == f"{logs}/groove-work.out.log"
    domain = f"gui/{os.getuid()}"
    assert mgr.calls == [["launchctl", "bootout", f"{domain}/com.groove.agent.work"],
                         ["launchctl", "enable", f"{domain}/com.groove.agent.work"],
                         ["launchctl", "bootstrap", domain, str(agents / "com.groove.agent.work.plist")]]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemds_own_parser_accepts_the_units_of_two_instances(spawn, tmp_path: Path, folders, env):
    exe = write(tmp_path / "my venv" / "bin" / "groove", "#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    for name, folder in (("work", folders["work"]), ("home", folders["home notes"])):
        plan = instances.plan_install("linux", name=name, config=None, kb=folder, index=None, port=None,
                                    host="127.0.0.1", env=env, probe=never_busy)
        installer.install("linux", config=None, command=[str(exe)], env=env, runner=FakeManager(), flags=plan.flags,
                        name=name)
    units = sorted((Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user").glob("groove-*.service"))
    assert [u.name for u in units] == ["groove-home.service", "groove-work.service"]
    ok = spawn.run(["systemd-analyze", "verify", *map(str, units)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("odd", ["/home/me/my notes", "/home/me/100% done", "/home/$USER/n", '/a "b"\\c'])
def test_exec_start_reads_back_what_was_written(odd: str):
    argv = ["/opt/my venv/groove", "serve", "--kb", odd]
    unit = render.render_systemd_unit(argv[:1], None, argv[2:])
    assert _exec_start(unit) == [argv[0], "serve", "--transport", "http", "--kb", odd]


@pytest.mark.parametrize("platform", ["linux", "macos"])  # windows: tests/test_windows.py (schtasks' answers)
def test_list_shows_each_instance_with_folder_port_and_state(platform, folders, config: Path, kb: Path, env):
    installer.install(platform, config=config, command=GROOVE, env=env, runner=FakeManager())  # the default one
    install_instance(platform, "work", folders["work"], env)
    install_instance(platform, "home", folders["home notes"], env, port=4100)
    units = (["groove.service", "groove-work.service"] if platform == "linux"
             else ["com.groove.agent", "com.groove.agent.work"])
    running = "active" if platform == "linux" else "running"
    report = installer.list_instances(platform, env=env, runner=PerUnitManager({units[0]: running, units[1]: running}))
    assert report.exit_code == 0 and report.err == []
    rows = [line.split() for line in report.out]
    stopped = "inactive" if platform == "linux" else "not loaded"
    assert rows[0] == ["NAME", "FOLDER", "PORT", "STATE"]
    assert report.out[1].split() == ["default", str(kb), "3100", running]  # kb_path and bind from the config file
    assert report.out[2].startswith("home ") and report.out[2].rstrip().endswith(f"4100  {stopped}")
    assert f"  {folders['home notes']}  " in report.out[2]
    assert rows[3] == ["work", str(folders["work"]), "3101", running]
    data = {i["name"]: i for i in report.data["instances"]}
    assert data["work"]["unit"] == units[1] and data["work"]["bind"] == "127.0.0.1:3101"
    assert data["default"]["config"] == str(config) and data["default"]["index"] == str(
        default_index_path(kb.resolve()))


def test_list_with_nothing_installed_says_how_to_install(env):
    report = installer.list_instances("linux", env=env, runner=FakeManager())
    assert report.data["instances"] == [] and "groove service install [--name NAME] --kb PATH" in report.out[0]


def test_list_without_a_session_shows_the_instances_and_says_once_that_states_are_unknown(folders, env):
    install_instance("linux", "work", folders["work"], env)
    install_instance("linux", "home", folders["home notes"], env)
    report = installer.list_instances("linux", env=env, runner=no_session)
    assert [line.split()[-1] for line in report.out[1:]] == ["unknown", "unknown"]
    assert report.err == [f"systemd user session not available: {NO_BUS}: the states are unknown"]


@pytest.mark.parametrize("platform", platforms.PLATFORMS)
def test_a_second_instance_of_the_same_folder_is_refused_naming_the_first(platform, folders, env, tmp_path: Path):
    install_instance(platform, "work", folders["work"], env)
    before = sorted(p.name for p in platforms.unit_dir(platform, env).iterdir())
    with pytest.raises(platforms.ServiceError) as err:
        install_instance(platform, "again", folders["work"], env)
    unit = {"linux": "groove-work.service", "macos": "com.groove.agent.work", "windows": "groove-work"}[platform]
    assert f"already served by the groove service instance 'work' ({unit})" in str(err.value)
    assert "groove service uninstall --name work" in str(err.value)
    # The same folder by another name (a symlink, a trailing slash) is the same folder.
    link = tmp_path / "link-to-work"
    link.symlink_to(folders["work"], target_is_directory=True)
    with pytest.raises(platforms.ServiceError, match="instance 'work'"):
        install_instance(platform, "again", link, env)
    with pytest.raises(platforms.ServiceError, match="instance 'work'"):
        install_instance(platform, None, Path(str(folders["work"]) + "/"), env)  # nor the default instance
    assert sorted(p.name for p in platforms.unit_dir(platform, env).iterdir()) == before


def test_the_default_instance_folder_from_its_config_counts_too(config: Path, kb: Path, env):
    installer.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    with pytest.raises(platforms.ServiceError, match=r"instance 'default' \(groove.service\).*`groove service uninstall`"):
        install_instance("linux", "notes", kb, env)


def test_a_shared_index_is_refused_naming_the_instance_that_has_it(folders, env, tmp_path: Path):
    index = tmp_path / "shared.sqlite"
    install_instance("linux", "work", folders["work"], env, index=index)
    with pytest.raises(platforms.ServiceError, match="index .*shared.sqlite is already used by the groove service instance 'work'"):
        install_instance("linux", "home", folders["home notes"], env, index=index)


def test_reinstalling_an_instance_keeps_its_port_and_may_change_its_folder(folders, env):
    install_instance("linux", "work", folders["work"], env)
    install_instance("linux", "home", folders["home notes"], env)
    plan, report = install_instance("linux", "work", folders["third"], env)
    assert report.exit_code == 0 and plan.port == 3101 and not plan.port_chosen
    assert f"--kb {folders['third']} " in platforms.unit_path("linux", env, "work").read_text()


def test_a_port_another_instance_has_is_refused_and_a_free_one_is_chosen_around_a_busy_one(folders, env):
    install_instance("linux", "work", folders["work"], env, port=3101)
    with pytest.raises(platforms.ServiceError, match="port 3101 is already the port of the groove service instance 'work'"):
        install_instance("linux", "home", folders["home notes"], env, port=3101)
    # A real listener on the port that would come next: the one after it is chosen.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert instances.port_is_free("127.0.0.1", taken) is False
        with pytest.raises(platforms.ServiceError, match=f"port {taken} on 127.0.0.1 is in use by another program"):
            install_instance("linux", "home", folders["home notes"], env, port=taken, probe=instances.port_is_free)
        picked = instances.choose_port("127.0.0.1", set(), lambda h, p: p != 3102 and p != taken)
        assert picked == 3101
        picked = instances.choose_port("127.0.0.1", {3101}, lambda h, p: p != 3102)
        assert picked == 3103
    free = instances.choose_port("127.0.0.1", {3101})
    assert free > 3101 and instances.port_is_free("127.0.0.1", free)
    with pytest.raises(platforms.ServiceError, match="no free port from 3101 to 3200"):
        instances.choose_port("127.0.0.1", set(), lambda h, p: False)


@pytest.mark.parametrize("bad", ["Work", "-work", "work-", "my_notes", "a" * 33, "a/b", "..", "", "wörk", "work.2"])
def test_bad_instance_names_are_refused_with_what_a_name_is(bad: str, folders, env):
    with pytest.raises(platforms.ServiceError, match="is not an instance name: use 1 to 32 lowercase letters"):
        install_instance("linux", bad, folders["work"], env)
    assert not platforms.unit_dir("linux", env).exists()


def test_default_is_not_a_name_and_good_names_pass():
    with pytest.raises(platforms.ServiceError, match="--name default means the instance installed without --name"):
        platforms.check_name("default")
    for good in ("work", "w", "notes-2024", "a" * 32, "1"):
        assert platforms.check_name(good) == good


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_a_port_out_of_range_is_refused(port, folders, env):
    with pytest.raises(platforms.ServiceError, match=f"--port {port}: a port is a number from 1 to 65535"):
        install_instance("linux", "work", folders["work"], env, port=port)


def test_a_named_instance_without_a_folder_is_refused(env):
    with pytest.raises(platforms.ServiceError, match="a named instance needs its notes folder: pass --kb PATH"):
        instances.plan_install("linux", name="work", config=None, kb=None, index=None, port=None, host="127.0.0.1", env=env)


def test_a_named_instance_takes_its_folder_and_index_from_a_config_file(tmp_path: Path, kb: Path, env):
    cfg = write(tmp_path / "work.toml", f'kb_path = "{kb}"\nindex_path = "idx/work.sqlite"\n[serve]\nbind = "[::1]:3100"\n')
    plan, report = install_instance("linux", "work", None, env, config=cfg)
    assert report.exit_code == 0
    argv = _exec_start(platforms.unit_path("linux", env, "work").read_text())
    assert argv[argv.index("--config") + 1] == str(cfg)
    assert argv[argv.index("--index") + 1] == str(tmp_path / "idx" / "work.sqlite")
    assert plan.folder == str(kb.resolve())
    [inst] = instances.installed_instances("linux", env)
    assert (inst.folder, inst.port) == (str(kb), 3101)


def test_uninstall_of_one_instance_leaves_the_others(folders, env, config: Path):
    installer.install("linux", config=config, command=GROOVE, env=env, runner=FakeManager())
    install_instance("linux", "work", folders["work"], env)
    install_instance("linux", "home", folders["home notes"], env)
    mgr = FakeManager()
    report = installer.uninstall("linux", env=env, runner=mgr, name="work")
    assert report.exit_code == 0 and "stopped and disabled" in report.out
    assert ["systemctl", "--user", "disable", "--now", "groove-work.service"] in mgr.calls
    assert [i.name for i in instances.installed_instances("linux", env)] == ["default", "home"]


def test_uninstalling_an_instance_that_is_not_there_names_the_ones_that_are(folders, env):
    install_instance("linux", "work", folders["work"], env)
    with pytest.raises(platforms.ServiceError, match=r"no groove service instance named 'wrok' is installed \(installed: work;"):
        installer.uninstall("linux", env=env, runner=FakeManager(), name="wrok")


def _real_index(kb: Path, index: Path) -> None:
    """A real groove index of `kb`, built by the real indexer (the bag-of-words embedder: no model to load)."""
    import anyio

    from groove.config import load_settings
    from tests.support.fakes import BagOfWordsEmbedder
    from tests.support.oneshot import index_once

    write(kb / "a.md", "# A note\n\nSome words about tomatoes.\n")
    anyio.run(lambda: index_once(load_settings(None, kb_path=kb, index_path=index), embedder=BagOfWordsEmbedder()))


@pytest.mark.parametrize("platform", platforms.PLATFORMS)
def test_uninstall_purge_deletes_the_instances_index_and_nothing_else(platform, folders, env, tmp_path: Path):
    index = tmp_path / "data" / "work.sqlite"
    _real_index(folders["work"], index)
    write(Path(str(index) + ".eval.jsonl"), "{}\n")
    other = tmp_path / "data" / "home.sqlite"
    _real_index(folders["home notes"], other)
    install_instance(platform, "work", folders["work"], env, index=index)
    install_instance(platform, "home", folders["home notes"], env, index=other)
    report = installer.uninstall(platform, env=env, runner=FakeManager(), name="work", purge=True)
    assert report.exit_code == 0, report.err
    assert f"deleted the index {index} and work.sqlite.eval.jsonl, work.sqlite.lock" in report.out
    assert sorted(p.name for p in index.parent.iterdir()) == ["home.sqlite", "home.sqlite.lock"]
    assert (folders["work"] / "a.md").is_file()  # the notes are never touched
    # Without --purge the index stays.
    report = installer.uninstall(platform, env=env, runner=FakeManager(), name="home")
    assert other.is_file() and not any("deleted" in line for line in report.out)


def test_an_instance_of_a_shared_store_runs_with_it_and_purge_never_drops_it(folders, env, tmp_path: Path):
    url = "postgresql://groove:hunter2-in-unit@db.example/groove"
    plan = instances.plan_install("linux", name="team", config=None, kb=folders["work"], index=None, port=None,
                                  host="127.0.0.1", env=env, probe=never_busy, store=url)
    installer.install("linux", config=None, command=GROOVE, env=env, runner=FakeManager(), flags=plan.flags,
                      name="team")
    argv = _exec_start(platforms.unit_path("linux", env, "team").read_text())
    assert argv[argv.index("--store") + 1] == url and "--index" not in argv
    [inst] = instances.installed_instances("linux", env)
    assert inst.as_dict()["store"] == "postgresql://groove:***@db.example/groove"

    cfg = write(tmp_path / "conf" / "shared.toml",
                f'kb_path = "{folders["home notes"]}"\n[store]\nurl = "postgresql://groove@db.example/groove"\n')
    plan = instances.plan_install("linux", name="home", config=cfg, kb=None, index=None, port=None,
                                  host="127.0.0.1", env=env, probe=never_busy)
    assert "--store" not in plan.flags and "--index" not in plan.flags  # the config file names the store
    installer.install("linux", config=cfg, command=GROOVE, env=env, runner=FakeManager(), flags=plan.flags,
                      name="home")
    home = next(i for i in instances.installed_instances("linux", env) if i.name == "home")
    assert home.store == "postgresql://groove@db.example/groove"

    report = installer.uninstall("linux", env=env, runner=FakeManager(), name="team", purge=True)
    assert report.exit_code == 0, report.err
    assert any(line.startswith("kept the shared store postgresql://groove:***@db.example/groove: --purge never drops")
               for line in report.out)
    assert "hunter2" not in " ".join(report.out + report.err) and (folders["work"]).is_dir()


def test_purge_keeps_an_index_a_process_still_writes_and_a_file_that_is_not_an_index(folders, env, tmp_path: Path):
    from groove.store.sqlite import writer_lock

    index = tmp_path / "work.sqlite"
    _real_index(folders["work"], index)
    install_instance("linux", "work", folders["work"], env, index=index)
    writer = writer_lock.WriterLock(index)
    writer.acquire()
    try:
        report = installer.uninstall("linux", env=env, runner=FakeManager(), name="work", purge=True)
    finally:
        writer.release()
    assert report.exit_code == 1 and report.err[0].startswith(f"--purge: the index {index} was kept:")
    assert index.is_file() and not platforms.unit_path("linux", env, "work").exists()

    precious = write(tmp_path / "precious.sqlite", "not an index\n")
    install_instance("linux", "home", folders["home notes"], env, index=precious)
    report = installer.uninstall("linux", env=env, runner=FakeManager(), name="home", purge=True)
    assert report.exit_code == 1 and "is not a groove index, so --purge will not delete it" in report.err[0]
    assert precious.read_text() == "not an index\n"


def test_status_of_a_named_instance_names_its_folder_and_port(folders, env):
    install_instance("linux", "work", folders["work"], env)
    mgr = FakeManager(is_active=(0, "active\n", ""))
    report = installer.status("linux", env=env, runner=mgr, name="work")
    assert mgr.calls == [["systemctl", "--user", "is-active", "groove-work.service"]]
    assert report.exit_code == 0 and report.data["port"] == 3101 and report.data["folder"] == str(folders["work"])
    assert f"notes:     {folders['work']}" in report.out and "listens:   127.0.0.1:3101" in report.out


def test_cli_install_list_and_uninstall_of_a_named_instance(folders, home, monkeypatch, capsys, fake_systemctl):
    monkeypatch.setenv("HOME", str(home))
    code = main(["service", "install", "--name", "work", "--kb", str(folders["work"]), "--platform", "linux"])
    out, err = capsys.readouterr()
    unit = Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "groove-work.service"
    assert code == 1 and unit.is_file()  # written; no session to start it in (see the warning)
    assert "enable --now groove-work`" in err
    assert "port: 3101 (a free one, chosen); clients connect to http://127.0.0.1:3101/mcp" in out
    assert main(["service", "list", "--platform", "linux"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].split() == ["NAME", "FOLDER", "PORT", "STATE"]
    assert out.splitlines()[1].split() == ["work", str(folders["work"]), "3101", "unknown"]
    assert main(["service", "list", "--platform", "linux", "--format", "json"]) == 0
    import json

    [inst] = json.loads(capsys.readouterr().out)["instances"]
    assert inst["name"] == "work" and inst["port"] == 3101 and inst["unit"] == "groove-work.service"
    assert main(["service", "install", "--name", "again", "--kb", str(folders["work"]), "--platform", "linux"]) == 2
    assert "already served by the groove service instance 'work'" in capsys.readouterr().err
    assert main(["service", "install", "--name", "Work!", "--kb", str(folders["work"]), "--platform", "linux"]) == 2
    assert "groove: error: --name 'Work!' is not an instance name" in capsys.readouterr().err
    assert main(["service", "uninstall", "--name", "work", "--platform", "linux"]) == 1  # no session: said as a warning
    assert not unit.exists()


def test_cli_install_without_a_name_writes_the_default_unit_as_before(config, kb, home, monkeypatch, capsys, fake_systemctl):
    monkeypatch.setenv("HOME", str(home))
    assert main(["service", "install", "--dry-run", "--platform", "linux", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert render.render_systemd_unit(platforms.groove_command(), str(config)).rstrip("\n") in out
    assert "--bind" not in out and "port:" not in out


def _user_manager(spawn) -> str:
    """Why `systemctl --user` cannot be used here, or "" when a user manager answers."""
    if shutil.which("systemctl") is None:
        return "no systemctl on this machine"
    r = spawn.run(["systemctl", "--user", "show-environment"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"no systemd user manager here (`systemctl --user` says: {(r.stderr or r.stdout).strip()})"
    return ""


def test_two_instances_under_the_real_systemd_user_manager(spawn, folders, tmp_path: Path):
    import pwd

    if why_not := _user_manager(spawn):
        pytest.skip(why_not)
    env = {"HOME": pwd.getpwuid(os.getuid()).pw_dir}  # the user manager reads ~/.config/systemd/user
    names = [f"pytest-{uuid.uuid4().hex[:8]}", f"pytest-{uuid.uuid4().hex[:8]}"]
    exe = write(tmp_path / "bin" / "groove", "#!/bin/sh\nexec sleep 600\n")  # stands in for groove serve
    exe.chmod(0o755)
    try:
        for name, folder in zip(names, (folders["work"], folders["home notes"])):
            plan = instances.plan_install("linux", name=name, config=None, kb=folder, index=None, port=None,
                                        host="127.0.0.1", env=env)
            report = installer.install("linux", config=None, command=[str(exe)], env=env, flags=plan.flags, name=name,
                                     start=False)
            assert report.exit_code == 0, report.err
        enabled = spawn.run(["systemctl", "--user", "is-enabled", *(f"groove-{n}.service" for n in names)],
                                 capture_output=True, text=True)
        assert enabled.stdout.split() == ["enabled", "enabled"]
        listed = {i["name"]: i for i in installer.list_instances("linux", env=env).data["instances"]}
        assert {listed[n]["state"] for n in names} == {"inactive"}
        assert listed[names[0]]["folder"] == str(folders["work"])
    finally:
        for name in names:
            if platforms.unit_path("linux", env, name).exists():
                installer.uninstall("linux", env=env, name=name)
    assert not any(platforms.unit_path("linux", env, n).exists() for n in names)


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
