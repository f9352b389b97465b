"""One real `groove serve` with the real model through bursts of SDK clients plus an editor (issue 36, point 5).

Before: the int8 engine's ONNX Runtime sessions were per thread, and the daemon's queries and edits ran on
whichever anyio worker thread was free, so each burst made new sessions, and glibc kept what was freed (up to
16 arenas, the model's activations on the heap once the mmap threshold had risen): RSS 747 -> 925 -> 960 MB
over the three bursts of this test. Now the engine makes one session per kind (queries, documents) when it
loads and every thread shares them (issue 39, point 2), and `groove serve` sets two arenas and a fixed mmap threshold
(groove/serve/process/memory.py). The sessions made are counted from the server's own debug lines; RSS
(VmRSS) is read 2 s after each burst and must end within 10% of the first burst.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import anyio
import pytest

# bench/load.py's words: each note holds 40 of them, each query two.
WORDS = (
    "harbour glacier orchard lantern database latency checkpoint retrieval tokenizer notebook cluster meadow "
    "compiler granite monsoon violin"
).split()

# The run, scaled down; GROOVE_BURST_CLIENTS=24 GROOVE_BURST_COUNT=6 GROOVE_BURST_SECONDS=20
# GROOVE_BURST_EDITS=100 with `pytest -s` is the run of docs/operations.md, "Memory under load".
CLIENTS = int(os.environ.get("GROOVE_BURST_CLIENTS", "12"))
BURSTS = int(os.environ.get("GROOVE_BURST_COUNT", "3"))
SECONDS = float(os.environ.get("GROOVE_BURST_SECONDS", "8"))
EDITS = int(os.environ.get("GROOVE_BURST_EDITS", "30"))  # per burst
NOTES = int(os.environ.get("GROOVE_BURST_NOTES", "40"))


def _note(i: int) -> str:
    words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(40))
    return f"# Note {i}\n\nNote {i} talks about {WORDS[i % len(WORDS)]} and {WORDS[(i * 5) % len(WORDS)]}. {words}.\n"


def _vm(pid: int) -> tuple[int, int]:
    """(VmRSS in MB, threads) of a process."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["Threads"])


@pytest.mark.usefixtures("real_model")
def test_bursts_of_searches_and_edits_make_no_new_sessions_and_rss_stays_within_10_percent(spawn, tmp_path):
    if not Path("/proc/self/status").exists():
        pytest.skip("reads VmRSS from /proc")
    kb = tmp_path / "notes"
    kb.mkdir()
    for i in range(NOTES):
        (kb / f"n{i:04d}.md").write_text(_note(i), encoding="utf-8")
    index = tmp_path / "index.sqlite"
    srv = spawn.server(kb, index, tmp_path, env={"GROOVE_LOG__LEVEL": "debug", "GROOVE_WATCH__DEBOUNCE_MS": "50"})
    edits = [0]
    errors: list[str] = []

    async def burst(b: int) -> int:
        deadline = time.monotonic() + SECONDS
        done = [0]

        async def client_loop(c: int) -> None:
            local = random.Random(b * 1000 + c)
            async with srv.client() as client:
                while time.monotonic() < deadline:
                    try:
                        await client.call_tool("search", {"query": " ".join(local.sample(WORDS, 2)), "limit": 5})
                        done[0] += 1
                    except Exception as exc:  # noqa: BLE001 - a rate-limited call is retried, not a failure here
                        errors.append(repr(exc)[:200])
                        await anyio.sleep(0.1)

        async def editor() -> None:
            for _ in range(EDITS):
                e = edits[0]
                edits[0] += 1
                path = kb / (f"load/e{e:04d}.md" if e % 2 == 0 else f"n{(e * 7) % NOTES:04d}.md")
                path.parent.mkdir(parents=True, exist_ok=True)
                old = path.read_text(encoding="utf-8") if path.exists() else f"# Edit {e}\n\n"
                path.write_text(old + f"\nEdit {e} adds the word loadmark{e:04d}q.\n", encoding="utf-8")
                await anyio.sleep(SECONDS / 2 / EDITS)

        async with anyio.create_task_group() as tg:
            for c in range(CLIENTS):
                tg.start_soon(client_loop, c)
            tg.start_soon(editor)
        return done[0]

    try:
        srv.wait_healthy()
        srv.wait_indexed(NOTES)
        rss: list[int] = []
        threads: list[int] = []
        searches = []
        start = _vm(srv.proc.pid)[0]
        for b in range(BURSTS):
            searches.append(anyio.run(burst, b))
            time.sleep(2)
            got = _vm(srv.proc.pid)
            rss.append(got[0])
            threads.append(got[1])
        srv.wait_indexed(NOTES + (EDITS * BURSTS + 1) // 2)
    finally:
        srv.terminate()
    log = srv.log()
    made = log.count("e5_session_made")
    figures = (
        f"RSS {start} -> {' -> '.join(map(str, rss))} MB, threads {threads}, searches {searches}, "
        f"sessions made {made}, errors {len(errors)} {errors[:3]}"
    )
    print(figures)
    assert all(searches), figures
    # One session for the query slot, one for the bulk worker ([embedding] workers = 1), whatever the threads.
    assert made <= 2, figures
    assert "malloc_tuned" in log, figures
    assert rss[-1] <= rss[0] * 1.10, figures
