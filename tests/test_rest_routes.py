"""How the REST shim matches paths and methods (rest/routing.py `RestRoutes`):
the same answers Starlette's own routes gave, without their per-call cost."""

from __future__ import annotations

import asyncio

from tests.conftest import Caller, Service


async def test_a_known_path_with_another_method_is_405_naming_the_allowed_ones(
    human: Caller, project: str
) -> None:
    r = await human.client.delete(f"/api/v1/projects/{project}/knowledge", headers=human.headers())
    assert r.status_code == 405
    assert r.json()["error"]["code"] == "method_not_allowed"
    assert r.headers["allow"] == "GET, HEAD, POST"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_an_unknown_path_under_the_api_is_the_404_envelope(human: Caller) -> None:
    for path in ("/api/v1/nothing", "/api/v1/projects/a/b/c/d/e/f", "/api/v1//projects"):
        r = await human.client.get(path, headers=human.headers())
        assert r.status_code == 404, path
        assert r.json()["error"]["code"] == "not_found"


async def test_a_trailing_slash_is_the_404_envelope_not_a_redirect(human: Caller) -> None:
    """Starlette's 307 named the client's own Host header in `Location`, and a
    client following it re-sent a POST: a trailing slash is an unknown route."""
    for method, path in [("GET", "/api/v1/me/"), ("POST", "/api/v1/projects/")]:
        r = await human.client.request(
            method, path, headers={**human.headers("k"), "Host": "elsewhere.example"}
        )
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["code"] == "not_found"
        assert "location" not in r.headers


async def test_an_encoded_slash_is_no_segment_boundary(human: Caller, project: str) -> None:
    """`demo%2Fpolicy` was decoded before matching and answered the policy:
    a rule a front proxy keeps by path (on `.../policy`) was not applied."""
    for path in (f"/api/v1/projects/{project}%2Fpolicy", f"/api/v1/projects/{project}%2fpolicy"):
        r = await human.client.get(path, headers=human.headers())
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["code"] == "not_found"
    r = await human.client.get(f"/api/v1/projects/{project}/policy", headers=human.headers())
    assert r.status_code == 200
    # every route, not the REST tables' alone: the event stream and the
    # OpenAPI document answered (httpsemaudit)
    for path in (f"/api/v1/projects%2F{project}/events/stream", "/api%2Fv1%2Fopenapi.json"):
        r = await asyncio.wait_for(human.client.get(path, headers=human.headers()), 5)
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["code"] == "not_found"


async def test_path_parameters_are_whole_segments_and_reach_the_handler(
    human: Caller, project: str
) -> None:
    r = await human.client.get(f"/api/v1/projects/{project}", headers=human.headers())
    assert r.status_code == 200 and r.json()["id"] == project
    r = await human.client.get("/api/v1/projects/no-such-project", headers=human.headers())
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


async def test_request_metrics_name_the_route_template(
    service: Service, human: Caller, project: str
) -> None:
    r = await human.client.get(f"/api/v1/projects/{project}/knowledge", headers=human.headers())
    assert r.status_code == 200
    metrics = service.rt.metrics.render().decode()
    assert 'route="/api/v1/projects/{project}/knowledge"' in metrics


async def test_a_path_without_get_names_no_head_in_allow(human: Caller, project: str) -> None:
    """HEAD is allowed where GET is (it answers like it); a path that only
    takes POST names POST alone."""
    r = await human.client.put("/api/v1/sessions", headers=human.headers())
    assert r.status_code == 405
    assert r.json()["error"]["code"] == "method_not_allowed"
    assert r.headers["allow"] == "POST"
    head = await human.client.head("/api/v1/sessions", headers=human.headers())
    assert head.status_code == 405 and head.headers["allow"] == "POST"
