"""`python tests/support/fake_groove.py ARGS...`: the `groove` command with the bag-of-words fake embedder.

For subprocess tests and bench/hostile.py that are about files, not the model:
the real command line, settings, logging and exit codes, with an embedder that
loads nothing (tests/support/fakes.py; run as a file, this script's own folder
is first on sys.path, so its sibling imports as `fakes`).

FAKE_EMBED_DELAY_S (seconds per passage) makes the embedder slow, for tests
that watch indexing progress.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Sequence

import numpy as np
from fakes import BagOfWordsEmbedder

import groove.index

DELAY_S = float(os.environ.get("FAKE_EMBED_DELAY_S") or 0)


class SlowEmbedder(BagOfWordsEmbedder):
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(DELAY_S * len(texts))
        return super().embed_documents(texts)


groove.index.make_embedder = lambda settings: SlowEmbedder() if DELAY_S else BagOfWordsEmbedder()  # type: ignore[assignment]

from groove.cli import main  # noqa: E402  (after the embedder is replaced)

if __name__ == "__main__":
    sys.exit(main())
