"""`waypost mcp --url` pointed at the lifecycle listener says so, whichever
token it holds, rather than that its token was refused (stdiocohabit)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Service
from tests.lifecycle.support import Lifecycle
from waypost.lifecycle_http.app import create_lifecycle_app
from waypost.lifecycle_http.verifiers import WaypostTokenVerifier
from waypost.mcp_server.stdio import TokenRefused, check_token


def _client(app: object, token: str, base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
        base_url=base,
        headers={"Authorization": f"Bearer {token}"},
    )


@pytest.mark.parametrize("audience", ["api", "lifecycle"])
async def test_the_lifecycle_listener_is_named_whatever_the_token(
    service: Service, lifecycle: Lifecycle, audience: str
) -> None:
    member = await lifecycle.member("author")
    token = (
        member.token if audience == "lifecycle" else (await service.principal("agent", "a")).token
    )
    app = create_lifecycle_app(service.rt, WaypostTokenVerifier(service.rt))
    async with _client(app, token, "http://lifecycle.test") as client:
        with pytest.raises(TokenRefused) as refused:
            await check_token(client)
    said = str(refused.value)
    assert "lifecycle listener" in said and "--port" in said
    assert "refused the token" not in said


async def test_the_public_listener_still_names_a_refused_token(service: Service) -> None:
    async with _client(service.app, "wp_not-a-token", "http://public.test") as client:
        with pytest.raises(TokenRefused, match="refused the token in WAYPOST_TOKEN"):
            await check_token(client)
    agent = await service.principal("agent", "b")
    async with _client(service.app, agent.token, "http://public.test") as client:
        await check_token(client)  # a good token: no refusal


@pytest.mark.parametrize("path", ["/mcp", "/api", "/api/v1"])
async def test_a_url_with_a_path_the_api_is_not_under_is_refused(
    service: Service, path: str
) -> None:
    """`--url http://host:port/mcp` (the HTTP transport's URL) passed the
    start check: every tool then answered `not_found`, with advice about
    ids (mcpconformance)."""
    agent = await service.principal("agent", "c")
    async with _client(service.app, agent.token, f"http://public.test{path}") as client:
        with pytest.raises(TokenRefused) as refused:
            await check_token(client)
    said = str(refused.value)
    assert said.startswith(f"http://public.test{path}"), said
    assert "has no Waypost API under it (GET /api/v1/me answered 404)" in said, said
    assert "refused the token" not in said


async def test_a_service_still_starting_lets_it_start() -> None:
    """docs/mcp.md: an unreachable Waypost does not stop `waypost mcp` (a
    desktop client may start it first); nor does one still opening its
    store, whose listeners answer every request `503` meanwhile
    (http/starting.py). Only a `404` says the API is not under --url."""
    from waypost.http.starting import StartingAnswers, public_answer
    from waypost.serving import bind

    sockets = bind("127.0.0.1", 0)
    starting = StartingAnswers()
    starting.start(sockets, public_answer, 16, 5.0)
    port = sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": "Bearer wp_x"}
        ) as client:
            await check_token(client)  # no refusal: tools answer unavailable until it is up
    finally:
        starting.close()
        for sock in sockets:
            sock.close()
