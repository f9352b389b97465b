"""Finding the notes: walk the folder, apply ignore rules, read files safely.

Skips `.git`, `.obsidian` and the configured `exclude_dirs`; honours a
`.grooveignore` at the top of the folder (gitignore syntax, via pathspec);
never follows a symlink out of the folder (symlinked folders are not
followed at all, which also rules out loops). Files too large, binary or
unreadable are reported as skipped with a reason, never silently dropped.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import pathspec

from groove.errors import GrooveError
from groove.config import ConfigError, read_config_text
from groove.logs import get_logger

log = get_logger("groove.scan")

ALWAYS_SKIPPED_DIRS = frozenset({".git", ".obsidian", ".trash", ".hg", ".svn", "node_modules", ".venv"})
IGNORE_FILE = ".grooveignore"


@dataclass(frozen=True)
class FileInfo:
    rel: str          # '/'-separated path relative to the notes folder
    path: Path        # absolute path
    size: int
    mtime_ns: int


@dataclass
class ScanResult:
    files: dict[str, FileInfo] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)   # rel -> reason


class Ignore:
    """The ignore rules of one notes folder."""

    def __init__(self, root: Path, exclude_dirs: Iterable[str] = (), extensions: Iterable[str] = (".md", ".markdown"),
                 size_limits: Mapping[str, tuple[int, str]] | None = None):
        self.root = root
        self.exclude_dirs = ALWAYS_SKIPPED_DIRS | set(exclude_dirs)
        self.extensions = tuple(e.lower() for e in extensions)
        # extension -> (bytes, setting name): file types with a limit of their own (documents, corpus/parsers)
        self.size_limits = {e.lower(): v for e, v in (size_limits or {}).items()}
        self.spec = self._load_spec()

    def _load_spec(self) -> pathspec.PathSpec | None:
        """The folder's .grooveignore rules; ConfigError when it is there but cannot be used
        (a FIFO, a folder, too large, unreadable): silently ignoring it would index what it excludes."""
        ignore = self.root / IGNORE_FILE
        try:
            text = read_config_text(ignore, what="ignore file", errors="replace")
        except FileNotFoundError:
            return None
        return pathspec.PathSpec.from_lines("gitignore", text.splitlines())

    def reload(self) -> None:
        """Re-read .grooveignore after it changed; a file that cannot be used keeps the rules in force."""
        try:
            self.spec = self._load_spec()
        except ConfigError as exc:
            log.warning("ignore_file_unusable", error=str(exc), kept="the previous rules")

    def dir_ignored(self, rel_dir: str) -> bool:
        name = rel_dir.rsplit("/", 1)[-1]
        if name in self.exclude_dirs or rel_dir in self.exclude_dirs:
            return True
        return bool(self.spec and self.spec.match_file(rel_dir + "/"))

    def size_limit(self, rel: str, default: int) -> tuple[int, str]:
        """(bytes, setting name) for this file: its type's own limit, else `default` (max_file_bytes)."""
        low = rel.lower()
        for ext, limit in sorted(self.size_limits.items(), key=lambda i: -len(i[0])):
            if low.endswith(ext):
                return limit
        return default, "max_file_bytes"

    def file_wanted(self, rel: str) -> bool:
        if not rel.lower().endswith(self.extensions):
            return False
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if self.dir_ignored("/".join(parts[:i])):
                return False
        return not (self.spec and self.spec.match_file(rel))


def scan(root: Path, ignore: Ignore, max_file_bytes: int, subdir: str = "") -> ScanResult:
    """Every wanted note under `root` (or only under `root/subdir`); `root` is resolved (Settings.require_kb)."""
    result = ScanResult()
    start = root / subdir if subdir else root
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False, onerror=None):
        base = Path(dirpath)
        rel_base = base.relative_to(root).as_posix()
        rel_base = "" if rel_base == "." else rel_base
        keep = []
        for d in sorted(dirnames):
            rel_d = f"{rel_base}/{d}" if rel_base else d
            if not ignore.dir_ignored(rel_d):
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = f"{rel_base}/{name}" if rel_base else name
            if not ignore.file_wanted(rel):
                continue
            info, reason = stat_note(root, rel, *ignore.size_limit(rel, max_file_bytes))
            if info is not None:
                result.files[rel] = info
            elif reason:
                result.skipped[rel] = reason
    return result


def stat_note(root: Path, rel: str, max_file_bytes: int, setting: str = "max_file_bytes") -> tuple[FileInfo | None, str | None]:
    """Stat one candidate note. Returns (info, None), (None, reason) or (None, None) if gone."""
    path = root / rel
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            target = path.resolve()
            try:
                target.relative_to(root)
            except ValueError:
                return None, "symlink pointing outside the notes folder"
            st = target.stat()
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot stat: {exc.strerror}"
    if st.st_size > max_file_bytes:
        return None, f"too large ({st.st_size} bytes > {setting} {max_file_bytes})"
    return FileInfo(rel=rel, path=path, size=st.st_size, mtime_ns=st.st_mtime_ns), None


class NoteReadError(GrooveError):
    """A note that cannot be indexed; the message is the skip reason."""


def read_note(info: FileInfo, max_file_bytes: int) -> tuple[str, str]:
    """Read and decode one note. Returns (text, sha256 of the bytes)."""
    try:
        with open(info.path, "rb") as fh:
            data = fh.read(max_file_bytes + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise NoteReadError(f"unreadable: {exc.strerror}") from exc
    if len(data) > max_file_bytes:
        raise NoteReadError(f"too large (> max_file_bytes {max_file_bytes})")
    if b"\x00" in data[:8192]:
        raise NoteReadError("binary file (NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NoteReadError(f"not UTF-8 text (invalid byte at offset {exc.start})") from exc
    return text, hashlib.sha256(data).hexdigest()
