"""`killnine`: kill -9 at seeded random points, restart, and compare with a fresh index (N of N).

Two kinds of round, alternating:

- `index`: `groove index` of a generated notes folder is killed (SIGKILL) after
  a random delay drawn from [0, the time a whole run takes];
- `daemon`: `groove serve --transport http` runs on an index of the same
  folder while the bench writes a fixed burst of edits (new notes, rewrites,
  appends, deletions, renames), and is killed at a random moment of the burst
  or of the embedding that follows it. The burst always completes.

After each kill, `groove index` runs to completion (the restart) and the index
is compared with a fresh `groove index` of the same folder, built once per
folder state: the documents (path, file hash), every chunk's (path, ordinal,
hash), the vector count, no pending chunk, no chunk pointing at a missing
vector, and FTS5's integrity-check of both full-text tables. A round
converges when all of these are equal. The delays come from
`random.Random(seed + round)`, so a failing round can be replayed.

The model is all-MiniLM-L6-v2 (the packaged copy: the fastest real model
here); the kill points, not the model, are the subject.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GROOVE = [sys.executable, "-m", "groove.cli"]
DEFAULT_ROUNDS = 10
DEFAULT_NOTES = 40
DEFAULT_EDITS = 40
CONFIG = '[embedding]\nmodel = "all-MiniLM-L6-v2"\n\n[watch]\ndebounce_ms = 50\n'
TOPICS = [
    "database",
    "latency",
    "embedding",
    "checkpoint",
    "retrieval",
    "tokenizer",
    "notebook",
    "cluster",
    "glacier",
    "harbour",
    "orchard",
    "lantern",
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help=f"kill -9 rounds, alternating index/daemon (default {DEFAULT_ROUNDS})",
    )
    p.add_argument("--notes", type=int, default=DEFAULT_NOTES, help=f"notes in the folder (default {DEFAULT_NOTES})")
    p.add_argument(
        "--edits", type=int, default=DEFAULT_EDITS, help=f"edits in the daemon rounds' burst (default {DEFAULT_EDITS})"
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the kill points (default 1)")
    p.add_argument("--kinds", default="index,daemon", help="which rounds, comma separated (default index,daemon)")


# --- the folder --------------------------------------------------------------------------------


def _paragraph(i: int, words: int = 30) -> str:
    body = " ".join(f"{TOPICS[(i + j) % len(TOPICS)]}{i}x{j}" for j in range(words))
    return f"## Section {i}\n\nThis section is about item {i}. {body}.\n\n"


def make_notes(kb: Path, n: int) -> None:
    for i in range(n):
        path = kb / f"d{i % 4}" / f"n{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {i}\n\n" + "".join(_paragraph(i * 3 + j) for j in range(3)), encoding="utf-8")


def burst(kb: Path, n_notes: int, edits: int, pause_s: float = 0.02) -> None:
    """A fixed sequence of edits (the same every round, so one fresh index serves all)."""
    for e in range(edits):
        target = kb / f"d{e % 4}" / f"n{(e * 7) % n_notes:03d}.md"
        kind = e % 5
        if kind == 0:
            new = kb / "burst" / f"b{e:03d}.md"
            new.parent.mkdir(parents=True, exist_ok=True)
            new.write_text(f"# Burst {e}\n\n" + _paragraph(10_000 + e), encoding="utf-8")
        elif kind == 1 and target.exists():
            target.write_text(
                f"# Rewritten {e}\n\n" + _paragraph(20_000 + e) + _paragraph(30_000 + e), encoding="utf-8"
            )
        elif kind == 2 and target.exists():
            with target.open("a", encoding="utf-8") as f:
                f.write(_paragraph(40_000 + e))
        elif kind == 3 and target.exists():
            target.unlink()
        elif kind == 4 and target.exists():
            target.rename(target.with_name(f"renamed-{e:03d}.md"))
        time.sleep(pause_s)


# --- the processes -----------------------------------------------------------------------------


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROOVE_")}
    env.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
    )
    return env


def _argv(cmd: str, work: Path, kb: Path, index: Path, *extra: str) -> list[str]:
    return [*GROOVE, cmd, "--config", str(work / "groove.toml"), "--kb", str(kb), "--index", str(index), *extra]


def groove_index(work: Path, kb: Path, index: Path, timeout: float = 600) -> float:
    """`groove index` to completion; returns its wall time. Raises on a non-zero exit."""
    t0 = time.perf_counter()
    done = subprocess.run(
        _argv("index", work, kb, index, "--format", "json"),
        cwd=ROOT,
        env=_env(work),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise RuntimeError(f"groove index failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - t0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(proc: subprocess.Popen, port: int, timeout: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"groove serve exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("groove serve did not become healthy")


# --- the comparison ----------------------------------------------------------------------------


def fingerprint(index: Path) -> dict[str, Any]:
    """What must be equal to a fresh index of the same folder."""
    from groove.store.sqlite import connection, schema

    con = connection.connect_sync(index, readonly=True)
    try:
        integrity = {}
        for table in schema.FTS_TABLES:
            try:
                con.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
                integrity[table] = "ok"
            except connection.DBError as exc:
                integrity[table] = str(exc)

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in con.execute(sql).fetchall()]

        def one(sql: str) -> Any:
            return con.execute(sql).fetchone()[0]

        return {
            "documents": rows("SELECT path, hash FROM documents ORDER BY path"),
            "chunks": rows(
                "SELECT d.path, c.ordinal, c.hash FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "ORDER BY d.path, c.ordinal"
            ),
            "vectors": one("SELECT count(*) FROM vec_embeddings"),
            "embeddings": one("SELECT count(*) FROM embeddings"),
            "pending": one("SELECT count(*) FROM chunks WHERE embedding_id IS NULL"),
            "dangling": one(
                "SELECT count(*) FROM chunks WHERE embedding_id IS NOT NULL "
                "AND embedding_id NOT IN (SELECT id FROM embeddings)"
            ),
            "fts_integrity": integrity,
        }
    finally:
        con.close()


def differences(got: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    out = [key for key in fresh if got.get(key) != fresh[key]]
    if got["pending"] or got["dangling"]:
        out.append("pending/dangling")
    return out


# --- the rounds --------------------------------------------------------------------------------


class Killer:
    """SIGKILL `proc` after `delay` seconds (unless it has exited)."""

    def __init__(self, proc: subprocess.Popen, delay: float):
        self.proc = proc
        self.killed_at: float | None = None
        self.timer = threading.Timer(delay, self._kill)
        self.timer.start()

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.killed_at = time.perf_counter()


def index_round(work: Path, kb: Path, rng: random.Random, full_s: float) -> dict[str, Any]:
    index = work / "round.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(str(index) + suffix).unlink(missing_ok=True)
    delay = rng.uniform(0.0, full_s)
    proc = subprocess.Popen(
        _argv("index", work, kb, index),
        cwd=ROOT,
        env=_env(work),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    killer = Killer(proc, delay)
    proc.wait(timeout=600)
    killer.timer.cancel()
    groove_index(work, kb, index)
    return {"kind": "index", "kill_after_s": round(delay, 2), "killed": killer.killed_at is not None, "index": index}


def daemon_round(
    work: Path, base_kb: Path, base_index: Path, rng: random.Random, n_notes: int, edits: int, window_s: float
) -> dict[str, Any]:
    kb = work / "round-notes"
    index = work / "round-daemon.sqlite"
    shutil.rmtree(kb, ignore_errors=True)
    shutil.copytree(base_kb, kb)
    for suffix in ("", "-wal", "-shm"):
        Path(str(index) + suffix).unlink(missing_ok=True)
    shutil.copy(base_index, index)
    port = _free_port()
    proc = subprocess.Popen(
        _argv("serve", work, kb, index, "--transport", "http", "--bind", f"127.0.0.1:{port}"),
        cwd=ROOT,
        env=_env(work),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_healthy(proc, port)
        delay = rng.uniform(0.0, window_s)
        killer = Killer(proc, delay)
        burst(kb, n_notes, edits)
        proc.wait(timeout=window_s + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    groove_index(work, kb, index)
    return {
        "kind": "daemon",
        "kill_after_s": round(delay, 2),
        "killed": killer.killed_at is not None,
        "index": index,
        "kb": kb,
    }


def run_rounds(
    work: Path, *, rounds: int, notes: int, edits: int, seed: int, kinds: tuple[str, ...] = ("index", "daemon")
) -> dict[str, Any]:
    """Every round's outcome; shared by the bench and its test."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "groove.toml").write_text(CONFIG, encoding="utf-8")
    kb = work / "notes"
    shutil.rmtree(kb, ignore_errors=True)
    make_notes(kb, notes)
    fresh_index = work / "fresh.sqlite"
    full_s = groove_index(work, kb, fresh_index)
    fresh = fingerprint(fresh_index)
    fresh_after: dict[str, Any] | None = None
    if "daemon" in kinds:  # the folder after the burst, indexed fresh once
        after_kb = work / "after-notes"
        shutil.rmtree(after_kb, ignore_errors=True)
        shutil.copytree(kb, after_kb)
        burst(after_kb, notes, edits, pause_s=0)
        fresh_after_index = work / "fresh-after.sqlite"
        groove_index(work, after_kb, fresh_after_index)
        fresh_after = fingerprint(fresh_after_index)
    burst_s = edits * 0.02
    results = []
    for r in range(rounds):
        kind = kinds[r % len(kinds)]
        rng = random.Random(seed + r)
        if kind == "index":
            outcome = index_round(work, kb, rng, full_s)
            expected = fresh
        else:
            # The window: the burst itself plus the embedding that follows it.
            outcome = daemon_round(work, kb, fresh_index, rng, notes, edits, window_s=burst_s + 3.0)
            assert fresh_after is not None  # set above when kinds holds "daemon"; no other kind compares with it
            expected = fresh_after
        got = fingerprint(outcome.pop("index"))
        outcome.pop("kb", None)
        diffs = differences(got, expected)
        outcome.update(
            seed=seed + r,
            converged=not diffs,
            differences=diffs,
            documents=len(got["documents"]),
            chunks=len(got["chunks"]),
            vectors=got["vectors"],
        )
        results.append(outcome)
        sys.stderr.write(f"killnine round {r + 1}/{rounds}: {json.dumps(outcome)}\n")
    return {
        "full_index_s": round(full_s, 2),
        "rounds": results,
        "converged": sum(1 for o in results if o["converged"]),
        "total": len(results),
        "killed": sum(1 for o in results if o["killed"]),
    }


def main_async(args: argparse.Namespace):
    from bench.common import Report, Timer

    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    report = Report(
        "killnine",
        "kill -9 at seeded random points, then restart: equal to a fresh index",
        params={
            "rounds": args.rounds,
            "notes": args.notes,
            "edits": args.edits,
            "seed": args.seed,
            "kinds": ",".join(kinds),
        },
    )  # made first: its machine figures are the start's
    with Timer() as t, tempfile.TemporaryDirectory(prefix="groove-killnine-") as tmp:
        out = run_rounds(Path(tmp), rounds=args.rounds, notes=args.notes, edits=args.edits, seed=args.seed, kinds=kinds)
    report.ratios["converged_over_rounds"] = round(out["converged"] / out["total"], 3) if out["total"] else float("nan")
    report.raw = {
        "converged": out["converged"],
        "rounds": out["total"],
        "killed_before_done": out["killed"],
        "full_index_s": out["full_index_s"],
    }
    report.notes.append(
        f"{out['converged']} of {out['total']} rounds converged to a fresh index "
        f"({out['killed']} were killed before they finished)"
    )
    for o in out["rounds"]:
        if not o["converged"]:
            report.notes.append(
                f"round seed {o['seed']} ({o['kind']}, kill after {o['kill_after_s']} s) differs in {o['differences']}"
            )
    report.seconds = t.seconds
    print(f"{out['converged']} of {out['total']}")
    return report
