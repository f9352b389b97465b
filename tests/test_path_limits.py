"""A path the file system cannot even look up (issue 36 point 10): a `--kb`, `--index` or `--config` with a part
over 255 bytes made every command die with a traceback (`OSError: [Errno 36] File name too long`). Each now says
in one line which path and what is wrong with it. Real `groove` processes (the bag-of-words fake embedder)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.server import FAKE_GROOVE, server_env

LONG = "n" * 300  # one folder name past NAME_MAX (255 bytes) on every file system groove runs on
COMMANDS = [["index"], ["status", "--no-daemon"], ["search", "x", "--no-daemon"], ["doctor"], ["get", "a.md", "--no-daemon"]]


def one_line_error(spawn, home: Path, *argv: str) -> str:
    proc = spawn.run([*FAKE_GROOVE, *argv], cwd=home, env=server_env(home), capture_output=True, text=True,
                     timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("groove: error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_notes_folder_with_a_part_over_255_bytes_is_one_line(spawn, tmp_path, command):
    kb = tmp_path / LONG / "notes"
    line = one_line_error(spawn, tmp_path, *command, "--kb", str(kb), "--index", str(tmp_path / "i.sqlite"))
    assert f"the notes folder {kb} cannot be used: a part of the path" in line
    assert "longer than the file system allows" in line


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_an_index_path_with_a_part_over_255_bytes_is_one_line(spawn, tmp_path, command):
    (tmp_path / "notes").mkdir()
    index = tmp_path / LONG / "i.sqlite"
    line = one_line_error(spawn, tmp_path, *command, "--kb", str(tmp_path / "notes"), "--index", str(index))
    assert f"index_path {index} cannot be used: a part of the path" in line


def test_a_config_file_with_a_part_over_255_bytes_is_one_line(spawn, tmp_path):
    config = tmp_path / LONG / "groove.toml"
    line = one_line_error(spawn, tmp_path, "status", "--config", str(config))
    assert f"config file {config} cannot be used: a part of the path" in line
