"""Best-practice documents on request: `[best_practice] path_templates` and the `get_best_practice` tool.

A template such as `best-practices/{target}/PRACTICES.md` says where the document for a target (a
language, a framework, a tool: `python`, `react`) is. The tool returns that document, or only one
of its `##` sections, and otherwise an error naming the targets that have a document.

Where a document may be, decided once here:

- A relative template is relative to the notes folder, and the file it leads to must stay inside
  the notes folder: `..` in a template is refused when the settings load, and a symlink that leads
  out is refused when the document is read.
- An absolute template (or one starting with `~`) is explicit configuration: its documents may be
  outside the notes folder, but never outside the template's fixed folder (the part before the
  first `{target}`).
- A target is one name, never a path: letters (any script), digits, `.`, `_`, `+`, `-`, not
  starting with `.`; `/`, `\\`, `..` and control characters are refused with a message.

Not configured (no templates): the service has no `BestPractices`, and the tool is not listed.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from groove.config import ConfigError, Settings, read_config_text
from groove.errors import GrooveError, NotFoundError, UsageError
from groove.folders import Folders

MAX_TARGET_CHARS = 100
MAX_SECTION_CHARS = 200
MAX_DOCUMENT_BYTES = 1_000_000
MAX_TARGETS_NAMED = 50  # an error names at most this many targets (and says how many more there are)

TARGET = re.compile(r"\w[\w.+-]*")  # \w is Unicode: 日本語 and é are letters
PLACEHOLDER = "{target}"

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class BestPracticeAnswer(BaseModel):
    """The document for a target, or one `##` section of it."""

    model_config = ConfigDict(extra="ignore")

    target: str = Field(description="the target asked for")
    path: str = Field(description="the document's path (absolute outside the notes folder)")
    section: str | None = Field(description="the ## heading returned; null: the whole document")
    sections: list[str] = Field(description="every ## heading of the document, in order")
    size: int = Field(description="bytes of content")
    content: str = Field(description="the document (Markdown), or the section up to the next ## or # heading")


def best_practice_text(answer: BestPracticeAnswer) -> str:
    """The tool's text content: a header (for a whole document, a second line naming its sections), then the
    Markdown."""
    what = f'section "{answer.section}" of ' if answer.section is not None else ""
    header = f"{what}{answer.path} · best practice for {answer.target} · {answer.size} bytes"
    if answer.section is None and answer.sections:
        header += f"\nsections: {' | '.join(answer.sections)}"
    return header + "\n---\n" + answer.content


@dataclass(frozen=True)
class Template:
    """One configured template, split where the fixed folder ends."""

    text: str  # as configured
    root: Path  # the fixed folder before the first {target}: the document stays inside it
    rest: tuple[str, ...]  # the path parts from `root` on, at least one with {target}
    in_notes: bool  # relative to the notes folder (the document must stay inside it too)
    kb: Path  # the notes folder it is relative to
    prefix: str = ""  # that folder's name and '/' when there are several (how its notes' paths start)

    @classmethod
    def parse(cls, text: str, folders: Folders) -> Template:
        """A relative template is read in the notes folder; with several, in the folder its first part names
        (`work/practices/{target}.md`), else the first folder."""
        expanded = os.path.expanduser(text) if text.startswith("~") else text
        absolute = os.path.isabs(expanded)
        parts = [p for p in expanded.split("/") if p not in ("", ".")]
        folder = folders.first
        if not absolute and folders.named and parts and PLACEHOLDER not in parts[0]:
            named = folders.locate(parts[0])
            if named is not None:
                folder, parts = named[0], parts[1:]
        first = next(i for i, p in enumerate(parts) if PLACEHOLDER in p)
        base = Path("/") if absolute else folder.path
        return cls(
            text,
            base.joinpath(*parts[:first]),
            tuple(parts[first:]),
            not absolute,
            folder.path,
            folders.prefix(folder) if not absolute else "",
        )

    def path_for(self, target: str) -> Path:
        return self.root.joinpath(*(p.replace(PLACEHOLDER, target) for p in self.rest))

    def shown(self, target: str) -> str:
        path = self.path_for(target)
        return self.prefix + path.relative_to(self.kb).as_posix() if self.in_notes else str(path)

    def allows(self, path: Path) -> bool:
        """Whether a document, symbolic links followed, stays inside the template's folder (and the notes folder)."""
        real = path.resolve()
        return real.is_relative_to(self.root.resolve()) and (
            not self.in_notes or real.is_relative_to(self.kb.resolve())
        )

    def targets(self) -> set[str]:
        """The targets whose document exists (files inside the folders allowed)."""
        pattern = "/".join(glob.escape(p).replace(glob.escape(PLACEHOLDER), "*") for p in self.rest)
        regex = _target_regex(self.rest)
        found: set[str] = set()
        if not self.root.is_dir():
            return found
        for path in self.root.glob(pattern):
            m = regex.fullmatch(path.relative_to(self.root).as_posix())
            if m and TARGET.fullmatch(m.group("t")) and path.is_file() and self.allows(path):
                found.add(m.group("t"))
        return found


def _target_regex(rest: tuple[str, ...]) -> re.Pattern[str]:
    """The template's path from its root as a regex: the first {target} captures the name, later ones repeat it."""
    pieces = "/".join(rest).split(PLACEHOLDER)
    out = re.escape(pieces[0])
    for i, piece in enumerate(pieces[1:]):
        out += ("(?P<t>[^/]+)" if i == 0 else "(?P=t)") + re.escape(piece)
    return re.compile(out)


def _norm(heading: str) -> str:
    text = heading.strip()
    text = re.sub(r"^#+[ \t]*", "", text)
    return " ".join(text.split()).casefold()


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line index, level, heading text) of each ATX heading outside fenced code."""
    found = []
    fence: str | None = None
    for i, line in enumerate(text.splitlines()):
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip()[len(marker) :].strip():
                fence = None
            continue
        if fence is not None:
            continue
        h = _HEADING.match(line)
        if h:
            title = _CLOSING_HASHES.sub("", h.group(2) or "").strip()
            found.append((i, len(h.group(1)), title))
    return found


def section_of(text: str, wanted: str) -> tuple[str, str] | None:
    """(heading as written, the section from its line to the next heading of level 1 or 2), or None."""
    lines = text.splitlines(keepends=True)
    marks = headings(text)
    for n, (line, level, title) in enumerate(marks):
        if level == 2 and _norm(title) == _norm(wanted):
            end = next((ln for ln, lv, _ in marks[n + 1 :] if lv <= 2), len(lines))
            return title, "".join(lines[line:end]).rstrip("\n") + "\n"
    return None


class BestPractices:
    """The configured templates over the notes folders."""

    def __init__(self, templates: list[str], folders: Folders | Path):
        if isinstance(folders, Path):
            folders = Folders.one(folders)
        self.templates = [Template.parse(t, folders) for t in templates]

    @classmethod
    def from_settings(cls, settings: Settings, folders: Folders | None = None) -> BestPractices | None:
        """None when `[best_practice] path_templates` is empty: the tool is then not offered at all."""
        templates = settings.best_practice.path_templates
        if not templates:
            return None
        return cls(templates, folders if folders is not None else settings.folders())

    def targets(self) -> list[str]:
        found: set[str] = set()
        for template in self.templates:
            found |= template.targets()
        return sorted(found, key=lambda t: (t.casefold(), t))

    def _named(self) -> str:
        targets = self.targets()
        if not targets:
            shown = ", ".join(f'"{t.text}"' for t in self.templates)
            return f"no target has a document yet (path_templates: {shown})"
        more = len(targets) - MAX_TARGETS_NAMED
        return (
            "targets with a document: "
            + ", ".join(targets[:MAX_TARGETS_NAMED])
            + (f" and {more} more" if more > 0 else "")
        )

    def check_target(self, target: str) -> str:
        name = target.strip()
        if not name:
            raise UsageError(f"target is empty: name one, such as python; {self._named()}")
        if len(name) > MAX_TARGET_CHARS:
            raise UsageError(f"target is longer than {MAX_TARGET_CHARS} characters; {self._named()}")
        if not TARGET.fullmatch(name) or name.startswith("."):
            raise UsageError(
                f"target {target!r} is not a target name: one name such as python or react-native (letters, digits, "
                f"'.', '_', '+', '-'; no '/', '\\' or '..'); {self._named()}"
            )
        return name

    def find(self, target: str) -> tuple[str, Template, Path]:
        """The target's name, the first template whose document for it exists, and the document (resolved)."""
        name = self.check_target(target)
        for template in self.templates:
            path = template.path_for(name)
            if not path.is_file():
                continue
            if not template.allows(path):
                where = "the notes folder" if template.in_notes else f"{template.root}"
                raise UsageError(
                    f"the best-practice document {template.shown(name)} leads outside {where} "
                    f"(a symbolic link?), so groove does not read it; {self._named()}"
                )
            return name, template, path.resolve()
        looked = ", ".join(t.shown(name) for t in self.templates)
        raise NotFoundError(f"no best-practice document for target {name!r} (looked for {looked}); {self._named()}")

    def answer(self, target: str, section: str | None = None) -> BestPracticeAnswer:
        name, template, path = self.find(target)
        shown = template.shown(name)
        try:
            text = read_config_text(path, what="best-practice document", max_bytes=MAX_DOCUMENT_BYTES)
        except FileNotFoundError:
            raise NotFoundError(f"the best-practice document {shown} was just removed; {self._named()}") from None
        except ConfigError as exc:
            raise GrooveError(str(exc)) from None
        sections = [title for _, level, title in headings(text) if level == 2]
        chosen: str | None = None
        if section is not None:
            if not section.strip().lstrip("#").strip():
                raise UsageError(
                    "section is empty: give one of the document's ## headings, or leave section out "
                    f"for the whole document (its ## sections: {' | '.join(sections) or 'none'})"
                )
            found = section_of(text, section)
            if found is None:
                have = (
                    f"its ## sections: {' | '.join(sections)}"
                    if sections
                    else "it has no ## sections; leave section out for the whole document"
                )
                raise NotFoundError(f"no section {section.strip()!r} in {shown}; {have}")
            chosen, text = found
        return BestPracticeAnswer(
            target=name, path=shown, section=chosen, sections=sections, size=len(text.encode("utf-8")), content=text
        )


__all__ = ["BestPracticeAnswer", "BestPractices", "MAX_SECTION_CHARS", "MAX_TARGET_CHARS", "best_practice_text"]
