"""What a search answers: the hits, the budget, the flags, and the one text rendering of them.

The service API (`groove.api.service`) returns a `SearchAnswer` to every front end: the MCP `search` tool (the
model's dump is its `structuredContent`, its schema the `outputSchema`), the web view, the local socket and the
command line (`search_text`, or `script_json()` under `--format json`). The answers of the other operations
are `groove.api.answers`; both build on `Answer` and `note_uri` here.

- each hit carries its note's resource URI (`uri`);
- internal ids (chunk_id, doc_id, and the chunk's ordinal and token count) travel with a search's
  hits and are left out of what a client sees unless it asks (`for_client(include_ids=...)`);
- every time is ISO-8601 UTC (`groove.sync.report.iso_time`).

docs/mcp.md ("Answers") describes the shapes and the text.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.json_schema import SkipJsonSchema

NOTE_URI_PREFIX = "groove://note/"
ID_FIELDS = ("chunk_id", "doc_id", "ordinal", "token_count")  # a search hit's internal bookkeeping


def note_uri(path: str) -> str:
    """`groove://note/` + the note's relative path, each segment percent-encoded."""
    return NOTE_URI_PREFIX + "/".join(quote(segment, safe="") for segment in path.split("/"))


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


# --- search ---------------------------------------------------------------------------------------


# These models are the MCP tools' output schemas (groove/serve/mcp/tools.py `lean_schema`), which every conversation
# pays for in characters (docs/mcp.md, "What the tool definitions cost"). So a schema declares an answer's fields and
# the fields of its main list's items, each with its type; a detail object (a search's budget, a note's part, ...) is
# declared an object whose description names its keys (OBJECT...); a field only a diagnosis reads is left out of the
# schema (SkipJsonSchema); and a field has a description only when its name does not say enough. The answers carry
# every field all the same (the schemas allow more), and docs/mcp.md "Answers" lists them all.
OBJECT = WithJsonSchema({"type": "object"})
OBJECT_OR_NULL = WithJsonSchema({"anyOf": [{"type": "object"}, {"type": "null"}]})
OBJECTS = WithJsonSchema({"type": "array", "items": {"type": "object"}})


class SearchHit(Answer):
    uri: str  # the note's resource (resources/read opens the whole note)
    path: str
    title: str
    heading: str
    level: SkipJsonSchema[int]  # the heading's level (0: none)
    context: str = Field(description="heading path")
    content: str
    tags: list[str]
    date: str | None
    start_line: int
    end_line: int
    score: float
    position: dict[str, Any] | None = Field(description="page, slide or sheet rows")
    fts_rank: SkipJsonSchema[int | None]  # rank in the full-text leg (null: not returned by it)
    vec_rank: SkipJsonSchema[int | None]  # rank in the vector leg
    expanded_from: SkipJsonSchema[dict[str, Any] | None]  # set when the parent retriever merged its section in
    match_spans: list[list[int]] = Field(description="UTF-8 byte ranges")  # [start, end) of the query's matches
    # internal ids, only with include_ids
    chunk_id: SkipJsonSchema[int | None] = None
    doc_id: SkipJsonSchema[int | None] = None
    ordinal: SkipJsonSchema[int | None] = None
    token_count: SkipJsonSchema[int | None] = None
    # with max_chars: characters cut from the end of this passage (at a sentence end; end_line is where the kept
    # text ends); absent when the passage is whole
    trimmed_chars: int | None = Field(None, description="cut to fit max_chars")


class OmittedPassage(Answer):
    path: str
    context: str  # the passage's heading path
    start_line: int
    end_line: int
    chars: int


class SearchBudget(Answer):
    """How a search answer was fitted to its `max_chars` (set only when max_chars was given)."""

    max_chars: int  # the budget asked for: characters of passage text in the whole answer
    used_chars: int
    trimmed_passages: int  # passages cut at a sentence end to fit
    trimmed_chars: int
    omitted_passages: int  # results left out: no room was left for them
    omitted_chars: int
    omitted: list[OmittedPassage]  # best first: read one with get_document (path and heading, or lines)


class FilterPart(Answer):
    """One part of a search's filter that matches no note on its own."""

    filter: str  # path_globs, tags_any, tags_all, date, or fields.KEY
    value: Any  # as applied
    notes: int  # the notes it matches on its own (0)
    did_you_mean: list[str] = Field(default_factory=list)  # existing values spelled close to it


class FilterMiss(Answer):
    """A filter that left no note to search."""

    message: str  # one line: which part matched nothing, and what exists near it
    parts: list[FilterPart]  # the parts that match no note alone (empty: only their combination)


class SearchAnswer(Answer):
    results: list[SearchHit]
    # true when no note stands out from the next: the top result leads the best result of another note by a small
    # margin (ambiguous; says nothing about whether the notes answer the query: see off_topic)
    low_confidence: bool = Field(description="no note stands out")
    # true when the best results are no closer in meaning than this index's notes are to questions they do not
    # answer, and full text finds little of the query in them; the results are still returned
    off_topic: bool = Field(False, description="the notes most likely do not answer")
    filter_applied: dict[str, Any] | None
    # present when the filters left no note: nothing was searched, so off_topic is false
    filter_matched_nothing: Annotated[FilterMiss | None, OBJECT_OR_NULL] = Field(
        None, description="why filters left no note"
    )
    pending_chunks: int = Field(description="not embedded yet")  # findable by words only, not yet by meaning
    vectors_degraded: bool = Field(description="full text only")  # the query could not be embedded
    startup_reconcile_done: bool = True  # false while the folder is still being scanned after a start
    warnings: list[str] | None = None  # present when an argument was ignored or adjusted
    explain: SkipJsonSchema[dict[str, Any] | None] = None  # present with explain: how the query was compiled, timings
    budget: Annotated[SearchBudget | None, OBJECT_OR_NULL] = Field(
        None, description="used_chars, omitted (path, context, start_line, end_line)"
    )

    def for_client(self, *, include_ids: bool = False) -> SearchAnswer:
        """What a client sees: the hits without their internal ids unless it asks for them (fields left
        unset, so a dump with `exclude_unset` leaves them out rather than sending null)."""
        if include_ids:
            return self
        hits = [SearchHit(**h.model_dump(exclude_unset=True, exclude=set(ID_FIELDS))) for h in self.results]
        return self.model_copy(update={"results": hits})

    def script_json(self) -> dict[str, Any]:
        """`groove search --format json`: a script interface, pinned by tests/test_cli.py. Each hit with
        its ids and without the resource URI; the flags; `warnings` and `explain` only when present."""
        out = self.model_dump(mode="json", exclude_unset=True, exclude={"startup_reconcile_done"})
        for hit in out["results"]:
            hit.pop("uri", None)
        return out


def search_answer(response: dict[str, Any], *, include_ids: bool = False) -> SearchAnswer:
    """A search answer from its JSON (the local socket's, or a dump): the inverse of `model_dump`."""
    hits = []
    for hit in response["results"]:
        fields = {k: v for k, v in hit.items() if (include_ids or k not in ID_FIELDS) and k != "uri"}
        hits.append(SearchHit(uri=note_uri(hit["path"]), **fields))
    return SearchAnswer(**{**response, "results": hits})


def _position(position: dict[str, Any] | None) -> str:
    if not position:
        return ""
    if "page" in position:
        return f" · page {position['page']}"
    if "slide" in position:
        return f" · slide {position['slide']}"
    if "sheet" in position:
        rows = position.get("rows")
        return f" · sheet {position['sheet']}" + (f" rows {rows[0]}-{rows[1]}" if rows else "")
    return ""


def search_text(answer: SearchAnswer, *, passage_chars: int | None = None) -> str:
    """The one text rendering of a search: a line of counts, then per hit its rank, path and heading, score,
    line range and passage, then the flags a reader must weigh, then the explain block when asked for.
    `passage_chars` cuts each passage (whitespace folded) for a terminal; None keeps it whole (MCP)."""
    notes = len({h.path for h in answer.results})
    out = [f"{len(answer.results)} passage(s) from {notes} note(s)" if answer.results else "no results"]
    for rank, hit in enumerate(answer.results, 1):
        where = hit.context if hit.context and hit.context != hit.title else hit.title
        head = f"[{rank}] {hit.path}" + (f" § {where}" if where else "")
        meta = f"score {hit.score:.4g} · lines {hit.start_line}-{hit.end_line}{_position(hit.position)}"
        if hit.chunk_id is not None:
            meta += f" · chunk_id {hit.chunk_id} · doc_id {hit.doc_id}"
        if hit.trimmed_chars:
            meta += f" · trimmed {hit.trimmed_chars} chars (read on: get_document lines from {hit.end_line})"
        passage = hit.content.strip()
        if passage_chars is not None:
            folded = " ".join(passage.split())
            passage = folded[:passage_chars] + ("…" if len(folded) > passage_chars else "")
        out.append(f"\n{head}\n{meta}\n{passage}")
    if answer.budget is not None:
        out.append("\n" + budget_text(answer.budget))
    flags = search_flags(answer)
    if flags:
        out.append("\n" + " · ".join(flags))
    if answer.explain is not None:
        out.append(explain_text(answer))
    return "\n".join(out)


def budget_text(budget: SearchBudget) -> str:
    """What max_chars did to a search answer: how much was used, trimmed and left out (and where)."""
    line = f"budget: {budget.used_chars} of {budget.max_chars} chars used"
    if budget.trimmed_passages:
        line += f"; {budget.trimmed_passages} passage(s) trimmed at a sentence end ({budget.trimmed_chars} chars cut)"
    if budget.omitted_passages:
        line += f"; {budget.omitted_passages} result(s) left out ({budget.omitted_chars} chars): " + ", ".join(
            f"{o.path} lines {o.start_line}-{o.end_line}" for o in budget.omitted
        )
    if not budget.trimmed_passages and not budget.omitted_passages:
        line += "; nothing trimmed"
    return line


def _calibration_text(o: dict) -> str:
    """The references the vector top was placed between: the language-centred ones when the best
    passage was read on that scale (a mixed-language index), else the cosine ones."""
    cal = o.get("calibration")
    if not cal:
        return "not calibrated (full-text evidence alone)"
    centred = o.get("scale") == "centred" and cal.get("answered_centred") is not None
    answered, unanswered = (
        (cal["answered_centred"], cal["unanswered_centred"]) if centred else (cal["answered"], cal["unanswered"])
    )
    return (
        f"calibrated{' (centred)' if centred else ''} answered {answered:.3f} / unanswered {unanswered:.3f}"
        f" ({cal['queries']} synthetic queries, {cal['vectors']} vectors)"
    )


def explain_text(answer: SearchAnswer) -> str:
    """How the query was compiled and scored (`explain`), for a reader."""
    e = answer.explain or {}
    out = ["", "explain:"]
    out.append(f"  MATCH expression: {e.get('match_expr') or '(none: vector-only)'}")
    if e.get("excluded_terms"):
        out.append(f"  excluded terms:   {e['excluded_terms']} ({e.get('excluded_chunks')} chunk(s) match them)")
    out.append(
        f"  trigram table:    {e.get('trigram_expr') or '(none: a query of words only searches the word table)'}"
    )
    out.append(f"  word table:       {e.get('word_expr') or '(none: the trigram table searches this query)'}")
    out.append(f"  bigram expression: {e.get('bigram_expr') or '(none: no Japanese / Chinese text)'}")
    out.append(f"  embedded text:    {e.get('vector_text')!r}")
    f = e.get("fusion") or {}
    evidence = f.get("evidence") or {}
    legs = ", ".join(
        f"{name} {w:g}" + (f" (evidence {evidence[name]:.2f})" if name in evidence else "")
        for name, w in (f.get("weights") or {}).items()
    )
    out.append(f"  fusion:           {f.get('method')}; leg weights: {legs or '(no leg returned anything)'}")
    o = e.get("off_topic")
    if o:
        out.append(
            f"  off_topic:        {answer.off_topic}; {o.get('scale', 'cosine')} scale: vector top "
            f"{o.get('vector_top')},"
            f" position {o.get('vector_position')}, gap {o.get('vector_gap')},"
            f" evidence {o.get('evidence')}, agreement {o.get('agreement')}; score {o.get('score')}"
            f" (threshold {o.get('threshold')}"
            + (
                f", with [search.off_topic] threshold_offset {o['threshold_offset']:+g}"
                if o.get("threshold_offset")
                else ""
            )
            + f"; without vectors evidence < {o.get('fts_only_threshold')}); {_calibration_text(o)}"
        )
    c = e.get("candidates") or {}
    out.append(
        f"  candidates:       fts {c.get('fts')}, vector {c.get('vector')}, fused {c.get('fused')}"
        f" (pool {e.get('pool_per_retriever')} per retriever)"
    )
    out.append(f"  vector-only:      {e.get('vector_only')}   whole-query fallback: {e.get('fallback')}")
    out.append(f"  stages:           {e.get('stages')}")
    out.append(f"  timings (ms):     {e.get('timings_ms')}")
    q = e.get("quality_filter")
    if q:
        out.append(f"  quality filter:   {quality_filter_text(q)}")
    scores = (q or {}).get("results_quality") or []
    for i, r in enumerate(answer.results, 1):
        score = f", quality {scores[i - 1]:.2f}" if i <= len(scores) else ""
        out.append(f"  #{i}: fts rank {r.fts_rank or '-'}, vector rank {r.vec_rank or '-'}{score}  {r.path}")
    return "\n".join(out)


def quality_filter_text(q: dict[str, Any]) -> str:
    """explain's quality filter in one line: the floor and who set it, and which results it hid (or would hide)."""

    def listed(items: list[dict[str, Any]]) -> str:
        return "; ".join(
            f"#{h['rank']} {h['path']}"
            + (f" lines {h['start_line']}-{h['end_line']}" if "start_line" in h else "")
            + f" (quality {h['quality']:.2f})"
            for h in items
        )

    if q.get("min_quality") is not None:
        hidden = q.get("hidden_results") or []
        text = (
            f"hides chunks scoring under {q['min_quality']:g} (set by {q.get('set_by')}), "
            f"{q.get('hidden_in_index')} in the index; "
        )
        return text + (
            f"{len(hidden)} result(s) hidden from this answer: {listed(hidden)} (include_low_quality shows them)"
            if hidden
            else "no result of this answer was hidden"
        )
    would = q.get("would_hide") or []
    text = f"off (set by {q.get('set_by')}); "
    return (
        text
        + (
            f"at the threshold {q.get('threshold'):g} it would hide {len(would)} of these results: {listed(would)}"
            if would
            else f"no result here scores under the threshold {q.get('threshold'):g}"
        )
        + f" ({q.get('would_hide_in_index')} chunk(s) of the index do)"
    )


def search_flags(answer: SearchAnswer) -> list[str]:
    """The state a reader must weigh, only when it matters."""
    flags = []
    if answer.filter_matched_nothing is not None:
        flags.append(f"filter_matched_nothing: {answer.filter_matched_nothing.message}")
    if answer.off_topic:
        flags.append(
            "off_topic: true (the notes most likely do not answer this; the results are only the nearest passages)"
        )
    if answer.low_confidence:
        flags.append("low_confidence: true (no note stands out from the next; several may be meant)")
    if answer.pending_chunks:
        flags.append(f"pending_chunks: {answer.pending_chunks} (not yet searchable by meaning)")
    if answer.vectors_degraded:
        flags.append("vectors_degraded: true (full text only)")
    if not answer.startup_reconcile_done:
        flags.append("startup_reconcile_done: false (the folder is still being scanned)")
    if answer.filter_applied:
        flags.append("filter: " + ", ".join(f"{k}={v}" for k, v in answer.filter_applied.items()))
    flags += [f"warning: {w}" for w in answer.warnings or []]
    return flags
