"""Note URIs and paths as MCP clients give them: parsed, and refused with a one-line JSON-RPC -32602
when they could name anything outside the notes folder. Paths are looked up in the index, never
opened as given, so this is a second wall with a clear message."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from groove.corpus.parsers import DOCUMENT_EXTENSIONS
from groove.search.answers import NOTE_URI_PREFIX

NOTE_MIME_TYPE = "text/markdown"
TEXT_MIME_TYPE = "text/plain"  # .txt files and the text extracted from documents (corpus/parsers)
JSON_MIME_TYPE = "application/json"
TOPICS_URI_PREFIX = "groove://topics/"  # + all | folders | tags: the topics tool's listing as a resource
TOPIC_KINDS = ("all", "folders", "tags")


def note_mime(path: str) -> str:
    return TEXT_MIME_TYPE if path.lower().endswith((".txt", *DOCUMENT_EXTENSIONS)) else NOTE_MIME_TYPE


def note_path(uri: str) -> str | None:
    """The relative path a note URI names, or None when it is not a note URI."""
    if not isinstance(uri, str) or not uri.startswith(NOTE_URI_PREFIX):
        return None
    rest = uri[len(NOTE_URI_PREFIX) :]
    if not rest:
        return None
    segments = [unquote(segment, errors="strict") if "%" in segment else segment for segment in rest.split("/")]
    if any(not s for s in segments):
        return None
    return "/".join(segments)


def check_note_path(path: Any, *, name: str = "path", lenient: bool = False) -> str:
    """A note path as a client gave it, refused (JSON-RPC -32602) when it could name anything outside the
    notes folder: `..` or `.` segments, an absolute or drive path, backslashes, NUL, or percent-encoded
    separators (`%2F`, `%5C`) and dots that would decode into one of those. Paths are looked up in the
    index, never opened as given, so this is a second wall with a clear message.

    `lenient` refuses only what no note's path can be (NUL, absolute, a `..` or `.` segment): a backslash
    and a `%` are ordinary characters of a POSIX file name (`back\\slash.md`, `%2e%2e%2fx.md` are notes
    search returns), so callers look such a path up first and refuse it only when it is not a note."""
    if not isinstance(path, str):
        raise MCPError(code=INVALID_PARAMS, message=f"{name} must be a string, got {path!r}")
    problem = path_problem(path, lenient=lenient)
    if problem is None and "%" in path and not lenient:
        decoded = unquote(path)
        if decoded != path and path_problem(decoded) is not None:
            problem = "has percent-encoded separators or dots"
    if problem is not None:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{name} {path!r} {problem}; pass a path relative to the notes folder, exactly as search or "
            "list_documents returned it",
            data={name: path},
        )
    return path


def path_problem(path: str, *, lenient: bool = False) -> str | None:
    if "\x00" in path:
        return "contains a NUL character"
    if path.startswith("/") or (len(path) > 1 and path[1] == ":" and path[0].isalpha()):
        return "is absolute"
    if "\\" in path and not lenient:
        return "contains a backslash"
    if any(segment in ("..", ".") for segment in path.split("/")):
        return "steps out of the notes folder (a '..' or '.' segment)"
    return None


def _bad_uri(uri: str) -> MCPError:
    return MCPError(
        code=INVALID_PARAMS,
        message=(
            f"{uri!r} is not a note URI; note URIs look like {NOTE_URI_PREFIX}<path>, as resources/list returns them"
        ),
        data={"uri": uri},
    )


def parse_uri(uri: str, *, lenient: bool = False) -> str:
    """The note path a URI names; `lenient` as in check_note_path (a decoded backslash is looked up first)."""
    try:
        path = note_path(uri)
    except UnicodeDecodeError:
        path = None
    if path is None:
        raise _bad_uri(uri)
    if path_problem(path, lenient=lenient) is not None or len(path.split("/")) != len(
        uri[len(NOTE_URI_PREFIX) :].split("/")
    ):
        # A segment that decoded into a separator (%2F, %5C) or a '..': refused, not looked up.
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{uri!r} names a path outside the notes folder (an encoded separator or a '..' segment); "
            "use the URIs resources/list returns",
            data={"uri": uri},
        )
    return path


__all__ = [
    "JSON_MIME_TYPE",
    "NOTE_MIME_TYPE",
    "TEXT_MIME_TYPE",
    "TOPICS_URI_PREFIX",
    "TOPIC_KINDS",
    "check_note_path",
    "note_mime",
    "note_path",
    "parse_uri",
]
