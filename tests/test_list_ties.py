"""Lists whose order key several items share (decisions opened in the same
millisecond) page through each item once, the tie broken by id: the
status-filtered decision list (each status walks its own index of the
stored state) and a task's `decisions` connection, forward and backward."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import DECISIONS, new_task, open_decision


async def _rest_walk(caller: Caller, limit: int, **params: Any) -> list[str]:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        at = {"cursor": cursor} if cursor else {}
        r = await caller.get(DECISIONS, limit=limit, **params, **at)
        assert r.status_code == 200, r.text
        page = r.json()
        seen += [d["id"] for d in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen


async def _gql_walk(caller: Caller, field: str, args: str, n: int, backward: bool) -> list[str]:
    """Every page of a connection under `project(id: "demo")`; `field` is a
    path whose last step takes the paging arguments (`{}` marks where)."""
    seen: list[str] = []
    cursor: str | None = None
    while True:
        paging = f"last: {n}" if backward else f"first: {n}"
        if cursor:
            paging += f', {"before" if backward else "after"}: "{cursor}"'
        wanted = "pageInfo { hasNextPage hasPreviousPage startCursor endCursor }"
        selection = f"nodes {{ restId }} {wanted}"
        query = '{ project(id: "demo") { ' + field.format(f"{paging}{args}", selection) + " } }"
        data = await caller.gql(query)
        assert "errors" not in data, data
        found: Any = data["data"]["project"]
        while "nodes" not in found or "pageInfo" not in found:
            found = next(iter(found.values()))
            if isinstance(found, list):
                found = found[0]
        ids = [n["restId"] for n in found["nodes"]]
        info = found["pageInfo"]
        if backward:
            seen = ids + seen
            if not info["hasPreviousPage"]:
                return seen
            cursor = info["startCursor"]
        else:
            seen += ids
            if not info["hasNextPage"]:
                return seen
            cursor = info["endCursor"]


async def test_a_status_filtered_decision_list_pages_through_equal_times_by_id(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    made = [(await open_decision(human, [task]))["id"] for _ in range(5)]  # one instant
    listed = (await human.get(DECISIONS, status="pending", limit=200)).json()["items"]
    assert {d["created_at"] for d in listed} == {service.clock.iso()}
    assert [d["id"] for d in listed] == sorted(made)
    for limit in (1, 2):
        assert await _rest_walk(human, limit, status="pending") == sorted(made)
        assert await _rest_walk(human, limit) == sorted(made)
    for backward in (False, True):
        walked = await _gql_walk(human, "decisions({}) {{ {} }}", ", status: PENDING", 2, backward)
        assert walked == sorted(made)


async def test_an_expired_decision_list_pages_through_equal_times_by_id(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    made = [
        (await open_decision(human, [task], expires_at="2026-11-29T19:00:00.000Z"))["id"]
        for _ in range(4)
    ]
    service.clock.advance(hours=2)
    assert await _rest_walk(human, 1, status="expired") == sorted(made)


async def test_a_tasks_decisions_page_through_equal_times_by_id(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    made = [(await open_decision(human, [task]))["id"] for _ in range(5)]  # one instant
    newest_first = sorted(made, reverse=True)
    path = 'task(id: "' + task + '") {{ decisions({}) {{ {} }} }}'
    for n in (1, 2):
        for backward in (False, True):
            assert await _gql_walk(human, path, "", n, backward) == newest_first


async def test_a_task_list_pages_through_equal_times_by_id(
    service: Service, human: Caller, project: str
) -> None:
    """Tasks created in the same millisecond (the clock does not move here):
    each page goes on after the last task's (created_at, id), not after its
    time alone, which skipped the rest of that millisecond. Only a `q` test
    held the id half of the key (cursorjourney)."""
    made = [await new_task(human, f"task {i}") for i in range(5)]
    seen: list[str] = []
    cursor: str | None = None
    while True:
        at = {"cursor": cursor} if cursor else {}
        r = await human.get(f"/api/v1/projects/{project}/tasks", limit=2, **at)
        assert r.status_code == 200, r.text
        seen += [t["id"] for t in r.json()["items"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(made)
    for backward in (False, True):
        assert await _gql_walk(human, "tasks({}) {{ {} }}", "", 2, backward) == sorted(made)
