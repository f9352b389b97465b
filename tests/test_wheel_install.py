"""groove installed as a tool (issue 23 point 4): the README says `pipx install` / `uv tool install` of the checkout;
what those install is the wheel this checkout builds. So: build that wheel, install it into a fresh venv, and run
the installed `groove` as a new user would (`--version`, then `index --examples` and `search --examples WAL`).

Offline and quick: the wheel is built by pip with the test venv's setuptools (`--no-build-isolation`; the [test]
extra brings a setuptools new enough) from a copy of the checkout, so the tree under test is never written to; the
fresh venv gets the wheel alone (`--no-deps --no-index`), and its dependencies (torch, the model packages, the MCP
SDK: gigabytes a test cannot download) are made importable by a .pth line naming the test venv's site-packages.
A plain path line: that folder's own .pth files (the checkout's editable hook among them) are not run, so the
groove that runs is the wheel's, from the fresh venv's bin/ and site-packages/, which the tests check first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support.common import EXAMPLES, ROOT
from tests.support.server import server_env

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
# What a checkout holds that is not source: left out of the copy the wheel is built from.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                    ".hypothesis", "node_modules", "out", "*.sqlite", "*.sqlite-wal", "*.sqlite-shm")


class Installed:
    def __init__(self, spawn, wheel: Path, venv: Path, home: Path):
        self.spawn, self.wheel, self.venv, self.home = spawn, wheel, venv, home
        self.bin = venv / "bin"
        self.python = self.bin / "python"
        self.env = {k: v for k, v in server_env(home).items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        self.env["PATH"] = os.pathsep.join([str(self.bin), os.defpath])

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """A command of the fresh venv, found on its PATH (so `groove` is its console script), from a folder
        outside the checkout."""
        exe = shutil.which(argv[0], path=self.env["PATH"])
        assert exe, f"{argv[0]} is not on the fresh venv's PATH"
        return self.spawn.run([exe, *argv[1:]], cwd=self.home, env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)


def _check(done: subprocess.CompletedProcess[str], what: str) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, f"{what} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(spawn, tmp_path_factory) -> Installed:
    import setuptools
    from packaging.requirements import Requirement

    for req in map(Requirement, PYPROJECT["build-system"]["requires"]):
        if req.name == "setuptools":
            assert req.specifier.contains(setuptools.__version__), (
                f"the wheel is built with this venv's setuptools {setuptools.__version__}, and pyproject.toml asks "
                f"for {req}: reinstall the [test] extra (make test does)")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCE)
    _check(spawn.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=300),
           "pip wheel")
    (wheel,) = (tmp / "dist").glob("groove-*.whl")

    venv = tmp / "venv"
    _check(spawn.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True,
                          timeout=120), "python -m venv")
    python = venv / "bin" / "python"
    _check(spawn.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           "--quiet", str(wheel)], capture_output=True, text=True, timeout=300), "pip install")
    purelib = spawn.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    Path(purelib, "_groove_test_dependencies.pth").write_text("\n".join(dict.fromkeys(ours)) + "\n", encoding="utf-8")
    home = tmp / "home"
    home.mkdir()
    return Installed(spawn, wheel, venv, home)


def test_the_wheel_carries_the_web_page_the_example_notes_and_the_groove_command(installed):
    with zipfile.ZipFile(installed.wheel) as whl:
        names = set(whl.namelist())
        entry_points = next(whl.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "groove/serve/http/static/ui.html" in names
    notes = {p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*") if p.is_file()}
    assert len(notes) >= 10
    assert {n.removeprefix("groove/_examples/notes/") for n in names if n.startswith("groove/_examples/notes/")} == notes
    assert "groove/_examples/golden.yaml" in names
    assert re.search(r"^groove = groove\.cli:main$", entry_points, re.M), entry_points


def test_groove_from_the_fresh_venv_is_the_wheels_own_and_says_the_projects_version(installed):
    assert shutil.which("groove", path=installed.env["PATH"]) == str(installed.bin / "groove")
    where = _check(installed.run("python", "-c", "import groove; print(groove.__file__); print(groove.EXAMPLE_NOTES)"),
                   "python -c 'import groove'").stdout.split()
    site_packages = installed.venv / "lib"
    assert Path(where[0]).is_relative_to(site_packages) and not Path(where[0]).is_relative_to(ROOT), where
    assert Path(where[1]).is_relative_to(site_packages), where  # --examples: the wheel's copy, not the checkout's
    version = _check(installed.run("groove", "--version", timeout=120), "groove --version")
    assert version.stdout.strip() == f"groove {VERSION}"


def test_groove_search_examples_from_the_installed_wheel_finds_the_wal_note(installed):
    # As the README says it: `groove index --examples`, then `groove search --examples "WAL"` (default index path,
    # in this test's own data folder).
    built = json.loads(_check(installed.run("groove", "index", "--examples", "--format", "json"), "groove index").stdout)
    assert Path(built["kb_path"]).is_relative_to(installed.venv), built  # the notes the wheel carries
    assert built["added"] == len(list(EXAMPLES.rglob("*.md"))), built
    found = _check(installed.run("groove", "search", "--examples", "WAL"), "groove search").stdout
    assert re.search(r"^\[1\] reference/sqlite-wal\.md ", found, re.M), found


def test_both_readmes_say_how_to_install_groove_as_a_tool():
    for name in ("README.md", "README.ja.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert re.search(r"^pipx install .*constraints\.txt.* /path/to/groove\b", text, re.M), name
        assert re.search(r"^uv tool install .*constraints\.txt.* /path/to/groove\b", text, re.M), name
