"""GrooveSeek's groove.toml works in groove (issue 38, point 2): read by the real config loader (each key into groove's
own key, or refused with the exact replacement), `groove config migrate` in a real groove process writing a file
that loads with no warning, and the parser id `md`. The fixtures (tests/fixtures/grooveseek/) mirror the keys of
GrooveSeek 1.0's own example with values of their own; the expected values below are written out by hand."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from groove.config import ConfigError, SearchSettings, load_settings
from tests.support.common import QUALITY_FILTER_OFF, ROOT, write

FIXTURES = ROOT / "tests" / "fixtures" / "grooveseek"
GROOVE = [sys.executable, "-m", "groove.cli"]


@pytest.fixture(autouse=True)
def _file_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite turns the quality filter off by environment (tests/support/common.py); here the file decides."""
    monkeypatch.delenv(QUALITY_FILTER_OFF[0], raising=False)


@pytest.fixture
def every_key(tmp_path: Path) -> Path:
    (tmp_path / "notes").mkdir()
    return Path(shutil.copy(FIXTURES / "every-key.toml", tmp_path / "groove.toml"))


def test_grooveseeks_example_file_loads_as_it_is_with_its_keys_in_groove_terms():
    settings = load_settings(FIXTURES / "groove.toml")
    assert settings.parsers.enabled == ["markdown"]
    assert (settings.watch.enabled, settings.watch.debounce_ms) == (True, 500)
    assert (settings.serve.transport, settings.serve.bind) == ("stdio", "127.0.0.1:3100")
    assert (settings.quality_filter.enabled, settings.quality_filter.threshold) == (True, 0.3)
    notice = settings.config_notice or ""
    assert "is GrooveSeek's" in notice and "[transport] kind -> [serve] transport" in notice
    assert "groove config migrate" in notice


def test_every_grooveseek_key_with_a_twin_lands_on_groove_s_key(every_key: Path):
    s = load_settings(every_key)
    assert [f.path for f in s.kb_path] == [(every_key.parent / "notes").resolve()]  # relative to the file
    assert (s.search.reranker, s.search.rerank_by_default) == ("", True)
    assert s.index.exclude_dirs == ["drafts", "build"]
    assert (s.quality_filter.enabled, s.quality_filter.threshold) == (False, 0.45)
    assert s.best_practice.path_templates == ["guides/{target}/GUIDE.md"]
    assert s.parsers.enabled == ["markdown", "txt"]
    assert (s.watch.enabled, s.watch.debounce_ms) == (False, 800)
    assert (s.serve.transport, s.serve.bind) == ("http", "127.0.0.1:3911")
    assert s.serve.http.allowed_hosts == ["notes.lan"]
    assert s.serve.http.allowed_origins == ["https://notes.lan"]
    assert s.serve.http.max_sessions == 64
    e = s.embedding
    assert e.backend == "openai"
    assert (e.openai.endpoint, e.openai.model, e.openai.dimension, e.openai.timeout_s) == (
        "http://127.0.0.1:8001/v1",  # groove adds /embeddings itself
        "e5-small",
        384,
        45.0,
    )
    assert (s.eval.history, s.eval.regression_threshold) == (7, 0.08)
    assert s.search.min_confidence_ratio == 1.8
    assert (s.search.mmr.enabled, s.search.mmr.lambda_, s.search.mmr.same_doc_penalty) == (True, 0.6, 0.2)
    f = s.search.fusion
    assert (f.rrf_k, f.heading_weight, f.context_weight, f.content_weight) == (40.0, 3.0, 0.5, 1.5)
    p = s.search.parent_retriever
    assert (p.enabled, p.whole_doc_threshold_tokens, p.max_expanded_tokens) == (True, 80, 1500)


def test_a_transport_http_table_without_kind_means_http_as_in_grooveseek(tmp_path: Path):
    config = write(tmp_path / "groove.toml", '[transport.http]\nbind = "127.0.0.1:3922"\n')
    s = load_settings(config)
    assert (s.serve.transport, s.serve.bind) == ("http", "127.0.0.1:3922")


# GrooveSeek keys groove has no twin for: the line, and what the refusal must say to write instead.
REFUSED = {
    "model-bge-m3": ('model = "bge-m3"', '[embedding] model = "intfloat/multilingual-e5-small"'),
    "model-bge-small": ('model = "bge-small-en-v1.5"', '[embedding] model = "sentence-transformers/all-MiniLM-L6-v2"'),
    "reranker": ('reranker = "bge-v2-m3"', 'hf download BAAI/bge-reranker-v2-m3 --local-dir DIR'),
    "reranker-jina": ('reranker = "jina-v2-ml"', "jinaai/jina-reranker-v2-base-multilingual"),
    "fastembed_cache_dir": ('fastembed_cache_dir = "/var/cache/fe"', "delete the line"),
    "grammar_dir": ('grammar_dir = "/opt/grammars"', "groove indexes no source code"),
    "parsers-rs": ('[parsers]\nenabled = ["md", "rs"]', 'write enabled = ["markdown"]'),
    "parsers-xls": ('[parsers]\nenabled = ["md", "xls"]', "save it as .xlsx"),
    "parsers-code": ("[parsers.code]\nmax_chunk_chars = 3500", "delete the section"),
    "fail_on_frontmatter_error": ("[index]\nfail_on_frontmatter_error = true", "run `groove validate`"),
    "contextual": ("[contextual]\nenabled = true", "context_weight"),
    "allowed_hosts-empty": ("[transport.http]\nallowed_hosts = []", "cannot turn the Host check off"),
    "allowed_origins-empty": ("[transport.http]\nallowed_origins = []", "cannot turn the Origin check off"),
    "healthz_public": ("[transport.http]\nhealthz_public = true", "add the probe's Host to [serve.http] allowed_hosts"),
    "max_sessions-0": ("[transport.http]\nmax_sessions = 0", "[serve.http] max_sessions = N (1..100000)"),
    "systemd_socket": ("[transport.http]\nsystemd_socket = true", "groove service install"),
    "golden": ('[eval]\ngolden = "sets/golden.yml"', "`groove eval sets/golden.yml`"),
    "k_values": ("[eval]\nk_values = [1, 3]", "`groove eval --k 1,3`"),
    "min_confidence_ratio-0": (
        '[transport]\nkind = "stdio"\n[search]\nmin_confidence_ratio = 0.0',
        "[search] confidence_margin",
    ),
    "api_key": ('[embedding]\nprovider = "openai-compatible"\napi_key = "s3cret"', 'api_key_env = "GROOVE_EMBEDDING'),
    "two-models": (
        '[embedding]\nprovider = "openai-compatible"\nquery_model = "q"\ndocument_model = "d"',
        "[embedding.openai] model = NAME",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_grooveseek_key_without_a_twin_is_refused_with_the_exact_replacement(tmp_path: Path, case: str):
    line, replacement = REFUSED[case]
    config = write(tmp_path / "groove.toml", line + "\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    message = str(err.value)
    assert "is GrooveSeek's" in message and str(config) in message
    assert replacement in message, message
    assert "s3cret" not in message  # a key in the file is never echoed


def test_every_refusal_is_named_at_once(tmp_path: Path):
    config = write(
        tmp_path / "groove.toml",
        'model = "bge-m3"\nreranker = "bge-base"\nfastembed_cache_dir = "/c"\n[contextual]\nenabled = true\n',
    )
    with pytest.raises(ConfigError, match="these 4 keys") as err:
        load_settings(config)
    for key in ("model = ", "reranker = ", "fastembed_cache_dir = ", "[contextual]"):
        assert key in str(err.value)


def test_a_grooveseek_key_and_groove_s_twin_set_differently_are_refused(tmp_path: Path):
    config = write(
        tmp_path / "groove.toml", '[serve]\nbind = "127.0.0.1:4000"\n[transport.http]\nbind = "127.0.0.1:4001"\n'
    )
    with pytest.raises(ConfigError, match=r"also sets \[serve\] bind = \"127.0.0.1:4000\": keep one"):
        load_settings(config)


@pytest.mark.skipif(
    "exclude_headings" not in SearchSettings.model_fields,
    reason="[search] exclude_headings is added by another change (issue 38, point 4); the mapping waits for it",
)
def test_grooveseeks_exclude_headings_becomes_search_exclude_headings(tmp_path: Path):
    (tmp_path / "notes").mkdir()
    config = Path(shutil.copy(FIXTURES / "exclude-headings.toml", tmp_path / "groove.toml"))
    assert load_settings(config).search.exclude_headings == ["Further reading", "参考リンク"]  # type: ignore[attr-defined]


def test_the_parser_id_md_is_markdown_in_groove_s_own_file_too(tmp_path: Path):
    config = write(tmp_path / "groove.toml", '[parsers]\nenabled = ["md", "txt", "markdown"]\n')
    s = load_settings(config)
    assert s.parsers.enabled == ["markdown", "txt"] and s.config_notice is None  # groove's own: no notice


# --- real groove processes ----------------------------------------------------------------------------------------


def test_reading_a_grooveseek_file_says_so_in_one_info_line(spawn, tmp_path: Path):
    (tmp_path / "notes").mkdir()
    config = Path(shutil.copy(FIXTURES / "groove.toml", tmp_path / "groove.toml"))
    proc = spawn.groove("validate", "--config", str(config), "--kb", str(tmp_path / "notes"), home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "GrooveSeek" in line]
    assert len(said) == 1 and "config_grooveseek" in said[0] and "[transport.http] bind -> [serve] bind" in said[0]


def test_migrate_prints_groove_s_own_file_which_loads_with_no_warning(spawn, every_key: Path, tmp_path: Path):
    proc = spawn.groove("config", "migrate", str(every_key), home=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    text = proc.stdout
    assert text.startswith("# groove.toml written by `groove config migrate` from GrooveSeek's")
    for gone in ("[transport", "bm25_", "history_size", "provider", "query_model", '"md"'):
        assert gone not in text
    out = write(tmp_path / "groove.toml", text)
    s = load_settings(out)
    assert s.config_notice is None  # groove's own file now
    assert (s.serve.transport, s.search.fusion.heading_weight, s.eval.history) == ("http", 3.0, 7)
    assert s.embedding.openai.endpoint == "http://127.0.0.1:8001/v1"
    loaded = spawn.groove("validate", "--config", str(out), home=tmp_path, cwd=tmp_path)
    assert loaded.returncode == 0 and loaded.stderr == "", loaded.stderr


def test_migrate_write_never_writes_over_a_file_unless_asked(spawn, tmp_path: Path):
    source = Path(shutil.copy(FIXTURES / "groove.toml", tmp_path / "groove.toml"))
    original = source.read_text(encoding="utf-8")
    target = write(tmp_path / "new" / "groove.toml", "# mine\n")
    refused = spawn.groove("config", "migrate", str(source), "--write", str(target), home=tmp_path)
    assert refused.returncode == 2 and "exists" in refused.stderr and "--force" in refused.stderr
    assert target.read_text(encoding="utf-8") == "# mine\n"
    done = spawn.groove("config", "migrate", str(source), "--write", str(target), "--force", home=tmp_path)
    assert done.returncode == 0 and f"wrote {target}" in done.stderr
    assert "[serve]" in target.read_text(encoding="utf-8") and done.stdout == ""
    # In place: refused without --force; with it, GrooveSeek's original is kept beside it.
    in_place = spawn.groove("config", "migrate", "--write", home=tmp_path, cwd=tmp_path)
    assert in_place.returncode == 2 and "groove.toml.grooveseek" in in_place.stderr
    assert source.read_text(encoding="utf-8") == original
    forced = spawn.groove("config", "migrate", "--write", "--force", home=tmp_path, cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "groove.toml.grooveseek").read_text(encoding="utf-8") == original
    assert load_settings(source).config_notice is None and "[transport]" not in source.read_text(encoding="utf-8")


def test_migrate_leaves_refused_keys_as_comments_and_exits_1(spawn, tmp_path: Path):
    source = write(tmp_path / "gs.toml", 'model = "bge-m3"\n[watch]\ndebounce_ms = 700\n')
    proc = spawn.groove("config", "migrate", str(source), home=tmp_path)
    assert proc.returncode == 1
    assert "groove: not migrated: model = \"bge-m3\"" in proc.stderr
    assert "#   model = \"bge-m3\": groove loads no model" in proc.stdout
    out = write(tmp_path / "groove.toml", proc.stdout)
    assert load_settings(out).watch.debounce_ms == 700


def test_migrate_says_a_groove_file_has_nothing_to_migrate(spawn, tmp_path: Path):
    source = write(tmp_path / "groove.toml", "[watch]\ndebounce_ms = 700\n")
    proc = spawn.groove("config", "migrate", str(source), home=tmp_path)
    assert proc.returncode == 2 and "nothing to migrate" in proc.stderr and proc.stdout == ""
