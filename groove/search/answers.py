"""What groove answers: one pydantic model per operation, and the one text rendering of each.

`app.Index` and the service API (`groove.api`) return these models, and every front end shows
them: the MCP tools (the model's dump is a tool's `structuredContent`, its schema the
`outputSchema`), the web view, the local socket (the dump as JSON) and the command line (the text
rendering here, or `script_json()` under `--format json`). One text per answer, written for a
reader (a person or a model): one block per hit, not a second, indented copy of the JSON.

- each hit (search, related, list_documents) carries its note's resource URI (`uri`);
- internal ids (chunk_id, doc_id, and the chunk's ordinal and token count) travel with a search's
  hits and are left out of what a client sees unless it asks (`for_client(include_ids=...)`);
- every time is ISO-8601 UTC (`groove.sync.report.iso_time`).

docs/mcp.md ("Answers") describes the shapes and the text.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from groove.sync.report import IndexReport, iso_time, iso_times

NOTE_URI_PREFIX = "groove://note/"
ID_FIELDS = ("chunk_id", "doc_id", "ordinal", "token_count")  # a search hit's internal bookkeeping


def note_uri(path: str) -> str:
    """`groove://note/` + the note's relative path, each segment percent-encoded."""
    return NOTE_URI_PREFIX + "/".join(quote(segment, safe="") for segment in path.split("/"))


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


# --- search ---------------------------------------------------------------------------------------

class SearchHit(Answer):
    uri: str = Field(description="the note's resource URI (resources/read opens the whole note)")
    path: str = Field(description="the note's path relative to the notes folder: cite it")
    title: str
    heading: str = Field(description="the heading of the passage's section ('' before the first heading)")
    level: int = Field(description="that heading's level (0: none)")
    context: str = Field(description="the heading path, 'Title > Section > Subsection'")
    content: str = Field(description="the passage")
    tags: list[str]
    date: str | None = Field(description="the note's frontmatter date")
    start_line: int = Field(description="first line of the passage in the note (1-based)")
    end_line: int
    score: float = Field(description="the fused (or reranked) score; higher is better, comparable within one answer")
    position: dict[str, Any] | None = Field(
        description="where the passage sits in a PDF (page), PowerPoint (slide) or Excel file (sheet, rows); null for notes")
    fts_rank: int | None = Field(description="rank in the full-text leg (null: not returned by it)")
    vec_rank: int | None = Field(description="rank in the vector leg (null: not returned by it)")
    expanded_from: dict[str, Any] | None = Field(
        description="set when the parent retriever merged the passage's section or note into content")
    match_spans: list[list[int]] = Field(description="UTF-8 byte offsets [start, end) of the query's matches in content")
    chunk_id: int | None = Field(None, description="internal: the chunk's id (only with include_ids)")
    doc_id: int | None = Field(None, description="internal: the note's id (only with include_ids)")
    ordinal: int | None = Field(None, description="internal: the chunk's place in its note (only with include_ids)")
    token_count: int | None = Field(None, description="internal: the chunk's tokens (only with include_ids)")
    trimmed_chars: int | None = Field(
        None, description="with max_chars: characters cut from the end of this passage to fit the budget (cut at a "
                          "sentence end; end_line is where the kept text ends); absent when the passage is whole")


class OmittedPassage(Answer):
    path: str
    context: str = Field(description="the passage's heading path")
    start_line: int
    end_line: int
    chars: int = Field(description="the passage's characters")


class SearchBudget(Answer):
    """How a search answer was fitted to its `max_chars` (set only when max_chars was given)."""

    max_chars: int = Field(description="the budget asked for: characters of passage text in the whole answer")
    used_chars: int = Field(description="characters of passage text returned")
    trimmed_passages: int = Field(description="passages cut at a sentence end to fit")
    trimmed_chars: int = Field(description="characters cut from those passages")
    omitted_passages: int = Field(description="results left out: no room was left for them")
    omitted_chars: int = Field(description="their characters")
    omitted: list[OmittedPassage] = Field(description="the results left out, best first: read one with get_document "
                                                      "(path and heading, or lines)")


class SearchAnswer(Answer):
    results: list[SearchHit]
    low_confidence: bool = Field(
        description="true when no note stands out from the next: the top result leads the best result of another "
                    "note by a small margin, so another note may as well be the one meant (ambiguous; says nothing "
                    "about whether the notes answer the query: see off_topic)")
    off_topic: bool = Field(
        False, description="true when the notes most likely do not answer the query: the best results are no closer "
                           "in meaning than this index's notes are to questions they do not answer, and full text "
                           "finds little of the query in them. The results are still returned (the flag informs, "
                           "it does not hide); do not present them as the answer")
    filter_applied: dict[str, Any] | None = Field(description="the filters as applied (normalised), null without")
    pending_chunks: int = Field(description="passages still waiting for their embedding (findable by words only)")
    vectors_degraded: bool = Field(description="true when the query could not be embedded: full text alone")
    startup_reconcile_done: bool = Field(
        True, description="false while the folder is still being scanned after a start (a one-shot command: true)")
    warnings: list[str] | None = Field(None, description="present when an argument was ignored or adjusted")
    explain: dict[str, Any] | None = Field(None, description="present with explain: how the query was compiled, timings")
    budget: SearchBudget | None = Field(None, description="present with max_chars: what the budget cut or left out")

    def for_client(self, *, include_ids: bool = False) -> "SearchAnswer":
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
            f"{o.path} lines {o.start_line}-{o.end_line}" for o in budget.omitted)
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
    answered, unanswered = ((cal["answered_centred"], cal["unanswered_centred"]) if centred
                            else (cal["answered"], cal["unanswered"]))
    return (f"calibrated{' (centred)' if centred else ''} answered {answered:.3f} / unanswered {unanswered:.3f}"
            f" ({cal['queries']} synthetic queries, {cal['vectors']} vectors)")


def explain_text(answer: SearchAnswer) -> str:
    """How the query was compiled and scored (`explain`), for a reader."""
    e = answer.explain or {}
    out = ["", "explain:"]
    out.append(f"  MATCH expression: {e.get('match_expr') or '(none: vector-only)'}")
    if e.get("excluded_terms"):
        out.append(f"  excluded terms:   {e['excluded_terms']} ({e.get('excluded_chunks')} chunk(s) match them)")
    out.append(f"  trigram table:    {e.get('trigram_expr') or '(none: a query of words only searches the word table)'}")
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
        out.append(f"  off_topic:        {answer.off_topic}; {o.get('scale', 'cosine')} scale: vector top {o.get('vector_top')},"
                   f" position {o.get('vector_position')}, gap {o.get('vector_gap')},"
                   f" evidence {o.get('evidence')}, agreement {o.get('agreement')}; score {o.get('score')}"
                   f" (threshold {o.get('threshold')}"
                   + (f", with [search.off_topic] threshold_offset {o['threshold_offset']:+g}" if o.get("threshold_offset") else "")
                   + f"; without vectors evidence < {o.get('fts_only_threshold')}); {_calibration_text(o)}")
    c = e.get("candidates") or {}
    out.append(f"  candidates:       fts {c.get('fts')}, vector {c.get('vector')}, fused {c.get('fused')}"
               f" (pool {e.get('pool_per_retriever')} per retriever)")
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
        return "; ".join(f"#{h['rank']} {h['path']}" + (f" lines {h['start_line']}-{h['end_line']}" if "start_line" in h else "")
                         + f" (quality {h['quality']:.2f})" for h in items)
    if q.get("min_quality") is not None:
        hidden = q.get("hidden_results") or []
        text = (f"hides chunks scoring under {q['min_quality']:g} (set by {q.get('set_by')}), "
                f"{q.get('hidden_in_index')} in the index; ")
        return text + (f"{len(hidden)} result(s) hidden from this answer: {listed(hidden)} (include_low_quality shows them)"
                       if hidden else "no result of this answer was hidden")
    would = q.get("would_hide") or []
    text = f"off (set by {q.get('set_by')}); "
    return text + (f"at the threshold {q.get('threshold'):g} it would hide {len(would)} of these results: {listed(would)}"
                   if would else f"no result here scores under the threshold {q.get('threshold'):g}") + \
        f" ({q.get('would_hide_in_index')} chunk(s) of the index do)"


def search_flags(answer: SearchAnswer) -> list[str]:
    """The state a reader must weigh, only when it matters."""
    flags = []
    if answer.off_topic:
        flags.append("off_topic: true (the notes most likely do not answer this; the results are only the nearest passages)")
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


# --- related --------------------------------------------------------------------------------------

class RelatedPassage(Answer):
    heading: str
    start_line: int
    end_line: int
    similarity: float
    chunk_id: int | None = Field(None, description="internal: the passage's chunk id (the command line's JSON)")


class NoteRef(Answer):
    uri: str
    path: str
    title: str


class RelatedLink(Answer):
    """The link that joins a note reached by walking links to the note it was reached from."""

    direction: str = Field(description="outgoing: that note links to this one; backlink: this one links to it; "
                                       "both")
    links: int = Field(description="how many links join the two notes")
    line: int = Field(description="the line of the (first) link in the note that holds it")
    heading: str | None = Field(None, description="the heading the link points at, if any")
    alias: str | None = Field(None, description="the link's alias, if any")


class RelatedNote(Answer):
    uri: str = Field(description="the note's resource URI")
    path: str
    title: str
    score: float = Field(description="similarity, multiplied along the hops (a link counts 1.0)")
    depth: int = Field(description="hops from the source note")
    via: list[str] = Field(description="the paths walked from the source to this note")
    chunk: RelatedPassage | None = Field(
        description="the note's passage nearest the note it was reached from (null: reached by a link alone)")
    by: str | None = Field(None, description="with by links or both: how the last hop reached it (meaning, links, "
                                             "both)")
    link: RelatedLink | None = Field(None, description="with by links or both: the link of the last hop, if any")


class RelatedAnswer(Answer):
    source: NoteRef
    related: list[RelatedNote]
    bounded_by: list[str] = Field(description="which bounds stopped the walk early (empty: none)")
    elapsed_ms: float
    params: dict[str, Any] = Field(description="the walk as asked: limit, depth, fan_out, max_nodes, by, and the "
                                               "graph controls given (min_similarity, exclude_paths, filters)")

    def for_client(self) -> "RelatedAnswer":
        """What an MCP client sees: the passages without their internal chunk ids."""
        related = [n.model_copy(update={"chunk": RelatedPassage(**n.chunk.model_dump(exclude={"chunk_id"}))})
                   if n.chunk is not None else n for n in self.related]
        return self.model_copy(update={"related": related})

    def script_json(self) -> dict[str, Any]:
        """`groove related --format json`: a script interface, pinned by tests/test_cli.py (no resource URIs;
        `by` and `link` only when the walk followed links)."""
        out = self.model_dump(mode="json", exclude_unset=True)
        out["source"].pop("uri", None)
        for note in out["related"]:
            note.pop("uri", None)
        return out


def related_answer(response: dict[str, Any]) -> RelatedAnswer:
    src = response["source"]
    return RelatedAnswer(
        **{**response,
           "source": NoteRef(uri=note_uri(src["path"]), **src),
           "related": [RelatedNote(uri=note_uri(n["path"]), **n) for n in response["related"]]},
    )


def related_text(answer: RelatedAnswer) -> str:
    out = [f"{len(answer.related)} note(s) related to {answer.source.path} ({answer.source.title})"]
    for rank, n in enumerate(answer.related, 1):
        via = f" · via {' → '.join(n.via[1:-1])}" if len(n.via) > 2 else ""
        line = f"[{rank}] {n.path} ({n.title}) · score {n.score:.4g} · depth {n.depth}{via}"
        if n.link is not None:
            arrow = {"outgoing": "linked from", "backlink": "links to", "both": "linked both ways with"}[n.link.direction]
            line += f" · {arrow} {n.via[-2]} ({n.link.links} link(s), line {n.link.line})"
        if n.chunk is not None:
            line += f" · nearest passage: {n.chunk.heading or '(top)'}, lines {n.chunk.start_line}-{n.chunk.end_line}"
        out.append(line)
    if answer.bounded_by:
        out.append("bounded_by: " + ", ".join(answer.bounded_by))
    return "\n".join(out)


# --- links ----------------------------------------------------------------------------------------

class LinkItem(Answer):
    uri: str | None = Field(description="the resource URI of the note `path` names (null: unresolved)")
    path: str = Field(description="outgoing: the note linked to; backlinks: the note that links here; unresolved: "
                                  "the note as the link names it (no such note)")
    title: str | None = Field(description="that note's title (null: unresolved)")
    line: int = Field(description="the line of the link in the note that holds it (1-based)")
    kind: str = Field(description="wiki ([[...]]), embed (![[...]]) or markdown ([text](path.md))")
    target: str = Field(description="the link's target as written")
    heading: str | None = Field(description="the heading linked to ([[note#heading]])")
    block: str | None = Field(description="the block linked to ([[note#^block]])")
    alias: str | None = Field(description="the text shown ([[note|alias]], or a Markdown link's text)")


class LinksAnswer(Answer):
    source: NoteRef
    outgoing: list[LinkItem] = Field(description="the note's links to other notes, in line order")
    backlinks: list[LinkItem] = Field(description="the links of other notes to this one, by note then line")
    unresolved: list[LinkItem] = Field(description="the note's links that name no note, in line order")
    outgoing_total: int
    backlinks_total: int
    backlink_notes: int = Field(description="how many other notes link here (get_document's backlinks)")
    unresolved_total: int


def links_answer(found: dict[str, Any]) -> LinksAnswer:
    def items(rows: list[dict[str, Any]], resolved: bool) -> list[LinkItem]:
        return [LinkItem(uri=note_uri(r["path"]) if resolved else None, **r) for r in rows]

    src = found["source"]
    return LinksAnswer(**{**found, "source": NoteRef(uri=note_uri(src["path"]), **src),
                          "outgoing": items(found["outgoing"], True), "backlinks": items(found["backlinks"], True),
                          "unresolved": items(found["unresolved"], False)})


def _link_text(item: LinkItem, *, here: bool) -> str:
    """One link as a reader sees it: where it is and what it says."""
    to = item.target + (f"#{item.heading}" if item.heading else "") + (f"#^{item.block}" if item.block else "")
    shown = (f"![[{to}]]" if item.kind == "embed" else f"[[{to}]]") if item.kind != "markdown" else f"[..]({to})"
    alias = f" “{item.alias}”" if item.alias else ""
    where = f"line {item.line}" if here else f"{item.path}:{item.line}"
    return f"  {where} {shown}{alias}" + (f" → {item.path}" if here and item.uri else "")


def links_text(answer: LinksAnswer) -> str:
    out = [f"{answer.source.path} ({answer.source.title}): {answer.outgoing_total} outgoing, "
           f"{answer.backlinks_total} backlink(s) from {answer.backlink_notes} note(s), "
           f"{answer.unresolved_total} unresolved"]
    for name, items, total, here in (("outgoing", answer.outgoing, answer.outgoing_total, True),
                                     ("backlinks", answer.backlinks, answer.backlinks_total, False),
                                     ("unresolved", answer.unresolved, answer.unresolved_total, True)):
        if not items:
            continue
        out.append(f"{name}:" + (f" (first {len(items)} of {total})" if total > len(items) else ""))
        out += [_link_text(i, here=here) for i in items]
    return "\n".join(out)


# --- list_documents ---------------------------------------------------------------------------------

class DocumentRef(Answer):
    uri: str = Field(description="the note's resource URI")
    path: str
    title: str
    tags: list[str]
    date: str | None


class DocumentPage(Answer):
    documents: list[DocumentRef]
    next_cursor: str | None = Field(description="pass it back for the next page; null on the last page")


def document_page(response: dict[str, Any]) -> DocumentPage:
    return DocumentPage(documents=[DocumentRef(uri=note_uri(d["path"]), **d) for d in response["documents"]],
                        next_cursor=response["next_cursor"])


def _note_line(path: str, title: str, date: str | None, tags: list[str]) -> str:
    parts = [path + (f" ({title})" if title else "")]
    if date:
        parts.append(date)
    if tags:
        parts.append(" ".join(f"#{t}" for t in tags))
    return " · ".join(parts)


def document_page_text(page: DocumentPage) -> str:
    out = [f"{len(page.documents)} note(s)"] + [_note_line(d.path, d.title, d.date, d.tags) for d in page.documents]
    if page.next_cursor:
        out.append(f"more: next_cursor {page.next_cursor}")
    return "\n".join(out)


# --- topics -----------------------------------------------------------------------------------------

class FolderTopic(Answer):
    folder: str
    notes: int
    filter: dict[str, list[str]] = Field(description="the search filter that selects the folder (path_globs)")


class TagTopic(Answer):
    tag: str
    notes: int
    filter: dict[str, list[str]] = Field(description="the search filter that selects the tag (tags_any)")


class TopicsAnswer(Answer):
    notes: int = Field(description="notes in the index")
    notes_at_top_level: int = Field(description="notes in no folder")
    folders: list[FolderTopic]
    folders_total: int = Field(description="folders counted (the list stops at limit)")
    tags: list[TagTopic]


def topics_answer(response: dict[str, Any]) -> TopicsAnswer:
    return TopicsAnswer(**response)


def topics_text(answer: TopicsAnswer) -> str:
    out = [f"{answer.notes} note(s), {answer.notes_at_top_level} at the top level"]
    out.append(f"folders ({len(answer.folders)} of {answer.folders_total}; search with path_globs [\"<folder>/**\"]):")
    out += [f"  {f.folder}: {f.notes}" for f in answer.folders]
    out.append(f"tags ({len(answer.tags)}; search with tags_any [\"<tag>\"]):")
    out += [f"  #{t.tag}: {t.notes}" for t in answer.tags]
    return "\n".join(out)


# --- get_document -----------------------------------------------------------------------------------

class LeftOut(Answer):
    """A run of the note's lines that a part did not return."""

    lines: list[int] = Field(description="[first, last]: the lines left out (numbered as search hits number them)")
    chars: int = Field(description="their characters")
    headings: list[str] = Field(description="the headings that start in those lines, as paths below the title: "
                                            "pass one as heading to read it")
    more_headings: int = Field(0, description="headings in those lines beyond the ones listed")


class DocumentPart(Answer):
    """Which part of a note an answer holds (set when heading, lines or max_chars was given)."""

    heading: str | None = Field(None, description="the section returned, as its full heading path (with heading)")
    lines: list[int] = Field(description="[first, last]: the lines of the note content spans")
    chars: int = Field(description="characters in content")
    total_chars: int = Field(description="characters of the whole note's text (frontmatter not counted)")
    omitted_chars: int = Field(description="characters of the note not in content (total_chars - chars)")
    trimmed_chars: int = Field(description="characters max_chars cut from the end of the part asked for (0: none)")
    left_out: list[LeftOut] = Field(description="what was not returned, in note order, with the headings in it")


class DocumentAnswer(DocumentRef):  # a list_documents entry and the rest of the note
    frontmatter: dict[str, Any]
    warnings: list[Any] = Field(description="what was cut or could not be read while indexing the note")
    indexed_at: str | None = Field(description="when the note was last indexed, ISO-8601 UTC")
    size: int = Field(description="bytes of the file")
    backlinks: int = Field(0, description="how many other notes link to this one (the links tool lists them)")
    content: str = Field(description="the note (Markdown), or the text extracted from a document; with heading, "
                                     "lines or max_chars only that part")
    part: DocumentPart | None = Field(None, description="present with heading, lines or max_chars: the part "
                                                        "returned and what was left out")


def document_answer(doc: dict[str, Any]) -> DocumentAnswer:
    return DocumentAnswer(**{**doc, "uri": note_uri(doc["path"]), "indexed_at": iso_time(doc.get("indexed_at"))})


def _left_out_text(gap: LeftOut) -> str:
    heads = ", ".join(gap.headings) + (f" and {gap.more_headings} more" if gap.more_headings else "")
    return f"lines {gap.lines[0]}-{gap.lines[1]} ({gap.chars} chars{': ' + heads if heads else ''})"


def part_text(part: DocumentPart) -> list[str]:
    """The lines that say which part of a note an answer holds, and what it left out."""
    where = f"§ {part.heading} · " if part.heading else ""
    head = f"part: {where}lines {part.lines[0]}-{part.lines[1]} · {part.chars} of {part.total_chars} chars"
    if part.trimmed_chars:
        head += f" (max_chars cut the last {part.trimmed_chars} at a sentence end)"
    out = [head]
    if part.left_out:
        out.append("left out: " + "; ".join(_left_out_text(g) for g in part.left_out))
    elif not part.omitted_chars:
        out.append("left out: nothing (the whole note)")
    return out


def document_text(doc: DocumentAnswer) -> str:
    header = [_note_line(doc.path, doc.title, doc.date, doc.tags) + f" · {doc.size} bytes"
              + (f" · {doc.backlinks} backlink(s)" if doc.backlinks else "")]
    header += [f"warning: {w}" for w in doc.warnings]
    if doc.part is not None:
        header += part_text(doc.part)
    return "\n".join(header) + "\n---\n" + doc.content


# --- index_status -----------------------------------------------------------------------------------

class TaskState(Answer):
    state: str
    last_error: str | None
    last_error_at: str | None
    failures_in_a_row: int
    last_ok_at: str | None
    retry_at: str | None


class SkippedFile(Answer):
    path: str
    reason: str


class NoteWarnings(Answer):
    path: str
    warnings: list[Any]


class EmbeddingFailures(Answer):
    count: int
    last_error: str | None
    next_retry_at: str | None


class FolderStatus(Answer):
    """One notes folder the index holds."""

    name: str = Field(description="its name: the first part of its notes' paths when there are several folders")
    path: str = Field(description="where it is on disk")
    notes: int = Field(description="its notes in the index")


class IndexStatus(Answer):
    """What the index file holds (`groove status` without a running service reads only this)."""

    documents: int = Field(description="notes indexed")
    chunks: int
    pending_chunks: int = Field(description="chunks still waiting for a vector (searchable by text only)")
    vectors: int
    embeddings_computed: int = Field(description="vectors computed over the index's lifetime")
    model: str | None
    dimension: int
    schema_version: int
    index_path: str
    kb_path: str | None = Field(description="the notes folder (several: `name = path; ...`)")
    folders: list[FolderStatus] = Field(default_factory=list, description="each notes folder, with its notes")
    last_indexed_at: str | None = Field(description="ISO-8601 UTC")
    skipped: list[SkippedFile]
    warnings: list[NoteWarnings]
    model_fit: dict[str, Any] | None = Field(description="the notes' CJK share against the model, and a warning")
    model_switch: dict[str, Any] | None = Field(description="a model switch in progress (from, to, texts done of total)")
    last_model_switch: dict[str, Any] | None

    @classmethod
    def of(cls, status: dict[str, Any]) -> "IndexStatus":
        return cls(**iso_times(status))


class VectorsInMemory(Answer):
    """The running service's in-memory copy of the vectors (exact KNN, store/vectors.py)."""

    vectors: int = Field(description="vectors held")
    mib: float = Field(description="their size in MiB")


class StatusAnswer(IndexStatus):
    """The index and the service's own state (the `index_status` tool, `groove status` asking the service)."""

    watcher: str
    healthy: bool
    tasks: dict[str, TaskState] = Field(description="each daemon task's health (writer, reconcile, watcher, embedding)")
    last_change_at: str | None = Field(description="ISO-8601 UTC")
    last_reconcile: dict[str, Any] | None = Field(description="what the last full reconcile did; its `at` is ISO-8601 UTC")
    startup_reconcile_done: bool
    reindex_running: bool
    uptime_s: float
    embedding_failures: EmbeddingFailures | None
    vectors_in_memory: VectorsInMemory | None = Field(
        None, description="the daemon's in-memory copy of the vectors for exact KNN (vectors, mib); null: sqlite-vec's scan answers")


def status_text(st: StatusAnswer) -> str:
    out = [f"{st.documents} note(s), {st.chunks} chunk(s), {st.pending_chunks} pending (not yet searchable by meaning),"
           f" {st.vectors} vector(s); model {st.model} ({st.dimension} dims)",
           f"watcher {st.watcher} · healthy {'yes' if st.healthy else 'no'} · startup scan "
           f"{'done' if st.startup_reconcile_done else 'running'}{' · reindex running' if st.reindex_running else ''}"
           f" · uptime {st.uptime_s:g} s",
           f"last indexed {st.last_indexed_at or 'never'} · last change {st.last_change_at or 'none'}",
           f"notes {st.kb_path} · index {st.index_path}"]
    if len(st.folders) > 1:
        out.append("folders " + " · ".join(f"{f.name} ({f.notes} notes, {f.path})" for f in st.folders))
    for name, task in st.tasks.items():
        if task.last_error and task.state not in ("running", "ok", "watching"):
            out.append(f"task {name} {task.state}: {task.last_error} (retry {task.retry_at or 'not scheduled'})")
    if st.vectors_in_memory:
        out.append(f"vectors in memory: {st.vectors_in_memory.vectors} ({st.vectors_in_memory.mib} MiB)")
    if st.embedding_failures and st.embedding_failures.count:
        out.append(f"embedding failures: {st.embedding_failures.count}, last: {st.embedding_failures.last_error}")
    if st.model_switch:
        out.append(f"model switch: {st.model_switch.get('from')} → {st.model_switch.get('to')}, "
                   f"{st.model_switch.get('texts_done')} of {st.model_switch.get('texts_total')} texts")
    if st.model_fit and st.model_fit.get("warning"):
        out.append(f"model fit: {st.model_fit['warning']}")
    if st.skipped:
        out.append(f"skipped {len(st.skipped)} file(s): " + "; ".join(f"{s.path} ({s.reason})" for s in st.skipped[:10])
                   + (" ..." if len(st.skipped) > 10 else ""))
    if st.warnings:
        out.append(f"{len(st.warnings)} note(s) indexed with warnings: " + ", ".join(w.path for w in st.warnings[:10]))
    return "\n".join(out)


# --- reindex ----------------------------------------------------------------------------------------

def reindex_text(report: IndexReport) -> str:
    out = [f"reindex: {report.added} added, {report.changed} changed, {report.renamed} renamed, {report.deleted} deleted, "
           f"{report.unchanged} unchanged, {report.skipped} skipped; {report.chunks_written} chunk(s) written in "
           f"{report.seconds:g} s; {report.pending_chunks} pending (embedded in the background); finished {report.finished_at}"]
    out += [f"skipped {s.get('path')}: {s.get('reason')}" for s in report.skipped_files[:10]]
    return "\n".join(out)


__all__ = [
    "DocumentAnswer", "DocumentPage", "DocumentPart", "LeftOut", "OmittedPassage", "RelatedAnswer", "SearchAnswer",
    "SearchBudget", "StatusAnswer", "TopicsAnswer", "budget_text", "part_text",
    "IndexStatus", "VectorsInMemory", "document_answer", "document_page", "document_page_text", "document_text", "explain_text",
    "LinkItem", "LinksAnswer", "links_answer", "links_text",
    "note_uri", "related_answer", "related_text", "reindex_text", "search_answer", "search_text",
    "status_text", "topics_answer", "topics_text",
]
