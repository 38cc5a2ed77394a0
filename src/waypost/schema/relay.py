"""Relay building blocks: the Node interface, global ids, connections and DateTime."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, NewType, TypeVar

import strawberry

from waypost.b64url import decode_b64url, encode_b64url
from waypost.decoding import decimal_integer
from waypost.errors import InvalidRequest
from waypost.pagination import Page, check_limit, decode_cursor, encode_cursor

T = TypeVar("T")
NodeResolver = Callable[[Any, str], Awaitable[Any]]
# type name -> coroutine(info, rest id) returning the object or None; filled by
# each domain module of the schema.
NODE_RESOLVERS: dict[str, NodeResolver] = {}


def _parse_datetime(value: object) -> str:
    # Inputs stay strings: the resolvers validate them as REST does, so a bad
    # instant in a mutation input is a userError naming its field, not a fault.
    if not isinstance(value, str):
        raise ValueError("DateTime takes an RFC 3339 string")
    return value


# Times are strings as in REST; the schema maps this type to the DateTime
# scalar below (`StrawberryConfig.scalar_map`), which keeps mypy's view plain.
DateTime = NewType("DateTime", str)
DATETIME_SCALAR = strawberry.scalar(
    name="DateTime",
    description="An instant as an RFC 3339 string with an explicit offset, as in REST"
    " (the service writes UTC with milliseconds: `2026-11-30T09:00:00.000Z`).",
    specified_by_url="https://datatracker.ietf.org/doc/html/rfc3339",
    serialize=str,
    parse_value=_parse_datetime,
)


def global_id(type_name: str, rest_id: str) -> strawberry.ID:
    # unpadded: ids keep to A-Za-z0-9_- (section 2); padded ones still parse
    return strawberry.ID(encode_b64url(f"{type_name}:{rest_id}".encode()))


def parse_global_id(value: str) -> tuple[str, str]:
    try:
        type_name, _, rest_id = decode_b64url(value, padded=True).decode().partition(":")
    except (ValueError, UnicodeError) as exc:
        raise InvalidRequest.field("id", "malformed global id") from exc
    if not type_name or not rest_id:
        raise InvalidRequest.field("id", "malformed global id")
    return type_name, rest_id


@strawberry.interface(description="A record with a global id, resolvable with `node(id)`.")
class Node:
    id: strawberry.ID = strawberry.field(
        description="The global id: opaque, stable, accepted by `node(id)`."
    )


@strawberry.type(description="Where a page sits in its list.")
class PageInfo:
    has_next_page: bool = strawberry.field(
        description="More items follow the page (in list order)."
    )
    has_previous_page: bool = strawberry.field(
        description="More items come before the page (in list order)."
    )
    start_cursor: str | None = strawberry.field(
        description="The first item's cursor; null for an empty page."
    )
    end_cursor: str | None = strawberry.field(
        description="The last item's cursor; null for an empty page."
    )


@strawberry.type(description="One item of a page with its cursor.")
class Edge(Generic[T]):
    cursor: str = strawberry.field(description="Opaque position of the item (the REST cursor).")
    node: T = strawberry.field(description="The item.")


Count = Callable[[], Awaitable[int]]


def known_count(value: int) -> Count:
    """The `Count` of a total already known (numbered revisions or
    generations: the latest number is their count)."""

    async def count() -> int:
        return value

    return count


@strawberry.type(description="A page of a list: edges or nodes, page info and the total.")
class Connection(Generic[T]):
    edges: list[Edge[T]] = strawberry.field(description="The page's items with their cursors.")
    nodes: list[T] = strawberry.field(description="The page's items, without cursors.")
    page_info: PageInfo = strawberry.field(description="Where the page sits in its list.")
    count: strawberry.Private[Count]

    @strawberry.field(description="How many items the whole list holds (all pages).")
    async def total_count(self) -> int:
        return await self.count()

    @classmethod
    def of(cls, page: Page[Any], make: Callable[[Any], T], count: Count) -> Connection[T]:
        nodes = [make(i) for i in page.items]
        edges = [Edge(cursor=c, node=n) for n, c in zip(nodes, page.cursors, strict=True)]
        info = PageInfo(
            has_next_page=page.has_next,
            has_previous_page=page.has_previous,
            start_cursor=page.cursors[0] if page.cursors else None,
            end_cursor=page.cursors[-1] if page.cursors else None,
        )
        return cls(edges=edges, nodes=nodes, page_info=info, count=count)


@dataclass(frozen=True)
class Window:
    """The paging arguments of one connection field: forward (`first`/`after`)
    or backward (`last`/`before`)."""

    limit: int
    cursor: str | None
    backward: bool


def window(
    first: int | None, after: str | None, last: int | None = None, before: str | None = None
) -> Window:
    """Checks the paging arguments: `first`/`last` from 1 to 100 (default
    `first: 50`); `first` and `last` together are refused, and so is mixing
    the directions (`first` with `before`, `last` with `after`). An empty
    cursor is no cursor, as an empty REST `cursor=` is."""
    after, before = after or None, before or None
    if first is not None and last is not None:
        raise InvalidRequest.field("last", "first and last together are refused")
    if last is not None or (before is not None and first is None):
        if after is not None:
            raise InvalidRequest.field("after", "after pages forward: use it with first")
        return Window(check_limit(last, maximum=100, field_name="last"), before, True)
    if before is not None:
        raise InvalidRequest.field("before", "before pages backward: use it with last")
    return Window(check_limit(first, maximum=100, field_name="first"), after, False)


ForwardPages = Callable[[tuple[str, str | None, int]], Awaitable[Page[Any]]]


def _position(cursor: str) -> int:
    """The history position a cursor of `position_page` names."""
    return int(str(decode_cursor(cursor, int)[0]))


def event_sequence(cursor: str) -> int | None:
    """The event sequence an `events` cursor names, read as REST reads `?after=`
    (decimal digits, leading zeros allowed, nothing around them); None when
    it names none. It was read as JSON, which took " 5" and refused "05",
    each the other way round from REST."""
    return decimal_integer(cursor, signed=False)


def check_cursor(w: Window, *parts: type) -> None:
    """Refuse a malformed cursor in the field that carries it, naming `after` or
    `before`, before its page joins a batched load: a bad cursor in one field
    failed the whole batch, nulling sibling connections (another task's,
    another project's) that sent none, under the name `cursor`."""
    if w.cursor is not None:
        decode_cursor(w.cursor, *parts, field_name="before" if w.backward else "after")


async def position_page(
    load: ForwardPages,
    record_id: str,
    total: int,
    w: Window,
) -> Page[Any]:
    """A page of a newest-first history whose positions are exactly 1..total
    (decision generations, knowledge and task revisions), through its loader
    of forward pages `(record id, after cursor, limit)`.

    `total` is the record's own revision (generation): the history as of the
    record read, never past it. A replayed mutation answers with the record
    as it was, and its `revisions` showed the newer ones too, under a
    `totalCount` of the old count, while `last` stopped at the old count.

    Backward, the items before `before` (position p) in list order are the
    newer positions p+1..total; the last `n` of them are the forward page that
    starts after position min(total, p+n) + 1, so both directions share one
    loader and one statement shape.
    """
    check_cursor(w, int)
    if not w.backward:
        page = await load((record_id, w.cursor, w.limit))
        if page.cursors and _position(page.cursors[0]) > total:
            # The history has newer positions than the record read (a replayed
            # mutation's payload, or one a later write overtook; a record and
            # its history read in one snapshot always agree): the page again,
            # from the record's own position down. Only then, so that every
            # record's first page shares one statement.
            start = total + 1 if w.cursor is None else min(total + 1, _position(w.cursor))
            page = await load((record_id, encode_cursor(start), w.limit))
        # as every forward page: `after` names a position, so items precede it
        return Page(page.items, page.cursors, page.has_next, w.cursor is not None)
    back = backward_window(total, w)
    if back.after is None:
        return Page([], [], back.has_next, back.has_previous)
    page = await load((record_id, back.after, back.limit))
    return Page(page.items, page.cursors, back.has_next, back.has_previous)


@dataclass(frozen=True)
class BackwardWindow:
    """A backward page of a history numbered 1..total, as the forward page
    that holds it (`after`, `limit`; `after` None when the page is empty):
    positions `top` down to `top - limit + 1`."""

    after: str | None
    limit: int
    has_next: bool
    has_previous: bool
    top: int


def backward_window(total: int, w: Window) -> BackwardWindow:
    """Where `position_page`'s backward page lies (the GraphQL fast path
    pages the same way, `schema/fastpath/`)."""
    p = 0
    if w.cursor is not None:
        # a made-up position below 1 is past the list's oldest end, as 0 is
        # (-1 gave a page shorter than asked, -3 none under hasPreviousPage)
        p = max(0, int(str(decode_cursor(w.cursor, int, field_name="before")[0])))
    top = min(total, p + w.limit)
    after = encode_cursor(top + 1) if top > p else None
    return BackwardWindow(after, max(top - p, 0), w.cursor is not None, top < total, top)
