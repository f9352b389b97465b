"""The console-less launcher of the Windows task: `pythonw.exe -m groove.autostart.launcher --out F --err F -- ARGS`.

pythonw.exe opens no console window, but it has no stdout or stderr either (`sys.stdout` is None, and so are
descriptors 1 and 2): groove's results and its log lines would be lost, or fail the first write. This module
opens the two log files (appended, UTF-8, line-buffered), makes them descriptors 1 and 2 and `sys.stdout` /
`sys.stderr`, sets HF_HUB_OFFLINE=1 as the systemd unit and the plist do, and runs `groove ARGS` in this
process, so that its exit code is the task's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

USAGE = "usage: pythonw -m groove.autostart.launcher --out FILE --err FILE -- GROOVE-ARGS..."


def parse(argv: Sequence[str]) -> tuple[Path, Path, list[str]]:
    """(stdout file, stderr file, groove's arguments); ValueError saying what is wrong."""
    argv = list(argv)
    if "--" not in argv:
        raise ValueError("no -- before groove's arguments")
    split = argv.index("--")
    own, rest = argv[:split], argv[split + 1 :]
    files: dict[str, str] = {}
    i = 0
    while i < len(own):
        if own[i] in ("--out", "--err") and i + 1 < len(own):
            files[own[i]] = own[i + 1]
            i += 2
        else:
            raise ValueError(f"unknown argument {own[i]!r}")
    if set(files) != {"--out", "--err"}:
        raise ValueError("both --out and --err are needed")
    if not rest:
        raise ValueError("no groove arguments after --")
    return Path(files["--out"]), Path(files["--err"]), rest


def main(argv: Sequence[str] | None = None) -> int:
    try:
        out_path, err_path, args = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        if sys.stderr is not None:
            sys.stderr.write(f"groove launcher: {exc}\n{USAGE}\n")
        return 2
    out_path.parent.mkdir(parents=True, exist_ok=True)
    err_path.parent.mkdir(parents=True, exist_ok=True)
    out = open(out_path, "a", encoding="utf-8", buffering=1)  # kept open for the process's life
    err = open(err_path, "a", encoding="utf-8", buffering=1)
    for fd, stream in ((1, out), (2, err)):
        os.dup2(stream.fileno(), fd)  # what writes to the descriptors (a library's C code) lands there too
    sys.stdout, sys.stderr = out, err
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from groove import logs
    from groove.cli import main as groove_main

    logs.configure()  # the standard library's handler took sys.stderr (None under pythonw) at import

    return groove_main(args)


if __name__ == "__main__":
    sys.exit(main())
