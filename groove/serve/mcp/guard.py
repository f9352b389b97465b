"""The call guard: server middleware for tools/call. An unknown tool is JSON-RPC error -32602; arguments
that do not fit the tool's schema are a tool error (`isError: true`) with one line the model can act on
(MCP 2025-11-25, SEP-1303); a client over its rate gets -32029 at once (a token bucket per client)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from groove.config import HTTPSettings
from groove.logs import get_logger
from groove.search.request import describe
from groove.serve.errors import tool_error

log = get_logger(__name__)


def bounded(ge: float | None = None, le: float | None = None, *, description: str) -> Any:
    """A parameter whose bounds are advertised in the JSON schema and checked by groove itself,
    so that a value out of range gets groove's one-line message rather than pydantic's report."""
    extra: dict[str, Any] = {}
    if ge is not None:
        extra["minimum"] = ge
    if le is not None:
        extra["maximum"] = le
    return Field(description=description, json_schema_extra=extra)


RATE_LIMITED = -32029  # server-defined JSON-RPC code: too many tool calls from this client


def arguments_model(name: str, fn: Callable[..., Any]) -> type[BaseModel]:
    """A strict pydantic model of a tool's arguments, from its signature (what its input schema says)."""
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn, eval_str=True).parameters.values():
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (param.annotation, default)
    return create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid", strict=True), **fields)


def describe_arguments(tool: str, model: type[BaseModel], exc: ValidationError) -> str:
    """One line for the first problem of a tool's arguments (never pydantic's report with its URL)."""
    err = exc.errors(include_url=False)[0]
    if err["type"] == "extra_forbidden":
        takes = ", ".join(model.model_fields) or "no arguments"
        return f"unknown argument {str(err['loc'][-1])!r} for {tool}; it takes: {takes}"
    return f"{tool}: {describe(exc)}"


class TokenBucket:
    """`rate` tokens a second up to `burst`; `take()` is the wait in seconds before a token (0 = taken)."""

    def __init__(self, rate: float, burst: int):
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def take(self) -> float:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class ToolCallGuard:
    """Server middleware for tools/call: an unknown tool is JSON-RPC error -32602; arguments that do not fit
    the tool's schema are answered as a tool error (`isError: true`, one line the model reads: SEP-1303)
    before the tool runs; each client over its rate gets error -32029 at once (a token bucket per client,
    so other clients are not slowed).

    A client is its MCP session (`Mcp-Session-Id`) or, without one (2026-07-28 stateless requests), its TCP
    connection; the connection cap of the HTTP layer bounds how many there can be. stdio has one client and
    no rate limit."""

    MAX_CLIENTS = 10_000  # buckets kept; the fullest (least recently used) are forgotten first

    def __init__(self, limits: HTTPSettings):
        self.limits = limits
        self.models: dict[str, type[BaseModel]] = {}
        self.buckets: dict[str, TokenBucket] = {}
        self.refused = 0  # calls over the rate
        self.invalid = 0  # calls whose arguments did not fit

    def add(self, name: str, fn: Callable[..., Any]) -> None:
        self.models[name] = arguments_model(name, fn)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            problem = self._check(ctx)
            if problem is not None:
                self.invalid += 1
                return tool_error(problem)
        return await call_next(ctx)

    def _check(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """None when the call may run; else what is wrong with its arguments, in one line. Raises for an
        unknown tool (-32602) and a client over its rate (-32029)."""
        params = ctx.params or {}
        name = params.get("name")
        self._rate(ctx, name)
        model = self.models.get(name) if isinstance(name, str) else None
        if model is None or not isinstance(name, str):  # (a model is found only by a str)
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown tool {name!r}; this server's tools are: {', '.join(self.models)} (tools/list)",
                data={"tool": name},
            )
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return f"{name}: arguments must be an object, got {arguments!r}"
        try:
            model.model_validate(arguments)
        except ValidationError as exc:
            return describe_arguments(name, model, exc)
        for field, info in model.model_fields.items():  # the bounds `_bounded` advertises in the schema
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            value = arguments.get(field)
            low, high = extra.get("minimum"), extra.get("maximum")
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and (low is not None or high is not None)
            ):
                if (isinstance(low, (int, float)) and value < low) or (isinstance(high, (int, float)) and value > high):
                    return f"{field} must be between {low} and {high}, got {value}"
        return None

    def _rate(self, ctx: ServerRequestContext[Any, Any], tool: Any) -> None:
        request = ctx.request
        headers = getattr(request, "headers", None)
        if headers is None:
            return  # stdio
        client = getattr(request, "client", None)
        key = headers.get("mcp-session-id") or (f"{client.host}:{client.port}" if client else "unknown")
        bucket = self.buckets.pop(key, None) or TokenBucket(self.limits.tool_calls_per_s, self.limits.tool_call_burst)
        self.buckets[key] = bucket  # most recently used last
        while len(self.buckets) > self.MAX_CLIENTS:
            self.buckets.pop(next(iter(self.buckets)))
        wait = bucket.take()
        if wait > 0:
            self.refused += 1
            log.info("tool_call_rate_limited", tool=str(tool)[:64], retry_after_s=round(wait, 3))
            raise MCPError(
                code=RATE_LIMITED,
                message=(
                    f"too many tool calls from this client: at most {self.limits.tool_calls_per_s:g} a second "
                    f"(bursts of {self.limits.tool_call_burst}); retry in {wait:.2f} s"
                ),
                data={"retry_after_s": round(wait, 3)},
            )


__all__ = ["RATE_LIMITED", "TokenBucket", "ToolCallGuard", "arguments_model", "bounded", "describe_arguments"]
