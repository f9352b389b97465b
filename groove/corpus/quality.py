"""How much a chunk has to say: a score from 0 to 1, from cheap signals of its text (decision 0020).

Search and the graph hide chunks that score under `[quality_filter] threshold` (0.3): a stub
(`# Kubernetes` then `TODO`), a heading with nothing under it, a list of bare links, a line too
short to answer anything, and a template pasted into many notes. The signals read characters,
not words, so they hold for Japanese and English alike:

- **Substance**: the letters and digits a reader gets, after the Markdown around them (heading
  marks, bullets, emphasis, fences, tables, HTML, link targets and bare URLs) is left out. A CJK
  character (Han, kana, Hangul) counts as `CJK_WEIGHT` (2.5) letters: an English sentence has about
  2.5 letters for each character of its Japanese translation.
- **Boilerplate**: placeholders (`TBD`, `TODO`, `WIP`, `FIXME`, `詳細は後述`, `後で書く`, `準備中`, ...)
  carry nothing and are left out before counting, and so is a line that opens with one and a colon
  (`TODO: write this up`): a note to self.
- **Length**: under `LOW` letters of substance scores 0, from `HIGH` on 1, linear between; the
  default threshold falls at 20 letters, 8 CJK characters (a lone short line).
- **Structure only**: a chunk whose body (below its headings) has no substance, or only lines
  that are nothing but links (`- [Set-Acl](Set-Acl.md)`, `[[note]]`, a bare URL), scores at most
  `STRUCTURE_ONLY` (0.2): headings-only sections and link-only lists.
- **Templates**: the same text in many notes (the chunks share their hash) is multiplied by
  `repeat_factor(notes)`: 1 up to `REPEAT_FREE` notes (versions of a page, a quoted paragraph),
  then √2 less for each doubling.

Every signal reads the embedded text alone (`chunking.embed_text`: the content, trimmed), so
a score is a function of the chunk's hash and of how many notes hold it: the writer stores it
with the chunk (`chunks.text_quality` and `chunks.quality`), nothing here changes what is
embedded, and an index built before the score existed gets it from its stored chunks
(the migration calls `text_quality` through the SQL function `groove_text_quality`).
"""

from __future__ import annotations

import math
import re

CJK_WEIGHT = 2.5  # one Han / kana / Hangul character counts as this many letters
LOW = 8.0  # letters of substance at or under which a chunk scores 0
HIGH = 48.0  # ... and from which it scores 1
STRUCTURE_ONLY = 0.2  # the most a headings-only or link-only chunk scores
REPEAT_FREE = 8  # a text in this many notes or fewer is not a template
LINK_TEXT_WEIGHT = 0.5  # the text of a link on a line of nothing but links counts this much

_CJK = re.compile(
    "[\u3005\u3006\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]"
)
_WORD_CHAR = re.compile(r"[^\W_]", re.UNICODE)  # letters and digits of any script

# Placeholders: the words of a note that is not written yet. ASCII ones as whole words, any case.
_BOILERPLATE = re.compile(
    r"(?<![A-Za-z0-9])(?:TBD|TBA|TODO|FIXME|WIP|XXX|N/A|lorem ipsum(?: dolor sit amet)?|coming soon"
    r"|to be (?:written|added|done|determined|continued)|under construction|work in progress|placeholder"
    r"|write (?:this|me) later|fill (?:this|me) in)(?![A-Za-z0-9])"
    r"|詳細は後述|詳しくは後述|後述|後で書く|あとで書く|後で追記|あとで追記|追記予定|記入予定|準備中|作成中|執筆中|工事中"
    r"|書きかけ|未記入|未作成|未定|[(（]略[)）]",
    re.IGNORECASE,
)
# A line that opens with a placeholder and a colon or dash is a note to self, whatever follows ("TODO: write this up").
_PLACEHOLDER_LINE = re.compile(
    r"^\s*(?:[-*+]\s+(?:\[[ xX]\]\s*)?|\d+[.)]\s+)?(?:TBD|TBA|TODO|FIXME|WIP|XXX)\s*[:：\-–—]", re.IGNORECASE
)
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_AUTOLINK = re.compile(r"<(?:https?|ftp|mailto):[^<>\s]*>", re.IGNORECASE)
_URL = re.compile(r"(?:https?|ftp)://[^\s<>()\[\]]+|www\.[^\s<>()\[\]]+", re.IGNORECASE)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)|\[([^\]]*)\]\[[^\]]*\]")
_WIKILINK = re.compile(r"\[\[([^\]|#]*)(?:[#|][^\]]*)?\]\]")
_REF_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_SETEXT = re.compile(r"^\s{0,3}(?:=+|-+)\s*$")
_FENCE = re.compile(r"^\s{0,3}(?:`{3,}|~{3,})")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s*)?")


def substance(text: str) -> float:
    """Letters and digits of `text`, a CJK character counting `CJK_WEIGHT`."""
    letters = _WORD_CHAR.findall(text)
    cjk = sum(1 for ch in letters if _CJK.match(ch))
    return (len(letters) - cjk) + CJK_WEIGHT * cjk


def _plain(line: str) -> str:
    """A line without its link targets, URLs, HTML and placeholders: what a reader reads of it."""
    line = _AUTOLINK.sub(" ", line)
    line = _HTML_TAG.sub(" ", line)
    line = _IMAGE.sub(r" \1 ", line)
    line = _LINK.sub(lambda m: f" {m.group(1) or m.group(2) or ''} ", line)
    line = _WIKILINK.sub(r" \1 ", line)
    line = _URL.sub(" ", line)
    return _BOILERPLATE.sub(" ", line)


def _link_only(line: str) -> bool:
    """A line of nothing but links (a bullet and punctuation around them): `- [a](a.md)`, `[[b]]`, a URL."""
    if not (
        _LINK.search(line)
        or _WIKILINK.search(line)
        or _URL.search(line)
        or _AUTOLINK.search(line)
        or _REF_DEFINITION.match(line)
    ):
        return False
    rest = _AUTOLINK.sub(" ", line)
    rest = _IMAGE.sub(" ", rest)
    rest = _LINK.sub(" ", rest)
    rest = _WIKILINK.sub(" ", rest)
    rest = _URL.sub(" ", rest)
    rest = _REF_DEFINITION.sub(" ", rest)
    return substance(_LIST_MARK.sub(" ", _HTML_TAG.sub(" ", rest))) < 2


def text_quality(content: str) -> float:
    """The score of a chunk's own text, 0..1 (rounded to 3 places): the module's signals but templates."""
    text = _HTML_COMMENT.sub(" ", content.strip())
    lines = text.split("\n")
    heading = body = links = 0.0
    fenced = False
    underlines: set[int] = set()  # setext underlines: the line above them is a heading
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if _FENCE.match(line):
            fenced = not fenced  # the fence line and its info string are markup
            continue
        if fenced:
            body += substance(_BOILERPLATE.sub(" ", line))
        elif i in underlines:
            continue
        elif _HEADING.match(line) or (
            i + 1 < len(lines)
            and _SETEXT.match(lines[i + 1])
            and not _LIST_MARK.match(line)
            and not _FENCE.match(lines[i + 1])
        ):
            if not _HEADING.match(line):
                underlines.add(i + 1)
            heading += substance(_plain(line))
        elif _PLACEHOLDER_LINE.match(line):
            continue
        elif _link_only(line):
            links += substance(_plain(line))
        else:
            body += substance(_plain(line))
    amount = heading + body + LINK_TEXT_WEIGHT * links
    score = min(1.0, max(0.0, (amount - LOW) / (HIGH - LOW)))
    if body == 0:
        score = min(score, STRUCTURE_ONLY)  # headings only, links only, placeholders only
    return round(score, 3)


def repeat_factor(notes: int) -> float:
    """What a text held by `notes` notes keeps of its score: 1 up to REPEAT_FREE notes, then √2 less
    for each doubling (17 notes: 0.5, 65: 0.25). Steps at powers of two, so that the writer rescores
    a template's chunks only when its count crosses one."""
    if notes <= REPEAT_FREE:
        return 1.0
    doublings = math.ceil(math.log2(notes / REPEAT_FREE))
    return round(2.0 ** (-doublings / 2), 4)


def quality(content: str, notes: int = 1) -> float:
    """A chunk's score: its text's, times the template factor of the notes that hold the same text
    (the product as SQLite computes it from the stored `text_quality`, unrounded)."""
    return text_quality(content) * repeat_factor(notes)


__all__ = [
    "CJK_WEIGHT",
    "HIGH",
    "LOW",
    "REPEAT_FREE",
    "STRUCTURE_ONLY",
    "quality",
    "repeat_factor",
    "substance",
    "text_quality",
]
