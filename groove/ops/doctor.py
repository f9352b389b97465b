"""`groove doctor`: check the index against the notes folder and against itself.

Each check yields findings (error / warning / info), each with the command
that repairs it. Exit code: 0 clean (info only), 1 warnings, 2 errors.
`fix=True` applies the safe repairs, the ones that only remove what no note
backs or rebuild what is derived from the chunks (gone notes, orphan chunks,
dangling or unused vectors, the full-text indexes), then checks again; the
rest (re-embedding, a model change, a schema upgrade) needs the printed
command. `fix=True` is a writer: it takes the index's writer lock and is refused,
naming the holder, while another groove process (a running `groove serve`)
writes the index; the checks alone take no lock. The folder's side (notes not
indexed, gone, changed; the ignore file; whether the model reads the notes'
languages) is here; the index's own checks and repairs are its store's
(`groove.store.open.open_doctor`). Imported by the CLI only.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from groove.config import ConfigError, Settings, read_config_text
from groove.corpus.cjk import cjk_share
from groove.corpus.globs import MAX_GLOB_CHARS, MAX_GLOB_STARS
from groove.corpus.scan import IGNORE_FILE, Ignore, refused_lines, scan_folders
from groove.embed.embedder import make_embedder, model_fit_warning
from groove.errors import GrooveError
from groove.folders import Folders
from groove.store.address import address
from groove.store.open import open_doctor
from groove.store.protocols import Check as Finding

SAMPLE = 2000  # chunks read to judge the notes' script mix (as index.MODEL_FIT_SAMPLE)
EXAMPLES = 5

__all__ = ["Finding", "diagnose", "format_text"]


# --- the checks ------------------------------------------------------------------------------


def check_ignore_file(kb: Path) -> list[Finding]:
    path = kb / IGNORE_FILE
    try:
        text = read_config_text(path, what="ignore file", errors="replace")
    except FileNotFoundError:
        return []
    except ConfigError as exc:
        return [
            Finding("error", "ignore_file", str(exc), f"replace {path} with a plain text file of gitignore patterns")
        ]
    _, bad = refused_lines(text)  # the same reading as indexing's (corpus/scan.py)
    if not bad:
        return []
    return [
        Finding(
            "error",
            "ignore_file",
            f"{path} has {len(bad)} line(s) that groove refuses (a bad pattern, or over a limit: "
            f"{MAX_GLOB_CHARS} characters, {MAX_GLOB_STARS} '*'); they ignore nothing, "
            "so what they name is indexed; the other lines apply",
            f"edit {path}: fix or delete {bad[0].split(':')[0]}",
            len(bad),
            bad[:EXAMPLES],
        )
    ]


def check_folder(
    indexed: dict[str, tuple[int, int]], skipped: set[str], settings: Settings, folders: Folders
) -> tuple[list[Finding], list[str]]:
    """Notes on disk but not indexed, indexed but gone, changed since indexed. Returns the gone paths too."""
    ix = settings.index
    result = scan_folders(
        folders, lambda f: Ignore(f.path, ix.exclude_dirs, ix.extensions, gitignore=ix.gitignore), ix.max_file_bytes
    )
    on_disk = set(result.files)
    missing = sorted(on_disk - set(indexed) - skipped - set(result.skipped))
    gone = sorted(set(indexed) - on_disk)
    changed = sorted(
        p for p in on_disk & set(indexed) if (result.files[p].size, result.files[p].mtime_ns) != indexed[p]
    )
    out = []
    if missing:
        out.append(
            Finding(
                "warning",
                "notes_not_indexed",
                f"{len(missing)} note(s) in the folder are not in the index",
                "groove index",
                len(missing),
                missing[:EXAMPLES],
            )
        )
    if gone:
        out.append(
            Finding(
                "warning",
                "notes_gone",
                f"{len(gone)} indexed note(s) no longer exist in the folder (search still returns them)",
                "groove doctor --fix (or groove index)",
                len(gone),
                gone[:EXAMPLES],
                fixable=True,
            )
        )
    if changed:
        out.append(
            Finding(
                "warning",
                "notes_changed",
                f"{len(changed)} note(s) changed since they were indexed",
                "groove index",
                len(changed),
                changed[:EXAMPLES],
            )
        )
    if result.linked_dirs:
        linked = sorted(result.linked_dirs)
        out.append(
            Finding(
                "info",
                "symlinked_folders",
                f"{len(linked)} symlinked folder(s) are not followed (by design: no loops, nothing outside "
                "the folder); nothing under them is indexed",
                # Not "link its notes one by one": a note linked from outside the folder is skipped too.
                "move the folder into the notes folder, or serve it as a notes folder of its own (--kb NAME=PATH)",
                len(linked),
                linked[:EXAMPLES],
            )
        )
    return out, gone


def check_model_config(settings: Settings) -> tuple[str | None, list[Finding]]:
    """The configured model's identity (known without loading it), or the finding that it cannot be built."""
    try:
        return make_embedder(settings.embedding).identity, []
    except GrooveError as exc:
        return None, [
            Finding(
                "error",
                "model_config",
                f"the configured embedder cannot be built: {exc}",
                "fix [embedding] in groove.toml",
            )
        ]


def check_model_fit(identity: str | None, sample: list[str]) -> list[Finding]:
    warning = model_fit_warning(identity, cjk_share(sample)) if sample and identity else None
    if warning:
        return [
            Finding("warning", "model_fit", warning, "set [embedding] model, then groove index (switches in place)")
        ]
    return []


# --- the command -----------------------------------------------------------------------------


def diagnose(settings: Settings, *, fix: bool = False) -> dict[str, Any]:
    """The checks of the index against the notes folders and itself. A shared store (PostgreSQL): this machine's
    folders against their notes in it (each path led by its folder's name), the others' left to their machines;
    with no folder here, the store's own checks alone."""
    shared = bool(settings.store.url)
    where = address(settings.store.url, Path() if shared else settings.resolved_index_path())
    folders: Folders | None = (
        (settings.folders().shared() if settings.kb_path else None) if shared else settings.folders()
    )
    report: dict[str, Any] = {
        "kb_path": folders.describe() if folders is not None else "none here (the store's own checks)",
        "index_path": where.shown,
        "fixed": [],
        "folders": [{"name": f.name, "path": str(f.path)} for f in folders or ()],
    }
    findings = [f for folder in folders or () for f in check_ignore_file(folder.path)]
    if where.kind == "sqlite" and where.path is not None and not where.path.exists():
        findings.append(Finding("error", "no_index", f"there is no index at {where.shown}", "groove index"))
        return _finish(report, findings)
    with open_doctor(where, settings) as doctor:
        if fix:
            doctor.hold_writer_lock()
        if not doctor.is_index():
            findings.append(
                Finding("error", "not_an_index", f"{where.shown} is not a groove index", "groove index --rebuild")
            )
            return _finish(report, findings)
        for shown, folder in zip(report["folders"], folders or (), strict=True):  # each folder's notes in the index
            shown["notes"] = doctor.notes_under(folders.prefix(folder)) if folders is not None else 0
        ignore_ok = not any(f.check == "ignore_file" for f in findings)
        identity, config = check_model_config(settings)

        def run_all() -> tuple[list[Finding], list[str]]:
            out = list(findings) + doctor.schema_checks()
            if identity is None:
                out += config
            else:
                out += doctor.model_checks(identity) + check_model_fit(identity, doctor.sample_contents(SAMPLE))
            gone: list[str] = []
            if ignore_ok and folders is not None:
                mine = _mine(folders) if shared else None  # a shared store: this machine's folders' notes
                indexed = {p: v for p, v in doctor.indexed().items() if mine is None or p.startswith(mine)}
                skipped = {p for p in doctor.skipped() if mine is None or p.startswith(mine)}
                folder_findings, gone = check_folder(indexed, skipped, settings, folders)
                out += folder_findings
            out += doctor.integrity_checks()
            return out, gone

        found, gone = run_all()
        for _ in range(3):  # a repair can uncover another (a removed note leaves its vectors unused)
            if not fix or not any(f.fixable for f in found):
                break
            report["fixed"] += doctor.repair(found, gone)
            found, gone = run_all()
        return _finish(report, found)


def _mine(folders: Folders) -> tuple[str, ...]:
    """The path prefixes of the notes of these folders in a shared store."""
    return tuple(folders.prefix(f) for f in folders)


def _finish(report: dict[str, Any], findings: list[Finding]) -> dict[str, Any]:
    levels = {f.level for f in findings}
    report["exit_code"] = 2 if "error" in levels else 1 if "warning" in levels else 0
    report["findings"] = [asdict(f) for f in findings]
    report["summary"] = {lvl: sum(1 for f in findings if f.level == lvl) for lvl in ("error", "warning", "info")}
    return report


def format_text(report: dict[str, Any]) -> str:
    lines = [f"index {report['index_path']}  notes {report['kb_path']}"]
    if len(report.get("folders") or []) > 1:
        lines += [
            f"folder {f['name']}: {f['path']}" + (f" ({f['notes']} notes indexed)" if "notes" in f else "")
            for f in report["folders"]
        ]
    for line in report["fixed"]:
        lines.append(f"fixed: {line}")
    for f in report["findings"]:
        lines.append(f"{f['level']}: [{f['check']}] {f['message']}")
        for ex in f["examples"]:
            lines.append(f"    {ex}")
        lines.append(f"    fix: {f['fix']}")
    s = report["summary"]
    lines.append(
        "clean" if not report["findings"] else f"{s['error']} error(s), {s['warning']} warning(s), {s['info']} note(s)"
    )
    return "\n".join(lines) + "\n"
