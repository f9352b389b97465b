"""A small deterministic embedder for the tests that are not about the model.

`BagOfWordsEmbedder` has the interface of the real one (`groove.embed.embedder`):
each word gets a unit vector seeded from its hash, a text is the normalised sum
of its words' vectors, so texts that share words are near each other and texts
that share none are nearly orthogonal. It loads nothing and embeds thousands of
texts a second. Words are runs of letters/digits, and each CJK character is a
word of its own.

Fault injection: `fail_on` holds substrings; a document batch containing a text
with one of them raises `RuntimeError` (as a real model can on a text it cannot
take), and `fail_queries` makes every query embedding raise.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Sequence

import numpy as np

_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]|[^\W_]+", re.UNICODE)


class InjectedFault(RuntimeError):
    pass


class BagOfWordsEmbedder:
    def __init__(self, dimension: int = 64, *, max_tokens: int = 256, identity: str = "test-bag-of-words"):
        self._dimension = dimension
        self._max_tokens = max_tokens
        self._identity = identity
        self.fail_on: set[str] = set()
        self.fail_queries = False
        self.document_calls = 0
        self.failed_calls = 0
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    # -- the Embedder interface ----------------------------------------------------------
    @property
    def identity(self) -> str:
        return self._identity

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def count_tokens(self, text: str) -> int:
        return len(_WORD.findall(text))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            self.document_calls += 1
            bad = [f for f in self.fail_on if any(f in t for t in texts)]
            if bad:
                self.failed_calls += 1
                raise InjectedFault(f"injected failure on a text containing {bad[0]!r}")
        return self._encode(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_queries:
            raise InjectedFault("injected failure embedding a query")
        return self._encode(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    # -- vectors -------------------------------------------------------------------------
    def _word(self, word: str) -> np.ndarray:
        vec = self._cache.get(word)
        if vec is None:
            seed = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
            vec = np.random.default_rng(seed).standard_normal(self._dimension).astype(np.float32)
            vec /= np.linalg.norm(vec)
            self._cache[word] = vec
        return vec

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            words = [w.casefold() for w in _WORD.findall(text)]
            vec = np.sum([self._word(w) for w in words], axis=0) if words else self._word("\x00empty")
            out[i] = vec / (np.linalg.norm(vec) or 1.0)
        return out
