"""What the command line says on stderr while it works: bars, the model line, the drained line.

On a terminal, `ProgressBar` draws one rich bar per phase (scan, embed) with
the count, the rate and the time left; anywhere else (a pipe, a log file, CI)
it writes a plain line per phase at most every few seconds, and the last one.
Nothing here writes to stdout: stdout carries results only.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

PHASES = {"scan": "scanning notes", "embed": "embedding chunks"}
PLAIN_EVERY_S = 5.0


def say(message: str, stream: TextIO | None = None) -> None:
    """One line for a person on stderr, prefixed like every other groove line."""
    out = stream or sys.stderr
    out.write(f"groove: {message}\n")
    out.flush()


class ProgressBar:
    """A `Progress` callback (`phase, done, total`): rich bars on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.phase = ""
        self.last_line = 0.0
        self.started = time.monotonic()  # a phase starts when the one before it last reported (or now)
        self.last_call = self.started
        self._progress: Any = None
        self._task: Any = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self.tty:
            self._bar(phase, done, total)
        else:
            self._plain(phase, done, total)
        self.last_call = time.monotonic()

    # -- a terminal --------------------------------------------------------------------
    def _bar(self, phase: str, done: int, total: int) -> None:
        first = phase != self.phase  # drawn at once; rich redraws 10 times a second after that, and at stop
        if first:
            self.close()
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
            self._task = self._progress.add_task(PHASES.get(phase, phase), total=total or None, rate="", eta="")
            self.phase = phase
            self.started = self.last_call
        elapsed = time.monotonic() - self.started
        rate = done / elapsed if elapsed > 0 and done else 0.0
        if total and done >= total:
            eta = f"done in {format_seconds(elapsed)}"
        elif rate:
            eta = f"ETA {format_seconds((total - done) / rate)}"
        else:
            eta = "ETA ..."
        self._progress.update(
            self._task,
            completed=done,
            total=total or None,
            rate=f"{rate:,.1f}/s" if rate else "",
            eta=eta,
            refresh=first,
        )
        if total and done >= total:
            self.close()

    # -- a pipe or a file --------------------------------------------------------------
    def _plain(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if phase != self.phase:
            self.phase, self.started, self.last_line = phase, self.last_call, 0.0
        finished = bool(total) and done >= total
        if not finished and now - self.last_line < PLAIN_EVERY_S and self.last_line:
            return
        elapsed = now - self.started
        line = f"{PHASES.get(phase, phase)}: {done}/{total}"
        if elapsed > 0 and done:
            rate = done / elapsed
            line += f", {rate:,.1f}/s"
            if not finished and total > done:
                line += f", about {format_seconds((total - done) / rate)} left"
        self.stream.write(line + "\n")
        self.stream.flush()
        self.last_line = now

    def close(self) -> None:
        """Stop the bar on screen (idempotent)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = None


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
