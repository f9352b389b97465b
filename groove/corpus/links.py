"""Links between notes, as Obsidian reads them, and which note each one names. Pure: no files, no database.

**Parsing.** `links_in(body, first_line)` finds, outside code blocks and inline code:

- wiki links: `[[name]]`, `[[name|alias]]` (`[[name\\|alias]]` inside a table), `[[name#heading]]`,
  `[[name#heading#subheading]]`, `[[name#^block]]` and `[[name^block]]`, `[[folder/name]]`;
- embeds: `![[name]]` (an embed of an image, audio, video, canvas or base file is not a link between
  notes and is left out: `ATTACHMENT_EXTENSIONS`);
- Markdown links to notes: `[text](relative/path.md)`, `[text](<with spaces.md>)`,
  `[text](%E6%97%A5%E8%A8%98.md#heading)`, reference links (`[text][ref]` with `[ref]: note.md`) and
  `![alt](note.md)`; only destinations ending in `.md` (a web address, `mailto:`, an image or a
  folder is not a note).

What is code is decided by markdown-it-py's tokens (CommonMark), as `blocks.py` decides headings: a
fenced or indented code block has no inline content at all, and the inline parser's code-span rule
runs before the wiki-link rule at each position, so `` `[[x]]` `` is consumed as code. An escaped
`\\[[x]]` is not a link either. The inline parser reads each block's text up to `INLINE_PARSE_CHARS`
(and a note's up to `NOTE_INLINE_PARSE_CHARS`): on text made of brackets it is quadratic, so a larger
block is read by `_scan`, linear, which finds code spans by CommonMark's own rule and the same links
(tests/test_links.py holds the two to the same answers; reference links are read by the parser only).
A wiki link is on one line. Each link keeps the line it starts on (1-based, the file's own:
frontmatter lines count). A link to the note itself (`[[#heading]]`) is
not kept.

**Names.** A note answers to its file name without `.md` (`note_name`): a link's target
(`Link.name`) is folded the same way, so the index looks candidates up by that key. Folding is NFKC
then case folding (`ＭＥＭＯ`, `memo`, `Memo` and a file name written in NFD on macOS are one
name); among several candidates the spelling that matches exactly after NFC and case folding wins.

**Resolution** (`resolve`), as Obsidian does it:

1. a target with a path (`[[folder/name]]`, or any Markdown link): the note at that path relative to
   the linking note's folder (Markdown links, and wiki links starting with `./` or `../`), then from
   the top of the notes folder, then (unless it starts with `./` or `../`) any note whose path ends
   with it (`[[b/name]]` finds `a/b/name.md`); a leading `/` means the top of the folder;
2. a bare name: every note with that file name;
3. among several: the exact spelling, then one in the linking note's own folder, then the shortest
   path (fewest folders, then fewest characters, then path order);
4. groove's one addition: a bare name that is no note's file name is looked up among the notes'
   frontmatter `aliases` and titles (`note_names`), by the same rule 3. Obsidian offers aliases as
   link suggestions and writes `[[file|alias]]`; a hand-written `[[Title]]` or `[[alias]]` finds its
   note here rather than being unresolved.

A link that names no note is unresolved; a link to a file groove does not index as a note (a PDF
when PDFs are not indexed, `![[diagram.excalidraw]]`) is kept and resolves when the file is indexed,
but is not reported as unresolved (`is_note_target`).
"""

from __future__ import annotations

import bisect
import json
import posixpath
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.rules_inline.image import image as _image_rule
from markdown_it.rules_inline.link import link as _link_rule
from markdown_it.rules_inline.state_inline import StateInline

__all__ = [
    "ATTACHMENT_EXTENSIONS",
    "KINDS",
    "Link",
    "is_note_target",
    "links_in",
    "links_json",
    "links_of_chunks",
    "note_name",
    "note_names",
    "note_names_json",
    "resolve",
    "resolve_json",
    "use_wiki_links",
    "wiki_link",
]

KINDS = ("wiki", "embed", "markdown")

# Files a vault embeds that are never notes (Obsidian's accepted formats besides Markdown and PDF):
# a link to one is left out.
ATTACHMENT_EXTENSIONS = frozenset(
    {
        "avif",
        "bmp",
        "gif",
        "jpeg",
        "jpg",
        "png",
        "svg",
        "webp",
        "heic",
        "tif",
        "tiff",
        "ico",
        "flac",
        "m4a",
        "mp3",
        "ogg",
        "wav",
        "webm",
        "3gp",
        "aac",
        "opus",
        "mkv",
        "mov",
        "mp4",
        "ogv",
        "avi",
        "canvas",
        "base",
        "excalidraw",
    }
)
# Files groove indexes only when a parser is enabled ([parsers] enabled): kept, never "unresolved".
_DOCUMENT_EXTENSIONS = frozenset({"pdf", "txt", "docx", "pptx", "xlsx", "markdown"})

# The longest wiki link looked for (name, heading and alias): a `[[` with no `]]` within this many characters
# is text. It bounds the search for the closing brackets, so a line of ten thousand `[[` costs linear time.
MAX_WIKILINK_CHARS = 1024

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_EXTENSION = re.compile(r"\.([A-Za-z0-9]{1,12})$")


@dataclass(frozen=True)
class Link:
    """One link of a note."""

    line: int  # 1-based line of the file the link starts on
    kind: str  # "wiki" | "embed" | "markdown"
    target: str  # the note as written: a name or a path (decoded; no '#...', no '|...')
    heading: str | None = None  # [[name#heading]]: the heading linked to ('#' between levels)
    block: str | None = None  # [[name#^block]]: the block id, without '^'
    alias: str | None = None  # [[name|alias]], or a Markdown link's text

    @property
    def name(self) -> str:
        """The key a note answers to (`note_name` of the target)."""
        return note_name(self.target)


# --- names ------------------------------------------------------------------------------------


def _strip_md(path: str) -> str:
    return path[:-3] if path[-3:].lower() == ".md" else path


def fold_name(text: str) -> str:
    """NFKC, then case folding, then NFKC again (case folding can leave text that is not NFKC)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def _exact(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def note_name(path: str) -> str:
    """The key a note (or a link's target) answers to: its file name without `.md`, folded."""
    return fold_name(_strip_md(path.rsplit("/", 1)[-1]).strip())


MAX_ALIASES = 64  # aliases of one note looked at (a frontmatter list is the user's, and unbounded)


def note_names(path: str, title: str | None, frontmatter: Any) -> list[tuple[str, int]]:
    """The names a note answers to: (its file name, 0), then (each frontmatter alias and its title, 1), folded,
    each once (rule 4 of the module doc)."""
    names = {note_name(path): 0}
    aliases: Any = frontmatter.get("aliases", frontmatter.get("alias")) if isinstance(frontmatter, dict) else None
    if isinstance(aliases, str):
        aliases = [a for a in aliases.split(",")]
    if not isinstance(aliases, list):
        aliases = []
    for alias in [title, *aliases[:MAX_ALIASES]]:
        if isinstance(alias, str) and alias.strip() and "/" not in alias:
            names.setdefault(fold_name(alias.strip()), 1)
    return list(names.items())


def note_names_json(path: str, title: str | None, frontmatter: str | None) -> str:
    """`note_names` for SQL (`groove_note_names`): the frontmatter as its JSON, the names as a JSON array."""
    try:
        front = json.loads(frontmatter or "{}")
    except ValueError:
        front = {}
    return json.dumps(note_names(path, title, front), ensure_ascii=False)


def _extension(target: str) -> str | None:
    m = _EXTENSION.search(target.rsplit("/", 1)[-1])
    return m.group(1).lower() if m else None


def is_note_target(target: str) -> bool:
    """Whether a target names a note (no extension, `.md`, or one that is not a document's or an
    attachment's): only those are reported as unresolved when nothing answers to them."""
    ext = _extension(target)
    return ext is None or ext == "md" or (ext not in _DOCUMENT_EXTENSIONS and ext not in ATTACHMENT_EXTENSIONS)


# --- parsing ----------------------------------------------------------------------------------


def _wikilink(state: StateInline, silent: bool) -> bool:
    """`[[...]]` and `![[...]]` on one line, taken before CommonMark's link rule looks at the brackets.
    The code-span rule runs before this one at every position, so a wiki link inside backticks is code."""
    src, pos = state.src, state.pos
    embed = src.startswith("![[", pos)
    if not embed and not src.startswith("[[", pos):
        return False
    start = pos + (3 if embed else 2)
    end = src.find("]]", start, min(state.posMax, start + MAX_WIKILINK_CHARS + 2))
    if end < 0:
        return False
    inner = src[start:end]
    if not inner.strip() or "\n" in inner or "[[" in inner:
        return False
    if not silent:
        token = state.push("wikilink", "", 0)
        token.content = inner
        token.meta = {"pos": pos, "embed": embed}
    state.pos = end + 2
    return True


def _positioned(rule: Any, opening: str) -> Any:
    """CommonMark's link (or image) rule, noting where in the inline text the token it made starts."""

    def run(state: StateInline, silent: bool) -> bool:
        start, before = state.pos, len(state.tokens)
        ok = rule(state, silent)
        if ok and not silent:
            for token in state.tokens[before:]:
                if token.type == opening:
                    token.meta = {**(token.meta or {}), "pos": start}
                    break
        return ok

    return run


def _parser() -> MarkdownIt:
    # Blocks first (linear, as blocks.py parses them); each block's inline text is parsed on its own below.
    md = MarkdownIt("commonmark").disable(["inline", "text_join"])
    md.inline.ruler.before("link", "wikilink", _wikilink)
    md.inline.ruler.at("link", _positioned(_link_rule, "link_open"))
    md.inline.ruler.at("image", _positioned(_image_rule, "image"))
    return md


_MD = _parser()

# markdown-it's inline parser is slow on text made of brackets (`[[[[...`: its link rule looks for the closing
# bracket from each one, about 3 s for 100,000 of them), so it reads a block's inline text only up to this size,
# and a note's up to the second figure; the rest is read by `_scan`, a linear scan that finds code spans by
# CommonMark's rule (a run of backticks closes at the next run of the same length). Real paragraphs and tables
# are far smaller: the budgets only bound what a hostile file costs.
INLINE_PARSE_CHARS = 20_000
NOTE_INLINE_PARSE_CHARS = 400_000


def _split_unescaped(text: str, sep: str) -> tuple[str, str | None]:
    """`text` split at the first `sep` (a `\\` before it, as a table cell writes it, counts as the
    separator too and is dropped)."""
    i = text.find(sep)
    if i < 0:
        return text, None
    head = text[:i]
    if head.endswith("\\"):
        head = head[:-1]
    return head, text[i + 1 :]


def _wiki(inner: str, embed: bool, line: int) -> Link | None:
    target_part, alias = _split_unescaped(inner, "|")
    heading = block = None
    name, fragment = _split_unescaped(target_part, "#")
    if fragment is None and "^" in name:
        name, block = name.split("^", 1)
    elif fragment is not None:
        fragment = fragment.strip()
        if "#^" in fragment:
            fragment, block = fragment.split("#^", 1)
        elif fragment.startswith("^"):
            fragment, block = "", fragment[1:]
        heading = fragment.strip() or None
    name = name.strip()
    if not name:
        return None  # [[#heading]]: a link inside the note itself
    if _extension(name) in ATTACHMENT_EXTENSIONS:
        return None  # an image, a recording, a canvas: not a note
    alias = alias.strip() if alias is not None else None
    return Link(line, "embed" if embed else "wiki", name, heading, (block or "").strip() or None, alias or None)


def use_wiki_links(md: MarkdownIt) -> MarkdownIt:
    """`md` reading `[[wiki links]]` and `![[embeds]]` as this module does (before CommonMark's link rule, never
    inside a code span): each a `wikilink` token, its content what is between the brackets, `meta["embed"]`.
    The web view renders notes with it (serve/http/ui.py), so a link there is the link the index holds."""
    md.inline.ruler.before("link", "wikilink", _wikilink)
    return md


def wiki_link(inner: str, embed: bool = False) -> Link | None:
    """What a wiki link's text (between the brackets) names, as the index reads it (line 0); None when it names
    no note (`[[#heading]]`, an image or another attachment)."""
    return _wiki(inner, embed, 0)


def _markdown(href: str, text: str, line: int) -> Link | None:
    if not href or href.startswith(("#", "//")) or _SCHEME.match(href):
        return None
    path, _, fragment = href.partition("#")
    path = unquote(path.split("?", 1)[0]).strip()
    if not path.lower().endswith(".md") or path.endswith("/"):
        return None
    fragment = unquote(fragment).strip()
    block = fragment[1:] if fragment.startswith("^") else None
    heading = None if block is not None or not fragment else fragment
    return Link(line, "markdown", path, heading, block or None, text.strip() or None)


def _parsed(source: str, env: dict[str, Any]) -> list[tuple[int, Link]]:
    """(offset in `source`, link) of one block's inline text, from markdown-it-py's tokens."""
    children: list[Any] = []
    _MD.inline.parse(source, _MD, env, children)
    out: list[tuple[int, Link]] = []
    for i, token in enumerate(children):
        pos = (token.meta or {}).get("pos")
        if pos is None:
            continue
        link: Link | None = None
        if token.type == "wikilink":
            link = _wiki(token.content, bool(token.meta.get("embed")), 0)
        elif token.type == "link_open":
            text = []
            for child in children[i + 1 :]:
                if child.type == "link_close":
                    break
                if child.type in ("text", "code_inline"):
                    text.append(child.content)
            link = _markdown(str(token.attrGet("href") or ""), "".join(text), 0)
        elif token.type == "image":
            link = _markdown(str(token.attrGet("src") or ""), token.content, 0)
            if link is not None:
                link = Link(0, "embed", link.target, link.heading, link.block, link.alias)
        if link is not None:
            out.append((pos, link))
    return out


_BACKTICKS = re.compile(r"`+")
_WIKI = re.compile(r"(!?)\[\[([^\[\]\n]{1,%d})\]\]" % MAX_WIKILINK_CHARS)
_MDLINK = re.compile(
    r"(!?)\[([^\[\]\n]{0,1000})\]\(\s*(<[^<>\n]{1,2048}>|[^\s()<>]{1,2048})(?:\s+\"[^\"\n]{0,1000}\")?\s*\)"
)


def _code_spans(source: str) -> list[tuple[int, int]]:
    """The code spans of an inline text, by CommonMark's rule: a run of backticks (not escaped) opens one,
    closed by the next run of exactly that length; an opening run with no closing run is text."""
    runs = [(m.start(), m.end() - m.start()) for m in _BACKTICKS.finditer(source)]
    runs = [(at + 1, n - 1) if at and source[at - 1] == "\\" else (at, n) for at, n in runs]
    by_length: dict[int, list[int]] = {}
    for at, n in runs:
        if n:
            by_length.setdefault(n, []).append(at)
    spans, after = [], 0
    for at, n in runs:
        if not n or at < after:
            continue
        starts = by_length[n]
        k = bisect.bisect_right(starts, at)
        if k < len(starts):
            after = starts[k] + n
            spans.append((at, after))
    return spans


def _scan(source: str) -> list[tuple[int, Link]]:
    """(offset, link) of an inline text too large for markdown-it's inline parser: code spans found by
    `_code_spans`, then wiki links and inline Markdown links outside them (reference links are not read here)."""
    spans = _code_spans(source)
    starts = [a for a, _ in spans]

    def in_code(pos: int) -> bool:
        k = bisect.bisect_right(starts, pos) - 1
        return k >= 0 and pos < spans[k][1]

    def escaped(pos: int) -> bool:
        return pos > 0 and source[pos - 1] == "\\"

    out: list[tuple[int, Link]] = []
    for m in _WIKI.finditer(source):
        if not in_code(m.start()) and not escaped(m.start()):
            link = _wiki(m.group(2), bool(m.group(1)), 0)
            if link is not None:
                out.append((m.start(), link))
    for m in _MDLINK.finditer(source):
        if in_code(m.start()) or escaped(m.start()) or source.startswith("[[", m.start() + len(m.group(1))):
            continue
        link = _markdown(m.group(3).strip("<>"), m.group(2), 0)
        if link is not None:
            out.append(
                (m.start(), Link(0, "embed", link.target, link.heading, link.block, link.alias) if m.group(1) else link)
            )
    return sorted(out, key=lambda found: found[0])


def links_in(body: str, first_line: int = 1) -> tuple[Link, ...]:
    """The links of a note's body (see the module doc); `first_line` is the file's line of the body's first
    line (after the frontmatter)."""
    if "[[" not in body and "](" not in body and "]:" not in body:
        return ()  # no link can be there: skip the parse
    env: dict[str, Any] = {}
    budget = NOTE_INLINE_PARSE_CHARS
    found: list[Link] = []
    for block in _MD.parse(body, env):  # the block structure: code blocks have no inline text at all
        if block.type != "inline" or block.map is None:
            continue
        source = block.content
        if "[" not in source:
            continue
        if len(source) <= min(INLINE_PARSE_CHARS, budget):
            budget -= len(source)
            links = _parsed(source, env)
        else:
            links = _scan(source)
        line, at = first_line + block.map[0], 0
        for pos, link in links:  # in offset order: the lines are counted once
            line += source.count("\n", at, pos)
            at = pos
            found.append(Link(line, link.kind, link.target, link.heading, link.block, link.alias))
    return tuple(found)


def links_of_chunks(chunks: Iterable[tuple[int, int, str]]) -> tuple[Link, ...]:
    """The links of a note from its chunks, (ordinal, start_line, content) in any order: the chunks hold the
    whole body, byte for byte (corpus/markdown.py rule 7), so the body is parsed once, as the note is.
    The same function serves the writer (a parsed note) and the migration that fills the links of an
    existing index from its stored chunks."""
    ordered = sorted(chunks)
    if not ordered:
        return ()
    body = "".join(c[2] for c in ordered)
    first = ordered[0]
    lead = first[2][: len(first[2]) - len(first[2].lstrip())]
    return links_in(body, first[1] - lead.count("\n"))


# --- resolution -------------------------------------------------------------------------------


def _normalise(path: str) -> str | None:
    """A '/' path with '.' and '..' worked out; None when it climbs above the top of the folder."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _best(target: str, source_dir: str, candidates: Sequence[tuple[int, str]]) -> int:
    wanted = _exact(_strip_md(target.rsplit("/", 1)[-1]).strip())

    def rank(c: tuple[int, str]) -> tuple:
        _id, path = c
        folder, _, file = path.rpartition("/")
        return (_exact(_strip_md(file)) != wanted, folder != source_dir, path.count("/"), len(path), path)

    return min(candidates, key=rank)[0]


def resolve(target: str, kind: str, source: str, candidates: Sequence[tuple[int, str, int]]) -> int | None:
    """The id of the note a link names, among `candidates`, or None: (id, path, alias) of the notes with a name
    (`note_names`) equal to the link's `name`, alias 0 when that name is the note's file name, 1 when it is an
    alias or title. `source` is the linking note's path (see the module doc for the rules)."""
    files = [(i, p) for i, p, alias in candidates if not alias]
    source_dir = source.rpartition("/")[0] if source else ""
    want = target.strip().replace("\\", "/")
    rooted = want.startswith("/")
    relative = not rooted and (kind == "markdown" or want.startswith(("./", "../")))
    if "/" not in want and not relative:
        if files:
            return _best(want, source_dir, files)
        aliases = [(i, p) for i, p, alias in candidates if alias]
        if not aliases:
            return None
        # An alias or title: the exact spelling is not the file name's, so rank by folder and path alone.
        return min(aliases, key=lambda c: (c[1].rpartition("/")[0] != source_dir, c[1].count("/"), len(c[1]), c[1]))[0]
    if not files:
        return None
    stems = {fold_name(_strip_md(path)): (i, path) for i, path in files}
    tries = []
    if relative:
        tries.append(_normalise(posixpath.join(source_dir, want)))
    tries.append(_normalise(want))
    for path in tries:
        if path is None:
            continue
        hit = stems.get(fold_name(_strip_md(path)))
        if hit is not None:
            return hit[0]
    if want.startswith(("./", "../")):
        return None  # an explicit relative path names one place: no other note of that name stands in
    tail = "/".join(p for p in want.split("/") if p not in ("", "."))
    suffix = "/" + fold_name(_strip_md(tail))
    ends = [c for stem, c in stems.items() if ("/" + stem).endswith(suffix)]
    return _best(want, source_dir, ends) if ends else None


def resolve_json(target: str, kind: str, source: str | None, candidates: str | None) -> int | None:
    """`resolve` for SQL (`groove_link_target`): the candidates as a JSON array of [id, path]."""
    rows = [(int(i), str(p), int(a or 0)) for i, p, a in json.loads(candidates or "[]")]
    return resolve(target, kind, source or "", rows)


def links_json(links: Sequence[Link]) -> str:
    """The links as the SQL side takes them: a JSON array of [line, kind, target, name, heading, block, alias]."""
    return json.dumps([[*astuple(link)[:3], link.name, *astuple(link)[3:]] for link in links], ensure_ascii=False)
