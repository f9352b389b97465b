"""`groove index` embeds while it scans (issue 39, point 1): the model starts on the chunks the scan has
written as soon as a whole window of them waits, and what is left is embedded when the scan ends.

Real SQLite files (and a real PostgreSQL server for the shared store), the bag-of-words fake as the model
(tests/support/fakes.py): what is checked is when texts are embedded and what the index holds afterwards,
not the vectors' quality. The oracle of "the same index" is the two steps one after the other, as
`groove index` ran them before: `Index.reconcile`, then `Index.embed_pending`."""

from __future__ import annotations

import io
import re
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

import groove.store.sqlite.store as sqlite_store
import groove.sync.embedding as embedding_mod
from groove.errors import EmbedderError
from groove.index import Index
from groove.progress import ProgressBar
from groove.store.sqlite import connection
from tests.support.common import section_text, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, read_status

NOTES = 240


class Timed(BagOfWordsEmbedder):
    """The fake, keeping every text it embeds and when it was first asked; optionally dying (EmbedderError,
    as a model process that stops) once it has embedded `fail_after` texts."""

    def __init__(self, *, fail_after: int | None = None, identity: str = "test-bag-of-words", dimension: int = 64):
        super().__init__(dimension, identity=identity)
        self.texts: list[str] = []
        self.first_call: float | None = None
        self.failed_at: float | None = None
        self.fail_after = fail_after
        self._guard = threading.Lock()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        with self._guard:
            if self.first_call is None:
                self.first_call = time.monotonic()
            if self.fail_after is not None and len(self.texts) + len(texts) > self.fail_after:
                self.failed_at = self.failed_at or time.monotonic()
                raise EmbedderError("the model process died")
            self.texts += list(texts)
        return super().embed_documents(texts)


class ScanClock:
    """A progress hook: when the scan reached its last note, and every call in order."""

    def __init__(self) -> None:
        self.scan_ended: float | None = None
        self.calls: list[tuple[str, int, int]] = []

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.calls.append((stage, done, total))
        if stage == "scan" and done == total:
            self.scan_ended = time.monotonic()


def many_notes(kb: Path, n: int = NOTES) -> None:
    """`n` notes of two sections each; the last fifth copy earlier notes word for word (texts shared by
    several chunks) and every note shares one of seven sections with others."""
    for i in range(n):
        k = i - (n * 4) // 5 if i >= (n * 4) // 5 else i
        write(kb / f"topic{i % 9}/n{i:03d}.md", f"# Note {k}\n\n" + section_text(k) + section_text(1000 + k % 7))


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of 8 texts (batches of 4) and a queue looked at every 5 ms: on a few hundred notes the
    model has many windows to take while the scan still runs."""
    monkeypatch.setattr(embedding_mod, "LENGTH_WINDOW", 2)
    monkeypatch.setattr(embedding_mod, "POLL_S", 0.005)


def chunks_and_vectors(index_path: Path) -> tuple[list[tuple[Any, ...]], dict[str, bytes]]:
    con = connection.connect_sync(index_path)
    try:
        chunks = con.execute(
            "SELECT d.path, c.ordinal, c.hash, c.content, c.heading, c.embedding_id IS NULL"
            " FROM chunks c JOIN documents d ON d.id = c.doc_id ORDER BY d.path, c.ordinal"
        ).fetchall()
        vectors = dict(
            con.execute(
                "SELECT e.hash, v.embedding FROM embeddings e JOIN vec_embeddings v ON v.rowid = e.id"
            ).fetchall()
        )
        return chunks, vectors
    finally:
        con.close()


async def scan_then_embed(settings, embedder) -> int:
    """The two steps one after the other, as `groove index` ran them before."""
    async with Index.open(settings, embedder=embedder) as index:
        await index.reconcile()
        return await index.embed_pending()


def test_groove_index_starts_embedding_before_its_scan_of_many_notes_ends(kb, make_settings, small_windows):
    many_notes(kb)
    settings = make_settings(kb, **{"embedding.batch_size": 4})
    model, clock = Timed(), ScanClock()

    report = anyio.run(lambda: index_once(settings, embedder=model, progress=clock))

    assert clock.scan_ended is not None and model.first_call is not None
    assert model.first_call < clock.scan_ended, "the model was first asked only after the scan had ended"
    assert report.pending_chunks == 0 and report.chunks_embedded == len(set(model.texts)) == len(model.texts)


def test_the_index_groove_index_makes_while_scanning_equals_the_one_scan_then_embed_makes(
    kb, make_settings, small_windows, tmp_path
):
    many_notes(kb)
    together = make_settings(kb, **{"embedding.batch_size": 4})
    apart = make_settings(kb, index_path=tmp_path / "apart.sqlite", **{"embedding.batch_size": 4})
    model, clock, alone = Timed(), ScanClock(), Timed()

    report = anyio.run(lambda: index_once(together, embedder=model, progress=clock))
    embedded_apart = anyio.run(lambda: scan_then_embed(apart, alone))

    assert model.first_call is not None and clock.scan_ended is not None and model.first_call < clock.scan_ended
    chunks, vectors = chunks_and_vectors(together.resolved_index_path())
    chunks_apart, vectors_apart = chunks_and_vectors(apart.resolved_index_path())
    assert len(chunks) > NOTES and chunks == chunks_apart
    assert all(not pending for *_, pending in chunks)
    assert vectors.keys() == vectors_apart.keys() == {c[2] for c in chunks}
    assert all(vectors[h] == vectors_apart[h] for h in vectors)
    distinct = {c[3] for c in chunks}
    assert len(distinct) < len(chunks)  # texts shared by several chunks: each still embedded once
    assert Counter(model.texts) == Counter(alone.texts) == Counter(distinct)
    assert report.chunks_embedded == embedded_apart == len(distinct)
    status = anyio.run(lambda: read_status(together, embedder=model))
    assert status.embeddings_computed == len(distinct) and status.pending_chunks == 0


def test_a_model_that_dies_while_the_scan_runs_leaves_every_note_written_and_raises_its_own_error(
    kb, make_settings, small_windows
):
    many_notes(kb)
    settings = make_settings(kb, **{"embedding.batch_size": 4})
    model, clock = Timed(fail_after=20), ScanClock()

    with pytest.raises(EmbedderError, match="^the model process died$"):
        anyio.run(lambda: index_once(settings, embedder=model, progress=clock))

    assert model.failed_at is not None and clock.scan_ended is not None and model.failed_at < clock.scan_ended
    chunks, vectors = chunks_and_vectors(settings.resolved_index_path())
    assert len({c[0] for c in chunks}) == NOTES  # the scan went on to the last note
    assert 0 < len(vectors) <= 20 and {c[2] for c in chunks if not c[5]} == set(vectors)
    status = anyio.run(lambda: read_status(settings, embedder=model))
    assert status.documents == NOTES and status.pending_chunks == sum(c[5] for c in chunks) > 0

    again = anyio.run(lambda: index_once(settings, embedder=Timed()))  # the next run embeds the rest
    assert again.pending_chunks == 0 and again.unchanged == NOTES


class DiskFull(OSError):
    pass


def test_a_scan_that_fails_stops_the_embedding_beside_it_and_raises_its_own_error(
    kb, make_settings, small_windows, monkeypatch
):
    many_notes(kb)
    settings = make_settings(kb, **{"embedding.batch_size": 4})
    real = sqlite_store.SqliteWrites.write_note
    written = 0

    async def write_note(self, **kw: Any) -> tuple[int, int]:
        nonlocal written
        written += 1
        if written == NOTES // 2:
            raise DiskFull("no space left on the device")
        return await real(self, **kw)

    monkeypatch.setattr(sqlite_store.SqliteWrites, "write_note", write_note)
    model = Timed()

    with pytest.raises(DiskFull, match="^no space left on the device$"):
        anyio.run(lambda: index_once(settings, embedder=model))

    assert model.first_call is not None  # the model was at work beside the scan when it failed
    chunks, vectors = chunks_and_vectors(settings.resolved_index_path())
    assert len({c[0] for c in chunks}) == NOTES // 2 - 1 and 0 < len(vectors) <= len({c[2] for c in chunks})


def test_a_model_switch_run_by_groove_index_fills_the_new_set_while_scanning_and_swaps_once(
    kb, make_settings, small_windows
):
    many_notes(kb, 120)
    old = make_settings(kb, **{"embedding.batch_size": 4})
    anyio.run(lambda: index_once(old, embedder=BagOfWordsEmbedder(identity="model-old")))
    for i in range(120, 200):  # new notes too: the scan writes while the new model fills its set
        write(kb / f"later/n{i}.md", f"# Later {i}\n\n" + section_text(i))
    new, clock = Timed(identity="model-new", dimension=32), ScanClock()

    report = anyio.run(lambda: index_once(old, embedder=new, progress=clock))

    assert report.model_switch is not None and report.pending_chunks == 0 and report.added == 80
    assert new.first_call is not None and clock.scan_ended is not None and new.first_call < clock.scan_ended
    assert any(stage == "embed (new model)" for stage, *_ in clock.calls)
    chunks, vectors = chunks_and_vectors(old.resolved_index_path())
    assert Counter(new.texts) == Counter({c[3] for c in chunks})  # every text once, by the new model
    assert {len(v) for v in vectors.values()} == {32 * 4} and set(vectors) == {c[2] for c in chunks}


def test_the_plain_progress_says_so_far_without_a_time_left_while_the_scan_runs_then_the_whole_count(
    kb, make_settings, small_windows, monkeypatch
):
    many_notes(kb)
    settings = make_settings(kb, **{"embedding.batch_size": 4})
    monkeypatch.setattr("groove.progress.PLAIN_EVERY_S", 0.0)  # every call a line: the whole story is on stderr
    out = io.StringIO()

    bar = ProgressBar(out, tty=False)
    report = anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder(), progress=bar))

    lines = out.getvalue().splitlines()
    scan_end = next(i for i, line in enumerate(lines) if line.startswith(f"scanning notes: {NOTES}/{NOTES}"))
    embed = [(i, line) for i, line in enumerate(lines) if line.startswith("embedding chunks:")]
    during = [line for i, line in embed if i < scan_end]
    after = [line for i, line in embed if i > scan_end]
    assert during and all(" so far" in line and "left" not in line for line in during), during
    assert all(" so far" not in line for line in after)
    totals = [int(re.match(r"embedding chunks: \d+/(\d+)", line).group(1)) for _, line in embed]
    assert totals == sorted(totals)  # it grows with what the scan writes, never back
    # The count is of chunks that waited for a vector: a text several notes share counts for each of its
    # chunks written before its vector was stored (those written after get it at once).
    last = re.fullmatch(r"embedding chunks: (\d+)/(\d+), [\d.,]+/s", lines[-1])
    assert last and last.group(1) == last.group(2), lines[-6:]
    chunks = len(chunks_and_vectors(settings.resolved_index_path())[0])
    assert report.chunks_embedded <= int(last.group(1)) <= chunks and report.pending_chunks == 0
    assert all(re.fullmatch(r"(scanning notes|embedding chunks): \d+/\d+( so far)?(, [\d.,]+/s.*)?", x) for x in lines)


def test_on_a_terminal_the_scan_and_the_embedding_each_keep_their_own_bar_and_the_embedding_no_eta_while_fed():
    out = io.StringIO()
    bar = ProgressBar(out, tty=True)
    bar("scan", 10, 100)
    bar("embed", 8, 30)
    assert bar.phases["embed"].task is not None and bar.phases["scan"].task is not None
    assert bar._progress.tasks[1].fields["eta"] == "ETA after the scan"
    bar("scan", 100, 100)
    bar("embed", 30, 300)
    assert bar._progress.tasks[0].finished and bar._progress.tasks[1].fields["eta"].startswith("ETA ")
    bar("embed", 300, 300)
    assert bar._progress is None  # both done: the bars are stopped, as they were drawn last
    screen = out.getvalue()
    assert "scanning notes" in screen and "embedding chunks" in screen and "300/300" in screen
