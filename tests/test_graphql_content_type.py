"""POST /graphql takes the same Content-Type as /api/v1 (service contract 14)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import Caller, MovableClock, copy_database, serving
from waypost.settings import Settings

BODY = b'{"query": "{ me { name } }"}'


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "APPLICATION/JSON",
        "Application/Json; charset=UTF-8",
        "application/json;charset=utf-8",
        "application/json ; charset = utf-8",
        'application/json; charset="utf-8"',  # the same value quoted (RFC 9110, 8.3.2)
        # empty parameters are none (RFC 9110, 5.6.6); the second was refused
        "application/json;",
        "application/json;charset=utf-8;",
        "application/json; ; charset=utf-8",
    ],
)
async def test_json_media_types_are_accepted(human: Caller, content_type: str) -> None:
    r = await human.client.post(
        "/graphql", content=BODY, headers={**human.headers(), "Content-Type": content_type}
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"data": {"me": {"name": "alice"}}}


@pytest.mark.parametrize(
    "content_type",
    [
        "application/jsonx",
        "application/json-patch+json",
        "text/html, application/json",
        "application/json; charset=latin-1",
        'application/json; charset="latin-1"',
        "application/json; charset=utf-8; v=2",
        "application/json; charset=utf-8; charset=utf-8",
        'application/json; charset="utf-8;"',
        "application/graphql",
        "text/plain",
        "multipart/form-data; boundary=x",
        None,
    ],
)
async def test_other_media_types_are_415(human: Caller, content_type: str | None) -> None:
    headers = {**human.headers()}
    if content_type is not None:
        headers["Content-Type"] = content_type
    r = await human.client.post("/graphql", content=BODY, headers=headers)
    assert r.status_code == 415
    [error] = r.json()["errors"]
    assert error["extensions"] == {"code": "unsupported_media_type"}
    assert "application/json" in error["message"]


@pytest.mark.parametrize(
    ("content_type", "taken"),
    [
        ("application/json;charset=utf-8;", True),
        ("application/json;", True),
        ("application/jsonx", False),
        ("text/html, application/json", False),
    ],
)
async def test_rest_takes_and_refuses_the_same_media_types(
    human: Caller, content_type: str, taken: bool
) -> None:
    r = await human.client.post(
        "/api/v1/projects",
        content=b'{"id": "p", "name": "P"}',
        headers={**human.headers("k1"), "Content-Type": content_type},
    )
    if taken:
        assert r.status_code == 201, r.text
    else:
        assert r.status_code == 415
        assert r.json()["error"]["code"] == "unsupported_media_type"


@pytest.mark.parametrize("coding", ["gzip", "br", "identity, gzip", "x-made-up"])
async def test_a_body_with_a_content_coding_is_415_on_both(human: Caller, coding: str) -> None:
    """No coding is decoded: a plain body labelled gzip was taken as it came
    (a project created; a real gzip body was refused as not valid UTF-8)."""
    r = await human.client.post(
        "/graphql",
        content=BODY,
        headers={**human.headers(), "Content-Type": "application/json", "Content-Encoding": coding},
    )
    assert r.status_code == 415, r.text
    [error] = r.json()["errors"]
    assert error["extensions"] == {"code": "unsupported_media_type"}
    assert "Content-Encoding" in error["message"]
    r = await human.client.post(
        "/api/v1/projects",
        content=b'{"id": "coded", "name": "P"}',
        headers={**human.headers("k-coded"), "Content-Type": "application/json",
                 "Content-Encoding": coding},
    )  # fmt: skip
    assert r.status_code == 415, r.text
    assert r.json()["error"]["code"] == "unsupported_media_type"
    assert (await human.get("/api/v1/projects/coded")).status_code == 404


@pytest.mark.parametrize("coding", ["identity", "IDENTITY", " identity ,identity", ""])
async def test_the_identity_coding_is_no_coding(human: Caller, coding: str) -> None:
    """`identity` in any letter case (RFC 9110, 8.4.1), with spaces around
    it, several times, or an empty list, is no coding (mutantaudit11: only
    `identity` itself was sent)."""
    headers = {**human.headers(), "Content-Type": "application/json",
               "Content-Encoding": coding}  # fmt: skip
    assert (await human.client.post("/graphql", content=BODY, headers=headers)).status_code == 200
    r = await human.client.post(
        "/api/v1/projects", content=b'{"id": "plain", "name": "P"}',
        headers={**headers, **human.headers("k-plain")},
    )  # fmt: skip
    assert r.status_code == 201, r.text


async def test_a_coding_in_a_second_content_encoding_header_is_415(human: Caller) -> None:
    """Every Content-Encoding header is read, not only the first (mutantaudit11)."""
    headers = [*human.headers().items(), ("Content-Type", "application/json"),
               ("Content-Encoding", "identity"), ("Content-Encoding", "gzip")]  # fmt: skip
    r = await human.client.post("/graphql", content=BODY, headers=headers)
    assert r.status_code == 415, r.text


@pytest.mark.parametrize("method", ["HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND"])
async def test_other_methods_are_405_in_graphql_shape(human: Caller, method: str) -> None:
    """Only POST executes; GET and HEAD serve the GraphiQL page when it is on
    (here it is off). Any other method is 405, with GraphQL's error shape
    (contract 13), and names the one method allowed."""
    headers = {**human.headers(), "Content-Type": "application/json"}
    r = await human.client.request(method, "/graphql", content=BODY, headers=headers)
    assert r.status_code == 405, r.text
    if method != "HEAD":  # a HEAD answer has no body
        assert r.json()["errors"][0]["extensions"] == {"code": "method_not_allowed"}
    assert r.headers["allow"] == "POST"


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
async def test_other_methods_name_get_and_head_too_under_graphiql(
    tmp_path: Path, clock: MovableClock, migrated_template: Path, method: str
) -> None:
    """docs/graphql.md: any other method is 405 in GraphQL's error shape, with
    `Allow: POST`, or `Allow: GET, HEAD, POST` under `--graphiql` (GET and
    HEAD then serve the page)."""
    db_path = copy_database(migrated_template, tmp_path / "ide.db")
    settings = Settings(db_path=db_path, sweep_interval=3600, graphiql=True)
    async with serving(settings, clock) as service:
        caller = await service.principal("human", "ide-user")
        r = await service.client.request(method, "/graphql", content=BODY, headers={
            **caller.headers(), "Content-Type": "application/json"})  # fmt: skip
    assert r.status_code == 405, r.text
    assert r.json()["errors"][0]["extensions"] == {"code": "method_not_allowed"}
    assert r.headers["allow"] == "GET, HEAD, POST"


async def _never_sent() -> AsyncIterator[bytes]:
    """A body that is never to be read: reading it fails the request."""
    raise AssertionError("the body of a request refused for its method or media type was read")
    yield b""  # pragma: no cover - makes this an async generator


@pytest.mark.parametrize(
    ("method", "content_type", "coding", "status"),
    [
        ("GET", "application/json", None, 405),
        ("HEAD", "application/json", None, 405),
        ("PUT", "application/json", None, 405),
        ("POST", "text/plain", None, 415),
        ("POST", "application/json", "gzip", 415),
    ],
)
async def test_a_refused_method_or_media_type_is_answered_without_reading_the_body(
    human: Caller, method: str, content_type: str, coding: str | None, status: int
) -> None:
    """/graphql answers its 405 and 415 before reading a body, as /api/v1,
    /mcp and the lifecycle listener do (httpedgeaudit: the authentication
    layer read every /graphql body first, so a GET with a body over 64 KiB
    was 413, a declared body that never came left the request unanswered
    until --request-read-timeout, and `Expect: 100-continue` got its 100
    for a request already refused); docs/api.md: "a GET or HEAD never
    reads one"."""
    headers = {**human.headers(), "Content-Type": content_type}
    if coding is not None:
        headers["Content-Encoding"] = coding
    r = await human.client.request(method, "/graphql", content=_never_sent(), headers=headers)
    assert r.status_code == status, r.text
    if method != "HEAD":
        code = "method_not_allowed" if status == 405 else "unsupported_media_type"
        assert r.json()["errors"][0]["extensions"] == {"code": code}


@pytest.mark.parametrize(
    ("method", "content_type", "coding", "status"),
    [
        ("GET", "application/json", None, 405),
        ("POST", "text/plain", None, 415),
        ("POST", "application/json", "gzip", 415),
        ("POST", "application/json", None, 413),
    ],
)
async def test_a_body_over_64_kib_is_413_only_where_it_would_be_read(
    human: Caller, method: str, content_type: str, coding: str | None, status: int
) -> None:
    """Over the GraphQL body limit, a request refused for its method or media
    type keeps that refusal (it was 413, the body read first); a JSON POST
    is 413 as before."""
    headers = {**human.headers(), "Content-Type": content_type}
    if coding is not None:
        headers["Content-Encoding"] = coding
    r = await human.client.request(method, "/graphql", content=b" " * 100_000, headers=headers)
    assert r.status_code == status, r.text


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "Application/JSON", 'application/json;charset="UTF-8"',
     "application/json;"],
)  # fmt: skip
async def test_every_json_spelling_the_view_reads_is_held_to_64_kib(
    human: Caller, content_type: str
) -> None:
    """The authentication layer buffers exactly the bodies the view goes on
    to read (auth.py, `_graphql_reads_body`): one the view read that it let
    through unbuffered would have no limit at all (it was parsed whole, 400)."""
    headers = {**human.headers(), "Content-Type": content_type}
    r = await human.client.post("/graphql", content=b" " * 100_000, headers=headers)
    assert r.status_code == 413, r.text
    assert r.json()["errors"][0]["extensions"]["code"] == "payload_too_large"


async def test_two_content_types_are_refused_without_reading_the_body(human: Caller) -> None:
    """Two Content-Type headers are 400 before the body is read, as one
    refused media type is 415."""
    headers = [*human.headers().items(), ("Content-Type", "application/json"),
               ("Content-Type", "application/json")]  # fmt: skip
    for content in (_never_sent(), b" " * 100_000):
        r = await human.client.post("/graphql", content=content, headers=headers)
        assert r.status_code == 400, r.text
        assert r.json()["errors"][0]["extensions"]["code"] == "invalid_request"
