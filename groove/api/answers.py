"""What each operation but search answers: one pydantic model per operation, and the one text rendering of each.

The service API (`groove.api.service`) returns these models (a search answers `groove.search.answers.SearchAnswer`),
and every front end shows them: the MCP tools (the model's dump is a tool's `structuredContent`, its schema the
`outputSchema`), the web view, the local socket (the dump as JSON) and the command line (the text
rendering here, or `script_json()` under `--format json`). One text per answer, written for a
reader (a person or a model): one block per item, not a second, indented copy of the JSON.

Every hit carries its note's resource URI (`uri`); every time is ISO-8601 UTC (`groove.sync.report.iso_time`).
docs/mcp.md ("Answers") describes the shapes and the text.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from groove.search.answers import OBJECT, OBJECT_OR_NULL, OBJECTS, Answer, note_uri
from groove.search.parts import DocumentPart, LeftOut
from groove.sync.report import IndexReport, iso_time, iso_times

# These models are the MCP tools' output schemas, declared as groove/search/answers.py says (OBJECT...: a detail
# object, SkipJsonSchema: a field only a diagnosis reads).

# --- related --------------------------------------------------------------------------------------


class RelatedPassage(Answer):
    heading: str
    start_line: int
    end_line: int
    similarity: float
    chunk_id: SkipJsonSchema[int | None] = None  # internal: the command line's JSON only, not in the tool's schema


class NoteRef(Answer):
    uri: str
    path: str
    title: str


class RelatedLink(Answer):
    """The link that joins a note reached by walking links to the note it was reached from."""

    direction: str  # outgoing: that note links to this one; backlink: this one links to it; both
    links: int  # how many links join the two notes
    line: int  # the line of the (first) link in the note that holds it
    heading: str | None = None  # the heading the link points at, if any
    alias: str | None = None


class RelatedNote(Answer):
    uri: str
    path: str
    title: str
    score: float = Field(description="similarity along the hops")  # multiplied; a link counts 1.0
    depth: int  # hops from the source note
    via: list[str] = Field(description="paths walked")
    # the note's passage nearest the note it was reached from (null: reached by a link alone)
    chunk: Annotated[RelatedPassage | None, OBJECT_OR_NULL] = Field(
        description="nearest passage: heading, start_line, end_line"
    )
    # with by links or both: how the last hop reached it (meaning, links, both); `link` and `chunk` say it too
    by: SkipJsonSchema[str | None] = None
    link: Annotated[RelatedLink | None, OBJECT_OR_NULL] = Field(None, description="direction, line, heading")


class RelatedAnswer(Answer):
    source: Annotated[NoteRef, OBJECT] = Field(description="uri, path, title")
    related: list[RelatedNote]
    bounded_by: list[str]  # which bounds stopped the walk early (empty: none)
    elapsed_ms: SkipJsonSchema[float]
    # the walk as asked: limit, depth, fan_out, max_nodes, by, and the graph controls given
    params: SkipJsonSchema[dict[str, Any]]

    def for_client(self) -> RelatedAnswer:
        """What an MCP client sees: the passages without their internal chunk ids."""
        related = [
            n.model_copy(update={"chunk": RelatedPassage(**n.chunk.model_dump(exclude={"chunk_id"}))})
            if n.chunk is not None
            else n
            for n in self.related
        ]
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
        **{
            **response,
            "source": NoteRef(uri=note_uri(src["path"]), **src),
            "related": [RelatedNote(uri=note_uri(n["path"]), **n) for n in response["related"]],
        },
    )


def related_text(answer: RelatedAnswer) -> str:
    out = [f"{len(answer.related)} note(s) related to {answer.source.path} ({answer.source.title})"]
    for rank, n in enumerate(answer.related, 1):
        via = f" · via {' → '.join(n.via[1:-1])}" if len(n.via) > 2 else ""
        line = f"[{rank}] {n.path} ({n.title}) · score {n.score:.4g} · depth {n.depth}{via}"
        if n.link is not None:
            arrow = {"outgoing": "linked from", "backlink": "links to", "both": "linked both ways with"}[
                n.link.direction
            ]
            line += f" · {arrow} {n.via[-2]} ({n.link.links} link(s), line {n.link.line})"
        if n.chunk is not None:
            line += f" · nearest passage: {n.chunk.heading or '(top)'}, lines {n.chunk.start_line}-{n.chunk.end_line}"
        out.append(line)
    if answer.bounded_by:
        out.append("bounded_by: " + ", ".join(answer.bounded_by))
    return "\n".join(out)


# --- links ----------------------------------------------------------------------------------------


class LinkItem(Answer):
    uri: str | None = Field(description="null: unresolved")
    # outgoing: the note linked to; backlinks: the note that links here; unresolved: the note as the link names it
    path: str
    title: SkipJsonSchema[str | None]  # the note's title (the text shows it)
    line: int  # of the link, in the note that holds it (1-based)
    kind: str = Field(description="wiki, embed or markdown")
    target: str  # as written
    heading: str | None  # [[note#heading]]
    block: SkipJsonSchema[str | None]  # [[note#^block]]
    alias: SkipJsonSchema[str | None]  # [[note|alias]], or a Markdown link's text


class LinksAnswer(Answer):
    source: Annotated[NoteRef, OBJECT] = Field(description="uri, path, title")
    outgoing: list[LinkItem]
    backlinks: list[LinkItem]
    unresolved: list[LinkItem]
    outgoing_total: int
    backlinks_total: int
    backlink_notes: SkipJsonSchema[int]
    unresolved_total: int


def links_answer(found: dict[str, Any]) -> LinksAnswer:
    def items(rows: list[dict[str, Any]], resolved: bool) -> list[LinkItem]:
        return [LinkItem(uri=note_uri(r["path"]) if resolved else None, **r) for r in rows]

    src = found["source"]
    return LinksAnswer(
        **{
            **found,
            "source": NoteRef(uri=note_uri(src["path"]), **src),
            "outgoing": items(found["outgoing"], True),
            "backlinks": items(found["backlinks"], True),
            "unresolved": items(found["unresolved"], False),
        }
    )


def _link_text(item: LinkItem, *, here: bool) -> str:
    """One link as a reader sees it: where it is and what it says."""
    to = item.target + (f"#{item.heading}" if item.heading else "") + (f"#^{item.block}" if item.block else "")
    shown = (f"![[{to}]]" if item.kind == "embed" else f"[[{to}]]") if item.kind != "markdown" else f"[..]({to})"
    alias = f" “{item.alias}”" if item.alias else ""
    where = f"line {item.line}" if here else f"{item.path}:{item.line}"
    return f"  {where} {shown}{alias}" + (f" → {item.path}" if here and item.uri else "")


def links_text(answer: LinksAnswer) -> str:
    out = [
        f"{answer.source.path} ({answer.source.title}): {answer.outgoing_total} outgoing, "
        f"{answer.backlinks_total} backlink(s) from {answer.backlink_notes} note(s), "
        f"{answer.unresolved_total} unresolved"
    ]
    for name, items, total, here in (
        ("outgoing", answer.outgoing, answer.outgoing_total, True),
        ("backlinks", answer.backlinks, answer.backlinks_total, False),
        ("unresolved", answer.unresolved, answer.unresolved_total, True),
    ):
        if not items:
            continue
        out.append(f"{name}:" + (f" (first {len(items)} of {total})" if total > len(items) else ""))
        out += [_link_text(i, here=here) for i in items]
    return "\n".join(out)


# --- list_documents ---------------------------------------------------------------------------------


class DocumentRef(Answer):
    uri: str
    path: str
    title: str
    tags: list[str]
    date: str | None


class DocumentPage(Answer):
    documents: list[DocumentRef]
    next_cursor: str | None = Field(description="null: the last page")


def document_page(response: dict[str, Any]) -> DocumentPage:
    return DocumentPage(
        documents=[DocumentRef(uri=note_uri(d["path"]), **d) for d in response["documents"]],
        next_cursor=response["next_cursor"],
    )


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
    filter: Annotated[dict[str, list[str]], OBJECT]  # the search filter that selects the folder (path_globs)


class TagTopic(Answer):
    tag: str
    notes: int
    filter: Annotated[dict[str, list[str]], OBJECT]  # the search filter that selects the tag (tags_any)


class TopicsAnswer(Answer):
    notes: int
    notes_at_top_level: int
    folders: list[FolderTopic]
    folders_total: int  # folders counted (the list stops at limit)
    tags: list[TagTopic]


def topics_answer(response: dict[str, Any]) -> TopicsAnswer:
    return TopicsAnswer(**response)


def topics_text(answer: TopicsAnswer) -> str:
    out = [f"{answer.notes} note(s), {answer.notes_at_top_level} at the top level"]
    out.append(f'folders ({len(answer.folders)} of {answer.folders_total}; search with path_globs ["<folder>/**"]):')
    out += [f"  {f.folder}: {f.notes}" for f in answer.folders]
    out.append(f'tags ({len(answer.tags)}; search with tags_any ["<tag>"]):')
    out += [f"  #{t.tag}: {t.notes}" for t in answer.tags]
    return "\n".join(out)


# --- get_document -----------------------------------------------------------------------------------


class DocumentAnswer(DocumentRef):  # a list_documents entry and the rest of the note
    frontmatter: dict[str, Any]
    warnings: list[str]  # what was cut or could not be read while indexing the note
    indexed_at: str | None
    size: int  # bytes of the file
    backlinks: int = 0  # how many other notes link to this one (the links tool lists them)
    content: str
    # present with heading, lines or max_chars: the part returned and what was left out
    part: Annotated[DocumentPart | None, OBJECT_OR_NULL] = Field(
        None, description="lines, chars, total_chars, left_out"
    )


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
    header = [
        _note_line(doc.path, doc.title, doc.date, doc.tags)
        + f" · {doc.size} bytes"
        + (f" · {doc.backlinks} backlink(s)" if doc.backlinks else "")
    ]
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
    warnings: list[str]


class EmbeddingFailures(Answer):
    count: int
    last_error: str | None
    next_retry_at: str | None


class FolderStatus(Answer):
    """One notes folder the index holds."""

    name: str  # the first part of its notes' paths when there are several folders
    path: str  # where it is on disk (on its host's disk, in a shared store)
    notes: int
    host: str | None = None  # a shared store: the machine that indexes it


class IndexStatus(Answer):
    """What the index file holds (`groove status` without a running service reads only this)."""

    # The index_status tool's schema declares what a client reads to know the index is ready; the rest is for a
    # diagnosis (groove status, and the tool's text content, say it when it matters).
    documents: int = Field(description="notes")
    chunks: int
    pending_chunks: int = Field(description="not embedded yet")  # searchable by text only
    vectors: SkipJsonSchema[int]
    embeddings_computed: SkipJsonSchema[int]  # vectors computed over the index's lifetime
    model: str | None
    dimension: SkipJsonSchema[int]
    schema_version: SkipJsonSchema[int]
    index_path: SkipJsonSchema[str]
    kb_path: SkipJsonSchema[str | None]  # the notes folder (several: `name = path; ...`): `folders` says it
    folders: Annotated[list[FolderStatus], OBJECTS] = Field(default_factory=list, description="name, path, notes")
    last_indexed_at: str | None
    skipped: Annotated[list[SkippedFile], OBJECTS] = Field(description="path, reason")
    warnings: SkipJsonSchema[list[NoteWarnings]]  # the notes indexed with warnings (the text content names them)
    model_fit: SkipJsonSchema[dict[str, Any] | None]  # the notes' CJK share against the model, and a warning
    model_switch: SkipJsonSchema[dict[str, Any] | None]  # a switch in progress (from, to, texts done of total)
    last_model_switch: SkipJsonSchema[dict[str, Any] | None]

    @classmethod
    def of(cls, status: dict[str, Any]) -> IndexStatus:
        return cls(**iso_times(status))


class VectorsInMemory(Answer):
    """The running service's in-memory copy of the vectors (exact KNN, store/memory.py)."""

    vectors: int = Field(description="vectors held")
    mib: float = Field(description="their size in MiB")


class StatusAnswer(IndexStatus):
    """The index and the service's own state (the `index_status` tool, `groove status` asking the service)."""

    watcher: str
    healthy: bool
    # each daemon task's health (writer, reconcile, watcher, embedding)
    tasks: SkipJsonSchema[dict[str, TaskState]]  # state, last_error per task: `healthy` sums them up
    last_change_at: SkipJsonSchema[str | None]
    last_reconcile: SkipJsonSchema[dict[str, Any] | None]  # what the last full reconcile did
    startup_reconcile_done: bool
    reindex_running: SkipJsonSchema[bool]
    uptime_s: SkipJsonSchema[float]
    embedding_failures: SkipJsonSchema[EmbeddingFailures | None]
    # the daemon's in-memory copy of the vectors for exact KNN (null: sqlite-vec's scan answers)
    vectors_in_memory: SkipJsonSchema[VectorsInMemory | None] = None


def status_text(st: StatusAnswer) -> str:
    out = [
        f"{st.documents} note(s), {st.chunks} chunk(s), {st.pending_chunks} pending (not yet searchable by meaning),"
        f" {st.vectors} vector(s); model {st.model} ({st.dimension} dims)",
        f"watcher {st.watcher} · healthy {'yes' if st.healthy else 'no'} · startup scan "
        f"{'done' if st.startup_reconcile_done else 'running'}{' · reindex running' if st.reindex_running else ''}"
        f" · uptime {st.uptime_s:g} s",
        f"last indexed {st.last_indexed_at or 'never'} · last change {st.last_change_at or 'none'}",
        f"notes {st.kb_path} · index {st.index_path}",
    ]
    if len(st.folders) > 1 or any(f.host for f in st.folders):
        out.append(
            "folders "
            + " · ".join(f"{f.name} ({f.notes} notes, {f.host + ':' if f.host else ''}{f.path})" for f in st.folders)
        )
    for name, task in st.tasks.items():
        if task.last_error and task.state not in ("running", "ok", "watching"):
            out.append(f"task {name} {task.state}: {task.last_error} (retry {task.retry_at or 'not scheduled'})")
    if st.vectors_in_memory:
        out.append(f"vectors in memory: {st.vectors_in_memory.vectors} ({st.vectors_in_memory.mib} MiB)")
    if st.embedding_failures and st.embedding_failures.count:
        out.append(f"embedding failures: {st.embedding_failures.count}, last: {st.embedding_failures.last_error}")
    if st.model_switch:
        out.append(
            f"model switch: {st.model_switch.get('from')} → {st.model_switch.get('to')}, "
            f"{st.model_switch.get('texts_done')} of {st.model_switch.get('texts_total')} texts"
        )
    if st.model_fit and st.model_fit.get("warning"):
        out.append(f"model fit: {st.model_fit['warning']}")
    if st.skipped:
        out.append(
            f"skipped {len(st.skipped)} file(s): "
            + "; ".join(f"{s.path} ({s.reason})" for s in st.skipped[:10])
            + (" ..." if len(st.skipped) > 10 else "")
        )
    if st.warnings:
        out.append(f"{len(st.warnings)} note(s) indexed with warnings: " + ", ".join(w.path for w in st.warnings[:10]))
    return "\n".join(out)


# --- reindex ----------------------------------------------------------------------------------------


def reindex_text(report: IndexReport) -> str:
    out = [
        f"reindex: {report.added} added, {report.changed} changed, {report.renamed} renamed, {report.deleted} deleted, "
        f"{report.unchanged} unchanged, {report.skipped} skipped; {report.chunks_written} chunk(s) written in "
        f"{report.seconds:g} s; {report.pending_chunks} pending (embedded in the background); finished "
        f"{report.finished_at}"
    ]
    out += [f"skipped {s.get('path')}: {s.get('reason')}" for s in report.skipped_files[:10]]
    return "\n".join(out)


# --- changes ----------------------------------------------------------------------------------------


class SectionChange(Answer):
    heading: str  # "" for the text before a note's first heading
    change: str  # added | edited | deleted


class NoteChange(Answer):
    uri: SkipJsonSchema[str | None] = None  # the note's resource; none for a deleted note
    path: str
    change: str  # added | edited | renamed | deleted
    old_path: str = ""  # a renamed note's path at the time asked about (only then)
    at: str  # its last change, ISO-8601 UTC
    sections: Annotated[list[SectionChange], OBJECTS] = Field(description="heading, change")


class ChangesAnswer(Answer):
    since: str
    # when the index began keeping the history: an earlier `since` cannot be answered whole (the text says so)
    history_from: SkipJsonSchema[str] = ""
    notes: list[NoteChange]
    more: int = Field(description="notes past limit")
    cut: SkipJsonSchema[bool] = False  # more history rows since then than one answer nets (sync/history.py)


def changes_answer(
    entries: list[Any], *, since: float, history_from: float | None, limit: int, cut: bool
) -> ChangesAnswer:
    """The netted entries (groove/sync/history.py `NoteEntry`, newest first) as the answer, at most `limit`."""
    notes = [
        NoteChange(
            uri=None if e.change == "deleted" else note_uri(e.path),
            path=e.path,
            change=e.change,
            **({"old_path": e.old_path} if e.old_path else {}),
            at=iso_time(e.at) or "",
            sections=[]
            if e.change == "deleted"
            else [SectionChange(heading=h, change=c) for h, c in e.sections.items()],
        )
        for e in entries[:limit]
    ]
    return ChangesAnswer(
        since=iso_time(since) or "",
        history_from=iso_time(history_from) or "",
        notes=notes,
        more=max(0, len(entries) - limit),
        cut=cut,
    )


_SIGN = {"added": "+", "edited": "~", "renamed": ">", "deleted": "-"}


def changes_text(answer: ChangesAnswer) -> str:
    out = [f"{len(answer.notes) + answer.more} note(s) changed since {answer.since}"]
    if answer.history_from and answer.history_from > answer.since:
        out.append(f"(the index keeps changes since {answer.history_from}: earlier ones are not known)")
    for n in answer.notes:
        line = f"{_SIGN.get(n.change, '?')} {n.path} ({n.change} {n.at})"
        if n.old_path:
            line += f" from {n.old_path}"
        if n.sections:
            line += ": " + "; ".join(f"{_SIGN.get(s.change, '?')} {s.heading or '(top)'}" for s in n.sections)
        out.append(line)
    if answer.more:
        out.append(f"... and {answer.more} more (raise limit)")
    if answer.cut:
        out.append(
            "(the history since then is longer than one answer reads: these are its most recent changes; "
            "ask for a later since)"
        )
    return "\n".join(out)
