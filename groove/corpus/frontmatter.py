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
import unicodedata
from typing import Any

import yaml

from groove.corpus.blocks import bounded
from groove.errors import GrooveError

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
        warnings.append(f"frontmatter is not valid YAML{where}: {problem}; indexed the body without it")
        return {}, body, body_first_line
    except Exception as exc:  # noqa: BLE001 - untrusted input (e.g. a timestamp like 2024-02-30): a warning, not a failure
        warnings.append(f"frontmatter is not valid YAML: {type(exc).__name__}: {exc}; indexed the body without it")
        return {}, body, body_first_line

    if data is None:
        return {}, body, body_first_line
    if not isinstance(data, dict):
        warnings.append(
            f"frontmatter is a YAML {type(data).__name__}, not a mapping of keys to values; indexed the body without it"
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
                return {_key(k): _to_json(v, budget, depth + 1, path) for k, v in value.items()}
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
    return bounded(str(value).strip())


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

# Japanese eras: name, the letter used in abbreviations (R6.5.14), the era's first day. A date is read in the
# era it names and must fall inside it (平成31年4月30日 is the last day of 平成; the next day is 令和元年5月1日).
_ERAS = (
    ("令和", "R", dt.date(2019, 5, 1)),
    ("平成", "H", dt.date(1989, 1, 8)),
    ("昭和", "S", dt.date(1926, 12, 25)),
    ("大正", "T", dt.date(1912, 7, 30)),
    ("明治", "M", dt.date(1868, 1, 25)),
)
_ERA_BY_KEY = {key: (name, first) for name, letter, first in _ERAS for key in (name, letter)}
_NEXT_ERA = {_ERAS[i][0]: _ERAS[i - 1] for i in range(1, len(_ERAS))}

# After NFKC (full-width digits and slashes become ASCII, ㋿ becomes 令和): 2024年5月14日, 令和6年5月14日,
# 令和元年5月1日, R6.5.14 / H31/4/30, each with an optional weekday ((火), （火曜日）) and time (10:30, 10時30分).
_WEEKDAY = r"(?:\s*[(（]\s*[月火水木金土日](?:曜日?)?\s*[)）])?"
_TIME = (
    r"(?:\s*[T\s]\s*(?P<h>\d{1,2})\s*(?::|時)\s*(?P<mi>\d{1,2})\s*(?:分)?"
    r"(?:\s*(?::)\s*(?P<s>\d{1,2})|\s*(?P<s2>\d{1,2})\s*秒)?)?"
)
_JA_DATE = re.compile(
    r"(?:(?P<y>\d{4})\s*年|(?P<era>令和|平成|昭和|大正|明治)\s*(?P<ey>元|\d{1,2})\s*年)"
    r"\s*(?P<m>\d{1,2})\s*月\s*(?P<d>\d{1,2})\s*日?" + _WEEKDAY + _TIME + r"\s*"
)
_ERA_SHORT = re.compile(r"(?P<era>[RHSTMrhstm])\s*(?P<ey>\d{1,2})\s*[./-]\s*(?P<m>\d{1,2})\s*[./-]\s*(?P<d>\d{1,2})\s*")


class DateError(GrooveError, ValueError):
    """A text that is not a date; its message says why."""

    kind = "invalid"


def japanese_date(text: str) -> str | None:
    """A Japanese date as ISO ('2024-05-14', or '2024-05-14T10:30:00' with a time); None when `text` is not
    written as one; DateError when it is but names no real day (2024年2月30日, 平成32年1月1日)."""
    m = _JA_DATE.fullmatch(text) or _ERA_SHORT.fullmatch(text)
    if m is None:
        return None
    era = m.groupdict().get("era")
    if era:
        name, first = _ERA_BY_KEY[era.upper() if len(era) == 1 else era]
        era_year = 1 if m["ey"] == "元" else int(m["ey"])
        if era_year < 1:
            raise DateError(f"{name}0年 is no year: the first year of an era is 元年 (1)")
        year = first.year + era_year - 1
    else:
        name, first, year = "", None, int(m["y"])
    try:
        day = dt.date(year, int(m["m"]), int(m["d"]))
    except ValueError as exc:
        raise DateError(f"{exc}") from None
    if first is not None:
        if day < first:
            raise DateError(f"{name} began on {first.isoformat()}, after {day.isoformat()}")
        following = _NEXT_ERA.get(name)
        if following is not None and day >= following[2]:
            raise DateError(
                f"{name} ended on {(following[2] - dt.timedelta(days=1)).isoformat()}; "
                f"{day.isoformat()} is in {following[0]}"
            )
    groups = m.groupdict()
    if groups.get("h") is None:
        return day.isoformat()
    try:
        return dt.datetime(
            day.year,
            day.month,
            day.day,
            int(groups["h"]),
            int(groups["mi"]),
            int(groups.get("s") or groups.get("s2") or 0),
        ).isoformat()
    except ValueError as exc:
        raise DateError(str(exc)) from None


def read_date(text: str) -> str:
    """A date as a person writes it in frontmatter or a filter, as ISO: YYYY-MM-DD (also / and .), an ISO
    datetime, 2024年5月14日, 令和6年5月14日 (元年 too), R6.5.14; full-width digits as well. DateError (its
    message: why) when it is none of these."""
    s = unicodedata.normalize("NFKC", text).strip()
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
    found = japanese_date(s)
    if found is None:
        raise DateError("expected YYYY-MM-DD, 2024年5月14日, 令和6年5月14日 or R6.5.14")
    return found


def date_from(value: Any, warnings: list[str]) -> str | None:
    """Normalise a frontmatter date (already JSON-converted) to ISO; a value that is no date is a warning."""
    if value is None or value == "":
        return None
    why = "expected YYYY-MM-DD, 2024年5月14日, 令和6年5月14日 or R6.5.14"
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        try:
            return read_date(str(value))
        except DateError as exc:
            why = str(exc)
    shown = value if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    warnings.append(
        f"frontmatter date {shown!r} is not a date ({why}); left the note undated (date filters leave it out)"
    )
    return None
