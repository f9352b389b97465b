"""Reconcile the notes folders with the index.

Used by `groove index` (one full pass, through `groove.index.Index`) and by the daemon (full passes at start
and periodically, path batches from the watcher). Unchanged files (same size
and mtime) are skipped without reading; a changed file is parsed and its chunk
list diffed by chunk hash; a new file whose bytes equal a vanished file's is a
rename and moves the document row. Vectors are reused by text hash, so
renames and moved sections embed nothing.

With several notes folders (groove/folders.py) each is scanned with its own ignore rules and its notes
are stored under its name; everything here works on those index paths, and only the file system calls
use the folder's own path. A folder taken out of the configuration leaves its notes "gone" (deleted),
and one added is scanned like any new notes; the others' notes are unchanged, so nothing of theirs is
read or embedded again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import anyio

from groove.config import IndexSettings, ParserSettings
from groove.corpus.parsers import ChunkOptions, Parsers
from groove.corpus.scan import (
    GITIGNORE_FILE,
    IGNORE_FILE,
    LINKED_DIR,
    FileInfo,
    Ignore,
    NoteReadError,
    ScanResult,
    linked_dir,
    linked_dir_reason,
    name_problem,
    printable,
    scan,
    scan_folders,
    stat_note,
    under_folder,
)
from groove.embed.embedder import Embedder
from groove.folders import Folders, NotesFolder, same_folder
from groove.logs import get_logger
from groove.store.protocols import IndexWrites

log = get_logger(__name__)

Progress = Callable[[str, int, int], None]


@dataclass
class ReconcileStats:
    added: int = 0
    changed: int = 0
    renamed: int = 0
    deleted: int = 0
    unchanged: int = 0
    skipped: int = 0
    files_read: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    seconds: float = 0.0
    changed_paths: list[str] = field(default_factory=list)
    deleted_paths: list[str] = field(default_factory=list)
    skipped_files: dict[str, str] = field(default_factory=dict)  # rel -> reason, this pass
    note_warnings: dict[str, list[str]] = field(default_factory=dict)  # rel -> warnings of notes indexed this pass
    kept_unreadable: dict[str, str] = field(default_factory=dict)  # folder -> reason; its notes stay indexed
    linked_dirs: dict[str, str] = field(default_factory=dict)  # symlinked folder/ -> what it is (not followed)

    DETAILS = ("skipped_files", "note_warnings", "kept_unreadable", "linked_dirs")

    def to_dict(self, details: bool = False) -> dict:
        """The counts; with `details`, also which files were skipped, warned about or kept, and why."""
        d = asdict(self)
        d.pop("changed_paths")
        d.pop("deleted_paths")
        d["seconds"] = round(self.seconds, 3)
        if not details:
            for key in self.DETAILS:
                d.pop(key)
            return d
        d["skipped_files"] = [{"path": p, "reason": r} for p, r in sorted(self.skipped_files.items())]
        d["note_warnings"] = [{"path": p, "warnings": w} for p, w in sorted(self.note_warnings.items())]
        d["kept_unreadable"] = [{"path": p, "reason": r} for p, r in sorted(self.kept_unreadable.items())]
        d["linked_dirs"] = [{"path": p, "reason": r} for p, r in sorted(self.linked_dirs.items())]
        return d


class Indexer:
    """The single writer's logic, over the store's writes (`groove.store.protocols.IndexWrites`)."""

    def __init__(
        self,
        writes: IndexWrites,
        folders: Folders | Path,
        settings: IndexSettings,
        embedder: Embedder,
        parsers: ParserSettings | None = None,
        *,
        shared: bool = False,
    ):
        self.writes = writes
        # A store several machines share holds other machines' folders too: this indexer reconciles only its own.
        self.shared = shared
        # resolved once, by the settings; a bare Path is one folder
        self.folders = folders if isinstance(folders, Folders) else Folders.one(folders)
        self.settings = settings  # the [index] section (and [parsers]): all the indexer reads
        self.embedder = embedder
        # The parser registry decides which files are notes and how each kind is read and parsed.
        self.parsers = Parsers(settings, parsers)
        # Each folder's own ignore rules (its .grooveignore, its git repository's .gitignore files).
        self.ignores = {f.name: self._ignore_for(f) for f in self.folders}

    def _ignore_for(self, folder: NotesFolder) -> Ignore:
        return Ignore(
            folder.path,
            self.settings.exclude_dirs,
            self.parsers.extensions,
            self.parsers.size_limits(),
            gitignore=self.settings.gitignore,
        )

    def repoint(self, name: str, path: Path) -> NotesFolder:
        """The folder named `name` is now the real folder `path` (its link was re-pointed while serving): read it
        from now on, with its own ignore rules; a full reconcile then indexes its notes and removes the old ones.
        When `path` is (inside, or holds) another served folder, this one indexes nothing until it is re-pointed
        again: one warning names both, and its notes are that folder's."""
        current = next(f for f in self.folders if f.name == name)
        other = same_folder(self.folders, current, path)
        if other is not None:
            log.warning(
                "folder_duplicate_skipped",
                folder=name,
                link=str(current.link),
                path=str(path),
                other=other.name,
                other_path=str(other.path),
                action=f"indexing nothing under {name!r}: its notes are served under {other.name!r}; "
                "point the link at a folder of its own",
            )
        folder = self.folders.repoint(name, path, duplicate_of=other.name if other is not None else None)
        self.ignores[name] = self._ignore_for(folder)
        return folder

    def ignore_of(self, folder: NotesFolder) -> Ignore:
        return self.ignores[folder.name]

    def _scan(self, folder: NotesFolder, subdir: str) -> ScanResult:
        """`scan` of a folder inside one notes folder, its paths made index paths."""
        result = scan(folder.path, self.ignore_of(folder), self.settings.max_file_bytes, subdir)
        return under_folder(result, self.folders, folder)

    # -- parsing --------------------------------------------------------------
    def _read(self, info: FileInfo) -> tuple[str | bytes, str]:
        return self.parsers.read(info, self.settings.max_file_bytes)

    def _chunk(self, rel: str, source: str | bytes, stem: str):
        options = ChunkOptions(
            max_tokens=self.embedder.max_tokens,
            min_chunk_tokens=self.settings.min_chunk_tokens,
            split_levels=self.settings.split_levels,
            count_tokens=self.embedder.count_tokens,
            max_chunks=self.settings.max_chunks_per_file,
            max_frontmatter_bytes=self.settings.max_frontmatter_bytes,
        )
        return self.parsers.parse(rel, source, stem=stem, options=options)

    async def _known(self) -> dict[str, tuple[int, int, int, str]]:
        """The indexed notes of this indexer's folders (a store several machines share holds others' too; in a file
        of its own, every note is this indexer's: one no folder holds any more is gone, or moved into one)."""
        known = await self.writes.known_documents()
        if not self.shared:
            return known
        return {p: v for p, v in known.items() if self.folders.locate(p) is not None}

    # -- reconcile ------------------------------------------------------------
    async def reconcile_all(
        self, progress: Progress | None = None, *, reread: bool = False, force: bool = False
    ) -> ReconcileStats:
        """One full pass: every file on disk against every document in the index. With `reread`, every Markdown
        note is parsed again even when its file is unchanged (the parse rules changed: corpus/markdown.py RULES);
        with `force` (`reindex` force), every file is. A note whose bytes are the same counts as unchanged, and its
        text, so its vectors, stay as they are; its chunks follow the settings it is parsed by now."""
        started = time.perf_counter()
        for ignore in self.ignores.values():
            ignore.reload()
        result = await anyio.to_thread.run_sync(
            scan_folders, self.folders, self.ignore_of, self.settings.max_file_bytes
        )
        known = await self._known()
        gone = set(known) - set(result.files)
        kept = self._keep_unreadable(result.unreadable_dirs, gone)
        previous = await self._skipped_before()
        # A symlinked folder is kept beside the skipped files (status and doctor show it), as an info line.
        await self.writes.record_skipped({**result.skipped, **kept, **result.linked_dirs}, replace_all=True)
        gone -= set(result.skipped)  # record_skipped already removed their rows
        stats = await self._reconcile(result.files, gone, known, progress, previous, reread=reread, force=force)
        stats.skipped += len(result.skipped)
        stats.skipped_files.update(result.skipped)
        stats.kept_unreadable.update(kept)
        stats.linked_dirs.update(result.linked_dirs)
        self._log_skipped({**result.skipped, **kept, **result.linked_dirs}, previous)
        stats.seconds = time.perf_counter() - started
        return stats

    def _keep_unreadable(self, unreadable: dict[str, str], gone: set[str]) -> dict[str, str]:
        """Folders that could not be listed: their indexed notes stay (taken out of `gone`).

        Returns {folder/: reason} to record and report; the reason counts the notes kept.
        """
        out: dict[str, str] = {}
        for folder, reason in sorted(unreadable.items()):
            prefix = f"{folder}/" if folder else ""
            held = {p for p in gone if p.startswith(prefix)}
            gone -= held
            out[prefix or "./"] = (
                f"{reason}; kept its {len(held)} indexed note(s) until it is readable again or gone"
                if held
                else f"{reason}; nothing under it is indexed"
            )
        return out

    async def _skipped_before(self) -> dict[str, str]:
        skipped = await self.writes.skipped()
        if not self.shared:
            return skipped
        return {p: r for p, r in skipped.items() if self.folders.locate(p) is not None}

    @staticmethod
    def _log_skipped(skipped: dict[str, str], previous: dict[str, str]) -> None:
        """One warning per skipped file whose reason is new (a reconcile every few minutes does not repeat it);
        a symlinked folder, skipped by design, is an info line."""
        for rel, reason in sorted(skipped.items()):
            if previous.get(rel) != reason:
                if reason.startswith(LINKED_DIR):
                    log.info("folder_symlink_not_followed", path=rel, reason=reason)
                else:
                    log.warning("folder_unreadable" if rel.endswith("/") else "note_skipped", path=rel, reason=reason)

    async def reconcile_paths(self, rels: Iterable[str]) -> ReconcileStats:
        """Reconcile only the given paths (files or folders, relative to the notes folder)."""
        started = time.perf_counter()
        known = await self._known()
        previous = await self._skipped_before()
        present: dict[str, FileInfo] = {}
        gone: set[str] = set()
        skipped: dict[str, str] = {}
        kept: dict[str, str] = {}
        linked: dict[str, str] = {}
        for rel in sorted(set(rels)):
            if name_problem(rel) is not None:
                # A name that cannot be stored as text (not UTF-8, a newline): report it, index nothing.
                shown = printable(rel)
                where = self.folders.locate(shown)
                if where is not None and self.ignore_of(where[0]).file_wanted(where[1]):
                    skipped[shown] = name_problem(rel) or ""
                continue
            where = self.folders.locate(rel)
            if where is None or where[0].duplicate_of is not None:
                # in no configured folder (one taken out of the configuration), or one that is another's (a link)
                gone |= {p for p in known if p == rel or p.startswith(rel + "/")}
                continue
            folder, inner = where
            ignore = self.ignore_of(folder)
            path = folder.path / inner if inner else folder.path
            if rel.rsplit("/", 1)[-1] in (IGNORE_FILE, GITIGNORE_FILE):
                # Ignore rules changed (.grooveignore, or a .gitignore at any depth): everything may be in or out now.
                return await self.reconcile_all()
            if inner and linked_dir(folder.path, inner):
                if not ignore.dir_ignored(inner):
                    linked[rel + "/"] = linked_dir_reason(path)
                continue
            under_rel = rel + "/" if inner or self.folders.named else ""
            if path.is_dir() and not path.is_symlink():
                if rel in known:
                    gone.add(rel)  # a note replaced by a folder of the same name
                if inner and ignore.dir_ignored(inner):
                    gone |= {p for p in known if p.startswith(under_rel)}
                    continue
                sub = await anyio.to_thread.run_sync(self._scan, folder, inner)
                present.update(sub.files)
                skipped.update(sub.skipped)
                # Notes the index has under this folder that are no longer there.
                under = {p for p in known if p.startswith(under_rel) and p not in sub.files and p not in sub.skipped}
                kept.update(self._keep_unreadable(sub.unreadable_dirs, under))
                gone |= under  # (a note skipped now loses its rows through record_skipped)
                continue
            prefix_gone = {p for p in known if p.startswith(rel + "/")}
            if prefix_gone and not path.is_dir():
                gone |= prefix_gone  # a folder vanished (deleted, renamed away, or replaced by a file)
            if not inner or not ignore.file_wanted(inner):
                if rel in known:
                    gone.add(rel)
                continue
            info, reason = stat_note(folder.path, inner, *ignore.size_limit(inner, self.settings.max_file_bytes))
            if info is not None:
                present[rel] = replace(info, rel=rel)
            elif reason is not None:
                skipped[rel] = reason
            elif rel in known:
                gone.add(rel)
        stats = await self._reconcile(present, gone, known, None, previous)
        if skipped or kept or linked:
            await self.writes.record_skipped({**skipped, **kept, **linked}, replace_all=False)
            stats.skipped += len(skipped)
            stats.skipped_files.update(skipped)
            stats.kept_unreadable.update(kept)
            stats.linked_dirs.update(linked)
            self._log_skipped({**skipped, **kept, **linked}, previous)
        stats.seconds = time.perf_counter() - started
        return stats

    async def _reconcile(
        self,
        present: dict[str, FileInfo],
        gone: set[str],
        known: dict[str, tuple[int, int, int, str]],
        progress: Progress | None,
        previous: dict[str, str] | None = None,
        *,
        reread: bool = False,
        force: bool = False,
    ) -> ReconcileStats:
        stats = ReconcileStats()
        gone_by_hash: dict[str, str] = {known[p][3]: p for p in sorted(gone)}
        skipped: dict[str, str] = {}
        total = len(present)
        # Small files first: a note saved beside a huge one does not wait behind it.
        for n, (rel, info) in enumerate(sorted(present.items(), key=lambda kv: (kv[1].size, kv[0])), 1):
            if progress:
                progress("scan", n, total)
            entry = known.get(rel)
            # parsed again as it is: every file when forced, the Markdown notes when the rules changed
            again = entry is not None and (force or (reread and self.parsers.kind(rel) == "markdown"))
            if entry is not None and entry[1] == info.size and entry[2] == info.mtime_ns and not again:
                stats.unchanged += 1
                continue
            try:
                text, digest = await anyio.to_thread.run_sync(self._read, info)
            except FileNotFoundError:
                if entry is not None:
                    gone.add(rel)
                continue
            except NoteReadError as exc:
                skipped[rel] = str(exc)
                continue
            stats.files_read += 1
            same = entry is not None and entry[3] == digest
            if same and not again:
                assert entry is not None
                await self.writes.touch_document(entry[0], info.size, info.mtime_ns)
                stats.unchanged += 1
                continue
            stem = Path(rel).stem
            try:
                parsed = await anyio.to_thread.run_sync(self._chunk, rel, text, stem)
            except NoteReadError as exc:  # a document that cannot be parsed (damaged, encrypted, no library)
                skipped[rel] = str(exc)
                continue
            doc_id = entry[0] if entry is not None else None
            renamed_from = None
            if doc_id is None and digest in gone_by_hash:
                renamed_from = gone_by_hash.pop(digest)
                gone.discard(renamed_from)
                doc_id = known[renamed_from][0]
            for warning in parsed.warnings:
                log.warning("note_warning", path=rel, warning=warning)
            if parsed.warnings:
                stats.note_warnings[rel] = list(parsed.warnings)
            _, inserted = await self.writes.write_note(
                rel=rel,
                parsed=parsed,
                size=info.size,
                mtime_ns=info.mtime_ns,
                file_hash=digest,
                doc_id=doc_id,
            )
            stats.chunks_written += inserted
            if same:  # the same bytes parsed under new rules: headings may read differently, the text is the same
                stats.unchanged += 1
                continue
            stats.changed_paths.append(rel)
            if renamed_from is not None:
                stats.renamed += 1
                stats.deleted_paths.append(renamed_from)
                log.info("note_renamed", old=renamed_from, new=rel)
            elif entry is not None:
                stats.changed += 1
            else:
                stats.added += 1
        if gone:
            stats.deleted += await self.writes.delete_documents(sorted(gone))
            stats.deleted_paths += sorted(gone)
        if skipped:
            await self.writes.record_skipped(skipped, replace_all=False)
            stats.skipped += len(skipped)
            stats.skipped_files.update(skipped)
            self._log_skipped(skipped, previous or {})
        await self.writes.set_meta("last_indexed_at", str(time.time()))
        return stats
