"""The gate in front of every HTTP route: Host, then Origin, then who fetches the web view's data, then the
bearer token (`GuardMiddleware`).

- Host must be a loopback name with the bound port (`127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT`),
  the bound address itself when it is a specific one, or a value listed in `[serve.http] allowed_hosts`;
  otherwise 421.
- Origin, when present, must be `http://` + one of the loopback names with the bound port, or listed in
  `[serve.http] allowed_origins`; otherwise 403 (no DNS rebinding; non-browser clients send no Origin).
- The web view's data (`/ui/api/*`) is for the page this server serves: a browser request another site's page
  made (`Sec-Fetch-Site: cross-site` or `same-site`, such as an `<img>` or `<script>` pointing here, which sends
  no Origin) is refused with 403 before the daemon does any work; a request with an allowed Origin, the page's
  own (`same-origin`), one a person typed (`none`) and clients that send no Sec-Fetch headers pass.
- A bearer token (`[serve.http] token`, or the environment variable `token_env` names), when set, is
  required on every route but the web view's page: its UTF-8 bytes compared with `hmac.compare_digest`;
  without it 401 with `WWW-Authenticate: Bearer realm="groove"`. A peer whose tokens keep failing waits
  (`FailureBackoff`: 5 free, then 1 s, 2 s, ... 60 s) and meanwhile gets 429 without its token being
  checked. Across every peer (`GlobalFailures`: many addresses each with their free failures), past 10
  failures a second each failure's answer waits its turn (5 a second) and is a 429 with Retry-After, while a
  right token is answered at once. Binding an address that is not loopback needs a token of at least
  `MIN_TOKEN_BYTES`.

Refusals are counted in a `StormLog` (`http_refused host=... bad_token=... total=...`, one line per
interval), with one clipped sample of the refused value: never the header itself once per request.
Patterns ending in `:*` match any port (`myhost:*`, `https://notes.lan:*`).
"""

from __future__ import annotations

import hmac
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import anyio
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from groove.config import ConfigError, HTTPSettings
from groove.serve.http.peers import FailureBackoff, GlobalFailures, peer_of
from groove.serve.http.storm import StormLog
from groove.trust import is_loopback_host

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MIN_TOKEN_BYTES = 16  # off loopback: a token shorter than this is refused at startup

# The web view's page itself holds no note data (only markup and script): a browser can load it without
# the token, and its script then sends the token (from the URL fragment, never sent to the server, or
# typed in) on every /ui/api call. Host and Origin are checked for it as for every route.
TOKEN_FREE_PAGES = frozenset({"/ui"})
# The web view's data: read by its page alone, never by another site's (Sec-Fetch-Site, below).
PAGE_DATA_PREFIX = "/ui/api/"
OTHER_SITES = frozenset({"cross-site", "same-site"})  # same-site: another port of localhost is another program


def format_host(host: str) -> str:
    """A host as it appears in a URL or a Host header (IPv6 in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


# --- Host / Origin --------------------------------------------------------------------------


@dataclass(frozen=True)
class Allowed:
    hosts: tuple[str, ...]
    origins: tuple[str, ...]

    @classmethod
    def for_bind(
        cls,
        host: str,
        port: int,
        extra_hosts: list[str] | tuple[str, ...] = (),
        extra_origins: list[str] | tuple[str, ...] = (),
    ) -> Allowed:
        names = list(LOOPBACK_NAMES)
        bound = format_host(host)
        if host not in ("0.0.0.0", "::", "") and bound.lower() not in names:
            names.append(bound.lower())
        suffix = f":{port}"
        hosts = [n + suffix for n in names] + [h.strip().lower() for h in extra_hosts if h.strip()]
        origins = [f"http://{n}{suffix}" for n in LOOPBACK_NAMES] + [
            o.strip().lower().rstrip("/") for o in extra_origins if o.strip()
        ]
        return cls(tuple(dict.fromkeys(hosts)), tuple(dict.fromkeys(origins)))

    def host_ok(self, host: str | None) -> bool:
        return bool(host and _matches(host.lower(), self.hosts))

    def origin_ok(self, origin: str | None) -> bool:
        return not origin or _matches(origin.lower().rstrip("/"), self.origins)

    def sdk_settings(self) -> TransportSecuritySettings:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=list(self.hosts), allowed_origins=list(self.origins)
        )


def _matches(value: str, patterns: tuple[str, ...]) -> bool:
    for pattern in patterns:
        if value == pattern:
            return True
        if pattern.endswith(":*") and value.startswith(pattern[:-1]) and value[len(pattern) - 1 :].isdigit():
            return True
    return False


# --- the bearer token ------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether a bind host only accepts connections from this machine (the trust gate's rule, one rule)."""
    return is_loopback_host(host)


def resolve_token(http: HTTPSettings, environ: Mapping[str, str] | None = None) -> str:
    """The bearer token: `[serve.http] token`, else the variable `token_env` names; "" = none."""
    if http.token:
        return http.token
    env = os.environ if environ is None else environ
    return env.get(http.token_env, "").strip() if http.token_env else ""


def require_token_off_loopback(host: str, port: int, token: str, token_env: str) -> None:
    """ConfigError (exit 2) when binding an address other machines can reach without a token, or with a
    token shorter than MIN_TOKEN_BYTES (UTF-8) that a client could guess."""
    if is_loopback(host):
        return
    where = f"{format_host(host)}:{port}"
    env = token_env or "GROOVE_TOKEN"
    make = f"`export {env}=$(openssl rand -hex 32)`, or [serve.http] token"
    if not token:
        raise ConfigError(
            f"refusing to serve on {where} without a token: any machine that reaches this address could read "
            f"every note. Set one (e.g. {make}) and give it to your clients, or bind 127.0.0.1 instead"
        )
    size = len(token.encode("utf-8"))
    if size < MIN_TOKEN_BYTES:
        raise ConfigError(
            f"refusing to serve on {where} with a {size}-byte token: off loopback the token must be at least "
            f"{MIN_TOKEN_BYTES} bytes, or another machine could guess it. Set a longer one (e.g. {make}), "
            f"or bind 127.0.0.1 instead"
        )


def _bearer(headers: Headers) -> bytes | None:
    """The credentials of `Authorization: Bearer ...` as the bytes the client sent (UTF-8 stays UTF-8)."""
    value = headers.get("authorization")  # Starlette decodes header bytes as latin-1: encoding back is lossless
    if not value:
        return None
    scheme, _, credentials = value.strip().partition(" ")
    return credentials.strip().encode("latin-1") if scheme.lower() == "bearer" else None


def _unauthorized(error: str | None, message: str) -> Response:
    challenge = 'Bearer realm="groove"' + (f', error="{error}"' if error else "")
    return JSONResponse(
        {"error": "unauthorized", "message": message}, status_code=401, headers={"WWW-Authenticate": challenge}
    )


def _other_site(fetch_site: str, path: str) -> Response:
    return JSONResponse(
        {
            "error": f"refused: another site's page asked for {path} (Sec-Fetch-Site: {fetch_site}); only the web "
            "view this server serves reads its data (list that site in [serve.http] allowed_origins if you meant it)"
        },
        status_code=403,
    )


def _guessed_everywhere(retry: int) -> Response:
    return JSONResponse(
        {
            "error": "too_many_failed_tokens",
            "message": f"too many wrong bearer tokens from many addresses: wrong tokens are answered slowly for "
            f"{retry} s more; the right token is answered at once",
        },
        status_code=429,
        headers={"Retry-After": str(retry), "WWW-Authenticate": 'Bearer realm="groove"'},
    )


def _backing_off(wait_s: float) -> Response:
    retry = max(1, math.ceil(wait_s))
    return JSONResponse(
        {
            "error": "too_many_failed_tokens",
            "message": f"too many wrong bearer tokens from this address; the next one is checked in {retry} s",
        },
        status_code=429,
        headers={"Retry-After": str(retry), "WWW-Authenticate": 'Bearer realm="groove"'},
    )


class GuardMiddleware:
    """Host and Origin validation, then the bearer token, for every HTTP route, in front of everything else."""

    def __init__(
        self,
        app: ASGIApp,
        allowed: Allowed,
        token: str = "",
        *,
        refused: StormLog | None = None,
        backoff: FailureBackoff | None = None,
        failures: GlobalFailures | None = None,
    ):
        self.app = app
        self.allowed = allowed
        self._token = token.encode("utf-8")
        self.refused = refused or StormLog("http_refused")
        self.backoff = backoff or FailureBackoff()
        self.failures = failures or GlobalFailures()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.allowed.host_ok(host):
            self.refused.count("host", sample=host or "")
            await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
            return
        origin = headers.get("origin")
        if not self.allowed.origin_ok(origin):
            self.refused.count("origin", sample=origin)
            await PlainTextResponse("Invalid Origin header", status_code=403)(scope, receive, send)
            return
        path = str(scope.get("path") or "")
        fetch_site = (headers.get("sec-fetch-site") or "").strip().lower()
        if path.startswith(PAGE_DATA_PREFIX) and fetch_site in OTHER_SITES and not origin:
            self.refused.count("other_site", sample=fetch_site)
            await _other_site(fetch_site, path)(scope, receive, send)
            return
        if self._token and not (scope.get("method") == "GET" and path in TOKEN_FREE_PAGES):
            response, delay = self._check_token(headers, peer_of(scope))
            if response is not None:
                if delay > 0:  # a wrong token while guesses come from everywhere: its answer waits its turn
                    await anyio.sleep(delay)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _check_token(self, headers: Headers, peer: str) -> tuple[Response | None, float]:
        """The refusal for this request's token (None: let it in) and how long to hold that refusal back."""
        response = self._token_refusal(headers, peer)
        if response is None or response.status_code != 401 or _bearer(headers) is None:
            return response, 0.0
        delay = self.failures.failed()  # a wrong token (not a missing one): counted across every peer
        if delay <= 0:
            return response, 0.0
        self.refused.count("token_global", sample=peer)
        return _guessed_everywhere(self.failures.retry_after_s()), delay

    def _token_refusal(self, headers: Headers, peer: str) -> Response | None:
        given = _bearer(headers)
        if given is None:
            self.refused.count("no_token")
            return _unauthorized(
                None,
                "this server needs a bearer token: send the header "
                "'Authorization: Bearer <token>' (docs/mcp.md shows it for each client)",
            )
        wait = self.backoff.wait_s(peer)
        if wait > 0:  # not even checked: a guess made while backing off tells the guesser nothing
            self.refused.count("token_backoff", sample=peer)
            return _backing_off(wait)
        if not hmac.compare_digest(given, self._token):
            self.backoff.failed(peer)
            self.refused.count("bad_token", sample=peer)
            return _unauthorized(
                "invalid_token",
                "the bearer token is not the one this server was started "
                "with; check [serve.http] token or the token environment variable",
            )
        self.backoff.succeeded(peer)
        return None


__all__ = [
    "Allowed",
    "GuardMiddleware",
    "LOOPBACK_NAMES",
    "MIN_TOKEN_BYTES",
    "TOKEN_FREE_PAGES",
    "format_host",
    "is_loopback",
    "require_token_off_loopback",
    "resolve_token",
]
