"""Pages of a history numbered 1..n, n the record's own revision (a task's
or a knowledge record's revisions), as `relay.position_page` pages them,
for every record of a level at once, in either direction.

A backward page is the forward page that holds it (`relay.backward_window`),
so both directions read through one batch of forward pages. The record and
its history are read in one snapshot here, so no page starts above the
record's own revision (the case `position_page` pages again for a replayed
mutation's payload); should one, graphql-core answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from waypost.pagination import Page
from waypost.schema.fastpath.reads import ConnectionValue, Fallback, Json, Reads
from waypost.schema.relay import backward_window, check_cursor, window

# (record id, forward cursor, limit)
PageKey = tuple[str, str | None, int]
PageRead = Callable[[Reads, Sequence[PageKey]], dict[PageKey, Page[Json]]]


def position_pages(
    r: Reads, parents: list[Any], a: dict[str, Any], read: PageRead
) -> list[ConnectionValue]:
    """One page per parent (a record with `id` and `revision`), counted by
    the record's revision."""
    w = window(a.get("first"), a.get("after"), a.get("last"), a.get("before"))
    check_cursor(w, int)
    wanted: list[PageKey | None] = []
    flags: list[tuple[bool | None, bool]] = []  # (hasNextPage if known, hasPreviousPage)
    for p in parents:
        if w.backward:
            back = backward_window(p["revision"], w)
            wanted.append(None if back.after is None else (p["id"], back.after, back.limit))
            flags.append((back.has_next, back.has_previous))
        else:
            wanted.append((p["id"], w.cursor, w.limit))
            # a forward page after a cursor has items before it
            flags.append((None, w.cursor is not None))
    pages = read(r, list(dict.fromkeys(k for k in wanted if k is not None)))
    result = []
    for p, k, (has_next, has_previous) in zip(parents, wanted, flags, strict=True):
        page = pages[k] if k is not None else Page([], [], False)
        if page.items and page.items[0]["revision"] > p["revision"]:
            raise Fallback  # not one snapshot after all: position_page knows what to do

        def count(r: Reads, n: int = p["revision"]) -> int:
            return n

        more = page.has_next if has_next is None else has_next
        result.append(ConnectionValue(page.items, page.cursors, more, has_previous, count))
    return result
