"""Usefulness feedback: bound to the revision read, append-only, totals per revision."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create, error_of, kpath, make_project, raw


async def test_feedback_is_created_on_the_revision_read(service: Service, project: str) -> None:
    agent = await service.agent()
    record = await create(agent, project)
    r = await agent.post(
        kpath(project, record["id"], "feedback"),
        {"expected_revision": 1, "useful": False, "comment": "did not help"},
    )
    assert r.status_code == 201, r.text
    feedback = r.json()
    assert feedback["revision"] == 1 and feedback["useful"] is False
    assert feedback["comment"] == "did not help" and feedback["knowledge_id"] == record["id"]
    assert feedback["actor_id"] == agent.principal_id
    assert feedback["actor_session_id"] == agent.session_id
    assert feedback["at"] == service.clock.iso()


async def test_detail_reports_totals_overall_and_per_revision(human: Caller, project: str) -> None:
    record = await create(human, project)
    path = kpath(project, record["id"])
    for useful in (True, True, False):
        r = await human.post(f"{path}/feedback", {"expected_revision": 1, "useful": useful})
        assert r.status_code == 201
    await human.patch(path, correction(record, title="v2"))
    await human.post(f"{path}/feedback", {"expected_revision": 2, "useful": False})
    detail = (await human.get(path)).json()
    assert detail["feedback"] == {"useful": 2, "not_useful": 2}
    per_revision = {i["revision"]: i["feedback"] for i in detail["history"]["items"]}
    assert per_revision == {2: {"useful": 0, "not_useful": 1}, 1: {"useful": 2, "not_useful": 1}}


async def test_stale_feedback_is_a_revision_conflict(human: Caller, project: str) -> None:
    record = await create(human, project)
    path = kpath(project, record["id"])
    await human.patch(path, correction(record, title="v2"))
    r = await human.post(f"{path}/feedback", {"expected_revision": 1, "useful": True})
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "revision_conflict"
    assert r.json()["error"]["details"] == {"expected_revision": 1, "current_revision": 2}
    r = await human.post(f"{path}/feedback", {"expected_revision": 3, "useful": True})
    assert r.status_code == 409
    assert (await human.get(path)).json()["feedback"] == {"useful": 0, "not_useful": 0}


async def test_a_correction_racing_feedback_never_moves_it_to_the_new_revision(
    service: Service, human: Caller, project: str
) -> None:
    record = await create(human, project)
    path = kpath(project, record["id"])
    reader = await service.agent()
    # both read revision 1; the single writer orders them, whichever comes first
    patch, feedback = await asyncio.gather(
        human.patch(path, correction(record, title="corrected")),
        reader.post(f"{path}/feedback", {"expected_revision": 1, "useful": True}),
    )
    assert patch.status_code == 200
    assert feedback.status_code in (201, 409)
    detail = (await human.get(path)).json()
    per_revision = {i["revision"]: i["feedback"] for i in detail["history"]["items"]}
    assert per_revision[2] == {"useful": 0, "not_useful": 0}
    if feedback.status_code == 201:
        assert feedback.json()["revision"] == 1 and per_revision[1]["useful"] == 1
    else:
        assert feedback.json()["error"]["code"] == "revision_conflict"
        assert per_revision[1]["useful"] == 0
    # the losing order, forced: a correction commits between read and feedback
    r = await human.patch(path, correction(detail, title="third"))
    assert r.status_code == 200
    late = await reader.post(f"{path}/feedback", {"expected_revision": 2, "useful": True})
    assert late.status_code == 409 and late.json()["error"]["code"] == "revision_conflict"
    with raw(service.db_path) as conn:
        bound = conn.execute("SELECT revision FROM knowledge_feedback").fetchall()
    assert all(row["revision"] == 1 for row in bound)


async def test_a_later_correction_does_not_rewrite_earlier_feedback(
    service: Service, human: Caller, project: str
) -> None:
    record = await create(human, project)
    path = kpath(project, record["id"])
    await human.post(f"{path}/feedback", {"expected_revision": 1, "useful": True, "comment": "ok"})
    with raw(service.db_path) as conn:
        before = [tuple(r) for r in conn.execute("SELECT * FROM knowledge_feedback")]
    await human.patch(path, correction(record, title="v2", status="deprecated"))
    with raw(service.db_path) as conn:
        after = [tuple(r) for r in conn.execute("SELECT * FROM knowledge_feedback")]
    assert after == before


async def test_feedback_writes_an_event_on_the_source_project(human: Caller, project: str) -> None:
    record = await create(human, project)
    r = await human.post(
        kpath(project, record["id"], "feedback"), {"expected_revision": 1, "useful": True}
    )
    events = (await human.get(f"/api/v1/projects/{project}/events")).json()["items"]
    assert events[-1]["type"] == "knowledge.feedback_recorded"
    assert events[-1]["subject_id"] == record["id"]
    assert events[-1]["data"] == {
        "feedback_id": r.json()["id"], "revision": 1, "useful": True, "via_project_id": project
    }  # fmt: skip


@pytest.mark.parametrize("useful", [True, False])
async def test_feedback_on_a_shared_record_through_another_project(
    human: Caller, project: str, useful: bool
) -> None:
    """Counted on the record, and its event is in the record's own project,
    naming the project it came through (docs/api.md: `via_project_id`);
    none in the other (mutantaudit5)."""
    record = await create(human, project, collection="shared", share_across_projects=True)
    other = await make_project(human, "other")
    r = await human.post(
        kpath(other, record["id"], "feedback"), {"expected_revision": 1, "useful": useful}
    )
    assert r.status_code == 201 and r.json()["project_id"] == project
    counted = (await human.get(kpath(project, record["id"]))).json()["feedback"]
    assert counted["useful" if useful else "not_useful"] == 1
    events = (await human.get(f"/api/v1/projects/{project}/events")).json()["items"]
    assert events[-1]["type"] == "knowledge.feedback_recorded"
    assert events[-1]["data"] == {
        "feedback_id": r.json()["id"], "revision": 1, "useful": useful, "via_project_id": other
    }  # fmt: skip
    theirs = (await human.get(f"/api/v1/projects/{other}/events")).json()["items"]
    assert all(e["type"] != "knowledge.feedback_recorded" for e in theirs)


async def test_feedback_on_an_unknown_record_is_not_found(human: Caller, project: str) -> None:
    r = await human.post(
        kpath(project, "kn_x", "feedback"), {"expected_revision": 1, "useful": True}
    )
    assert r.status_code == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"useful": True}, "expected_revision"),
    ({"expected_revision": 1}, "useful"),
    ({"expected_revision": 1, "useful": 1}, "useful"),
    ({"expected_revision": 0, "useful": True}, "expected_revision"),
    ({"expected_revision": 1, "useful": True, "comment": "x" * 4097}, "comment"),
    ({"expected_revision": 1, "useful": True, "revision": 1}, "revision"),
])  # fmt: skip
async def test_feedback_refuses_bad_bodies(
    human: Caller, project: str, body: dict[str, object], field: str
) -> None:
    record = await create(human, project)
    r = await human.post(kpath(project, record["id"], "feedback"), body)
    assert error_of(r) == (400, "invalid_request", field)


async def test_a_feedback_replay_answers_201_and_counts_once(
    service: Service, human: Caller, project: str
) -> None:
    record = await create(human, project)
    path = kpath(project, record["id"], "feedback")
    body = {"expected_revision": 1, "useful": True}
    first = await human.post(path, body, key="fb-once")
    again = await human.post(path, body, key="fb-once")
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert (await human.get(kpath(project, record["id"]))).json()["feedback"]["useful"] == 1
    with raw(service.db_path) as conn:
        events = conn.execute(
            "SELECT count(*) FROM events WHERE type = 'knowledge.feedback_recorded'"
        ).fetchone()[0]
    assert events == 1
