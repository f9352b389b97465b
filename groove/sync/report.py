"""One result shape for a full reconcile: `groove index` and the MCP `reindex` both report an `IndexReport`.

Timestamps are ISO-8601 in UTC (`2026-12-01T12:07:15Z`), here and wherever
groove shows a time to a person or a client (`iso_time`).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

if TYPE_CHECKING:  # the command line imports iso_time; the indexer brings numpy and the parsers
    from groove.sync.indexer import ReconcileStats


def iso_time(ts: float | None) -> str | None:
    """Seconds since the epoch -> ISO-8601 UTC to the second (`...Z`); None stays None."""
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(float(ts), tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_times(obj: Any) -> Any:
    """A copy of `obj` with every timestamp as ISO-8601 UTC: keys `at` and `*_at` holding epoch seconds
    (what the command line prints and what the MCP tools answer)."""
    if isinstance(obj, dict):
        return {
            k: iso_time(v)
            if (k == "at" or k.endswith("_at")) and isinstance(v, (int, float)) and not isinstance(v, bool)
            else iso_times(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [iso_times(v) for v in obj]
    return obj


class FinishedSwitch(BaseModel):
    """A model switch a reconcile finished: the new model's vectors swapped in (store/sqlite/shadow.py `swap`)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, serialize_by_alias=True)

    from_model: str = Field(alias="from", description="the model the index answered with before")
    to: str = Field(description="the model it answers with now")
    vectors: int = Field(description="the new model's vectors")
    pending_chunks: int = Field(description="chunks left for the new model to embed")
    started_at: float = Field(description="when the switch began (epoch seconds)")
    swapped_at: float = Field(description="when the new vectors were swapped in (epoch seconds)")


class IndexReport(BaseModel):
    """What one full reconcile did, and what is left for the embedding workers."""

    model_config = ConfigDict(frozen=True)

    # This model is the MCP reindex tool's output schema, which every conversation pays for in characters: it
    # declares what a client reads of a rescan (descriptions only where a name does not say it); the rest, for a
    # diagnosis, is in the answer but not in the schema (SkipJsonSchema; groove/search/answers.py says why).
    kb_path: SkipJsonSchema[str]  # the notes folder
    index_path: SkipJsonSchema[str]  # the index file
    added: int
    changed: int  # notes whose text changed
    renamed: int  # notes moved or renamed (nothing re-embedded)
    deleted: int
    unchanged: int
    skipped: int = Field(description="files not indexed")  # groove status lists why
    files_read: SkipJsonSchema[int]  # files read from disk (an unchanged file is not read)
    chunks_written: SkipJsonSchema[int]
    chunks_embedded: SkipJsonSchema[int]  # embedded by this call (the daemon embeds in the background: 0)
    pending_chunks: int  # not embedded yet: searchable by text only
    embeddings_computed: SkipJsonSchema[int]  # vectors computed over the index's lifetime
    vectors_collected: SkipJsonSchema[int]  # vectors no chunk used any more, dropped
    seconds: SkipJsonSchema[float]
    finished_at: str
    model_switch: SkipJsonSchema[FinishedSwitch | None] = None  # the model switch this call finished, else null
    full_text_merged: SkipJsonSchema[bool] = False  # the full-text tables were merged after a large write
    skipped_files: SkipJsonSchema[list[dict]] = Field(default_factory=list)  # each file skipped, with its reason
    note_warnings: SkipJsonSchema[list[dict]] = Field(default_factory=list)  # each note indexed with a warning
    kept_unreadable: SkipJsonSchema[list[dict]] = Field(default_factory=list)  # under a folder unreadable now
    linked_dirs: SkipJsonSchema[list[dict]] = Field(default_factory=list)  # symlinked folders, not followed


def index_report(
    stats: ReconcileStats,
    *,
    kb_path: str,
    index_path: str,
    pending_chunks: int,
    embeddings_computed: int,
    vectors_collected: int,
    seconds: float,
    finished_at: float | None = None,
    model_switch: FinishedSwitch | None = None,
    full_text_merged: bool = False,
) -> IndexReport:
    return IndexReport(
        kb_path=kb_path,
        index_path=index_path,
        added=stats.added,
        changed=stats.changed,
        renamed=stats.renamed,
        deleted=stats.deleted,
        unchanged=stats.unchanged,
        skipped=stats.skipped,
        files_read=stats.files_read,
        chunks_written=stats.chunks_written,
        chunks_embedded=stats.chunks_embedded,
        pending_chunks=pending_chunks,
        embeddings_computed=embeddings_computed,
        vectors_collected=vectors_collected,
        seconds=round(seconds, 3),
        finished_at=iso_time(time.time() if finished_at is None else finished_at) or "",
        model_switch=model_switch,
        full_text_merged=full_text_merged,
        **{k: v for k, v in stats.to_dict(details=True).items() if k in type(stats).DETAILS},
    )


__all__ = ["IndexReport", "index_report", "iso_time", "iso_times"]
