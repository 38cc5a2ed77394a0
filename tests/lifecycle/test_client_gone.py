"""A client that hangs up mid-body is logged as gone (499), as on the public
listener (docs/operations.md: "A client that hangs up mid-request is logged
as `499`"), never as a 400 that no one received (lifecyclejourney: the
lifecycle listener answered `truncated_body` to the closed socket and its
access line and metrics counted a `400`)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from tests.conftest import Service
from tests.lifecycle.support import Lifecycle, Member, memo
from waypost.lifecycle_http import create_lifecycle_app
from waypost.lifecycle_http.verifiers import WaypostTokenVerifier
from waypost.observe.logs import FIELDS


def scope_for(member: Member, length: int) -> dict[str, Any]:
    headers = {
        **member.headers("gone-1"),
        "Content-Type": "application/json",
        "Content-Length": str(length),
        "Host": "lifecycle.test",
    }
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/decisions",
        "raw_path": b"/v1/decisions",
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8081),
    }


async def test_a_client_gone_mid_body_is_logged_499_and_writes_nothing(
    lifecycle: Lifecycle, author: Member, service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="waypost")
    app = create_lifecycle_app(service.rt, WaypostTokenVerifier(service.rt))
    raw = json.dumps({"memo": memo()}).encode()
    messages = [
        {"type": "http.request", "body": raw[:10], "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope_for(author, len(raw)), receive, send)

    assert not [m for m in sent if m["type"] == "http.response.start"], sent
    lines = [getattr(r, FIELDS) for r in caplog.records if r.name == "waypost.lifecycle.access"]
    assert [(x["route"], x["status"]) for x in lines] == [("/v1/decisions", 499)]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert await lifecycle.count("lifecycle_memos") == 0
