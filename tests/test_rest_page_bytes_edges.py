"""The edges of a REST list page's byte bound (rest/pages.py): a page whose
JSON text is exactly PAGE_BYTES is sent whole, its HEAD says the same length,
and a page cut short keeps room for its envelope (its next_cursor)."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Caller
from tests.knowledge_support import create, kpath
from waypost.rest.pages import PAGE_BYTES

BODY = 60 * 1024  # 67 such records are just under the bound
COUNT = 67


def _text(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def _records(human: Caller, project: str, prefix: str, count: int = COUNT) -> None:
    for n in range(count):
        await create(human, project, title=f"{prefix}{n:02}", body="x" * BODY)


async def _page(human: Caller, project: str) -> tuple[bytes, dict[str, Any]]:
    r = await human.get(kpath(project), limit=200)
    assert r.status_code == 200, r.text
    return r.content, r.json()


async def test_a_page_exactly_at_its_byte_bound_is_sent_whole(human: Caller, project: str) -> None:
    await _records(human, project, "a")
    text, page = await _page(human, project)
    assert page["next_cursor"] is None and len(page["items"]) == COUNT
    one = _text(page["items"][0])  # every item the same length (fixed-width titles)
    # one more record, its body sized so that the page is exactly PAGE_BYTES
    body = BODY - one + (PAGE_BYTES - len(text)) - 1
    assert 0 < body <= BODY
    await create(human, project, title="a99", body="x" * body)
    text, page = await _page(human, project)
    assert len(text) == PAGE_BYTES
    assert len(page["items"]) == COUNT + 1 and page["next_cursor"] is None
    # a HEAD of the list says the same length, and sends nothing
    head = await human.client.head(kpath(project), params={"limit": 200}, headers=human.headers())
    assert head.status_code == 200
    assert head.headers["content-length"] == str(PAGE_BYTES)


async def test_a_page_cut_short_keeps_room_for_its_next_cursor(human: Caller, project: str) -> None:
    # the oldest record comes last on the page: past the bound, it is cut
    await create(human, project, title="f00", body="x" * BODY)
    await _records(human, project, "a")
    _, page = await _page(human, project)
    one = _text(page["items"][0])
    items = sum(_text(i) + 1 for i in page["items"][:COUNT])  # the 60 KiB ones, commas
    # a newest record taking the items before the oldest to 10 bytes under the
    # bound: the page's envelope and cursor do not fit beside them
    body = BODY - one + (PAGE_BYTES - 10 - items) - 1
    assert 0 < body <= BODY
    await create(human, project, title="a99", body="x" * body)
    text, page = await _page(human, project)
    assert len(text) <= PAGE_BYTES
    assert page["next_cursor"] is not None
    walked = [i["title"] for i in page["items"]]
    rest = await human.get(kpath(project), limit=200, cursor=page["next_cursor"])
    walked += [i["title"] for i in rest.json()["items"]]
    assert rest.json()["next_cursor"] is None
    assert walked == ["a99", *(f"a{n:02}" for n in reversed(range(COUNT))), "f00"]
