"""Judged query sets: a YAML golden file or a BEIR folder.

Golden YAML: `queries: [{id, query, expected: [{path, heading?}]}]`; a hit
matches on path, and on heading too when one is given. `expected: []` makes
the query unanswerable: the notes do not answer it, and `groove eval` counts
whether the search flags it `off_topic` (it has no recall or nDCG).
BEIR: `queries.jsonl` + `qrels/*.tsv` (`query-id corpus-id score`); corpus id
`X` is the note `X.md` anywhere in the notes folder. A query without a qrels
row is left out, as BEIR does, unless its row says `"unanswerable": true`
(at the top level or in its `metadata`): then it is unanswerable.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from groove.errors import GrooveError


class GoldenError(GrooveError):
    pass


@dataclass(frozen=True)
class Expected:
    path: str | None = None  # golden: exact relative path
    heading: str | None = None
    stem: str | None = None  # BEIR: corpus id = file stem

    def under(self, prefix: str) -> Expected:
        """The same judgment with its path led by `prefix` (a folder's name), unless it already is."""
        if self.path is None or self.path.startswith(prefix):
            return self
        return dataclasses.replace(self, path=prefix + self.path)

    def matches(self, hit: dict[str, Any]) -> bool:
        if self.stem is not None:
            return Path(hit["path"]).stem == self.stem
        if hit["path"] != self.path:
            return False
        return self.heading is None or hit["heading"] == self.heading


@dataclass(frozen=True)
class JudgedQuery:
    id: str
    query: str
    expected: tuple[Expected, ...]

    def under(self, prefix: str) -> JudgedQuery:
        return dataclasses.replace(self, expected=tuple(e.under(prefix) for e in self.expected))

    @property
    def unanswerable(self) -> bool:
        """No note answers it (`expected: []`): scored by whether it is flagged off_topic."""
        return not self.expected


def load(source: Path, split: str | None = None) -> list[JudgedQuery]:
    if not source.exists():
        raise GoldenError(
            f"{source} does not exist: the golden set is missing (no such file or folder); pass a golden YAML "
            "file or a BEIR folder with queries.jsonl and qrels/ (docs/evaluation.md)"
        )
    if source.is_dir():
        return load_beir(source, split)
    if not source.is_file():
        raise GoldenError(f"{source} is neither a golden YAML file nor a BEIR folder")
    return load_golden(source)


def load_golden(path: Path) -> list[JudgedQuery]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise GoldenError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("queries"), list):
        raise GoldenError(f"{path}: expected a mapping with a `queries` list")
    out = []
    for i, q in enumerate(data["queries"]):
        where = f"{path}: queries[{i}]"
        if not isinstance(q, dict) or not isinstance(q.get("query"), str) or not q["query"].strip():
            raise GoldenError(f"{where} needs a non-empty `query` string")
        exp = q.get("expected")
        if not isinstance(exp, list):
            raise GoldenError(
                f"{where} needs an `expected` list of {{path, heading?}} ([] for a query the notes do not answer)"
            )
        items = []
        for e in exp:
            if isinstance(e, str):
                items.append(Expected(path=e))
            elif isinstance(e, dict) and isinstance(e.get("path"), str):
                items.append(Expected(path=e["path"], heading=e.get("heading")))
            else:
                raise GoldenError(f"{where}: each expected item needs a `path`")
        out.append(JudgedQuery(id=str(q.get("id", i)), query=q["query"], expected=tuple(items)))
    return out


def load_beir(folder: Path, split: str | None = None) -> list[JudgedQuery]:
    qfile = folder / "queries.jsonl"
    qrels_dir = folder / "qrels"
    if not qfile.is_file() or not qrels_dir.is_dir():
        raise GoldenError(f"{folder} is not a BEIR folder (needs queries.jsonl and qrels/*.tsv)")
    files = sorted(qrels_dir.glob("*.tsv"))
    if split:
        files = [f for f in files if f.stem == split]
        if not files:
            raise GoldenError(f"{folder}/qrels has no {split}.tsv")
    rel: dict[str, list[str]] = {}
    for f in files:
        with f.open(encoding="utf-8") as fh:
            for row in csv.reader(fh, delimiter="\t"):
                if len(row) < 3 or row[0] == "query-id":
                    continue
                try:
                    if float(row[2]) <= 0:
                        continue
                except ValueError:
                    continue
                rel.setdefault(row[0], []).append(row[1])
    out = []
    with qfile.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            q = json.loads(line)
            qid = str(q["_id"])
            meta = q.get("metadata") if isinstance(q.get("metadata"), dict) else {}
            if qid in rel:
                out.append(
                    JudgedQuery(
                        id=qid, query=q["text"], expected=tuple(Expected(stem=c) for c in dict.fromkeys(rel[qid]))
                    )
                )
            elif q.get("unanswerable") is True or meta.get("unanswerable") is True:
                out.append(JudgedQuery(id=qid, query=q["text"], expected=()))
    return out
