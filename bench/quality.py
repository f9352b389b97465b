"""`quality`: the quality filter's figures (decision 0020): what share it hides, its cost per leg, a folder with stubs.

    python -m bench quality share ../shared/data/powershell-docs-ja /tmp/qf/ps/index.sqlite
    python -m bench quality cost /tmp/qf/ps/index.sqlite /tmp/qf/ps-vec.sqlite
    python -m bench quality stubs tests/fixtures/bilingual/notes /tmp/qf/binoisy/notes

`share` indexes the folder with the default model's chunker and tokenizer, without embedding (the scores
do not need vectors), and counts the chunks under 0.2, 0.3 and 0.4. `cost` copies such an index, gives each
distinct text one random unit vector, and times each leg with the filter on and off, interleaved, so that a
loaded machine weighs on both alike. `stubs` copies a folder of notes and adds, for each note, a draft of
the same title over a placeholder (`詳細は後述` or `TODO: write this up`) and a note of links to it: the
notes a golden file judges stay the answers, the stubs compete with them.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bench.common import BenchError, full_text_leg


def share(kb: Path, index: Path) -> dict:
    from groove.config import load_settings
    from groove.index import Index
    from groove.store.sqlite import connection

    settings = load_settings(None, kb_path=kb, index_path=index)

    async def reconcile() -> None:
        async with Index.open(settings) as ix:
            await ix.full_reconcile(embed=False)

    anyio.run(reconcile)
    con = connection.connect_sync(index, readonly=True)
    try:

        def one(sql: str, *a: Any) -> Any:
            return con.execute(sql, a).fetchone()[0]

        return {
            "folder": str(kb),
            "chunks": one("SELECT count(*) FROM chunks"),
            "hidden": {t: one("SELECT count(*) FROM chunks WHERE quality < ?", t) for t in (0.2, 0.3, 0.4)},
            "by_text": one("SELECT count(*) FROM chunks WHERE text_quality < 0.3"),
            "as_template": one("SELECT count(*) FROM chunks WHERE text_quality >= 0.3 AND quality < 0.3"),
            "notes": one("SELECT count(*) FROM documents"),
            "notes_all_hidden": one(
                "SELECT count(*) FROM documents d WHERE NOT EXISTS "
                "(SELECT 1 FROM chunks c WHERE c.doc_id = d.id AND c.quality >= 0.3)"
            ),
        }
    finally:
        con.close()


# The trigram leg's phrases of each query (OR-ed: `"パイプライン" OR "パラメーター"`).
QUERIES = [
    ("パイプライン", "パラメーター"),
    ("リモート", "セッション"),
    ("共通パラメーター",),
    ("関連リンク",),
    ("ファイル", "パス"),
    ("確認を求める",),
]


def cost(source: Path, path: Path, *, queries: list[tuple[str, ...]] = QUERIES, floor: float = 0.3) -> dict:
    from groove.store.memory import VectorMatrix
    from groove.store.protocols import TextQuery
    from groove.store.sqlite import connection, schema
    from groove.store.sqlite.search import vector_scored
    from groove.store.sqlite.store import load_all

    shutil.copy(source, path)
    con = connection.connect_sync(path)
    dimension = schema.get_meta_sync(con, "dimension")
    if dimension is None:
        raise BenchError(f"{source} records no vector dimension: not an index groove built")
    dim = int(dimension)
    rng = np.random.default_rng(1)
    con.execute("BEGIN")
    for (h,) in con.execute("SELECT DISTINCT hash FROM chunks WHERE embedding_id IS NULL").fetchall():
        v = rng.standard_normal(dim).astype(np.float32)
        eid = con.execute("INSERT INTO embeddings(hash, created_at) VALUES (?, 0) RETURNING id", (h,)).fetchone()[0]
        con.execute(
            "INSERT INTO vec_embeddings(rowid, embedding) VALUES (?, ?)", (eid, (v / np.linalg.norm(v)).tobytes())
        )
    con.execute("UPDATE chunks SET embedding_id = (SELECT id FROM embeddings e WHERE e.hash = chunks.hash)")
    con.execute("COMMIT")
    con.close()

    async def run() -> dict:
        conn = await connection.connect(path, readonly=True)
        matrix = VectorMatrix(load_all(path), 1 << 30)
        phrases = [TextQuery("phrases", q) for q in queries]
        qs = [v / np.linalg.norm(v) for v in np.random.default_rng(7).standard_normal((20, dim)).astype(np.float32)]
        await vector_scored(conn, qs[0], 50, matrix=matrix)  # load the in-memory copy
        legs = {
            "fts": lambda i, f: full_text_leg(conn, phrases[i % len(phrases)], 50, min_quality=f),
            "vector in memory": lambda i, f: vector_scored(conn, qs[i % 20], 50, matrix=matrix, min_quality=f),
            "vector sqlite-vec": lambda i, f: vector_scored(conn, qs[i % 20], 50, min_quality=f),
        }
        times: dict[str, list[float]] = {}
        for name, leg in legs.items():
            for i in range(12 if "sqlite" in name else 60):
                for f in (None, floor):
                    t = time.perf_counter()
                    await leg(i, f)
                    times.setdefault(f"{name} {'on' if f else 'off'}", []).append((time.perf_counter() - t) * 1000)
        await conn.close()
        return {k: round(statistics.median(v), 2) for k, v in times.items()}

    return anyio.run(run)


def stubs(src: Path, out: Path) -> int:
    """`out`: a copy of `src` with a draft and a note of links beside each note; returns the stubs written."""
    shutil.copytree(src, out, dirs_exist_ok=True)
    written = 0
    for p in sorted(src.rglob("*.md")):
        text = p.read_text(encoding="utf-8")
        m = re.search(r"^# (.+)$", text, re.M)
        title = m.group(1).strip() if m else p.stem
        rel = p.relative_to(src)
        japanese = re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", title) is not None
        draft = out / "drafts" / rel.parent / f"{p.stem}-draft.md"
        links = out / "index" / rel.parent / f"{p.stem}-links.md"
        for target, body in (
            (draft, "詳細は後述" if japanese else "TODO: write this up"),
            (links, f"- [[{p.stem}]]\n- [{title}](../../{rel.as_posix()})"),
        ):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
            written += 1
    return written


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="what", metavar="STEP", required=True)
    p = sub.add_parser("share", help="the share of a folder's chunks the filter hides")
    p.add_argument("kb", type=Path)
    p.add_argument("index", type=Path)
    p = sub.add_parser("cost", help="each leg's time with the filter on and off")
    p.add_argument("index", type=Path, help="an index made by `share` (no vectors)")
    p.add_argument("copy", type=Path, help="where the copy with random vectors goes")
    p = sub.add_parser("stubs", help="a copy of a folder with stubs beside its notes")
    p.add_argument("src", type=Path)
    p.add_argument("out", type=Path)


def main_async(args: argparse.Namespace) -> dict:
    """The registry's entry (`python -m bench quality STEP`): the step's figures, printed as JSON and returned."""
    if args.what == "share":
        out = share(args.kb, args.index)
    elif args.what == "cost":
        out = cost(args.index, args.copy)
    else:
        out = {"stubs": stubs(args.src, args.out)}
    print(json.dumps(out, ensure_ascii=False, indent=1))
    return out
