"""`python tests/fake_groove.py ARGS...`: the `groove` command with the bag-of-words fake embedder.

For subprocess tests and bench/hostile.py that are about files, not the model:
the real command line, settings, logging and exit codes, with an embedder that
loads nothing (tests/fakes.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakes import BagOfWordsEmbedder  # noqa: E402

import groove.index  # noqa: E402

groove.index.make_embedder = lambda settings: BagOfWordsEmbedder()  # type: ignore[assignment]

from groove.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
