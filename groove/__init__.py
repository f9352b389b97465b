"""groove: local hybrid search over Markdown notes, served over MCP."""

from pathlib import Path as _Path

from groove import logs as _logs  # imports no other groove module

__version__ = "0.1.0"

# The example notes (`--examples`): a wheel carries them as groove/_examples/notes (setup.py copies them in, so an
# installed tool has them); a source checkout and an editable install read examples/notes beside the package.
_PACKAGED_EXAMPLES = _Path(__file__).resolve().parent / "_examples" / "notes"
EXAMPLE_NOTES = (
    _PACKAGED_EXAMPLES
    if _PACKAGED_EXAMPLES.is_dir()
    else _Path(__file__).resolve().parent.parent / "examples" / "notes"
)

# structlog's default writes to stdout, which would corrupt an MCP stdio stream:
# route every log line to stderr before anything can log.
_logs.configure()
