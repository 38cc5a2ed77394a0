"""Tasks: create, get, list, PATCH, revisions, dependencies, activities, immutability."""

from __future__ import annotations

import functools
import sqlite3

import pytest

from tests.conftest import Caller, Service
from tests.tasks_support import BASE, claim, claimed_by_agent, error, make_task, submit, task_path


async def test_create_returns_the_task_shape_of_the_contract(human: Caller, project: str) -> None:
    r = await human.post(
        f"{BASE}/tasks",
        {"title": "Parse", "description": "d", "acceptance_criteria": ["fast"], "kind": "feature",
         "priority": 2},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    task = r.json()
    assert set(task) == {
        "id", "project_id", "title", "description", "acceptance_criteria", "kind", "priority",
        "depends_on", "subject_task_id", "status", "revision", "ready", "blocked_by", "lease",
        "publication", "created_at", "updated_at",
    }  # fmt: skip
    assert task["status"] == "open" and task["revision"] == 1 and task["ready"] is True
    assert task["blocked_by"] == {"decisions": [], "decisions_truncated": False, "dependencies": []}
    assert task["created_at"] == "2026-11-29T18:00:00.000Z"
    assert (await human.get(task_path(task["id"]))).json() == task


async def test_create_defaults_kind_priority_and_lists(human: Caller, project: str) -> None:
    task = await make_task(human, "only a title")
    assert (task["kind"], task["priority"], task["description"]) == ("feature", 0, "")
    assert task["acceptance_criteria"] == [] and task["depends_on"] == []


async def test_agents_create_tasks_without_a_session(service: Service, project: str) -> None:
    agent = await service.principal("agent")
    await make_task(agent, "follow-up found while working")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "title"),
        ({"title": ""}, "title"),
        ({"title": "t", "kind": "Bad Kind"}, "kind"),
        ({"title": "t", "kind": "feature\n"}, "kind"),
        ({"title": "t", "kind": "k" * 65}, "kind"),
        ({"title": "t", "kind": ""}, "kind"),
        ({"title": "t", "depends_on": ["task_x\n"]}, "depends_on[0]"),
        ({"title": "t", "priority": True}, "priority"),
        ({"title": "t", "acceptance_criteria": ["ok", 3]}, "acceptance_criteria[1]"),
        ({"title": "t", "surprise": 1}, "surprise"),
        ({"title": "t", "depends_on": ["task_missing"]}, "depends_on[0]"),
        ({"title": "t", "subject_task_id": "task_missing"}, "subject_task_id"),
    ],
)
async def test_create_refuses_bad_input_naming_the_field(
    human: Caller, project: str, body: dict[str, object], field: str
) -> None:
    r = await human.post(f"{BASE}/tasks", body)
    status, code, details = error(r)
    assert (status, code, details["field"]) == (400, "invalid_request", field)


@pytest.mark.parametrize("kind", ["k" * 64, "a", "0", "web_api-2", "_", "-"])
async def test_create_accepts_every_kind_of_1_to_64_of_the_alphabet(
    human: Caller, project: str, kind: str
) -> None:
    """Section 13: "`kind` is 1-64 of `a-z0-9_-`": the refusals above bound
    it from outside (65, empty, other characters), and a pattern that
    refused 64 characters passed them all; this bounds it from inside, on
    create and on PATCH (sec13audit)."""
    r = await human.post(f"{BASE}/tasks", {"title": "t", "kind": kind})
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == kind
    made = await make_task(human, "edited")
    r = await human.patch(task_path(made["id"]), {"expected_revision": 1, "kind": kind})
    assert r.status_code == 200 and r.json()["kind"] == kind, r.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": " \t "}, "title"),
        ({"title": "t", "acceptance_criteria": ["ok", "\n  "]}, "acceptance_criteria[1]"),
    ],
)
async def test_blank_text_is_refused_on_create_and_patch_writing_nothing(
    human: Caller, project: str, body: dict[str, object], field: str
) -> None:
    """A title of spaces was accepted (201, an event), where a knowledge title
    and a decision's question refuse one."""

    async def events() -> int:
        return len((await human.get(f"{BASE}/events", limit=200)).json()["items"])

    before = await events()
    status, code, details = error(await human.post(f"{BASE}/tasks", body))
    assert (status, code, details["field"]) == (400, "invalid_request", field)
    task = await make_task(human)
    patch = {"expected_revision": 1, **body}
    status, code, details = error(await human.patch(task_path(task["id"]), patch))
    assert (status, code, details["field"]) == (400, "invalid_request", field)
    assert await events() == before + 1  # the task made here, nothing else
    # GraphQL's create is the same operation, naming the field in its own words
    r = await human.gql(
        "mutation ($i: TaskCreateInput!) { taskCreate(input: $i) { userErrors { code field } } }",
        {"i": {"idempotencyKey": "blank", "projectId": "demo", "title": body["title"],
               "acceptanceCriteria": body.get("acceptance_criteria", [])}},
    )  # fmt: skip
    camel = field.replace("acceptance_criteria", "acceptanceCriteria")
    assert r["data"]["taskCreate"]["userErrors"] == [{"code": "invalid_request", "field": camel}]


async def test_create_refuses_duplicate_dependencies(human: Caller, project: str) -> None:
    base = await make_task(human)
    r = await human.post(f"{BASE}/tasks", {"title": "t", "depends_on": [base["id"], base["id"]]})
    assert error(r) == (400, "invalid_request", {"field": "depends_on[1]"})


async def test_dependency_must_be_a_task_of_the_same_project(human: Caller, project: str) -> None:
    r = await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    assert r.status_code == 201
    r = await human.post("/api/v1/projects/other/tasks", {"title": "elsewhere"})
    foreign = r.json()["id"]
    r = await human.post(f"{BASE}/tasks", {"title": "t", "depends_on": [foreign]})
    assert error(r) == (400, "invalid_request", {"field": "depends_on[0]"})
    r = await human.get(f"{BASE}/tasks/{foreign}")
    assert r.status_code == 404


async def test_create_in_unknown_project_is_404(human: Caller) -> None:
    r = await human.post("/api/v1/projects/nope/tasks", {"title": "t"})
    assert r.status_code == 404


async def test_dependencies_keep_the_given_order(human: Caller, project: str) -> None:
    a, b, c = [await make_task(human, name) for name in ("a", "b", "c")]
    task = await make_task(human, "d", depends_on=[c["id"], a["id"], b["id"]])
    assert task["depends_on"] == [c["id"], a["id"], b["id"]]
    assert task["blocked_by"]["dependencies"] == [c["id"], a["id"], b["id"]]


async def test_patch_writes_next_revision_with_changed_and_judged_fields(
    human: Caller, project: str
) -> None:
    task = await make_task(human, "v1")
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "title": "v2"})
    assert r.status_code == 200, r.text
    assert r.json()["revision"] == 2 and r.json()["title"] == "v2"
    r = await human.patch(task_path(task["id"]), {"expected_revision": 2, "priority": 7})
    assert r.json()["revision"] == 3
    revisions = (await human.get(task_path(task["id"], "revisions"))).json()["items"]
    assert [(v["revision"], v["changed_fields"], v["judged_change"]) for v in revisions] == [
        (3, ["priority"], False),
        (2, ["title"], True),
        (
            1,
            ["title", "description", "acceptance_criteria", "kind", "priority", "depends_on"],
            True,
        ),
    ]
    assert revisions[0]["title"] == "v2" and revisions[0]["priority"] == 7
    assert revisions[2]["title"] == "v1" and revisions[2]["actor_id"] == human.principal_id


async def test_revision_has_exactly_the_fields_of_section_13(human: Caller, project: str) -> None:
    task = await make_task(human)
    revision = (await human.get(task_path(task["id"], "revisions"))).json()["items"][0]
    assert set(revision) == {
        "revision", "title", "description", "acceptance_criteria", "kind", "priority",
        "depends_on", "changed_fields", "judged_change", "actor_id", "at",
    }  # fmt: skip


async def test_judged_revision_moves_only_on_judged_edits(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    dep = await make_task(human, "dep")
    await human.patch(task_path(task["id"]), {"expected_revision": 1, "priority": 3})
    await human.patch(task_path(task["id"]), {"expected_revision": 2, "depends_on": [dep["id"]]})

    def judged(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT judged_revision FROM tasks WHERE id = ?", (task["id"],))
        return int(row.fetchone()[0])

    assert await service.rt.db.read(judged) == 1
    r = await human.patch(task_path(task["id"]), {"expected_revision": 3, "kind": "bugfix"})
    assert r.json()["revision"] == 4
    assert await service.rt.db.read(judged) == 4


async def test_patch_with_stale_expected_revision_is_revision_conflict(
    human: Caller, project: str
) -> None:
    task = await make_task(human)
    await human.patch(task_path(task["id"]), {"expected_revision": 1, "title": "new"})
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "title": "newer"})
    assert error(r) == (
        409,
        "revision_conflict",
        {"expected_revision": 1, "current_revision": 2},
    )


async def test_patch_with_a_future_expected_revision_is_revision_conflict(
    human: Caller, project: str
) -> None:
    """Only the current revision is expected: one ahead of it is as wrong
    as one behind (only GraphQL tested it)."""
    task = await make_task(human)
    r = await human.patch(task_path(task["id"]), {"expected_revision": 2, "title": "new"})
    assert error(r) == (
        409,
        "revision_conflict",
        {"expected_revision": 2, "current_revision": 1},
    )
    assert (await human.get(task_path(task["id"]))).json()["title"] == task["title"]


async def test_patch_without_expected_revision_is_invalid(human: Caller, project: str) -> None:
    task = await make_task(human)
    r = await human.patch(task_path(task["id"]), {"title": "x"})
    assert error(r) == (400, "invalid_request", {"field": "expected_revision"})


async def test_patch_naming_no_task_field_is_invalid_and_writes_nothing(
    human: Caller, project: str
) -> None:
    """A PATCH names a field besides `expected_revision` (the document's
    `minProperties`): one that names none is 400, where an edit naming a
    field, even with its current value, writes the next revision."""
    task = await make_task(human)
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1})
    assert error(r) == (400, "invalid_request", {"field": ""})
    assert (await human.get(task_path(task["id"]))).json()["revision"] == 1
    events = (await human.get(f"{BASE}/events", limit=200)).json()["items"]
    assert [e["type"] for e in events if e["type"] == "task.updated"] == []


async def test_patch_with_unchanged_values_writes_the_next_revision(
    human: Caller, project: str
) -> None:
    """Section 5: every accepted edit writes the next revision; one whose
    values all equal the current ones wrote none (a knowledge correction
    identical to its record is a revision too)."""
    task = await make_task(human, "same")
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "title": "same"})
    assert r.status_code == 200 and r.json()["revision"] == 2
    assert r.json()["title"] == "same"
    revisions = (await human.get(task_path(task["id"], "revisions"))).json()["items"]
    newest = revisions[0]
    assert (newest["revision"], newest["changed_fields"], newest["judged_change"]) == (2, [], False)
    assert newest["title"] == "same" and len(revisions) == 2
    events = (await human.get("/api/v1/projects/demo/events", limit=200)).json()["items"]
    [logged] = [e for e in events if e["type"] == "task.updated"]
    assert logged["data"] == {
        "revision": 2, "changed_fields": [], "values": {}, "judged_change": False
    }  # fmt: skip
    stale = await human.patch(task_path(task["id"]), {"expected_revision": 1, "title": "same"})
    assert error(stale)[:2] == (409, "revision_conflict")


async def test_an_agent_sending_the_unchanged_status_changes_no_value(
    service: Service, human: Caller, project: str
) -> None:
    """Changing `status` is for humans; the status a task already has is an
    unchanged value like any other (docs/tasks.md)."""
    agent = await service.agent()
    task = await make_task(human, "same")
    same = await agent.patch(task_path(task["id"]), {"expected_revision": 1, "status": "open"})
    assert same.status_code == 200 and same.json()["revision"] == 2
    assert same.json()["status"] == "open"
    cancel = {"expected_revision": 2, "status": "cancelled"}
    r = await agent.patch(task_path(task["id"]), cancel)
    assert error(r) == (403, "forbidden", {"reason": "humans_only", "field": "status"})


async def test_only_humans_remove_a_dependency_that_is_not_done(
    service: Service, human: Caller, project: str
) -> None:
    """Any principal may edit a task because an edit only adds blockers; an
    agent's `depends_on: []` made a task whose prerequisite was open ready, and
    the agent then claimed it."""
    agent = await service.agent()
    first, done = await make_task(human, "first"), await make_task(human, "done")
    await claim(human, done["id"])
    await submit(human, done["id"])
    assert (await human.post(task_path(done["id"], "complete"))).status_code == 200
    task = await make_task(human, "after", depends_on=[first["id"], done["id"]])
    dropped = await agent.patch(task_path(task["id"]), {"expected_revision": 1, "depends_on": []})
    refusal = {"reason": "humans_only", "field": "depends_on", "task_ids": [first["id"]]}
    assert error(dropped) == (403, "forbidden", refusal)
    unchanged = (await human.get(task_path(task["id"]))).json()
    assert unchanged["revision"] == 1 and unchanged["ready"] is False
    # adding one, reordering and dropping a done one take no blocker away
    extra = await make_task(human, "extra")
    wider = {"expected_revision": 1, "depends_on": [extra["id"], first["id"], done["id"]]}
    assert (await agent.patch(task_path(task["id"]), wider)).status_code == 200
    narrower = {"expected_revision": 2, "depends_on": [first["id"], extra["id"]]}
    r = await agent.patch(task_path(task["id"]), narrower)
    assert r.status_code == 200 and r.json()["depends_on"] == [first["id"], extra["id"]], r.text
    r = await human.patch(task_path(task["id"]), {"expected_revision": 3, "depends_on": []})
    assert r.status_code == 200 and r.json()["ready"] is True, r.text


async def test_patch_creating_a_cycle_is_400_on_depends_on(human: Caller, project: str) -> None:
    a = await make_task(human, "a")
    b = await make_task(human, "b", depends_on=[a["id"]])
    c = await make_task(human, "c", depends_on=[b["id"]])
    r = await human.patch(task_path(a["id"]), {"expected_revision": 1, "depends_on": [c["id"]]})
    assert error(r) == (400, "invalid_request", {"field": "depends_on"})


async def test_patch_refuses_self_dependency(human: Caller, project: str) -> None:
    a = await make_task(human, "a")
    r = await human.patch(task_path(a["id"]), {"expected_revision": 1, "depends_on": [a["id"]]})
    assert error(r) == (400, "invalid_request", {"field": "depends_on[0]"})


async def test_patch_replaces_dependencies(human: Caller, project: str) -> None:
    a, b = await make_task(human, "a"), await make_task(human, "b")
    c = await make_task(human, "c", depends_on=[a["id"]])
    r = await human.patch(task_path(c["id"]), {"expected_revision": 1, "depends_on": [b["id"]]})
    assert r.json()["depends_on"] == [b["id"]]
    revisions = (await human.get(task_path(c["id"], "revisions"))).json()["items"]
    assert revisions[0]["depends_on"] == [b["id"]] and revisions[1]["depends_on"] == [a["id"]]


async def test_patch_refuses_subject_task_id(human: Caller, project: str) -> None:
    task = await make_task(human)
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "subject_task_id": None})
    assert error(r) == (400, "invalid_request", {"field": "subject_task_id"})


async def test_human_cancels_a_claimed_task_which_ends_the_lease(
    service: Service, human: Caller, project: str
) -> None:
    task, agent = await claimed_by_agent(service, human)
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "status": "cancelled"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["status"], body["lease"], body["revision"]) == ("cancelled", None, 2)
    revisions = (await human.get(task_path(task["id"], "revisions"))).json()["items"]
    assert revisions[0]["changed_fields"] == ["status"]
    assert revisions[0]["judged_change"] is False
    r = await agent.post(task_path(task["id"], "submit"), {"summary": "too late"})
    assert error(r)[:2] == (409, "state_conflict")


async def test_agent_cannot_change_status(service: Service, human: Caller, project: str) -> None:
    task = await make_task(human)
    agent = await service.agent()
    r = await agent.patch(task_path(task["id"]), {"expected_revision": 1, "status": "cancelled"})
    assert error(r)[:2] == (403, "forbidden")


async def test_cancelled_task_is_closed_to_edits_until_reopened(
    human: Caller, project: str
) -> None:
    task = await make_task(human)
    await human.patch(task_path(task["id"]), {"expected_revision": 1, "status": "cancelled"})
    r = await human.patch(task_path(task["id"]), {"expected_revision": 2, "title": "x"})
    assert error(r) == (409, "state_conflict", {"reason": "task_closed", "status": "cancelled"})
    r = await human.patch(task_path(task["id"]), {"expected_revision": 2, "status": "open"})
    assert r.status_code == 200 and r.json()["status"] == "open" and r.json()["ready"] is True


async def test_human_sends_a_submitted_task_back_for_rework(human: Caller, project: str) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "status": "open"})
    assert r.status_code == 200 and r.json()["status"] == "open"


async def test_done_task_is_closed_to_edits(human: Caller, project: str) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    await human.post(task_path(task["id"], "complete"))
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "priority": 1})
    assert error(r) == (409, "state_conflict", {"reason": "task_closed", "status": "done"})


async def test_activity_names_its_subject(human: Caller, project: str) -> None:
    subject = await make_task(human, "feature")
    review = await make_task(human, "review", kind="review", subject_task_id=subject["id"])
    assert review["subject_task_id"] == subject["id"]


async def test_list_filters_by_status_and_ready(
    service: Service, human: Caller, project: str
) -> None:
    a = await make_task(human, "a")
    service.clock.advance(seconds=1)
    b = await make_task(human, "b")
    service.clock.advance(seconds=1)
    c = await make_task(human, "c", depends_on=[a["id"]])
    await claim(human, b["id"])
    listed = (await human.get(f"{BASE}/tasks")).json()["items"]
    assert [t["id"] for t in listed] == [a["id"], b["id"], c["id"]]
    assert [t["ready"] for t in listed] == [True, False, False]
    ready = (await human.get(f"{BASE}/tasks", ready="true")).json()["items"]
    assert [t["id"] for t in ready] == [a["id"]]
    not_ready = (await human.get(f"{BASE}/tasks", ready="false")).json()["items"]
    assert [t["id"] for t in not_ready] == [b["id"], c["id"]]
    claimed = (await human.get(f"{BASE}/tasks", status="claimed")).json()["items"]
    assert [t["id"] for t in claimed] == [b["id"]]


async def test_list_paginates_in_creation_order_with_an_opaque_cursor(
    service: Service, human: Caller, project: str
) -> None:
    ids = []
    for i in range(5):
        service.clock.advance(seconds=1)
        ids.append((await make_task(human, f"t{i}"))["id"])
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": "2"} | ({"cursor": cursor} if cursor else {})
        page = (await human.get(f"{BASE}/tasks", **params)).json()
        seen += [t["id"] for t in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids


async def test_ready_list_paginates_past_tasks_that_are_not_ready(
    service: Service, human: Caller, project: str
) -> None:
    blocker = await make_task(human, "blocker")
    await claim(human, blocker["id"])
    for i in range(4):
        await make_task(human, f"blocked {i}", depends_on=[blocker["id"]])
    ready = []
    for i in range(3):
        service.clock.advance(seconds=1)
        ready.append((await make_task(human, f"ready {i}"))["id"])
    page = (await human.get(f"{BASE}/tasks", ready="true", limit="2")).json()
    assert [t["id"] for t in page["items"]] == ready[:2] and page["next_cursor"]
    rest = await human.get(f"{BASE}/tasks", ready="true", limit="2", cursor=page["next_cursor"])
    assert [t["id"] for t in rest.json()["items"]] == ready[2:]
    assert rest.json()["next_cursor"] is None


@pytest.mark.parametrize(
    ("params", "field"),
    [({"cursor": "!!"}, "cursor"), ({"status": "sleeping"}, "status"), ({"limit": "0"}, "limit")],
)
async def test_list_refuses_bad_query(
    human: Caller, project: str, params: dict[str, str], field: str
) -> None:
    r = await human.get(f"{BASE}/tasks", **params)
    status, code, details = error(r)
    assert (status, code, details["field"]) == (400, "invalid_request", field)


async def test_revisions_paginate_newest_first(human: Caller, project: str) -> None:
    task = await make_task(human, "t0")
    for i in range(1, 4):
        await human.patch(task_path(task["id"]), {"expected_revision": i, "title": f"t{i}"})
    first = (await human.get(task_path(task["id"], "revisions"), limit="3")).json()
    assert [v["revision"] for v in first["items"]] == [4, 3, 2]
    rest = await human.get(task_path(task["id"], "revisions"), cursor=first["next_cursor"])
    assert [v["revision"] for v in rest.json()["items"]] == [1]


async def test_task_revisions_refuse_update_and_delete(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)

    def tamper(conn: sqlite3.Connection, sql: str) -> None:
        conn.execute(sql, (task["id"],))

    for sql in (
        "UPDATE task_revisions SET title = 'forged' WHERE task_id = ?",
        "DELETE FROM task_revisions WHERE task_id = ?",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            await service.rt.db.write(functools.partial(tamper, sql=sql))


async def test_submissions_and_checkpoints_refuse_update_and_delete(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    await claim(human, task["id"])
    await human.post(task_path(task["id"], "checkpoint"), {"note": "n"})
    await submit(human, task["id"])

    def tamper(conn: sqlite3.Connection, sql: str) -> None:
        conn.execute(sql, (task["id"],))

    for sql in (
        "UPDATE submissions SET summary = 'forged' WHERE task_id = ?",
        "DELETE FROM submissions WHERE task_id = ?",
        "UPDATE task_checkpoints SET note = 'forged' WHERE task_id = ?",
        "DELETE FROM task_checkpoints WHERE task_id = ?",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            await service.rt.db.write(functools.partial(tamper, sql=sql))


async def test_create_and_update_write_events(human: Caller, project: str) -> None:
    task = await make_task(human)
    await human.patch(task_path(task["id"]), {"expected_revision": 1, "title": "renamed"})
    events = (await human.get(f"{BASE}/events")).json()["items"]
    mine = [e for e in events if e["subject_id"] == task["id"]]
    assert [e["type"] for e in mine] == ["task.created", "task.updated"]
    # a new card's fields, as a board shows them, without reading the task
    assert mine[0]["data"] == {"title": task["title"], "revision": 1, "subject_task_id": None,
                               "kind": "feature", "priority": 0, "depends_on": []}  # fmt: skip
    assert mine[1]["data"] == {"revision": 2, "changed_fields": ["title"],
                               "values": {"title": "renamed"}, "judged_change": True}  # fmt: skip
    # the new values a board shows, not the description's 64 KiB
    edit = {"expected_revision": 2, "priority": 7, "description": "longer", "kind": "bug"}
    await human.patch(task_path(task["id"]), edit)
    last = (await human.get(f"{BASE}/events")).json()["items"][-1]
    assert sorted(last["data"]["changed_fields"]) == ["description", "kind", "priority"]
    assert last["data"]["values"] == {"priority": 7, "kind": "bug"}


async def test_task_routes_appear_in_the_openapi_document(human: Caller) -> None:
    r = await human.get("/api/v1/openapi.json")
    assert r.status_code == 200, r.text
    paths = r.json()["paths"]
    task = "/api/v1/projects/{project}/tasks/{task}"
    for path in (
        "/api/v1/projects/{project}/tasks", "/api/v1/projects/{project}/claims",
        task, f"{task}/revisions",
        f"{task}/renew", f"{task}/checkpoint", f"{task}/release", f"{task}/recover",
        f"{task}/submit", f"{task}/complete", f"{task}/publication/prepare",
        f"{task}/publication/result", f"{task}/publication/finalize",
    ):  # fmt: skip
        assert path in paths, path


async def test_replayed_create_answers_201_again_with_no_second_task_or_event(
    human: Caller, project: str
) -> None:
    first = await human.post(f"{BASE}/tasks", {"title": "once"}, key="same-create")
    again = await human.post(f"{BASE}/tasks", {"title": "once"}, key="same-create")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.headers["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert len((await human.get(f"{BASE}/tasks")).json()["items"]) == 1
    events = (await human.get(f"{BASE}/events")).json()["items"]
    assert [e["type"] for e in events if e["type"].startswith("task.")] == ["task.created"]


async def test_text_limits_count_utf8_bytes_not_characters(
    service: Service, human: Caller, project: str
) -> None:
    wide = "é" * 34_000  # 34,000 characters, 68,000 bytes: past 64 KiB
    r = await human.post(f"{BASE}/tasks", {"title": "t", "description": wide})
    assert error(r) == (400, "invalid_request", {"field": "description"})
    task, agent = await claimed_by_agent(service, human)
    r = await agent.post(task_path(task["id"], "checkpoint"), {"note": wide})
    assert error(r) == (400, "invalid_request", {"field": "note"})
    r = await agent.post(task_path(task["id"], "submit"), {"summary": wide})
    assert error(r) == (400, "invalid_request", {"field": "summary"})
    r = await human.patch(task_path(task["id"]), {"expected_revision": 1, "description": wide})
    assert error(r) == (400, "invalid_request", {"field": "description"})


async def test_a_claimed_task_cannot_be_sent_back_to_open(
    service: Service, human: Caller, project: str
) -> None:
    """docs/tasks.md: `open` is reached from cancelled (reopen) or submitted
    (rework) only; from `claimed` it is 409 `invalid_transition`, and the
    lease stands (the owner sees the status of a task it holds as claimed)."""
    task, _ = await claimed_by_agent(service, human)
    held = (await human.get(task_path(task["id"]))).json()
    r = await human.patch(
        task_path(task["id"]), {"expected_revision": held["revision"], "status": "open"}
    )
    refusal = {"reason": "invalid_transition", "status": "claimed", "field": "status"}
    assert error(r) == (409, "state_conflict", refusal)
    after = (await human.get(task_path(task["id"]))).json()
    assert (after["status"], after["revision"]) == ("claimed", held["revision"])
    assert after["lease"] == held["lease"]
