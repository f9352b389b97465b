"""Bad files: `groove index` on each case of the hostile corpus, one child process per case.

    python -m bench.hostile              # every case, the bag-of-words fake embedder
    python -m bench.hostile --real       # the configured (real) model instead: slower, adds its memory
    python -m bench.hostile --case "a 50 MB note" --case "one 10 MB line"
    python -m bench.hostile --http       # the HTTP front end instead (issue 22 points 1-3, 5, 6)
    python -m bench hostile --http       # the same, through the registry (--json PATH before the name)

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
HTTP_DOC = """`--http`: hostile clients against one `groove serve --transport http` (default [serve.http]
settings, the fake embedder, loopback), three probes in turn:

1. event streams: `--streams` sessions from one address each open their `GET /mcp` stream and keep it;
   reported: how many the server still holds, whether /healthz answers and a new client (initialize, then
   a search) gets in;
2. slow bodies: `--tricklers` connections from one address send a POST's headers, then one byte of body
   every half second; meanwhile /healthz is asked 10 times: how many answered 200 and their latency,
   and how many trickling connections the server still holds;
3. refusals in the log: 200 requests with an 8 KB Host header (421): log bytes per refused request;
4. a catastrophic glob (points 1-2): a search with `path_globs: ["*?*?*?*?*?*?*?*?*?*?Q"]` against a note with
   a 200-character name, /healthz asked while it runs (its latency), and `groove index` of a folder whose
   .grooveignore holds the same pattern and one with 20 pairs (seconds, and the refused line's report).
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


def run_http(work: Path, streams: int, tricklers: int) -> dict:
    import select
    import socket
    import statistics

    import httpx

    sys.path.insert(0, str(ROOT / "tests"))
    from mcp_support import ServerProcess  # noqa: E402  (the tests' real `groove serve` subprocess)

    kb = work / "notes"
    kb.mkdir(parents=True)
    (kb / "a.md").write_text("# Alpha\n\nThe quokka migration plan.\n", encoding="utf-8")
    (kb / ("quokka-" + "q" * 200 + ".md")).write_text("# Long\n\nA quokka note with a long name.\n", encoding="utf-8")
    server = ServerProcess(kb, work / "index.sqlite", work, command=FAKE_GROOVE)
    out: dict = {}
    try:
        server.wait_healthy()
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}}}
        mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

        def healthz_ms() -> float | None:
            t0 = time.perf_counter()
            try:
                ok = httpx.get(server.base + "/healthz", timeout=10).status_code == 200
            except httpx.HTTPError:
                ok = False
            return (time.perf_counter() - t0) * 1000 if ok else None

        # 1. event streams
        socks: list[tuple[socket.socket, bytes]] = []
        refused = 0
        with httpx.Client(headers=mcp, timeout=30) as http:
            for _ in range(streams):
                try:
                    sid = http.post(server.url, json=init).headers["mcp-session-id"]
                    session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
                    http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
                    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                    s.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n"
                              f"Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n".encode())
                    socks.append((s, _read_head(s)))
                except (httpx.HTTPError, OSError, KeyError):
                    refused += 1  # the server could not take one more session or connection
        time.sleep(1.0)
        held = sum(not _stream_ended(s, d)[0] for s, d in socks)
        health = [healthz_ms() for _ in range(5)]
        try:
            with httpx.Client(headers=mcp, timeout=30) as http:
                r = http.post(server.url, json=init)
                sid = r.headers["mcp-session-id"]
                session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
                http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
                found = http.post(server.url, headers=session, json={
                    "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "search", "arguments": {"query": "quokka", "retriever": "fts"}}})
                new_client = "connects and searches" if found.status_code == 200 and "a.md" in found.text else f"HTTP {found.status_code}"
        except (httpx.HTTPError, KeyError) as exc:
            new_client = f"refused ({type(exc).__name__})"
        for s, _ in socks:
            s.close()
        out["streams"] = {"opened": streams, "refused": refused, "held_by_server": held, "healthz_ok": sum(h is not None for h in health),
                          "healthz_asked": len(health), "new_client": new_client}

        # 2. slow bodies
        time.sleep(1.0)
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nContent-Length: 400\r\n\r\n").encode()
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
            latencies.append(healthz_ms())
            time.sleep(0.5)
        ok = [x for x in latencies if x is not None]
        out["slow_bodies"] = {"trickling": tricklers, "held_by_server": tricklers - len(closed),
                              "healthz_ok": len(ok), "healthz_asked": len(latencies),
                              "healthz_p50_ms": round(statistics.median(ok), 1) if ok else None,
                              "healthz_max_ms": round(max(ok), 1) if ok else None}
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
        out["refusals"] = {"requests": 200, "host_header_bytes": 8196, "log_bytes": grown,
                           "log_bytes_per_request": round(grown / 200, 1)}

        # 4. a catastrophic glob, searched while /healthz is asked
        import threading

        glob = "*?" * 10 + "Q"
        searched: dict = {}

        def search() -> None:
            t0 = time.perf_counter()
            with httpx.Client(headers=mcp, timeout=120) as http:
                sid = http.post(server.url, json=init).headers["mcp-session-id"]
                session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
                http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
                r = http.post(server.url, headers=session, json={
                    "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "search", "arguments": {"query": "quokka", "path_globs": [glob]}}})
            searched.update(ms=(time.perf_counter() - t0) * 1000, status=r.status_code,
                            answer=("error: " + r.text.split('"message":"')[1].split('"')[0][:120]) if '"message"' in r.text
                            else "answered")

        worker = threading.Thread(target=search)
        worker.start()
        during = []
        while worker.is_alive():
            during.append(healthz_ms())
            time.sleep(0.05)
        worker.join()
        ok = [x for x in during if x is not None]
        out["glob"] = {"glob": glob, "search_ms": round(searched["ms"], 1), "answer": searched["answer"],
                       "healthz_during": len(during), "healthz_ok": len(ok),
                       "healthz_max_ms": round(max(ok), 1) if ok else None}
        out["tracebacks_in_log"] = server.log().count("Traceback")
    finally:
        server.terminate()
    out["grooveignore"] = run_grooveignore(work / "ignore", "*?" * 10 + "Q")
    return out


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
    done = subprocess.run([*FAKE_GROOVE, "index", "--kb", str(kb), "--index", str(work / "index.sqlite"),
                           "--format", "json"], capture_output=True, text=True, timeout=300, cwd=work)
    seconds = time.perf_counter() - t0
    refused = [line for line in done.stderr.splitlines() if ".grooveignore" in line][:1]
    report = json.loads(done.stdout) if done.returncode == 0 else {}
    return {"pattern": pattern, "exit_code": done.returncode, "seconds": round(seconds, 2),
            "notes_indexed": report.get("added"), "refused_line": refused[0][:200] if refused else None}


def http_table(out: dict) -> str:
    st, sb, rf = out["streams"], out["slow_bodies"], out["refusals"]
    return "\n".join([
        "| probe | figure |", "|---|---|",
        f"| {st['opened']} event streams from one address | refused: {st['refused']}; held by the server: {st['held_by_server']}; "
        f"/healthz {st['healthz_ok']}/{st['healthz_asked']}; a new client {st['new_client']} |",
        f"| {sb['trickling']} trickling bodies from one address | held by the server: {sb['held_by_server']}; "
        f"/healthz {sb['healthz_ok']}/{sb['healthz_asked']}, p50 {sb['healthz_p50_ms']} ms, max {sb['healthz_max_ms']} ms |",
        f"| {rf['requests']} requests with an {rf['host_header_bytes']}-byte Host (421) | log grew {rf['log_bytes']} bytes: "
        f"{rf['log_bytes_per_request']} bytes per refused request |",
        f"| search with path_globs {out['glob']['glob']} | {out['glob']['answer']} in {out['glob']['search_ms']} ms; "
        f"/healthz {out['glob']['healthz_ok']}/{out['glob']['healthz_during']} during it, max {out['glob']['healthz_max_ms']} ms |",
        f"| `groove index` with .grooveignore {out['grooveignore']['pattern']} | exit {out['grooveignore']['exit_code']} in "
        f"{out['grooveignore']['seconds']} s, {out['grooveignore']['notes_indexed']} note(s) indexed; "
        f"{out['grooveignore']['refused_line']} |",
        f"| tracebacks in the server's log | {out['tracebacks_in_log']} |",
    ])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--real", action="store_true", help="index with the configured model instead of the fake")
    parser.add_argument("--case", action="append", metavar="NAME", help="only this case (repeatable); see tests/hostile.py")
    parser.add_argument("--config", type=Path, metavar="PATH", help="a groove.toml for every run (e.g. a larger max_file_bytes)")
    parser.add_argument("--http", action="store_true", help="probe the HTTP front end instead (streams, slow bodies, refusals, globs)")
    parser.add_argument("--streams", type=int, default=300, help="event streams opened from one address (--http; default 300)")
    parser.add_argument("--tricklers", type=int, default=260, help="trickling bodies from one address (--http; default 260)")


def main_async(args: argparse.Namespace) -> dict:
    """`python -m bench hostile [--http]`: prints its table and answers its figures (the registry writes --json)."""
    if args.http:
        with tempfile.TemporaryDirectory(prefix="groove-hostile-http-") as tmp:
            out = run_http(Path(tmp), args.streams, args.tricklers)
        print("groove serve --transport http, default [serve.http] settings, the fake embedder\n")
        print(http_table(out))
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
