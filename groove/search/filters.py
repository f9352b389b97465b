"""Search filters: which documents a search may return.

Pure matching (`Filters.matches`) plus one read that turns a filter into the
set of allowed document ids; the retrievers then search only inside that set,
so a rare filter still fills `limit` (no over-fetch-and-hope).

The store selects what an index does well (`documents_matching`): tags (stored
folded by `fold_tag`, so the same rule as `list_documents`) and dates (an index
on the documents' date). Python sees only the rows the store let through, and
only for what a store cannot do: gitignore-style path globs (paths only) and
frontmatter fields (decoded only when a field filter is given).

Path globs are a client's input, so they are bounded (MAX_PATH_GLOBS globs, each
at most MAX_GLOB_CHARS characters and MAX_GLOB_STARS `*`) and matched by
groove/corpus/globs.py, whose cost is linear in the path and the glob (a regex
translation backtracked for hours on `*?*?*?...`). The matching of the rows
runs in a worker thread all the same, so that many notes times many globs
never hold the event loop.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import anyio

from groove.corpus import globs as globs_mod
from groove.corpus.frontmatter import DateError, read_date
from groove.corpus.globs import GlobError, GlobSet
from groove.corpus.tags import fold_tag
from groove.search.compiler import QueryError
from groove.store.protocols import DocumentFilter, SearchReads

#: Most path globs in one search (each glob is bounded in groove/corpus/globs.py).
MAX_PATH_GLOBS = 32


def check_globs(path_globs: Sequence[str]) -> None:
    """QueryError, in one line naming the limit, for too many globs or a glob that is refused."""
    if len(path_globs) > MAX_PATH_GLOBS:
        raise QueryError(f"path_globs has {len(path_globs)} items; at most {MAX_PATH_GLOBS} are allowed")
    for g in path_globs:
        if g == "!":
            raise QueryError("a path glob '!' excludes nothing; write !pattern")
        try:
            globs_mod.parse(g[1:] if g.startswith("!") else g)
        except GlobError as exc:
            raise QueryError(f"path glob {globs_mod.shown(g)} {exc}") from None


#: A heading `exclude_headings` names is at most this long (a heading path as get_document takes it is 1024).
MAX_EXCLUDED_HEADING_CHARS = 1024
MAX_EXCLUDED_HEADINGS = 500  # headings in one `exclude_headings` list


def check_headings(headings: Sequence[Any], name: str) -> list[str]:
    """The headings of an `exclude_headings` list, stripped of spaces and leading #'s; QueryError, in one line,
    for one that is not text, is empty, or is too long."""
    if len(headings) > MAX_EXCLUDED_HEADINGS:
        raise QueryError(f"{name} has {len(headings)} items; at most {MAX_EXCLUDED_HEADINGS} are allowed")
    out: list[str] = []
    for given in headings:
        if not isinstance(given, str):
            raise QueryError(f"{name} takes heading texts, got {given!r}")
        text = given.strip().lstrip("#").strip()
        if not text:
            raise QueryError(
                f"{name} has an empty heading ({given!r}); give the heading's text as the note writes it, "
                'e.g. "Further reading" or "参考リンク"'
            )
        if len(text) > MAX_EXCLUDED_HEADING_CHARS:
            raise QueryError(f"{name} has a heading of {len(text)} characters; at most {MAX_EXCLUDED_HEADING_CHARS}")
        out.append(text)
    return out


def _heading_key(text: str) -> str:
    """A heading as `exclude_headings` compares it: case-folded, inner spaces collapsed."""
    return " ".join(text.casefold().split())


def section_headings(heading: str, context: str) -> list[str]:
    """The headings of a chunk's breadcrumb: its context ("Title > Parent > Heading") after the note's title,
    and its own heading (a note whose first heading repeats its title keeps that heading as the title)."""
    parts = context.split(" > ")[1:] if context else []
    return [*parts, heading] if heading else parts


def under_headings(heading: str, context: str, excluded: frozenset[str]) -> bool:
    """Whether a chunk sits under one of the `excluded` headings (each `_heading_key`ed): its own heading or
    any heading above it, matched exactly but for case."""
    return any(_heading_key(h) in excluded for h in section_headings(heading, context))


async def excluded_sections(reads: SearchReads, headings: Sequence[str]) -> set[int]:
    """The chunks under any of `headings` (`exclude_headings`): every leg of a search leaves them out before it
    ranks, as it leaves out an exclusion's (-word) chunks, so a search still fills its limit. Empty: none."""
    if not headings:
        return set()
    excluded = frozenset(_heading_key(h) for h in headings)
    labels = await reads.section_labels()
    key = (excluded, id(labels))
    seen = _SECTIONS.get(key)
    if seen is not None and seen[0]() is labels:  # the same index as last time: the same sections
        return set(seen[1])
    found = await anyio.to_thread.run_sync(_under, labels, excluded)
    try:
        ref = weakref.ref(labels)
    except TypeError:  # labels a store makes anew for each search (PostgreSQL): nothing to keep
        return found
    for stale in [k for k, (r, _) in _SECTIONS.items() if r() is None]:  # labels the store has dropped
        del _SECTIONS[stale]
    if len(_SECTIONS) >= _SECTIONS_KEPT:
        _SECTIONS.pop(next(iter(_SECTIONS)))
    _SECTIONS[key] = (ref, frozenset(found))
    return found


# The sections the last few heading lists left out, with a weak reference to the labels they were picked from: a
# store hands the same labels object back while its index is unchanged (SQLite, per reader), so a list the settings
# give every search is matched once per change of the index and reader, not once per search; and labels the store
# has let go of are not kept alive here.
_SECTIONS: dict[tuple[frozenset[str], int], tuple[weakref.ref[Any], frozenset[int]]] = {}
_SECTIONS_KEPT = 16


def _under(labels: Iterable[tuple[int, str, str]], excluded: frozenset[str]) -> set[int]:
    return {cid for cid, heading, context in labels if under_headings(heading, context, excluded)}


def _norm_date(value: str, name: str) -> str:
    """A filter's date as ISO: YYYY-MM-DD (a datetime's day), or as notes write it (2024年5月14日, 令和6年5月14日,
    R6.5.14: corpus/frontmatter.py `read_date`)."""
    try:
        return dt.date.fromisoformat(str(value)[:10]).isoformat()
    except ValueError:
        pass
    try:
        return read_date(str(value))[:10]
    except DateError:
        raise QueryError(
            f"{name} must be an ISO date like 2026-01-31 (or as notes write it: 2026年1月31日, "
            f"令和8年1月31日), got {value!r}"
        ) from None


@dataclass(frozen=True)
class Filters:
    path_globs: tuple[str, ...] = ()  # gitignore-style; a leading '!' excludes
    tags_any: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    date_from: str | None = None  # inclusive, ISO date
    date_to: str | None = None  # inclusive, ISO date
    fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        path_globs: Sequence[str] | None = None,
        tags_any: Sequence[str] | None = None,
        tags_all: Sequence[str] | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
        fields: Mapping[str, Any] | None = None,
    ) -> Filters:
        """Validate user input into a Filters (QueryError with a clear message on bad input)."""
        globs = tuple(g.strip() for g in (path_globs or ()) if g and g.strip())
        check_globs(globs)
        if fields is not None and not isinstance(fields, Mapping):
            raise QueryError("fields must be an object of frontmatter key -> value")
        dfrom = _norm_date(date_from, "date_from") if date_from else None
        dto = _norm_date(date_to, "date_to") if date_to else None
        if dfrom and dto and dfrom > dto:
            raise QueryError(f"date_from {dfrom} is after date_to {dto}")
        return cls(
            path_globs=globs,
            tags_any=tuple(_tag(t) for t in (tags_any or ()) if _tag(t)),
            tags_all=tuple(_tag(t) for t in (tags_all or ()) if _tag(t)),
            date_from=dfrom,
            date_to=dto,
            fields=dict(fields or {}),
        )

    @property
    def empty(self) -> bool:
        return not (self.path_globs or self.tags_any or self.tags_all or self.date_from or self.date_to or self.fields)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.path_globs:
            out["path_globs"] = list(self.path_globs)
        if self.tags_any:
            out["tags_any"] = list(self.tags_any)
        if self.tags_all:
            out["tags_all"] = list(self.tags_all)
        if self.date_from:
            out["date_from"] = self.date_from
        if self.date_to:
            out["date_to"] = self.date_to
        if self.fields:
            out["fields"] = dict(self.fields)
        return out

    @cached_property
    def _specs(self) -> tuple[GlobSet | None, GlobSet | None]:
        """(globs a path must match, `!` globs it must not), each as gitignore lines; compiled once per filter."""
        check_globs(self.path_globs)  # a Filters built directly, not through build()
        pos = [g for g in self.path_globs if not g.startswith("!")]
        neg = [g[1:] for g in self.path_globs if g.startswith("!")]
        return (
            _glob_set(pos) if pos else None,
            _glob_set(neg) if neg else None,
        )

    def path_matches(self, path: str) -> bool:
        pos, neg = self._specs
        if pos is not None and not pos.match(path):
            return False
        if neg is not None and neg.match(path):
            return False
        return True

    def matches(self, path: str, tags: Sequence[str], date: str | None, frontmatter: Mapping[str, Any]) -> bool:
        if not self.path_matches(path):
            return False
        folded = {_tag(t) for t in tags}
        if self.tags_any and not folded.intersection(self.tags_any):
            return False
        if self.tags_all and not set(self.tags_all) <= folded:
            return False
        if self.date_from or self.date_to:
            if not date:
                return False
            day = str(date)[:10]
            if self.date_from and day < self.date_from:
                return False
            if self.date_to and day > self.date_to:
                return False
        for key, want in self.fields.items():
            if key not in frontmatter or not _field_equal(frontmatter[key], want):
                return False
        return True


_tag = fold_tag


def _glob_set(lines: Sequence[str]) -> GlobSet:
    globs, refused = globs_mod.parse_lines(lines)
    if refused:  # check_globs ran first, so this is only a guard
        raise QueryError(f"path glob {globs_mod.shown(refused[0][1])} {refused[0][2]}")
    return globs


def _field_equal(have: Any, want: Any) -> bool:
    if have == want:
        return True
    if isinstance(have, list) and not isinstance(want, list):
        return any(_field_equal(h, want) for h in have)
    if isinstance(have, bool) or isinstance(want, bool):
        return str(have).lower() == str(want).lower()
    return str(have) == str(want)


async def allowed_documents(reads: SearchReads, filters: Filters) -> list[int] | None:
    """Ids of the documents a filter allows; None when there is no filter. The store selects by tags and
    dates; the path globs and frontmatter fields are matched here."""
    if filters.empty:
        return None
    rows = await reads.documents_matching(
        DocumentFilter(
            tags_any=filters.tags_any,
            tags_all=filters.tags_all,
            date_from=filters.date_from,
            date_to=filters.date_to,
            with_frontmatter=bool(filters.fields),
        )
    )
    if not (filters.path_globs or filters.fields):
        return [r[0] for r in rows]
    # Linear per row (groove/corpus/globs.py), but rows x globs can still add up: off the event loop.
    return await anyio.to_thread.run_sync(_select_rows, filters, rows)


def _select_rows(filters: Filters, rows: Iterable[Any]) -> list[int]:
    """The ids of the rows (id, path[, frontmatter]) whose path and frontmatter fields the filter allows."""
    out = []
    for row in rows:
        if filters.path_globs and not filters.path_matches(row[1]):
            continue
        if filters.fields:
            front = row[2]
            if not all(k in front and _field_equal(front[k], want) for k, want in filters.fields.items()):
                continue
        out.append(row[0])
    return out


# --- a filter that leaves no note -------------------------------------------------------------------------------

SUGGESTIONS = 3  # existing values named for a value that matches nothing


def _close(value: str, candidates: Iterable[str]) -> list[str]:
    """Existing values spelled close to `value` (case-folded), best first."""
    pool = {c.casefold(): c for c in candidates}
    found = difflib.get_close_matches(value.casefold(), list(pool), n=SUGGESTIONS, cutoff=0.6)
    return [pool[f] for f in found]


def _folders_of(paths: Iterable[str]) -> list[str]:
    """Every folder some note is in (`a`, `a/b`, ...), as path globs name them."""
    out: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return sorted(out)


def _near_folders(wanted: str, folders: Sequence[str]) -> list[str]:
    """Folders spelled close to `wanted`: beside it (the same parent, the last name close), else anywhere."""
    parent, _, name = wanted.rpartition("/")
    siblings = {f.rpartition("/")[2]: f for f in folders if f.rpartition("/")[0] == parent}
    found = [siblings[n] for n in _close(name, siblings)] if siblings else []
    return found or _close(wanted, folders)


def _glob_folder(glob: str) -> str:
    """The literal folder a glob starts with (`work/plans/**` -> `work/plans`), or ''."""
    head: list[str] = []
    for part in glob.lstrip("/").split("/")[:-1]:
        if any(c in part for c in "*?["):
            break
        head.append(part)
    return "/".join(head)


async def why_nothing(reads: SearchReads, filters: Filters) -> dict[str, Any]:
    """Why a filter leaves no note (a search's `filter_matched_nothing`): each part of it that matches no note
    alone, with existing values spelled close to it; or, when every part matches notes, that no note matches them
    all. The notes were not searched: this is not the notes' silence on the query (off_topic stays false)."""
    parts: list[dict[str, Any]] = []

    async def count(**part: Any) -> int:
        return len(await allowed_documents(reads, Filters(**part)) or [])

    tags: list[str] | None = None
    paths: list[str] | None = None
    for key in ("tags_any", "tags_all"):
        for tag in getattr(filters, key):
            if await count(tags_any=(tag,)):
                continue
            if tags is None:
                tags = await reads.tag_names()
            parts.append({"filter": key, "value": tag, "notes": 0, "did_you_mean": _close(tag, tags)})
    positive = [g for g in filters.path_globs if not g.startswith("!")]
    if filters.path_globs and not await count(path_globs=filters.path_globs):
        if paths is None:
            paths = [r[1] for r in await reads.documents_matching(DocumentFilter())]
        folders = _folders_of(paths)
        near: list[str] = []
        for glob in positive:
            near += [f"{f}/**" for f in _near_folders(_glob_folder(glob) or glob.split("/")[0], folders)]
        parts.append(
            {
                "filter": "path_globs",
                "value": list(filters.path_globs),
                "notes": 0,
                "did_you_mean": list(dict.fromkeys(near))[:SUGGESTIONS],
            }
        )
    if (filters.date_from or filters.date_to) and not await count(date_from=filters.date_from, date_to=filters.date_to):
        parts.append(
            {"filter": "date", "value": {"date_from": filters.date_from, "date_to": filters.date_to}, "notes": 0,
             "did_you_mean": []}
        )  # fmt: skip
    for key, want in filters.fields.items():
        if not await count(fields={key: want}):
            parts.append({"filter": f"fields.{key}", "value": want, "notes": 0, "did_you_mean": []})
    if parts:
        shown = "; ".join(
            f"{p['filter']} {json.dumps(p['value'], ensure_ascii=False)} matches no note"
            + (f" (did you mean {', '.join(p['did_you_mean'])}?)" if p["did_you_mean"] else "")
            for p in parts
        )
    else:
        shown = "each part of the filter matches notes, but no note matches them all"
    return {"message": f"the filter leaves no note to search: {shown}", "parts": parts}
