"""Issue 36's attacks as regression probes: `python -m bench hostile --attacks` (bench/hostile.py's flags).

Each probe reproduces one numbered attack of issue 36 against a real `groove serve` (the bag-of-words fake
embedder: these are about the service, not the model) or real `groove` commands, and reports the figure the
issue measured, nothing else. The reproducers are the tests' own (tests/support/: flood.py, daemon.py,
local_socket.py, server.py). Point 1 (many addresses) is probe 6 of `--http`; point 5 (memory under mixed
load) needs the real model and is measured by tests/test_memory_bursts.py (see MEMORY).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
import warnings
from collections import Counter
from pathlib import Path

from tests.support.server import FAKE_GROOVE, ServerProcess, server_env

# The probes by issue 36's numbers; `--attacks` runs them all, `--attack N` one (repeatable).
PROBES = {
    "2": "local clients at once from one address",
    "3": "handshakes at once at the session cap",
    "4": "renames while serving",
    "6": "--index naming another program's SQLite file",
    "7": "index_path from an untrusted ./groove.toml",
    "8": "/healthz while embedding writes fail (full disk)",
    "9": "idle local-socket connections past the fd limit",
    "10": "lows: long path part, cross-site /ui/api, long heading, subscriptions, wrong tokens",
}
MEMORY = (
    "point 5 (memory through bursts of clients plus an editor) needs the real model: "
    "GROOVE_BURST_CLIENTS=24 GROOVE_BURST_COUNT=6 GROOVE_BURST_SECONDS=20 GROOVE_BURST_EDITS=100 "
    "python -m pytest tests/test_memory_bursts.py -s (docs/operations.md, 'Memory under load')"
)
LOWS_LEFT = (
    "not probed here (each has its test): a read-only index folder (tests/test_index_folder.py, needs another "
    "user), a notes folder symlink re-pointed (tests/test_watch_symlink.py), kill -9 during the engine build "
    "(tests/test_e5_engine.py, the real model), doctor's advice for linked notes (tests/test_odd_files.py), "
    "/healthz before the first scan (tests/test_daemon_faults.py)"
)
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = "2025-11-25"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}},
}


def _session(http, url: str) -> tuple[dict[str, str], list[int]]:
    """initialize + notifications/initialized: the session's headers and the two HTTP statuses."""
    first = http.post(url, json=INITIALIZE)
    sid = first.headers.get("mcp-session-id", "")
    session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": VERSION}
    second = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return session, [first.status_code, second.status_code]


def _call(http, url: str, session: dict[str, str], name: str, arguments: dict):
    return http.post(
        url,
        headers=session,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
    )


def _answer(response) -> dict:
    """A tools/call answer's result (JSON body, or the `data:` line of an SSE one)."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next((line[5:] for line in text.splitlines() if line.startswith("data:")), "{}")
    return json.loads(text).get("result") or {}


def _status(server: ServerProcess) -> dict:
    """index_status over MCP (a session of its own)."""
    import httpx

    with httpx.Client(headers=MCP_HEADERS, timeout=30) as http:
        session, _ = _session(http, server.url)
        return _answer(_call(http, server.url, session, "index_status", {})).get("structuredContent") or {}


def _serve(work: Path, kb: Path, toml: str = "", **kwargs) -> ServerProcess:
    work.mkdir(parents=True, exist_ok=True)
    extra: tuple[str, ...] = ()
    if toml:
        (work / "groove.toml").write_text(toml, encoding="utf-8")
        extra = ("--config", str(work / "groove.toml"))
    server = ServerProcess(
        kb, work / "index.sqlite", work, extra=extra, command=kwargs.pop("command", FAKE_GROOVE), **kwargs
    )
    server.wait_healthy()
    return server


def _until(done, timeout: float, every: float = 0.1) -> float | None:
    """Seconds until `done()` is true, or None past `timeout`."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if done():
            return round(time.perf_counter() - t0, 2)
        time.sleep(every)
    return None


# --- 2. local clients at once ----------------------------------------------------------------------------


def clients_at_once(server: ServerProcess, count: int) -> dict:
    """`count` clients on 127.0.0.1 start together, each on its own connection: initialize, initialized and one
    search; then `count` initialize requests sent whole on as many connections before any answer is read, and
    again with every body 0.2 s after its headers (what a server on busy cores sees of many clients).
    Counted: HTTP 408 and 503 (what the issue saw), other failures."""
    import httpx

    start = threading.Barrier(count)
    statuses: list[int] = []
    tool_errors: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        got: list[int] = []
        error = ""
        with httpx.Client(headers=MCP_HEADERS, timeout=60) as http:
            start.wait()
            try:
                session, got = _session(http, server.url)
                r = _call(http, server.url, session, "search", {"query": "quokka", "retriever": "fts"})
                got.append(r.status_code)
                if r.status_code == 200 and _answer(r).get("isError"):
                    error = "tool error"
            except httpx.HTTPError as exc:
                got.append(0)
                error = type(exc).__name__
        with lock:
            statuses.extend(got)
            if error:
                tool_errors.append(error)

    threads = [threading.Thread(target=client) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    from tests.support.flood import whole_requests_at_once  # tests/test_http_limits.py's burst

    body = json.dumps(INITIALIZE).encode()
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    for gap in (0.0, 0.2):  # sent whole; then each body 0.2 s after its headers (busy cores)
        for line in whole_requests_at_once(server.port, "127.0.0.1", request, count, body_after_s=gap):
            parts = line.split()
            statuses.append(int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0)
    codes = Counter(statuses)
    return {
        "clients": count,
        "requests": len(statuses),
        "408": codes.get(408, 0),
        "503": codes.get(503, 0),
        "other_failed": sum(n for c, n in codes.items() if c not in (200, 202, 408, 503)) + len(tool_errors),
    }


# --- 3. handshakes at once at the session cap ------------------------------------------------------------


def handshakes_at_cap(server: ServerProcess, cap: int, bursts: list[int]) -> dict:
    """The session cap filled with idle sessions, then each burst of `initialize` sent at once: 503s per burst."""
    import httpx

    from tests.support.flood import handshakes_at_once  # tests/test_http_hostile.py's race

    with httpx.Client(headers=MCP_HEADERS, timeout=30) as http:
        for _ in range(cap):
            http.post(server.url, json=INITIALIZE)
    answered = {n: Counter(handshakes_at_once(server.url, n, MCP_HEADERS, INITIALIZE)) for n in bursts}
    return {
        "cap": cap,
        "bursts": {n: codes.get(503, 0) for n, codes in answered.items()},
        "other_failed": {n: sum(k for c, k in codes.items() if c not in (200, 503)) for n, codes in answered.items()},
    }


# --- 4. renames while serving ----------------------------------------------------------------------------


def renames(work: Path, chunks: int, tries: int, singles: int, timeout: float = 120.0) -> dict:
    """A `chunks`-chunk note renamed `tries` times (`mv long.md long1.md`), each once the last settled, then
    `singles` one-section notes renamed 1 s apart, each seen by the watcher as the issue logged it (`deleted=1`,
    then `added=1` a batch later: moved out of the folder, and in under its new name 1 s later): vectors
    computed for each (index_status's embeddings_computed), where a rename should compute none."""
    from tests.support.common import section_text

    kb = work / "notes"
    kb.mkdir(parents=True)
    long_text = "# Long\n\n" + "".join(section_text(i) for i in range(chunks - 1))
    (kb / "long0.md").write_text(long_text, encoding="utf-8")
    for i in range(singles):
        (kb / f"single-{i:02d}.md").write_text(f"# Single {i}\n\n{section_text(1000 + i)}", encoding="utf-8")
    server = _serve(work, kb)
    out: dict = {"chunks": chunks}
    try:
        server.wait_indexed(1 + singles, timeout=timeout)

        def settled(documents: int) -> dict:
            """index_status once the folder shows `documents` and nothing is pending twice in a row."""
            last: dict = {}

            def done() -> bool:
                nonlocal last
                st = _status(server)
                steady = st.get("embeddings_computed") == last.get("embeddings_computed")
                ok = st.get("documents") == documents and not st.get("pending_chunks") and steady and last
                last = st
                return bool(ok)

            _until(done, timeout, every=0.5)
            return last

        computed = settled(1 + singles)["embeddings_computed"]
        out["chunks_indexed"] = _status(server).get("chunks")
        per_try = []
        for i in range(tries):
            os.rename(kb / f"long{i}.md", kb / f"long{i + 1}.md")
            now = settled(1 + singles)["embeddings_computed"]
            per_try.append(now - computed)
            computed = now
        out["long_renames"] = per_try
        marks = []
        away = work / "away.md"  # outside the watched folder
        for i in range(singles):
            os.rename(kb / f"single-{i:02d}.md", away)  # what the watcher saw of the renames:
            time.sleep(1.0)  # the deletion in one batch ...
            os.rename(away, kb / f"renamed-{i:02d}.md")  # ... the note under its new name in the next
            time.sleep(1.0)
            marks.append(_status(server).get("embeddings_computed", 0))
        final = settled(1 + singles)["embeddings_computed"]
        ends = [*marks[:-1], final]  # what had been computed 1 s after each rename (the last: once settled)
        steps = [b - a for a, b in zip([computed, *ends[:-1]], ends, strict=True)]
        embedded = sum(s > 0 for s in steps)
        out["single_renames"] = {"renames": singles, "embedded_any": embedded, "chunks": final - computed}
        out["log_lines_added"] = server.log().count("added=")
    finally:
        server.terminate()
    return out


# --- 6. another program's SQLite file as --index ---------------------------------------------------------


def foreign_db(work: Path) -> dict:
    """`groove index --index app.db` on an existing SQLite database of another program."""
    kb = work / "notes"
    kb.mkdir(parents=True)
    (kb / "a.md").write_text("# A\n\nSome text.\n", encoding="utf-8")
    app = work / "app.db"
    con = sqlite3.connect(app)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'ada')")
    con.commit()
    con.close()

    def tables() -> int:
        con = sqlite3.connect(f"file:{app}?mode=ro", uri=True)
        try:
            return len(con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall())
        finally:
            con.close()

    before, tables_before = app.stat().st_size, tables()
    done = subprocess.run(
        [*FAKE_GROOVE, "index", "--kb", str(kb), "--index", str(app)],
        cwd=work,
        env=server_env(work),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return {
        "exit": done.returncode,
        "said": _first_error(done.stderr),
        "bytes_before": before,
        "bytes_after": app.stat().st_size,
        "tables_before": tables_before,
        "tables_after": tables(),
    }


def _first_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("groove: error:")]
    return (lines[0] if lines else "").removeprefix("groove: error: ")[:160]


# --- 7. index_path from an untrusted ./groove.toml -------------------------------------------------------


def untrusted_index_path(work: Path) -> dict:
    """A cloned project whose ./groove.toml sets index_path outside its folder: `groove index` before and
    after `groove trust`, and whether the index file was written."""
    project, elsewhere = work / "project", work / "elsewhere" / "index.sqlite"
    (project / "notes").mkdir(parents=True)
    (project / "notes" / "a.md").write_text("# Plans\n\nThe quokka migration starts on Tuesday.\n", encoding="utf-8")
    (project / "groove.toml").write_text(f'kb_path = "notes"\nindex_path = "{elsewhere}"\n', encoding="utf-8")

    def groove(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*FAKE_GROOVE, *argv], cwd=project, env=server_env(work), capture_output=True, text=True, timeout=300
        )

    first = groove("index")
    written_before_trust = elsewhere.exists()
    trusted = groove("trust")
    second = groove("index")
    return {
        "untrusted_exit": first.returncode,
        "said": _first_error(first.stderr),
        "written_before_trust": written_before_trust,
        "trust_exit": trusted.returncode,
        "trusted_exit": second.returncode,
        "written_after_trust": elsewhere.exists(),
    }


# --- 8. /healthz while embedding writes fail -------------------------------------------------------------


def full_disk(work: Path, timeout: float = 60.0) -> dict:
    """A daemon in process (the real watcher and HTTP app) whose embedding queue refuses every batch of vectors
    as a full disk does (tests/support/daemon.py's FullDisk, the fault tests/test_daemon_faults.py injects);
    a note written: /healthz's status and reason, and once space returns."""
    import anyio

    from groove.config import load_settings
    from tests.support.daemon import FullDisk, healthz_client, idle, running
    from tests.support.fakes import BagOfWordsEmbedder

    kb = work / "notes"
    kb.mkdir(parents=True)
    for i in range(3):
        (kb / f"n{i}.md").write_text(f"# Note {i}\n\nA note about lanterns{i} and rivers.\n", encoding="utf-8")
    config = work / "groove.toml"  # named, so no ./groove.toml or user config of this machine applies
    config.write_text("[watch]\ndebounce_ms = 50\n", encoding="utf-8")
    settings = load_settings(config, kb_path=kb, index_path=work / "index.sqlite")
    out: dict = {}

    async def probe() -> None:
        async with running(settings, BagOfWordsEmbedder()) as daemon, healthz_client(daemon) as http:
            await idle(daemon)
            disk = FullDisk(daemon)
            t0 = time.perf_counter()
            (kb / "new.md").write_text("# New\n\nA fresh note about kingfishers.\n", encoding="utf-8")
            for _ in range(int(timeout * 10)):
                r = await http.get("/healthz")
                if r.status_code != 200:
                    break
                await anyio.sleep(0.1)
            body = r.json()
            out.update(
                status=r.status_code,
                error=body.get("error", "ok"),
                pending=body.get("pending"),
                seconds=round(time.perf_counter() - t0, 2),
                batches_refused=disk.refused,
            )
            disk.full = False
            t0 = time.perf_counter()
            for _ in range(int(timeout * 10)):
                if (await http.get("/healthz")).status_code == 200:
                    break
                await anyio.sleep(0.1)
            out["healthy_again_s"] = round(time.perf_counter() - t0, 2)

    anyio.run(probe)
    return out


# --- 9. idle local-socket connections past the fd limit --------------------------------------------------


def local_fd_limit(work: Path, limit: int, connections: int, timeout: float = 30.0) -> dict:
    """`groove serve` under `prlimit --nofile=LIMIT:LIMIT`, `connections` idle connections to its local socket:
    whether it lives, /healthz, and whether a new `groove search` is answered by it."""
    import httpx

    from groove.serve.process.local import socket_path
    from tests.support.local_socket import closed, flood, limited

    kb = work / "notes"
    kb.mkdir(parents=True)
    (kb / "tomatoes.md").write_text("# Tomatoes\n\nPinch the side shoots of the tomatoes.\n", encoding="utf-8")
    index = work / "index.sqlite"
    server = _serve(work, kb, command=limited(FAKE_GROOVE, limit))
    out: dict = {"fd_limit": limit, "connections": connections}
    held: list[socket.socket] = []
    try:
        try:
            held = flood(socket_path(index), connections)
        except OSError as exc:
            out["flood_error"] = type(exc).__name__
        _until(lambda: server.proc.poll() is not None or sum(not closed(s) for s in held) <= 64, timeout, every=0.5)
        out["closed_by_daemon"] = sum(closed(s) for s in held)
        out["alive"] = server.proc.poll() is None
        try:
            out["healthz"] = httpx.get(server.base + "/healthz", timeout=10).status_code
        except httpx.HTTPError as exc:
            out["healthz"] = type(exc).__name__
        t0 = time.perf_counter()
        got = subprocess.run(
            [*FAKE_GROOVE, "search", "--kb", str(kb), "--index", str(index), "tomatoes"],
            cwd=work,
            env=server_env(work),
            capture_output=True,
            text=True,
            timeout=120,
        )
        out["search_s"] = round(time.perf_counter() - t0, 2)
        out["search_by_daemon"] = got.returncode == 0 and "asked the running groove serve" in got.stderr
        out["tracebacks"] = server.log().count("Traceback")
    finally:
        for s in held:
            s.close()
        server.terminate()
    return out


# --- 10. the cheap lows ----------------------------------------------------------------------------------


def long_path_part(work: Path) -> dict:
    """`groove status --kb` with a folder name of 300 bytes: the lines it writes to stderr, a traceback?"""
    work.mkdir(parents=True)
    done = subprocess.run(
        [*FAKE_GROOVE, "status", "--kb", str(work / ("n" * 300)), "--index", str(work / "index.sqlite")],
        cwd=work,
        env=server_env(work),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return {
        "exit": done.returncode,
        "stderr_lines": len(done.stderr.strip().splitlines()),
        "traceback": "Traceback" in done.stderr,
        "said": _first_error(done.stderr),
    }


def cross_site(server: ServerProcess) -> dict:
    """GET /ui/api/note as another site's page (an <img>) and as a typed URL: the statuses."""
    import httpx

    url = server.base + "/ui/api/note?path=a.md"
    other = httpx.get(
        url,
        headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"},
        timeout=10,
    )
    own = httpx.get(url, headers={"Sec-Fetch-Site": "none"}, timeout=10)
    return {"cross_site": other.status_code, "typed_url": own.status_code}


def long_heading(server: ServerProcess, kb: Path, timeout: float = 300.0) -> dict:
    """A note with a 200,000-character heading written while serving; once a search finds it, the bytes of a
    search with max_chars 100 (and the seconds until it was found, where a heading is not bounded a long while)."""
    import httpx

    (kb / "heading.md").write_text("# " + "h" * 200_000 + "\n\nquokkaheading under a long heading.\n", encoding="utf-8")
    t0 = time.perf_counter()
    with httpx.Client(headers=MCP_HEADERS, timeout=60) as http:
        session, _ = _session(http, server.url)
        while True:
            r = _call(
                http, server.url, session, "search", {"query": "quokkaheading", "max_chars": 100, "retriever": "fts"}
            )
            if "heading.md" in r.text or time.perf_counter() - t0 > timeout:
                break
            time.sleep(0.5)
    return {
        "status": r.status_code,
        "bytes": len(r.content),
        "found": "heading.md" in r.text,
        "found_after_s": round(time.perf_counter() - t0, 1),
    }


def subscriptions(server: ServerProcess, count: int) -> dict:
    """`count` resources/subscribe to distinct notes in one session (the SDK client): accepted, refused."""
    import anyio
    from mcp.shared.exceptions import MCPError

    from groove.search.answers import note_uri

    out: dict = {"asked": count, "accepted": 0, "refused": 0, "said": ""}

    async def probe() -> None:
        async with server.client(mode="legacy") as client:
            for i in range(count):
                try:
                    await client.subscribe_resource(note_uri(f"sub/n{i:05d}.md"))
                    out["accepted"] += 1
                except MCPError as exc:
                    out["refused"] += 1
                    out["said"] = out["said"] or str(exc)[:120]

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "resources/(un)?subscribe is removed")  # legacy mode's, on purpose
        anyio.run(probe)
    return out


def wrong_tokens(work: Path, addresses: int, guesses: int) -> dict:
    """A 0.0.0.0 server with a token; `guesses` wrong tokens from each of `addresses` loopback addresses (20 at a
    time): 401s, 429s, guesses a second; then the right token from a new address, its status and latency."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from tests.support.flood import loopback_sources

    kb = work / "notes"
    kb.mkdir(parents=True)
    (kb / "a.md").write_text("# A\n\nThe quokka plan.\n", encoding="utf-8")
    token = "groove-probe-token-0123456789abcdef"
    server = ServerProcess(
        kb,
        work / "index.sqlite",
        work,
        bind_host="0.0.0.0",
        token=token,
        env={"GROOVE_TOKEN": token},
        command=FAKE_GROOVE,
    )
    out: dict = {"addresses": addresses, "guesses": addresses * guesses}
    try:
        server.wait_healthy()

        def guess(source: str) -> list[int]:
            got = []
            with httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=30) as http:
                for _ in range(guesses):
                    try:
                        r = http.get(server.base + "/healthz", headers={"Authorization": "Bearer wrong"})
                        got.append(r.status_code)
                    except httpx.HTTPError:
                        got.append(0)
            return got

        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=20) as pool:
            codes = Counter(c for got in pool.map(guess, loopback_sources(addresses)) for c in got)
        seconds = time.perf_counter() - t0
        out.update(
            {
                "401": codes.get(401, 0),
                "429": codes.get(429, 0),
                "seconds": round(seconds, 1),
                "per_s": round(out["guesses"] / seconds, 1),
            }
        )
        t0 = time.perf_counter()
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30) as http:
            out["right_token"] = http.get(server.base + "/healthz", headers=server.headers).status_code
        out["right_token_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    finally:
        server.terminate()
    return out


# --- the run ---------------------------------------------------------------------------------------------


def run(picked: list[str], args) -> dict:
    """The probes `picked` (issue 36's numbers), sized by `args` (bench/hostile.py's flags)."""
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="groove-attacks-") as tmp:
        root = Path(tmp)
        if {"2", "3", "10"} & set(picked):
            kb = root / "plain" / "notes"
            kb.mkdir(parents=True)
            (kb / "a.md").write_text("# Alpha\n\nThe quokka migration plan.\n", encoding="utf-8")
            cap = f"[serve.http]\nmax_sessions = {args.session_cap}\n" if args.session_cap else ""
            server = _serve(root / "plain", kb, cap)
            try:
                server.wait_indexed(1, timeout=120, embedded=False)  # the probes search by words
                if "2" in picked:
                    out["2"] = [clients_at_once(server, n) for n in args.clients]
                if "3" in picked:
                    out["3"] = handshakes_at_cap(server, args.session_cap or 256, args.handshakes)
                if "10" in picked:
                    out["10"] = {
                        "cross_site": cross_site(server),
                        "long_heading": long_heading(server, kb),
                        "subscriptions": subscriptions(server, args.subscriptions),
                    }
                out["tracebacks_in_log"] = server.log().count("Traceback")
            finally:
                server.terminate()
        if "4" in picked:
            out["4"] = renames(root / "renames", args.rename_chunks, args.rename_tries, args.renames)
        if "6" in picked:
            out["6"] = foreign_db(root / "foreign")
        if "7" in picked:
            out["7"] = untrusted_index_path(root / "trust")
        if "8" in picked:
            out["8"] = full_disk(root / "disk")
        if "9" in picked:
            out["9"] = local_fd_limit(root / "local", args.fd_limit, args.local_connections)
        if "10" in picked:
            out["10"]["long_path_part"] = long_path_part(root / "path")
            if args.token_addresses:
                out["10"]["wrong_tokens"] = wrong_tokens(root / "tokens", args.token_addresses, args.token_guesses)
    shutil.rmtree(root, ignore_errors=True)
    # The temp folder's name says nothing: the lines groove printed name it $TMP.
    return json.loads(json.dumps(out).replace(str(root), "$TMP"))


def table(out: dict) -> str:
    """One row per probe: the attack and the figure the issue measured."""
    rows = ["| # | attack (issue 36) | figure now |", "|---|---|---|"]
    rows.append("| 1 | idle connections from 300 loopback addresses | not here: `bench hostile --http`, probe 6 |")
    if "2" in out:
        parts = []
        for r in out["2"]:
            other = f" ({r['other_failed']} other failures)" if r["other_failed"] else ""
            parts.append(f"{r['clients']}: {r['408']} x 408, {r['503']} x 503 of {r['requests']} requests{other}")
        figures = "; ".join(parts)
        rows.append(
            f"| 2 | N local clients at once from 127.0.0.1 (initialize, a search), then N initialize sent whole "
            f"before any answer is read, and with each body 0.2 s after its headers | {figures} |"
        )
    if "3" in out:
        other = out["3"]["other_failed"]
        bursts = "; ".join(
            f"{n} at once: {k} x 503" + (f" ({other[n]} other failures)" if other[n] else "")
            for n, k in out["3"]["bursts"].items()
        )
        rows.append(f"| 3 | `initialize` at once with {out['3']['cap']} idle sessions (the cap) | {bursts} |")
    if "4" in out:
        r = out["4"]
        rows.append(
            f"| 4 | `mv` of a {r['chunks']}-chunk note while serving, {len(r['long_renames'])} times | "
            f"chunks embedded per rename: {', '.join(map(str, r['long_renames']))} |"
        )
        s = r["single_renames"]
        rows.append(
            f"| 4 | {s['renames']} single-note renames 1 s apart, each a deletion then an addition a batch later | "
            f"{s['embedded_any']} of {s['renames']} "
            f"embedded anything ({s['chunks']} chunks in all) |"
        )
    rows.append(f"| 5 | memory under mixed load | not here: {MEMORY} |")
    if "6" in out:
        r = out["6"]
        rows.append(
            f"| 6 | `groove index --index app.db` (another program's SQLite file) | exit {r['exit']}; "
            f"{r['bytes_before']:,} -> {r['bytes_after']:,} bytes, {r['tables_before']} -> "
            f"{r['tables_after']} tables; `{r['said']}` |"
        )
    if "7" in out:
        r = out["7"]
        rows.append(
            f"| 7 | `index_path` outside the folder of an untrusted `./groove.toml` | `groove index` exit "
            f"{r['untrusted_exit']} (written: {r['written_before_trust']}); after `groove trust`: exit "
            f"{r['trusted_exit']} (written: {r['written_after_trust']}); `{r['said']}` |"
        )
    if "8" in out:
        r = out["8"]
        rows.append(
            f"| 8 | `/healthz` while the vectors' writes fail (disk full) | {r['status']} "
            f"`{r['error'][:110]}` (pending {r['pending']}) after {r['seconds']} s; 200 again "
            f"{r['healthy_again_s']} s after space returns |"
        )
    if "9" in out:
        r = out["9"]
        rows.append(
            f"| 9 | {r['connections']:,} idle local-socket connections under `prlimit --nofile="
            f"{r['fd_limit']}` | alive: {r['alive']}; {r['closed_by_daemon']:,} closed by the daemon; "
            f"/healthz {r['healthz']}; `groove search` answered by the daemon: {r['search_by_daemon']} "
            f"({r['search_s']} s); tracebacks {r['tracebacks']} |"
        )
    if "10" in out:
        r = out["10"]
        p = r["long_path_part"]
        rows.append(
            f"| 10 | `groove status --kb` with a 300-byte folder name | exit {p['exit']}, "
            f"{p['stderr_lines']} line(s), traceback: {p['traceback']} |"
        )
        c = r["cross_site"]
        rows.append(f"| 10 | cross-site `GET /ui/api/note` | {c['cross_site']} (a typed URL: {c['typed_url']}) |")
        h = r["long_heading"]
        rows.append(
            f"| 10 | 200,000-character heading, search `max_chars: 100` | {h['bytes']:,} bytes (found: {h['found']}, "
            f"{h['found_after_s']} s after the note was written) |"
        )
        s = r["subscriptions"]
        rows.append(
            f"| 10 | {s['asked']:,} subscriptions in one session | {s['accepted']:,} accepted, {s['refused']} refused |"
        )
        if "wrong_tokens" in r:
            t = r["wrong_tokens"]
            rows.append(
                f"| 10 | {t['guesses']:,} wrong tokens from {t['addresses']} addresses | {t['401']} x 401, "
                f"{t['429']} x 429 in {t['seconds']} s ({t['per_s']} a second); the right token "
                f"{t['right_token']} in {t['right_token_ms']} ms |"
            )
        rows.append(f"| 10 | the other lows | {LOWS_LEFT} |")
    if "tracebacks_in_log" in out:
        rows.append(f"| | tracebacks in the server's log | {out['tracebacks_in_log']} |")
    return "\n".join(rows)
