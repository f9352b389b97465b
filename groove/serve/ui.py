"""The web view at /ui: one static page and the two JSON endpoints it reads.

    GET  /ui              the page (groove/serve/static/ui.html: vanilla JS, no CDN, no external fonts)
    GET  /ui/api/status   the daemon's `index_status`, as the MCP tool returns it
    POST /ui/api/search   a `SearchRequest` as JSON -> the daemon's search response

The routes are registered on the MCP server as custom routes (`mount_ui`), so
they live in the same Starlette app as /mcp and /healthz, behind the same
guard (Host, Origin, token where configured) and request body limit that
`groove.serve.http.build_app` wraps around it. A search goes through
the service API (`daemon.service.search(SearchRequest(...))`), as the MCP `search` tool does:
the same validation, the same limits, the same one-line errors (here as
`{"error": ...}` with status 400).

The page is served with a strict Content-Security-Policy: nothing loads from
anywhere but this server, and the one inline script and style are allowed by
their SHA-256 hashes (no 'unsafe-inline'). The page renders note text with
`textContent` only (notes are untrusted), and the endpoints answer only JSON
requests (`Content-Type: application/json`), which a cross-site form cannot
send without the browser adding an Origin header the guard refuses.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from groove.errors import GrooveError
from groove.logs import get_logger
from groove.search.compiler import QueryError
from groove.search.request import SearchRequest
from groove.serve.daemon import Daemon
from groove.serve.errors import http_status

log = get_logger(__name__)

UI_PATH = "/ui"
STATUS_PATH = "/ui/api/status"
SEARCH_PATH = "/ui/api/search"
PAGE_FILE = "ui.html"

# Headers every /ui response carries; the page adds its Content-Security-Policy.
COMMON_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


# --- the page ---------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def page() -> tuple[bytes, str]:
    """The page's bytes and its Content-Security-Policy (hashes of its inline script and style)."""
    html = resources.files("groove.serve").joinpath("static", PAGE_FILE).read_text(encoding="utf-8")
    return html.encode("utf-8"), content_security_policy(html)


def _hashes(html: str, tag: str) -> list[str]:
    bodies = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.DOTALL)
    return [f"'sha256-{base64.b64encode(hashlib.sha256(b.encode('utf-8')).digest()).decode()}'" for b in bodies]


def content_security_policy(html: str) -> str:
    """Nothing from elsewhere, no plug-ins, no framing; the page's own inline blocks by hash."""
    scripts = " ".join(_hashes(html, "script")) or "'none'"
    styles = " ".join(_hashes(html, "style")) or "'none'"
    return (
        "default-src 'none'; "
        f"script-src {scripts}; "
        f"style-src {styles}; "
        "connect-src 'self'; "
        "img-src 'self' data:; "
        "base-uri 'none'; "
        "form-action 'none'; "
        "frame-ancestors 'none'"
    )


# --- errors as JSON ---------------------------------------------------------------------------

def error_response(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=COMMON_HEADERS)


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object, or QueryError saying what was wrong with it."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise QueryError(
            f"the search endpoint takes a JSON body (Content-Type: application/json), got {ctype or 'no content type'!r}"
        )
    body = await request.body()
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise QueryError(f"the request body is not valid JSON ({exc}); send an object such as {{\"query\": \"words\"}}") from None
    except RecursionError:  # the parser's own limit, far past MAX_JSON_DEPTH
        raise QueryError(_too_deep()) from None
    if _depth_over(data, MAX_JSON_DEPTH):
        raise QueryError(_too_deep())
    if not isinstance(data, dict):
        raise QueryError(f"the request body must be a JSON object such as {{\"query\": \"words\"}}, got {type(data).__name__}")
    return data


MAX_JSON_DEPTH = 16  # a search request nests 3 levels (filters -> fields -> a list); far more is not a search


def _too_deep() -> str:
    return f"the request body nests JSON more than {MAX_JSON_DEPTH} levels deep; send an object such as {{\"query\": \"words\"}}"


def _depth_over(value: Any, limit: int) -> bool:
    """Whether `value` nests lists/objects more than `limit` levels (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


# --- the routes --------------------------------------------------------------------------------

def mount_ui(server: MCPServer, daemon: Daemon) -> None:
    """Register /ui and its endpoints on `server`, before its Starlette app is built."""

    @server.custom_route(UI_PATH, methods=["GET"], include_in_schema=False)
    async def ui_page(request: Request) -> Response:
        body, csp = page()
        headers = {**COMMON_HEADERS, "Content-Security-Policy": csp}
        return Response(body, media_type="text/html; charset=utf-8", headers=headers)

    @server.custom_route(UI_PATH + "/", methods=["GET"], include_in_schema=False)
    async def ui_slash(request: Request) -> Response:
        return RedirectResponse(UI_PATH, status_code=308, headers=COMMON_HEADERS)

    @server.custom_route(STATUS_PATH, methods=["GET"], include_in_schema=False)
    async def ui_status(request: Request) -> Response:
        try:
            status = await daemon.service.status()
        except GrooveError as exc:
            return error_response(str(exc), http_status(exc))
        return JSONResponse(status.model_dump(mode="json"), headers=COMMON_HEADERS)

    @server.custom_route(SEARCH_PATH, methods=["POST"], include_in_schema=False)
    async def ui_search(request: Request) -> Response:
        try:
            req = SearchRequest(**await read_json_object(request))
            answer = await daemon.service.search(req)
        except GrooveError as exc:
            return error_response(str(exc), http_status(exc))
        except Exception as exc:  # noqa: BLE001 - the page gets a message, the log gets the details
            log.error("ui_search_failed", error=repr(exc))
            return error_response("the search failed inside the server; its log (stderr) says why", 500)
        return JSONResponse(answer.model_dump(mode="json", exclude_unset=True), headers=COMMON_HEADERS)


__all__ = ["SEARCH_PATH", "STATUS_PATH", "UI_PATH", "content_security_policy", "mount_ui", "page"]
