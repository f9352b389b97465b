"""`groove service`: run groove in the background as a user service (autostart at login).

On Linux a systemd user unit (~/.config/systemd/user/groove.service), on macOS
a launchd agent (~/Library/LaunchAgents/com.groove.agent.plist), on Windows a Task
Scheduler task (\\groove, registered with `schtasks /Create /XML` from
%LOCALAPPDATA%\\groove\\groove\\tasks\\groove.xml) whose console-less launcher
(`pythonw.exe -m groove.autostart.launcher`, `launcher`) runs groove with log files. All run

    <groove> serve --transport http --config <absolute groove.toml>

(`groove service install --kb PATH` adds `--kb <absolute PATH>`, and `--index` likewise: then the
config file is optional, and the notes folder is the one named.)

Named instances (`groove service install --name work --kb ~/work [--port N]`) run beside that one:
each its own unit (groove-work.service, launchd label com.groove.agent.work), notes folder, index
and port, all written into its `groove serve` command (`--kb`, `--index`, `--bind`), so the unit
file is the one record of an instance: `groove service list` reads them back from there. Two
instances never share a notes folder, an index or a port. Without --name everything is as it was.

One concern a module, imports going down the list:

- `platforms`: the service managers, where their files go, instance names, and the one way out
  to `systemctl` / `launchctl` (a `Runner`, so tests fault-inject the service manager and nothing else);
- `launcher`: the Windows task's console-less launcher (log files for pythonw, then groove in-process);
- `render`: the unit file, the plist and the task XML, pure (`systemd/groove.service` and
  `launchd/com.groove.agent.plist` at the top of the repository are the same renderings with
  placeholders; `python -m groove.autostart.render` regenerates them and a test fails when they drift);
- `instances`: the installed units read back, and a new instance planned against them;
- `install`: install, uninstall, status and list, writing real files.
"""
