"""What the command line says on stderr while it works: bars, the model line, the drained line.

On a terminal, `ProgressBar` draws one rich bar per phase (scan, embed) with
the count, the rate and the time left; anywhere else (a pipe, a log file, CI)
it writes a plain line per phase at most every few seconds, and the last one.
Nothing here writes to stdout: stdout carries results only.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

PHASES = {"scan": "scanning notes", "embed": "embedding chunks"}
FEEDS = "scan"  # the phase that writes the others' work: while it runs, their totals grow
PLAIN_EVERY_S = 5.0


def say(message: str, stream: TextIO | None = None) -> None:
    """One line for a person on stderr, prefixed like every other groove line."""
    out = stream or sys.stderr
    out.write(f"groove: {message}\n")
    out.flush()


@dataclass
class _Phase:
    """One phase on screen: its clock, its last figures, and its rich task (on a terminal)."""

    started: float  # its clock: when the phase before it last reported, or its first report (beside another)
    base: int  # what was done at `started`: the rate counts from there
    done: int = 0
    total: int = 0
    last_line: float = 0.0
    finished: bool = False
    task: Any = None


class ProgressBar:
    """A `Progress` callback (`phase, done, total`): rich bars on a terminal, plain lines otherwise.

    Phases may run at once (`groove index` embeds while it scans): each keeps its own bar or lines and its
    own clock. While the scan runs, another phase's total still grows with what the scan writes: it shows
    what is done so far and its rate, no time left, and it is not finished until the scan is."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.phases: dict[str, _Phase] = {}
        self.last_call = time.monotonic()  # a phase starts when the one before it last reported (or now)
        self._progress: Any = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        state = self.phases.get(phase)
        if state is not None and state.finished and (done, total) == (state.done, state.total):
            return  # said already
        if state is None or state.finished:
            running = any(not p.finished for p in self.phases.values())
            # Alone, a phase's clock starts when the last one last reported (its first batch counts); beside
            # another its first report starts it: what it did before then took an unknown share of the time.
            state = _Phase(started=now, base=done) if running else _Phase(started=self.last_call, base=0)
            self.phases[phase] = state
        state.done, state.total = done, total
        fed = self._fed(phase)
        state.finished = bool(total) and done >= total and not fed
        if self.tty:
            self._bar(phase, state, fed, now)
        else:
            self._plain(phase, state, fed, now)
        self.last_call = now

    def _fed(self, phase: str) -> bool:
        """The scan is still writing what this phase works on: its total is not final."""
        scan = self.phases.get(FEEDS)
        return phase != FEEDS and scan is not None and not scan.finished

    def _rate(self, state: _Phase, now: float) -> float:
        elapsed = now - state.started
        return (state.done - state.base) / elapsed if elapsed > 0 and state.done > state.base else 0.0

    # -- a terminal --------------------------------------------------------------------
    def _bar(self, phase: str, state: _Phase, fed: bool, now: float) -> None:
        first = state.task is None  # drawn at once; rich redraws 10 times a second after that, and at stop
        if first:
            if self._progress is None:
                from rich.console import Console  # lazy: only a terminal needs it
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn

                # Rate and time left are ours (from the phase's start), not rich's sampled speed: an embedding
                # batch can take longer than rich's sampling window, which would leave its ETA blank.
                self._progress = Progress(
                    TextColumn("{task.description:<16}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TaskProgressColumn(),
                    TextColumn("{task.fields[rate]}"),
                    TextColumn("{task.fields[eta]}"),
                    console=Console(file=self.stream),
                    transient=False,
                )
                self._progress.start()
            state.task = self._progress.add_task(PHASES.get(phase, phase), total=None, rate="", eta="")
        rate = self._rate(state, now)
        if state.finished:
            eta = f"done in {format_seconds(now - state.started)}"
        elif fed:
            eta = "ETA after the scan"
        elif rate and state.total > state.done:
            eta = f"ETA {format_seconds((state.total - state.done) / rate)}"
        else:
            eta = "ETA ..."
        self._progress.update(
            state.task,
            completed=state.done,
            total=state.total or None,
            rate=f"{rate:,.1f}/s" if rate else "",
            eta=eta,
            refresh=first,
        )
        if all(p.finished for p in self.phases.values()):
            self.close()

    # -- a pipe or a file --------------------------------------------------------------
    def _plain(self, phase: str, state: _Phase, fed: bool, now: float) -> None:
        if not state.finished and now - state.last_line < PLAIN_EVERY_S and state.last_line:
            return
        line = f"{PHASES.get(phase, phase)}: {state.done}/{state.total}" + (" so far" if fed else "")
        rate = self._rate(state, now)
        if rate:
            line += f", {rate:,.1f}/s"
            if not state.finished and not fed and state.total > state.done:
                line += f", about {format_seconds((state.total - state.done) / rate)} left"
        self.stream.write(line + "\n")
        self.stream.flush()
        state.last_line = now

    def close(self) -> None:
        """Stop the bars on screen (idempotent)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            for state in self.phases.values():
                state.task = None
                state.finished = True


def format_seconds(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


__all__ = ["PHASES", "ProgressBar", "format_seconds", "say"]
