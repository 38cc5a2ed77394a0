"""Projects and policy (service contract section 4): the projection, the
authority rules for humans and agents, revisions, history and its triggers."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import httpx
import pytest

from tests.conftest import Caller, MovableClock, Service

POLICY = "/api/v1/projects/demo/policy"
HISTORY = "/api/v1/projects/demo/policy/history"


def error_code(r: httpx.Response) -> str:
    code: str = r.json()["error"]["code"]
    return code


async def delegate(human: Caller, revision: int = 1) -> None:
    r = await human.patch(POLICY, {"expected_revision": revision, "agent_rule_editing": True})
    assert r.status_code == 200, r.text


# -- projects ------------------------------------------------------------------


async def test_human_creates_a_project(service: Service, human: Caller) -> None:
    r = await human.post("/api/v1/projects", {"id": "alpha-1", "name": "Alpha"})
    assert r.status_code == 201
    assert r.json() == {
        "id": "alpha-1",
        "name": "Alpha",
        "created_at": service.clock.iso(),
        "created_by": human.principal_id,
    }


async def test_agent_cannot_create_a_project(service: Service) -> None:
    agent = await service.agent()
    r = await agent.post("/api/v1/projects", {"id": "alpha", "name": "Alpha"})
    assert r.status_code == 403 and error_code(r) == "forbidden"
    assert (await agent.get("/api/v1/projects/alpha")).status_code == 404


async def test_duplicate_project_id_is_409_state_conflict(human: Caller, project: str) -> None:
    r = await human.post("/api/v1/projects", {"id": "demo", "name": "Again"})
    assert r.status_code == 409 and error_code(r) == "state_conflict"
    assert r.json()["error"]["details"]["field"] == "id"


@pytest.mark.parametrize(
    "slug", ["Demo", "-demo", "de_mo", "de mo", "", "a" * 64, "dé", "demo/x", "demo\n"]
)
async def test_bad_project_slug_is_400(human: Caller, slug: str) -> None:
    r = await human.post("/api/v1/projects", {"id": slug, "name": "x"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "id"


@pytest.mark.parametrize("slug", ["a", "0", "a" * 63, "web-2-api"])
async def test_good_project_slugs_are_accepted(human: Caller, slug: str) -> None:
    assert (await human.post("/api/v1/projects", {"id": slug, "name": "x"})).status_code == 201


@pytest.mark.parametrize("name", ["", "n" * 201])
async def test_project_name_must_be_1_to_200_characters(human: Caller, name: str) -> None:
    r = await human.post("/api/v1/projects", {"id": "p", "name": name})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "name"


@pytest.mark.parametrize(
    "name", ["   ", "\u200b", "Ops\nteam", "Ops\tteam", "\x1b[31mOps", "Ops\u2028"]
)
async def test_project_name_is_one_line_that_shows_something(human: Caller, name: str) -> None:
    r = await human.post("/api/v1/projects", {"id": "p", "name": name})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "name"
    assert (await human.get("/api/v1/projects/p")).status_code == 404


@pytest.mark.parametrize("name", ["José's ops", "运维", "ops 👩\u200d💻"])
async def test_project_names_in_any_script_are_accepted(human: Caller, name: str) -> None:
    r = await human.post("/api/v1/projects", {"id": "p", "name": name})
    assert r.status_code == 201 and r.json()["name"] == name


async def test_unknown_project_is_404(human: Caller) -> None:
    for path in (
        "/api/v1/projects/nope",
        "/api/v1/projects/nope/policy",
        "/api/v1/projects/nope/policy/history",
        "/api/v1/projects/nope/events",
    ):
        r = await human.get(path)
        assert r.status_code == 404 and error_code(r) == "not_found", path
    r = await human.patch("/api/v1/projects/nope/policy", {"expected_revision": 1, "rules": "x"})
    assert r.status_code == 404


async def test_projects_list_pages_with_cursors(service: Service, human: Caller) -> None:
    for slug in ("c", "a", "e", "b", "d"):
        await human.post("/api/v1/projects", {"id": slug, "name": slug.upper()})
    agent = await service.principal("agent")  # every principal may read every project
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await agent.get("/api/v1/projects", **params)).json()
        assert set(page) == {"items", "next_cursor"}
        assert len(page["items"]) <= 2
        seen += [p["id"] for p in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["a", "b", "c", "d", "e"]


async def test_projects_list_defaults_to_50(human: Caller) -> None:
    for i in range(51):
        await human.post("/api/v1/projects", {"id": f"p{i:02d}", "name": "x"})
    page = (await human.get("/api/v1/projects")).json()
    assert len(page["items"]) == 50 and page["next_cursor"] is not None


async def test_project_created_event_is_written(human: Caller, project: str) -> None:
    items = (await human.get("/api/v1/projects/demo/events")).json()["items"]
    assert [e["type"] for e in items] == ["project.created"]
    assert items[0]["actor_id"] == human.principal_id


# -- the projection ---------------------------------------------------------------


async def test_new_project_policy_is_revision_1_with_defaults(
    service: Service, human: Caller, project: str
) -> None:
    r = await human.get(POLICY)
    assert r.json() == {
        "project_id": "demo",
        "revision": 1,
        "rules": "",
        "agent_rule_editing": False,
        "allow_relayed_human_answers": False,
        "integration_owner": None,
        "lease_seconds": 900,
        "review_mode": "human",
        "updated_at": service.clock.iso(),
        "updated_by": human.principal_id,
    }


async def test_human_may_change_every_field(
    service: Service, human: Caller, project: str, clock: MovableClock
) -> None:
    agent = await service.principal("agent")
    clock.advance(minutes=5)
    body = {
        "expected_revision": 1,
        "rules": "Run the tests.",
        "agent_rule_editing": True,
        "allow_relayed_human_answers": True,
        "integration_owner": agent.principal_id,
        "lease_seconds": 600,
        "review_mode": "any",
        "provenance": "retro 2026-11",
    }
    r = await human.patch(POLICY, body)
    assert r.status_code == 200, r.text
    expected = {
        "project_id": "demo",
        "revision": 2,
        "rules": "Run the tests.",
        "agent_rule_editing": True,
        "allow_relayed_human_answers": True,
        "integration_owner": agent.principal_id,
        "lease_seconds": 600,
        "review_mode": "any",
        "updated_at": clock.iso(),
        "updated_by": human.principal_id,
    }
    assert r.json() == expected
    assert (await human.get(POLICY)).json() == expected


async def test_patch_keeps_fields_it_does_not_name(human: Caller, project: str) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "review_mode": "none"})
    r = await human.patch(POLICY, {"expected_revision": 2, "rules": "r"})
    assert r.json()["review_mode"] == "none" and r.json()["rules"] == "r"


async def test_human_clears_the_integration_owner_with_null(
    service: Service, human: Caller, project: str
) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "integration_owner": human.principal_id})
    r = await human.patch(POLICY, {"expected_revision": 2, "integration_owner": None})
    assert r.status_code == 200 and r.json()["integration_owner"] is None


async def test_unknown_integration_owner_is_400(human: Caller, project: str) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1, "integration_owner": "prn_nobody"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "integration_owner"


@pytest.mark.parametrize("seconds", [0, 29, 86401, -5])
async def test_lease_seconds_outside_30_to_86400_is_400(
    human: Caller, project: str, seconds: int
) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1, "lease_seconds": seconds})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "lease_seconds"


async def test_patch_naming_no_field_is_400(human: Caller, project: str) -> None:
    for body in ({"expected_revision": 1}, {"expected_revision": 1, "provenance": "why"}):
        assert (await human.patch(POLICY, body)).status_code == 400


@pytest.mark.parametrize("revision", [0, -1])
async def test_expected_revision_below_1_is_400(human: Caller, project: str, revision: int) -> None:
    r = await human.patch(POLICY, {"expected_revision": revision, "rules": "x"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "expected_revision"


async def test_stale_expected_revision_is_409_revision_conflict(
    human: Caller, project: str
) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "rules": "a"})
    r = await human.patch(POLICY, {"expected_revision": 1, "rules": "b"})
    assert r.status_code == 409 and error_code(r) == "revision_conflict"
    assert r.json()["error"]["details"] == {"expected_revision": 1, "current_revision": 2}
    assert (await human.get(POLICY)).json()["rules"] == "a"


async def test_a_stale_owner_change_is_a_conflict_before_the_owner_is_looked_up(
    human: Caller, project: str
) -> None:
    """The owner named was looked up before the revision was compared: a
    stale edit naming one was a 400 judged against what its caller had not
    read (review30; a knowledge correction's cycle check had the same order)."""
    await human.patch(POLICY, {"expected_revision": 1, "rules": "a"})
    r = await human.patch(POLICY, {"expected_revision": 1, "integration_owner": "prn_gone"})
    assert r.status_code == 409 and error_code(r) == "revision_conflict", r.text
    r = await human.patch(POLICY, {"expected_revision": 2, "integration_owner": "prn_gone"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "integration_owner"


async def test_future_expected_revision_is_409(human: Caller, project: str) -> None:
    r = await human.patch(POLICY, {"expected_revision": 5, "rules": "b"})
    assert r.status_code == 409 and error_code(r) == "revision_conflict"


# -- limits -----------------------------------------------------------------------------


async def test_provenance_of_4_kib_is_accepted_and_one_byte_more_is_not(
    human: Caller, project: str
) -> None:
    ok = await human.patch(POLICY, {"expected_revision": 1, "rules": "x", "provenance": "p" * 4096})
    assert ok.status_code == 200
    r = await human.patch(POLICY, {"expected_revision": 2, "rules": "y", "provenance": "p" * 4097})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "provenance"


async def test_provenance_limit_counts_utf8_bytes(human: Caller, project: str) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1, "rules": "x", "provenance": "é" * 2049})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "provenance"


async def test_rules_of_64_kib_are_accepted_and_one_byte_more_is_not(
    human: Caller, project: str
) -> None:
    ok = await human.patch(POLICY, {"expected_revision": 1, "rules": "r" * 65536})
    assert ok.status_code == 200
    r = await human.patch(POLICY, {"expected_revision": 2, "rules": "r" * 65537})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "rules"


async def test_rules_limit_counts_utf8_bytes(human: Caller, project: str) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1, "rules": "€" * 21846})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "rules"


# -- agents ---------------------------------------------------------------------------------


async def test_agent_cannot_edit_rules_without_delegation(service: Service, project: str) -> None:
    agent = await service.agent()
    r = await agent.patch(POLICY, {"expected_revision": 1, "rules": "mine"})
    assert r.status_code == 403 and error_code(r) == "forbidden"
    assert (await agent.get(POLICY)).json()["revision"] == 1


async def test_agent_edits_rules_while_delegation_is_on(
    service: Service, human: Caller, project: str
) -> None:
    await delegate(human)
    agent = await service.agent()
    r = await agent.patch(
        POLICY, {"expected_revision": 2, "rules": "agent rules", "provenance": "p"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["rules"] == "agent rules" and r.json()["updated_by"] == agent.principal_id
    newest = (await agent.get(HISTORY)).json()["items"][0]
    assert newest["actor_kind"] == "agent"
    assert newest["actor_session_id"] == agent.session_id
    assert newest["provenance"] == "p"


async def test_agent_without_a_session_may_edit_delegated_rules(
    service: Service, human: Caller, project: str
) -> None:
    await delegate(human)
    agent = await service.principal("agent")
    r = await agent.patch(POLICY, {"expected_revision": 2, "rules": "sessionless"})
    assert r.status_code == 200
    newest = (await agent.get(HISTORY)).json()["items"][0]
    assert newest["actor_session_id"] is None


@pytest.mark.parametrize(
    "change",
    [
        {"agent_rule_editing": False},
        {"agent_rule_editing": True},
        {"allow_relayed_human_answers": True},
        {"integration_owner": None},
        {"lease_seconds": 600},
        {"review_mode": "none"},
    ],
)
async def test_agent_may_change_nothing_but_rules_even_when_delegated(
    service: Service, human: Caller, project: str, change: dict[str, Any]
) -> None:
    await delegate(human)
    agent = await service.agent()
    for body in (
        {"expected_revision": 2, **change},
        {"expected_revision": 2, "rules": "r", **change},
    ):
        r = await agent.patch(POLICY, body)
        assert r.status_code == 403 and error_code(r) == "forbidden", body
    assert (await agent.get(POLICY)).json()["revision"] == 2


@pytest.mark.parametrize(
    "change",
    [
        {"integration_owner": "prn_nobody"},  # would say whether a principal exists
        {"rules": "x" * (64 * 1024 + 1)},
        {"rules": "r", "provenance": "p" * (4 * 1024 + 1)},
    ],
)
async def test_an_agents_authority_is_checked_before_the_values_it_sends(
    service: Service, change: dict[str, Any], project: str
) -> None:
    agent = await service.agent()
    r = await agent.patch(POLICY, {"expected_revision": 1, **change})
    assert r.status_code == 403, r.text
    reason = "agent_rules_only" if "integration_owner" in change else "agent_rule_editing_off"
    assert r.json()["error"]["details"]["reason"] == reason


async def test_an_agents_refusal_names_only_the_fields_it_may_not_send(
    service: Service, human: Caller, project: str
) -> None:
    """`rules`, which an agent may change here, was named among them."""
    delegate = {"expected_revision": 1, "agent_rule_editing": True}
    assert (await human.patch(POLICY, delegate)).status_code == 200
    agent = await service.agent()
    both = {"expected_revision": 2, "rules": "r", "allow_relayed_human_answers": False}
    r = await agent.patch(POLICY, both)
    assert r.status_code == 403, r.text
    details = r.json()["error"]["details"]
    assert details == {"reason": "agent_rules_only", "fields": ["allow_relayed_human_answers"]}


async def test_agent_cannot_switch_delegation_on_for_itself(service: Service, project: str) -> None:
    agent = await service.agent()
    r = await agent.patch(POLICY, {"expected_revision": 1, "agent_rule_editing": True})
    assert r.status_code == 403
    assert (await agent.get(POLICY)).json()["agent_rule_editing"] is False


async def test_agent_loses_rule_editing_when_a_human_withdraws_it(
    service: Service, human: Caller, project: str
) -> None:
    await delegate(human)
    await human.patch(POLICY, {"expected_revision": 2, "agent_rule_editing": False})
    agent = await service.agent()
    r = await agent.patch(POLICY, {"expected_revision": 3, "rules": "late"})
    assert r.status_code == 403


# -- history --------------------------------------------------------------------------------------


async def test_history_lists_every_revision_newest_first_with_every_field(
    service: Service, human: Caller, project: str, clock: MovableClock
) -> None:
    clock.advance(minutes=1)
    await human.patch(POLICY, {"expected_revision": 1, "rules": "two", "provenance": "second"})
    clock.advance(minutes=1)
    await human.patch(POLICY, {"expected_revision": 2, "review_mode": "any"})
    items = (await human.get(HISTORY)).json()["items"]
    assert [i["revision"] for i in items] == [3, 2, 1]
    assert items[0] == {
        "project_id": "demo",
        "revision": 3,
        "rules": "two",
        "agent_rule_editing": False,
        "allow_relayed_human_answers": False,
        "integration_owner": None,
        "lease_seconds": 900,
        "review_mode": "any",
        "actor_id": human.principal_id,
        "actor_kind": "human",
        "actor_session_id": None,
        "at": clock.iso(),
        "provenance": "",
    }
    assert items[1]["provenance"] == "second" and items[1]["review_mode"] == "human"
    assert items[2]["rules"] == "" and items[2]["at"] == "2026-11-29T18:00:00.000Z"


async def test_history_pages_with_cursors(human: Caller, project: str) -> None:
    for revision in range(1, 6):
        await human.patch(POLICY, {"expected_revision": revision, "rules": f"r{revision}"})
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await human.get(HISTORY, **params)).json()
        seen += [i["revision"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [6, 5, 4, 3, 2, 1]


def test_history_rows_refuse_update_and_delete_from_raw_sql(tmp_path: Any) -> None:
    from waypost.resolvers.projects import operations as projects
    from waypost.storage.db import connect_sync, run_write
    from waypost.storage.migrate import migrate

    conn = connect_sync(tmp_path / "raw.db")
    migrate(conn)
    conn.execute("INSERT INTO principals VALUES ('p', 'human', 'h', 't')")
    body = projects.ProjectCreate(id="x", name="X")
    run_write(conn, lambda c: projects.insert_project(c, body, "p", "human", "t"))
    for sql in (
        "UPDATE policy_revisions SET rules = 'forged'",
        "DELETE FROM policy_revisions",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            conn.execute(sql)
    assert [tuple(r) for r in conn.execute("SELECT rules FROM policy_revisions")] == [("",)]
    conn.close()


async def test_history_triggers_hold_on_the_live_database(
    service: Service, human: Caller, project: str
) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "rules": "kept"})
    conn = sqlite3.connect(service.db_path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            conn.execute("UPDATE policy_revisions SET rules = 'forged' WHERE revision = 2")
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            conn.execute("DELETE FROM policy_revisions WHERE project_id = 'demo'")
    finally:
        conn.close()
    assert [i["rules"] for i in (await human.get(HISTORY)).json()["items"]] == ["kept", ""]


# -- concurrency --------------------------------------------------------------


GQL_UPDATE = """
mutation ($input: PolicyUpdateInput!) {
  policyUpdate(input: $input) { policy { revision } userErrors { code } }
}
"""


async def _round(writers: list[Caller], revision: int, tag: str) -> list[str]:
    """Every writer tries revision+1 at once, half over REST and half over GraphQL."""

    async def one(i: int, w: Caller) -> str:
        rules = f"{tag}-{i}"
        if i % 2:
            r = await w.patch(POLICY, {"expected_revision": revision, "rules": rules})
            return "won" if r.status_code == 200 else error_code(r)
        data = await w.gql(
            GQL_UPDATE,
            {"input": {"idempotencyKey": f"{tag}-{i}", "projectId": "demo",
                       "expectedRevision": revision, "rules": rules}},
        )  # fmt: skip
        payload = data["data"]["policyUpdate"]
        return "won" if payload["policy"] else payload["userErrors"][0]["code"]

    return list(await asyncio.gather(*(one(i, w) for i, w in enumerate(writers))))


async def test_fifty_concurrent_updates_have_one_winner_per_revision_and_one_event_each(
    service: Service, human: Caller, project: str
) -> None:
    writers = [human, *[await service.principal("human", f"h{i}") for i in range(49)]]
    rounds = 3
    for n in range(rounds):
        outcomes = await _round(writers, revision=1 + n, tag=f"round{n}")
        assert outcomes.count("won") == 1, outcomes
        assert outcomes.count("revision_conflict") == 49, outcomes
    policy = (await human.get(POLICY)).json()
    assert policy["revision"] == 1 + rounds
    history = (await human.get(HISTORY)).json()["items"]
    assert [h["revision"] for h in history] == list(range(1 + rounds, 0, -1))
    events = (await human.get("/api/v1/projects/demo/events", limit=200)).json()["items"]
    updated = [e for e in events if e["type"] == "policy.updated"]
    assert [e["data"]["revision"] for e in updated] == list(range(2, 2 + rounds))
    sequences = [e["sequence"] for e in events]
    assert sequences == sorted(set(sequences))
    # each winner's rules are the ones its revision recorded
    assert history[0]["rules"] == policy["rules"]
