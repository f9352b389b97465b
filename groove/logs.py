"""Structured logging, always to stderr.

On stdio, stdout belongs to MCP; structlog's default writes to stdout, so this
module must be configured before anything logs. `configure()` is idempotent.

Other libraries' stdlib lines pass one filter on the one handler: warning and up,
info and up under level debug, debug only for the loggers named in
`[log] debug_modules` (their debug lines carry note text; docs/operations.md, "Logs").
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TextIO, cast

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _CurrentStderr:
    """Writes to whatever `sys.stderr` is at the time of the write (test runners and the
    stdio transport swap it), never to stdout."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class ThirdPartyFloor(logging.Filter):
    """On the stderr handler: another library's line below `floor` passes only when the user named its
    logger (or a parent of it) in `[log] debug_modules`. Libraries log request and response bodies,
    SQL parameters and SSE chunks at debug, that is note text (issue 22, point 18); a library that sets
    its own logger's level (uvicorn does) is held back here all the same. groove's own lines go
    through structlog, not through this handler."""

    def __init__(self, floor: int, named: Sequence[str] = ()):
        super().__init__()
        self.floor = floor
        self.named = tuple(named)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.floor or "*" in self.named:
            return True
        name = record.name
        return (
            any(name == n or name.startswith(n + ".") for n in self.named)
            or name == "groove"
            or name.startswith("groove.")
        )


_named_levels: list[str] = []  # loggers whose level configure() set, reset on the next call


def configure(level: str = "info", fmt: str = "console", debug_modules: Sequence[str] = ()) -> None:
    """Send every log line (structlog and stdlib) to stderr at `level`.

    Other libraries log at warning (info when `level` is debug); those named in `debug_modules`
    (logger names: "mcp" covers "mcp.server.lowlevel"; "*" all of them) log at debug."""
    numeric = _LEVELS.get(level.lower(), logging.INFO)
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _CurrentStderr())),  # it writes and flushes
        cache_logger_on_first_use=False,
    )
    # Third-party libraries are chatty at INFO and write note text at DEBUG: WARNING, INFO under debug.
    floor = logging.INFO if numeric <= logging.DEBUG else logging.WARNING
    named = tuple(debug_modules)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(ThirdPartyFloor(floor, named))
    root.addHandler(handler)
    while _named_levels:
        logging.getLogger(_named_levels.pop()).setLevel(logging.NOTSET)
    root.setLevel(logging.DEBUG if "*" in named else floor)
    logging.getLogger("groove").setLevel(numeric)
    _named_levels.append("groove")
    for name in named:
        if name != "*":
            logging.getLogger(name).setLevel(logging.DEBUG)
            _named_levels.append(name)


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)
