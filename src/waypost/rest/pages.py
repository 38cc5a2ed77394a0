"""A REST list page as sent: bounded in bytes as well as in items.

`limit` bounds a page's items (at most 200), not its size, and an item may be
large: 200 tasks of the largest description and criteria were 45.9 MB in one
answer, and forty such requests at once took `serve` to 1.28 GB
(limitsjourney). A page therefore ends before the item that would take its
items past `PAGE_BYTES`, and its `next_cursor` goes on from the last item
sent: a client that pages by `next_cursor` (as the contract says to) gets
every item, in order, only in more pages. One item is always sent; the
largest one any list holds is far below the bound.

Each item is encoded once, here: the answer embeds the encoded text
(`msgspec.Raw`) rather than encoding the page a second time.
"""

from __future__ import annotations

from typing import Any

import msgspec

from waypost.pagination import Page
from waypost.rest.responses import encode_json

# 4 MiB of items: 200 items of up to 20 KiB each fit whole (a task with a
# long description, a knowledge body of 16 KiB), and forty pages at once
# hold a bounded few hundred MB rather than gigabytes
PAGE_BYTES = 4 * 1024 * 1024


def bounded_page(page: Page[Any], *, encoded: bool = True) -> dict[str, Any]:
    """`{"items", "next_cursor"}` of `page`, ended early past `PAGE_BYTES`.

    `encoded`: the items as their encoded text, for an answer encoded next
    (REST); else as they are (the in-process MCP backend, which reads them)."""
    texts: list[bytes] = []
    size = 0
    for item in page.items:
        text = encode_json(item)
        size += len(text) + 1  # the comma between items
        if texts and size > PAGE_BYTES:
            page = page.first(len(texts))
            break
        texts.append(text)
    items = [msgspec.Raw(t) for t in texts] if encoded else page.items
    return {"items": items, "next_cursor": page.next_cursor}
