"""Organisation scale: a request's statements follow its page, not the database.

scalejourney (200 projects, 30,000 tasks, 20,000 knowledge records, 2,000
decisions) found the console inbox (`INBOX`, console/static/js/queries.js)
reading 513 statements for a page of 20 projects, 1,263 for a page of 50
(about 25 a project, four of them `SELECT * FROM projects WHERE id = ?`,
and one batch of decision objects for each list of each project, plus the
digest's pending list, which the inbox never shows): 160 ms a page of 50 on
that file, 68 ms since (docs/graphql.md, "The fast path"). An open tab of
more than 8 projects polls the whole inbox every 4 s.
"""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import Caller, Service
from tests.test_graphql_fastpath import console_query


async def _statements(service: Service, call: Any) -> list[str]:
    seen: list[str] = []
    await service.rt.db.set_trace(seen.append)
    try:
        await call()
    finally:
        await service.rt.db.set_trace(None)
    return seen


async def _project_with_pending_decision(human: Caller, project_id: str) -> None:
    r = await human.post("/api/v1/projects", {"id": project_id, "name": project_id})
    assert r.status_code == 201, r.text
    tasks = []
    for i in range(2):
        r = await human.post(f"/api/v1/projects/{project_id}/tasks", {"title": f"T{i}"})
        assert r.status_code == 201, r.text
        tasks.append(r.json()["id"])
    r = await human.post(f"/api/v1/projects/{project_id}/decisions", {
        "question": "Ship?", "options": ["Yes", "No"], "rationale": "r",
        "required_actor": "human", "task_ids": tasks, "environment": "prod",
    })  # fmt: skip
    assert r.status_code == 201, r.text


# the statements that read decision objects (views_store.py: the decisions,
# their current generations with answers, their affected tasks)
_DECISION_OBJECTS = re.compile(
    r"SELECT (d\.\*, s\.disposition|g\.\*, a\.disposition|x\.decision_id, x\.generation)"
)


async def test_the_inbox_page_reads_its_decisions_in_one_batch_for_all_its_projects(
    service: Service, human: Caller
) -> None:
    """Every project's awaiting, stale and expired lists and its digest's
    decisions: one batch for the page, not one for each list of each project."""
    inbox = console_query("INBOX")

    async def count() -> int:
        async def run() -> None:
            data = await human.gql(inbox, {})
            assert "errors" not in data, data

        await run()  # plan compiled, caches warm
        return len([s for s in await _statements(service, run) if _DECISION_OBJECTS.match(s)])

    await _project_with_pending_decision(human, "p1")
    one = await count()
    for p in ("p2", "p3", "p4"):
        await _project_with_pending_decision(human, p)
    assert await count() == one  # before: 1 project 6 such statements, 4 projects 24


async def test_the_inbox_never_reads_the_pending_list_it_does_not_show(
    service: Service, human: Caller
) -> None:
    """`digest { pendingDecisions }` is not in the inbox's selection: its
    decisions (up to 200 a project) are not loaded for it."""
    await _project_with_pending_decision(human, "p1")
    decision_id = (await human.get("/api/v1/projects/p1/decisions")).json()["items"][0]["id"]
    query = 'query { project(id: "p1") { digest { readyTaskCount blockedTasks { restId } } } }'
    await human.gql(query, {})

    async def run() -> None:
        data = await human.gql(query, {})
        assert "errors" not in data, data
        assert len(data["data"]["project"]["digest"]["blockedTasks"]) == 2

    loads = [s for s in await _statements(service, run) if _DECISION_OBJECTS.match(s)]
    assert not any(decision_id in s for s in loads), loads


async def test_the_inbox_reads_each_project_of_its_page_once(
    service: Service, human: Caller
) -> None:
    for p in ("p1", "p2", "p3"):
        await _project_with_pending_decision(human, p)
    inbox = console_query("INBOX")
    await human.gql(inbox, {})

    async def run() -> None:
        assert "errors" not in await human.gql(inbox, {})

    seen = await _statements(service, run)
    one_by_one = [s for s in seen if s.startswith("SELECT * FROM projects WHERE id = ")]
    assert one_by_one == [], one_by_one
