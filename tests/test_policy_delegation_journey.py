"""One team's journey with its policy and the authority it delegates
(service contract sections 4, 8 and 13; knowledge-and-decision contract,
"Binding-rule provenance" and "Decisions"): a human writes the rules,
delegates rule editing to an agent, the agent edits them, the human takes
the delegation back, and every surface (the policy, its history, the
events, the context packet over REST and GraphQL, decisions pinned to a
revision) tells the same story at every step."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from tests.conftest import Caller, Service
from tests.context_support import context, task
from tests.tasks_support import allow, open_decision

BASE = "/api/v1/projects/demo"
POLICY = f"{BASE}/policy"

PACKET_GQL = """
query ($q: String!) { project(id: "demo") {
  policy { revision rules }
  context(q: $q) { policy { revision rules } instructionsComplete }
} }"""


async def policy_now(caller: Caller) -> dict[str, Any]:
    r = await caller.get(POLICY)
    assert r.status_code == 200, r.text
    current: dict[str, Any] = r.json()
    return current


async def patch(caller: Caller, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    r = await caller.patch(POLICY, body)
    return r.status_code, r.json()


async def history(caller: Caller) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = (await caller.get(f"{POLICY}/history", **params)).json()
        items += page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            return items


async def assert_packet_shows_the_current_policy(caller: Caller) -> None:
    """The packet's `policy` is the complete current rules with the current
    policy revision (the one a PATCH must name), over REST and GraphQL, also
    after a revision that changed something other than the rules."""
    current = await policy_now(caller)
    want = {"revision": current["revision"], "rules": current["rules"]}
    packet = await context(caller, "widget")
    assert packet["policy"] == want
    data = await caller.gql(PACKET_GQL, {"q": "widget"})
    assert "errors" not in data, data
    assert data["data"]["project"]["context"]["policy"] == want
    assert data["data"]["project"]["policy"] == want


async def test_the_packet_names_the_current_policy_revision_through_the_journey(
    service: Service, human: Caller, project: str
) -> None:
    agent = await service.agent()
    await task(human, "Ship the widget")
    await assert_packet_shows_the_current_policy(agent)

    assert (await patch(human, {"expected_revision": 1, "rules": "R1"}))[0] == 200
    await assert_packet_shows_the_current_policy(agent)
    # delegation is a policy revision that leaves the rules as they were
    assert (await patch(human, {"expected_revision": 2, "agent_rule_editing": True}))[0] == 200
    await assert_packet_shows_the_current_policy(agent)
    # the agent edits against the revision its packet named
    packet = await context(agent, "widget")
    status, body = await patch(
        agent, {"expected_revision": packet["policy"]["revision"], "rules": "R1\nR2"}
    )
    assert status == 200, body
    await assert_packet_shows_the_current_policy(agent)
    assert (await patch(human, {"expected_revision": 4, "lease_seconds": 600}))[0] == 200
    await assert_packet_shows_the_current_policy(agent)
    assert (await patch(human, {"expected_revision": 5, "agent_rule_editing": False}))[0] == 200
    await assert_packet_shows_the_current_policy(agent)
    packet = await context(agent, "widget")
    assert packet["policy"] == {"revision": 6, "rules": "R1\nR2"}


async def test_an_allow_goes_stale_the_moment_an_agent_edits_the_rules(
    service: Service, human: Caller, project: str
) -> None:
    agent = await service.agent()
    t = await task(human, "Ship the widget")
    await patch(human, {"expected_revision": 1, "rules": "R1", "agent_rule_editing": True})
    decision_id = await open_decision(human, t["id"])
    await allow(human, decision_id)
    d = (await human.get(f"{BASE}/decisions/{decision_id}")).json()
    assert d["current"]["policy_revision"] == 2 and d["status"] == "allowed"

    # a policy change that leaves the rules alone keeps the allow
    assert (await patch(human, {"expected_revision": 2, "lease_seconds": 600}))[0] == 200
    d = (await human.get(f"{BASE}/decisions/{decision_id}")).json()
    assert d["status"] == "allowed" and d["work_allowed"] is True

    status, body = await patch(agent, {"expected_revision": 3, "rules": "R1\nR2"})
    assert status == 200, body
    d = (await human.get(f"{BASE}/decisions/{decision_id}")).json()
    assert d["status"] == "stale" and d["work_allowed"] is False
    shown = (await human.get(f"{BASE}/tasks/{t['id']}")).json()
    assert shown["ready"] is False and shown["blocked_by"]["decisions"] == [decision_id]
    packet = await context(agent, "widget")
    assert packet["items"][0]["id"] == decision_id
    assert packet["items"][0]["status"] == "stale"
    assert packet["policy"] == {"revision": 4, "rules": "R1\nR2"}
    data = await human.gql(
        'query ($id: String!) { project(id: "demo") { decision(id: $id) { status workAllowed } } }',
        {"id": decision_id},
    )
    assert data["data"]["project"]["decision"] == {"status": "STALE", "workAllowed": False}
    r = await human.post(
        f"{BASE}/decisions/{decision_id}/answer",
        {"expected_generation": 1, "disposition": "allow", "answer": "Proceed",
         "rationale": "again", "conditions_confirmed": True},
    )  # fmt: skip
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "state_conflict"
    assert r.json()["error"]["details"]["reason"] == "stale"


async def test_revocation_racing_agent_edits_never_lets_an_edit_in_after_it(
    service: Service, human: Caller, project: str
) -> None:
    """Each round the agent sends two edits (against the current revision
    and the next) while the human withdraws the delegation twice (likewise).
    Whatever the order the writer takes them in, no agent revision follows a
    revision with the delegation off, history has no gap, and each revision
    has its one event."""
    agent = await service.agent()
    for _ in range(12):
        current = await policy_now(human)
        rev = current["revision"]
        if not current["agent_rule_editing"]:
            assert (await patch(human, {"expected_revision": rev, "agent_rule_editing": True}))[
                0
            ] == 200
            rev += 1
        results = await asyncio.gather(
            patch(human, {"expected_revision": rev, "agent_rule_editing": False}),
            patch(agent, {"expected_revision": rev, "rules": f"agent at {rev}"}),
            patch(agent, {"expected_revision": rev + 1, "rules": f"agent at {rev + 1}"}),
            patch(human, {"expected_revision": rev + 1, "agent_rule_editing": False}),
        )
        for status, body in results:
            assert status in (200, 403, 409), body
            if status == 403:
                assert body["error"]["details"] == {"reason": "agent_rule_editing_off"}
            if status == 409:
                assert body["error"]["code"] == "revision_conflict"
        # the first of the two sent against `rev` lands; at most one more does
        assert 1 <= [s for s, _ in results].count(200) <= 2

    revisions = sorted(await history(human), key=lambda h: h["revision"])
    assert [h["revision"] for h in revisions] == list(range(1, len(revisions) + 1))
    for before, after in itertools.pairwise(revisions):
        if after["actor_kind"] == "agent":
            assert before["agent_rule_editing"] is True, (before, after)
            for field in ("agent_rule_editing", "allow_relayed_human_answers",
                          "integration_owner", "lease_seconds", "review_mode"):  # fmt: skip
                assert after[field] == before[field]
    current = await policy_now(human)
    assert current["revision"] == revisions[-1]["revision"]
    assert current["rules"] == revisions[-1]["rules"]
    events = (await human.get(f"{BASE}/events", limit=200)).json()["items"]
    updated = [e for e in events if e["type"] == "policy.updated"]
    assert [e["data"]["revision"] for e in updated] == list(range(2, len(revisions) + 1))
    for e in updated:
        row = revisions[e["data"]["revision"] - 1]
        assert (e["actor_id"], e["actor_session_id"], e["at"]) == (
            row["actor_id"], row["actor_session_id"], row["at"]
        )  # fmt: skip
