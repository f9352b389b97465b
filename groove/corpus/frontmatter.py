"""Frontmatter: the YAML block at the top of a note, and the title, tags and date read from it.

Pure functions over the normalised text (see markdown.py for the rules). Broken
frontmatter never drops a note: every problem becomes a warning and the body
after the closing fence is still indexed.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
from typing import Any

import yaml

# Frontmatter larger than this many values (after following YAML aliases) or
# nested deeper than this is dropped with a warning: an alias bomb must not
# blow up memory or the JSON column it is stored in.
_MAX_FRONTMATTER_VALUES = 10_000
_MAX_FRONTMATTER_DEPTH = 64


def split_frontmatter(text: str, warnings: list[str], max_bytes: int | None = None) -> tuple[dict[str, Any], str, int]:
    """Return (frontmatter, body, 1-based line number where the body starts).

    A frontmatter block of more than `max_bytes` (UTF-8) is not parsed: a warning
    says so and the body after it is indexed.
    """
    first_end = text.find("\n")
    first = text if first_end < 0 else text[:first_end]
    if first.rstrip() != "---":
        return {}, text, 1

    offset = len(first) + 1  # start of line 2
    line_no = 2
    close_at = -1
    while offset <= len(text):
        end = text.find("\n", offset)
        line = text[offset:] if end < 0 else text[offset:end]
        if line.rstrip() in ("---", "..."):
            close_at = offset
            break
        if end < 0:
            break
        offset = end + 1
        line_no += 1
    if close_at < 0:
        warnings.append(
            "frontmatter opened with '---' on line 1 is never closed by '---' or '...'; "
            "indexed the whole file as the body"
        )
        return {}, text, 1

    yaml_text = text[first_end + 1 : close_at]
    close_end = text.find("\n", close_at)
    body = "" if close_end < 0 else text[close_end + 1 :]
    body_first_line = line_no + 1

    if max_bytes is not None and len(yaml_text) > max_bytes // 4:
        size = len(yaml_text.encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            warnings.append(
                f"cut: frontmatter is {size} bytes, more than max_frontmatter_bytes {max_bytes}; "
                "its keys (title, tags, date) were not read, the body was indexed. Shorten it, "
                "or raise [index] max_frontmatter_bytes"
            )
            return {}, body, body_first_line
    try:
        data = yaml.safe_load(yaml_text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = exc.problem or exc.context or "unreadable"
        warnings.append(
            f"frontmatter is not valid YAML{where}: {problem}; indexed the body without it"
        )
        return {}, body, body_first_line
    except Exception as exc:  # untrusted input: e.g. a timestamp like 2024-02-30
        warnings.append(
            f"frontmatter is not valid YAML: {type(exc).__name__}: {exc}; "
            "indexed the body without it"
        )
        return {}, body, body_first_line

    if data is None:
        return {}, body, body_first_line
    if not isinstance(data, dict):
        warnings.append(
            f"frontmatter is a YAML {type(data).__name__}, not a mapping of keys to values; "
            "indexed the body without it"
        )
        return {}, body, body_first_line
    try:
        front = _to_json(data, _Budget(), depth=0, path=set())
    except _Unkeepable as exc:
        warnings.append(f"frontmatter {exc}; indexed the body without it")
        return {}, body, body_first_line
    return front, body, body_first_line


class _Unkeepable(Exception):
    pass


class _Budget:
    def __init__(self) -> None:
        self.left = _MAX_FRONTMATTER_VALUES

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _Unkeepable(f"has more than {_MAX_FRONTMATTER_VALUES} values")


def _to_json(value: Any, budget: _Budget, depth: int, path: set[int]) -> Any:
    """Make a YAML value JSON-serialisable: dates to ISO strings, others to str."""
    budget.spend()
    if depth > _MAX_FRONTMATTER_DEPTH:
        raise _Unkeepable(f"is nested deeper than {_MAX_FRONTMATTER_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        if id(value) in path:
            raise _Unkeepable("refers to itself (a YAML alias cycle)")
        path.add(id(value))
        try:
            if isinstance(value, dict):
                return {
                    _key(k): _to_json(v, budget, depth + 1, path) for k, v in value.items()
                }
            items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
            return [_to_json(v, budget, depth + 1, path) for v in items]
        finally:
            path.discard(id(value))
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, (dt.date, dt.datetime)):
        return key.isoformat()
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def title_from(value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        return ""
    return str(value).strip()


_TAG_SEPARATORS = re.compile(r"[,\s]+")


def tags_from(value: Any) -> tuple[str, ...]:
    """Tags from a YAML list, or from a comma/space separated string."""
    if value is None or isinstance(value, (bool, dict)):
        return ()
    if isinstance(value, list):
        raw = [str(v) for v in value if v is not None and not isinstance(v, (list, dict, bool))]
    else:
        raw = _TAG_SEPARATORS.split(str(value))
    seen: dict[str, None] = {}
    for tag in raw:
        tag = tag.strip().lstrip("#").strip()
        if tag:
            seen.setdefault(tag, None)
    return tuple(seen)


_DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%Y.%m.%d", "%Y年%m月%d日")
_DATETIME_FORMATS = ("%Y/%m/%d %H:%M", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M")


def date_from(value: Any, warnings: list[str]) -> str | None:
    """Normalise a frontmatter date (already JSON-converted) to ISO."""
    if value is None or value == "":
        return None
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        s = str(value).strip()
        try:
            return dt.date.fromisoformat(s).isoformat()
        except ValueError:
            pass
        for fmt in _DATE_FORMATS:
            try:
                return dt.datetime.strptime(s, fmt).date().isoformat()
            except ValueError:
                pass
        try:
            return dt.datetime.fromisoformat(s).isoformat()
        except ValueError:
            pass
        for fmt in _DATETIME_FORMATS:
            try:
                return dt.datetime.strptime(s, fmt).isoformat()
            except ValueError:
                pass
    shown = value if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    warnings.append(
        f"frontmatter date {shown!r} is not a date (expected YYYY-MM-DD); "
        "left the note undated"
    )
    return None
