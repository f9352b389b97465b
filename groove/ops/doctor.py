"""`groove doctor`: check the index against the notes folder and against itself.

Each check yields findings (error / warning / info), each with the command
that repairs it. Exit code: 0 clean (info only), 1 warnings, 2 errors.
`fix=True` applies the safe repairs, the ones that only remove what no note
backs or rebuild what is derived from the chunks (gone notes, orphan chunks,
dangling or unused vectors, the full-text tables), then checks again; the
rest (re-embedding, a model change, a schema upgrade) needs the printed
command. `fix=True` is a writer: it takes `writer_lock.WriterLock` and is refused,
naming the holder, while another groove process (a running `groove serve`)
writes the index; the checks alone take no lock. Imported by the CLI only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from groove.config import ConfigError, Settings, read_config_text
from groove.corpus.cjk import cjk_share
from groove.corpus.globs import MAX_GLOB_CHARS, MAX_GLOB_STARS
from groove.corpus.scan import IGNORE_FILE, Ignore, refused_lines, scan_folders
from groove.embed.embedder import make_embedder, model_fit_warning
from groove.errors import GrooveError
from groove.folders import Folders
from groove.store import connection, reads, schema, shadow, writer_lock

SAMPLE = 2000  # chunks read to judge the notes' script mix (as app.MODEL_FIT_SAMPLE)
EXAMPLES = 5
LINK_EXAMPLES = 20  # unresolved links listed (path:line each)


@dataclass
class Finding:
    level: str  # "error" | "warning" | "info"
    check: str  # a short stable name, e.g. "orphan_chunks"
    message: str
    fix: str  # the command (or edit) that repairs it
    count: int = 1
    examples: list[str] = field(default_factory=list)
    fixable: bool = False  # repaired by `groove doctor --fix`


def vector_tables(con: Any) -> list[tuple[str, int | None]]:
    """(name, declared dimension) of every vec0 table: the one place doctor learns where vectors live."""
    rows = con.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING vec0%'"
    ).fetchall()
    out = []
    for name, sql in rows:
        m = re.search(r"float\[(\d+)\]", sql or "")
        out.append((name, int(m.group(1)) if m else None))
    return sorted(out)


def _count(con: Any, sql: str, args: tuple = ()) -> int:
    return int(con.execute(sql, args).fetchone()[0] or 0)


def _examples(con: Any, sql: str, args: tuple = ()) -> list[str]:
    return [str(r[0]) for r in con.execute(sql + f" LIMIT {EXAMPLES}", args).fetchall()]


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


def check_folder(con: Any, settings: Settings, folders: Folders) -> tuple[list[Finding], list[str]]:
    """Notes on disk but not indexed, indexed but gone, changed since indexed. Returns the gone paths too."""
    ix = settings.index
    result = scan_folders(
        folders, lambda f: Ignore(f.path, ix.exclude_dirs, ix.extensions, gitignore=ix.gitignore), ix.max_file_bytes
    )
    indexed = {p: (size, mtime) for p, size, mtime in con.execute("SELECT path, size, mtime_ns FROM documents")}
    skipped = {r[0] for r in con.execute("SELECT path FROM skipped")}
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
                "move the folder into the notes folder, or link its notes one by one",
                len(linked),
                linked[:EXAMPLES],
            )
        )
    return out, gone


def check_schema(con: Any) -> list[Finding]:
    version = int(schema.get_meta_sync(con, "schema_version", "0") or 0)
    if version < schema.SCHEMA_VERSION:
        return [
            Finding(
                "warning",
                "schema_stale",
                f"the index has schema version {version}; this groove uses {schema.SCHEMA_VERSION}",
                "groove index (upgrades it in place; nothing is re-embedded)",
            )
        ]
    if version > schema.SCHEMA_VERSION:
        return [
            Finding(
                "error",
                "schema_newer",
                f"the index has schema version {version}, newer than this groove ({schema.SCHEMA_VERSION})",
                "upgrade groove, or groove index --rebuild",
            )
        ]
    return []


def check_model(con: Any, settings: Settings) -> list[Finding]:
    built_model, built_dim = schema.read_identity_sync(con)
    try:
        identity = make_embedder(settings.embedding).identity  # known without loading the model
    except GrooveError as exc:
        return [
            Finding(
                "error",
                "model_config",
                f"the configured embedder cannot be built: {exc}",
                "fix [embedding] in groove.toml",
            )
        ]
    out = []
    switch = shadow.state_sync(con)
    if built_model != identity:
        if switch and switch["model"] == identity:
            out.append(
                Finding(
                    "warning",
                    "model_switch",
                    f"the index is switching from {built_model} to {identity} and answers with "
                    f"{built_model} until every text has its new vector (groove status shows how far)",
                    "groove index (or the running groove serve) finishes the switch",
                )
            )
        else:
            out.append(
                Finding(
                    "warning",
                    "model_mismatch",
                    f"the index answers with {built_model} but the configuration asks for {identity}; "
                    "read-only commands refuse it until it is switched",
                    "groove index (switches in place, the old vectors answer meanwhile), or set [embedding] model back",
                )
            )
    for name, dim in vector_tables(con):
        if name == shadow.VECTORS:
            if switch and dim != switch["dimension"]:
                out.append(
                    Finding(
                        "error",
                        "vector_dimension",
                        f"table {name} holds vectors of {dim} dimensions but the switch to "
                        f"{switch['model']} expects {switch['dimension']}",
                        "groove index --rebuild",
                    )
                )
            continue
        if dim != built_dim:
            out.append(
                Finding(
                    "error",
                    "vector_dimension",
                    f"table {name} holds vectors of {dim} dimensions but the index says {built_dim}",
                    "groove index --rebuild",
                )
            )
    sample = [r[0] for r in con.execute(f"SELECT content FROM chunks ORDER BY hash LIMIT {SAMPLE}")]
    warning = model_fit_warning(identity, cjk_share(sample)) if sample else None
    if warning:
        out.append(
            Finding("warning", "model_fit", warning, "set [embedding] model, then groove index (switches in place)")
        )
    return out


def check_chunks(con: Any, vec_table: str) -> list[Finding]:
    out = []
    n = _count(con, "SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)")
    if n:
        out.append(
            Finding(
                "error",
                "orphan_chunks",
                f"{n} chunk(s) belong to no note (search can return them)",
                "groove doctor --fix",
                n,
                fixable=True,
            )
        )
    pending = _count(con, "SELECT count(*) FROM chunks WHERE embedding_id IS NULL")
    if pending:
        ex = _examples(
            con, "SELECT DISTINCT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.embedding_id IS NULL"
        )
        out.append(
            Finding(
                "warning",
                "chunks_pending",
                f"{pending} chunk(s) have no vector yet: they are queued for embedding (found by full text only "
                "until then)",
                "groove index (or keep groove serve running)",
                pending,
                ex,
            )
        )
    dangling = _count(
        con,
        "SELECT count(*) FROM chunks WHERE embedding_id IS NOT NULL"
        " AND embedding_id NOT IN (SELECT id FROM embeddings)",
    )
    if dangling:
        out.append(
            Finding(
                "error",
                "chunks_dangling_vector",
                f"{dangling} chunk(s) point at a vector record that does not exist (never found by meaning)",
                "groove doctor --fix, then groove index (re-queues and embeds them)",
                dangling,
                fixable=True,
            )
        )
    novec = _count(
        con, f"SELECT count(*) FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM {vec_table} v WHERE v.rowid = e.id)"
    )
    if novec:
        out.append(
            Finding(
                "error",
                "vectors_missing",
                f"{novec} vector record(s) have no vector in {vec_table} (their chunks are never found by meaning)",
                "groove doctor --fix, then groove index (re-queues and embeds them)",
                novec,
                fixable=True,
            )
        )
    unused = _count(
        con, "SELECT count(*) FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embedding_id = e.id)"
    )
    if unused:
        out.append(
            Finding(
                "info",
                "vectors_unused",
                f"{unused} vector(s) belong to no chunk (space only)",
                "groove doctor --fix (or groove index)",
                unused,
                fixable=True,
            )
        )
    return out


FTS = (("fts_chunks", "trigram"), ("fts_cjk", "CJK bigram"), ("fts_words", "word"))


def check_fts(con: Any) -> list[Finding]:
    out = []
    for table, label in FTS:
        extra = _count(con, f"SELECT count(*) FROM {table}_docsize WHERE id NOT IN (SELECT id FROM chunks)")
        absent = _count(con, f"SELECT count(*) FROM chunks WHERE id NOT IN (SELECT id FROM {table}_docsize)")
        if extra:
            out.append(
                Finding(
                    "error",
                    "fts_rows_without_chunks",
                    f"the {label} full-text table has {extra} row(s) of chunks that do not exist",
                    "groove doctor --fix (rebuilds it from the chunks)",
                    extra,
                    fixable=True,
                )
            )
        if absent:
            out.append(
                Finding(
                    "error",
                    "fts_chunks_missing",
                    f"{absent} chunk(s) are missing from the {label} full-text table (never found by words)",
                    "groove doctor --fix (rebuilds it from the chunks)",
                    absent,
                    fixable=True,
                )
            )
        try:
            con.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        except connection.DBError as exc:
            out.append(
                Finding(
                    "error",
                    "fts_integrity",
                    f"the {label} full-text table fails its integrity check: {exc}",
                    "groove doctor --fix (rebuilds it from the chunks)",
                    fixable=True,
                )
            )
    return out


def check_links(con: Any) -> list[Finding]:
    """Links resolved as the notes' names say now (a mismatch is repaired from them), and the links that name
    no note (info: each with its path and line)."""
    if not schema._has_table(con, "links"):
        return []  # an index before schema 7: check_schema says to upgrade it
    out = []
    stale = _count(con, f"SELECT count(*) FROM links WHERE target_id IS NOT {schema.LINK_TARGET}")
    if stale:
        out.append(
            Finding(
                "warning",
                "links_stale",
                f"{stale} link(s) point at another note than the one their "
                "target names now (backlinks and related by links are off for them)",
                "groove doctor --fix (resolves every link again from the notes' names)",
                stale,
                fixable=True,
            )
        )
    count, shown = reads.unresolved_links_sync(con, LINK_EXAMPLES)
    if count:
        out.append(
            Finding(
                "info",
                "links_unresolved",
                f"{count} link(s) name a note that does not exist (`groove links PATH` lists a note's)",
                "create the note, or correct the link at the path and line shown",
                count,
                shown,
            )
        )
    return out


def check_sqlite(con: Any) -> list[Finding]:
    rows = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
    if rows == ["ok"]:
        return []
    return [
        Finding(
            "error",
            "sqlite_integrity",
            f"SQLite's quick_check reports damage: {rows[0]}",
            "groove index --rebuild",
            len(rows),
            rows[:EXAMPLES],
        )
    ]


# --- repairs ---------------------------------------------------------------------------------


def repair(con: Any, findings: list[Finding], gone: list[str], vec_table: str) -> list[str]:
    """The safe repairs for `findings`, in one transaction; what was done, one line each. The caller holds the
    index's `writer_lock.WriterLock` (`diagnose(fix=True)`): no other groove process writes meanwhile."""
    names = {f.check for f in findings if f.fixable}
    done = []
    con.execute("BEGIN IMMEDIATE")
    try:
        if "notes_gone" in names and gone:
            con.executemany("DELETE FROM documents WHERE path = ?", [(p,) for p in gone])
            done.append(f"removed {len(gone)} note(s) that no longer exist from the index")
        if "orphan_chunks" in names:
            n = con.execute("DELETE FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)").rowcount
            done.append(f"removed {n} orphan chunk(s)")
        if "vectors_missing" in names:
            ids = [
                r[0]
                for r in con.execute(
                    f"SELECT id FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM {vec_table} v WHERE v.rowid = e.id)"
                )
            ]
            con.executemany("DELETE FROM embeddings WHERE id = ?", [(i,) for i in ids])
            done.append(f"dropped {len(ids)} vector record(s) without a vector")
        if names & {"chunks_dangling_vector", "vectors_missing"}:
            n = con.execute(
                "UPDATE chunks SET embedding_id = NULL WHERE embedding_id IS NOT NULL"
                " AND embedding_id NOT IN (SELECT id FROM embeddings)"
            ).rowcount
            done.append(f"re-queued {n} chunk(s) for embedding (run `groove index`)")
        if "vectors_unused" in names:
            ids = [
                r[0]
                for r in con.execute(
                    "SELECT id FROM embeddings e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embedding_id = e.id)"
                )
            ]
            con.executemany(f"DELETE FROM {vec_table} WHERE rowid = ?", [(i,) for i in ids])
            con.executemany("DELETE FROM embeddings WHERE id = ?", [(i,) for i in ids])
            done.append(f"dropped {len(ids)} unused vector(s)")
        if "links_stale" in names or ("notes_gone" in names and gone):
            con.execute(schema.RESOLVE_LINKS)
            done.append("resolved every link again from the notes' names")
        if names & {"fts_rows_without_chunks", "fts_chunks_missing", "fts_integrity"}:
            con.execute("INSERT INTO fts_chunks(fts_chunks) VALUES ('rebuild')")
            for statement in schema.split_sql(schema.REFILL_CJK + schema.REFILL_WORDS):
                con.execute(statement)
            done.append("rebuilt the three full-text tables from the chunks")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return done


# --- the command -----------------------------------------------------------------------------


def _guarded(name: str, run: Callable[[], list[Finding]]) -> list[Finding]:
    try:
        return run()
    except connection.DBError as exc:
        return [Finding("error", name, f"the {name} check could not run: {exc}", "groove index --rebuild")]


def diagnose(settings: Settings, *, fix: bool = False) -> dict[str, Any]:
    folders = settings.folders()
    path = settings.resolved_index_path()
    report: dict[str, Any] = {
        "kb_path": folders.describe(),
        "index_path": str(path),
        "fixed": [],
        "folders": [{"name": f.name, "path": str(f.path)} for f in folders],
    }
    findings = [f for folder in folders for f in check_ignore_file(folder.path)]
    if not path.exists():
        findings.append(Finding("error", "no_index", f"there is no index at {path}", "groove index"))
        return _finish(report, findings)
    # --fix writes: it is a writer like `groove index` and `groove serve`, so it takes the one writer lock
    # (refused at once, naming the holder, while another groove process writes); the checks alone take none.
    lock = _writer_lock(path) if fix else None
    try:
        return _diagnose(settings, folders, path, report, findings, fix)
    finally:
        if lock is not None:
            lock.release()


def _writer_lock(path: Path) -> writer_lock.WriterLock:
    lock = writer_lock.WriterLock(path)
    try:
        lock.acquire()
    except writer_lock.IndexLockedError as exc:
        raise writer_lock.IndexLockedError(
            f"{exc}; so does `groove doctor` without --fix, which lists what --fix would repair"
        ) from None
    return lock


def _diagnose(
    settings: Settings, folders: Folders, path: Path, report: dict[str, Any], findings: list[Finding], fix: bool
) -> dict[str, Any]:
    con = connection.connect_sync(path)
    try:
        if not schema._has_table(con, "meta") or schema.read_identity_sync(con)[0] is None:
            findings.append(Finding("error", "not_an_index", f"{path} is not a groove index", "groove index --rebuild"))
            return _finish(report, findings)
        for shown, folder in zip(report["folders"], folders, strict=True):  # each folder's notes in the index
            shown["notes"] = con.execute(*reads.documents_under(folders.prefix(folder))).fetchone()[0]
        vec_table = "vec_embeddings"  # the active set (a switch's shadow set is checked by check_model)
        ignore_ok = not any(f.check == "ignore_file" for f in findings)

        def run_all() -> tuple[list[Finding], list[str]]:
            out = list(findings)
            out += _guarded("schema", lambda: check_schema(con))
            out += _guarded("model", lambda: check_model(con, settings))
            gone: list[str] = []
            if ignore_ok:
                folder, gone = check_folder(con, settings, folders)
                out += folder
            out += _guarded("chunks", lambda: check_chunks(con, vec_table))
            out += _guarded("fts", lambda: check_fts(con))
            out += _guarded("links", lambda: check_links(con))
            out += _guarded("sqlite", lambda: check_sqlite(con))
            return out, gone

        found, gone = run_all()
        for _ in range(3):  # a repair can uncover another (a removed note leaves its vectors unused)
            if not fix or not any(f.fixable for f in found):
                break
            report["fixed"] += repair(con, found, gone, vec_table)
            found, gone = run_all()
        return _finish(report, found)
    finally:
        con.close()


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
