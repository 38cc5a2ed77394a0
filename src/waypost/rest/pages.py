"""A REST list page as sent: bounded in bytes as well as in items.

`limit` bounds a page's items (at most 200), not its size, and an item may be
large: 200 tasks of the largest description and criteria were 45.9 MB in one
answer, and forty such requests at once took `serve` to 1.14 GB
(limitsjourney). A page's JSON text is therefore at most `PAGE_BYTES`: it
ends before the item that would take it past, and its `next_cursor` goes on
from the last item sent, so a client that pages by `next_cursor` (as the
contract says to) gets every item, in order, only in more pages. One item is
always sent; the largest one any list holds is far below the bound.

A page within the bound (nearly every one) is encoded once, whole, and sent
as that text (`msgspec.Raw`); only a page past it is encoded again, item by
item, to find where it ends (encoding every page item by item cost 1.4x-2.8x
of the whole page's encoding).
"""

from __future__ import annotations

from typing import Any

import msgspec

from waypost.pagination import Page
from waypost.rest.responses import encode_json

# 4 MiB: 200 items of 20 KiB each fit whole (a task with a long description,
# a knowledge body of 16 KiB), and forty pages at once hold a few hundred MB
# rather than gigabytes
PAGE_BYTES = 4 * 1024 * 1024
# what a page's text holds besides its items: `{"items":[`, `],"next_cursor":`,
# a cursor (tens of characters) and `}`
_ENVELOPE_BYTES = 1024


def bounded_page(page: Page[Any], *, encoded: bool = True) -> Any:
    """`{"items", "next_cursor"}` of `page`, ended early past `PAGE_BYTES`.

    `encoded`: the page as its JSON text (`msgspec.Raw`), for an answer
    encoded next (REST); else as values (the in-process MCP backend, which
    reads them)."""
    whole = encode_json(page.to_json())
    if len(whole) <= PAGE_BYTES:
        return msgspec.Raw(whole) if encoded else page.to_json()
    size = 0
    for count, item in enumerate(page.items):
        size += len(encode_json(item)) + 1  # the comma between items
        if count and size > PAGE_BYTES - _ENVELOPE_BYTES:
            page = page.first(count)
            break
    return msgspec.Raw(encode_json(page.to_json())) if encoded else page.to_json()
