"""Parent retriever: widen a hit's content with its neighbours (stage 4).

A hit whose chunk is smaller than ``whole_doc_threshold_tokens`` gets the
whole document; any other hit gets the adjacent chunks at its own heading
level. Either way the result is capped at ``max_expanded_tokens``. Only
``content`` and ``expanded_from`` change: score, ranks, path, order and
match spans are the hit's own.

Pure: the caller passes each document's chunks as plain data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from groove.search.hits import Hit

DEFAULT_WHOLE_DOC_THRESHOLD_TOKENS = 100
DEFAULT_MAX_EXPANDED_TOKENS = 2000


@dataclass(frozen=True)
class ChunkInfo:
    ordinal: int
    level: int
    heading: str
    content: str
    start_line: int
    end_line: int
    token_count: int | None


def tokens_of(chunk: ChunkInfo) -> int:
    """The chunk's token count; ``len(content) // 4`` (at least 1) when unknown.

    The fallback is the indexer's own estimator, so legacy rows without a
    count still count against the cap instead of slipping through it.
    """
    if chunk.token_count is not None:
        return max(0, chunk.token_count)
    return max(1, len(chunk.content) // 4)


def _validate(whole_doc_threshold_tokens: int, max_expanded_tokens: int) -> None:
    if (
        isinstance(whole_doc_threshold_tokens, bool)
        or not isinstance(whole_doc_threshold_tokens, int)
        or whole_doc_threshold_tokens < 0
    ):
        raise ValueError(
            "parent retriever whole_doc_threshold_tokens must be an integer of at least 0 "
            f"(the default is 100), got {whole_doc_threshold_tokens!r}"
        )
    if isinstance(max_expanded_tokens, bool) or not isinstance(max_expanded_tokens, int) or max_expanded_tokens < 1:
        raise ValueError(
            "parent retriever max_expanded_tokens must be an integer of at least 1 "
            f"(the default is 2000), got {max_expanded_tokens!r}"
        )


def expand(
    hit_ordinal: int,
    doc_chunks: Sequence[ChunkInfo],
    whole_doc_threshold_tokens: int = DEFAULT_WHOLE_DOC_THRESHOLD_TOKENS,
    max_expanded_tokens: int = DEFAULT_MAX_EXPANDED_TOKENS,
) -> tuple[str, dict[str, Any] | None]:
    """Expanded content for the chunk ``hit_ordinal`` of a document.

    ``doc_chunks`` are all of the document's chunks (sorted by ordinal here,
    whatever order they come in). Chunks are added outward from the hit,
    alternately one before and one after, while the total stays within
    ``max_expanded_tokens``. A side stops at the first chunk that would break
    the cap, and in sibling mode also at the first chunk of another heading
    level; the other side carries on. The result is therefore always one
    contiguous run of chunks, and its content is their texts concatenated,
    i.e. exactly the original text of that run. The hit itself is always
    included, even when it alone is over the cap.

    Returns ``(content, expanded_from)``; ``expanded_from`` is None, and the
    content the hit's own, when nothing could be added.

    Raises LookupError when no chunk has ``hit_ordinal``.
    """
    _validate(whole_doc_threshold_tokens, max_expanded_tokens)
    chunks = sorted(doc_chunks, key=lambda c: c.ordinal)
    index = next((i for i, c in enumerate(chunks) if c.ordinal == hit_ordinal), None)
    if index is None:
        raise LookupError(f"chunk ordinal {hit_ordinal} is not among the document's chunks")
    hit = chunks[index]
    whole_doc = tokens_of(hit) < whole_doc_threshold_tokens

    def admissible(chunk: ChunkInfo) -> bool:
        return whole_doc or chunk.level == hit.level

    total = tokens_of(hit)
    first = last = index
    before_open = after_open = True
    while before_open or after_open:
        if before_open:
            if (
                first > 0
                and admissible(chunks[first - 1])
                and total + tokens_of(chunks[first - 1]) <= max_expanded_tokens
            ):
                first -= 1
                total += tokens_of(chunks[first])
            else:
                before_open = False
        if after_open:
            if (
                last < len(chunks) - 1
                and admissible(chunks[last + 1])
                and total + tokens_of(chunks[last + 1]) <= max_expanded_tokens
            ):
                last += 1
                total += tokens_of(chunks[last])
            else:
                after_open = False

    if first == last:
        return hit.content, None
    run = chunks[first : last + 1]
    return "".join(c.content for c in run), {
        "mode": "whole_doc" if whole_doc else "siblings",
        "start_line": run[0].start_line,
        "end_line": run[-1].end_line,
        "ordinals": [c.ordinal for c in run],
    }


def apply_parent(
    hits: list[Hit],
    doc_chunks_by_doc: Mapping[int, Sequence[ChunkInfo]],
    whole_doc_threshold_tokens: int = DEFAULT_WHOLE_DOC_THRESHOLD_TOKENS,
    max_expanded_tokens: int = DEFAULT_MAX_EXPANDED_TOKENS,
) -> list[Hit]:
    """Stage 4 over hits.

    Returns new Hit objects in the same order, with ``content`` and
    ``expanded_from`` replaced where something was merged in; every other
    field is copied as is. A hit whose document or chunk is missing from
    ``doc_chunks_by_doc`` (the note was re-indexed between retrieval and
    expansion) is copied unchanged rather than failing the search.
    """
    _validate(whole_doc_threshold_tokens, max_expanded_tokens)
    expanded: list[Hit] = []
    for hit in hits:
        chunks = doc_chunks_by_doc.get(hit.doc_id)
        if not chunks or not any(c.ordinal == hit.ordinal for c in chunks):
            expanded.append(dataclasses.replace(hit))
            continue
        content, source = expand(hit.ordinal, chunks, whole_doc_threshold_tokens, max_expanded_tokens)
        if source is None:
            expanded.append(dataclasses.replace(hit))
        else:
            expanded.append(dataclasses.replace(hit, content=content, expanded_from=source))
    return expanded
