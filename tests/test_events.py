"""The event log (service contract sections 10 and 13): one event per mutation,
oldest first, `after`/`limit` paging and the `next_after` rule."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from tests.conftest import Caller, MovableClock, Service
from waypost.resolvers.projects import operations as projects

EVENTS = "/api/v1/projects/demo/events"
POLICY = "/api/v1/projects/demo/policy"
EVENT_KEYS = {
    "sequence",
    "project_id",
    "type",
    "subject_type",
    "subject_id",
    "actor_id",
    "actor_session_id",
    "at",
    "data",
}


async def updates(human: Caller, n: int) -> None:
    for revision in range(1, n + 1):
        r = await human.patch(POLICY, {"expected_revision": revision, "rules": f"r{revision}"})
        assert r.status_code == 200


async def test_events_have_the_contract_shape_oldest_first(
    service: Service, human: Caller, project: str, clock: MovableClock
) -> None:
    clock.advance(seconds=1)
    await updates(human, 2)
    body = (await human.get(EVENTS)).json()
    assert set(body) == {"items", "next_after"}
    items = body["items"]
    assert [e["type"] for e in items] == ["project.created", "policy.updated", "policy.updated"]
    assert all(set(e) == EVENT_KEYS for e in items)
    assert [e["sequence"] for e in items] == sorted(e["sequence"] for e in items)
    assert items[1] == {
        "sequence": items[1]["sequence"],
        "project_id": "demo",
        "type": "policy.updated",
        "subject_type": "policy",
        "subject_id": "demo",
        "actor_id": human.principal_id,
        "actor_session_id": None,
        "at": clock.iso(),
        "data": {
            "revision": 2, "fields": ["rules"], "changed_fields": ["rules"], "values": {},
            "rules_changed": True,
        },
    }  # fmt: skip
    assert body["next_after"] == items[-1]["sequence"]


async def test_a_policy_event_says_what_changed_and_to_what(human: Caller, project: str) -> None:
    """It said only which fields the patch named: whether a named field
    changed, and to what, took a read of two history revisions."""
    await human.patch(POLICY, {"expected_revision": 1, "rules": "r", "lease_seconds": 600})
    # the same rules and review mode again, a new lease and an owner
    same = {"rules": "r", "review_mode": "human", "lease_seconds": 900}
    await human.patch(POLICY, {"expected_revision": 2, **same, "agent_rule_editing": True})
    items = (await human.get(EVENTS)).json()["items"]
    assert [e["data"] for e in items[-2:]] == [
        {"revision": 2, "fields": ["lease_seconds", "rules"],
         "changed_fields": ["lease_seconds", "rules"], "values": {"lease_seconds": 600},
         "rules_changed": True},
        {"revision": 3, "fields": ["agent_rule_editing", "lease_seconds", "review_mode", "rules"],
         "changed_fields": ["agent_rule_editing", "lease_seconds"],
         "values": {"agent_rule_editing": True, "lease_seconds": 900}, "rules_changed": False},
    ]  # fmt: skip


async def test_agent_event_records_its_session(
    service: Service, human: Caller, project: str
) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "agent_rule_editing": True})
    agent = await service.agent()
    await agent.patch(POLICY, {"expected_revision": 2, "rules": "agent"})
    last = (await agent.get(EVENTS)).json()["items"][-1]
    assert last["actor_id"] == agent.principal_id
    assert last["actor_session_id"] == agent.session_id


async def test_after_returns_only_later_events(human: Caller, project: str) -> None:
    await updates(human, 3)
    first = (await human.get(EVENTS, limit=2)).json()
    assert len(first["items"]) == 2
    rest = (await human.get(EVENTS, after=first["next_after"])).json()
    assert [e["data"]["revision"] for e in rest["items"]] == [3, 4]
    assert rest["next_after"] == rest["items"][-1]["sequence"]


async def test_polling_from_next_after_sees_every_event_exactly_once(
    human: Caller, project: str
) -> None:
    await updates(human, 7)
    seen: list[int] = []
    after = 0
    for _ in range(20):
        body = (await human.get(EVENTS, after=after, limit=3)).json()
        seen += [e["sequence"] for e in body["items"]]
        if not body["items"]:
            assert body["next_after"] == after
            break
        after = body["next_after"]
    assert len(seen) == 8 and len(set(seen)) == 8


async def test_no_new_events_returns_the_requests_after(human: Caller, project: str) -> None:
    body = (await human.get(EVENTS, after=10_000)).json()
    assert body == {"items": [], "next_after": 10_000}


async def test_no_events_and_no_after_returns_zero(service: Service, human: Caller) -> None:
    # a project inserted without its creation event: nothing to list
    body = projects.ProjectCreate(id="quiet", name="Quiet")
    at = service.clock.iso()
    await service.rt.db.write(
        lambda conn: projects.insert_project(conn, body, human.principal_id, "human", at)
    )
    r = await human.get("/api/v1/projects/quiet/events")
    assert r.json() == {"items": [], "next_after": 0}


async def test_events_belong_to_their_project(human: Caller, project: str) -> None:
    await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    await updates(human, 1)
    other = (await human.get("/api/v1/projects/other/events")).json()["items"]
    assert [(e["project_id"], e["type"]) for e in other] == [("other", "project.created")]


async def test_session_events_are_not_project_events(service: Service, project: str) -> None:
    agent = await service.agent()
    await agent.post(f"/api/v1/sessions/{agent.session_id}/heartbeat")
    items = (await agent.get(EVENTS)).json()["items"]
    assert all(e["subject_type"] != "session" for e in items)


@pytest.mark.parametrize("limit", [1, 200])
async def test_limit_from_1_to_200_is_accepted(human: Caller, project: str, limit: int) -> None:
    await updates(human, 2)
    assert len((await human.get(EVENTS, limit=limit)).json()["items"]) == min(limit, 3)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"after": -1}, "after"),
        ({"after": "x"}, "after"),
        ({"cursor": "abc"}, "cursor"),
    ],
)
async def test_bad_events_parameters_are_400(
    human: Caller, project: str, params: dict[str, Any], field: str
) -> None:
    r = await human.get(EVENTS, **params)
    assert r.status_code == 400
    assert r.json()["error"]["details"]["field"] == field


async def test_event_data_never_holds_tokens_or_headers(
    service: Service, human: Caller, project: str
) -> None:
    agent = await service.agent()
    r = await human.patch(POLICY, {"expected_revision": 1, "agent_rule_editing": True})
    assert r.status_code == 200, r.text
    r = await agent.patch(POLICY, {"expected_revision": 2, "rules": "x"})
    assert r.status_code == 200, r.text  # an agent's write is among those scanned
    conn = sqlite3.connect(service.db_path)
    types = [t for (t,) in conn.execute("SELECT type FROM events ORDER BY sequence")]
    rows = [r[0] for r in conn.execute("SELECT data FROM events")]
    conn.close()
    assert types == ["project.created", "session.started", "policy.updated", "policy.updated"]
    text = "\n".join(rows).lower()
    for secret in (human.token, agent.token, "authorization", "bearer", "idempotency"):
        assert secret.lower() not in text


async def test_events_refuse_update_and_delete_from_raw_sql(
    service: Service, human: Caller, project: str
) -> None:
    conn = sqlite3.connect(service.db_path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            conn.execute("UPDATE events SET type = 'forged'")
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            conn.execute("DELETE FROM events")
    finally:
        conn.close()
    assert len((await human.get(EVENTS)).json()["items"]) == 1


async def test_a_refused_mutation_writes_no_event(human: Caller, project: str) -> None:
    await human.patch(POLICY, {"expected_revision": 9, "rules": "stale"})
    await human.post("/api/v1/projects", {"id": "demo", "name": "dup"})
    assert len((await human.get(EVENTS)).json()["items"]) == 1


async def test_a_short_page_ends_at_its_last_item_not_at_the_logs_end(
    human: Caller, project: str
) -> None:
    """Section 13: `next_after` is the last item's sequence. A short page
    (fewer items than `limit`) followed in the shared log by another
    project's events still answers its own last item, not the log's end
    (a consumer keeps it as the last event it saw and hands it to GraphQL's
    `after` and the stream's `Last-Event-ID`)."""
    await updates(human, 1)
    await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    r = await human.patch(
        "/api/v1/projects/other/policy", {"expected_revision": 1, "rules": "elsewhere"}
    )
    assert r.status_code == 200, r.text
    body = (await human.get(EVENTS, limit=50)).json()
    assert [e["type"] for e in body["items"]] == ["project.created", "policy.updated"]
    assert body["next_after"] == body["items"][-1]["sequence"]
    from_middle = (await human.get(EVENTS, after=body["items"][0]["sequence"], limit=50)).json()
    assert from_middle["next_after"] == body["items"][-1]["sequence"]
