"""Finding the notes: walk the folder, apply ignore rules, read files safely.

Skips `.git`, `.obsidian` and the configured `exclude_dirs`; honours a
`.grooveignore` at the top of the folder (gitignore syntax, matched by
corpus/globs.py in time linear in the path and the line; a line it refuses, such
as one with more than 16 `*`, is logged with its line number and ignores
nothing, and the other lines still apply); and, when the folder is a git
repository (it has a `.git`) and `[index] gitignore` is on (the default), its
`.gitignore` files as git reads them: each applies to its own folder and the
folders under it, a deeper file's lines before a higher one's, the last line
that matches in a file decides, `!` re-includes (but nothing under an ignored
folder), `.git/info/exclude` below them all; the same matcher and bounds;
never follows a symlink out of the folder (symlinked folders are not
followed at all, which also rules out loops; each is reported in
``ScanResult.linked_dirs``, shown by ``status`` and ``doctor``). Nothing that cannot be indexed
is dropped silently: every such file is reported as skipped with a reason:

- a file name that is not valid UTF-8, or holds a control character such as a
  newline (reported under a printable name, ``bad\\xff.md``: rename the file);
- a symlink loop, a dangling symlink, a symlink out of the folder;
- anything that is not a regular file (a FIFO, a device, a folder named ``x.md``);
- a file larger than ``max_file_bytes``, binary bytes, text that is not UTF-8
  (UTF-16 and UTF-32 with a byte-order mark are decoded), a file that cannot be opened.
  Only real control characters make a name unusable: a no-break space or an
  emoji joined by a zero-width joiner is a name like any other.

A folder that cannot be listed is reported in ``ScanResult.unreadable_dirs``:
the indexer keeps the notes it already has under it, with a warning, until
the folder is readable again or gone.

A note is opened without blocking and checked on the open descriptor
(``fstat``: regular file, size), so a FIFO or a device swapped in after the
scan can never hang the reader.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import stat
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from groove.config import ConfigError, read_config_text
from groove.corpus.globs import GlobSet, parse_lines, shown
from groove.errors import GrooveError
from groove.folders import Folders, NotesFolder
from groove.logs import get_logger

log = get_logger("groove.scan")

ALWAYS_SKIPPED_DIRS = frozenset({".git", ".obsidian", ".trash", ".hg", ".svn", "node_modules", ".venv"})
IGNORE_FILE = ".grooveignore"
GITIGNORE_FILE = ".gitignore"

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)

#: How notes are opened (``os.open``); tests replace it to inject faults such as EACCES.
open_fd: Callable[[str | os.PathLike, int], int] = os.open


@dataclass(frozen=True)
class FileInfo:
    rel: str  # '/'-separated path relative to the notes folder
    path: Path  # absolute path
    size: int
    mtime_ns: int


@dataclass
class ScanResult:
    files: dict[str, FileInfo] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # rel -> reason
    unreadable_dirs: dict[str, str] = field(default_factory=dict)  # rel folder ('' = the top) -> reason
    linked_dirs: dict[str, str] = field(
        default_factory=dict
    )  # "rel/" of a symlinked folder -> what it is (not followed)


LINKED_DIR = "symlinked folder"  # how a symlinked folder's entry (in `skipped`) starts


def linked_dir_reason(path: Path) -> str:
    """What a symlinked folder is and why nothing under it is indexed (an info line, by design)."""
    try:
        target = printable(os.readlink(path))
    except OSError:
        target = "?"
    return (
        f"{LINKED_DIR} (to {target}): not followed, by design (no loops, nothing outside the folder); "
        "move the folder in, or serve it as a notes folder of its own (--kb NAME=PATH)"
    )


def linked_dir(root: Path, rel: str) -> bool:
    """Whether `rel` is a symlink to a folder (followed to see, never walked)."""
    path = root / rel
    return path.is_symlink() and path.is_dir()


# Control characters (C0, DEL, C1) and the line and paragraph separators: what breaks a line of a log,
# a listing or a terminal. Other characters Python calls unprintable are ordinary in names: a no-break
# space, the zero-width joiner of an emoji sequence (👩‍💻), a variation selector.
_CONTROL_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) in _CONTROL_CATEGORIES


def printable(name: str) -> str:
    """A file name as text that can be stored and shown: undecodable bytes as \\xNN, control characters escaped."""
    raw = os.fsencode(name)
    text = raw.decode("utf-8", "backslashreplace")
    return "".join(ch.encode("unicode_escape").decode("ascii") if _is_control(ch) else ch for ch in text)


def name_problem(name: str) -> str | None:
    """Why a file name cannot be indexed as it is, or None if it can."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "file name is not valid UTF-8; rename the file to index it"
    if any(_is_control(ch) for ch in name):
        return "file name contains a control character (such as a newline); rename the file to index it"
    return None


class Ignore:
    """The ignore rules of one notes folder."""

    def __init__(
        self,
        root: Path,
        exclude_dirs: Iterable[str] = (),
        extensions: Iterable[str] = (".md", ".markdown"),
        size_limits: Mapping[str, tuple[int, str]] | None = None,
        *,
        gitignore: bool = True,
    ):
        self.root = root
        #: `[index] gitignore`: read the folder's .gitignore files when it is a git repository (see `git`).
        self.gitignore = gitignore
        self._git_rules: dict[str, GlobSet | None] = {}  # folder ('' = the top) -> its .gitignore rules, read once
        self._git_refused: dict[str, list[str]] = {}
        self._dirs: dict[str, bool] = {}  # folder -> dir_ignored, until `reload` (every note of a folder asks)
        self.git = self._is_repository()
        self.exclude_dirs = ALWAYS_SKIPPED_DIRS | set(exclude_dirs)
        self.extensions = tuple(e.lower() for e in extensions)
        # extension -> (bytes, setting name): file types with a limit of their own (documents, corpus/parsers)
        self.size_limits = {e.lower(): v for e, v in (size_limits or {}).items()}
        #: The .grooveignore lines refused, as "line N: 'pattern' (why)"; they ignore nothing.
        self.refused: list[str] = []
        self.spec = self._load_spec()

    def _load_spec(self) -> GlobSet | None:
        """The folder's .grooveignore rules; ConfigError when it is there but cannot be used
        (a FIFO, a folder, too large, unreadable): silently ignoring it would index what it excludes.

        A line that is refused (refused_lines) ignores nothing; the others apply. It is logged
        when it first appears, not at every reload."""
        ignore = self.root / IGNORE_FILE
        try:
            text = read_config_text(ignore, what="ignore file", errors="replace")
        except FileNotFoundError:
            self.refused = []
            return None
        spec, refused = refused_lines(text)
        for line in refused:
            if line not in self.refused:
                log.warning(
                    "ignore_line_refused",
                    file=str(ignore),
                    line=line,
                    effect="this line ignores nothing; the other lines apply",
                )
        self.refused = refused
        return spec

    def reload(self) -> None:
        """Re-read .grooveignore after it changed (a file that cannot be used keeps the rules in force), and the
        .gitignore files as they are next needed."""
        try:
            self.spec = self._load_spec()
        except ConfigError as exc:
            log.warning("ignore_file_unusable", error=str(exc), kept="the previous rules")
        self._git_rules = {}
        self._dirs = {}
        self.git = self._is_repository()

    def _is_repository(self) -> bool:
        """Whether .gitignore files apply: `[index] gitignore` is on and the folder is a git repository (a `.git`
        folder, or the `.git` file of a worktree or submodule). Checked at each reload (each full reconcile)."""
        return self.gitignore and os.path.lexists(self.root / ".git")

    def _git_rules_of(self, folder: str) -> GlobSet | None:
        """The rules of `folder`'s .gitignore (for the top, `.git/info/exclude` first: git ranks it below), read
        once until `reload`. A file that cannot be used (a FIFO, too large) ignores nothing and is logged."""
        if folder in self._git_rules:
            return self._git_rules[folder]
        globs: list = []
        refused_all: list[str] = []
        for rel in ([".git/info/exclude"] if not folder else []) + [
            f"{folder}/{GITIGNORE_FILE}" if folder else GITIGNORE_FILE
        ]:
            try:
                text = read_config_text(self.root / rel, what="gitignore file", errors="replace")
            except (FileNotFoundError, NotADirectoryError):
                continue
            except ConfigError as exc:
                log.warning("gitignore_unusable", file=rel, error=str(exc), effect="its lines ignore nothing")
                continue
            spec, refused = refused_lines(text)
            globs += spec.globs  # in git's order: .git/info/exclude first, so the folder's .gitignore wins
            for line in refused:
                if f"{rel}: {line}" not in self._git_refused.get(folder, []):
                    log.warning(
                        "ignore_line_refused",
                        file=str(self.root / rel),
                        line=line,
                        effect="this line ignores nothing; the other lines apply",
                    )
            refused_all += [f"{rel}: {line}" for line in refused]
        self._git_refused[folder] = refused_all
        spec = GlobSet(globs)
        self._git_rules[folder] = spec if spec else None
        return self._git_rules[folder]

    def git_ignored(self, rel: str) -> bool:
        """Whether the .gitignore files ignore `rel` (a folder passed as "name/"): the deepest file with a line
        that matches decides, as git reads them. Only the path itself: its folders are `dir_ignored`'s."""
        if not self.git:
            return False
        parts = rel.rstrip("/").split("/")
        for depth in range(len(parts) - 1, -1, -1):
            folder = "/".join(parts[:depth])
            rules = self._git_rules_of(folder)
            if rules is None:
                continue
            decided = rules.decide(rel[len(folder) + 1 :] if folder else rel)
            if decided is not None:
                return decided
        return False

    def dir_ignored(self, rel_dir: str) -> bool:
        known = self._dirs.get(rel_dir)
        if known is not None:
            return known
        name = rel_dir.rsplit("/", 1)[-1]
        ignored = (
            name in self.exclude_dirs
            or rel_dir in self.exclude_dirs
            or bool(self.spec and self.spec.match(rel_dir + "/"))
            or self.git_ignored(rel_dir + "/")
        )
        if len(self._dirs) < 100_000:
            self._dirs[rel_dir] = ignored
        return ignored

    def path_ignored(self, rel: str) -> bool:
        """Whether a changed path (a note, a folder, anything) lies where the rules ignore it: under an ignored
        folder, or a note the rules leave out (the watcher drops such events)."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if self.dir_ignored("/".join(parts[:i])):
                return True
        if parts[-1] in (IGNORE_FILE, GITIGNORE_FILE):
            return False
        if rel.lower().endswith(self.extensions):
            return not self.file_wanted(rel)
        return (self.root / rel).is_dir() and self.dir_ignored(rel)

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
        if self.spec and self.spec.match(rel):
            return False
        return not self.git_ignored(rel)


def refused_lines(text: str) -> tuple[GlobSet, list[str]]:
    """The rules of an ignore file's text, and its refused lines as "line N: 'pattern' (why)"."""
    spec, refused = parse_lines(text.splitlines())
    return spec, [f"line {no}: {shown(line.strip())} ({why})" for no, line, why in refused]


def scan(root: Path, ignore: Ignore, max_file_bytes: int, subdir: str = "") -> ScanResult:
    """Every wanted note under `root` (or only under `root/subdir`); `root` is resolved (Settings.require_kb).

    Never raises for what it finds: names, links and folders it cannot use are
    reported in the result (see the module doc).
    """
    result = ScanResult()
    stack = [subdir]
    while stack:
        rel_base = stack.pop()
        base = root / rel_base if rel_base else root
        try:
            with os.scandir(base) as it:
                entries = sorted(it, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            if not rel_base:  # the notes folder itself is gone (moved, deleted, unmounted): keep what is indexed
                result.unreadable_dirs[""] = "the notes folder is not there (moved, deleted or not mounted)"
            continue  # a folder under it: gone, or replaced by a file
        except OSError as exc:
            result.unreadable_dirs[printable(rel_base)] = f"folder cannot be read: {exc.strerror}"
            continue
        subdirs = []
        for entry in entries:
            name = entry.name
            rel = f"{rel_base}/{name}" if rel_base else name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if not is_dir and entry.is_symlink() and name_problem(name) is None and os.path.isdir(entry.path):
                if not ignore.dir_ignored(rel):
                    result.linked_dirs[rel + "/"] = linked_dir_reason(Path(entry.path))
                continue
            if is_dir:
                if name_problem(name) is not None:
                    if not ignore.dir_ignored(printable(rel)):
                        problem = (
                            (name_problem(name) or "")
                            .replace("file name", "folder name")
                            .replace("rename the file to index it", "rename the folder to index what it holds")
                        )
                        result.unreadable_dirs[printable(rel)] = problem
                    continue
                if not ignore.dir_ignored(rel):
                    subdirs.append(rel)
                continue
            bad_name = name_problem(name)
            if bad_name is not None:
                shown = printable(rel)
                if ignore.file_wanted(shown):
                    result.skipped[shown] = bad_name
                continue
            if not ignore.file_wanted(rel):
                continue
            info, reason = stat_note(root, rel, *ignore.size_limit(rel, max_file_bytes))
            if info is not None:
                result.files[rel] = info
            elif reason:
                result.skipped[rel] = reason
        stack.extend(reversed(subdirs))
    return result


def under_folder(result: ScanResult, folders: Folders, folder: NotesFolder) -> ScanResult:
    """A scan of one of `folders` with its paths made index paths (its name in front when there are several)."""
    if not folders.named:
        return result
    o = folders.outer
    return ScanResult(
        files={o(folder, rel): replace(info, rel=o(folder, rel)) for rel, info in result.files.items()},
        skipped={o(folder, rel): reason for rel, reason in result.skipped.items()},
        unreadable_dirs={o(folder, rel): reason for rel, reason in result.unreadable_dirs.items()},
        linked_dirs={o(folder, rel.rstrip("/")) + "/": reason for rel, reason in result.linked_dirs.items()},
    )


def scan_folders(folders: Folders, ignore_of: Callable[[NotesFolder], Ignore], max_file_bytes: int) -> ScanResult:
    """`scan` of every folder, each with its own ignore rules, as one result under the index's paths."""
    out = ScanResult()
    for folder in folders:
        if folder.duplicate_of is not None:  # the same real folder as another served one: indexed under that one
            continue
        one = under_folder(scan(folder.path, ignore_of(folder), max_file_bytes), folders, folder)
        out.files.update(one.files)
        out.skipped.update(one.skipped)
        out.unreadable_dirs.update(one.unreadable_dirs)
        out.linked_dirs.update(one.linked_dirs)
    return out


def stat_note(
    root: Path, rel: str, max_file_bytes: int, setting: str = "max_file_bytes"
) -> tuple[FileInfo | None, str | None]:
    """Stat one candidate note. Returns (info, None), (None, reason) or (None, None) if gone."""
    problem = name_problem(rel)
    if problem is not None:
        return None, problem
    path = root / rel
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None, None  # gone (NotADirectoryError: a folder on its way was replaced by a file)
    except OSError as exc:
        return None, f"cannot stat: {exc.strerror}"
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return None, f"dangling symlink (its target {printable(target)} does not exist)"
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None, "symlink loop (the link points back at itself)"
            return None, f"cannot follow symlink: {exc.strerror}"
        real = Path(os.path.realpath(path))
        try:
            real.relative_to(root)
        except ValueError:
            return None, "symlink pointing outside the notes folder"
    if not stat.S_ISREG(st.st_mode):
        return None, f"not a regular file ({_kind(st.st_mode)})"
    if st.st_size > max_file_bytes:
        return None, f"too large ({st.st_size} bytes > {setting} {max_file_bytes})"
    return FileInfo(rel=rel, path=path, size=st.st_size, mtime_ns=st.st_mtime_ns), None


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


class NoteReadError(GrooveError):
    """A note that cannot be indexed; the message is the skip reason."""


def read_bytes(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`, opened without blocking.

    FileNotFoundError if it is gone; NoteReadError (the reason) if it is not a
    regular file, too large, or cannot be read. Never reads more than
    max_bytes + 1 bytes, so a file that grows while it is read costs no more.
    """
    try:
        fd = open_fd(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except NotADirectoryError as exc:  # a folder on its way was replaced by a file: the note is gone
        raise FileNotFoundError(exc.errno, exc.strerror, str(path)) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NoteReadError("symlink loop (the link points back at itself)") from exc
        raise NoteReadError(f"unreadable: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NoteReadError(f"not a regular file ({_kind(st.st_mode)})")
        if st.st_size > max_bytes:
            raise NoteReadError(f"too large ({st.st_size} bytes > max_file_bytes {max_bytes})")
        chunks = []
        left = max_bytes + 1
        while left > 0:
            block = os.read(fd, min(left, 1 << 20))
            if not block:
                break
            chunks.append(block)
            left -= len(block)
    except OSError as exc:
        raise NoteReadError(f"unreadable: {exc.strerror}") from exc
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise NoteReadError(f"too large (grew past max_file_bytes {max_bytes} while being read)")
    return data


def decode_note(data: bytes) -> str:
    """Note bytes -> text: UTF-8 (a BOM is kept for normalise_text to drop), or UTF-16 or UTF-32 with a BOM."""
    # UTF-32's marks first: UTF-32-LE's begins with UTF-16-LE's.
    for name, marks in (
        ("UTF-32", (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)),
        ("UTF-16", (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)),
    ):
        if data.startswith(marks):
            try:
                return data.decode(name.lower())
            except UnicodeDecodeError as exc:
                raise NoteReadError(
                    f"{name} text (it starts with a {name} byte-order mark) with an invalid sequence at offset "
                    f"{exc.start}; save it as UTF-8"
                ) from exc
    if b"\x00" in data[:8192]:
        raise NoteReadError("binary file (NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NoteReadError(f"not UTF-8 text (invalid byte at offset {exc.start}); save it as UTF-8") from exc


def read_note(info: FileInfo, max_file_bytes: int) -> tuple[str, str]:
    """Read and decode one note. Returns (text, sha256 of the bytes)."""
    data = read_bytes(info.path, max_file_bytes)
    text = decode_note(data)
    return text, hashlib.sha256(data).hexdigest()
