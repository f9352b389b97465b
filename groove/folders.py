"""The notes folders one groove serves, and the one tree of note paths they make (`Folders`).

One folder: a note's path is its path in that folder (`tea.md`), as it always was. Several folders
(`--kb` repeated, `kb_path` a list): each folder has a name, given (`work = ~/work`) or its base name,
and its notes are answered under it (`work/tea.md`), so path globs, `list_documents`' `folder`, links
and resources work across folders unchanged. Everything below this module works on those outer
paths; only scanning, reading and watching a folder on disk use the folder's own (inner) path.

A folder is written `PATH` or `NAME = PATH` (on the command line `NAME=PATH`). The part before the
first `=` is a name only when it is one: letters (any script), digits, `-`, `_` and `.`, not starting
with `.`; a path with `=` in it is written with a `/` before it (`./a=b`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from groove.errors import ConfigError, UsageError

NAME = re.compile(r"^[^\W][\w.-]{0,63}$")  # \w is Unicode: 仕事 is a name


@dataclass(frozen=True)
class NotesFolder:
    """One notes folder: its name (the first part of its notes' paths when there are several) and where it is."""

    name: str
    path: Path  # resolved: the real folder (a symlink given is followed; `given` keeps the link)
    #: The path as the user gave it (absolute, not resolved) when a symlink on it makes it differ from `path`:
    #: the watcher follows it again every second, so a link re-pointed while serving is a replaced folder.
    given: Path | None = field(default=None, compare=False)
    #: Set while `path` is the same real folder as another served folder's (a link re-pointed at it): its notes
    #: are that folder's, so this one indexes nothing until the link points elsewhere (the other's name).
    duplicate_of: str | None = field(default=None, compare=False)

    @property
    def link(self) -> Path:
        """The path to follow to find the folder now: as given (a symlink is followed anew), else `path`."""
        return self.given if self.given is not None else self.path

    def spec(self) -> str:
        return f"{self.name} = {self.path}"


def folder_name(text: str) -> str | None:
    """`text` as a folder name, or None when it cannot be one."""
    text = text.strip()
    return text if NAME.match(text) and text not in (".", "..") else None


def split_spec(spec: str) -> tuple[str | None, str]:
    """`NAME = PATH` -> (NAME, PATH); a bare `PATH` -> (None, PATH). Only a valid name counts as one."""
    left, sep, right = spec.partition("=")
    if sep and right.strip() and folder_name(left) is not None:
        return left.strip(), right.strip()
    return None, spec.strip()


def anchored_spec(item: object, base: Path) -> object:
    """A folder spec from a config file with a relative path made absolute against the file's folder
    (the name, if any, kept); anything else as it is (parse_folders reports it)."""

    def anchor(raw: str) -> str:
        p = Path(raw).expanduser()
        return str(p if p.is_absolute() else base / p)

    if isinstance(item, str) and item.strip():
        name, raw = split_spec(item)
        return f"{name} = {anchor(raw)}" if name is not None else anchor(raw)
    if isinstance(item, dict) and isinstance(item.get("path"), str) and item["path"].strip():
        return {**item, "path": anchor(item["path"])}
    return item


def parse_folders(items: Iterable[object], *, base: Path | None = None) -> tuple[NotesFolder, ...]:
    """Folder specs (strings `PATH` / `NAME = PATH`, {"name", "path"} tables, NotesFolder) -> the folders,
    resolved (relative paths against `base`, else the current folder). Refuses with a message: an empty
    path, a bad name, two folders with one name or one path, a folder inside another."""
    out: list[NotesFolder] = []
    for item in items:
        name: str | None
        if isinstance(item, NotesFolder):
            name, raw = item.name, str(item.path)
        elif isinstance(item, dict):
            # name and path as a config file writes them; `given` and `duplicate_of` as a NotesFolder dumps itself
            # (settings passed on as data): the link as given is read again, the runtime state is not kept.
            unknown = set(item) - {"name", "path", "given", "duplicate_of"}
            if unknown or "path" not in item:
                raise ConfigError(
                    f'a notes folder is written {{name = "work", path = "~/work"}} or "work = ~/work"; got {item!r}'
                )
            name, raw = item.get("name"), str(item.get("given") or item["path"])
            if name is not None and folder_name(str(name)) is None:
                raise ConfigError(
                    f"{name!r} cannot name a notes folder: use letters, digits, '-', '_' or '.' "
                    "(up to 64, not starting with '.')"
                )
        elif isinstance(item, (str, os.PathLike)):
            name, raw = split_spec(os.fspath(item))
        else:
            raise ConfigError(f'a notes folder is a path or "name = path"; got {item!r}')
        if not raw.strip():
            raise ConfigError("a notes folder's path is empty" + (f" (the folder named {name})" if name else ""))
        path = Path(raw).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        given = path.name  # the name as written (a symlink keeps its own name), unless it is "." or ".."
        as_given = Path(os.path.abspath(path))
        path = path.resolve()
        if name is None:
            written = given if given not in ("", ".", "..") else path.name
            name = folder_name(written) or _safe_name(written)
        out.append(NotesFolder(str(name), path, given=as_given if as_given != path else None))
    _check(out)
    return tuple(out)


def _safe_name(base: str) -> str:
    """A name made from a base name that is not one (spaces, a leading dot): other characters become '-'."""
    cleaned = re.sub(r"[^\w.-]+", "-", base).strip("-.") or "notes"
    return cleaned[:64]


def _check(folders: list[NotesFolder]) -> None:
    seen: dict[str, NotesFolder] = {}
    for f in folders:
        other = seen.get(f.name.casefold())
        if other is not None:
            if other.path == f.path:
                raise ConfigError(f"the notes folder {f.path} is given twice")
            raise ConfigError(
                f"two notes folders are named {f.name!r} ({other.path} and {f.path}): notes are answered under "
                f"their folder's name, so each needs its own; name one, e.g. --kb {f.name}2={f.path} or "
                f'"{f.name}2 = {f.path}" in kb_path'
            )
        seen[f.name.casefold()] = f
    for a in folders:
        for b in folders:
            if a is not b and a.path != b.path and a.path.is_relative_to(b.path):
                raise ConfigError(
                    f"the notes folder {a.path} is inside the notes folder {b.path}: its notes would be "
                    "indexed twice; give only the outer one, or move one out"
                )
            if a is not b and a.path == b.path:
                raise ConfigError(
                    f"the notes folder {a.path} is given twice (as {a.name!r}{_via(a)} and {b.name!r}{_via(b)}): "
                    "its notes would be indexed twice; give it once"
                )


def _via(folder: NotesFolder) -> str:
    return f", via the link {folder.given}" if folder.given is not None else ""


def same_folder(folders: Iterable[NotesFolder], folder: NotesFolder, path: Path) -> NotesFolder | None:
    """Another of `folders` that `path` (a folder's new real path) is, is inside, or holds: its notes would be
    indexed twice."""
    for other in folders:
        if other.name != folder.name and other.duplicate_of is None:
            if path == other.path or path.is_relative_to(other.path) or other.path.is_relative_to(path):
                return other
    return None


class Folders:
    """The folders as one tree of note paths: outer path (what the index stores) <-> folder + inner path."""

    def __init__(self, folders: Iterable[NotesFolder], *, named: bool | None = None):
        self.items = tuple(folders)
        if not self.items:
            raise ConfigError("no notes folder configured")
        # One folder: no name in front of its notes' paths, unless `named` (a store several machines share,
        # where each folder's notes must keep to their own part of the tree).
        self.named = len(self.items) > 1 if named is None else named

    def shared(self) -> Folders:
        """The same folders, each note's path led by its folder's name even when there is one folder."""
        return Folders(self.items, named=True)

    @classmethod
    def one(cls, path: Path) -> Folders:
        """One notes folder (named by its base name)."""
        return cls([NotesFolder(path.name, path)])

    def repoint(self, name: str, path: Path, *, duplicate_of: str | None = None) -> NotesFolder:
        """The folder named `name` now at `path` (its link was re-pointed while serving); the Index and its
        Indexer share this object, so both read the new folder from now on."""
        items = list(self.items)
        for i, f in enumerate(items):
            if f.name == name:
                items[i] = replace(f, path=path, duplicate_of=duplicate_of)
                self.items = tuple(items)
                return items[i]
        raise KeyError(name)

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def first(self) -> NotesFolder:
        return self.items[0]

    def prefix(self, folder: NotesFolder) -> str:
        return f"{folder.name}/" if self.named else ""

    def outer(self, folder: NotesFolder, inner: str) -> str:
        """A path inside `folder` as the index knows it ('' = the folder itself)."""
        if not self.named:
            return inner
        return f"{folder.name}/{inner}" if inner else folder.name

    def locate(self, outer: str) -> tuple[NotesFolder, str] | None:
        """Which folder an index path is in, and its path inside it; None when no folder holds it."""
        if not self.named:
            return self.items[0], outer
        head, _, rest = outer.partition("/")
        for f in self.items:
            if f.name == head:
                return f, rest
        return None

    def relative(self, given: str) -> str:
        """A note as a person named it (an index path, or a file path inside one of the folders) -> its index path."""
        candidate = Path(given).expanduser()
        if candidate.is_absolute() or candidate.exists():
            real = candidate.resolve()
            for f in self.items:
                if real.is_relative_to(f.path):
                    return self.outer(f, real.relative_to(f.path).as_posix())
            if candidate.is_absolute() or not self.named:  # (several folders: `work/plan.md` may be both)
                raise UsageError(
                    f"{given} is not inside the notes folder"
                    + (f" {self.first.path}" if not self.named else "s " + ", ".join(str(f.path) for f in self.items))
                )
        return given

    def kb_flags(self) -> list[str]:
        """The `--kb` values that give `groove serve` these folders: the path, or `name=path` each of several."""
        return [f"{f.name}={f.path}" if self.named else str(f.path) for f in self.items]

    def describe(self) -> str:
        """One line: the folder's path, or `name = path` for each of several."""
        if not self.named:
            return str(self.first.path)
        return "; ".join(f.spec() for f in self.items)


__all__ = ["Folders", "NotesFolder", "anchored_spec", "folder_name", "parse_folders", "same_folder", "split_spec"]
