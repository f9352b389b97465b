"""What to paste into each MCP client's configuration to reach groove: pure rendering, no I/O.

`groove client-config CLIENT` (groove/cli.py) resolves this machine's paths and calls `render`. Each
client gets its own format, as its documentation shows it (docs/clients.md cites the pages):

- Claude Desktop: `claude_desktop_config.json`, `mcpServers`; its config file starts local commands
  only, so HTTP goes through the `mcp-remote` bridge (`npx -y mcp-remote URL --header ...`).
- Claude Code: the `claude mcp add` command line (`--transport stdio|http`, `--header`).
- Cursor: `~/.cursor/mcp.json`, `mcpServers`; `url` + `headers`, `${env:NAME}` expanded by Cursor.
- VS Code (GitHub Copilot agent mode): `mcp.json`, `servers` with `type`; the token through an
  `inputs` password prompt (`${input:ID}`), which VS Code keeps in its secret storage.
- Codex CLI: `~/.codex/config.toml`, `[mcp_servers.NAME]`; `url` + `bearer_token_env_var`.
- Gemini CLI: `~/.gemini/settings.json`, `mcpServers`; `httpUrl` + `headers`, `${NAME}` expanded.

A token is never written into a snippet: each one names the environment variable that holds it
(or, for VS Code, a prompt), and Claude Desktop's gets a placeholder to replace.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from groove.errors import UsageError
from groove.trust import is_loopback_host

SERVER_NAME = "groove"
DEFAULT_TOKEN_ENV = "GROOVE_TOKEN"
TOKEN_PLACEHOLDER = "<paste the token here>"
VSCODE_TOKEN_INPUT = "groove-token"
MCP_PATH = "/mcp"


@dataclass(frozen=True)
class Client:
    """One MCP client: its name on the command line, how people call it, and where its file lives."""

    name: str
    title: str
    format: str  # "json", "toml" or "shell"
    files: dict[str, str] = field(default_factory=dict)  # "macos" / "linux" / "windows" -> where it goes


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            "claude-desktop",
            "Claude Desktop",
            "json",
            {
                "macos": "~/Library/Application Support/Claude/claude_desktop_config.json",
                "windows": r"%APPDATA%\Claude\claude_desktop_config.json",
                "linux": (
                    "no Linux release from Anthropic "
                    "(community builds read ~/.config/Claude/claude_desktop_config.json)"
                ),
            },
        ),
        Client(
            "claude-code",
            "Claude Code",
            "shell",
            {
                "macos": (
                    "run the command: it writes ~/.claude.json (--scope user), "
                    "or .mcp.json in the project (--scope project)"
                ),
                "linux": (
                    "run the command: it writes ~/.claude.json (--scope user), "
                    "or .mcp.json in the project (--scope project)"
                ),
                "windows": (
                    r"run the command: it writes %USERPROFILE%\.claude.json (--scope user), or .mcp.json in the project"
                ),
            },
        ),
        Client(
            "cursor",
            "Cursor",
            "json",
            {
                "macos": "~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project)",
                "linux": "~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project)",
                "windows": r"%USERPROFILE%\.cursor\mcp.json (every project) or .cursor\mcp.json (one project)",
            },
        ),
        Client(
            "vscode",
            "VS Code (GitHub Copilot agent mode)",
            "json",
            {
                "macos": ".vscode/mcp.json in the workspace, or ~/Library/Application Support/Code/User/mcp.json "
                "(command palette: MCP: Open User Configuration)",
                "linux": ".vscode/mcp.json in the workspace, or ~/.config/Code/User/mcp.json "
                "(command palette: MCP: Open User Configuration)",
                "windows": r".vscode\mcp.json in the workspace, or %APPDATA%\Code\User\mcp.json "
                "(command palette: MCP: Open User Configuration)",
            },
        ),
        Client(
            "codex",
            "Codex CLI",
            "toml",
            {
                "macos": "~/.codex/config.toml (or $CODEX_HOME/config.toml)",
                "linux": "~/.codex/config.toml (or $CODEX_HOME/config.toml)",
                "windows": r"%USERPROFILE%\.codex\config.toml (or %CODEX_HOME%\config.toml)",
            },
        ),
        Client(
            "gemini",
            "Gemini CLI",
            "json",
            {
                "macos": "~/.gemini/settings.json (every project) or .gemini/settings.json (one project)",
                "linux": "~/.gemini/settings.json (every project) or .gemini/settings.json (one project)",
                "windows": (
                    r"%USERPROFILE%\.gemini\settings.json (every project) or .gemini\settings.json (one project)"
                ),
            },
        ),
    )
}


class UnknownClient(UsageError):
    """A client name groove has no snippet for (exit 2); the message lists the known ones."""

    def __init__(self, name: str):
        super().__init__(f"unknown MCP client {name!r}: known clients are {', '.join(CLIENTS)}")


@dataclass(frozen=True)
class Target:
    """What the snippet points at: the stdio command line, or the HTTP URL and the token's variable."""

    transport: str  # "stdio" or "http"
    command: tuple[str, ...] = ()  # stdio: the absolute groove executable, then its arguments
    url: str = ""  # http: the MCP endpoint
    token_env: str | None = None  # http: the environment variable holding the bearer token; None = no token


def stdio_args(*, config: str | None = None, kb: str | list[str] | None = None, index: str | None = None) -> list[str]:
    """`serve --transport stdio` and the paths the client's groove needs (absolute: a client starts it anywhere);
    `kb` a folder, or several (`name=path` each)."""
    args = ["serve", "--transport", "stdio"]
    if config:
        args += ["--config", config]
    for folder in [kb] if isinstance(kb, str) else kb or []:
        args += ["--kb", folder]
    if index:
        args += ["--index", index]
    return args


def _split_bind(bind: str) -> tuple[str, str]:
    text = bind.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, rest.lstrip(":")
    host, _, port = text.rpartition(":")
    return host, port


def bind_is_loopback(bind: str) -> bool:
    """Whether a `[serve] bind` answers this machine only (elsewhere groove refuses to run without a token)."""
    return is_loopback_host(_split_bind(bind)[0])


def url_for_bind(bind: str) -> str:
    """The MCP URL a client on this machine uses for a `[serve] bind` (every-interface binds: loopback)."""
    host, port = _split_bind(bind)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


def _needs_allow_http(url: str) -> bool:
    """mcp-remote refuses plain http:// to any host but `localhost` and `127.0.0.1` (not even `[::1]`)
    unless `--allow-http` is given (its src/lib/utils.ts, parseCommandLineArgs)."""
    parts = urlsplit(url)
    return parts.scheme == "http" and (parts.hostname or "") not in ("localhost", "127.0.0.1")


def _bearer(reference: str) -> str:
    return f"Bearer {reference}"


# --- one renderer per client: Target -> the client's own configuration ------------------------------


def _claude_desktop(t: Target) -> Any:
    if t.transport == "stdio":
        entry: dict[str, Any] = {"command": t.command[0], "args": list(t.command[1:])}
    else:
        args = ["-y", "mcp-remote", t.url]
        if _needs_allow_http(t.url):
            args.append("--allow-http")
        entry = {"command": "npx", "args": args}
        if t.token_env:
            # mcp-remote expands ${VAR} in its arguments from its own environment, which "env" sets:
            # Claude Desktop expands nothing and, started from the Dock, sees no shell variables.
            args += ["--header", f"Authorization: {_bearer('${' + t.token_env + '}')}"]
            entry["env"] = {t.token_env: TOKEN_PLACEHOLDER}
    return {"mcpServers": {SERVER_NAME: entry}}


def _claude_code(t: Target) -> str:
    if t.transport == "stdio":
        return shlex.join(
            ["claude", "mcp", "add", "--transport", "stdio", "--scope", "user", SERVER_NAME, "--", *t.command]
        )
    line = shlex.join(["claude", "mcp", "add", "--transport", "http", "--scope", "user", SERVER_NAME, t.url])
    if t.token_env:
        # Double quotes: the shell puts the token in when the command runs, the snippet never holds it.
        # `--header` comes last: it takes several values and would swallow the name and the URL.
        line += f' --header "Authorization: {_bearer("$" + t.token_env)}"'
    return line


def _cursor(t: Target) -> Any:
    if t.transport == "stdio":
        return {"mcpServers": {SERVER_NAME: {"command": t.command[0], "args": list(t.command[1:])}}}
    entry: dict[str, Any] = {"url": t.url}
    if t.token_env:
        entry["headers"] = {"Authorization": _bearer("${env:" + t.token_env + "}")}
    return {"mcpServers": {SERVER_NAME: entry}}


def _vscode(t: Target) -> Any:
    if t.transport == "stdio":
        return {"servers": {SERVER_NAME: {"type": "stdio", "command": t.command[0], "args": list(t.command[1:])}}}
    entry: dict[str, Any] = {"type": "http", "url": t.url}
    config: dict[str, Any] = {"servers": {SERVER_NAME: entry}}
    if t.token_env:
        entry["headers"] = {"Authorization": _bearer("${input:" + VSCODE_TOKEN_INPUT + "}")}
        config["inputs"] = [
            {
                "type": "promptString",
                "id": VSCODE_TOKEN_INPUT,
                "description": f"groove bearer token (the value of {t.token_env})",
                "password": True,
            }
        ]
    return config


def _toml_value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def _codex(t: Target) -> str:
    lines = [f"[mcp_servers.{SERVER_NAME}]"]
    if t.transport == "stdio":
        lines += [f"command = {_toml_value(t.command[0])}", f"args = {_toml_value(list(t.command[1:]))}"]
    else:
        lines.append(f"url = {_toml_value(t.url)}")
        if t.token_env:
            lines.append(f"bearer_token_env_var = {_toml_value(t.token_env)}")
    return "\n".join(lines)


def _gemini(t: Target) -> Any:
    if t.transport == "stdio":
        return {"mcpServers": {SERVER_NAME: {"command": t.command[0], "args": list(t.command[1:])}}}
    entry: dict[str, Any] = {"httpUrl": t.url}
    if t.token_env:
        entry["headers"] = {"Authorization": _bearer("${" + t.token_env + "}")}
    return {"mcpServers": {SERVER_NAME: entry}}


RENDERERS: dict[str, Callable[[Target], Any]] = {
    "claude-desktop": _claude_desktop,
    "claude-code": _claude_code,
    "cursor": _cursor,
    "vscode": _vscode,
    "codex": _codex,
    "gemini": _gemini,
}


def client(name: str) -> Client:
    try:
        return CLIENTS[name]
    except KeyError:
        raise UnknownClient(name) from None


def render(name: str, target: Target) -> str:
    """The snippet for client `name`, ending in a newline: JSON, TOML or a command line."""
    client(name)
    if target.transport == "stdio" and not target.command:
        raise ValueError("a stdio snippet needs the command line that starts groove")
    if target.transport == "http" and not target.url:
        raise ValueError("an HTTP snippet needs the URL of groove's MCP endpoint")
    out = RENDERERS[name](target)
    text = out if isinstance(out, str) else json.dumps(out, indent=2, ensure_ascii=False)
    return text + "\n"


def where(name: str, platform: str) -> str:
    """Where client `name` keeps its configuration on `platform` ("macos", "linux" or "windows")."""
    return client(name).files.get(platform, "")


__all__ = [
    "CLIENTS",
    "DEFAULT_TOKEN_ENV",
    "SERVER_NAME",
    "TOKEN_PLACEHOLDER",
    "VSCODE_TOKEN_INPUT",
    "Client",
    "Target",
    "UnknownClient",
    "bind_is_loopback",
    "client",
    "render",
    "stdio_args",
    "url_for_bind",
    "where",
]
