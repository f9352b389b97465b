"""Cross-encoder reranker (sentence-transformers `CrossEncoder`), loaded lazily, one per process.

No reranker can be downloaded on a machine without network: give a local path
or a model already in the Hugging Face cache. Recommended multilingual models
are listed in docs/search.md.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from groove.embed.embedder import quiet_openmp, resolve_model_location
from groove.errors import EmbedderError

_RERANKERS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


class CrossEncoderReranker:
    def __init__(self, model: str, device: str = "cpu", batch_size: int = 32):
        if not model:
            raise EmbedderError("no reranker model given")
        self.identity = model
        self.location = resolve_model_location(model)
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            key = (self.location, self.device)
            with _LOCK:
                model = _RERANKERS.get(key)
                if model is None:
                    try:
                        quiet_openmp()  # before torch (and its OpenMP) loads
                        from sentence_transformers import CrossEncoder  # lazy: seconds to import
                        from transformers.utils import logging as hf_logging

                        hf_logging.disable_progress_bar()
                        hf_logging.set_verbosity_error()
                        model = CrossEncoder(self.location, device=self.device, num_labels=1)
                    except Exception as exc:
                        raise EmbedderError(
                            f"could not load reranker {self.identity!r}: {exc}. Give a local path or a model "
                            "already in the Hugging Face cache"
                        ) from exc
                    _RERANKERS[key] = model
                self._model = model
        return self._model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        pairs = [(query, t) for t in texts]
        scores = self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True)
        return [float(s) for s in scores.reshape(-1)]
