"""The one search request: every bound of a search is written here, once.

`SearchRequest` is what the CLI, eval and the MCP `search` tool build, and what
the pipeline reads. The MCP tool's argument schema is generated from it (the
filters lifted to the top level, as the tool has always taken them), so the
bounds a client sees in the schema are the bounds that are checked.

Bad input raises `QueryError` with one line a person can act on (never
pydantic's multi-line report with a URL): `limit must be between 1 and 100,
got 0`. Integers are strict: `limit: "5"` is refused, not coerced.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from annotated_types import Ge, Le
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from groove.corpus.globs import MAX_GLOB_CHARS, MAX_GLOB_STARS
from groove.search.compiler import QueryError
from groove.search.filters import MAX_PATH_GLOBS, Filters

MAX_QUERY_BYTES = 1024
MAX_LIMIT = 100
MAX_FILTER_ITEMS = 500
Retriever = Literal["hybrid", "fts", "vector"]


class FilterArgs(BaseModel):
    """Which notes a search may return (all optional; all given must hold)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path_globs: list[str] | None = Field(
        None, max_length=MAX_PATH_GLOBS,
        description=(
            "Only notes whose path matches (gitignore-style globs; a leading ! excludes). "
            f"At most {MAX_PATH_GLOBS} globs, each at most {MAX_GLOB_CHARS} characters with at most "
            f"{MAX_GLOB_STARS} '*'."))
    tags_any: list[str] | None = Field(
        None, max_length=MAX_FILTER_ITEMS, description="Only notes with at least one of these tags.")
    tags_all: list[str] | None = Field(
        None, max_length=MAX_FILTER_ITEMS, description="Only notes with all of these tags.")
    date_from: str | None = Field(
        None, description="Only notes whose frontmatter date is on or after this ISO date (YYYY-MM-DD).")
    date_to: str | None = Field(
        None, description="Only notes whose frontmatter date is on or before this ISO date (YYYY-MM-DD).")
    fields: dict[str, Any] | None = Field(
        None, max_length=MAX_FILTER_ITEMS, description="Only notes whose frontmatter has these key = value pairs.")

    def compile(self) -> Filters:
        """The validated filter (dates normalised, tags folded); QueryError on bad input."""
        return Filters.build(
            path_globs=self.path_globs, tags_any=self.tags_any, tags_all=self.tags_all,
            date_from=self.date_from, date_to=self.date_to, fields=self.fields,
        )


FILTER_KEYS = tuple(FilterArgs.model_fields)


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)

    query: str = Field(
        strict=True,
        description=(
            "What to look for: words, a question, \"a quoted phrase\" matched verbatim, -word to exclude "
            "notes containing it. At most 1 KiB."
        ))
    limit: int = Field(10, strict=True, ge=1, le=MAX_LIMIT, description="How many passages to return.")
    retriever: Retriever = Field("hybrid", description=(
        "hybrid fuses full-text and vector search (best in general); fts or vector use one half alone."))
    rerank: bool | None = Field(None, strict=True, description=(
        "Rerank with the configured cross-encoder (default: server setting)."))
    mmr: bool | None = Field(None, strict=True, description="Diversify results with MMR (default: server setting).")
    mmr_lambda: float | None = Field(None, ge=0.0, le=1.0, description=(
        "MMR relevance weight, 0..1 (1 = relevance only)."))
    mmr_same_doc_penalty: float | None = Field(None, ge=0, description=(
        "MMR extra penalty for passages of an already chosen note."))
    parent_retriever: bool | None = Field(None, strict=True, description=(
        "Expand small hits to their whole section or note (default: server setting)."))
    filters: FilterArgs = Field(default_factory=FilterArgs, description="Which notes may be returned.")
    explain: bool = Field(False, strict=True, description=(
        "Add how the query was compiled, candidate counts and timings."))

    _compiled: Filters = PrivateAttr(default_factory=Filters)

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise QueryError(describe(exc)) from None

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> "SearchRequest":
        """From flat arguments (the MCP tool's shape: filter keys at the top level)."""
        return cls(**dict(arguments))

    @model_validator(mode="before")
    @classmethod
    def _lift_filters(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        flat = {k: data.pop(k) for k in FILTER_KEYS if k in data}
        nested = data.get("filters")
        if isinstance(nested, Filters):  # an already built filter (tests, eval)
            nested = nested.to_dict()
        elif isinstance(nested, FilterArgs):
            nested = nested.model_dump(exclude_none=True)
        if flat:
            nested = {**(nested or {}), **{k: v for k, v in flat.items() if v is not None}}
        if nested is not None:
            data["filters"] = nested
        return data

    @field_validator("query")
    @classmethod
    def _query_bounds(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the query is empty; type some words to search for")
        size = len(value.encode("utf-8", errors="replace"))
        if size > MAX_QUERY_BYTES:
            raise ValueError(f"the query is {size} bytes; the limit is {MAX_QUERY_BYTES} bytes (1 KiB)")
        return value

    @model_validator(mode="after")
    def _compile_filters(self) -> "SearchRequest":
        self._compiled = self.filters.compile()
        return self

    @property
    def compiled_filters(self) -> Filters:
        return self._compiled


def describe(exc: ValidationError) -> str:
    """The first problem of a validation error as one line (field name, bound, what was given)."""
    err = exc.errors(include_url=False)[0]
    loc = [str(p) for p in err["loc"] if not isinstance(p, int)]
    name = loc[-1] if loc else "request"
    kind = err["type"]
    given = err.get("input")
    ctx = err.get("ctx") or {}
    shown = repr(given) if isinstance(given, str) else given
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    if kind in ("greater_than_equal", "less_than_equal"):
        low, high = _bounds(name)
        if low is not None and high is not None:
            return f"{name} must be between {low} and {high}, got {shown}"
        if low is not None:
            return f"{name} must be {low} or more, got {shown}"
        return f"{name} must be {high} or less, got {shown}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"{name} must be a whole number, got {shown}"
    if kind in ("bool_type", "bool_parsing"):
        return f"{name} must be true or false, got {shown}"
    if kind in ("float_type", "float_parsing", "finite_number"):
        return f"{name} must be a finite number, got {shown}"
    if kind in ("string_type",):
        return f"{name} must be a string, got {shown}"
    if kind == "literal_error":
        return f"{name} must be {_or(ctx.get('expected', ''))}, got {shown}"
    if kind == "too_long":
        return f"{name} has {ctx.get('actual_length')} items; at most {ctx.get('max_length')} are allowed"
    if kind == "missing":
        return f"{name} is required"
    if kind == "extra_forbidden":
        return f"unknown argument {name!r}; see the search tool's schema for the arguments it takes"
    if kind in ("list_type", "dict_type", "model_type"):
        return f"{name} has the wrong type ({err['msg'].lower()}), got {shown}"
    return f"{name}: {err['msg']}"


def _bounds(name: str) -> tuple[Any, Any]:
    field = SearchRequest.model_fields.get(name)
    low = high = None
    for m in field.metadata if field is not None else ():
        if isinstance(m, Ge):
            low = m.ge
        elif isinstance(m, Le):
            high = m.le
    return low, high


def _or(expected: str) -> str:
    """pydantic's "'hybrid', 'fts' or 'vector'" as "hybrid, fts or vector"."""
    return expected.replace("'", "")


def tool_fields() -> dict[str, tuple[Any, dict[str, Any]]]:
    """The MCP tool's flat arguments: name -> (default, JSON schema of the field), in order.

    Generated from the model so that the schema a client sees is the one checked."""
    out: dict[str, tuple[Any, dict[str, Any]]] = {}
    top = SearchRequest.model_json_schema()["properties"]
    nested = FilterArgs.model_json_schema()["properties"]
    for name, field in SearchRequest.model_fields.items():
        if name == "filters":
            for fname, ffield in FilterArgs.model_fields.items():
                out[fname] = (ffield.default, _clean(nested[fname]))
            continue
        default = ... if field.is_required() else field.get_default(call_default_factory=True)
        out[name] = (default, _clean(top[name]))
    return out


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "title"}


__all__ = ["FILTER_KEYS", "MAX_FILTER_ITEMS", "MAX_LIMIT", "MAX_PATH_GLOBS", "MAX_QUERY_BYTES", "FilterArgs",
           "Retriever", "SearchRequest", "describe", "tool_fields"]
