"""`index`: what indexing costs beyond the model's own encoding time.

One run, one process, one loaded model:

1. SciFact docs -> Markdown notes (../shared/data/to_markdown.py), untimed.
2. The model is loaded (excluded from every timing).
3. The chunk texts: a text-only pass (parse, chunk, FTS rows; no vectors) into
   a scratch index, timed as `text_pass_s`; its distinct chunk texts are read back.
   One batch of them warms the model up (excluded).
4. raw encode #1: `embedder.embed_documents(texts)` in one call (same batch size).
5. `groove.index.index_once` into a fresh index (scan, parse, write, embed, gc).
6. raw encode #2: the same call again, to show the noise between identical runs.

The texts the real index embedded are read back from it and compared with the
ones encoded raw (`same_texts`), so both sides did the same model work.
Indexing overhead = index time / raw encode time. Each phase's CPU seconds
(`time.process_time()`: every thread of this process, the model's own
included) are measured beside its wall time, and `index_over_raw_encode_cpu`
is the figure to read on a shared machine: other processes change how long a
phase takes, not how much CPU it needs.

`--kb DIR` indexes a copy of an existing notes folder (the JaQuAD sub-corpus,
say) instead of SciFact docs; the folder itself is never written.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio

from bench.common import (
    BenchError,
    Report,
    Timer,
    convert_scifact,
    data_dir,
    machine,
    make_settings,
    ratio,
    settings_summary,
)


class CPUTimer(Timer):
    """Wall seconds (`seconds`) and this process's CPU seconds (`cpu`, every thread) of a block."""

    def __enter__(self) -> CPUTimer:
        self.c0 = time.process_time()
        super().__enter__()
        return self

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        self.cpu = time.process_time() - self.c0


DEFAULT_DOCS = 600


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--docs", type=int, default=DEFAULT_DOCS, help=f"first N SciFact docs (default {DEFAULT_DOCS}; 0 = all 5,183)"
    )
    p.add_argument(
        "--kb",
        type=Path,
        default=None,
        help="index a copy of this notes folder instead of SciFact docs (never written)",
    )


async def _distinct_texts(index_path: Path) -> list[str]:
    """The distinct chunk texts of an index, in first-seen order: what the indexer embeds."""
    from groove.store.sqlite import connection

    conn = await connection.connect(index_path, readonly=True)
    try:
        cur = await conn.execute("SELECT content FROM chunks GROUP BY hash ORDER BY MIN(id)")
        return [r[0] for r in await cur.fetchall()]
    finally:
        await conn.close()


async def _text_pass(settings, embedder, kb: Path, index_path: Path) -> dict:
    """Reconcile without embedding: the parse + FTS half of indexing."""
    from groove.store.sqlite import connection, reads
    from groove.store.sqlite.store import SqliteWrites
    from groove.sync.indexer import Indexer

    def prepare() -> None:  # SQLite and the file system: off the event loop
        reads.prepare_index(
            index_path, model=embedder.identity, dimension=embedder.dimension, kb_path=str(kb.resolve())
        )

    await anyio.to_thread.run_sync(prepare)
    conn = await connection.connect(index_path)
    try:
        stats = await Indexer(SqliteWrites(conn), kb, settings.index, embedder).reconcile_all()
        return stats.to_dict()
    finally:
        await conn.close()


async def run(args: argparse.Namespace) -> Report:
    from groove.embed.embedder import make_embedder
    from tests.support.oneshot import index_once

    t_start = time.perf_counter()
    m0 = machine()
    with tempfile.TemporaryDirectory(prefix="groove-bench-index-") as tmp_s:
        tmp = Path(tmp_s)
        kb = tmp / "notes"
        if args.kb:
            import shutil

            if not args.kb.is_dir():
                raise BenchError(f"--kb {args.kb} is not a folder")
            shutil.copytree(args.kb, kb)
            docs = sum(1 for p in kb.rglob("*") if p.is_file())
        else:
            docs = convert_scifact(data_dir(args.data), kb, args.docs, scratch=tmp / "scratch")
        settings = make_settings(tmp, kb, tmp / "index.sqlite")
        embedder = make_embedder(settings.embedding)

        with Timer() as t_load:  # load + warm up: excluded from everything below
            embedder.embed_documents(["warm up the model"] * settings.embedding.batch_size)

        with CPUTimer() as t_text:
            text_stats = await _text_pass(settings, embedder, kb, tmp / "texts.sqlite")
        texts = await _distinct_texts(tmp / "texts.sqlite")
        with Timer() as t_warm:  # real texts at real lengths, so no side pays for first-shape costs
            embedder.embed_documents(texts[: settings.embedding.batch_size])

        with CPUTimer() as t_raw1:
            embedder.embed_documents(texts)
        with CPUTimer() as t_index:
            summary = await index_once(settings)
        with CPUTimer() as t_raw2:
            embedder.embed_documents(texts)

        indexed_texts = await _distinct_texts(settings.resolved_index_path())
        same = sorted(indexed_texts) == sorted(texts)

    n = len(texts)
    raw_mean = (t_raw1.seconds + t_raw2.seconds) / 2
    report = Report(
        bench="index",
        machine_start=m0,
        title=(
            f"index_once vs raw encode of the same {n} chunk texts "
            f"({docs} {'notes of ' + str(args.kb) if args.kb else 'SciFact docs'})"
        ),
        params={"docs": docs, **settings_summary(settings)},
    )
    # The headline is the CPU ratio (index CPU over the mean of both raw encodes' CPU): on a shared machine the
    # wall ratio moves with whatever else runs (its noise is raw_encode_second_over_first), the CPU ratio much less.
    report.ratios = {
        "index_over_raw_encode_cpu": ratio(t_index.cpu, (t_raw1.cpu + t_raw2.cpu) / 2),
        "raw_encode_cpu_second_over_first": ratio(t_raw2.cpu, t_raw1.cpu),
        "text_pass_cpu_over_index_cpu": ratio(t_text.cpu, t_index.cpu),
        "index_over_raw_encode_first": ratio(t_index.seconds, t_raw1.seconds),
        "index_over_raw_encode_second": ratio(t_index.seconds, t_raw2.seconds),
        "index_over_raw_encode_mean": ratio(t_index.seconds, raw_mean),
        "raw_encode_second_over_first": ratio(t_raw2.seconds, t_raw1.seconds),
        "text_pass_over_index": ratio(t_text.seconds, t_index.seconds),
    }
    report.raw = {
        "docs": docs,
        "chunks": summary.chunks_written,
        "texts_embedded": summary.chunks_embedded,
        "same_texts": same,
        "text_pass_chunks": text_stats["chunks_written"],
        "index_s": round(t_index.seconds, 2),
        "raw_encode_first_s": round(t_raw1.seconds, 2),
        "raw_encode_second_s": round(t_raw2.seconds, 2),
        "text_pass_s": round(t_text.seconds, 2),
        "index_cpu_s": round(t_index.cpu, 2),
        "raw_encode_first_cpu_s": round(t_raw1.cpu, 2),
        "raw_encode_second_cpu_s": round(t_raw2.cpu, 2),
        "text_pass_cpu_s": round(t_text.cpu, 2),
        "model_load_s": round(t_load.seconds, 2),
        "warmup_batch_s": round(t_warm.seconds, 2),
        "index_chunks_per_s": round(summary.chunks_embedded / t_index.seconds, 1),
        "raw_chunks_per_s": round(n / raw_mean, 1),
    }
    report.notes.append(
        "text_pass = scan + parse + chunk + FTS rows with no vectors (the part of indexing that is not the model)"
    )
    report.notes.append(
        "read index_over_raw_encode_cpu (CPU of this process, every thread) against its noise "
        "raw_encode_cpu_second_over_first; the *_mean / _first / _second ratios are wall time, their noise "
        "raw_encode_second_over_first"
    )
    if not same or summary.chunks_embedded != n:
        report.notes.append(
            f"WARNING: the index embedded {summary.chunks_embedded} texts but the raw side encoded {n}; "
            "the ratio compares different work"
        )
    report.seconds = time.perf_counter() - t_start
    return report


def main_async(args: argparse.Namespace) -> Report:
    return anyio.run(run, args)


# --- the 1-chunk edit ----------------------------------------------------------------------------

EDIT_SENTENCE = " The edit benchmark added this sentence to the note's last paragraph."


async def edit_cost(data: Path, docs: int, *, embedder=None) -> dict:
    """What editing one chunk costs: `docs` SciFact notes are indexed (`index_once`), then the last paragraph
    of the note with the most chunks gets one sentence more and `index_once` runs again. Returns the texts
    the edit run embedded (1 when only the edited chunk changed), its time and the first full index's time.
    `embedder`: the model to use (default: the configured one, loaded and warmed up first, outside the timings)."""
    from groove.embed.embedder import make_embedder
    from groove.store.sqlite import connection
    from tests.support.oneshot import index_once

    with tempfile.TemporaryDirectory(prefix="groove-bench-edit-") as tmp_s:
        tmp = Path(tmp_s)
        kb = tmp / "notes"
        n = convert_scifact(data, kb, docs, scratch=tmp / "scratch")
        settings = make_settings(tmp, kb, tmp / "index.sqlite")
        if embedder is None:
            embedder = make_embedder(settings.embedding)
        embedder.embed_documents(["warm up the model"])
        with Timer() as t_full:
            full = await index_once(settings, embedder=embedder)
        conn = await connection.connect(settings.resolved_index_path(), readonly=True)
        try:
            cur = await conn.execute(
                "SELECT d.path, count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id"
                " GROUP BY d.id ORDER BY count(*) DESC, d.path LIMIT 1"
            )
            path, note_chunks = connection.one(await cur.fetchone())
        finally:
            await conn.close()
        note = kb / path
        text = note.read_text(encoding="utf-8").rstrip("\n")
        note.write_text(text + EDIT_SENTENCE + "\n", encoding="utf-8")
        with Timer() as t_edit:
            edit = await index_once(settings, embedder=embedder)
    return {
        "docs": n,
        "chunks": full.chunks_written,
        "note": path,
        "note_chunks": note_chunks,
        "chunks_embedded": edit.chunks_embedded,
        "notes_changed": edit.changed,
        "edit_s": round(t_edit.seconds, 3),
        "full_index_s": round(t_full.seconds, 2),
        "edit_over_full": ratio(t_edit.seconds, t_full.seconds),
    }
