"""A REST list page is bounded in bytes as well as in items (rest/pages.py):
past PAGE_BYTES it ends early, and its next_cursor goes on from there."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Caller, Service
from tests.knowledge_support import create, kpath
from tests.test_mcp_sessions import actor_of
from waypost.mcp_server.backend import LocalBackend
from waypost.rest.pages import PAGE_BYTES

# 60 KiB bodies: 80 records are ~4.8 MiB, past the bound, under limit=200
BODY = "x" * (60 * 1024)
COUNT = 80


async def _many_large(human: Caller, project: str) -> list[str]:
    return [(await create(human, project, title=f"r{n}", body=BODY))["id"] for n in range(COUNT)]


async def _walk(human: Caller, project: str) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    cursor = None
    while True:
        r = await human.get(kpath(project), limit=200, **({"cursor": cursor} if cursor else {}))
        assert r.status_code == 200, r.text
        pages.append(r.json())
        assert len(r.content) <= PAGE_BYTES
        cursor = pages[-1]["next_cursor"]
        if cursor is None:
            return pages


async def test_a_page_past_its_byte_bound_ends_early_and_goes_on(
    human: Caller, project: str
) -> None:
    made = await _many_large(human, project)
    pages = await _walk(human, project)
    assert len(pages) == 2
    first, second = pages
    assert 0 < len(first["items"]) < COUNT and first["next_cursor"] is not None
    # it ends before the item that would take it past the bound, not earlier
    assert len(json.dumps(first, separators=(",", ":"))) + len(BODY) + 1024 > PAGE_BYTES
    assert len(first["items"]) + len(second["items"]) == COUNT
    seen = [i["id"] for p in pages for i in p["items"]]
    assert seen == sorted(made, reverse=True)  # every record once, in list order
    assert all(i["body"] == BODY for p in pages for i in p["items"])


async def test_a_page_within_its_bound_is_the_whole_limit(human: Caller, project: str) -> None:
    made = [(await create(human, project, title=f"r{n}"))["id"] for n in range(5)]
    r = await human.get(kpath(project), limit=200)
    page = r.json()
    assert [i["id"] for i in page["items"]] == sorted(made, reverse=True)
    assert page["next_cursor"] is None
    # the items are sent as the page would be encoded whole
    assert r.content == json.dumps(page, separators=(",", ":"), ensure_ascii=False).encode()


async def test_the_in_process_mcp_backend_reads_the_same_bounded_page(
    service: Service, human: Caller, project: str
) -> None:
    await _many_large(human, project)
    backend = LocalBackend(service.rt, await actor_of(service, human))
    reply = await backend.call(
        "GET", "/api/v1/projects/{project}/knowledge", {"project": project}, query={"limit": "200"}
    )
    rest = (await human.get(kpath(project), limit=200)).json()
    assert reply.status == 200
    assert [i["id"] for i in reply.body["items"]] == [i["id"] for i in rest["items"]]
    assert reply.body["next_cursor"] == rest["next_cursor"] is not None
    json.dumps(reply.body)  # plain values the MCP server writes as its tool's text
