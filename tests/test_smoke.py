from __future__ import annotations

from tests.conftest import Caller, Service


async def test_healthz_needs_no_token(service: Service) -> None:
    r = await service.client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


async def test_policy_update_is_visible_over_graphql(human: Caller, project: str) -> None:
    r = await human.patch(
        f"/api/v1/projects/{project}/policy", {"expected_revision": 1, "rules": "be kind"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["revision"] == 2
    data = await human.gql(
        '{ project(id: "demo") { policy { revision rules }'
        " policyHistory { edges { node { revision } } } } }"
    )
    assert data["data"]["project"]["policy"] == {"revision": 2, "rules": "be kind"}, data


async def test_walking_skeleton_end_to_end(service: Service, human: Caller, project: str) -> None:
    """A human delegates rule editing; an agent in a session edits the rules;
    REST, GraphQL, history and the event log all tell the same story."""
    policy = "/api/v1/projects/demo/policy"
    r = await human.patch(policy, {"expected_revision": 1, "agent_rule_editing": True})
    assert r.status_code == 200
    agent = await service.agent("scribe")
    r = await agent.patch(policy, {"expected_revision": 2, "rules": "tests first"}, key="a1")
    assert r.status_code == 200 and r.json()["updated_by"] == agent.principal_id
    replay = await agent.patch(policy, {"expected_revision": 2, "rules": "tests first"}, key="a1")
    assert replay.headers["idempotent-replayed"] == "true" and replay.json() == r.json()
    history = (await human.get(f"{policy}/history")).json()["items"]
    assert [(h["revision"], h["actor_kind"]) for h in history] == [
        (3, "agent"),
        (2, "human"),
        (1, "human"),
    ]
    events = (await human.get("/api/v1/projects/demo/events")).json()
    assert [e["type"] for e in events["items"]] == [
        "project.created",
        "policy.updated",
        "policy.updated",
    ]
    assert events["items"][-1]["actor_session_id"] == agent.session_id
    data = await agent.gql(
        '{ me { kind } project(id: "demo") { policy { revision rules updatedBy { name } } } }'
    )
    assert data["data"] == {
        "me": {"kind": "AGENT"},
        "project": {"policy": {"revision": 3, "rules": "tests first",
                               "updatedBy": {"name": "scribe"}}},
    }  # fmt: skip
