"""The search hit: one chunk in a result list, as every search stage sees it.

Stages after fusion take a ``list[Hit]`` and return a ``list[Hit]``. A stage
that is off returns its input list itself; a stage that changes a hit builds
a new one with ``dataclasses.replace`` instead of mutating it, so an earlier
stage's output is never changed behind its back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass
class Hit:
    chunk_id: int
    doc_id: int
    path: str
    title: str
    heading: str
    level: int
    context: str
    content: str
    tags: list[str]
    date: str | None
    start_line: int
    end_line: int
    ordinal: int
    token_count: int | None
    score: float
    position: dict[str, Any] | None = None
    """Where the chunk sits in a document that has no lines of its own: ``{"page": 3}`` (PDF),
    ``{"slide": 2}`` (PPTX), ``{"sheet": "Budget", "rows": [2, 40]}`` (XLSX); None for notes and text files."""
    fts_rank: int | None = None
    """1-based rank of this chunk in the full-text leg, None if the leg did not return it."""
    vec_rank: int | None = None
    """1-based rank of this chunk in the vector leg, None if the leg did not return it."""
    expanded_from: dict[str, Any] | None = None
    """Set by the parent retriever when it merged other chunks into ``content``:
    ``{"mode": "whole_doc" | "siblings", "start_line", "end_line", "ordinals": [...]}``."""
    match_spans: list[tuple[int, int]] = field(default_factory=list)
    """UTF-8 byte offsets ``(start, end)`` into ``content`` of the query's matches."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, keys in field order (stable across releases): tuples become lists."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
