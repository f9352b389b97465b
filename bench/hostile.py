"""Bad files: `groove index` on each case of the hostile corpus, one child process per case.

    python -m bench.hostile              # every case, the bag-of-words fake embedder
    python -m bench.hostile --real       # the configured (real) model instead: slower, adds its memory
    python -m bench.hostile --case "a 50 MB note" --case "one 10 MB line"

Each case is built by tests/hostile.py in a temp folder beside the good notes
and indexed with the default settings by a fresh `groove index --format json`.
The table gives the file, the outcome (skipped / indexed / indexed with a
warning / refused), the reason groove reported, the child's peak resident
memory (ru_maxrss from os.wait4, i.e. getrusage of that one child) and its
wall time. The first row, "(good notes only)", is the baseline: the cost of
the interpreter, groove and the embedder before any bad file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import hostile  # noqa: E402  (tests/hostile.py: the one definition of the corpus)

FAKE_GROOVE = [sys.executable, str(ROOT / "tests" / "fake_groove.py")]
REAL_GROOVE = [sys.executable, "-m", "groove.cli"]


def run_case(case: hostile.Case | None, real: bool, workdir: Path, config: Path | None = None) -> dict:
    kb = hostile.build(workdir / "notes", [case] if case else [])
    index = workdir / "index.sqlite"
    out, err = workdir / "stdout", workdir / "stderr"
    cmd = (REAL_GROOVE if real else FAKE_GROOVE) + ["index", "--kb", str(kb), "--index", str(index), "--format", "json"]
    if config is not None:
        cmd += ["--config", str(config)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    with open(out, "wb") as fo, open(err, "wb") as fe:
        pid = os.posix_spawn(cmd[0], cmd, env, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, fo.fileno(), 1),
            (os.POSIX_SPAWN_DUP2, fe.fileno(), 2),
        ])
        _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    rss_mb = usage.ru_maxrss / 1024  # kilobytes on Linux
    row = {"file": case.path if case else "(good notes only)", "case": case.name if case else "baseline",
           "peak_rss_mb": round(rss_mb, 1), "seconds": round(seconds, 2), "exit": code}
    if code != 0:
        message = err.read_text("utf-8", "replace").strip().splitlines()
        error = next((l for l in message if l.startswith("groove: error:")), message[-1] if message else "")
        row.update(outcome="refused (the whole run)", reason=error.removeprefix("groove: error: "))
        return row
    summary = json.loads(out.read_text("utf-8"))
    skipped = {x["path"]: x["reason"] for x in summary.get("skipped_files", [])}
    warned = {x["path"]: x["warnings"] for x in summary.get("note_warnings", [])}
    path = case.path if case else None
    if path in skipped:
        row.update(outcome="skipped", reason=skipped[path])
    elif path in warned:
        row.update(outcome="indexed, with a warning", reason=" / ".join(warned[path]))
    elif case is None or case.outcome == "indexed" or path not in skipped:
        row.update(outcome="indexed", reason="")
    good = [p for p in hostile.GOOD_WORDS if p not in skipped]
    row["good_notes_indexed"] = f"{len(good)}/{len(hostile.GOOD_WORDS)}" if summary.get("added", 0) >= len(good) else "?"
    row["chunks"] = summary.get("chunks_written")
    return row


def _cell(text: str, width: int = 150) -> str:
    text = re.sub(r"\s+", " ", str(text)).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def table(rows: list[dict]) -> str:
    lines = ["| file | case | outcome | reason | peak RSS (MB) | s |", "|---|---|---|---|---:|---:|"]
    for r in rows:
        lines.append(f"| `{_cell(r['file'])}` | {r['case']} | {r['outcome']} | {_cell(r['reason'])} "
                     f"| {r['peak_rss_mb']:.0f} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="index with the configured model instead of the fake")
    parser.add_argument("--case", action="append", metavar="NAME", help="only this case (repeatable); see tests/hostile.py")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--config", type=Path, metavar="PATH", help="a groove.toml for every run (e.g. a larger max_file_bytes)")
    args = parser.parse_args(argv)
    cases = [hostile.BY_NAME[n] for n in args.case] if args.case else list(hostile.CASES + hostile.REFUSING)
    rows = []
    with tempfile.TemporaryDirectory(prefix="groove-hostile-") as tmp:
        for i, case in enumerate([None, *cases]):
            work = Path(tmp) / f"case{i}"
            work.mkdir()
            rows.append(run_case(case, args.real, work, args.config))
            sys.stderr.write(f"{rows[-1]['case']}: {rows[-1]['outcome']} ({rows[-1]['peak_rss_mb']:.0f} MB)\n")
    model = "the configured model (real)" if args.real else "the bag-of-words fake embedder (tests/fakes.py)"
    limits = f"the settings of {args.config}" if args.config else "default [index] limits"
    print(f"groove index per case, with {model}; {limits}\n")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"model": model, "rows": rows}, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
