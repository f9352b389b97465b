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

from typing import Any

from pydantic import Field

from groove.search.answers import Answer, note_uri
from groove.search.parts import DocumentPart, LeftOut
from groove.sync.report import IndexReport, iso_time, iso_times

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

    direction: str = Field(description="outgoing: that note links to this one; backlink: this one links to it; both")
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
        description="the note's passage nearest the note it was reached from (null: reached by a link alone)"
    )
    by: str | None = Field(
        None, description="with by links or both: how the last hop reached it (meaning, links, both)"
    )
    link: RelatedLink | None = Field(None, description="with by links or both: the link of the last hop, if any")


class RelatedAnswer(Answer):
    source: NoteRef
    related: list[RelatedNote]
    bounded_by: list[str] = Field(description="which bounds stopped the walk early (empty: none)")
    elapsed_ms: float
    params: dict[str, Any] = Field(
        description="the walk as asked: limit, depth, fan_out, max_nodes, by, and the "
        "graph controls given (min_similarity, exclude_paths, filters)"
    )

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
    uri: str | None = Field(description="the resource URI of the note `path` names (null: unresolved)")
    path: str = Field(
        description="outgoing: the note linked to; backlinks: the note that links here; unresolved: "
        "the note as the link names it (no such note)"
    )
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
    uri: str = Field(description="the note's resource URI")
    path: str
    title: str
    tags: list[str]
    date: str | None


class DocumentPage(Answer):
    documents: list[DocumentRef]
    next_cursor: str | None = Field(description="pass it back for the next page; null on the last page")


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
    out.append(f'folders ({len(answer.folders)} of {answer.folders_total}; search with path_globs ["<folder>/**"]):')
    out += [f"  {f.folder}: {f.notes}" for f in answer.folders]
    out.append(f'tags ({len(answer.tags)}; search with tags_any ["<tag>"]):')
    out += [f"  #{t.tag}: {t.notes}" for t in answer.tags]
    return "\n".join(out)


# --- get_document -----------------------------------------------------------------------------------


class DocumentAnswer(DocumentRef):  # a list_documents entry and the rest of the note
    frontmatter: dict[str, Any]
    warnings: list[Any] = Field(description="what was cut or could not be read while indexing the note")
    indexed_at: str | None = Field(description="when the note was last indexed, ISO-8601 UTC")
    size: int = Field(description="bytes of the file")
    backlinks: int = Field(0, description="how many other notes link to this one (the links tool lists them)")
    content: str = Field(
        description="the note (Markdown), or the text extracted from a document; with heading, "
        "lines or max_chars only that part"
    )
    part: DocumentPart | None = Field(
        None, description="present with heading, lines or max_chars: the part returned and what was left out"
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
    warnings: list[Any]


class EmbeddingFailures(Answer):
    count: int
    last_error: str | None
    next_retry_at: str | None


class FolderStatus(Answer):
    """One notes folder the index holds."""

    name: str = Field(description="its name: the first part of its notes' paths when there are several folders")
    path: str = Field(description="where it is on disk (on its host's disk, in a shared store)")
    notes: int = Field(description="its notes in the index")
    host: str | None = Field(None, description="a shared store: the machine that indexes it")


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
    model_switch: dict[str, Any] | None = Field(
        description="a model switch in progress (from, to, texts done of total)"
    )
    last_model_switch: dict[str, Any] | None

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
    tasks: dict[str, TaskState] = Field(description="each daemon task's health (writer, reconcile, watcher, embedding)")
    last_change_at: str | None = Field(description="ISO-8601 UTC")
    last_reconcile: dict[str, Any] | None = Field(
        description="what the last full reconcile did; its `at` is ISO-8601 UTC"
    )
    startup_reconcile_done: bool
    reindex_running: bool
    uptime_s: float
    embedding_failures: EmbeddingFailures | None
    vectors_in_memory: VectorsInMemory | None = Field(
        None,
        description=(
            "the daemon's in-memory copy of the vectors for exact KNN (vectors, mib); null: sqlite-vec's scan answers"
        ),
    )


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
