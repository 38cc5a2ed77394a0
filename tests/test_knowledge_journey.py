"""A team's knowledge over weeks (knowledgejourney): rules a journey met that
no other test pinned, and the journey itself in short.

- `knowledge.corrected` carries `values` only for a title or tags that
  changed (docs/knowledge.md, "Corrections"; api.md, "Events"): a body-only
  correction has `values == {}`.
- `changed_fields` names `provenance` when a provenance member changed.
- A stale `expected_revision` is `409 revision_conflict` before the checks
  against what is stored now: the tasks a scope or provenance names and a
  replacement's project (docs/knowledge.md, "Corrections").
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create, error_of, kpath, make_project, make_task


async def last_event(caller: Caller, project: str) -> dict[str, Any]:
    events = (await caller.get(f"/api/v1/projects/{project}/events", limit=200)).json()["items"]
    event: dict[str, Any] = events[-1]
    return event


async def test_a_body_only_correction_carries_no_values(human: Caller, project: str) -> None:
    record = await create(human, project, tags=["cache"])
    r = await human.patch(kpath(project, record["id"]), correction(record, body="new body"))
    assert r.status_code == 200, r.text
    event = await last_event(human, project)
    assert event["type"] == "knowledge.corrected"
    assert event["data"] == {
        "revision": 2, "status": "observed", "changed_fields": ["body"], "values": {},
        "superseded_by_id": None,
    }  # fmt: skip
    # tags alone: the new tags, not the unchanged title
    fixed = r.json()
    r = await human.patch(kpath(project, record["id"]), correction(fixed, tags=["cache", "quorum"]))
    assert r.status_code == 200, r.text
    assert (await last_event(human, project))["data"]["values"] == {"tags": ["cache", "quorum"]}


async def test_a_provenance_correction_is_named_in_changed_fields(
    human: Caller, project: str
) -> None:
    record = await create(human, project, provenance={"summary": "runbook"})
    changed = correction(record)
    changed["provenance"]["source_uri"] = "https://ci.example/run/2"
    r = await human.patch(kpath(project, record["id"]), changed)
    assert r.status_code == 200, r.text
    data = (await last_event(human, project))["data"]
    assert data["changed_fields"] == ["provenance"] and data["values"] == {}
    # an identical correction is still a revision, and changes nothing
    r = await human.patch(kpath(project, record["id"]), correction(r.json()))
    assert r.status_code == 200 and r.json()["revision"] == 3
    assert (await last_event(human, project))["data"]["changed_fields"] == []


@pytest.mark.parametrize("where", ["scope", "source_task", "replacement"])
async def test_a_stale_correction_naming_what_is_not_there_is_a_conflict(
    human: Caller, project: str, where: str
) -> None:
    """Stale and naming another project's row at once: read again first."""
    other = await make_project(human, "elsewhere")
    foreign_task = await make_task(human, other)
    foreign_record = await create(human, other)
    record = await create(human, project)
    path = kpath(project, record["id"])
    assert (await human.patch(path, correction(record, title="two"))).status_code == 200
    if where == "scope":
        scope = {"task_ids": [foreign_task], "components": [], "environments": [], "versions": []}
        stale = correction(record, scope=scope)
    elif where == "source_task":
        stale = correction(record)
        stale["provenance"]["source_task_id"] = foreign_task
    else:
        stale = correction(record, status="superseded", superseded_by_id=foreign_record["id"])
    r = await human.patch(path, stale)
    assert r.status_code == 409, r.text
    error = r.json()["error"]
    assert error["code"] == "revision_conflict"
    assert error["details"] == {"expected_revision": 1, "current_revision": 2}
    # read again, the same change is refused for what it names
    current = (await human.get(path)).json()
    fresh = dict(stale, expected_revision=current["revision"])
    field = {
        "scope": "scope.task_ids[0]",
        "source_task": "provenance.source_task_id",
        "replacement": "superseded_by_id",
    }[where]
    assert error_of(await human.patch(path, fresh)) == (400, "invalid_request", field)


async def test_a_shared_lesson_through_weeks(service: Service, human: Caller, project: str) -> None:
    """Shared, corrected, fed back on through another project, withdrawn by
    deprecation and superseded by a project-only record: the other
    project's list and packet show it only with include_shared, always at
    its latest revision with its status, and its history and provenance
    stay whole."""
    edge = await make_project(human, "edge")
    agent = await service.agent()
    record = await create(
        agent, project, title="Lock the ledger first", body="take the wombat lock",
        collection="shared", share_across_projects=True,
        provenance={"summary": "seen in CI", "source_uri": "https://ci.example/1"},
    )  # fmt: skip

    async def edge_ids(**params: Any) -> list[str]:
        r = await human.get(f"/api/v1/projects/{edge}/context", q="wombat", **params)
        assert r.status_code == 200, r.text
        return [i["id"] for i in r.json()["items"] if i["type"] == "knowledge"]

    assert await edge_ids() == [] and await edge_ids(include_shared="true") == [record["id"]]
    service.clock.advance(days=7)
    path = kpath(project, record["id"])
    fixed = (await human.patch(path, correction(record, body="take the numbat lock"))).json()
    assert fixed["revision"] == 2 and fixed["provenance"]["source_uri"] == "https://ci.example/1"
    assert await edge_ids(include_shared="true") == []  # the removed word no longer finds it
    r = await human.get(f"/api/v1/projects/{edge}/context", q="numbat", include_shared="true")
    (item,) = r.json()["items"]
    assert item["revision"] == 2 and item["project_id"] == project
    # feedback through the other project, on the revision read (a new
    # session: the week-old one has expired)
    agent.session_id = None
    await agent.start_session()
    feedback = kpath(edge, record["id"], "feedback")
    r = await agent.post(feedback, {"expected_revision": 2, "useful": True})
    assert r.status_code == 201 and r.json()["project_id"] == project
    r = await agent.post(feedback, {"expected_revision": 1, "useful": True})
    assert error_of(r) == (409, "revision_conflict", None)
    # correcting it there is refused; withdrawing it is a deprecation at home
    r = await human.patch(kpath(edge, record["id"]), correction(fixed, status="deprecated"))
    assert r.status_code == 403 and r.json()["error"]["details"]["reason"] == "source_project_only"
    service.clock.advance(days=7)
    withdrawn = (await human.patch(path, correction(fixed, status="deprecated"))).json()
    replacement = await create(human, project, title="Lock the partitions", body="numbat")
    superseded = (
        await human.patch(
            path, correction(withdrawn, status="superseded", superseded_by_id=replacement["id"])
        )
    ).json()
    r = await human.get(f"/api/v1/projects/{edge}/context", q="numbat", include_shared="true")
    (item,) = r.json()["items"]  # the project-only replacement stays at home
    assert item["id"] == record["id"] and item["status"] == "superseded" and item["revision"] == 4
    listed = (await human.get(kpath(edge), include_shared="true")).json()["items"]
    assert [k["id"] for k in listed] == [record["id"]] and listed[0] == superseded
    assert (await human.get(kpath(edge))).json()["items"] == []
    detail = (await human.get(kpath(edge, record["id"]))).json()
    history = detail["history"]["items"]
    assert [h["revision"] for h in history] == [4, 3, 2, 1]
    assert [h["status"] for h in history] == ["superseded", "deprecated", "observed", "observed"]
    assert [h["feedback"]["useful"] for h in history] == [0, 0, 1, 0]
    assert history[-1]["provenance"]["actor_id"] == agent.principal_id
    assert history[0]["provenance"]["actor_id"] == human.principal_id
    assert {h["provenance"]["source_uri"] for h in history} == {"https://ci.example/1"}
    assert detail["feedback"] == {"useful": 1, "not_useful": 0}
