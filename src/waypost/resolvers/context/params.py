"""The context request and its bounds (knowledge-and-decision contract).

`q` is checked here for everything a search needs (length, term count, text
that SQLite can take); the same check serves the `q` of the knowledge and task
lists, so every search refuses the same inputs with the same 400.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from waypost.errors import InvalidRequest

Q_MAX_BYTES = 1024
Q_MAX_TERMS = 32
LIMIT_DEFAULT = 20
LIMIT_MAX = 100
BUDGET_DEFAULT = 16_384
BUDGET_MIN = 1_024
BUDGET_MAX = 131_072
FILTER_MAX_CHARS = 200  # a scope value is at most this long (docs/knowledge.md)

# Any text of a scope value's length, also what today's rules no longer
# store (whitespace at an end, a newline): earlier builds stored such values,
# and a filter is the only way into a packet for the records that hold them.
Filter = Annotated[str, msgspec.Meta(min_length=1, max_length=FILTER_MAX_CHARS)]


def _said(description: str) -> msgspec.Meta:
    return msgspec.Meta(description=description)


class ContextQuery(msgspec.Struct, forbid_unknown_fields=True):
    """Query parameters of GET /api/v1/projects/{project}/context."""

    # described for the MCP tool's schema and the OpenAPI document: an agent
    # read only `project` and `q` described (contextjourney)
    q: str  # described with every search's `q` (rest/openapi.py SEARCH_NOTE)
    limit: Annotated[
        int, msgspec.Meta(ge=1, le=LIMIT_MAX), _said("At most this many items, decisions included.")
    ] = LIMIT_DEFAULT
    budget: Annotated[
        int,
        msgspec.Meta(ge=BUDGET_MIN, le=BUDGET_MAX),
        _said("Bytes for the policy and the items together (docs/context.md counts them)."),
    ] = BUDGET_DEFAULT
    include_shared: Annotated[bool, _said("Also knowledge other projects share with this one.")] = (
        False
    )
    task_id: Annotated[
        Filter | None,
        _said("The task you work on: its decisions (not the whole project's) come first."),
    ] = None
    component: Annotated[
        Filter | None,
        _said("Your component: a record scoped to components matches only one named here."),
    ] = None
    environment: Annotated[
        Filter | None, _said("Your environment, spelt as records spell it (prod is not Prod).")
    ] = None
    version: Annotated[
        Filter | None, _said("Your version, spelt as records spell it (v2.3.1 is not 2.3.1).")
    ] = None

    def __post_init__(self) -> None:
        # NUL alone is refused: SQLite's JSON reads a stored value only up to
        # it, so a filter that holds one matches no record, old or new (msgspec
        # passes an exception of ours through as raised, field and all)
        for name in ("task_id", "component", "environment", "version"):
            value = getattr(self, name)
            if value is not None and "\x00" in value:
                raise InvalidRequest.field(name, f"{name} must not hold NUL (U+0000)")


def search_terms(q: str, field: str = "q") -> list[str]:
    """The whitespace-separated terms of `q`, or a 400 naming `field`.

    Refused: blank text, more than 1,024 UTF-8 bytes or 32 terms, NUL (SQLite
    ends query text there) and unpaired surrogates (not text at all; they
    can arrive through a GraphQL string escape).
    """
    try:
        size = len(q.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidRequest.field(field, f"{field} must not hold an unpaired surrogate") from exc
    if size > Q_MAX_BYTES:
        raise InvalidRequest.field(field, f"{field} is limited to {Q_MAX_BYTES} bytes of UTF-8")
    if "\x00" in q:
        raise InvalidRequest.field(field, f"{field} must not hold NUL (U+0000)")
    terms = q.split()
    if not terms:
        raise InvalidRequest.field(field, f"{field} needs at least one search term")
    if len(terms) > Q_MAX_TERMS:
        raise InvalidRequest.field(
            field, f"{field} is limited to {Q_MAX_TERMS} terms (whitespace-separated)"
        )
    return terms
