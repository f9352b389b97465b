"""What both stores make of the rows they read, written once: pure functions over plain tuples, no driver."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def linked_notes(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """The notes a note links to or is linked from, each once, from its link rows (other note's path, 'outgoing'
    or 'backlink', line, heading, alias): path, how many links join them, the direction (outgoing, backlink or
    both) and the first link (outgoing before backlink, then by line); most links first, then path order."""
    notes: dict[str, dict[str, Any]] = {}
    for other, direction, line, heading, alias in sorted(rows, key=lambda r: (r[0], r[1] != "outgoing", r[2])):
        seen = notes.get(other)
        if seen is None:
            notes[other] = {
                "path": other,
                "links": 1,
                "direction": direction,
                "line": line,
                "heading": heading,
                "alias": alias,
            }
            continue
        seen["links"] += 1
        if seen["direction"] != direction:
            seen["direction"] = "both"
    return sorted(notes.values(), key=lambda n: (-n["links"], n["path"]))
