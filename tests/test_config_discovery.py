"""Where groove finds its groove.toml, as GrooveSeek does (issue 38, point 2): `--config` > `./groove.toml` > the
groove.toml of the nearest `.git` ancestor > one beside the groove executable > the user's own, each file found
by looking gated by `groove trust` like ./groove.toml. Real groove processes in real folders; which file won is
read from `groove validate --format json`, whose report names the notes folder each file sets."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from tests.support.common import write


def folder_of(spawn, home: Path, cwd: Path, *args: str, command: list[str] | None = None) -> str:
    """The notes folder `groove validate` ran on from `cwd`: which config file it read."""
    proc = spawn.groove("validate", "--format", "json", *args, home=home, cwd=cwd, command=command)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["kb_path"]


def config_with_notes(folder: Path, name: str, extra: str = "") -> Path:
    """A groove.toml in `folder` whose notes folder is `folder/name` (made)."""
    (folder / name).mkdir(parents=True, exist_ok=True)
    return write(folder / "groove.toml", f'kb_path = "{name}"\n{extra}')


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git working tree (a .git folder is all GrooveSeek's rule looks for) with a groove.toml at its top."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    config_with_notes(root, "repo-notes")
    (root / "src" / "deep").mkdir(parents=True)
    return root


@pytest.fixture
def launcher(tmp_path: Path) -> Path:
    """A `groove` executable of its own folder (as an installed groove is): a Python launcher of groove's CLI."""
    path = tmp_path / "bin" / "groove"
    write(path, f"#!{sys.executable}\nimport sys\nfrom groove.cli import main\nsys.exit(main())\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_git_ancestors_groove_toml_is_found_from_a_subfolder(spawn, tmp_path: Path, repo: Path):
    assert folder_of(spawn, tmp_path, repo / "src" / "deep") == str((repo / "repo-notes").resolve())


def test_the_current_folders_groove_toml_comes_before_the_git_ancestors(spawn, tmp_path: Path, repo: Path):
    config_with_notes(repo / "src", "src-notes")
    assert folder_of(spawn, tmp_path, repo / "src") == str((repo / "src" / "src-notes").resolve())


def test_the_nearest_git_folder_decides_even_without_a_groove_toml(spawn, tmp_path: Path, repo: Path):
    inner = repo / "vendor" / "lib"
    (inner / ".git").mkdir(parents=True)  # a nested repository without a groove.toml: the outer one is not read
    proc = spawn.groove("validate", home=tmp_path, cwd=inner)
    assert proc.returncode == 2 and "no notes folder configured" in proc.stderr


def test_a_groove_toml_beside_the_executable_is_found_after_the_git_ancestors(
    spawn, tmp_path: Path, repo: Path, launcher: Path
):
    config_with_notes(launcher.parent, "bin-notes")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    binary = [str(launcher)]
    assert folder_of(spawn, tmp_path, elsewhere, command=binary) == str((launcher.parent / "bin-notes").resolve())
    # A .git ancestor's file comes first, and --config before everything.
    assert folder_of(spawn, tmp_path, repo / "src", command=binary) == str((repo / "repo-notes").resolve())
    named = config_with_notes(tmp_path / "named", "named-notes")
    assert folder_of(spawn, tmp_path, repo / "src", "--config", str(named), command=binary) == str(
        (tmp_path / "named" / "named-notes").resolve()
    )
    # Run as `python -m groove.cli`, there is no groove executable to look beside.
    assert spawn.groove("validate", home=tmp_path, cwd=elsewhere).returncode == 2


RISKY = '[serve]\nbind = "0.0.0.0:3100"\n'


@pytest.mark.parametrize("where", ["git-ancestor", "beside-executable"])
def test_a_found_file_that_sets_where_note_text_goes_waits_for_groove_trust(
    spawn, tmp_path: Path, repo: Path, launcher: Path, where: str
):
    if where == "git-ancestor":
        config, cwd = config_with_notes(repo, "repo-notes", RISKY), repo / "src" / "deep"
    else:
        config, cwd = config_with_notes(launcher.parent, "bin-notes", RISKY), tmp_path
    binary = [str(launcher)]
    refused = spawn.groove("validate", home=tmp_path, cwd=cwd, command=binary)
    assert refused.returncode == 2
    assert 'sets [serve] bind = "0.0.0.0:3100"' in refused.stderr
    assert f"run `groove trust {config.resolve()}`" in refused.stderr
    # `groove trust` with no PATH approves the file groove would find from here.
    trusted = spawn.groove("trust", home=tmp_path, cwd=cwd, command=binary)
    assert trusted.returncode == 0 and str(config.resolve()) in trusted.stdout, trusted.stderr
    assert folder_of(spawn, tmp_path, cwd, command=binary) == str((config.parent / config_name(config)).resolve())
    # A changed file is asked about again.
    config.write_text(config.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    again = spawn.groove("validate", home=tmp_path, cwd=cwd, command=binary)
    assert again.returncode == 2 and "changed since it was trusted" in again.stderr


def config_name(config: Path) -> str:
    return config.read_text(encoding="utf-8").split('"')[1]


def test_a_git_ancestor_search_stops_after_twenty_folders(spawn, tmp_path: Path):
    root = tmp_path / "top"
    (root / ".git").mkdir(parents=True)
    config_with_notes(root, "top-notes")
    near = root.joinpath(*[f"d{i}" for i in range(19)])  # root + 19 below: the 20th folder from `near` is root
    near.mkdir(parents=True)
    assert folder_of(spawn, tmp_path, near) == str((root / "top-notes").resolve())
    far = near / "d19"
    far.mkdir()
    assert spawn.groove("validate", home=tmp_path, cwd=far).returncode == 2
