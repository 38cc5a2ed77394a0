"""A subscribe's payload is held to the 64 KiB body limit as sent
(schema/websocket.oversized_subscribe, docs/graphql.md "Limits"), whatever
its operation id: the frame is read leniently for its type and id, and an
id of more than 1,024 characters was not read, so the frame went to the
strict parser and ran (no check after it since ba4cf7b), a payload of up to
the 1 MiB frame bound taken where POST /graphql answers 413."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import Caller, Service
from tests.live_support import graphql_ws, running
from waypost.http.auth import GRAPHQL_BODY_LIMIT
from waypost.schema.websocket import RefusedPayload, oversized_subscribe

QUERY = "query ($id: String!) { project(id: $id) { id } }"


def _frame(operation_id: str, pad: int) -> str:
    payload = (
        '{"query": "' + QUERY.replace('"', '\\"') + '", "variables": {"id": "' + "x" * pad + '"}}'
    )
    return '{"id": "' + operation_id + '", "type": "subscribe", "payload": ' + payload + "}"


@pytest.mark.parametrize("id_length", [1, 1024, 1025, 4000])
def test_an_oversized_subscribe_is_refused_whatever_the_length_of_its_id(id_length: int) -> None:
    refused = oversized_subscribe(_frame("i" * id_length, 2 * GRAPHQL_BODY_LIMIT).encode())
    assert refused is not None, "the oversized payload was let through to run"
    assert refused["id"] == "i" * id_length
    assert isinstance(refused["payload"], RefusedPayload)
    assert refused["payload"].refusal.code == "payload_too_large"


async def test_an_oversized_subscribe_with_a_long_id_is_answered_payload_too_large(
    service: Service, human: Caller, project: str
) -> None:
    operation_id = "i" * 1100
    async with running(service) as base, graphql_ws(base, human.token) as client:
        await client.ws.send(_frame(operation_id, 2 * GRAPHQL_BODY_LIMIT))
        message = await asyncio.wait_for(client.receive(), 10)
    assert (message["id"], message["type"]) == (operation_id, "error"), str(message)[:300]
    assert message["payload"][0]["extensions"]["code"] == "payload_too_large"
