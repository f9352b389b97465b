"""Which `groove.toml` found in the current folder may decide where note text goes.

A `groove.toml` in the current folder may be anyone's: a cloned repository's, a shared
folder's. It may choose what is indexed and how it is searched, but not where note text
goes or who may connect, until the user approves the file with `groove trust`. The file
the user named (`--config`, `GROOVE_CONFIG`), the one in the user config folder and the
`GROOVE_*` variables are the user's own and are never asked about.

A file needs approval when it sets (docs/configuration.md, "Files found in the current folder"):

- `[embedding.openai] endpoint` off loopback: note text would be sent there;
- `[serve] bind` off loopback: the server would answer other machines;
- `[serve.http] token` or `token_env`: whoever wrote the file would know (or choose) the token;
- `[serve.http] allowed_hosts` or `allowed_origins`: web pages from there could reach the server
  through the user's browser;
- `index_path` outside the file's own folder: a full copy of every note would be written there;
- `[store] url`: every note's text would be written into that database (even one on this machine
  may be someone else's);
- `kb_path` while the user's own settings send note text off this machine (an endpoint, a bind
  off loopback or a store set elsewhere): the file would choose which files go there.

An approval is the file's absolute path and the sha256 of its bytes, kept in
`<user data dir>/groove/trusted.json`; a changed file needs approving again.

The core (`risks`, `refusal`, `digest`, `is_loopback_host`) is pure; `TrustStore` reads and
writes the record. This module sits beside every room: it imports only groove.errors.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from groove.dirs import user_dirs
from groove.errors import GrooveError

DEFAULT_TOKEN_ENV = "GROOVE_TOKEN"
MAX_STORE_BYTES = 1_000_000
_SHOWN = 200  # characters of a value shown in a message


@dataclass(frozen=True)
class Risk:
    """One thing a file sets that needs approval: the key as written in the file, its value as shown, why."""

    key: str
    value: str
    why: str

    def __str__(self) -> str:
        return f"{self.key} = {self.value} ({self.why})"


# --- the pure core --------------------------------------------------------------------------


def is_loopback_host(host: str) -> bool:
    """`localhost` or a loopback address literal; any other name counts as another machine (it is not resolved)."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_is_remote(endpoint: str) -> bool:
    try:
        host = urlsplit(endpoint.strip()).hostname
    except ValueError:
        return True
    return not (host and is_loopback_host(host))


def bind_is_remote(bind: str) -> bool:
    host = bind.strip().rsplit(":", 1)[0] if ":" in bind else bind
    return not is_loopback_host(host)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _get(data: Mapping[str, Any], *keys: str) -> Any:
    node: Any = data
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _destination(settings: Mapping[str, Any]) -> str | None:
    """Where the settings send note text off this machine, or None."""
    endpoint = _get(settings, "embedding", "openai", "endpoint")
    if (
        _get(settings, "embedding", "backend") == "openai"
        and isinstance(endpoint, str)
        and endpoint
        and endpoint_is_remote(endpoint)
    ):
        return endpoint
    bind = _get(settings, "serve", "bind")
    if isinstance(bind, str) and bind and bind_is_remote(bind):
        return f"clients of {bind}"
    store = _get(settings, "store", "url")
    if isinstance(store, str) and store.strip():
        return "the store your settings name"
    return None


def risks(
    file_data: Mapping[str, Any], effective: Mapping[str, Any] | None = None, folder: Path | None = None
) -> list[Risk]:
    """What a config file (its TOML as read) sets that needs approval; `effective` is the settings in
    force (file, environment and flags together), for `kb_path` with a destination set elsewhere; `folder`
    the file's own folder, inside which an `index_path` needs none."""
    found: list[Risk] = []
    endpoint = _get(file_data, "embedding", "openai", "endpoint")
    if isinstance(endpoint, str) and endpoint.strip() and endpoint_is_remote(endpoint):
        found.append(Risk("[embedding.openai] endpoint", _shown(endpoint), "note text would be sent there"))
    bind = _get(file_data, "serve", "bind")
    if isinstance(bind, str) and bind_is_remote(bind):
        found.append(Risk("[serve] bind", _shown(bind), "the server would answer other machines"))
    token = _get(file_data, "serve", "http", "token")
    if isinstance(token, str) and token:
        found.append(Risk("[serve.http] token", '"..."', "whoever wrote the file knows the server's token"))
    token_env = _get(file_data, "serve", "http", "token_env")
    if isinstance(token_env, str) and token_env != DEFAULT_TOKEN_ENV:
        found.append(
            Risk(
                "[serve.http] token_env",
                _shown(token_env),
                "the file would choose which variable becomes the server's token",
            )
        )
    for key in ("allowed_hosts", "allowed_origins"):
        value = _get(file_data, "serve", "http", key)
        if isinstance(value, list) and value:
            found.append(
                Risk(
                    f"[serve.http] {key}",
                    _shown(value),
                    "web pages from there could reach the server through your browser",
                )
            )
    index = file_data.get("index_path")
    if isinstance(index, str) and index.strip() and not _inside(index, folder):
        found.append(
            Risk("index_path", _shown(index), "a full copy of every note would be written there, outside this folder")
        )
    store = _get(file_data, "store", "url")
    if isinstance(store, str) and store.strip():
        # The URL is not shown: it may carry a password.
        found.append(Risk("[store] url", '"..."', "every note's text would be written into that database"))
    templates = _get(file_data, "best_practice", "path_templates")
    outside = (
        [t for t in templates if isinstance(t, str) and (t.startswith(("/", "~")) or ":" in t[:3])]
        if isinstance(templates, list)
        else []
    )
    if outside:
        found.append(
            Risk(
                "[best_practice] path_templates",
                _shown(outside),
                "an MCP client could read files there, outside the notes folder",
            )
        )
    kb = file_data.get("kb_path")
    if not found and kb and effective is not None:
        where = _destination(effective)
        if where is not None:
            found.append(
                Risk("kb_path", _shown(str(kb)), f"its files would go to {_shown(where)}, which your own settings name")
            )
    return found


def _inside(index: str, folder: Path | None) -> bool:
    """`index_path` as a file in `folder` reads it (relative to the file's folder, `~` expanded) lies inside it."""
    if folder is None:
        return False
    where = Path(index).expanduser()
    where = where if where.is_absolute() else folder / where
    try:
        return Path(os.path.normpath(where)).is_relative_to(os.path.normpath(folder))
    except ValueError:
        return False


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def refusal(path: Path, found: list[Risk], approved: str | None, current: str) -> str | None:
    """The one-line message refusing the file at `path`, or None when it may be used: nothing in it
    needs approval, or it was approved with exactly these bytes (`approved` is the recorded digest)."""
    if not found or approved == current:
        return None
    changed = " (it changed since it was trusted)" if approved is not None else ""
    return (
        f"{path.name} in {path.parent} sets {'; '.join(str(r) for r in found)}{changed}; "
        f"run `groove trust {path}` to allow it"
    )


# --- the record ------------------------------------------------------------------------------


class TrustStoreError(GrooveError):
    """The record cannot be read or written; the message names the file."""

    exit_code = 2


def default_store_path() -> Path:
    return user_dirs().data / "trusted.json"


@dataclass(frozen=True)
class Approval:
    path: str
    sha256: str
    trusted_at: str


class TrustStore:
    """`trusted.json`: {"version": 1, "files": {absolute path: {"sha256", "trusted_at"}}}, written atomically (0600)."""

    def __init__(self, path: Path | None = None):
        self.path = path or default_store_path()

    def approvals(self) -> dict[str, Approval]:
        try:
            raw = self.path.read_bytes() if self.path.stat().st_size <= MAX_STORE_BYTES else None
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise TrustStoreError(f"cannot read the trust record {self.path}: {exc.strerror}") from exc
        if raw is None:
            raise TrustStoreError(
                f"the trust record {self.path} is over {MAX_STORE_BYTES} bytes; delete it to start over"
            )
        try:
            files = json.loads(raw)["files"]
            return {p: Approval(p, str(v["sha256"]), str(v.get("trusted_at", ""))) for p, v in files.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise TrustStoreError(
                f"the trust record {self.path} is damaged ({exc!r}); delete it to start over"
            ) from exc

    def digest_for(self, path: Path) -> str | None:
        found = self.approvals().get(str(path))
        return found.sha256 if found else None

    def approve(self, path: Path, sha256: str) -> Approval:
        files = self.approvals()
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        files[str(path)] = Approval(str(path), sha256, now)
        self._write(files)
        return files[str(path)]

    def revoke(self, path: Path) -> bool:
        files = self.approvals()
        if files.pop(str(path), None) is None:
            return False
        self._write(files)
        return True

    def _write(self, files: dict[str, Approval]) -> None:
        body = {
            "version": 1,
            "files": {p: {"sha256": a.sha256, "trusted_at": a.trusted_at} for p, a in sorted(files.items())},
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".trusted-", suffix=".json", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(body, fh, indent=2)
                    fh.write("\n")
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise TrustStoreError(f"cannot write the trust record {self.path}: {exc.strerror}") from exc
