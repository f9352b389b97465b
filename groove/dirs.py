"""groove's own folders on each platform: config, data (indexes, engines, stores), logs, locks. Every place groove
keeps a file of its own asks here: the default config file and index (config), the trust record (trust), a shared
store's local name (store.address), the e5 engines (embed.e5onnx), the identity locks (store.sqlite.writer_lock),
the Windows task's logs (autostart).

platformdirs decides them (its Unix, MacOS and Windows classes, picked by name so that one machine can tell
another's: tests/test_windows.py reads the Windows ones under `ntpath`):

- config: ~/.config/groove (Linux), ~/Library/Application Support/groove (macOS),
  %LOCALAPPDATA%\\groove\\groove (Windows);
- data: ~/.local/share/groove, ~/Library/Application Support/groove, %LOCALAPPDATA%\\groove\\groove;
- logs: ~/.local/state/groove/log, ~/Library/Logs/groove, %LOCALAPPDATA%\\groove\\groove\\Logs;
- locks: $XDG_RUNTIME_DIR/groove-locks-UID, $TMPDIR/groove-locks-UID, %LOCALAPPDATA%\\groove\\groove\\locks

(the XDG variables move the Linux ones, as platformdirs reads them).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

APP = "groove"

OS = Literal["linux", "macos", "windows"]


def this_os(sys_platform: str | None = None) -> OS:
    """The platform by groove's names: windows for win32, macos for darwin, linux for every other POSIX."""
    name = sys.platform if sys_platform is None else sys_platform
    if name == "win32":
        return "windows"
    if name == "darwin":
        return "macos"
    return "linux"


@dataclass(frozen=True)
class Dirs:
    config: Path  # groove.toml when no --config names one
    data: Path  # indexes/, engines/, stores/, trusted.json
    logs: Path  # a background groove's stdout and stderr where no journal keeps them
    locks: Path  # the locks on index files' identities (per user)

    @property
    def indexes(self) -> Path:
        return self.data / "indexes"

    @property
    def engines(self) -> Path:
        return self.data / "engines"

    @property
    def stores(self) -> Path:
        return self.data / "stores"


def user_dirs(platform: OS | None = None) -> Dirs:
    """groove's folders for the user running it, on `platform` (default: this machine). Paths are joined by the
    running `os.path`, so the Windows ones come out right on Windows (or under `ntpath` in a test)."""
    platform = this_os() if platform is None else platform
    if platform == "windows":
        from platformdirs.windows import Windows

        win = Windows(APP)
        data = win.user_data_dir
        return Dirs(Path(win.user_config_dir), Path(data), Path(win.user_log_dir), Path(os.path.join(data, "locks")))
    if platform == "macos":
        from platformdirs.macos import MacOS

        mac = MacOS(APP)
        return Dirs(Path(mac.user_config_dir), Path(mac.user_data_dir), Path(mac.user_log_dir), _posix_locks())
    from platformdirs.unix import Unix

    unix = Unix(APP)
    return Dirs(Path(unix.user_config_dir), Path(unix.user_data_dir), Path(unix.user_log_dir), _posix_locks())


def _posix_locks() -> Path:
    """One folder per user in the runtime folder (gone at reboot, as the locks are)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"groove-locks-{os.getuid()}"
