"""GraphQL `Event.project` and `Event.subject`: an event's references are
objects, not bare ids (service contract section 12)."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import new_task, open_decision
from tests.knowledge_support import create, kpath, make_project

EVENTS = """{ project(id: "demo") { events(first: 100) { nodes {
  type subjectType subjectId
  project { restId name }
  subject {
    __typename
    ... on Project { restId }
    ... on PolicyRevision { revision rules }
    ... on Task { restId title }
    ... on Knowledge { restId title }
    ... on Decision { restId question }
  }
} } } }"""


async def events(caller: Caller) -> list[dict[str, Any]]:
    data = await caller.gql(EVENTS)
    assert "errors" not in data, data
    found: list[dict[str, Any]] = data["data"]["project"]["events"]["nodes"]
    return found


async def test_every_subject_type_resolves_to_its_record(human: Caller, project: str) -> None:
    r = await human.patch("/api/v1/projects/demo/policy", {"expected_revision": 1, "rules": "two"})
    assert r.status_code == 200, r.text
    task_id = await new_task(human, "Ship it")
    record = await create(human, "demo", title="A lesson")
    decision = await open_decision(human, [task_id], question="Ship now?")

    found = await events(human)
    assert [e["type"] for e in found] == [
        "project.created",
        "policy.updated",
        "task.created",
        "knowledge.created",
        "decision.opened",
    ]
    assert {e["project"]["restId"] for e in found} == {"demo"}
    assert [e["subject"] for e in found] == [
        {"__typename": "Project", "restId": "demo"},
        {"__typename": "PolicyRevision", "revision": 2, "rules": "two"},
        {"__typename": "Task", "restId": task_id, "title": "Ship it"},
        {"__typename": "Knowledge", "restId": record["id"], "title": "A lesson"},
        {"__typename": "Decision", "restId": decision["id"], "question": "Ship now?"},
    ]
    # the ids say the same as the objects
    assert [e["subjectId"] for e in found[2:]] == [task_id, record["id"], decision["id"]]


async def test_a_policy_event_shows_the_revision_it_wrote(human: Caller, project: str) -> None:
    for revision, rules in ((1, "second"), (2, "third")):
        r = await human.patch(
            "/api/v1/projects/demo/policy", {"expected_revision": revision, "rules": rules}
        )
        assert r.status_code == 200, r.text
    subjects = [e["subject"] for e in await events(human) if e["type"] == "policy.updated"]
    # each event keeps the revision it wrote, not the policy as it is now
    assert subjects == [
        {"__typename": "PolicyRevision", "revision": 2, "rules": "second"},
        {"__typename": "PolicyRevision", "revision": 3, "rules": "third"},
    ]


async def test_feedback_given_through_sharing_shows_the_record_in_its_project(
    service: Service, human: Caller, project: str
) -> None:
    record = await create(
        human, "demo", title="Shared lesson", collection="shared", share_across_projects=True
    )
    await make_project(human, "other")
    r = await human.post(
        kpath("other", record["id"], "feedback"), {"expected_revision": 1, "useful": True}
    )
    assert r.status_code == 201, r.text
    [feedback] = [e for e in await events(human) if e["type"] == "knowledge.feedback_recorded"]
    assert feedback["project"]["restId"] == "demo"
    assert feedback["subject"] == {
        "__typename": "Knowledge",
        "restId": record["id"],
        "title": "Shared lesson",
    }


async def test_subjects_of_a_page_are_read_in_a_constant_number_of_statements(
    service: Service, human: Caller, project: str
) -> None:
    """Forty events of four kinds cost the same statements as four: the
    subjects come through the per-request loaders, never one read each."""

    async def statements_for_subjects() -> int:
        statements: list[str] = []
        await service.rt.db.set_trace(statements.append)
        try:
            await events(human)
        finally:
            await service.rt.db.set_trace(None)
        return len(statements)

    async def one_of_each(n: int) -> None:
        r = await human.patch(
            "/api/v1/projects/demo/policy", {"expected_revision": n, "rules": f"r{n}"}
        )
        assert r.status_code == 200, r.text
        task_id = await new_task(human, f"task {n}")
        await create(human, "demo", title=f"lesson {n}")
        await open_decision(human, [task_id])

    await one_of_each(1)
    few = await statements_for_subjects()
    for n in range(2, 11):
        await one_of_each(n)
    many = await statements_for_subjects()
    assert many == few
