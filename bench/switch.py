"""Model switch: an index made by one model switched to another in place (decision 0008).

    python -m bench switch --notes DIR --index FROM.sqlite [--donor TO.sqlite]

Copies FROM.sqlite (built by the old model) to a temporary file and runs what
`groove index` does with the default (multilingual) model configured: fill the
shadow set, swap, re-chunk. With `--donor` (an index of the same notes built
by the new model), texts the donor holds take its vectors instead of being
embedded again, so the switch of a corpus that took an hour to embed is
measured in minutes; the texts the donor lacks are embedded for real. Prints
the swap's duration and the share of texts whose chunk boundaries moved when
the notes were re-chunked for the new model (the old model embeds those for
the active set while the switch runs; `groove index` does not load it).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bench.common import BenchError, Report
from groove.config import load_settings
from groove.embed.embedder import make_embedder
from groove.index import Index
from groove.store.sqlite import connection


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--notes", type=Path, help="the notes folder both indexes were built from")
    p.add_argument("--index", type=Path, help="an index built by the old model (copied, not changed)")
    p.add_argument(
        "--donor", type=Path, help="an index of the same notes built by the new model: its vectors are reused"
    )


class DonorEmbedder:
    """The configured model, answering from a donor index's vectors where it has the text."""

    def __init__(self, real: Any, donor: dict[str, np.ndarray]):
        self.real = real
        self.donor = donor
        self.reused = 0
        self.embedded = 0

    identity = property(lambda self: self.real.identity)
    dimension = property(lambda self: self.real.dimension)
    max_tokens = property(lambda self: self.real.max_tokens)

    def count_tokens(self, text: str) -> int:
        return self.real.count_tokens(text)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        missing = [i for i, t in enumerate(texts) if t not in self.donor]
        for i, t in enumerate(texts):
            if t in self.donor:
                out[i] = self.donor[t]
        if missing:
            out[missing] = self.real.embed_documents([texts[i] for i in missing])
        self.reused += len(texts) - len(missing)
        self.embedded += len(missing)
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.real.embed_queries(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.real.embed_query(text)


def _donor_vectors(path: Path | None) -> dict[str, np.ndarray]:
    if path is None:
        return {}
    con = connection.connect_sync(path, readonly=True)
    try:
        rows = con.execute(
            "SELECT c.content, v.embedding FROM chunks c JOIN vec_embeddings v ON v.rowid = c.embedding_id"
        ).fetchall()
    finally:
        con.close()
    return {content: np.frombuffer(blob, dtype=np.float32) for content, blob in rows}


def _count(path: Path, sql: str) -> int:
    con = connection.connect_sync(path, readonly=True)
    try:
        return int(con.execute(sql).fetchone()[0])
    finally:
        con.close()


async def _switch(settings: Any, embedder: DonorEmbedder) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Index.open(settings, embedder=embedder) as index:
        assert index.switching is not None, "the copied index already answers with the configured model"
        t = time.perf_counter()
        out["rechunk"] = await index.reconcile()
        out["rechunk_s"] = time.perf_counter() - t
        out["moved_texts"] = await index.pending()  # the old model would embed these for the active set
        t = time.perf_counter()
        out["filled"] = await index.switching.shadow.embed_pending()
        out["shadow_fill_s"] = time.perf_counter() - t
        t = time.perf_counter()
        out["record"] = await index.finish_switch_if_done()
        out["swap_s"] = time.perf_counter() - t
        assert out["record"] is not None
        out["pending_after"] = await index.pending()
    return out


def main_async(args: argparse.Namespace) -> Report:
    if not args.notes or not args.index:
        raise BenchError("pass --notes DIR and --index FROM.sqlite (an index of DIR built by another model)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="groove-switch-") as tmp:
        path = Path(tmp) / "index.sqlite"
        src = connection.connect_sync(args.index, readonly=True)
        dst = connection.connect_sync(path)
        src.backup(dst)
        src.close()
        dst.close()
        chunks_before = _count(path, "SELECT count(*) FROM chunks")
        settings = load_settings(None, kb_path=args.notes, index_path=path)
        embedder = DonorEmbedder(make_embedder(settings.embedding), _donor_vectors(args.donor))
        out = anyio.run(_switch, settings, embedder)
        chunks_after = _count(path, "SELECT count(*) FROM chunks")
        size_mb = path.stat().st_size / 1e6
    rec = out["record"]
    texts = rec.vectors
    report = Report(
        bench="switch",
        title=f"switch {rec.from_model} -> {rec.to} in place (re-chunk, shadow set, one-transaction swap)",
        params={"notes": str(args.notes), "index": str(args.index), "donor": str(args.donor) if args.donor else None},
        ratios={
            "moved_share": round(out["moved_texts"] / max(1, texts), 4),
            "new_model_texts_over_final_texts": round(out["filled"] / max(1, texts), 4),
            "swap_over_shadow_fill": round(out["swap_s"] / max(out["shadow_fill_s"], 1e-9), 5),
        },
        raw={
            "texts_final": texts,
            "notes_rechunked": out["rechunk"].changed,
            "chunks_before": chunks_before,
            "chunks_after": chunks_after,
            "moved_texts": out["moved_texts"],
            "shadow_texts_filled": out["filled"],
            "reused_from_donor": embedder.reused,
            "embedded_for_real": embedder.embedded,
            "rechunk_s": round(out["rechunk_s"], 2),
            "shadow_fill_s": round(out["shadow_fill_s"], 2),
            "swap_ms": round(out["swap_s"] * 1000, 1),
            "pending_after_swap": out["pending_after"],
            "index_mb": round(size_mb, 1),
        },
        notes=[
            "moved_share: texts whose chunk boundaries moved with the new tokenizer (the old model embeds "
            "them for the active set during a switch in the service), over the final texts",
            "new_model_texts_over_final_texts = 1.0: the new model embedded each final text once, nothing else",
        ],
    )
    report.seconds = time.perf_counter() - started
    return report


__all__ = ["add_arguments", "main_async"]
