"""Storms are logged once: a count of repeated events per interval, never a line per connection.

`StormLog` is what every HTTP limit reports to (connections shed, bodies cut, requests refused at the
gate, streams ended); `StormFilter` turns the lines other libraries log once per connection (asyncio's
traceback for a failed accept(), uvicorn's warning for a malformed request, the SDK's traceback for a
client gone mid-body) into counts of the same log. A value a client sent (a Host header) is kept only as
one clipped sample per reason, so a flood of 8 KB headers costs a bounded line per interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from groove.logs import get_logger

log = get_logger(__name__)

SAMPLE_CHARS = 64  # a client's value is logged as at most this many characters (and its length)


def clip(value: str | None, limit: int = SAMPLE_CHARS) -> str | None:
    """A value a client sent, made safe to log: printable, at most `limit` characters, its length said."""
    if value is None:
        return None
    text = "".join(c if c.isprintable() else "?" for c in value[:limit])
    return text if len(value) <= limit else f"{text}...({len(value)} chars)"


class StormLog:
    """A count of repeated events, logged at most once per `interval_s` (the first at once). The server's take
    `[serve.http] storm_log_interval_s` (10 s by default); tests set a short one rather than wait one out."""

    def __init__(self, event: str, interval_s: float = 10.0, **fields: Any):
        self.event = event
        self.interval_s = interval_s
        self.fields = fields
        self.pending: dict[str, int] = {}
        self.samples: dict[str, str] = {}
        self.total = 0
        self._last = -float("inf")
        self._timer: asyncio.TimerHandle | None = None

    def count(self, reason: str, sample: str | None = None) -> None:
        """One more `reason`; `sample` (a value the client sent) is kept clipped, the last one per reason."""
        self.total += 1
        self.pending[reason] = self.pending.get(reason, 0) + 1
        if sample is not None:
            self.samples[f"{reason}_sample"] = clip(sample) or ""
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            self.flush()
        elif self._timer is None:
            with contextlib.suppress(RuntimeError):  # no running loop: the next count flushes
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(self.interval_s - (now - self._last), self.flush)

    def flush(self) -> None:
        self._timer = None
        if not self.pending:
            return
        self._last = time.monotonic()
        counts, self.pending = self.pending, {}
        samples, self.samples = self.samples, {}
        log.warning(self.event, **counts, **samples, total=self.total, interval_s=self.interval_s, **self.fields)


class StormFilter(logging.Filter):
    """Lines other libraries log once per connection, counted into the storm log instead: asyncio's
    traceback for every failed accept() (EMFILE), uvicorn's warning for every malformed request, and the
    SDK's traceback when a client hangs up before its body arrived (a disconnect is not a server error)."""

    REASONS = (("out of system resource", "accept_failed"), ("Invalid HTTP request received", "invalid_request"))

    def __init__(self, storm: StormLog):
        super().__init__()
        self.storm = storm

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        for needle, reason in self.REASONS:
            if needle in text:
                self.storm.count(reason)
                return False
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and type(exc).__name__ == "ClientDisconnect":
            self.storm.count("client_gone")
            return False
        return True


__all__ = ["SAMPLE_CHARS", "StormFilter", "StormLog", "clip"]
