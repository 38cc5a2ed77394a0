"""Feedback sent through another project on a shared
record records its event in the record's own project, naming the project it
came through (docs/api.md: `via_project_id` "the project it was sent through,
for a shared record").
(Unpinned before: mutantaudit5.)"""

from __future__ import annotations

from tests.conftest import Caller
from tests.knowledge_support import create, kpath, make_project


async def test_shared_feedback_event_names_the_project_it_came_through(
    human: Caller, project: str
) -> None:
    record = await create(human, project, collection="shared", share_across_projects=True)
    other = await make_project(human, "other")
    r = await human.post(
        kpath(other, record["id"], "feedback"), {"expected_revision": 1, "useful": False}
    )
    assert r.status_code == 201, r.text
    events = (await human.get(f"/api/v1/projects/{project}/events")).json()["items"]
    assert events[-1]["type"] == "knowledge.feedback_recorded"
    assert events[-1]["data"] == {
        "feedback_id": r.json()["id"], "revision": 1, "useful": False, "via_project_id": other
    }  # fmt: skip
    theirs = (await human.get(f"/api/v1/projects/{other}/events")).json()["items"]
    assert all(e["type"] != "knowledge.feedback_recorded" for e in theirs)
