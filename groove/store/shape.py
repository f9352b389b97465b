"""What both stores make of the rows they read, written once: pure functions over plain tuples, no driver."""

from __future__ import annotations

import json
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


def section_changes(old: Sequence[tuple[str, str]], new: Sequence[tuple[str, str]]) -> list[list[str]]:
    """What a note write did to its sections, from its chunks' (text hash, heading) before and after, as both
    stores diff them (a chunk whose text stays keeps its row, wherever it moved): [change, heading] in the new
    note's order, then the gone sections in the old order. A heading that gained a new text is `added` when no
    chunk held it before, a heading that lost one is `deleted` when no chunk holds it now, else `edited`."""
    left: dict[str, int] = {}
    for h, _ in old:
        left[h] = left.get(h, 0) + 1
    gained: list[str] = []
    for h, heading in new:
        if left.get(h, 0) > 0:
            left[h] -= 1
        else:
            gained.append(heading)
    lost: list[str] = []
    for h, heading in reversed(old):  # the stale chunks: the last of each text (the writers keep the first)
        if left.get(h, 0) > 0:
            left[h] -= 1
            lost.append(heading)
    lost.reverse()
    before = {heading for _, heading in old}
    after = {heading for _, heading in new}
    out: list[list[str]] = []
    for heading in dict.fromkeys([*gained, *lost]):
        if heading in gained and heading not in before:
            out.append(["added", heading])
        elif heading in lost and heading not in after:
            out.append(["deleted", heading])
        else:
            out.append(["edited", heading])
    return out


def note_change(
    old_path: str | None, path: str, old_hash: str | None, file_hash: str, sections: Sequence[Sequence[str]]
) -> str | None:
    """What a note write was, as the change history records it: `added` (no row before), `renamed` (the row of
    another path), `edited` (the file's bytes changed: its sections, or only its frontmatter), or None (the same
    bytes written again, e.g. chunked anew after a settings change: the notes did not change)."""
    if old_path is None:
        return "added"
    if old_path != path:
        return "renamed"
    if old_hash == file_hash or (not old_hash and not sections):
        return None
    return "edited"


def history_row(
    at: float, path: str, change: str, old_path: str | None, file_hash: str, sections: list[list[str]] | None
) -> tuple[float, str, str, str | None, str, str]:
    """The note_history row of one change (at, path, change, old_path, hash, sections as JSON), as both stores
    write it: an old path only where it differs, no sections as an empty list."""
    moved_from = old_path if old_path != path else None
    return at, path, change, moved_from, file_hash, json.dumps(sections or [], ensure_ascii=False)
