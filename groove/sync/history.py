"""What changed in the notes since a time (`groove changes`, the MCP tool `changes`): the change history the
stores keep (`note_history`, one row per note write that changed something: protocols.HISTORY_KEPT_S) made
into one entry per note, pure.

A note's rows since the time are netted: added then edited is added; edited then deleted is deleted; added then
deleted is nothing; renamed twice is one rename from the first path; a deletion and a later addition of the
same bytes (a rename the watcher saw in two batches) is a rename. Its sections likewise: added then edited is
added, added then deleted is nothing, deleted then added is edited.

`parse_since` reads the time as a person or a model writes it: an ISO date or date and time, or a span back
from now (`30m`, `24h`, `7d`, `2w`).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from groove.errors import UsageError

SPAN_UNITS = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_SPAN = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*", re.IGNORECASE)
FUTURE_SLACK_S = 60.0  # a clock a little ahead of this one is not the future
# The most history rows one answer nets (a rebuild writes one per note): past it the answer says it is cut.
HISTORY_ROWS = 50_000


def parse_since(text: str, now: float) -> float:
    """`text` as unix seconds: a span back from `now` (`7d`, `24h`, `30m`, `2w`), an ISO date (midnight, local
    time) or an ISO date and time (local time unless it carries a zone, `Z` or `+09:00`). UsageError (one line,
    with examples) for anything else or a time in the future."""
    given = str(text).strip()
    examples = "e.g. 7d, 24h, 30m, 2w, 2026-12-01 or 2026-12-01T09:00:00+09:00"
    if not given:
        raise UsageError(f"since is empty: give a span back from now or an ISO date/time ({examples})")
    span = _SPAN.fullmatch(given)
    if span is not None:
        return now - float(span.group(1)) * SPAN_UNITS[span.group(2).lower()]
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", given):
            moment = dt.datetime.combine(dt.date.fromisoformat(given), dt.time())
        else:
            moment = dt.datetime.fromisoformat(given)
    except ValueError:
        raise UsageError(f"since {given!r} is neither a span back from now nor an ISO date/time ({examples})") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as a person means it
    at = moment.timestamp()
    if at > now + FUTURE_SLACK_S:
        raise UsageError(f"since {given!r} is in the future: nothing can have changed since then ({examples})")
    return at


@dataclass
class NoteEntry:
    """One note's netted change since the time."""

    path: str
    change: str  # added | edited | renamed | deleted
    at: float
    hash: str
    old_path: str | None = None
    sections: dict[str, str] = field(default_factory=dict)  # heading -> added | edited | deleted


def _merge_section(before: str | None, now: str) -> str | None:
    """A section's change after `before` then `now` (None: nothing left to report)."""
    if before is None or before == now:
        return now
    if before == "added":
        return None if now == "deleted" else "added"
    if before == "deleted":
        return "edited"  # gone, then back: changed, as far as anyone reading now can tell
    return "deleted" if now == "deleted" else "edited"  # edited then deleted / added


def _merge_sections(entry: NoteEntry, sections: Iterable[Sequence[str]]) -> None:
    if entry.change == "added":
        return  # a note new since the time: every section of it is new
    for change, heading in sections:
        merged = _merge_section(entry.sections.get(heading), change)
        if merged is None:
            entry.sections.pop(heading, None)
        else:
            entry.sections[heading] = merged


def net_changes(rows: Iterable[Sequence[Any]]) -> list[NoteEntry]:
    """The history's rows (at, path, change, old path, file hash, sections JSON), oldest first, as one entry per
    note, the most recently changed first."""
    notes: dict[str, NoteEntry] = {}
    gone_with: dict[str, list[str]] = {}  # file hash -> paths of deleted entries (checked when read: one pass)

    def twin_of(file_hash: str) -> NoteEntry | None:
        """The deleted note with these bytes, if one is listed."""
        paths = gone_with.get(file_hash, [])
        while paths:
            e = notes.get(paths[-1])
            if e is not None and e.change == "deleted" and e.hash == file_hash:
                return e
            paths.pop()  # replaced or taken since
        return None

    for at, path, change, old_path, file_hash, sections_json in rows:
        sections = json.loads(sections_json or "[]")
        if change == "added":
            gone = notes.get(path)
            if gone is not None and gone.change == "deleted":
                if gone.hash == file_hash and not gone.old_path:
                    del notes[path]  # deleted, then back as it was
                else:
                    notes[path] = NoteEntry(path, "edited", at, file_hash)
                continue
            twin = twin_of(file_hash) if file_hash else None
            if twin is not None:  # the same bytes gone from one path and back at another: a rename
                del notes[twin.path]
                origin = twin.old_path or twin.path
                if origin == path:
                    continue
                notes[path] = NoteEntry(path, "renamed", at, file_hash, origin, twin.sections)
                continue
            notes[path] = NoteEntry(path, "added", at, file_hash)
        elif change == "edited":
            entry = notes.get(path)
            if entry is None or entry.change == "deleted":
                entry = notes[path] = NoteEntry(path, "edited", at, file_hash)
            entry.at, entry.hash = at, file_hash
            _merge_sections(entry, sections)
        elif change == "renamed":
            before = notes.pop(old_path, None) if old_path else None
            if before is None:
                entry = NoteEntry(path, "renamed", at, file_hash, old_path)
            elif before.change == "added":
                entry = NoteEntry(path, "added", at, file_hash)
            else:
                origin = before.old_path or old_path
                entry = NoteEntry(path, "renamed", at, file_hash, origin, before.sections)
                if origin == path:  # renamed back: only its edits are left
                    entry.change, entry.old_path = "edited", None
            _merge_sections(entry, sections)
            if entry.change == "edited" and not entry.sections:
                continue
            notes[path] = entry
        elif change == "deleted":
            entry = notes.pop(path, None)
            if entry is not None and entry.change == "added":
                continue  # new since the time and gone again
            origin = entry.old_path if entry is not None and entry.old_path else path
            notes[origin] = NoteEntry(origin, "deleted", at, file_hash, None, entry.sections if entry else {})
            gone_with.setdefault(file_hash, []).append(origin)
    return sorted(notes.values(), key=lambda e: (-e.at, e.path))


__all__ = ["HISTORY_ROWS", "NoteEntry", "net_changes", "parse_since"]
