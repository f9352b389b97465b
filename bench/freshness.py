"""`freshness`: from saving a note to finding it, by its words and by its meaning.

The in-process `Daemon` (groove.daemon) watches a tmp notes folder: the
shipped examples/notes plus N SciFact docs, indexed before the daemon starts.
Each edit writes one note (even edits: a new file; odd edits: an existing
SciFact note overwritten) on a topic far from the rest of the folder, holding
a word that appears nowhere else; once measured, the edit is undone (file
deleted or restored) and the bench waits until the index has caught up, so
every edit starts from the same folder. From the moment the write starts, searches
run every 20 ms (`--poll-ms`) through `Daemon.search`, as an MCP tool call does:

    text        retriever=fts, query = the unique word; found = the note is in the results
    meaning@3   retriever=vector, query = a paraphrase sharing no rare word with the note;
                found = the note is in the top 3
    meaning@1   the same search, found = the note is the top result

"The note" = its path with the new content (an overwritten note keeps its path).

Timings run to the end of the first search that finds it. Two debounce
settings (the configured one, default 300 ms, and 50 ms) are measured in
alternating blocks (A B B A ...), each block a fresh Daemon on the same index,
so that load on the machine falls on both alike.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import anyio

from bench.common import Report, Timer, build_notes, data_dir, machine, make_settings, ratio, settings_summary, summary

DEFAULT_DOCS = 200
DEFAULT_EDITS = 20
TIMEOUT_S = 30.0

# (note body, paraphrase query): the query shares no rare word with the note.
TOPICS: list[tuple[str, str]] = [
    (
        "Feeding the sourdough starter twice a day with rye flour keeps the levain bubbly, and a long cold proof "
        "gives the loaf an open crumb.",
        "baking a crusty homemade loaf with a slow rise",
    ),
    (
        "To fix a slipping bicycle chain, check the rear derailleur cable tension and replace worn cassette cogs.",
        "my bike gears skip when pedalling hard",
    ),
    (
        "Spring tides happen when the sun and the moon line up, so the difference between high and low water is "
        "largest.",
        "why the sea rises more at new and full moon",
    ),
    (
        "Repot the monstera in a chunky aroid mix with bark and perlite, and water only when the top few centimetres "
        "are dry.",
        "caring for a big leafy houseplant with holes in its leaves",
    ),
    (
        "The chess opening known as the Sicilian Defence answers 1.e4 with c5, fighting for the centre asymmetrically.",
        "a popular reply by black to the king pawn move in board games",
    ),
    (
        "Our cat scratches the sofa; a sisal post next to it and a bit of catnip moved the scratching away from the "
        "furniture.",
        "stop a kitten from clawing the couch",
    ),
    (
        "Wax the cross-country skis with a kick wax matched to the snow temperature so they grip going uphill.",
        "nordic skiing grip on climbs",
    ),
    (
        "Cold brew coffee: coarse grounds steeped in cold water for sixteen hours, then filtered, tastes smooth and "
        "less acidic.",
        "making iced coffee without hot water",
    ),
    (
        "A dripping kitchen tap usually needs a new washer or cartridge; shut off the valve under the sink first.",
        "leaky faucet repair at home",
    ),
    (
        "The violin's E string keeps going out of tune; fine tuners on the tailpiece and new pegs helped.",
        "string instrument will not stay in pitch",
    ),
    (
        "We pitched the tent on the lee side of the ridge, staked the guy lines and cooked dinner on a small gas "
        "stove.",
        "camping overnight in the mountains in wind",
    ),
    (
        "Composting: mix green kitchen scraps with brown dry leaves, keep the heap moist and turn it every week.",
        "turning garden and food waste into soil",
    ),
    (
        "The marathon training plan builds the long run by two kilometres a week and tapers over the last three "
        "weeks before race day.",
        "preparing to run forty two kilometres",
    ),
    (
        "Knitting a scarf in garter stitch: cast on forty stitches with chunky wool and knit every row.",
        "beginner project with needles and yarn",
    ),
    (
        "Origami crane: fold a square sheet into a bird base, then narrow the neck and tail and pull the wings apart.",
        "paper folding a bird",
    ),
    (
        "The solar panels on the roof produce most power at noon in June; the inverter logs the daily kilowatt-hours.",
        "electricity from sunlight at my house",
    ),
    (
        "Tomato seedlings grown on a windowsill get leggy; a grow light and a small fan make the stems sturdier.",
        "young vegetable plants indoors are weak and tall",
    ),
    (
        "Sharpen the kitchen knife on a whetstone at a fifteen degree angle, then hone it on a leather strop.",
        "how to make a chef blade cut well again",
    ),
    (
        "The aquarium's ammonia spiked after adding too many fish at once; cycle the filter and test the water weekly.",
        "fish tank water quality problem",
    ),
    (
        "Learning to juggle three balls: start with one ball in an arc at eye height, then add the second and third.",
        "tossing and catching several objects trick",
    ),
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--examples",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="include the shipped examples/notes (default: yes)",
    )
    p.add_argument(
        "--docs",
        type=int,
        default=DEFAULT_DOCS,
        help=f"SciFact docs in the folder besides examples/notes (default {DEFAULT_DOCS})",
    )
    p.add_argument(
        "--edits", type=int, default=DEFAULT_EDITS, help=f"edits per debounce setting (default {DEFAULT_EDITS})"
    )
    p.add_argument("--fast-debounce-ms", type=int, default=50, help="the second debounce setting (default 50)")
    p.add_argument("--poll-ms", type=int, default=20, help="search every N ms until found (default 20)")
    p.add_argument("--block", type=int, default=5, help="edits per block before switching debounce (default 5)")


def _note(i: int, word: str) -> str:
    body, _ = TOPICS[i % len(TOPICS)]
    return f"# Fresh note {i}\n\n{body} Tag {word}.\n"


def _embedding(daemon) -> bool:
    """Some text is being embedded right now (the daemon's embedding queue has texts in flight)."""
    queue = daemon.index.embedding
    return queue is not None and bool(queue.inflight)


async def _one_edit(daemon, path: Path, rel: str, text: str, word: str, query: str, poll_s: float) -> dict:
    from groove.search.pipeline import SearchRequest

    found: dict[str, float] = {}
    polls = 0
    meaning_done = False
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    path.write_text(text, encoding="utf-8")  # noqa: ASYNC240 - the timed save: a thread's hop would be timed too
    deadline = t0 + TIMEOUT_S

    def new_hit(r) -> bool:  # the edited note, with its new content (an overwrite keeps the path)
        return r.path == rel and word in r.content

    while time.perf_counter() < deadline:
        tick = time.perf_counter()
        if "text" not in found:
            resp = await daemon.service.search(SearchRequest(query=word, limit=10, retriever="fts"))
            if any(new_hit(r) for r in resp.results):
                found["text"] = (time.perf_counter() - t0) * 1000
        if not meaning_done:
            resp = await daemon.service.search(SearchRequest(query=query, limit=3, retriever="vector"))
            now = (time.perf_counter() - t0) * 1000
            hits = [new_hit(r) for r in resp.results]
            if any(hits):
                found.setdefault("meaning_top3", now)
            if hits[:1] == [True]:
                found["meaning_top1"] = now
                meaning_done = True
            elif "meaning_top3" in found and resp.pending_chunks == 0 and not _embedding(daemon):
                meaning_done = True  # embedded and in the top 3 but not first: it will not move up
        polls += 1
        if "text" in found and meaning_done:
            break
        await anyio.sleep(max(0.0, poll_s - (time.perf_counter() - tick)))
    wall = time.perf_counter() - t0
    return {
        "path": rel,
        "polls": polls,
        "polling_ms": round(wall * 1000, 1),
        "process_cpu_ms": round((time.process_time() - cpu0) * 1000, 1),  # the daemon's work and the polls'
        **{k: round(v, 1) for k, v in found.items()},
    }


async def _poll_cpu_ms(daemon, word: str, query: str, n: int = 10) -> float:
    """CPU ms of one poll (the words search and the meaning search, back to back), measured on the settled
    daemon with nothing to index: the process's CPU over `n` polls, divided by `n`. The polls run in the
    daemon's process, so during an edit their CPU cannot be told apart from the indexing; this is its measure."""
    from groove.search.pipeline import SearchRequest

    t = time.process_time()
    for _ in range(n):
        await daemon.service.search(SearchRequest(query=word, limit=10, retriever="fts"))
        await daemon.service.search(SearchRequest(query=query, limit=3, retriever="vector"))
    return (time.process_time() - t) * 1000 / n


async def _wait_reverted(daemon, word: str) -> None:
    from groove.search.pipeline import SearchRequest

    with anyio.move_on_after(TIMEOUT_S):
        while True:
            await anyio.sleep(0.05)
            resp = await daemon.service.search(SearchRequest(query=word, limit=1, retriever="fts"))
            if not resp.results and resp.pending_chunks == 0 and not _embedding(daemon):
                break
    await anyio.sleep(0.1)


async def run(args: argparse.Namespace) -> Report:
    from groove.daemon import Daemon
    from groove.embed.embedder import make_embedder
    from tests.support.oneshot import index_once

    t_start = time.perf_counter()
    m0 = machine()
    data = data_dir(args.data)
    poll_s = args.poll_ms / 1000
    with tempfile.TemporaryDirectory(prefix="groove-bench-fresh-") as tmp_s:
        tmp = Path(tmp_s)
        kb, docs = build_notes(data, tmp, examples=args.examples, docs=args.docs)
        base = make_settings(tmp, kb, tmp / "index.sqlite")
        with Timer() as t_index:
            await index_once(base)
        embedder = make_embedder(base.embedding)
        embedder.embed_queries(["warm up"])
        slow_ms = base.watch.debounce_ms
        fast_ms = args.fast_debounce_ms
        existing = sorted((kb / "scifact").glob("*.md"))

        # A B B A ... blocks of `block` edits, until each setting has `edits`.
        plan: list[int] = []
        order = [slow_ms, fast_ms]
        while plan.count(slow_ms) < args.edits or plan.count(fast_ms) < args.edits:
            for d in order:
                plan += [d] * min(args.block, args.edits - plan.count(d))
            order.reverse()
        records: dict[int, list[dict]] = {slow_ms: [], fast_ms: []}
        poll_cpu: list[float] = []  # CPU ms per poll, measured at the start of each block
        i = 0
        pos = 0
        while pos < len(plan):
            debounce = plan[pos]
            n = 1
            while pos + n < len(plan) and plan[pos + n] == debounce:
                n += 1
            settings = make_settings(tmp, kb, tmp / "index.sqlite", **{"watch.debounce_ms": debounce})
            daemon = Daemon(settings, embedder)
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run_background)
                with anyio.fail_after(120):
                    await daemon.reconciled.wait()
                await anyio.sleep(0.3)  # let the watcher settle in
                poll_cpu.append(await _poll_cpu_ms(daemon, "qzcalibrate", TOPICS[i % len(TOPICS)][1]))
                for _ in range(n):
                    word = "qz" + uuid.uuid4().hex[:10]
                    if i % 2 == 0:
                        path = kb / "fresh" / f"edit-{i:03d}.md"
                        path.parent.mkdir(exist_ok=True)
                        kind = "new"
                    else:
                        path = existing[(i // 2) % len(existing)] if existing else kb / "fresh" / f"edit-{i:03d}.md"
                        kind = "overwrite"
                    rel = path.relative_to(kb).as_posix()
                    original = path.read_text(encoding="utf-8") if path.exists() else None
                    _, query = TOPICS[i % len(TOPICS)]
                    rec = await _one_edit(daemon, path, rel, _note(i, word), word, query, poll_s)
                    rec.update(edit=i, kind=kind, debounce_ms=debounce)
                    records[debounce].append(rec)
                    i += 1
                    # Undo the edit and wait until the index has too: every edit starts from the same folder.
                    if original is None:
                        path.unlink()
                    else:
                        path.write_text(original, encoding="utf-8")
                    await _wait_reverted(daemon, word)
                daemon.stop()
            pos += n

    def series(debounce: int, key: str) -> list[float]:
        return [r[key] for r in records[debounce] if key in r]

    report = Report(
        bench="freshness",
        machine_start=m0,
        title=(
            f"save-to-searchable, {args.edits} edits per debounce setting ({slow_ms} ms vs {fast_ms} ms), "
            "Daemon in-process"
        ),
        params={
            "examples": args.examples,
            "docs": docs,
            "edits": args.edits,
            "poll_ms": args.poll_ms,
            "block": args.block,
            **settings_summary(base),
            "debounce_ms": [slow_ms, fast_ms],
        },
    )
    stats: dict[str, dict] = {}
    for d in (slow_ms, fast_ms):
        for key in ("text", "meaning_top3", "meaning_top1"):
            vals = series(d, key)
            s = summary(vals)
            stats[f"{key}@{d}ms"] = {
                "p50_ms": s["p50_ms"],
                "p95_ms": s["p95_ms"],
                "found": f"{len(vals)}/{len(records[d])}",
            }
    for d in (slow_ms, fast_ms):
        report.ratios[f"meaning_top3_over_text_p50@{d}ms"] = ratio(
            stats[f"meaning_top3@{d}ms"]["p50_ms"], stats[f"text@{d}ms"]["p50_ms"]
        )
    for key in ("text", "meaning_top3"):
        report.ratios[f"{key}_p50_{fast_ms}ms_over_{slow_ms}ms"] = ratio(
            stats[f"{key}@{fast_ms}ms"]["p50_ms"], stats[f"{key}@{slow_ms}ms"]["p50_ms"]
        )
    # What the polling itself costs beside what it times: CPU per poll (measured on the settled daemon) times
    # the polls, over the wall time the polling ran: the cores it took.
    every = records[slow_ms] + records[fast_ms]
    per_poll = statistics.median(poll_cpu) if poll_cpu else math.nan
    polling_s = sum(r["polling_ms"] for r in every) / 1000
    polling = {
        "cpu_ms_per_poll": round(per_poll, 2),
        "polls": sum(r["polls"] for r in every),
        "cores": round(per_poll * sum(r["polls"] for r in every) / 1000 / polling_s, 3) if polling_s else math.nan,
        "process_cores_while_polling": round(sum(r["process_cpu_ms"] for r in every) / 1000 / polling_s, 3)
        if polling_s
        else math.nan,
    }
    report.raw = {**stats, "polling": polling, "index_build_s": round(t_index.seconds, 1), "edits": every}
    misses = [r for d in records for r in records[d] if "text" not in r or "meaning_top3" not in r]
    if misses:
        report.notes.append(
            f"{len(misses)} edit(s) not found within {TIMEOUT_S:.0f} s: "
            f"{[(r['edit'], r['debounce_ms']) for r in misses]}"
        )
    report.notes.append(
        "timings end when the search that finds the note returns; polls every "
        f"{args.poll_ms} ms; 'meaning' polls embed a query each time (load a client would add too)"
    )
    report.notes.append(
        f"the polling itself: {polling['cpu_ms_per_poll']:.1f} CPU ms a poll (measured on the settled daemon), "
        f"{polling['cores']:.2f} cores while it ran, beside the daemon it times, in the same process "
        f"(the whole process: {polling['process_cores_while_polling']:.2f} cores); --poll-ms sets it"
    )
    report.seconds = time.perf_counter() - t_start
    return report


def main_async(args: argparse.Namespace) -> Report:
    return anyio.run(run, args)
