"""Counts of a project's knowledge list with shared records of other projects:
`totalCount` counts each record the pages hold exactly once, with a full-text
`q` as without one (sharejourney: a count with `q` that counted the project's
own shared records twice, once as its own and once as shared, went unnoticed
by every list test, which compared pages but counted without `q`)."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.knowledge_support import create, kpath, make_project

LIST = """query($shared: Boolean!, $q: String, $tag: String, $status: KnowledgeStatus) {
  project(id: "demo") {
    knowledge(includeShared: $shared, q: $q, tag: $tag, status: $status, first: 100) {
      totalCount nodes { restId } } } }"""


async def rest_ids(caller: Caller, project: str, **params: Any) -> list[str]:
    r = await caller.get(kpath(project), limit=200, **params)
    assert r.status_code == 200, r.text
    assert r.json()["next_cursor"] is None
    return [item["id"] for item in r.json()["items"]]


async def test_total_count_with_q_counts_the_projects_own_shared_records_once(
    service: Service, human: Caller, project: str
) -> None:
    other = await make_project(human, "other")
    mine_shared = await create(
        human, project, title="heron own shared", tags=["bird"],
        collection="shared", share_across_projects=True,
    )  # fmt: skip
    service.clock.advance(seconds=1)
    mine = await create(human, project, title="heron own", tags=["bird"])
    service.clock.advance(seconds=1)
    theirs_shared = await create(
        human, other, title="heron theirs shared", tags=["bird"],
        collection="shared", share_across_projects=True,
    )  # fmt: skip
    await create(human, other, title="heron theirs private", tags=["bird"])
    cases: list[tuple[dict[str, Any], set[str]]] = [
        ({"shared": False}, {mine_shared["id"], mine["id"]}),
        ({"shared": False, "q": "heron"}, {mine_shared["id"], mine["id"]}),
        ({"shared": True}, {mine_shared["id"], mine["id"], theirs_shared["id"]}),
        ({"shared": True, "q": "heron"}, {mine_shared["id"], mine["id"], theirs_shared["id"]}),
        ({"shared": True, "q": "heron", "tag": "bird"},
         {mine_shared["id"], mine["id"], theirs_shared["id"]}),
        ({"shared": True, "q": "heron", "status": "OBSERVED"},
         {mine_shared["id"], mine["id"], theirs_shared["id"]}),
        ({"shared": True, "q": "shared"}, {mine_shared["id"], theirs_shared["id"]}),
        ({"shared": True, "q": "private"}, set()),
    ]  # fmt: skip
    for variables, expected in cases:
        data = await human.gql(LIST, variables)
        assert "errors" not in data, (variables, data)
        listed = data["data"]["project"]["knowledge"]
        nodes = [n["restId"] for n in listed["nodes"]]
        assert sorted(nodes) == sorted(expected), variables
        assert listed["totalCount"] == len(expected), variables
        params: dict[str, Any] = {"include_shared": "true" if variables["shared"] else "false"}
        for name in ("q", "tag"):
            if name in variables:
                params[name] = variables[name]
        if "status" in variables:
            params["status"] = variables["status"].lower()
        assert await rest_ids(human, project, **params) == nodes, variables
