"""`groove validate`: check every note's frontmatter against the `[validate]` schema in groove.toml.

The schema (docs/operations.md): `required` keys, and per key a `type`
(string, number, integer, boolean, date, list, mapping), `allowed` values
(for a list, each item) and `required`. A date is a YAML date (unquoted
2024-05-01) or text in `date_format`. Frontmatter that does not parse is a
finding whatever the schema. Each finding has the note's path and the line
of the key (line 1, the opening `---`, for a missing key). Imported by the
CLI only.

`groove validate --schema FILE` checks against a schema file instead of the
configuration's `[validate]`: TOML or YAML (by its extension; else whichever
reads), holding the keys of `[validate]` at its top (`required`, `date_format`,
`fields`), or a `[validate]` table (a groove.toml).
"""

from __future__ import annotations

import datetime as dt
import os
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
    "mapping": "a mapping of keys to values",
}


def _frontmatter(text: str) -> tuple[str | None, int]:
    """(YAML text between the fences, or None without frontmatter; the line of the closing fence or 0)."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return None, 0
    for i, line in enumerate(lines[1:], start=2):
        if line.rstrip() in ("---", "..."):
            return "\n".join(lines[1 : i - 1]), i
    return None, -1


def _type_ok(value: Any, kind: str, date_format: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "list":
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
    for key in required:
        if key not in present:
            yield Finding(rel, 1, key, f"required key `{key}` is missing")
    for key, rule in rules.items():
        if key not in present:
            continue
        value = next(v for k, v in data.items() if str(k) == key)
        line, value_node = lines.get(key, (1, None))
        if value is None:
            if rule.type is not None or rule.allowed is not None:
                yield Finding(rel, line, key, f"`{key}` is empty")
            continue
        if rule.type is not None and not _type_ok(value, rule.type, schema.date_format):
            want = TYPES[rule.type] + (f" (format {schema.date_format})" if rule.type == "date" else "")
            yield Finding(rel, line, key, f"`{key}` should be {want}, got {_show(value)}")
            continue
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
    try:
        return ValidateSettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            raise ConfigError(
                f"unknown key `{where}` in schema file {path} (a schema has the keys of [validate]: "
                f"{', '.join(SCHEMA_KEYS)}; a field's rule: type, allowed, required)"
            ) from None
        raise ConfigError(
            f"invalid value for `{where}` in schema file {path}: {err['msg']} (got {err.get('input')!r})"
        ) from None


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
    """Every note's frontmatter against the configuration's `[validate]`, or the schema file `schema`."""
    if schema is not None:
        settings = settings.model_copy(update={"validate_": load_schema(schema)})
    folders = settings.folders()
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
