"""The build's one step pyproject.toml cannot say: the example notes go into the wheel.

examples/ stays at the top of the checkout (the READMEs, tests and benches use examples/notes and
examples/golden.yaml there); a wheel carries a copy as groove/_examples, so `--examples` works from an
installed tool too (`pipx install` / `uv tool install` of the checkout). groove.EXAMPLE_NOTES finds either.
An editable install (`make serve`) reads the checkout's folder and copies nothing. MANIFEST.in puts
examples/ in the sdist, so a wheel built from the sdist has them as well.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

EXAMPLES = Path(__file__).resolve().parent / "examples"


class BuildPyWithExamples(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            shutil.copytree(EXAMPLES, Path(self.build_lib) / "groove" / "_examples", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))


setup(cmdclass={"build_py": BuildPyWithExamples})
