"""Bad files: `groove index` on each case of the hostile corpus, one child process per case.

    python -m bench.hostile              # every case, the bag-of-words fake embedder
    python -m bench.hostile --real       # the configured (real) model instead: slower, adds its memory
    python -m bench.hostile --case "a 50 MB note" --case "one 10 MB line"
    python -m bench.hostile --http       # the HTTP front end instead (issue 22 points 1-6)
    python -m bench.hostile --folder     # only the notes folder replaced or deleted under the server (point 4)
    python -m bench hostile --http       # the same, through the registry (--json PATH before the name)
    python -m bench hostile --attacks    # issue 36's attacks, each a regression probe with its figure
    python -m bench hostile --attack 4 --attack 9   # some of them, by the issue's numbers (bench/attacks.py)

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

from tests.support import hostile  # the one definition of the corpus
from tests.support.server import FAKE_GROOVE  # `groove` with the bag-of-words fake embedder

ROOT = Path(__file__).resolve().parent.parent
HTTP_DOC = """`--http`: hostile clients against one `groove serve --transport http` (default [serve.http]
settings, the fake embedder, loopback), these probes in turn:

1. event streams: `--streams` sessions from one address each open their `GET /mcp` stream and keep it;
   reported: how many the server still holds, whether /healthz answers and a new client (initialize, then
   a search) gets in;
2. slow bodies: `--tricklers` connections from one address send a POST's headers, then one byte of body
   every half second; meanwhile /healthz is asked 10 times: how many answered 200 and their latency,
   and how many trickling connections the server still holds;
3. refusals in the log: 200 requests with an 8 KB Host header (421): log bytes per refused request;
4. a catastrophic glob (points 1-2): a search with `path_globs: ["*?*?*?*?*?*?*?*?*?*?Q"]` against a note with
   a 200-character name, /healthz asked while it runs (its latency), and `groove index` of a folder whose
   .grooveignore holds the same pattern and one with 20 pairs (seconds, and the refused line's report);
6. many addresses (issue 36, point 1): idle connections from 300 loopback addresses, each reopened when the
   server closes it; between floods, 10 times, /healthz and a new client (initialize and a search) from another
   address: how many succeeded;
5. the notes folder replaced (point 4; also alone: `--folder`), on a server of its own with `--folder-notes` notes and
   the periodic reconcile off: `mv kb kb.old && cp -r kb.old kb && write kb/new.md`, seconds until a search finds
   new.md (then an edit in the copy); `rm -rf kb`, seconds until /healthz fails, then kb recreated with
   `--recreate` other notes, seconds until all of them are indexed; /healthz asked every 0.1 s throughout (its
   answers as they changed). Side by side: the same writes inside the watched folder, untouched.
"""
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
        pid = os.posix_spawn(
            cmd[0],
            cmd,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, fo.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, fe.fileno(), 2),
            ],
        )
        _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    rss_mb = usage.ru_maxrss / 1024  # kilobytes on Linux
    row = {
        "file": case.path if case else "(good notes only)",
        "case": case.name if case else "baseline",
        "peak_rss_mb": round(rss_mb, 1),
        "seconds": round(seconds, 2),
        "exit": code,
    }
    if code != 0:
        message = err.read_text("utf-8", "replace").strip().splitlines()
        error = next((line for line in message if line.startswith("groove: error:")), message[-1] if message else "")
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
    row["good_notes_indexed"] = (
        f"{len(good)}/{len(hostile.GOOD_WORDS)}" if summary.get("added", 0) >= len(good) else "?"
    )
    row["chunks"] = summary.get("chunks_written")
    return row


def _cell(text: str, width: int = 150) -> str:
    text = re.sub(r"\s+", " ", str(text)).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def table(rows: list[dict]) -> str:
    lines = ["| file | case | outcome | reason | peak RSS (MB) | s |", "|---|---|---|---|---:|---:|"]
    for r in rows:
        lines.append(
            f"| `{_cell(r['file'])}` | {r['case']} | {r['outcome']} | {_cell(r['reason'])} "
            f"| {r['peak_rss_mb']:.0f} | {r['seconds']:.1f} |"
        )
    return "\n".join(lines)


# --- --http: the HTTP front end -----------------------------------------------------------------


def _read_head(sock) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _stream_ended(sock, data: bytes) -> tuple[bool, bytes]:
    import select

    while select.select([sock], [], [], 0)[0]:
        try:
            chunk = sock.recv(65536)
        except OSError:
            return True, data
        if not chunk:
            return True, data
        data += chunk
    return data.endswith(b"\n0\r\n\r\n"), data


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}},
}


def healthz(base: str) -> tuple[bool, float, str]:
    """GET /healthz once: (ok, milliseconds, "ok" or the reason it gave / the error)."""
    import httpx

    t0 = time.perf_counter()
    try:
        r = httpx.get(base + "/healthz", timeout=10)
        ok = r.status_code == 200
        said = (
            "ok"
            if ok
            else f"{r.status_code} "
            + str(r.json().get("error", "") if "json" in r.headers.get("content-type", "") else r.text)
        )
    except (httpx.HTTPError, ValueError) as exc:
        ok, said = False, type(exc).__name__
    return ok, (time.perf_counter() - t0) * 1000, said


def healthz_ms(base: str) -> float | None:
    """/healthz's latency in milliseconds, or None when it did not answer 200."""
    ok, ms, _ = healthz(base)
    return ms if ok else None


def open_session(http, url: str) -> dict[str, str]:
    """initialize + notifications/initialized on an httpx.Client sending MCP_HEADERS: the session's headers."""
    sid = http.post(url, json=INITIALIZE).headers["mcp-session-id"]
    session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return session


def call_tool(http, url: str, session: dict[str, str], name: str, arguments: dict, call_id: int = 2):
    """tools/call on an open session: the httpx response (JSON, or one SSE message)."""
    return http.post(
        url,
        headers=session,
        json={
            "jsonrpc": "2.0",
            "id": call_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        },
    )


def tool_answer(response) -> dict:
    """A tools/call response's structuredContent ({} for an error), from a JSON body or an SSE `data:` line."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next((line[5:] for line in text.splitlines() if line.startswith("data:")), "{}")
    result = json.loads(text).get("result") or {}
    return {} if result.get("isError") else result.get("structuredContent") or {}


def run_http(work: Path, streams: int, tricklers: int) -> dict:
    import select
    import socket
    import statistics

    import httpx

    from tests.support.server import ServerProcess  # the tests' real `groove serve` subprocess

    kb = work / "notes"
    kb.mkdir(parents=True)
    (kb / "a.md").write_text("# Alpha\n\nThe quokka migration plan.\n", encoding="utf-8")
    (kb / ("quokka-" + "q" * 200 + ".md")).write_text("# Long\n\nA quokka note with a long name.\n", encoding="utf-8")
    server = ServerProcess(kb, work / "index.sqlite", work, command=FAKE_GROOVE)
    out: dict = {}
    try:
        server.wait_healthy()
        # 1. event streams
        socks: list[tuple[socket.socket, bytes]] = []
        refused = 0
        with httpx.Client(headers=MCP_HEADERS, timeout=30) as http:
            for _ in range(streams):
                try:
                    sid = open_session(http, server.url)["Mcp-Session-Id"]
                    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                    s.sendall(
                        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n"
                        f"Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n".encode()
                    )
                    socks.append((s, _read_head(s)))
                except (httpx.HTTPError, OSError, KeyError):
                    refused += 1  # the server could not take one more session or connection
        time.sleep(1.0)
        held = sum(not _stream_ended(s, d)[0] for s, d in socks)
        health = [healthz_ms(server.base) for _ in range(5)]
        try:
            with httpx.Client(headers=MCP_HEADERS, timeout=30) as http:
                session = open_session(http, server.url)
                found = call_tool(http, server.url, session, "search", {"query": "quokka", "retriever": "fts"})
                new_client = (
                    "connects and searches"
                    if found.status_code == 200 and "a.md" in found.text
                    else f"HTTP {found.status_code}"
                )
        except (httpx.HTTPError, KeyError) as exc:
            new_client = f"refused ({type(exc).__name__})"
        for s, _ in socks:
            s.close()
        out["streams"] = {
            "opened": streams,
            "refused": refused,
            "held_by_server": held,
            "healthz_ok": sum(h is not None for h in health),
            "healthz_asked": len(health),
            "new_client": new_client,
        }

        # 2. slow bodies
        time.sleep(1.0)
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: 400\r\n\r\n"
        ).encode()
        trick: list[socket.socket] = []
        closed: set[socket.socket] = set()
        for _ in range(tricklers):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.sendall(head)
            trick.append(s)
        latencies: list[float | None] = []
        for _ in range(10):
            for s in select.select([t for t in trick if t not in closed], [], [], 0)[0]:
                try:
                    if not s.recv(4096):
                        closed.add(s)
                except OSError:
                    closed.add(s)
            for s in trick:
                if s not in closed:
                    try:
                        s.sendall(b"x")
                    except OSError:
                        closed.add(s)
            latencies.append(healthz_ms(server.base))
            time.sleep(0.5)
        ok = [x for x in latencies if x is not None]
        out["slow_bodies"] = {
            "trickling": tricklers,
            "held_by_server": tricklers - len(closed),
            "healthz_ok": len(ok),
            "healthz_asked": len(latencies),
            "healthz_p50_ms": round(statistics.median(ok), 1) if ok else None,
            "healthz_max_ms": round(max(ok), 1) if ok else None,
        }
        for s in trick:
            s.close()

        # 3. refusals in the log
        time.sleep(1.0)
        before = server.log_path.stat().st_size
        with httpx.Client(timeout=10) as http:
            for _ in range(200):
                http.get(server.base + "/healthz", headers={"Host": "evil" + "h" * 8192})
        time.sleep(11)  # the count is written at most once per 10 s interval
        grown = server.log_path.stat().st_size - before
        out["refusals"] = {
            "requests": 200,
            "host_header_bytes": 8196,
            "log_bytes": grown,
            "log_bytes_per_request": round(grown / 200, 1),
        }

        # 4. a catastrophic glob, searched while /healthz is asked
        import threading

        glob = "*?" * 10 + "Q"
        searched: dict = {}

        def search() -> None:
            t0 = time.perf_counter()
            with httpx.Client(headers=MCP_HEADERS, timeout=120) as http:
                session = open_session(http, server.url)
                r = call_tool(http, server.url, session, "search", {"query": "quokka", "path_globs": [glob]}, call_id=3)
            searched.update(
                ms=(time.perf_counter() - t0) * 1000,
                status=r.status_code,
                answer=("error: " + r.text.split('"message":"')[1].split('"')[0][:120])
                if '"message"' in r.text
                else "answered",
            )

        worker = threading.Thread(target=search)
        worker.start()
        during = []
        while worker.is_alive():
            during.append(healthz_ms(server.base))
            time.sleep(0.05)
        worker.join()
        ok = [x for x in during if x is not None]
        out["glob"] = {
            "glob": glob,
            "search_ms": round(searched["ms"], 1),
            "answer": searched["answer"],
            "healthz_during": len(during),
            "healthz_ok": len(ok),
            "healthz_max_ms": round(max(ok), 1) if ok else None,
        }
        # 6. many addresses (issue 36, point 1): idle connections from `addresses` loopback addresses, each
        # reconnecting when the server closes it, while /healthz and a new client are asked from another address
        out["many_addresses"] = _many_addresses(server, addresses=300, probes=10)
        out["tracebacks_in_log"] = server.log().count("Traceback")
    finally:
        server.terminate()
    out["grooveignore"] = run_grooveignore(work / "ignore", "*?" * 10 + "Q")
    return out


def _many_addresses(server, addresses: int, probes: int) -> dict:
    """Idle connections from `addresses` loopback addresses (127.0.3.1 on), reopened whenever the server closes
    one, and between floods `probes` times /healthz and a new client (initialize and a search) from 127.0.0.2."""
    import httpx

    from tests.support.flood import AddressFlood  # the same flood as tests/test_http_limits.py's

    # No wait for a close per connection: 300 of them would take 15 s a round.
    flood = AddressFlood(server.port, addresses, wait_s=0.0)
    healthz_ok = clients_ok = reopened = 0
    try:
        for _ in range(probes):
            reopened += flood.refill()
            time.sleep(0.3)
            try:
                transport = httpx.HTTPTransport(local_address="127.0.0.2")
                with httpx.Client(transport=transport, timeout=10) as plain:
                    healthz_ok += plain.get(server.base + "/healthz").status_code == 200
                with httpx.Client(
                    transport=httpx.HTTPTransport(local_address="127.0.0.2"), headers=MCP_HEADERS, timeout=10
                ) as http:
                    session = open_session(http, server.url)
                    found = call_tool(http, server.url, session, "search", {"query": "quokka", "retriever": "fts"})
                    clients_ok += found.status_code == 200 and "a.md" in found.text
            except (httpx.HTTPError, KeyError):
                pass
            reopened += flood.refill()
    finally:
        flood.close()
    return {
        "addresses": addresses,
        "probes": probes,
        "healthz_ok": healthz_ok,
        "new_client_ok": clients_ok,
        "connections_opened": reopened,
    }


def run_grooveignore(work: Path, pattern: str) -> dict:
    """`groove index` of a folder whose .grooveignore holds a catastrophic pattern (the fake embedder)."""
    import subprocess

    kb = work / "notes"
    kb.mkdir(parents=True)
    # The pattern (within the bounds: matched in linear time), and one past them (refused, with its line).
    (kb / ".grooveignore").write_text(f"drafts/\n{pattern}\n{'*?' * 20}Q\n", encoding="utf-8")
    (kb / ("quokka-" + "q" * 200 + ".md")).write_text("# Long\n\nA quokka note.\n", encoding="utf-8")
    (kb / "drafts").mkdir()
    (kb / "drafts" / "x.md").write_text("# Draft\n", encoding="utf-8")
    t0 = time.perf_counter()
    done = subprocess.run(
        [*FAKE_GROOVE, "index", "--kb", str(kb), "--index", str(work / "index.sqlite"), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=work,
    )
    seconds = time.perf_counter() - t0
    refused = [line for line in done.stderr.splitlines() if ".grooveignore" in line][:1]
    report = json.loads(done.stdout) if done.returncode == 0 else {}
    return {
        "pattern": pattern,
        "exit_code": done.returncode,
        "seconds": round(seconds, 2),
        "notes_indexed": report.get("added"),
        "refused_line": refused[0][:200] if refused else None,
    }


class HealthLog:
    """/healthz asked every `every` seconds on a thread: its answers as they changed, seconds from `mark()`."""

    def __init__(self, base: str, every: float = 0.1):
        import threading

        self.base, self.every = base, every
        self.t0 = time.perf_counter()
        self.changes: list[tuple[float, str]] = []
        self.asked = self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthLog:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def mark(self) -> None:
        """Start a new phase: the changes so far are dropped, times count from now, the last answer is kept."""
        last = self.changes[-1][1] if self.changes else None
        self.t0 = time.perf_counter()
        self.changes = [(0.0, last)] if last else []
        self.asked = self.failed = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            ok, _, said = healthz(self.base)
            self.asked += 1
            self.failed += not ok
            said = said if len(said) <= 90 else said[:87] + "..."
            if not self.changes or self.changes[-1][1] != said:
                self.changes.append((round(time.perf_counter() - self.t0, 2), said))
            self._stop.wait(self.every)

    def summary(self) -> dict:
        return {
            "asked": self.asked,
            "failed": self.failed,
            "changes": [f"{t:.1f} s: {said}" for t, said in self.changes],
        }


def write_notes(folder: Path, n: int, word: str) -> None:
    """`n` notes, each holding its own `{word}{i}` (the fake embedder's words are the notes' words)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"{word}-{i:04d}.md").write_text(
            f"# Note {i}\n\n{word}{i} in a note of the probe.\n", encoding="utf-8"
        )


def run_folder(work: Path, notes: int, recreate: int, timeout: float) -> dict:
    """Issue 22 point 4: the notes folder itself replaced or deleted under a real `groove serve --transport http`
    (the fake embedder, the periodic reconcile off so only the watcher can notice). Side by side with the same
    change made inside the watched folder: a note written, and `recreate` notes written at once."""
    import subprocess

    import httpx

    from tests.support.server import ServerProcess  # the tests' real `groove serve` subprocess

    kb = work / "kb"
    write_notes(kb, notes, "startword")
    config = work / "groove.toml"
    config.write_text(
        "[watch]\nreconcile_interval_s = 0  # no periodic safety net: what is measured is the watcher\n",
        encoding="utf-8",
    )
    server = ServerProcess(kb, work / "index.sqlite", work, extra=("--config", str(config)), command=FAKE_GROOVE)
    out: dict = {"notes": notes, "recreated_notes": recreate, "timeout_s": timeout}
    try:
        server.wait_healthy()
        with httpx.Client(headers=MCP_HEADERS, timeout=30) as http, HealthLog(server.base) as health:
            session = open_session(http, server.url)

            def status() -> dict:
                return tool_answer(call_tool(http, server.url, session, "index_status", {}))

            def found(word: str) -> list[str]:
                answer = tool_answer(
                    call_tool(http, server.url, session, "search", {"query": word, "retriever": "fts"})
                )
                return [r["path"] for r in answer.get("results", [])]

            def until(done) -> float | None:
                """Seconds from now until `done()`, or None when `timeout` passed first."""
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < timeout:
                    if done():
                        return round(time.perf_counter() - t0, 2)
                    time.sleep(0.1)
                return None

            def indexed(documents: int, word: str) -> bool:
                st = status()
                return st.get("documents") == documents and not st.get("pending_chunks") and found(word) != []

            out["startup_s"] = until(
                lambda: status().get("startup_reconcile_done") and indexed(notes, f"startword{notes - 1}")
            )

            # Baseline: one note written into the watched folder.
            health.mark()
            (kb / "plain.md").write_text("# Plain\n\nplainwriteword in the watched folder.\n", encoding="utf-8")
            out["plain_write"] = {
                "seconds": until(lambda: found("plainwriteword") == ["plain.md"]),
                "healthz": health.summary(),
            }

            # (a) mv kb kb.old && cp -r kb.old kb && write kb/new.md
            health.mark()
            subprocess.run(
                [
                    "sh",
                    "-c",
                    "mv kb kb.old && cp -r kb.old kb && "
                    "printf '# New\\n\\nreplacedfolderword after the copy.\\n' > kb/new.md",
                ],
                cwd=work,
                check=True,
            )
            seconds = until(lambda: found("replacedfolderword") == ["new.md"])
            health_a = health.summary()
            (kb / "startword-0000.md").write_text("# Note 0\n\neditedinthecopy now.\n", encoding="utf-8")
            edit = until(lambda: found("editedinthecopy") == ["startword-0000.md"])
            st = status()
            out["replaced"] = {
                "seconds": seconds,
                "healthz": health_a,
                "edit_after_seconds": edit,
                "documents": st.get("documents"),
                "watcher": st.get("watcher"),
            }

            # Baseline: `recreate` notes written at once into the watched folder.
            health.mark()
            before = status().get("documents", 0)
            write_notes(kb / "bulk", recreate, "bulkword")
            out["bulk_write"] = {
                "seconds": until(lambda: indexed(before + recreate, f"bulkword{recreate - 1}")),
                "healthz": health.summary(),
            }

            # (b) rm -rf kb, then recreate it with `recreate` other notes.
            health.mark()
            subprocess.run(["rm", "-rf", "kb"], cwd=work, check=True)
            unhealthy = until(lambda: health.changes and health.changes[-1][1] != "ok")
            st = status()
            gone = {
                "healthz_failed_after_s": unhealthy,
                "documents_kept": st.get("documents"),
                "watcher": st.get("watcher"),
                "healthy": st.get("healthy"),
                "search_still_answers": found("startword1") != [],
            }
            health.mark()
            write_notes(kb, recreate, "recreatedword")
            seconds = until(lambda: indexed(recreate, f"recreatedword{recreate - 1}"))
            st = status()
            out["deleted_and_recreated"] = {
                **gone,
                "seconds": seconds,
                "healthz": health.summary(),
                "documents": st.get("documents"),
                "watcher_after": st.get("watcher"),
                "old_notes_found": found("startword1"),
            }
        out["log_events"] = {
            e: server.log().count(e)
            for e in ("watch_folder_gone", "watch_folder_replaced", "watch_reattached", "Traceback")
        }
    finally:
        server.terminate()

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 1) if a is not None and b else None

    out["ratios"] = {
        "replaced_vs_plain_write": ratio(out["replaced"]["seconds"], out["plain_write"]["seconds"]),
        "recreated_vs_bulk_write": ratio(out["deleted_and_recreated"]["seconds"], out["bulk_write"]["seconds"]),
    }
    return out


def folder_table(out: dict) -> str:
    pw, rp, bw, dr, r = (
        out["plain_write"],
        out["replaced"],
        out["bulk_write"],
        out["deleted_and_recreated"],
        out["ratios"],
    )

    def s(x: float | None) -> str:
        return f"{x} s" if x is not None else f"not within {out['timeout_s']:.0f} s"

    def changes(h: dict) -> str:
        if h["failed"] == 0:
            return f"ok, {h['asked']}/{h['asked']} answers"
        return " → ".join(h["changes"]) + f" ({h['failed']}/{h['asked']} answers failed)"

    return "\n".join(
        [
            f"| change ({out['notes']} notes, periodic reconcile off) | until indexed | /healthz meanwhile |",
            "|---|---|---|",
            f"| one note written into the watched folder (baseline) | {s(pw['seconds'])} | {changes(pw['healthz'])} |",
            f"| `mv kb kb.old && cp -r kb.old kb && write kb/new.md` | {s(rp['seconds'])} until new.md is found "
            f"({r['replaced_vs_plain_write']}x the baseline); then an edit in the copy: {s(rp['edit_after_seconds'])}; "
            f"{rp['documents']} notes, watcher `{rp['watcher']}` | {changes(rp['healthz'])} |",
            f"| {out['recreated_notes']} notes written into the watched folder (baseline) | {s(bw['seconds'])} | "
            f"{changes(bw['healthz'])} |",
            f"| `rm -rf kb` | /healthz fails after {s(dr['healthz_failed_after_s'])}; the index keeps "
            f"{dr['documents_kept']} notes "
            f"(search answers: {dr['search_still_answers']}); watcher `{dr['watcher']}` | |",
            f"| then kb recreated with {out['recreated_notes']} other notes | {s(dr['seconds'])} until all are indexed "
            f"({r['recreated_vs_bulk_write']}x the baseline); {dr['documents']} notes, old ones found: "
            f"{len(dr['old_notes_found'])}; "
            f"watcher `{dr['watcher_after']}` | {changes(dr['healthz'])} |",
            "| log | " + ", ".join(f"{k} {v}" for k, v in out["log_events"].items()) + " | |",
        ]
    )


def http_table(out: dict) -> str:
    st, sb, rf = out["streams"], out["slow_bodies"], out["refusals"]
    return "\n".join(
        [
            "| probe | figure |",
            "|---|---|",
            f"| {st['opened']} event streams from one address | refused: {st['refused']}; held by the server: "
            f"{st['held_by_server']}; "
            f"/healthz {st['healthz_ok']}/{st['healthz_asked']}; a new client {st['new_client']} |",
            f"| {sb['trickling']} trickling bodies from one address | held by the server: {sb['held_by_server']}; "
            f"/healthz {sb['healthz_ok']}/{sb['healthz_asked']}, p50 {sb['healthz_p50_ms']} ms, max "
            f"{sb['healthz_max_ms']} ms |",
            f"| {rf['requests']} requests with an {rf['host_header_bytes']}-byte Host (421) | log grew "
            f"{rf['log_bytes']} bytes: "
            f"{rf['log_bytes_per_request']} bytes per refused request |",
            f"| search with path_globs {out['glob']['glob']} | {out['glob']['answer']} in "
            f"{out['glob']['search_ms']} ms; "
            f"/healthz {out['glob']['healthz_ok']}/{out['glob']['healthz_during']} during it, max "
            f"{out['glob']['healthz_max_ms']} ms |",
            f"| `groove index` with .grooveignore {out['grooveignore']['pattern']} | exit "
            f"{out['grooveignore']['exit_code']} in "
            f"{out['grooveignore']['seconds']} s, {out['grooveignore']['notes_indexed']} note(s) indexed; "
            f"{out['grooveignore']['refused_line']} |",
            f"| idle connections from {out['many_addresses']['addresses']} addresses, reopened when closed "
            f"({out['many_addresses']['connections_opened']} opened) | /healthz "
            f"{out['many_addresses']['healthz_ok']}/{out['many_addresses']['probes']}; a new client "
            f"{out['many_addresses']['new_client_ok']}/{out['many_addresses']['probes']} |",
            f"| tracebacks in the server's log | {out['tracebacks_in_log']} |",
        ]
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--real", action="store_true", help="index with the configured model instead of the fake")
    parser.add_argument(
        "--case", action="append", metavar="NAME", help="only this case (repeatable); see tests/hostile.py"
    )
    parser.add_argument(
        "--config", type=Path, metavar="PATH", help="a groove.toml for every run (e.g. a larger max_file_bytes)"
    )
    parser.add_argument(
        "--http",
        action="store_true",
        help="probe the HTTP front end instead (streams, slow bodies, refusals, globs, the notes folder replaced)",
    )
    parser.add_argument(
        "--streams", type=int, default=300, help="event streams opened from one address (--http; default 300)"
    )
    parser.add_argument(
        "--tricklers", type=int, default=260, help="trickling bodies from one address (--http; default 260)"
    )
    parser.add_argument(
        "--folder", action="store_true", help="only the notes folder replaced and deleted under the server"
    )
    parser.add_argument(
        "--folder-notes", type=int, default=40, help="notes in the folder that is replaced (default 40)"
    )
    parser.add_argument(
        "--recreate", type=int, default=200, help="notes in the folder recreated after rm -rf (default 200)"
    )
    parser.add_argument("--folder-timeout", type=float, default=120.0, help="seconds each wait may take (default 120)")
    from bench.attacks import MEMORY, PROBES

    parser.add_argument(
        "--attacks",
        action="store_true",
        help="issue 36's attacks as regression probes, each printing the issue's figure: "
        + "; ".join(f"{n}. {what}" for n, what in PROBES.items())
        + f" (point 1 is --http's probe 6; {MEMORY})",
    )
    parser.add_argument(
        "--attack", action="append", choices=list(PROBES), metavar="N", help="only this attack of issue 36 (repeatable)"
    )
    parser.add_argument(
        "--clients",
        type=_counts,
        default=[17, 24, 32, 64],
        metavar="N,N",
        help="attack 2: local clients at once (default 17,24,32,64)",
    )
    parser.add_argument(
        "--session-cap", type=int, default=0, metavar="N", help="attack 3: [serve.http] max_sessions (default: 256)"
    )
    parser.add_argument(
        "--handshakes", type=_counts, default=[10, 12], metavar="N,N", help="attack 3: initialize at once (10,12)"
    )
    parser.add_argument("--rename-chunks", type=int, default=150, help="attack 4: chunks of the renamed note (150)")
    parser.add_argument("--rename-tries", type=int, default=6, help="attack 4: renames of that note (6)")
    parser.add_argument("--renames", type=int, default=20, help="attack 4: single-note renames 1 s apart (20)")
    parser.add_argument("--fd-limit", type=int, default=1024, help="attack 9: the daemon's open-file limit (1024)")
    parser.add_argument(
        "--local-connections", type=int, default=1100, help="attack 9: idle local-socket connections (1100)"
    )
    parser.add_argument("--subscriptions", type=int, default=1100, help="attack 10: subscriptions in a session (1100)")
    parser.add_argument(
        "--token-addresses", type=int, default=60, help="attack 10: addresses guessing tokens (60; 0: not probed)"
    )
    parser.add_argument(
        "--token-guesses", type=int, default=1, help="attack 10: wrong tokens per address (1; the issue: 200 x 5)"
    )


def _counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected counts like 17,24 (each at least 1), got {text!r}")
    return counts


def main_async(args: argparse.Namespace) -> dict:
    """`python -m bench hostile [--http | --folder]`: prints its table and answers its figures.

    The registry writes them to --json.
    """
    if args.attacks or args.attack:
        from bench.attacks import PROBES, run
        from bench.attacks import table as attacks_table

        picked = [n for n in PROBES if args.attacks or n in args.attack]
        out = run(picked, args)
        print("issue 36's attacks: groove serve and groove with the bag-of-words fake embedder, loopback\n")
        print(attacks_table(out))
        return out
    if args.http or args.folder:
        out = {}
        with tempfile.TemporaryDirectory(prefix="groove-hostile-http-") as tmp:
            if args.http:
                out = run_http(Path(tmp) / "http", args.streams, args.tricklers)
            out["folder"] = run_folder(Path(tmp) / "folder", args.folder_notes, args.recreate, args.folder_timeout)
        print("groove serve --transport http, default [serve.http] settings, the fake embedder\n")
        if args.http:
            print(http_table(out) + "\n")
        print(folder_table(out["folder"]))
        return out
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
    return {"model": model, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    out = main_async(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
