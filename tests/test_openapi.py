"""OpenAPI 3.1 at GET /api/v1/openapi.json, generated from the route table and
the request models the shim validates with."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from tests.conftest import Caller, Service
from waypost import rest
from waypost.rest import openapi
from waypost.rest.routing import Call, RestRoute, RouteTable

ALL_ROUTES = [r for t in rest.TABLES for r in t.routes]


@pytest.fixture
async def document(human: Caller) -> dict[str, Any]:
    r = await human.get("/api/v1/openapi.json")
    assert r.status_code == 200
    body: dict[str, Any] = r.json()
    return body


def resolve(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


async def test_document_needs_a_token(service: Service) -> None:
    assert (await service.client.get("/api/v1/openapi.json")).status_code == 401


async def test_document_is_openapi_3_1_with_bearer_security(document: dict[str, Any]) -> None:
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"] and document["info"]["version"]
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
    }
    assert document["security"] == [{"bearer": []}]


async def test_served_document_is_the_one_generated_from_the_route_table(
    document: dict[str, Any],
) -> None:
    assert document == msgspec.json.decode(msgspec.json.encode(openapi.build(rest.TABLES)))


@pytest.mark.parametrize("route", ALL_ROUTES, ids=lambda r: f"{r.method} {r.path}")
async def test_every_route_is_listed_with_its_request_schema(
    document: dict[str, Any], route: RestRoute
) -> None:
    op = document["paths"][route.path][route.method.lower()]
    assert str(route.status) in op["responses"]
    params = {(p["in"], p["name"]): p for p in op["parameters"]}
    for name in re.findall(r"{(\w+)}", route.path):
        assert params[("path", name)]["required"] is True
    assert op["responses"][str(route.status)]["headers"]["Waypost-Now"]["schema"]["format"] == (
        "date-time"
    )
    if route.is_mutation:
        assert params[("header", "Idempotency-Key")]["required"] is True
        assert "Idempotent-Replayed" in op["responses"][str(route.status)]["headers"]
    if route.body is not None:
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = resolve(document, ref)
        assert schema["title"] == route.body.__name__
        assert schema["additionalProperties"] is False
        expected_fields = set(route.body.__struct_fields__)  # type: ignore[attr-defined]
        assert set(schema["properties"]) == expected_fields
    elif route.is_mutation:
        assert op["requestBody"]["required"] is False
    if route.query is not None:
        names = {n for (where, n) in params if where == "query"}
        assert names == set(route.query.__struct_fields__)  # type: ignore[attr-defined]


async def test_the_event_stream_is_listed_though_it_is_no_table_route(
    document: dict[str, Any],
) -> None:
    from waypost.live import sse

    op = document["paths"][sse.PATH]["get"]
    assert "text/event-stream" in op["responses"]["200"]["content"]
    # a store or clock that cannot answer is 503 here too
    assert set(op["responses"]) == {"200", "400", "401", "403", "404", "429", "503"}
    params = {(p["in"], p["name"]) for p in op["parameters"]}
    assert {("path", "project"), ("query", "after"), ("header", "Last-Event-ID")} <= params


async def test_every_reference_resolves(document: dict[str, Any]) -> None:
    for ref in refs(document):
        assert resolve(document, ref) is not None, ref


async def test_operation_ids_are_unique(document: dict[str, Any]) -> None:
    ids = [op["operationId"] for item in document["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


async def test_errors_reference_the_one_envelope(document: dict[str, Any]) -> None:
    envelope = document["components"]["responses"]["Error"]["content"]["application/json"]
    # a named schema, so that a generated client has one error model, not one
    # per operation and status (codegenaudit: 1,125 copies)
    assert envelope["schema"] == {"$ref": "#/components/schemas/ErrorEnvelope"}
    schema = document["components"]["schemas"]["ErrorEnvelope"]
    assert schema["required"] == ["error"]
    assert schema["properties"]["error"]["required"] == ["code", "message", "details"]
    op = document["paths"]["/api/v1/projects/{project}/policy"]["patch"]
    for status in ("400", "401", "403", "404", "409", "413", "415", "422", "503"):
        assert op["responses"][status]["$ref"] == "#/components/responses/Error"


def test_a_route_appears_by_being_added_to_a_table() -> None:
    class WidgetCreate(msgspec.Struct, forbid_unknown_fields=True):
        label: str

    table = RouteTable("widgets")

    @table.post("/api/v1/widgets", body=WidgetCreate, status=201)
    async def create_widget(call: Call) -> dict[str, Any]:
        """Make a widget."""
        return {}

    doc = openapi.build([*rest.TABLES, table])
    op = doc["paths"]["/api/v1/widgets"]["post"]
    assert op["summary"] == "Make a widget." and "201" in op["responses"]
    assert doc["components"]["schemas"]["WidgetCreate"]["required"] == ["label"]


async def test_policy_patch_schema_carries_the_validation_limits(document: dict[str, Any]) -> None:
    schema = document["components"]["schemas"]["PolicyPatch"]
    assert schema["required"] == ["expected_revision"]
    assert schema["properties"]["expected_revision"]["minimum"] == 1
    assert schema["properties"]["lease_seconds"] == {
        "type": "integer",
        "minimum": 30,
        "maximum": 86400,
        "description": "An integer written without a fraction or exponent.",
    }
    assert set(schema["properties"]["review_mode"]["enum"]) == {"none", "human", "any"}


# -- what the document says of the shared headers and the stream (mutantaudit8) --


def _operations(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{method.upper()} {path}", op)
            for path, item in doc["paths"].items() for method, op in item.items()]  # fmt: skip


async def test_the_session_header_is_optional_everywhere(document: dict[str, Any]) -> None:
    """A request acts in a session when it carries `Waypost-Session`: never required."""
    for name, op in _operations(document):
        session = [p for p in op["parameters"] if p["name"] == "Waypost-Session"]
        assert session and session[0]["in"] == "header", name
        assert session[0]["required"] is False, name


async def test_the_idempotency_key_pattern_takes_1_to_256_printable_ascii(
    document: dict[str, Any], human: Caller, project: str
) -> None:
    """Contract section 2: `Idempotency-Key` of 1-256 printable ASCII; and the
    server takes what the document says."""
    keys = [p for _, op in _operations(document) for p in op["parameters"]
            if p["name"] == "Idempotency-Key"]  # fmt: skip
    assert keys
    for key in keys:
        assert key["required"] is True
        pattern = re.compile(key["schema"]["pattern"])
        assert pattern.fullmatch("!" * 256) and pattern.fullmatch("~")
        assert not pattern.fullmatch("x" * 257) and not pattern.fullmatch("")
        assert not pattern.fullmatch("a b")
    r = await human.post(f"/api/v1/projects/{project}/tasks", {"title": "k"}, key="k" * 256)
    assert r.status_code == 201, r.text


async def test_the_streams_positions_stop_at_64_bits(document: dict[str, Any]) -> None:
    """`Last-Event-ID` and `after` are positions of at most 2^63-1, as the
    server reads them (an empty `Last-Event-ID` is no header)."""
    op = document["paths"]["/api/v1/projects/{project}/events/stream"]["get"]
    header = next(p for p in op["parameters"] if p["name"] == "Last-Event-ID")
    pattern = re.compile(header["schema"]["pattern"])
    assert pattern.fullmatch(str(2**63 - 1)) and pattern.fullmatch("")
    assert not pattern.fullmatch("1" + "0" * 19)
    after = next(p for p in op["parameters"] if p["name"] == "after")
    assert after["schema"]["minimum"] == 0 and after["schema"]["maximum"] == 2**63 - 1
