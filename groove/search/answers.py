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
        passage = hit.content.strip()
        if passage_chars is not None:
            folded = " ".join(passage.split())
            passage = folded[:passage_chars] + ("…" if len(folded) > passage_chars else "")
        out.append(f"\n{head}\n{meta}\n{passage}")
    flags = search_flags(answer)
    if flags:
        out.append("\n" + " · ".join(flags))
    if answer.explain is not None:
        out.append(explain_text(answer))
    return "\n".join(out)


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
        cal = o.get("calibration")
        scale = (f"calibrated answered {cal['answered']:.3f} / unanswered {cal['unanswered']:.3f}"
                 f" ({cal['queries']} synthetic queries, {cal['vectors']} vectors)") if cal else "not calibrated (full-text evidence alone)"
        out.append(f"  off_topic:        {answer.off_topic}; vector top {o.get('vector_top')}, position {o.get('vector_position')},"
                   f" evidence {o.get('evidence')}, agreement {o.get('agreement')}; score {o.get('score')}"
                   f" (threshold {o.get('threshold')}; without vectors evidence < {o.get('fts_only_threshold')}); {scale}")
    c = e.get("candidates") or {}
    out.append(f"  candidates:       fts {c.get('fts')}, vector {c.get('vector')}, fused {c.get('fused')}"
               f" (pool {e.get('pool_per_retriever')} per retriever)")
    out.append(f"  vector-only:      {e.get('vector_only')}   whole-query fallback: {e.get('fallback')}")
    out.append(f"  stages:           {e.get('stages')}")
    out.append(f"  timings (ms):     {e.get('timings_ms')}")
    for i, r in enumerate(answer.results, 1):
        out.append(f"  #{i}: fts rank {r.fts_rank or '-'}, vector rank {r.vec_rank or '-'}  {r.path}")
    return "\n".join(out)


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


class RelatedNote(Answer):
    uri: str = Field(description="the note's resource URI")
    path: str
    title: str
    score: float = Field(description="similarity, multiplied along the hops")
    depth: int = Field(description="hops from the source note")
    via: list[str] = Field(description="the paths walked from the source to this note")
    chunk: RelatedPassage = Field(description="the note's passage nearest the note it was reached from")


class RelatedAnswer(Answer):
    source: NoteRef
    related: list[RelatedNote]
    bounded_by: list[str] = Field(description="which bounds stopped the walk early (empty: none)")
    elapsed_ms: float
    params: dict[str, int]

    def for_client(self) -> "RelatedAnswer":
        """What an MCP client sees: the passages without their internal chunk ids."""
        related = [n.model_copy(update={"chunk": RelatedPassage(**n.chunk.model_dump(exclude={"chunk_id"}))})
                   for n in self.related]
        return self.model_copy(update={"related": related})

    def script_json(self) -> dict[str, Any]:
        """`groove related --format json`: a script interface, pinned by tests/test_cli.py (no resource URIs)."""
        out = self.model_dump(mode="json")
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
        out.append(f"[{rank}] {n.path} ({n.title}) · score {n.score:.4g} · depth {n.depth}{via}"
                   f" · nearest passage: {n.chunk.heading or '(top)'}, lines {n.chunk.start_line}-{n.chunk.end_line}")
    if answer.bounded_by:
        out.append("bounded_by: " + ", ".join(answer.bounded_by))
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

class DocumentAnswer(DocumentRef):  # a list_documents entry and the rest of the note
    frontmatter: dict[str, Any]
    warnings: list[Any] = Field(description="what was cut or could not be read while indexing the note")
    indexed_at: str | None = Field(description="when the note was last indexed, ISO-8601 UTC")
    size: int = Field(description="bytes of the file")
    content: str = Field(description="the note (Markdown), or the text extracted from a document")


def document_answer(doc: dict[str, Any]) -> DocumentAnswer:
    return DocumentAnswer(**{**doc, "uri": note_uri(doc["path"]), "indexed_at": iso_time(doc.get("indexed_at"))})


def document_text(doc: DocumentAnswer) -> str:
    header = [_note_line(doc.path, doc.title, doc.date, doc.tags) + f" · {doc.size} bytes"]
    header += [f"warning: {w}" for w in doc.warnings]
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
    kb_path: str | None
    last_indexed_at: str | None = Field(description="ISO-8601 UTC")
    skipped: list[SkippedFile]
    warnings: list[NoteWarnings]
    model_fit: dict[str, Any] | None = Field(description="the notes' CJK share against the model, and a warning")
    model_switch: dict[str, Any] | None = Field(description="a model switch in progress (from, to, texts done of total)")
    last_model_switch: dict[str, Any] | None

    @classmethod
    def of(cls, status: dict[str, Any]) -> "IndexStatus":
        return cls(**iso_times(status))


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
    vectors_in_memory: dict[str, Any] | None = Field(
        None, description="the daemon's in-memory copy of the vectors for exact KNN (vectors, mib); null: sqlite-vec's scan answers")


def status_text(st: StatusAnswer) -> str:
    out = [f"{st.documents} note(s), {st.chunks} chunk(s), {st.pending_chunks} pending (not yet searchable by meaning),"
           f" {st.vectors} vector(s); model {st.model} ({st.dimension} dims)",
           f"watcher {st.watcher} · healthy {'yes' if st.healthy else 'no'} · startup scan "
           f"{'done' if st.startup_reconcile_done else 'running'}{' · reindex running' if st.reindex_running else ''}"
           f" · uptime {st.uptime_s:g} s",
           f"last indexed {st.last_indexed_at or 'never'} · last change {st.last_change_at or 'none'}",
           f"notes {st.kb_path} · index {st.index_path}"]
    for name, task in st.tasks.items():
        if task.last_error and task.state not in ("running", "ok", "watching"):
            out.append(f"task {name} {task.state}: {task.last_error} (retry {task.retry_at or 'not scheduled'})")
    if st.vectors_in_memory:
        out.append(f"vectors in memory: {st.vectors_in_memory['vectors']} ({st.vectors_in_memory['mib']} MiB)")
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
    "DocumentAnswer", "DocumentPage", "RelatedAnswer", "SearchAnswer", "StatusAnswer", "TopicsAnswer",
    "IndexStatus", "document_answer", "document_page", "document_page_text", "document_text", "explain_text",
    "note_uri", "related_answer", "related_text", "reindex_text", "search_answer", "search_text",
    "status_text", "topics_answer", "topics_text",
]
