"""Idempotency receipts (service contract section 10): replay, key reuse,
in-flight requests, refusals that leave no receipt, retention, GraphQL keys."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.conftest import Caller, MovableClock, Service
from tests.tasks_support import BASE, error
from waypost.mcp_server.backend import LocalBackend
from waypost.mcp_server.calls import ApiError
from waypost.resolvers.access import principals
from waypost.resolvers.core import store, sweep
from waypost.resolvers.core.receipts import Idempotency

POLICY = "/api/v1/projects/demo/policy"
GQL_UPDATE = """
mutation ($input: PolicyUpdateInput!) {
  policyUpdate(input: $input) {
    policy { revision rules }
    userErrors { code field message }
    replayed
  }
}
"""


def count(service: Service, sql: str, *args: Any) -> int:
    conn = sqlite3.connect(service.db_path)
    try:
        return int(conn.execute(sql, args).fetchone()[0])
    finally:
        conn.close()


def events(service: Service) -> int:
    return count(service, "SELECT count(*) FROM events")


def stored_by_an_earlier_build(
    service: Service, caller: Caller, key: str, operation: str, body: Any, answer: Any
) -> None:
    """A receipt for `body` under `key` with `answer` (201), as an earlier
    build wrote it: for a request this build may refuse."""
    idem = Idempotency.for_request(key, operation=operation, body=body)
    conn = sqlite3.connect(service.db_path)
    with conn:
        store.insert_receipt(
            conn, (caller.principal_id, key), idem.fingerprint, (201, answer),
            "2026-11-29T18:00:00.000Z",
        )  # fmt: skip
    conn.close()


def receipts(service: Service, principal_id: str) -> int:
    return count(service, "SELECT count(*) FROM receipts WHERE principal_id = ?", principal_id)


async def wait_until(predicate: Any) -> None:
    """Let other tasks and worker threads run until `predicate()` holds."""
    for _ in range(5000):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


# -- replay ------------------------------------------------------------------------


async def test_replay_returns_the_same_status_and_body_with_the_header(
    human: Caller, project: str
) -> None:
    body = {"expected_revision": 1, "rules": "one"}
    first = await human.patch(POLICY, body, key="p-1")
    again = await human.patch(POLICY, body, key="p-1")
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"


async def test_replay_of_a_create_answers_201_again(human: Caller) -> None:
    body = {"id": "alpha", "name": "Alpha"}
    first = await human.post("/api/v1/projects", body, key="c-1")
    again = await human.post("/api/v1/projects", body, key="c-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"


async def test_replay_runs_nothing_and_writes_no_event(
    service: Service, human: Caller, project: str
) -> None:
    body = {"expected_revision": 1, "rules": "one"}
    await human.patch(POLICY, body, key="p-1")
    before = events(service)
    for _ in range(3):
        assert (await human.patch(POLICY, body, key="p-1")).status_code == 200
    assert events(service) == before
    assert (await human.get(POLICY)).json()["revision"] == 2
    assert count(service, "SELECT count(*) FROM policy_revisions") == 2


async def test_replay_ignores_key_order_and_whitespace(human: Caller, project: str) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "rules": "one"}, key="p-1")
    r = await human.client.patch(
        POLICY,
        content=b'{ "rules" : "one",\n "expected_revision" : 1 }',
        headers={**human.headers("p-1"), "Content-Type": "application/json"},
    )
    assert r.status_code == 200 and r.headers["idempotent-replayed"] == "true"


async def test_replay_of_an_action_with_empty_body_or_empty_object(service: Service) -> None:
    agent = await service.principal("agent")
    first = await agent.client.post("/api/v1/sessions", headers=agent.headers("s-1"))
    again = await agent.post("/api/v1/sessions", {}, key="s-1")
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]


async def test_a_body_refused_since_its_request_ran_replays_its_answer(
    service: Service, human: Caller
) -> None:
    """An upgrade that tightens validation, between a create and its retry
    (the answer lost in the restart): the retry gets the stored answer, not
    `400`. The receipt is written as an earlier build would have written it,
    for a body this build refuses (a name over its 200 characters)."""
    earlier = {"id": "legacy", "name": "n" * 300}
    stored = {"id": "legacy", "name": "n" * 300, "note": "as an earlier build answered"}
    stored_by_an_earlier_build(service, human, "up-1", "POST /api/v1/projects", earlier, stored)
    retry = await human.post("/api/v1/projects", earlier, key="up-1")
    assert retry.status_code == 201 and retry.json() == stored
    assert retry.headers["idempotent-replayed"] == "true"
    # the same body under another key, or another refused body under this key:
    # refused for what it is
    other_key = await human.post("/api/v1/projects", earlier, key="up-2")
    assert other_key.status_code == 400 and other_key.json()["error"]["details"]["field"] == "name"
    changed = await human.post("/api/v1/projects", {**earlier, "id": "other"}, key="up-1")
    assert changed.status_code == 400 and changed.json()["error"]["details"]["field"] == "name"
    # another principal's retry of that body is not this principal's request
    agent = await service.principal("agent")
    foreign = await agent.post("/api/v1/projects", earlier, key="up-1")
    assert foreign.status_code in (400, 403) and "idempotent-replayed" not in foreign.headers


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/projects/demo/knowledge", {"kind": "fact", "title": "\u200b", "body": "b"}),
        ("/api/v1/projects/demo/tasks", {"title": "\u200b"}),
    ],
)
async def test_a_retry_an_operations_own_rule_now_refuses_replays_its_answer(
    service: Service, human: Caller, project: str, path: str, body: dict[str, str]
) -> None:
    """A knowledge record titled U+200B, taken by an earlier build, is refused
    `400` since "not blank" means showing something; its retry after the
    upgrade was refused, where a task's replayed: the knowledge rules ran
    before the key's receipt was looked for."""
    stored = {"id": "made-earlier", "note": "as an earlier build answered"}
    stored_by_an_earlier_build(service, human, "up-5", f"POST {path}", body, stored)
    retry = await human.post(path, body, key="up-5")
    assert retry.status_code == 201 and retry.json() == stored
    fresh = await human.post(path, body, key="up-6")
    assert fresh.status_code == 400 and fresh.json()["error"]["details"]["field"] == "title"


async def test_a_retry_of_a_body_holding_nul_replays_its_answer(
    service: Service, human: Caller, project: str
) -> None:
    """NUL in text is refused since it was once stored; a retry of a request
    an earlier build took with it gets that build's answer."""
    body = {"kind": "fact", "title": "t", "body": "a\x00b"}
    stored = {"id": "made-earlier", "note": "as an earlier build answered"}
    path = "/api/v1/projects/demo/knowledge"
    stored_by_an_earlier_build(service, human, "nul-1", f"POST {path}", body, stored)
    retry = await human.post(path, body, key="nul-1")
    assert retry.status_code == 201 and retry.json() == stored
    fresh = await human.post(path, body, key="nul-2")
    assert fresh.status_code == 400 and fresh.json()["error"]["details"]["field"] == "body"


async def test_an_in_process_tool_call_replays_it_too(service: Service, human: Caller) -> None:
    """The MCP tools run a route in process by the same decoding as REST
    (rest/routing.call_for); they had a copy of it without this replay, and
    such a retry through a tool was refused `400`."""
    earlier = {"id": "legacy", "name": "n" * 300}
    stored = {"id": "legacy", "name": "n" * 300, "note": "as an earlier build answered"}
    stored_by_an_earlier_build(service, human, "up-3", "POST /api/v1/projects", earlier, stored)
    actor = await service.rt.db.read(lambda c: principals.authenticate(c, human.token, "api"))
    backend = LocalBackend(service.rt, actor)
    reply = await backend.call("POST", "/api/v1/projects", {}, body=earlier, idempotency_key="up-3")
    assert (reply.status, reply.body, reply.replayed) == (201, stored, True)
    with pytest.raises(ApiError) as refused:
        await backend.call("POST", "/api/v1/projects", {}, body=earlier, idempotency_key="up-4")
    assert refused.value.details["field"] == "name"


# -- key reuse ------------------------------------------------------------------------


async def test_same_key_with_a_changed_body_is_422(
    service: Service, human: Caller, project: str
) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "rules": "one"}, key="p-1")
    before = events(service)
    r = await human.patch(POLICY, {"expected_revision": 1, "rules": "two"}, key="p-1")
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "idempotency_key_reused"
    assert r.json()["error"]["details"] == {"field": "Idempotency-Key"}
    assert events(service) == before


async def test_same_key_on_another_route_is_422(human: Caller, project: str) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "rules": "one"}, key="p-1")
    r = await human.post("/api/v1/projects", {"id": "beta", "name": "B"}, key="p-1")
    assert r.status_code == 422


async def test_same_key_on_another_project_path_is_422(human: Caller, project: str) -> None:
    await human.post("/api/v1/projects", {"id": "other", "name": "O"})
    await human.patch(POLICY, {"expected_revision": 1, "rules": "one"}, key="p-1")
    r = await human.patch(
        "/api/v1/projects/other/policy", {"expected_revision": 1, "rules": "one"}, key="p-1"
    )
    assert r.status_code == 422


async def test_keys_belong_to_one_principal(service: Service, human: Caller, project: str) -> None:
    other = await service.principal("human", "bob")
    await human.patch(POLICY, {"expected_revision": 1, "rules": "one"}, key="shared")
    r = await other.patch(POLICY, {"expected_revision": 2, "rules": "two"}, key="shared")
    assert r.status_code == 200 and "idempotent-replayed" not in r.headers
    assert r.json()["revision"] == 3


# -- refusals leave no receipt -------------------------------------------------------------


async def test_refused_request_leaves_no_receipt_and_the_key_can_be_retried(
    service: Service, human: Caller, project: str
) -> None:
    stale = await human.patch(POLICY, {"expected_revision": 7, "rules": "x"}, key="retry")
    assert stale.status_code == 409
    assert receipts(service, human.principal_id) == 1  # the project's creation only
    fixed = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key="retry")
    assert fixed.status_code == 200 and "idempotent-replayed" not in fixed.headers


async def test_invalid_body_leaves_no_receipt(human: Caller, project: str) -> None:
    bad = await human.patch(POLICY, {"expected_revision": 1, "nope": 1}, key="retry")
    assert bad.status_code == 400
    ok = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key="retry")
    assert ok.status_code == 200


async def test_forbidden_request_leaves_no_receipt(service: Service, project: str) -> None:
    agent = await service.agent()
    r = await agent.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key="a-1")
    assert r.status_code == 403
    assert receipts(service, agent.principal_id) == 1  # its session start only


async def test_receipt_is_stored_with_the_mutation(
    service: Service, human: Caller, project: str
) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1, "rules": "one"}, key="stored")
    conn = sqlite3.connect(service.db_path)
    row = conn.execute(
        "SELECT status, body, created_at FROM receipts WHERE principal_id = ? AND key = ?",
        (human.principal_id, "stored"),
    ).fetchone()
    conn.close()
    assert row[0] == 200 and row[2] == service.clock.iso()
    import json

    assert json.loads(row[1]) == r.json()


# -- in flight ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def writer_held(service: Service) -> AsyncIterator[None]:
    """Keep the writer busy inside the block, so a mutation started there stays in flight."""
    release = threading.Event()
    entered = threading.Event()

    def hold_the_writer(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait(10)

    holder = asyncio.create_task(service.rt.db.write(hold_the_writer))
    await asyncio.to_thread(entered.wait, 10)
    try:
        yield
    finally:
        release.set()
        await holder


async def test_same_key_while_the_first_is_running_is_409_in_flight(
    service: Service, human: Caller, project: str
) -> None:
    body = {"expected_revision": 1, "rules": "slow"}
    async with writer_held(service):
        first = asyncio.create_task(human.patch(POLICY, body, key="slow"))
        await wait_until(lambda: (human.principal_id, "slow") in service.rt.inflight)
        second = await human.patch(POLICY, body, key="slow")
        assert second.status_code == 409
        assert second.json()["error"]["code"] == "idempotency_in_flight"
    assert (await first).status_code == 200
    replay = await human.patch(POLICY, body, key="slow")
    assert replay.status_code == 200 and replay.headers["idempotent-replayed"] == "true"


async def test_graphql_same_key_while_running_is_an_in_flight_user_error(
    service: Service, human: Caller, project: str
) -> None:
    variables = {
        "input": {"idempotencyKey": "g", "projectId": "demo", "expectedRevision": 1, "rules": "r"}
    }
    async with writer_held(service):
        first = asyncio.create_task(human.gql(GQL_UPDATE, variables))
        await wait_until(lambda: (human.principal_id, "g") in service.rt.inflight)
        second = await human.gql(GQL_UPDATE, variables)
        assert second["data"]["policyUpdate"]["userErrors"][0]["code"] == "idempotency_in_flight"
    assert (await first)["data"]["policyUpdate"]["policy"]["revision"] == 2


# -- GraphQL idempotencyKey --------------------------------------------------------------------


async def test_graphql_mutation_replays_with_the_same_key(
    service: Service, human: Caller, project: str
) -> None:
    variables = {
        "input": {"idempotencyKey": "g-1", "projectId": "demo", "expectedRevision": 1, "rules": "r"}
    }
    first = (await human.gql(GQL_UPDATE, variables))["data"]["policyUpdate"]
    before = events(service)
    again = (await human.gql(GQL_UPDATE, variables))["data"]["policyUpdate"]
    assert first == {"policy": {"revision": 2, "rules": "r"}, "userErrors": [], "replayed": False}
    assert again == {**first, "replayed": True}
    assert events(service) == before


async def test_graphql_changed_input_with_the_same_key_is_key_reused(
    human: Caller, project: str
) -> None:
    base = {"idempotencyKey": "g-1", "projectId": "demo", "expectedRevision": 1}
    await human.gql(GQL_UPDATE, {"input": {**base, "rules": "a"}})
    again = (await human.gql(GQL_UPDATE, {"input": {**base, "rules": "b"}}))["data"]
    assert again["policyUpdate"]["policy"] is None
    assert again["policyUpdate"]["userErrors"][0]["code"] == "idempotency_key_reused"
    # GraphQL names its own input field, not the REST header
    assert again["policyUpdate"]["userErrors"][0]["field"] == "idempotencyKey"


async def test_graphql_empty_idempotency_key_is_a_user_error(human: Caller, project: str) -> None:
    variables = {
        "input": {"idempotencyKey": "", "projectId": "demo", "expectedRevision": 1, "rules": "r"}
    }
    data = (await human.gql(GQL_UPDATE, variables))["data"]["policyUpdate"]
    assert data["userErrors"] == [
        {
            "code": "invalid_request",
            "field": "idempotencyKey",
            "message": "an idempotency key is required for every mutation",
        }
    ]


async def test_graphql_missing_idempotency_key_is_refused(human: Caller, project: str) -> None:
    variables = {"input": {"projectId": "demo", "expectedRevision": 1, "rules": "r"}}
    data = await human.gql(GQL_UPDATE, variables)
    assert data["data"] is None
    assert data["errors"][0]["extensions"]["code"] == "invalid_request"


async def test_graphql_and_rest_keys_share_one_space_per_principal(
    human: Caller, project: str
) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "rules": "r"}, key="both")
    variables = {
        "input": {
            "idempotencyKey": "both",
            "projectId": "demo",
            "expectedRevision": 1,
            "rules": "r",
        }
    }
    data = (await human.gql(GQL_UPDATE, variables))["data"]["policyUpdate"]
    assert data["userErrors"][0]["code"] == "idempotency_key_reused"


# -- retention -------------------------------------------------------------------------------------


async def test_receipts_are_kept_at_least_24_hours(
    service: Service, human: Caller, project: str, clock: MovableClock
) -> None:
    body = {"expected_revision": 1, "rules": "one"}
    await human.patch(POLICY, body, key="old")
    clock.advance(hours=47)
    await sweep.run_once(service.rt)
    r = await human.patch(POLICY, body, key="old")
    assert r.headers.get("idempotent-replayed") == "true"


async def test_sweep_purges_receipts_past_retention(
    service: Service, human: Caller, project: str, clock: MovableClock
) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "rules": "one"}, key="old")
    clock.advance(hours=49)
    report = await sweep.run_once(service.rt)
    assert report["receipts_purged"] >= 2
    assert receipts(service, human.principal_id) == 0
    r = await human.patch(POLICY, {"expected_revision": 2, "rules": "new"}, key="old")
    assert r.status_code == 200 and "idempotent-replayed" not in r.headers


async def test_replayed_response_still_carries_common_headers(human: Caller, project: str) -> None:
    body = {"expected_revision": 1, "rules": "one"}
    await human.patch(POLICY, body, key="h")
    r: httpx.Response = await human.patch(POLICY, body, key="h")
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"


SESSION_ACTION = """
mutation($i: SessionActionInput!) {
  %s(input: $i) { session { restId endedAt } userErrors { code field } replayed }
}"""


async def test_a_graphql_key_names_its_mutation_not_only_its_input(service: Service) -> None:
    # (parityaudit: with the name dropped from the identity, no test failed)
    # sessionHeartbeat and sessionEnd take the same input: the receipt's
    # identity is the mutation's name plus its input (docs/graphql.md), so
    # ending a session under the heartbeat's key is a reused key, never the
    # heartbeat's answer replayed as if the session had ended
    agent = await service.agent()
    variables = {"i": {"idempotencyKey": "same", "sessionId": agent.session_id}}
    beat = (await agent.gql(SESSION_ACTION % "sessionHeartbeat", variables))["data"]
    beat = beat["sessionHeartbeat"]
    assert beat["userErrors"] == [] and beat["replayed"] is False
    end = (await agent.gql(SESSION_ACTION % "sessionEnd", variables))["data"]["sessionEnd"]
    assert end == {
        "session": None,
        "userErrors": [{"code": "idempotency_key_reused", "field": "idempotencyKey"}],
        "replayed": False,
    }
    me = (await agent.get("/api/v1/me")).json()
    assert me["session"]["id"] == agent.session_id and me["session"]["ended_at"] is None


async def test_a_key_past_48_hours_is_free_only_once_a_sweep_purged_it(
    service: Service, human: Caller, project: str, clock: MovableClock
) -> None:
    """api.md, Idempotency: receipts are kept 48 hours and then deleted by
    the sweep (every `--sweep-interval`); until a sweep runs, an older
    receipt still decides (replay, or `422` for another request)."""
    r = await human.post(f"{BASE}/tasks", {"title": "first"}, key="old-key")
    assert r.status_code == 201, r.text
    clock.advance(hours=49)
    r = await human.post(f"{BASE}/tasks", {"title": "second"}, key="old-key")
    assert error(r)[:2] == (422, "idempotency_key_reused")
    r = await human.post(f"{BASE}/tasks", {"title": "first"}, key="old-key")
    assert r.status_code == 201 and r.headers.get("idempotent-replayed") == "true"
    await sweep.run_once(service.rt)
    r = await human.post(f"{BASE}/tasks", {"title": "second"}, key="old-key")
    assert r.status_code == 201 and "idempotent-replayed" not in r.headers
