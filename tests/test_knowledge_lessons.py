"""Submission lessons through the real submit flow: validated whole, pinned, atomic."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, error_of, kpath, make_project, make_task, raw
from waypost.errors import InvalidRequest
from waypost.resolvers.knowledge import operations as knowledge
from waypost.runtime import Actor


def lesson(**fields: Any) -> dict[str, Any]:
    return {"kind": "lesson", "title": "Pin the toolchain", "body": "Builds drift.", **fields}


async def claimed(service: Service, human: Caller, project: str) -> tuple[Caller, str]:
    """An agent with a live session holding a fresh task of `project`."""
    task_id = await make_task(human, project, "build it")
    agent = await service.agent()
    r = await agent.post(f"/api/v1/projects/{project}/claims", {"task_id": task_id})
    assert r.status_code == 200, r.text
    return agent, task_id


async def submit(agent: Caller, project: str, task_id: str, lessons: list[Any]) -> Any:
    return await agent.post(
        f"/api/v1/projects/{project}/tasks/{task_id}/submit",
        {"summary": "done", "lessons": lessons},
    )


def counts(service: Service) -> dict[str, int]:
    with raw(service.db_path) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("submissions", "knowledge", "knowledge_revisions", "events")
        }


async def test_submit_returns_lessons_with_pinned_provenance(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    other_task = await make_task(human, project, "related")
    service.clock.advance(minutes=2)
    r = await submit(
        agent,
        project,
        task_id,
        [
            lesson(provenance={"summary": "CI log", "source_uri": "https://ci.test/9"}),
            lesson(kind="fact", status="validated", scope={"task_ids": [other_task]}, tags=["x"]),
            lesson(collection="shared", share_across_projects=True),
        ],
    )
    assert r.status_code == 200, r.text
    submission = r.json()["submission"]
    lessons = r.json()["lessons"]
    assert [k["kind"] for k in lessons] == ["lesson", "fact", "lesson"]
    for k in lessons:
        assert k["project_id"] == project and k["revision"] == 1
        assert k["created_at"] == service.clock.iso()
        assert k["provenance"]["source_task_id"] == task_id
        assert k["provenance"]["source_submission_id"] == submission["id"]
        assert k["provenance"]["actor_id"] == agent.principal_id
        assert k["provenance"]["actor_session_id"] == agent.session_id
        assert k["provenance"]["recorded_at"] == service.clock.iso()
    assert lessons[0]["provenance"]["summary"] == "CI log"
    assert lessons[0]["provenance"]["source_uri"] == "https://ci.test/9"
    assert lessons[1]["scope"]["task_ids"] == [other_task]
    assert lessons[2]["collection"] == "shared"
    # the same objects the create route and the detail route give
    for k in lessons:
        detail = (await human.get(kpath(project, k["id"]))).json()
        assert {n: detail[n] for n in k} == k
        assert [i["revision"] for i in detail["history"]["items"]] == [1]


async def test_a_submission_without_lessons_creates_no_knowledge(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    r = await submit(agent, project, task_id, [])
    assert r.status_code == 200 and r.json()["lessons"] == []
    assert counts(service)["knowledge"] == 0


async def test_51_lessons_are_refused_whole(service: Service, human: Caller, project: str) -> None:
    agent, task_id = await claimed(service, human, project)
    before = counts(service)
    r = await submit(agent, project, task_id, [lesson(title=f"l{i}") for i in range(51)])
    assert error_of(r) == (400, "invalid_request", "lessons")
    assert counts(service) == before
    task = (await human.get(f"/api/v1/projects/{project}/tasks/{task_id}")).json()
    assert task["status"] == "claimed"


async def test_50_lessons_are_accepted(service: Service, human: Caller, project: str) -> None:
    agent, task_id = await claimed(service, human, project)
    r = await submit(agent, project, task_id, [lesson(title=f"l{i}") for i in range(50)])
    assert r.status_code == 200, r.text
    assert len(r.json()["lessons"]) == 50
    assert counts(service)["knowledge_revisions"] == 50


async def test_one_bad_task_reference_rolls_back_the_submission_and_every_lesson(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    good_task = await make_task(human, project, "real")
    before = counts(service)
    batch = [
        lesson(title="fine", scope={"task_ids": [good_task]}),
        lesson(title="also fine"),
        lesson(title="bad", scope={"task_ids": [good_task, "task_nowhere"]}),
    ]
    r = await submit(agent, project, task_id, batch)
    assert error_of(r) == (400, "invalid_request", "lessons[2].scope.task_ids[1]")
    assert counts(service) == before  # no submission, no knowledge, no revision, no event
    task = (await human.get(f"/api/v1/projects/{project}/tasks/{task_id}")).json()
    assert task["status"] == "claimed"
    # the refusal left no receipt: the corrected batch goes through
    batch[2] = lesson(title="fixed", scope={"task_ids": [good_task]})
    r = await submit(agent, project, task_id, batch)
    assert r.status_code == 200, r.text
    assert len(r.json()["lessons"]) == 3


async def test_a_task_of_another_project_is_refused(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    other = await make_project(human, "other")
    foreign = await make_task(human, other, "elsewhere")
    r = await submit(agent, project, task_id, [lesson(), lesson(scope={"task_ids": [foreign]})])
    assert error_of(r) == (400, "invalid_request", "lessons[1].scope.task_ids[0]")
    assert counts(service)["knowledge"] == 0


@pytest.mark.parametrize(("bad", "field"), [
    (lesson(provenance={"source_task_id": "task_x"}), "lessons[1].provenance.source_task_id"),
    (lesson(provenance={"source_submission_id": "s"}),
     "lessons[1].provenance.source_submission_id"),
    (lesson(provenance={"actor_id": "me"}), "lessons[1].provenance.actor_id"),
    (lesson(collection="shared"), "lessons[1].share_across_projects"),
    (lesson(share_across_projects=True), "lessons[1].share_across_projects"),
    (lesson(status="superseded"), "lessons[1].status"),
    (lesson(title="t" * 201), "lessons[1].title"),
    (lesson(tags=["a", "a"]), "lessons[1].tags[1]"),
    (lesson(body="x" * (64 * 1024 + 1)), "lessons[1].body"),
    ({"title": "no kind", "body": "b"}, "lessons[1].kind"),
    (lesson(superseded_by_id="kn_x"), "lessons[1].superseded_by_id"),
    ("not an object", "lessons[1]"),
])  # fmt: skip
async def test_an_invalid_lesson_refuses_the_whole_submission(
    service: Service, human: Caller, project: str, bad: Any, field: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    before = counts(service)
    r = await submit(agent, project, task_id, [lesson(), bad, lesson()])
    assert error_of(r) == (400, "invalid_request", field), r.text
    assert counts(service) == before


async def test_lessons_never_write_the_binding_rules(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    rule_like = lesson(status="validated", title="Always squash", body="Policy: squash merges.")
    assert (await submit(agent, project, task_id, [rule_like])).status_code == 200
    policy = (await human.get(f"/api/v1/projects/{project}/policy")).json()
    assert policy["rules"] == "" and policy["revision"] == 1


async def test_the_submitted_event_lists_the_lessons(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    r = await submit(agent, project, task_id, [lesson(), lesson()])
    ids = [k["id"] for k in r.json()["lessons"]]
    events = (await human.get(f"/api/v1/projects/{project}/events")).json()["items"]
    assert events[-1]["type"] == "task.submitted"
    assert events[-1]["data"]["lesson_ids"] == ids
    assert not [e for e in events if e["type"] == "knowledge.created"]


async def test_a_lesson_is_corrected_like_any_record(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    record = (await submit(agent, project, task_id, [lesson()])).json()["lessons"][0]
    r = await human.patch(kpath(project, record["id"]), correction(record, status="validated"))
    assert r.status_code == 200, r.text
    fixed = r.json()
    assert (
        fixed["provenance"]["source_submission_id"] == record["provenance"]["source_submission_id"]
    )
    assert fixed["provenance"]["actor_id"] == human.principal_id


async def test_create_accepts_tasks_and_a_submission_of_the_project(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    submission = (await submit(agent, project, task_id, [])).json()["submission"]
    other_task = await make_task(human, project, "other")
    r = await human.post(
        kpath(project),
        lesson(
            scope={"task_ids": [task_id, other_task]},
            provenance={"source_task_id": task_id, "source_submission_id": submission["id"]},
        ),
    )
    assert r.status_code == 201, r.text
    assert r.json()["provenance"]["source_submission_id"] == submission["id"]
    # a submission alone, without a source task to disagree with (mutantaudit11)
    alone = lesson(provenance={"source_submission_id": submission["id"]})
    r = await human.post(kpath(project), alone)
    assert r.status_code == 201, r.text
    assert r.json()["provenance"]["source_task_id"] is None
    # a submission of another task than the named source task is refused
    r = await human.post(
        kpath(project),
        lesson(provenance={"source_task_id": other_task, "source_submission_id": submission["id"]}),
    )
    assert error_of(r) == (400, "invalid_request", "provenance.source_submission_id")


async def test_create_refuses_tasks_and_submissions_of_another_project(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    submission = (await submit(agent, project, task_id, [])).json()["submission"]
    other = await make_project(human, "other")
    mine = await make_task(human, other, "mine")
    r = await human.post(kpath(other), lesson(scope={"task_ids": [mine, mine + "x", task_id]}))
    assert error_of(r) == (400, "invalid_request", "scope.task_ids[1]")
    r = await human.post(kpath(other), lesson(scope={"task_ids": [mine, task_id]}))
    assert error_of(r) == (400, "invalid_request", "scope.task_ids[1]")
    r = await human.post(kpath(other), lesson(provenance={"source_task_id": task_id}))
    assert error_of(r) == (400, "invalid_request", "provenance.source_task_id")
    r = await human.post(
        kpath(other), lesson(provenance={"source_submission_id": submission["id"]})
    )
    assert error_of(r) == (400, "invalid_request", "provenance.source_submission_id")


async def test_the_function_refuses_a_batch_over_50_before_inserting(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    actor = knowledge_actor(agent)
    now = service.clock.moment
    with pytest.raises(InvalidRequest) as caught:
        await service.rt.db.write(
            lambda conn: knowledge.insert_submission_lessons(
                conn, actor, now, project, task_id, "sub_x", [lesson()] * 51
            )
        )
    assert caught.value.details == {"field": "lessons"}
    assert counts(service)["knowledge"] == 0


@pytest.mark.parametrize(("bad", "field"), [
    (lesson(bogus=1), "lessons[0].bogus"),
    (lesson(kind=5), "lessons[0].kind"),
    (lesson(provenance={"summary": "s", "source_task_id": "tsk_x"}),
     "lessons[0].provenance.source_task_id"),
])  # fmt: skip
async def test_a_malformed_lesson_is_400_whatever_the_tasks_state(
    service: Service, human: Caller, project: str, bad: Any, field: str
) -> None:
    """The lessons were decoded after the task's state was checked: on a task
    not claimed, a malformed lesson was `409 not_claimed`, which told the
    caller to fix the task when its body was what was wrong."""
    task_id = await make_task(human, project, "not claimed")
    agent = await service.agent()
    before = counts(service)
    r = await submit(agent, project, task_id, [bad])
    assert error_of(r) == (400, "invalid_request", field), r.text
    assert counts(service) == before
    # a well-formed body on that task is refused for the task's state, as before
    r = await submit(agent, project, task_id, [lesson()])
    assert r.status_code == 409, r.text


@pytest.mark.parametrize(("bad", "field", "said"), [
    (lesson(scope={"components": [" "]}), "lessons[0].scope.components[0]", "must not be blank"),
    (lesson(tags=["a", "a"]), "lessons[0].tags[1]", "is a duplicate of an earlier entry"),
    (lesson(title=" "), "lessons[0].title", "must not be blank"),
])  # fmt: skip
async def test_a_lessons_refusal_names_the_same_field_in_its_message(
    service: Service, human: Caller, project: str, bad: Any, field: str, said: str
) -> None:
    """The message said `tags[1]` where `details.field` said
    `lessons[0].tags[1]`: which lesson was at fault was in one place only."""
    agent, task_id = await claimed(service, human, project)
    r = await submit(agent, project, task_id, [bad])
    assert error_of(r) == (400, "invalid_request", field), r.text
    assert r.json()["error"]["message"] == f"{field} {said}", r.text


def knowledge_actor(caller: Caller) -> Actor:
    return Actor(caller.principal_id, caller.kind, "agent", "tok_unused", caller.session_id)
