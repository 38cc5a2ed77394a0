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
