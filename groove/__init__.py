"""groove: local hybrid search over Markdown notes, served over MCP."""

__version__ = "0.1.0"

# structlog's default writes to stdout, which would corrupt an MCP stdio stream:
# route every log line to stderr before anything can log.
from groove import logs as _logs  # noqa: E402

_logs.configure()
