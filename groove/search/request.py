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

from collections.abc import Mapping
from typing import Any, Literal

from annotated_types import Ge, Le
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from groove.corpus.globs import MAX_GLOB_CHARS, MAX_GLOB_STARS
from groove.search.compiler import QueryError
from groove.search.filters import MAX_PATH_GLOBS, Filters, check_headings

MAX_QUERY_BYTES = 1024
MAX_LIMIT = 100
MAX_FILTER_ITEMS = 500
#: An answer budget (`max_chars` of search and get_document) is at least this many characters: less holds
#: no sentence worth reading.
MIN_BUDGET_CHARS = 100
MAX_SEARCH_CHARS = 1_000_000  # a search answer's budget at most (100 passages of a long section)
MAX_DOCUMENT_CHARS = 10_000_000  # a note's budget at most (more than [index] max_file_bytes allows)
MAX_HEADING_CHARS = 1024  # a heading path as get_document takes it
MAX_LINE = 10_000_000  # a line number or count of get_document's `lines`
MAX_CONFIDENCE_RATIO = 100  # a low_confidence ratio past any list's (top / mean of the top 10 is at most 10)
Retriever = Literal["hybrid", "fts", "vector"]


class FilterArgs(BaseModel):
    """Which notes a search may return (all optional; all given must hold)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path_globs: list[str] | None = Field(
        None,
        max_length=MAX_PATH_GLOBS,
        description=(
            f"Gitignore globs of note paths (work/**; !x excludes); each <= {MAX_GLOB_CHARS} characters, "
            f"{MAX_GLOB_STARS} '*'."
        ),
    )
    tags_any: list[str] | None = Field(None, max_length=MAX_FILTER_ITEMS, description="Notes with any of these tags.")
    tags_all: list[str] | None = Field(None, max_length=MAX_FILTER_ITEMS, description="Notes with all of these tags.")
    date_from: str | None = Field(None, description="Date from, YYYY-MM-DD.")
    date_to: str | None = Field(None, description="Date to, YYYY-MM-DD.")
    fields: dict[str, Any] | None = Field(
        None, max_length=MAX_FILTER_ITEMS, description="Frontmatter key: value pairs, all matching."
    )

    def compile(self) -> Filters:
        """The validated filter (dates normalised, tags folded); QueryError on bad input."""
        return Filters.build(
            path_globs=self.path_globs,
            tags_any=self.tags_any,
            tags_all=self.tags_all,
            date_from=self.date_from,
            date_to=self.date_to,
            fields=self.fields,
        )


FILTER_KEYS = tuple(FilterArgs.model_fields)


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)

    query: str = Field(
        strict=True,
        description='Words or a question; "a phrase" verbatim; -word excludes.',
    )
    limit: int = Field(10, strict=True, ge=1, le=MAX_LIMIT, description="Passages to return.")
    retriever: Retriever = Field(
        "hybrid",
        description="hybrid (best), fts or vector.",
    )
    rerank: bool | None = Field(None, strict=True, description="Rerank (default: server's).")
    mmr: bool | None = Field(None, strict=True, description="MMR diversity (default: server's).")
    mmr_lambda: float | None = Field(None, ge=0.0, le=1.0, description="MMR: 1 is relevance only.")
    mmr_same_doc_penalty: float | None = Field(None, ge=0, description="MMR: same-note penalty.")
    parent_retriever: bool | None = Field(None, strict=True, description="Expand hits to section or note.")
    filters: FilterArgs = Field(default_factory=FilterArgs, description="Which notes may be returned.")
    explain: bool = Field(False, strict=True, description="Add the query plan and timings.")
    max_chars: int | None = Field(
        None,
        strict=True,
        ge=MIN_BUDGET_CHARS,
        le=MAX_SEARCH_CHARS,
        description="Total passage characters (e.g. 4000).",
    )
    min_quality: float | None = Field(
        None,
        strict=True,
        ge=0.0,
        le=1.0,
        description="Hide passages under this quality (default 0.3).",
    )
    include_low_quality: bool = Field(
        False,
        strict=True,
        description="Show low-quality passages too.",
    )
    exclude_headings: list[str] | None = Field(None, description="Skip sections under these headings.")
    min_confidence_ratio: float | None = Field(None, gt=0, description="low_confidence if top/mean(top 10) < this.")

    _compiled: Filters = PrivateAttr(default_factory=Filters)

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise QueryError(describe(exc)) from None

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> SearchRequest:
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

    @field_validator("min_confidence_ratio")
    @classmethod
    def _ratio(cls, value: float | None) -> float | None:
        if value is not None and value > MAX_CONFIDENCE_RATIO:
            raise ValueError(f"min_confidence_ratio must be {MAX_CONFIDENCE_RATIO} or less, got {value:g}")
        return value

    @field_validator("exclude_headings")
    @classmethod
    def _headings(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_headings(value, "exclude_headings")

    @model_validator(mode="after")
    def _compile_filters(self) -> SearchRequest:
        if self.include_low_quality and self.min_quality is not None:
            raise ValueError(
                "give min_quality or include_low_quality, not both: include_low_quality shows every "
                "passage, min_quality hides those under it"
            )
        self._compiled = self.filters.compile()
        return self

    @property
    def compiled_filters(self) -> Filters:
        return self._compiled


class LineRange(BaseModel):
    """Lines of a note: `from` (1-based, counted as a search hit's start_line counts them: frontmatter lines
    included) and `count` (default: to the end)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True)

    from_: int = Field(
        alias="from",
        strict=True,
        ge=1,
        le=MAX_LINE,
        description="First line.",
    )
    count: int | None = Field(
        None,
        strict=True,
        ge=1,
        le=MAX_LINE,
        description="Lines (default: to the end).",
    )

    @property
    def last(self) -> int | None:
        """The last line asked for (inclusive), None: to the end."""
        return None if self.count is None else self.from_ + self.count - 1


class DocumentRequest(BaseModel):
    """One note, or the part of it that matters (`get_document`): a section by its heading, or lines; and a budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(strict=True, description="The note's path relative to the notes folder, as search returned it.")
    heading: str | None = Field(
        None,
        strict=True,
        max_length=MAX_HEADING_CHARS,
        description="Only this section: a hit's context, or a unique heading.",
    )
    lines: LineRange | None = Field(
        None,
        description="Only these lines (not with heading).",
    )
    max_chars: int | None = Field(
        None,
        strict=True,
        ge=MIN_BUDGET_CHARS,
        le=MAX_DOCUMENT_CHARS,
        description="Cap on the answer's characters.",
    )

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise QueryError(describe(exc, (DocumentRequest, LineRange))) from None

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("path is empty; pass a path exactly as a search result returned it")
        return value

    @field_validator("heading")
    @classmethod
    def _heading(cls, value: str | None) -> str | None:
        if value is not None and not value.strip(" \t#>"):
            raise ValueError("heading is empty; give one of the note's headings (a search hit's context), or omit it")
        return value

    @model_validator(mode="after")
    def _one_part(self) -> DocumentRequest:
        if self.heading is not None and self.lines is not None:
            raise ValueError("give heading or lines, not both: a section by its heading, or a range of lines")
        return self

    @property
    def whole(self) -> bool:
        """Nothing but the path: the whole note, as it has always been answered."""
        return self.heading is None and self.lines is None and self.max_chars is None


def _argument_names(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def describe(exc: ValidationError, models: tuple[type[BaseModel], ...] | None = None) -> str:
    """The first problem of a validation error as one line (field name, bound, what was given);
    `models`: where the field's bounds are written (default: the search request and its filters)."""
    err = exc.errors(include_url=False)[0]
    loc = [str(p) for p in err["loc"] if not isinstance(p, int)]
    name = loc[-1] if loc else "request"
    if len(loc) > 1 and loc[0] != "filters":  # a nested argument (get_document's lines.from); filters are flat
        name = ".".join(loc)
    kind = err["type"]
    given = err.get("input")
    ctx = err.get("ctx") or {}
    shown = repr(given) if isinstance(given, str) else given
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    if kind in ("greater_than_equal", "less_than_equal"):
        low, high = _bounds(loc[-1] if loc else name, models)
        if low is None and high is None:  # a field of a model not named (a nested argument): the error's own bound
            low, high = ctx.get("ge"), ctx.get("le")
        if low is not None and high is not None:
            return f"{name} must be between {low} and {high}, got {shown}"
        if low is not None:
            return f"{name} must be {low} or more, got {shown}"
        return f"{name} must be {high} or less, got {shown}"
    if kind == "greater_than":
        low = ctx.get("gt")
        return (
            f"{name} must be greater than {low:g}, got {shown}"
            if isinstance(low, float)
            else f"{name} must be greater than {low}, got {shown}"
        )
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
    if kind == "string_too_long":
        return (
            f"{name} is {len(given) if isinstance(given, str) else '?'} characters; at most {ctx.get('max_length')} "
            "are allowed"
        )
    if kind == "missing":
        return f"{name} is required"
    if kind == "extra_forbidden":
        if models is not None:
            owner = models[1] if "." in name and len(models) > 1 else models[0]
            return (
                f"unknown argument {name!r}; {'lines' if owner is not models[0] else 'it'} takes: "
                f"{', '.join(_argument_names(owner))}"
            )
        return f"unknown argument {name!r}; see the search tool's schema for the arguments it takes"
    if kind == "model_type" and name == "lines":
        return f'lines must be an object like {{"from": 12, "count": 20}}, got {shown}'
    if kind in ("list_type", "dict_type", "model_type"):
        return f"{name} has the wrong type ({err['msg'].lower()}), got {shown}"
    return f"{name}: {err['msg']}"


def _bounds(name: str, models: tuple[type[BaseModel], ...] | None = None) -> tuple[Any, Any]:
    field = None
    for model in models or (SearchRequest,):
        field = model.model_fields.get(name) or next((f for f in model.model_fields.values() if f.alias == name), None)
        if field is not None:
            break
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


__all__ = [
    "FILTER_KEYS",
    "MAX_CONFIDENCE_RATIO",
    "MAX_DOCUMENT_CHARS",
    "MAX_FILTER_ITEMS",
    "MAX_HEADING_CHARS",
    "MAX_LIMIT",
    "MAX_LINE",
    "MAX_PATH_GLOBS",
    "MAX_QUERY_BYTES",
    "MAX_SEARCH_CHARS",
    "MIN_BUDGET_CHARS",
    "DocumentRequest",
    "FilterArgs",
    "LineRange",
    "Retriever",
    "SearchRequest",
    "describe",
    "tool_fields",
]
