"""GrooveSeek's `groove.toml` read as groove's (issue 38, point 2). Pure: data in, data and messages out.

GrooveSeek 1.0 (the system groove was specified from) writes its settings in a file of the same name with other
keys: `[transport] kind`, `model`, `reranker`, `[eval] history_size`, `[search.fusion] bm25_heading_weight` ...
`translate` maps each of its keys to groove's own key where the meaning matches, and refuses the others, each
with what to write instead (a model groove cannot load offline names what groove can load). The keys both
systems spell alike (`[quality_filter]`, `[best_practice]`, `[watch]`, `[search.mmr]` ...) pass through as
they are, and groove's own keys in the same file too, so a file half migrated still reads.

`config.read_config_file` calls `translate` for a file `looks_like_grooveseek`; `groove config migrate`
writes the translation as groove's own file (`render_toml`). docs/configuration.md, "Coming from GrooveSeek",
is the table of every key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# GrooveSeek's keys groove does not spell the same way: one of them marks a file as GrooveSeek's.
GROOVESEEK_KEYS = frozenset(
    {
        "model",
        "reranker",
        "rerank_by_default",
        "fastembed_cache_dir",
        "grammar_dir",
        "exclude_headings",
        "exclude_dirs",
        "transport",
        "contextual",
        "eval.golden",
        "eval.history_size",
        "eval.k_values",
        "search.fusion.bm25_heading_weight",
        "search.fusion.bm25_context_weight",
        "search.fusion.bm25_content_weight",
        "parsers.code",
        "index.fail_on_frontmatter_error",
        "embedding.provider",
        "embedding.endpoint",
        "embedding.query_model",
        "embedding.document_model",
        "embedding.dimension",
        "embedding.api_key",
        "embedding.timeout_seconds",
    }
)

# GrooveSeek's parser ids -> groove's (`[parsers] enabled`); groove also accepts "md" itself.
PARSER_IDS = {"md": "markdown", "txt": "txt", "pdf": "pdf", "docx": "docx", "xlsx": "xlsx", "pptx": "pptx"}

# GrooveSeek's model names -> what they are on the Hugging Face hub, and what groove loads in their place.
MODELS = {
    "bge-small-en-v1.5": ("BAAI/bge-small-en-v1.5", "sentence-transformers/all-MiniLM-L6-v2", "English"),
    "bge-m3": ("BAAI/bge-m3", "intfloat/multilingual-e5-small", "Japanese and English"),
}
RERANKERS = {
    "bge-v2-m3": "BAAI/bge-reranker-v2-m3",
    "jina-v2-ml": "jinaai/jina-reranker-v2-base-multilingual",
    "bge-base": "BAAI/bge-reranker-base",
}
DEFAULT_GOLDEN = ".groove-eval.yml"
DEFAULT_KS = [1, 5, 10]


@dataclass(frozen=True)
class Mapped:
    """A GrooveSeek key and the groove key it became (`target` empty: nothing to write, groove does it already)."""

    source: str
    target: str
    note: str = ""


@dataclass(frozen=True)
class Refused:
    """A GrooveSeek key groove has no twin for, with the exact replacement."""

    source: str
    value: Any
    replacement: str

    def __str__(self) -> str:
        return f"{self.source} = {_shown(self.value)}: {self.replacement}"


@dataclass
class Translation:
    data: dict[str, Any] = field(default_factory=dict)  # groove's own settings, nested as in groove.toml
    mapped: list[Mapped] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)

    def put(self, target: str, value: Any, source: str, note: str = "") -> None:
        node = self.data
        parts = target.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if parts[-1] in node and node[parts[-1]] != value:
            self.refused.append(
                Refused(source, value, f"the same file also sets {_key(target)} = {_shown(node[parts[-1]])}: keep one")
            )
            return
        node[parts[-1]] = value
        self.mapped.append(Mapped(source, _key(target), note))

    def same(self, source: str, note: str) -> None:
        """A key with nothing to write: groove already behaves so."""
        self.mapped.append(Mapped(source, "", note))

    def refuse(self, source: str, value: Any, replacement: str) -> None:
        self.refused.append(Refused(source, value, replacement))

    def renamed(self) -> list[Mapped]:
        """The keys whose name changed (or that had nothing to write), for the one info line."""
        return [m for m in self.mapped if m.target != m.source]

    def summary(self, where: str) -> str:
        """The one info line said when a GrooveSeek file is read."""
        moved = ", ".join(f"{m.source} -> {m.target or '(groove does so already)'}" for m in self.renamed())
        return (
            f"{where} is GrooveSeek's: its keys read as groove's ({moved or 'all spelled alike'}); "
            f"`groove config migrate {where}` writes groove's own file"
        )

    def refusal(self, where: str) -> str:
        return (
            f"{where} is GrooveSeek's, and groove has no twin for "
            + ("this key" if len(self.refused) == 1 else f"these {len(self.refused)} keys")
            + ": "
            + "; ".join(str(r) for r in self.refused)
        )


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _key(dotted: str) -> str:
    """`serve.http.max_sessions` -> `[serve.http] max_sessions`; a top-level key as it is."""
    head, _, last = dotted.rpartition(".")
    return f"[{head}] {last}" if head else last


def _leaves(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        out.append(path)
        if isinstance(value, Mapping):
            out += _leaves(value, path + ".")
    return out


# Values only GrooveSeek writes in a key both spell alike: its parser ids.
GROOVESEEK_PARSER_IDS = frozenset({"md", "rs", "py", "php", "xls"})


def looks_like_grooveseek(data: Mapping[str, Any]) -> bool:
    """Whether a groove.toml as read holds a key (or a value) only GrooveSeek writes."""
    if any(path in GROOVESEEK_KEYS for path in _leaves(data)):
        return True
    parsers = data.get("parsers")
    enabled = parsers.get("enabled") if isinstance(parsers, Mapping) else None
    return isinstance(enabled, list) and any(x in GROOVESEEK_PARSER_IDS - {"md"} for x in enabled)


# --- one handler per GrooveSeek key ----------------------------------------------------------------------------


def _model(t: Translation, v: Any) -> None:
    hub, ours, langs = MODELS.get(v, (str(v), "intfloat/multilingual-e5-small", "Japanese and English"))
    t.refuse(
        "model",
        v,
        f"groove loads no model from the network, so not {hub}; write [embedding] model = {json.dumps(ours)} "
        f"(packaged with groove: {langs}), or a folder holding {hub} in sentence-transformers form "
        '([embedding] backend = "sentence-transformers", model = "/path/to/folder"), or delete the line '
        "(groove's default model is multilingual-e5-small)",
    )


def _reranker(t: Translation, v: Any) -> None:
    if v in ("none", ""):
        t.put("search.reranker", "", "reranker")
        return
    hub = RERANKERS.get(v, str(v))
    t.refuse(
        "reranker",
        v,
        f"groove loads no model from the network; download {hub} (e.g. `hf download {hub} --local-dir DIR`) and "
        'write [search] reranker = "DIR", or delete the line (no reranker)',
    )


def _fastembed(t: Translation, v: Any) -> None:
    t.refuse(
        "fastembed_cache_dir",
        v,
        "groove has no fastembed cache: its models are packaged and nothing is downloaded; delete the line "
        '(a model of your own: [embedding] model = "/path/to/folder")',
    )


def _grammar(t: Translation, v: Any) -> None:
    t.refuse("grammar_dir", v, "groove indexes no source code (no grammar plugins); delete the line")


def _exclude_dirs(t: Translation, v: Any) -> None:
    t.put(
        "index.exclude_dirs",
        v,
        "exclude_dirs",
        "added to the folders groove always skips (.git, .obsidian, node_modules ...)",
    )


def _parsers_enabled(t: Translation, v: Any) -> None:
    if not isinstance(v, list) or not v:
        t.refuse(
            "[parsers] enabled", v, 'list the file types, e.g. enabled = ["markdown"] (an empty list indexes nothing)'
        )
        return
    bad = [x for x in v if x not in PARSER_IDS and x not in PARSER_IDS.values()]
    if bad:
        t.refuse(
            "[parsers] enabled",
            v,
            f"groove has no parser {', '.join(json.dumps(b) for b in bad)} (groove indexes no source code, and "
            ".xls is not read: save it as .xlsx); write enabled = "
            + json.dumps([PARSER_IDS.get(x, x) for x in v if x not in bad] or ["markdown"]),
        )
        return
    t.put("parsers.enabled", [PARSER_IDS.get(x, x) for x in v], "[parsers] enabled")


def _parsers_code(t: Translation, v: Any) -> None:
    if isinstance(v, Mapping) and not v:
        return  # an empty [parsers.code] (GrooveSeek's example): nothing to say
    t.refuse("[parsers.code]", v, "groove indexes no source code; delete the section")


def _fail_on_frontmatter(t: Translation, v: Any) -> None:
    if v is False:
        t.same("[index] fail_on_frontmatter_error", "groove index does not stop on frontmatter")
        return
    t.refuse(
        "[index] fail_on_frontmatter_error",
        v,
        "groove index indexes every note whatever its frontmatter; run `groove validate` (exit 1 on frontmatter "
        "that does not parse) where the run must fail, and delete the line",
    )


def _contextual(t: Translation, v: Any) -> None:
    enabled = v.get("enabled", False) if isinstance(v, Mapping) else v
    if enabled is False and (not isinstance(v, Mapping) or set(v) <= {"enabled"}):
        t.same("[contextual] enabled", "off: groove always indexes each chunk's heading path as its own column")
        return
    t.refuse(
        "[contextual]",
        v,
        "groove always indexes each chunk's heading path in a column of its own (weighed by [search.fusion] "
        "context_weight) and never puts it into the vector; delete the section",
    )


def _transport(t: Translation, v: Any) -> None:
    if not isinstance(v, Mapping):
        t.refuse("transport", v, '[transport] is a table: write [serve] transport = "stdio" or "http"')
        return
    http = v.get("http")
    for key, value in v.items():
        if key == "kind":
            if value in ("stdio", "http"):
                t.put("serve.transport", value, "[transport] kind")
            else:
                t.refuse("[transport] kind", value, 'write [serve] transport = "stdio" or "http"')
        elif key == "http" and isinstance(value, Mapping):
            _transport_http(t, value)
        else:
            t.refuse(f"[transport] {key}", value, "GrooveSeek has no such key; delete it")
    if "kind" not in v and isinstance(http, Mapping):
        # GrooveSeek: an explicit [transport.http] without `kind` means http.
        t.put("serve.transport", "http", "[transport.http]", "a [transport.http] without kind means http")


def _transport_http(t: Translation, http: Mapping[str, Any]) -> None:
    for key, value in http.items():
        src = f"[transport.http] {key}"
        if key == "bind":
            t.put("serve.bind", value, src)
        elif key in ("allowed_hosts", "allowed_origins"):
            if isinstance(value, list) and value:
                t.put(f"serve.http.{key}", value, src, "added to the loopback names groove always accepts")
            else:
                t.refuse(
                    src,
                    value,
                    f"groove cannot turn the {'Host' if key == 'allowed_hosts' else 'Origin'} check off; "
                    f"list the values to accept: [serve.http] {key} = [...]",
                )
        elif key == "healthz_public":
            if value is False:
                t.same(src, "groove checks /healthz like every path")
            else:
                t.refuse(
                    src,
                    value,
                    "groove checks Host and Origin on /healthz like on every path; add the probe's Host to "
                    "[serve.http] allowed_hosts and delete the line",
                )
        elif key == "max_sessions":
            if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
                t.put("serve.http.max_sessions", value, src)
            else:
                t.refuse(src, value, "groove always bounds sessions: write [serve.http] max_sessions = N (1..100000)")
        elif key == "systemd_socket":
            if value is False:
                t.same(src, "groove binds its own socket")
            else:
                t.refuse(
                    src,
                    value,
                    "groove binds its own socket ([serve] bind); `groove service install` writes a systemd unit "
                    "that starts it; delete the line",
                )
        else:
            t.refuse(src, value, "GrooveSeek has no such key; delete it")


def _eval(t: Translation, v: Mapping[str, Any]) -> None:
    for key, value in v.items():
        src = f"[eval] {key}"
        if key == "golden":
            if value == DEFAULT_GOLDEN:
                t.same(src, "groove eval reads <notes folder>/.groove-eval.yml when no set is named")
            else:
                t.refuse(src, value, f"name the set when you run it: `groove eval {value}`; delete the line")
        elif key == "history_size":
            t.put("eval.history", value, src)
        elif key == "k_values":
            if value == DEFAULT_KS:
                t.same(src, "groove eval reports recall@1, 5 and 10")
            else:
                ks = ",".join(str(k) for k in value) if isinstance(value, list) else value
                t.refuse(src, value, f"pass them when you run it: `groove eval --k {ks}`; delete the line")
        else:
            t.put(f"eval.{key}", value, src)  # regression_threshold and groove's own


def _search(t: Translation, v: Mapping[str, Any]) -> None:
    for key, value in v.items():
        if key == "fusion" and isinstance(value, Mapping):
            for fkey, fvalue in value.items():
                if fkey.startswith("bm25_") and fkey.endswith("_weight"):
                    t.put(f"search.fusion.{fkey[len('bm25_') :]}", fvalue, f"[search.fusion] {fkey}")
                else:
                    t.put(f"search.fusion.{fkey}", fvalue, f"[search.fusion] {fkey}")
        elif key == "min_confidence_ratio" and value == 0:
            t.refuse(
                "[search] min_confidence_ratio",
                value,
                "groove has no ratio that turns the flag off; delete the line (groove's default fusion flags "
                "low_confidence by [search] confidence_margin, which 0 turns off)",
            )
        else:
            _keep(t, f"search.{key}", value)


def _embedding(t: Translation, v: Mapping[str, Any]) -> None:
    if "provider" not in v:  # groove's own [embedding]
        _keep(t, "embedding", v)
        return
    models = {k: v[k] for k in ("model", "query_model", "document_model") if k in v}
    for key, value in v.items():
        src = f"[embedding] {key}"
        if key == "provider":
            if value == "openai-compatible":
                t.put("embedding.backend", "openai", src)
            else:
                t.refuse(
                    src, value, 'groove speaks to "openai-compatible" servers only: [embedding] backend = "openai"'
                )
        elif key == "endpoint":
            if isinstance(value, str) and value.rstrip("/").endswith("/embeddings"):
                base = value.rstrip("/")[: -len("/embeddings")]
                t.put("embedding.openai.endpoint", base, src, "without /embeddings: groove adds it")
            else:
                t.put("embedding.openai.endpoint", value, src)
        elif key in ("model", "query_model", "document_model"):
            continue
        elif key == "dimension":
            t.put("embedding.openai.dimension", value, src)
        elif key == "timeout_seconds":
            t.put("embedding.openai.timeout_s", value, src)
        elif key == "api_key":
            t.refuse(
                src,
                "...",
                "groove reads the key from an environment variable, never from the file: "
                '[embedding.openai] api_key_env = "GROOVE_EMBEDDING_API_KEY" and export that variable',
            )
        else:
            t.refuse(src, value, "GrooveSeek has no such key; delete it")
    names = set(models.values())
    if len(names) == 1:
        name = names.pop()
        t.put("embedding.openai.model", name, " / ".join(f"[embedding] {k}" for k in models))
    elif len(names) > 1:
        t.refuse(
            "[embedding] query_model / document_model",
            models,
            "groove sends queries and documents to one model: [embedding.openai] model = NAME",
        )


def _keep(t: Translation, path: str, value: Any) -> None:
    """A key GrooveSeek and groove spell alike (or groove's own): kept where it is."""
    if isinstance(value, Mapping):  # an empty table (GrooveSeek's example has several) writes nothing
        for key, sub in value.items():
            _keep(t, f"{path}.{key}", sub)
        return
    t.put(path, value, _key(path))


TOP: dict[str, Callable[[Translation, Any], None]] = {
    "model": _model,
    "reranker": _reranker,
    "rerank_by_default": lambda t, v: t.put("search.rerank_by_default", v, "rerank_by_default"),
    "fastembed_cache_dir": _fastembed,
    "grammar_dir": _grammar,
    "exclude_headings": lambda t, v: t.put("search.exclude_headings", v, "exclude_headings"),
    "exclude_dirs": _exclude_dirs,
    "transport": _transport,
    "contextual": _contextual,
}


def translate(data: Mapping[str, Any]) -> Translation:
    """A GrooveSeek groove.toml as read (TOML) -> groove's settings, what was mapped, what is refused."""
    t = Translation()
    for key, value in data.items():
        if key in TOP:
            TOP[key](t, value)
        elif key == "eval" and isinstance(value, Mapping):
            _eval(t, value)
        elif key == "search" and isinstance(value, Mapping):
            _search(t, value)
        elif key == "embedding" and isinstance(value, Mapping):
            _embedding(t, value)
        elif key == "parsers" and isinstance(value, Mapping):
            for pkey, pvalue in value.items():
                if pkey == "enabled":
                    _parsers_enabled(t, pvalue)
                elif pkey == "code":
                    _parsers_code(t, pvalue)
                else:
                    _keep(t, f"parsers.{pkey}", pvalue)
        elif key == "index" and isinstance(value, Mapping):
            for ikey, ivalue in value.items():
                if ikey == "fail_on_frontmatter_error":
                    _fail_on_frontmatter(t, ivalue)
                else:
                    _keep(t, f"index.{ikey}", ivalue)
        else:
            _keep(t, key, value)
    return t


# --- groove's own file, written ---------------------------------------------------------------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def render_toml(data: Mapping[str, Any], header: str = "") -> str:
    """groove's settings as a groove.toml: plain keys first, then one [table] per section (nested ones dotted)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    if lines:
        lines.append("")

    def table(path: list[str], node: Mapping[str, Any]) -> None:
        plain = [(k, v) for k, v in node.items() if not isinstance(v, Mapping)]
        subs = [(k, v) for k, v in node.items() if isinstance(v, Mapping)]
        if path and (plain or not subs):
            lines.append(f"[{'.'.join(_toml_key(p) for p in path)}]")
        lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in plain)
        if path and (plain or not subs):
            lines.append("")
        elif not path and plain:
            lines.append("")
        for key, sub in subs:
            table([*path, key], sub)

    table([], data)
    return "\n".join(lines).rstrip("\n") + "\n"
