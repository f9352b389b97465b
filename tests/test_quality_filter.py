"""The per-chunk quality filter (issue 25 point 1, decision 0020): each chunk is scored 0..1 when it is
indexed (groove/corpus/quality.py), the score is stored with it, and `search` and `related` hide the chunks
under `[quality_filter] threshold` unless a search asks otherwise (`min_quality`, `include_low_quality`).

Real note files, real SQLite indexes, the bag-of-words embedder (tests/support/fakes.py) for most, the real default
model for one, and a real MCP client over stdio. The suite runs with the filter off (tests/conftest.py);
every test here turns it on through settings or the environment, as a user would.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from groove.config import QualityFilterSettings, Settings, load_settings, replace_settings
from groove.corpus import quality
from groove.index import Index
from groove.search.answers import search_text
from groove.search.compiler import QueryError
from groove.search.request import SearchRequest, tool_fields
from groove.store.memory import VectorMatrix
from groove.store.protocols import TextQuery
from groove.store.sqlite import connection, schema
from groove.store.sqlite import search as sqlite_search
from groove.store.sqlite.store import load_all
from tests.support.common import QUALITY_FILTER_OFF, write
from tests.support.fakes import BagOfWordsEmbedder
from tests.support.oneshot import index_once, related_once, search_once
from tests.support.server import FAKE_GROOVE, serve_argv, server_env

ON = {"quality_filter.enabled": True}

GOOD = {
    "k8s/networking.md": "# Kubernetes networking\n\nKubernetes pods reach each other over one flat network. A CNI plugin "
                         "such as Calico or Cilium provides it and enforces the network policies between namespaces.\n",
    "k8s/upgrades.md": "# Upgrading a Kubernetes cluster\n\nDrain one node at a time, upgrade the kubelet, uncordon it, "
                       "and watch the pods come back before moving on to the next node of the cluster.\n",
    "ja/煮物.md": "# 肉じゃがの作り方\n\nじゃがいもは大きめに切り、煮崩れしないように弱火でじっくり煮る。味は一晩置くと染みる。\n",
}
LOW = {
    "k8s/stub.md": "# Kubernetes\n\nTODO\n",                                  # a stub: a heading and a placeholder
    "k8s/links.md": "# Kubernetes links\n\n- [Kubernetes docs](https://kubernetes.io/docs/)\n- [[networking]]\n",
    "ja/概要.md": "# 肉じゃが\n\n詳細は後述\n",                                   # 詳細は後述: "details follow"
}


def notes(kb: Path, extra: dict[str, str] | None = None) -> Path:
    for rel, text in {**GOOD, **LOW, **(extra or {})}.items():
        write(kb / rel, text)
    return kb


def built(tmp_path: Path, extra: dict[str, str] | None = None, **overrides) -> Settings:
    kb = notes(tmp_path / "notes", extra)
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "index.sqlite", **{**ON, **overrides})
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    return settings


def search(settings: Settings, query: str, **kw):
    return anyio.run(lambda: search_once(settings, SearchRequest(query=query, **kw), embedder=BagOfWordsEmbedder()))


def paths(answer) -> list[str]:
    return [h.path for h in answer.results]


def rows(index: Path, sql: str, args: tuple = ()) -> list[tuple]:
    con = connection.connect_sync(index, readonly=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


# --- the score ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "TODO", "TBD", "WIP: fill this in", "# Kubernetes\n\nTODO\n", "## 概要\n\n詳細は後述\n", "# 設計\n\n後で書く\n",
    "## 準備中\n", "See below.", "# Title only, with nothing under it\n", "# A\n\n## B\n\n### C\n",
    "## 関連リンク\n\n[Set-Acl](Set-Acl.md)\n\n[Get-Acl](Get-Acl.md)\n",
    "## Links\n\n- [Kubernetes docs](https://kubernetes.io)\n- [[networking]]\n- https://example.com/a/b\n",
    "<!-- TODO: write the intro -->", "```\nls\n```", "# Postmortem: expired TLS certificate\n\nTODO: write this up\n",
    "- [ ] TODO: 比較表を作る",
])
def test_stubs_placeholders_headings_alone_and_link_lists_score_under_the_threshold_in_both_languages(text):
    assert quality.text_quality(text) < QualityFilterSettings().threshold


@pytest.mark.parametrize("text", [
    GOOD["k8s/networking.md"], GOOD["ja/煮物.md"],
    "Ask Bob about the Q3 budget.",                       # one short line, still a sentence
    "会議は火曜日の午後に変更。",                             # the same in Japanese
    "## 関連\n\n- [[SQLite WAL mode]]: 同じデータベースファイルで運用している。\n",  # links with words of their own
    "## Restart nginx\n\n```\nsudo systemctl restart nginx\n```\n",
    "TODO list app: the sync engine keeps a local SQLite copy and merges edits by timestamp.",
])
def test_a_sentence_a_link_with_words_of_its_own_and_a_code_recipe_keep_their_score(text):
    assert quality.text_quality(text) >= QualityFilterSettings().threshold


def test_a_japanese_line_scores_about_as_an_english_line_of_the_same_meaning():
    en, ja = quality.text_quality("The meeting moved to Tuesday."), quality.text_quality("会議は火曜日に移った。")
    assert abs(en - ja) < 0.15


def test_a_text_in_many_notes_keeps_less_of_its_score_for_each_doubling_of_its_notes():
    factors = [quality.repeat_factor(n) for n in (1, 4, 8, 9, 16, 17, 32, 33, 64, 65, 1000)]
    assert factors[:3] == [1.0, 1.0, 1.0]  # versions of one page, a quoted paragraph: not a template
    assert factors[3] == factors[4] == pytest.approx(0.7071, abs=1e-4)
    assert factors[5] == factors[6] == 0.5 and factors[9] == 0.25
    assert factors == sorted(factors, reverse=True)
    assert quality.quality("Made from the team template.", 20) == pytest.approx(
        quality.text_quality("Made from the team template.") * 0.5)


def test_the_score_depends_on_the_embedded_text_alone():
    """Surrounding whitespace is not embedded (chunking.embed_text): it does not move the score either, so one
    hash has one score."""
    text = GOOD["k8s/networking.md"]
    assert quality.text_quality("\n\n" + text + "\n\n  ") == quality.text_quality(text)


# --- stored with the chunk -----------------------------------------------------------------------------------

def test_each_chunk_is_stored_with_its_score_when_its_note_is_indexed(tmp_path):
    settings = built(tmp_path)
    scored = dict(rows(settings.resolved_index_path(),
                       "SELECT d.path, c.quality FROM chunks c JOIN documents d ON d.id = c.doc_id"))
    assert {p for p, q in scored.items() if q < 0.3} == set(LOW)
    assert all(scored[p] >= 0.3 for p in GOOD)
    assert rows(settings.resolved_index_path(), "SELECT count(*) FROM chunks WHERE quality != text_quality") == [(0,)]


def template_notes(kb: Path, n: int) -> None:
    for i in range(n):
        write(kb / f"meetings/{i:02d}.md", f"# Meeting {i}\n\nWe went through item {i} and agreed the steps for release "
                                            f"{i}.\n\n## Footer\n\nMade from the team template.\n")


def test_a_template_pasted_into_many_notes_is_scored_down_and_gets_its_score_back_when_the_copies_go(tmp_path):
    kb = tmp_path / "notes"
    template_notes(kb, 20)
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "index.sqlite",
                             **{**ON, "index.min_chunk_tokens": 0})
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    footer = "SELECT DISTINCT text_quality, quality FROM chunks WHERE heading = 'Footer'"
    [(own, score)] = rows(settings.resolved_index_path(), footer)
    assert own >= 0.3 and score == pytest.approx(own * 0.5) and score < 0.3  # 17-32 notes: half its score
    hidden = search(settings, "team template", retriever="fts")
    assert "Footer" not in [h.heading for h in hidden.results]

    for i in range(8, 20):  # 8 notes left: no longer a template
        (kb / f"meetings/{i:02d}.md").unlink()
    anyio.run(lambda: index_once(settings, embedder=BagOfWordsEmbedder()))
    assert rows(settings.resolved_index_path(), footer) == [(own, own)]
    assert "Footer" in [h.heading for h in search(settings, "team template", retriever="fts").results]


# --- search ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("retriever", ["hybrid", "fts", "vector"])
def test_search_hides_low_quality_chunks_from_each_half_and_include_low_quality_shows_them(tmp_path, retriever):
    settings = built(tmp_path)
    for query, low in (("kubernetes", {"k8s/stub.md", "k8s/links.md"}), ("肉じゃが", {"ja/概要.md"})):
        shown = paths(search(settings, query, retriever=retriever, limit=10))
        assert shown and not set(shown) & low, (query, shown)
        everything = paths(search(settings, query, retriever=retriever, limit=10, include_low_quality=True))
        assert low <= set(everything), (query, everything)
        assert set(paths(search(settings, query, retriever=retriever, limit=10, min_quality=0.0))) == set(everything)


def test_min_quality_raises_or_lowers_the_bar_for_one_search(tmp_path):
    settings = built(tmp_path)
    links = quality.text_quality(LOW["k8s/links.md"])
    stub = quality.text_quality(LOW["k8s/stub.md"])
    assert stub < links < 0.3
    lowered = paths(search(settings, "kubernetes", limit=10, min_quality=(stub + links) / 2))
    assert "k8s/links.md" in lowered and "k8s/stub.md" not in lowered
    assert paths(search(settings, "kubernetes", limit=10, min_quality=1.0)) == \
        [p for p in paths(search(settings, "kubernetes", limit=10)) if p in GOOD]  # every good note scores 1


def test_turning_the_setting_off_shows_everything_without_reindexing(tmp_path, monkeypatch):
    settings = built(tmp_path)
    embedded = rows(settings.resolved_index_path(), "SELECT count(*) FROM embeddings")
    off = replace_settings(settings, **{"quality_filter.enabled": False})
    assert {"k8s/stub.md", "k8s/links.md"} <= set(paths(search(off, "kubernetes", limit=10)))
    monkeypatch.delenv(QUALITY_FILTER_OFF[0])  # the default, as a user without a [quality_filter] section has it
    default = load_settings(None, kb_path=settings.kb_path, index_path=settings.index_path)
    assert default.quality_filter == QualityFilterSettings(enabled=True, threshold=0.3)
    assert not {"k8s/stub.md", "k8s/links.md"} & set(paths(search(default, "kubernetes", limit=10)))
    monkeypatch.setenv("GROOVE_QUALITY_FILTER__ENABLED", "false")
    assert "k8s/stub.md" in paths(search(load_settings(None, kb_path=settings.kb_path,
                                                       index_path=settings.index_path), "kubernetes", limit=10))
    assert rows(settings.resolved_index_path(), "SELECT count(*) FROM embeddings") == embedded


def test_hidden_chunks_never_cost_a_leg_a_result(tmp_path):
    """Thirty stubs nearer the query than anything else: each leg still returns `limit` chunks that are kept,
    from sqlite-vec's KNN and from the in-memory matrix, filtered or not."""
    stubs = {f"stubs/{i:02d}.md": f"# Kubernetes {i}\n\nTODO\n" for i in range(30)}
    good = {f"good/{i}.md": f"# Cluster note {i}\n\nKubernetes cluster note {i}: the scheduler places pods on nodes "
                            f"by their requests and the taints of node pool {i}.\n" for i in range(6)}
    settings = built(tmp_path, {**stubs, **good})
    index = settings.resolved_index_path()
    query = BagOfWordsEmbedder().embed_query("kubernetes")

    async def legs():
        con = await connection.connect(index, readonly=True)
        matrix = VectorMatrix(load_all(index), 1 << 30)
        try:
            unfiltered = await sqlite_search.vector_scored(con, query, 5)
            knn = await sqlite_search.vector_scored(con, query, 5, min_quality=0.3)
            in_memory = await sqlite_search.vector_scored(con, query, 5, matrix=matrix, min_quality=0.3)
            docs = [r[0] for r in await (await con.execute("SELECT id FROM documents")).fetchall()]
            filtered = await sqlite_search.vector_scored(con, query, 5, allowed_docs=docs, min_quality=0.3)
            fts = await sqlite_search.text_scored(con, TextQuery("phrases", ("kubernetes",)), 5, min_quality=0.3)
            scores = await sqlite_search.chunk_quality(con, [c for c, _ in unfiltered + knn + in_memory + filtered + fts])
            return unfiltered, knn, in_memory, filtered, fts, scores
        finally:
            await con.close()

    unfiltered, knn, in_memory, filtered, fts, scores = anyio.run(legs)
    assert all(scores[c] < 0.3 for c, _ in unfiltered)  # the stubs are the nearest
    for leg in (knn, in_memory, filtered, fts):
        assert len(leg) == 5 and all(scores[c] >= 0.3 for c, _ in leg)
    assert [c for c, _ in knn] == [c for c, _ in in_memory] == [c for c, _ in filtered]  # distances: float rounding


def test_a_vector_leg_with_more_hidden_vectors_than_sqlite_vecs_k_scans_the_chunks_kept(tmp_path, monkeypatch):
    stubs = {f"stubs/{i:02d}.md": f"# Kubernetes {i}\n\nTODO\n" for i in range(12)}
    settings = built(tmp_path, stubs)
    query = BagOfWordsEmbedder().embed_query("kubernetes")
    monkeypatch.setattr(sqlite_search, "MAX_KNN_K", 8)  # k would be 3 + 14 hidden vectors

    async def leg():
        con = await connection.connect(settings.resolved_index_path(), readonly=True)
        try:
            return await sqlite_search.vector_scored(con, query, 3, min_quality=0.3)
        finally:
            await con.close()

    kept = anyio.run(leg)
    assert len(kept) == 3
    assert {p for (p,) in rows(settings.resolved_index_path(), "SELECT d.path FROM chunks c JOIN documents d ON "
                               "d.id = c.doc_id WHERE c.id IN (%s)" % ",".join(str(c) for c, _ in kept))} <= set(GOOD)


@pytest.mark.parametrize("given, message", [
    (1.5, "min_quality must be between 0.0 and 1.0, got 1.5"),
    (-0.1, "min_quality must be between 0.0 and 1.0, got -0.1"),
    ("0.5", "min_quality must be a finite number, got '0.5'"),
])
def test_min_quality_outside_0_to_1_is_refused_in_one_line(given, message):
    with pytest.raises(QueryError) as refused:
        SearchRequest(query="kubernetes", min_quality=given)
    assert str(refused.value) == message


def test_asking_for_min_quality_and_include_low_quality_at_once_is_refused_in_one_line():
    with pytest.raises(QueryError, match="give min_quality or include_low_quality, not both") as refused:
        SearchRequest(query="kubernetes", min_quality=0.5, include_low_quality=True)
    assert "\n" not in str(refused.value)


def test_the_search_tool_schema_carries_both_arguments_with_their_bounds():
    fields = tool_fields()
    assert fields["min_quality"][1]["anyOf"][0]["minimum"] == 0.0 and fields["min_quality"][1]["anyOf"][0]["maximum"] == 1.0
    assert fields["include_low_quality"][0] is False and fields["include_low_quality"][1]["type"] == "boolean"
    assert "0.3" in fields["min_quality"][1]["description"]


# --- explain --------------------------------------------------------------------------------------------------

def test_explain_names_the_results_the_filter_hid_and_each_shown_results_score(tmp_path):
    settings = built(tmp_path)
    answer = search(settings, "kubernetes", limit=10, explain=True)
    q = answer.explain["quality_filter"]
    assert q["min_quality"] == 0.3 and q["set_by"] == "settings" and q["hidden_in_index"] == len(LOW)
    assert {"k8s/stub.md", "k8s/links.md"} <= {h["path"] for h in q["hidden_results"]}
    assert all(h["quality"] < 0.3 and h["rank"] >= 1 for h in q["hidden_results"])
    assert len(q["results_quality"]) == len(answer.results) and min(q["results_quality"]) >= 0.3
    text = search_text(answer)
    assert "quality filter:   hides chunks scoring under 0.3 (set by settings), 3 in the index" in text
    assert "k8s/stub.md lines 1-3 (quality 0.05)" in text and "include_low_quality shows them" in text
    assert ", quality 1.00  k8s/" in text

    shown = search(settings, "kubernetes", limit=10, explain=True, include_low_quality=True)
    q = shown.explain["quality_filter"]
    assert q["min_quality"] is None and q["set_by"] == "include_low_quality" and q["hidden_results"] == []
    assert {"k8s/stub.md", "k8s/links.md"} <= {h["path"] for h in q["would_hide"]}
    assert f"at the threshold 0.3 it would hide {len(q['would_hide'])} of these results" in search_text(shown)


# --- the graph --------------------------------------------------------------------------------------------------

def test_related_leaves_out_notes_reached_only_through_a_low_quality_chunk(tmp_path):
    settings = built(tmp_path)
    near = anyio.run(lambda: related_once(settings, "k8s/networking.md", embedder=BagOfWordsEmbedder()))
    assert not {n.path for n in near.related} & set(LOW)
    off = replace_settings(settings, **{"quality_filter.enabled": False})
    every = anyio.run(lambda: related_once(off, "k8s/networking.md", embedder=BagOfWordsEmbedder()))
    assert {"k8s/stub.md", "k8s/links.md"} <= {n.path for n in every.related}
    # A note of nothing but low-quality chunks still has neighbours when it is the one asked about.
    assert anyio.run(lambda: related_once(settings, "k8s/stub.md", embedder=BagOfWordsEmbedder())).related


# --- the migration ----------------------------------------------------------------------------------------------

def test_an_index_of_the_schema_before_the_scores_gets_them_from_its_chunks_without_embedding_again(tmp_path):
    settings = built(tmp_path, {f"meetings/{i:02d}.md": f"# Meeting {i}\n\nItem {i} agreed.\n\n## Footer\n\n"
                                "Made from the team template, which every meeting note carries.\n" for i in range(20)},
                     **{"index.min_chunk_tokens": 0})
    index = settings.resolved_index_path()
    scored = sorted(rows(index, "SELECT id, text_quality, quality FROM chunks"))
    step = next(v for v, sql in schema.MIGRATIONS.items() if "ADD COLUMN quality" in sql)
    con = connection.connect_sync(index)
    con.execute("DROP INDEX chunks_quality")
    con.execute("ALTER TABLE chunks DROP COLUMN quality")
    con.execute("ALTER TABLE chunks DROP COLUMN text_quality")
    schema.set_meta_sync(con, "schema_version", str(step))
    con.close()
    embedded = rows(index, "SELECT count(*), max(id) FROM embeddings")
    computed = rows(index, "SELECT value FROM meta WHERE key = 'embeddings_computed'")

    embedder = BagOfWordsEmbedder()
    report = anyio.run(lambda: index_once(settings, embedder=embedder))
    assert int(rows(index, "SELECT value FROM meta WHERE key = 'schema_version'")[0][0]) == schema.SCHEMA_VERSION
    assert sorted(rows(index, "SELECT id, text_quality, quality FROM chunks")) == scored
    assert any(q < own for _, own, q in scored)  # the template factor came back too
    assert embedder.document_calls == 0 and report.pending_chunks == 0  # nothing embedded again
    assert rows(index, "SELECT count(*), max(id) FROM embeddings") == embedded
    assert rows(index, "SELECT value FROM meta WHERE key = 'embeddings_computed'") == computed


# --- front ends ---------------------------------------------------------------------------------------------------

def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_over_mcp_stdio_a_stub_is_hidden_by_default_and_shown_with_include_low_quality(spawn, tmp_path):
    kb = notes(tmp_path / "notes")
    index = tmp_path / "index.sqlite"
    await index_once(load_settings(None, kb_path=kb, index_path=index), embedder=BagOfWordsEmbedder())
    env = {**server_env(tmp_path), QUALITY_FILTER_OFF[0]: "true"}  # what a user has: the filter on
    argv = serve_argv(kb, index, "--transport", "stdio", command=FAKE_GROOVE)
    params = spawn.stdio(command=argv[0], args=argv[1:], env=env, cwd=str(tmp_path))
    with anyio.fail_after(120):
        async with Client(params) as client:
            schema = {t.name: t for t in (await client.list_tools()).tools}["search"].input_schema["properties"]
            assert {"min_quality", "include_low_quality"} <= set(schema)
            default = await client.call_tool("search", {"query": "kubernetes", "limit": 10})
            assert not default.is_error, _text(default)
            found = {r["path"] for r in default.structured_content["results"]}
            assert "k8s/networking.md" in found and "k8s/stub.md" not in found
            everything = await client.call_tool("search", {"query": "kubernetes", "limit": 10,
                                                           "include_low_quality": True})
            assert "k8s/stub.md" in {r["path"] for r in everything.structured_content["results"]}
            explained = await client.call_tool("search", {"query": "kubernetes", "limit": 10, "explain": True})
            assert "k8s/stub.md" in {h["path"] for h in explained.structured_content["explain"]["quality_filter"]
                                     ["hidden_results"]}
            assert "quality filter:   hides chunks scoring under 0.3" in _text(explained)
            for bad, message in (({"min_quality": 2}, "min_quality must be between 0.0 and 1.0, got 2"),
                                 ({"min_quality": "high"}, "min_quality must be a finite number, got 'high'"),
                                 ({"include_low_quality": "yes"}, "include_low_quality must be true or false, got 'yes'"),
                                 ({"min_quality": 0.5, "include_low_quality": True}, "not both")):
                refused = await client.call_tool("search", {"query": "kubernetes", **bad})
                assert refused.is_error and message in _text(refused) and "\n" not in _text(refused).strip()


def test_the_command_line_takes_min_quality_and_include_low_quality(spawn, tmp_path):
    kb = notes(tmp_path / "notes")
    index = tmp_path / "index.sqlite"
    anyio.run(lambda: index_once(load_settings(None, kb_path=kb, index_path=index), embedder=BagOfWordsEmbedder()))
    env = {**server_env(tmp_path), QUALITY_FILTER_OFF[0]: "true"}

    def groove(*argv: str) -> subprocess.CompletedProcess[str]:
        return spawn.run([*FAKE_GROOVE, "search", "--kb", str(kb), "--index", str(index), "--no-daemon",
                               "--format", "json", *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=180)

    def found(done: subprocess.CompletedProcess[str]) -> set[str]:
        assert done.returncode == 0, done.stderr
        return {r["path"] for r in json.loads(done.stdout)["results"]}

    assert "k8s/stub.md" not in found(groove("kubernetes"))
    assert "k8s/stub.md" in found(groove("kubernetes", "--include-low-quality"))
    assert "k8s/stub.md" in found(groove("kubernetes", "--min-quality", "0"))
    refused = groove("kubernetes", "--min-quality", "1.5")
    assert refused.returncode == 1  # a bad query, as every other (QueryError)
    assert refused.stderr == "groove: error: min_quality must be between 0.0 and 1.0, got 1.5\n"


# --- the real model ---------------------------------------------------------------------------------------------

def test_with_the_default_model_a_stub_is_hidden_from_the_vector_half_and_shown_on_request(real_model, tmp_path):
    kb = notes(tmp_path / "notes")
    settings = load_settings(None, kb_path=kb, index_path=tmp_path / "index.sqlite", **ON)
    assert settings.embedding.model == Settings().embedding.model  # the packaged default, not the fake

    async def run():
        await index_once(settings)
        async with Index.open(settings, readonly=True) as index:
            out = {}
            for retriever in ("vector", "hybrid"):
                for include in (False, True):
                    answer = await index.search(SearchRequest(query="Kubernetes の TODO", retriever=retriever,
                                                              limit=6, include_low_quality=include))
                    out[retriever, include] = [h.path for h in answer.results]
            return out

    found = anyio.run(run)
    for retriever in ("vector", "hybrid"):
        assert not set(found[retriever, False]) & set(LOW), found
        assert "k8s/stub.md" in found[retriever, True], found
    assert rows(settings.resolved_index_path(), "SELECT count(*) FROM chunks WHERE quality < 0.3") == [(len(LOW),)]
