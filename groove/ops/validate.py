"""`groove validate`: check every note's frontmatter against the `[validate]` schema in groove.toml.

The schema (docs/operations.md): `required` keys, and per key a `type`
(string, number, integer, boolean, date, list or array, mapping), `allowed` values
(for a list, each item) and `required`; and GrooveSeek's rules, checked in its
order after the type: a required key that is empty ("" or []) unless
`allow_empty`, `min_length` / `max_length` (characters of the text, items of a
list), `pattern` (a match anywhere in the text, of each item of a list), `enum`
(the text, each item's, one of these). Text rules read a value as it is written
(`2024-05-01`, `2`). A required key with no value counts as missing. A date is a
YAML date (unquoted 2024-05-01) or text in `date_format`. Frontmatter that does
not parse is a finding whatever the schema. Each finding has the note's path and
the line of the key (line 1, the opening `---`, for a missing key). Imported by
the CLI only.

GrooveSeek's `groove-schema.toml` (its `[fields.X]` tables) reads as it is: a
schema file of that name (`--schema`, or found at the top of the notes folder
when the configuration has no `[validate]` schema), or of its shape (only
`[fields.X]` tables, one with a rule only GrooveSeek has), is read with `values_as_written`
(GrooveSeek's reading: `type = "string"` takes any single value, a key with no
value is absent).

`groove validate --schema FILE` checks against a schema file instead of the
configuration's `[validate]`: TOML or YAML (by its extension; else whichever
reads), holding the keys of `[validate]` at its top (`required`, `date_format`,
`fields`), or a `[validate]` table (a groove.toml).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from groove.config import ConfigError, FieldRule, Settings, ValidateSettings, read_config_text
from groove.corpus.markdown import normalise_text
from groove.corpus.scan import Ignore, NoteReadError, read_note, scan_folders


@dataclass
class Finding:
    path: str  # relative to the notes folder
    line: int
    key: str | None
    message: str


TYPES: dict[str, str] = {
    "string": "text",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
    "date": "a date",
    "list": "a list",
    "array": "a list",
    "mapping": "a mapping of keys to values",
}
GROOVESEEK_SCHEMA = "groove-schema.toml"  # GrooveSeek's schema file, read from the notes folder's top


def _frontmatter(text: str) -> tuple[str | None, int]:
    """(YAML text between the fences, or None without frontmatter; the line of the closing fence or 0)."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return None, 0
    for i, line in enumerate(lines[1:], start=2):
        if line.rstrip() in ("---", "..."):
            return "\n".join(lines[1 : i - 1]), i
    return None, -1


def _type_ok(value: Any, kind: str, date_format: str, as_written: bool = False) -> bool:
    if kind == "string":
        return not isinstance(value, (list, dict)) if as_written else isinstance(value, str)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("list", "array"):
        return isinstance(value, list)
    if kind == "mapping":
        return isinstance(value, dict)
    if kind == "date":
        if isinstance(value, (dt.date, dt.datetime)):
            return True
        if isinstance(value, str):
            try:
                dt.datetime.strptime(value.strip(), date_format)
                return True
            except ValueError:
                return False
        return False
    raise ValueError(kind)


def check_text(rel: str, text: str, settings: Settings) -> Iterator[Finding]:
    schema = settings.validate_
    text = normalise_text(text)
    yaml_text, close = _frontmatter(text)
    rules: dict[str, FieldRule] = dict(schema.fields)
    required = list(dict.fromkeys([*schema.required, *(k for k, r in rules.items() if r.required)]))
    if close == -1:
        yield Finding(rel, 1, None, "frontmatter opened with '---' is never closed by '---' or '...'")
        return
    if yaml_text is None:
        for key in required:
            yield Finding(rel, 1, key, f"required key `{key}` is missing (the note has no frontmatter)")
        return
    try:
        node = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(yaml_text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        yield Finding(
            rel,
            (mark.line + 2) if mark else 1,
            None,
            f"frontmatter is not valid YAML: {exc.problem or exc.context or 'unreadable'}",
        )
        return
    except yaml.YAMLError as exc:  # e.g. a date like 2024-02-30
        yield Finding(rel, 1, None, f"frontmatter is not valid YAML: {exc}")
        return
    except ValueError as exc:
        yield Finding(rel, 1, None, f"frontmatter is not valid YAML: {exc}")
        return
    if data is None:
        data, node = {}, None
    if not isinstance(data, dict) or (node is not None and not isinstance(node, yaml.MappingNode)):
        yield Finding(rel, 2, None, "frontmatter is not a mapping of keys to values")
        return
    lines: dict[str, tuple[int, Any]] = {}
    for key_node, value_node in node.value if node is not None else []:
        lines[str(key_node.value)] = (key_node.start_mark.line + 2, value_node)
    present = {str(k) for k in data}
    as_written = schema.values_as_written
    for key in required:
        if key not in present:
            yield Finding(rel, 1, key, f"required key `{key}` is missing")
        elif key not in rules and _value(data, key) is None:
            yield Finding(rel, lines.get(key, (1, None))[0], key, f"required key `{key}` has no value")
    for key, rule in rules.items():
        if key not in present:
            continue
        value = _value(data, key)
        line, value_node = lines.get(key, (1, None))
        if value is None:  # a key with no value
            if key in required:
                yield Finding(rel, line, key, f"required key `{key}` has no value")
            elif not as_written and (rule.type is not None or rule.allowed is not None):
                yield Finding(rel, line, key, f"`{key}` is empty")
            continue
        if rule.type is not None and not _type_ok(value, rule.type, schema.date_format, as_written):
            want = TYPES[rule.type] + (f" (format {schema.date_format})" if rule.type == "date" else "")
            yield Finding(rel, line, key, f"`{key}` should be {want}, got {_show(value)}")
            continue
        if value in ("", []) and key in required and not rule.allow_empty:
            yield Finding(rel, line, key, f"required key `{key}` is empty (allow_empty = true lets it be)")
            continue
        yield from _text_rules(rel, key, rule, value, value_node, line)
        if rule.allowed is not None:
            items = value if isinstance(value, list) else [value]
            nodes = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node] * len(items)
            for item, item_node in zip(items, nodes, strict=False):  # a node per item
                if item not in rule.allowed:
                    at = item_node.start_mark.line + 2 if item_node is not None else line
                    yield Finding(
                        rel,
                        at,
                        key,
                        f"`{key}` value {_show(item)} is not allowed; allowed: "
                        + ", ".join(_show(a) for a in rule.allowed),
                    )


def _value(data: dict[Any, Any], key: str) -> Any:
    return next(v for k, v in data.items() if str(k) == key)


def _written(node: Any) -> str | None:
    """A scalar's text as written in the note (`2024-05-01`, `2`, `yes`); None for a list or a mapping."""
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _text_rules(rel: str, key: str, rule: FieldRule, value: Any, node: Any, line: int) -> Iterator[Finding]:
    """GrooveSeek's rules, in its order: length, then pattern, then enum (a list: its items, each)."""
    if rule.min_length is None and rule.max_length is None and rule.pattern is None and rule.enum is None:
        return
    if isinstance(value, dict):
        yield Finding(rel, line, key, f"`{key}` should be text or a list, got a mapping")
        return
    items: list[tuple[str | None, int]]
    if isinstance(value, list):
        size = len(value)
        nodes = node.value if isinstance(node, yaml.SequenceNode) else []
        items = [(_written(n), n.start_mark.line + 2) for n in nodes]
        unit = "item(s)"
    else:
        text = _written(node)
        text = text if text is not None else str(value)
        size = len(text)
        items = [(text, line)]
        unit = "character(s)"
    low, high = rule.min_length, rule.max_length
    if (low is not None and size < low) or (high is not None and size > high):
        bounds = " and ".join(
            ([f"at least {low}"] if low is not None else []) + ([f"at most {high}"] if high is not None else [])
        )
        yield Finding(rel, line, key, f"`{key}` has {size} {unit}, should have {bounds}")
    for text, at in items:
        if text is None:
            if rule.pattern is not None or rule.enum is not None:
                yield Finding(rel, at, key, f"`{key}` holds an item that is not a single value")
            continue
        if rule.pattern is not None and re.search(rule.pattern, text) is None:
            yield Finding(rel, at, key, f"`{key}` value {_show(text)} does not match pattern {rule.pattern}")
        if rule.enum is not None and text not in rule.enum:
            yield Finding(
                rel, at, key, f"`{key}` value {_show(text)} is not one of " + ", ".join(_show(e) for e in rule.enum)
            )


def _show(value: Any) -> str:
    s = repr(value.isoformat() if isinstance(value, (dt.date, dt.datetime)) else value)
    return s if len(s) <= 60 else s[:57] + "..."


SCHEMA_KEYS = tuple(ValidateSettings.model_fields)


def load_schema(path: Path) -> ValidateSettings:
    """A schema file (`--schema`): TOML or YAML with the keys of `[validate]`; ConfigError in one line naming the
    file and what is wrong."""
    try:
        text = read_config_text(path, what="schema file")
    except FileNotFoundError:
        raise ConfigError(f"schema file {path} does not exist") from None
    suffix = path.suffix.lower()
    data: Any
    if suffix == ".toml":
        data = _toml(path, text)
    elif suffix in (".yaml", ".yml"):
        data = _yaml(path, text)
    else:  # no telling extension: TOML if it reads as TOML, else YAML
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            data = _yaml(path, text)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"schema file {path} holds a {type(data).__name__}, not the keys of [validate] ({', '.join(SCHEMA_KEYS)})"
        )
    if set(data) == {"validate"} and isinstance(data["validate"], dict):
        data = data["validate"]  # a groove.toml, or a file with a [validate] table
    elif "values_as_written" not in data and (path.name == GROOVESEEK_SCHEMA or _grooveseek_shaped(data)):
        data = {**data, "values_as_written": True}  # GrooveSeek's file, read as GrooveSeek reads notes
    try:
        return ValidateSettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            raise ConfigError(
                f"unknown key `{where}` in schema file {path} (a schema has the keys of [validate]: "
                f"{', '.join(SCHEMA_KEYS)}; a field's rule: {', '.join(FieldRule.model_fields)})"
            ) from None
        raise ConfigError(
            f"invalid value for `{where}` in schema file {path}: {err['msg']} (got {err.get('input')!r})"
        ) from None


GROOVESEEK_RULES = {"pattern", "enum", "min_length", "max_length", "allow_empty"}


def _grooveseek_shaped(data: dict[str, Any]) -> bool:
    """A schema as GrooveSeek writes one: only `[fields.X]` tables, one of them with a rule only it has."""
    fields = data.get("fields")
    if set(data) != {"fields"} or not isinstance(fields, dict):
        return False
    rules = [r for r in fields.values() if isinstance(r, dict)]
    return any(GROOVESEEK_RULES & set(r) or r.get("type") == "array" for r in rules)


def _toml(path: Path, text: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"schema file {path} is not valid TOML: {exc}") from None


def _yaml(path: Path, text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"schema file {path} is not valid YAML{at}: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, ValueError) as exc:
        raise ConfigError(f"schema file {path} is not valid YAML: {exc}") from None


def validate(settings: Settings, *, fail_fast: bool = False, schema: Path | None = None) -> dict[str, Any]:
    """Every note's frontmatter against the configuration's `[validate]`, or the schema file `schema`, or
    (neither given) GrooveSeek's groove-schema.toml at the top of the (first) notes folder."""
    folders = settings.folders()
    if schema is None and not (settings.validate_.required or settings.validate_.fields):
        beside = folders.first.path / GROOVESEEK_SCHEMA
        schema = beside if beside.is_file() else None
    if schema is not None:
        settings = settings.model_copy(update={"validate_": load_schema(schema)})
    ix = settings.index
    files = scan_folders(
        folders, lambda f: Ignore(f.path, ix.exclude_dirs, ix.extensions, gitignore=ix.gitignore), ix.max_file_bytes
    ).files
    findings: list[Finding] = []
    checked = 0
    for rel, info in sorted(files.items()):
        try:
            text, _ = read_note(info, ix.max_file_bytes)
        except FileNotFoundError:
            continue
        except NoteReadError as exc:
            findings.append(Finding(rel, 1, None, f"cannot be read: {exc}"))
        else:
            checked += 1
            findings += check_text(rel, text, settings)
        if fail_fast and findings:
            findings = findings[:1]
            break
    rules = settings.validate_
    return {
        "kb_path": folders.describe(),
        "folders": {f.name: str(f.path) for f in folders} if folders.named else None,
        "notes_checked": checked,
        "schema": bool(rules.required or rules.fields),
        "schema_file": str(schema) if schema is not None else None,
        "findings": [asdict(f) for f in findings],
        "stopped_early": bool(fail_fast and findings),
        "exit_code": 1 if findings else 0,
    }


def display_path(report: dict[str, Any], rel: str) -> str:
    """The note's path as CI annotations want it: relative to the working directory when inside it."""
    named = report.get("folders")
    if named:  # several folders: the first part of the path names the folder
        head, _, rest = rel.partition("/")
        full = Path(named.get(head, report["kb_path"])) / rest
    else:
        full = Path(report["kb_path"]) / rel
    try:
        return full.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return os.fspath(full)


def format_text(report: dict[str, Any]) -> str:
    lines = [f"{display_path(report, f['path'])}:{f['line']}: {f['message']}" for f in report["findings"]]
    if not report["schema"]:
        lines.append(
            f"(the schema file {report['schema_file']} requires nothing: only checked that frontmatter parses)"
            if report.get("schema_file")
            else "(no [validate] schema in the configuration: only checked that frontmatter parses)"
        )
    n = len(report["findings"])
    lines.append(
        f"{report['notes_checked']} note(s) checked: "
        + (f"{n} finding(s)" if n else "all valid")
        + (" (stopped at the first: --fail-fast)" if report["stopped_early"] else "")
    )
    return "\n".join(lines) + "\n"


def _escape(value: str, prop: bool = False) -> str:
    out = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return out.replace(":", "%3A").replace(",", "%2C") if prop else out


def format_github(report: dict[str, Any]) -> str:
    """GitHub Actions workflow commands: one `::error file=...,line=...::message` per finding."""
    lines = [
        f"::error file={_escape(display_path(report, f['path']), True)},line={f['line']},title=groove validate::"
        f"{_escape(f['message'])}"
        for f in report["findings"]
    ]
    return "\n".join(lines) + ("\n" if lines else "")
