"""Strict request handling (service contract sections 2 and 13): every bad input
is a 4xx with the one error envelope and the offending field named."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import httpx
import msgspec
import pytest

from tests.conftest import Caller, Service
from tests.tasks_support import error
from waypost.decoding import convert, decimal_integer, parse_json, refuse_nul
from waypost.errors import InvalidRequest
from waypost.resolvers.projects import policy
from waypost.rest.routing import BODY_LIMIT

BASE = "/api/v1/projects/demo"
POLICY = f"{BASE}/policy"


def assert_error(r: httpx.Response, status: int, code: str, field: str | None = None) -> dict:
    """The response is the one error envelope with `code`; returns its details."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details"}, error
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    if field is not None:
        assert error["details"].get("field") == field, error
    details: dict = error["details"]
    return details


async def raw_patch(caller: Caller, body: bytes, **headers: str) -> httpx.Response:
    h = {**caller.headers("raw-key"), "Content-Type": "application/json", **headers}
    return await caller.client.patch(POLICY, content=body, headers=h)


# -- unknown fields, duplicates, non-finite numbers, types, truncation ---------


async def test_unknown_top_level_field_names_the_field(human: Caller, project: str) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1, "rules": "x", "colour": "red"})
    assert_error(r, 400, "invalid_request", "colour")


class _Inner(msgspec.Struct, forbid_unknown_fields=True):
    a: int


class _Outer(msgspec.Struct, forbid_unknown_fields=True):
    inner: _Inner
    items: list[_Inner] = []


def decode_body(raw: bytes, model: type[Any]) -> Any:
    """A body decoded as a REST route decodes it (rest/routing.call_for)."""
    value = parse_json(raw)
    body = convert(value, model)
    refuse_nul(value)
    return body


def test_unknown_nested_field_is_named_by_its_json_path() -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode_body(b'{"inner": {"a": 1}, "items": [{"a": 1}, {"a": 2, "b": 3}]}', _Outer)
    assert caught.value.details["field"] == "items[1].b"
    assert caught.value.message == "Object contains unknown field `b` (this object takes a)"


@pytest.mark.parametrize(
    ("body", "field", "taken"),
    [
        # a flattened key is a key of the object it is written in, not of
        # the field its first part names (REST listed inner's, MCP the tool's)
        (b'{"inner": {"a": 1}, "inner.a": 1}', "inner.a", "inner, items"),
        (b'{"inner": {"a": 1}, "items[0]": 1}', "items[0]", "inner, items"),
        (b'{"inner": {"a": 1, "b[0]": 1}}', "inner.b[0]", "a"),
        # a key clipped to 40 characters and "..." is told them too
        (b'{"inner": {"a": 1, "' + b"k" * 41 + b'": 1}}', "inner." + "k" * 40 + "...", "a"),
    ],
)
def test_an_unknown_key_is_told_the_fields_of_the_object_it_is_in(
    body: bytes, field: str, taken: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode_body(body, _Outer)
    assert caught.value.details["field"] == field
    assert caught.value.message.endswith(f"(this object takes {taken})"), caught.value.message


async def test_an_unknown_field_is_refused_with_the_fields_its_object_takes(
    human: Caller, project: str
) -> None:
    """A correction sent with the provenance `GET` shows (the server's
    `actor_id`, `actor_session_id`, `recorded_at`) was refused one member a
    round trip: the refusal now names the members the object takes, as an
    unknown query parameter's names the parameters (mcpjourney)."""
    path = f"/api/v1/projects/{project}/knowledge"
    r = await human.post(path, {"kind": "fact", "title": "t", "body": "b"})
    assert r.status_code == 201, r.text
    record = r.json()
    body = {"expected_revision": 1, "provenance": record["provenance"]}
    r = await human.patch(f"{path}/{record['id']}", body)
    assert_error(r, 400, "invalid_request", "provenance.actor_id")
    message = r.json()["error"]["message"]
    assert message.endswith(
        "(this object takes source_submission_id, source_task_id, source_uri, summary)"
    ), message
    r = await human.patch(f"{path}/{record['id']}", {"expected_revision": 1, "colour": "red"})
    assert_error(r, 400, "invalid_request", "colour")
    assert "(this object takes applicability, body, " in r.json()["error"]["message"]


def test_wrong_nested_type_is_named_by_its_json_path() -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode_body(b'{"inner": {"a": true}}', _Outer)
    assert caught.value.details["field"] == "inner.a"


class _Picked(msgspec.Struct, forbid_unknown_fields=True):
    mode: Literal["any", "human", "none"] | None = None
    items: Annotated[list[Literal["a", "b"]], msgspec.Meta(max_length=5)] = []


def test_a_value_outside_an_enum_is_told_the_values_taken() -> None:
    """msgspec says `Invalid enum value 'bogus'`: the caller learnt neither
    what was wrong with it nor what to send (errmsgaudit)."""
    for raw, field, values in ((b'{"mode": "bogus"}', "mode", "any, human, none"),
                               (b'{"items": ["a", "c"]}', "items[1]", "a, b")):  # fmt: skip
        with pytest.raises(InvalidRequest) as caught:
            decode_body(raw, _Picked)
        assert caught.value.details["field"] == field
        assert caught.value.message == f"{field} must be one of {values}"


async def test_a_policy_review_mode_outside_its_values_names_them(
    human: Caller, project: str
) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1, "review_mode": "bogus_value"})
    assert_error(r, 400, "invalid_request", "review_mode")
    assert r.json()["error"]["message"] == "review_mode must be one of any, human, none"


async def test_duplicate_top_level_key_is_refused(human: Caller, project: str) -> None:
    r = await raw_patch(human, b'{"expected_revision": 1, "rules": "a", "rules": "b"}')
    assert_error(r, 400, "invalid_request", "rules")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"a": {"b": 1, "b": 2}}', "a.b"),
        (b'{"a": [{"x": 1}, {"x": 1, "x": 2}]}', "a[1].x"),
        (b'[{"k": 1, "k": 1}]', "[0].k"),
        (b'{"k": 1, "k": 2}', "k"),
    ],
)
def test_nested_duplicate_key_is_named_by_its_json_path(raw: bytes, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_json(raw)
    assert caught.value.details["field"] == field


def test_a_refusal_is_kept_by_its_own_thread_while_another_parses(monkeypatch: Any) -> None:
    """parse_json's decoder is built once and its hooks note refusals in a
    list per thread (storecpu): a document parsed on another thread between
    a hook's marker and its note must not take the note, or the refused
    document is accepted with the marker as a value (review80)."""
    import threading

    from waypost import decoding

    marked, resume = threading.Event(), threading.Event()
    made = decoding._Refused
    refusing = threading.current_thread()  # replaced below by the refusing thread

    class Paused(made):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            if threading.current_thread() is refusing:
                marked.set()
                assert resume.wait(10)

    monkeypatch.setattr(decoding, "_Refused", Paused)
    outcome: list[Any] = []

    def refuse() -> None:
        try:
            outcome.append(parse_json(b'{"k": 1, "k": 2}'))
        except InvalidRequest as refused:
            outcome.append(refused.details)

    refusing = threading.Thread(target=refuse)
    refusing.start()
    assert marked.wait(10)
    assert parse_json(b'{"ok": [1, 2.5]}') == {"ok": [1, 2.5]}  # here, meanwhile
    resume.set()
    refusing.join(10)
    assert outcome == [{"field": "k"}]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
async def test_non_finite_number_is_refused_naming_the_field(
    human: Caller, project: str, literal: str
) -> None:
    r = await raw_patch(human, f'{{"expected_revision": {literal}, "rules": "x"}}'.encode())
    assert_error(r, 400, "invalid_request", "expected_revision")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1e' + b"9" * 200_000 + b"}",
        b'{"' + b"k" * 50_000 + b'": 1, "' + b"k" * 50_000 + b'": 2}',
    ],
)
def test_a_refusal_quotes_at_most_a_few_characters_of_the_body(raw: bytes) -> None:
    """A number of 200,000 digits was echoed whole in the 400's message."""
    with pytest.raises(InvalidRequest) as caught:
        parse_json(raw)
    assert len(caught.value.message) < 80, caught.value.message[:100]


async def test_a_long_unknown_key_is_named_in_a_few_characters(human: Caller, project: str) -> None:
    """A 120 KB unknown key came back whole, twice: in the message and as the
    field; so did one under a refused value."""
    key = "k" * 120_000
    for raw in (f'{{"expected_revision": 1, "{key}": 1}}', f'{{"{key}": {{"a": NaN}}}}',
                f'{{"expected_revision": 1, "a`{key}": 1}}'):  # fmt: skip
        r = await raw_patch(human, raw.encode())
        error = r.json()["error"]
        assert (r.status_code, error["code"]) == (400, "invalid_request")
        field = error["details"]["field"]
        assert "k" * 38 + "..." in field and len(field) < 50, field
        assert len(r.content) < 400, r.content[:200]
    # a value msgspec quotes in its message (an enum's)
    r = await raw_patch(human, f'{{"expected_revision": 1, "review_mode": "{key}"}}'.encode())
    assert r.status_code == 400 and len(r.content) < 500, r.content[:200]
    key = "k" * 20_000  # (httpx takes URLs up to 64 KB)
    tasks = f"/api/v1/projects/{project}/tasks"
    for query in (f"{key}=1&{key}=2", f"a%60{key}=1", f"status={key}"):
        r = await human.client.get(f"{tasks}?{query}", headers=human.headers())
        assert r.status_code == 400 and len(r.content) < 500, r.content[:200]


async def test_a_long_id_in_a_path_is_named_in_a_few_characters(
    human: Caller, project: str
) -> None:
    """A 404 echoed an id of any length whole (10 KB in, 10 KB out); no
    record's id is longer than 64 characters, nor its global id than 128."""
    long_id = "t" * 10_000
    for path in (f"/api/v1/projects/{project}/tasks/{long_id}", f"/api/v1/projects/{long_id}",
                 f"/api/v1/projects/{project}/decisions/{long_id}"):  # fmt: skip
        r = await human.client.get(path, headers=human.headers())
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
        assert len(r.content) < 500, r.content[:200]
        named = next(v for k, v in r.json()["error"]["details"].items() if k.endswith("_id"))
        assert named == "t" * 128 + "..."
    # an id of a real length is echoed whole
    r = await human.client.get(
        f"/api/v1/projects/{project}/tasks/{'t' * 64}", headers=human.headers()
    )
    assert r.json()["error"]["details"]["task_id"] == "t" * 64


def test_non_finite_number_deep_in_a_document_is_named() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_json(b'{"a": [1, {"b": NaN}]}')
    assert caught.value.details["field"] == "a[1].b"


async def test_integer_beyond_64_bits_is_refused(human: Caller, project: str) -> None:
    r = await raw_patch(human, b'{"expected_revision": 99999999999999999999999, "rules": "x"}')
    assert_error(r, 400, "invalid_request", "expected_revision")


async def test_boolean_where_an_integer_is_expected_is_refused(human: Caller, project: str) -> None:
    r = await human.patch(POLICY, {"expected_revision": True, "rules": "x"})
    assert_error(r, 400, "invalid_request", "expected_revision")


async def test_integer_where_a_boolean_is_expected_is_refused(human: Caller, project: str) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1, "agent_rule_editing": 1})
    assert_error(r, 400, "invalid_request", "agent_rule_editing")


async def test_float_where_an_integer_is_expected_is_refused(human: Caller, project: str) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1.0, "rules": "x"})
    assert_error(r, 400, "invalid_request", "expected_revision")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expected_revision": 1, "rules": 5}, "rules"),
        ({"expected_revision": "1", "rules": "x"}, "expected_revision"),
        ({"expected_revision": 1, "review_mode": "sometimes"}, "review_mode"),
        ({"expected_revision": 1, "rules": None}, "rules"),
        ({"expected_revision": 1, "lease_seconds": [900]}, "lease_seconds"),
        ({"rules": "x"}, "expected_revision"),
        ([1, 2], ""),
        ("text", ""),
    ],
)
async def test_wrong_type_is_refused_naming_the_field(
    human: Caller, project: str, body: Any, field: str
) -> None:
    r = await human.patch(POLICY, body)
    assert_error(r, 400, "invalid_request", field)


async def test_wrong_type_on_create_names_the_field(human: Caller) -> None:
    r = await human.post("/api/v1/projects", {"id": "ok", "name": 7})
    assert_error(r, 400, "invalid_request", "name")


@pytest.mark.parametrize(
    "raw",
    [b'{"expected_revision": 1, "rules": "ab', b'{"expected_revision": 1,', b"{", b"nul"],
)
async def test_truncated_body_is_refused(human: Caller, project: str, raw: bytes) -> None:
    r = await raw_patch(human, raw)
    details = assert_error(r, 400, "invalid_request", "")
    # where it breaks, in the service's own words: never the parser's exception text
    assert set(details) == {"field", "line", "column"}
    assert r.json()["error"]["message"] == (
        "the body is not a complete JSON document"
        f" (line {details['line']}, column {details['column']})"
    )


async def test_body_that_is_not_utf8_is_refused(human: Caller, project: str) -> None:
    r = await raw_patch(human, b'{"expected_revision": 1, "rules": "\xff\xfe"}')
    assert_error(r, 400, "invalid_request", "")


async def test_deeply_nested_body_is_a_400_not_a_crash(human: Caller, project: str) -> None:
    r = await raw_patch(human, b"[" * 100_000 + b"]" * 100_000)
    assert_error(r, 400, "invalid_request", "")


async def test_refused_body_changes_nothing(human: Caller, project: str) -> None:
    await human.patch(POLICY, {"expected_revision": 1, "rules": "x", "bogus": 1})
    r = await human.get(POLICY)
    assert r.json()["revision"] == 1 and r.json()["rules"] == ""


def test_json_takes_every_64_bit_integer_and_no_more() -> None:
    """Both ends of the range the contract allows (section 2: "integers
    outside the 64-bit range" are refused); -2^63 is 20 characters long."""
    lowest, highest = -(2**63), 2**63 - 1
    assert parse_json(b'{"a": -9223372036854775808}') == {"a": lowest}
    assert parse_json(b'{"a": 9223372036854775807}') == {"a": highest}
    for past in (b"-9223372036854775809", b"9223372036854775808"):
        with pytest.raises(InvalidRequest):
            parse_json(b'{"a": ' + past + b"}")


def test_a_query_integer_of_19_digits_is_read() -> None:
    assert decimal_integer("9223372036854775807") == 2**63 - 1
    assert decimal_integer("-9223372036854775808") == -(2**63)
    assert decimal_integer("1000000000000000000") == 10**18
    assert decimal_integer("9223372036854775808") is None


def test_a_refusal_names_the_first_refused_field_in_document_order() -> None:
    """Several refused values in one body (NaN, a duplicate key, a number
    past a float): the one named is the first as written."""
    with pytest.raises(InvalidRequest) as caught:
        parse_json(b'{"a": NaN, "b": {"c": 1, "c": 2}, "d": 1e999}')
    assert caught.value.details["field"] == "a"
    with pytest.raises(InvalidRequest) as caught:
        parse_json(b'{"x": 1, "b": {"c": 1, "c": 2}, "d": 1e999}')
    assert caught.value.details["field"] == "b.c"


# -- sizes --------------------------------------------------------------------


# The contract's number, not the module's constant: a test sized by
# BODY_LIMIT moved with it when it changed (mutantaudit7).
CONTRACT_BODY_MOST = 256 * 1024


async def test_body_of_exactly_256_kib_is_read(human: Caller, project: str) -> None:
    prefix = b'{"expected_revision": 1, "rules": "x", "provenance": "'
    raw = prefix + b"p" * (CONTRACT_BODY_MOST - len(prefix) - 2) + b'"}'
    assert len(raw) == CONTRACT_BODY_MOST
    r = await raw_patch(human, raw)
    # read and decoded: refused for the provenance size, not for the body size
    assert_error(r, 400, "invalid_request", "provenance")


async def test_body_over_256_kib_is_413(human: Caller, project: str) -> None:
    prefix = b'{"expected_revision": 1, "rules": "x", "provenance": "'
    raw = prefix + b"p" * (CONTRACT_BODY_MOST - len(prefix) - 1) + b'"}'
    assert len(raw) == CONTRACT_BODY_MOST + 1
    assert_error(await raw_patch(human, raw), 413, "payload_too_large")


async def test_streamed_chunked_body_over_the_limit_is_refused_without_reading_it_all(
    human: Caller, project: str
) -> None:
    sent = 0
    chunk = b" " * 1024

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(4096):  # 4 MiB offered
            sent += 1
            yield chunk

    headers = {**human.headers("chunked"), "Content-Type": "application/json"}
    r = await human.client.patch(POLICY, content=body(), headers=headers)
    assert "content-length" not in {k.lower() for k in r.request.headers}
    assert_error(r, 413, "payload_too_large")
    # the server stopped reading just past 256 KiB
    assert sent <= BODY_LIMIT // 1024 + 2


async def test_declared_oversized_body_is_refused_before_it_is_read(
    human: Caller, project: str
) -> None:
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(300):
            sent += 1
            yield b" " * 1024

    headers = {
        **human.headers("declared"),
        "Content-Type": "application/json",
        "Content-Length": str(300 * 1024),
    }
    r = await human.client.patch(POLICY, content=body(), headers=headers)
    assert_error(r, 413, "payload_too_large")
    assert sent == 0


async def test_a_content_length_that_is_no_number_is_400_naming_it(
    human: Caller, project: str
) -> None:
    """A `Content-Length` of "²" (a digit to str.isdigit(), not to HTTP) was a
    500: int() refused it. The HTTP parsers refuse such a header first;
    behind another server the app does."""
    headers = {**human.headers("no-number"), "Content-Type": "application/json"}
    sent = [(k.encode(), v.encode()) for k, v in headers.items()]
    for value in [b"\xb2", b"-1", b"12abc"]:
        h = [*sent, (b"content-length", value)]
        r = await human.client.patch(POLICY, content=b'{"expected_revision": 1}', headers=h)
        assert_error(r, 400, "invalid_request", "Content-Length")


# -- content type ---------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1"],
)
async def test_wrong_content_type_is_415(human: Caller, project: str, content_type: str) -> None:
    ct = {"Content-Type": content_type}
    r = await raw_patch(human, b'{"expected_revision": 1, "rules": "x"}', **ct)
    assert_error(r, 415, "unsupported_media_type")


async def test_body_without_content_type_is_415(human: Caller, project: str) -> None:
    h = human.headers("no-ct")
    r = await human.client.patch(POLICY, content=b'{"expected_revision": 1}', headers=h)
    assert_error(r, 415, "unsupported_media_type")


async def test_chunks_that_add_up_to_no_body_need_no_content_type(service: Service) -> None:
    """Only a body needs a type: chunked with no chunks was refused 415."""
    agent = await service.principal("agent")

    async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    def post(key: str, *parts: bytes) -> Any:
        headers = agent.headers(key)
        return agent.client.post("/api/v1/sessions", content=chunks(*parts), headers=headers)

    empty = await post("e")
    assert empty.status_code == 201, empty.text
    assert empty.request.headers["transfer-encoding"] == "chunked"
    assert_error(await post("f", b"{}"), 415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/json",
        'application/json; charset="UTF-8"',  # the same value quoted (RFC 9110, 8.3.2)
    ],
)
async def test_json_content_type_variants_are_accepted(
    human: Caller, project: str, content_type: str
) -> None:
    ct = {"Content-Type": content_type}
    r = await raw_patch(human, b'{"expected_revision": 1, "rules": "x"}', **ct)
    assert r.status_code == 200, r.text


# -- idempotency keys -----------------------------------------------------------


async def test_missing_idempotency_key_is_400(human: Caller, project: str) -> None:
    r = await human.client.patch(
        POLICY, json={"expected_revision": 1, "rules": "x"}, headers=human.headers()
    )
    assert_error(r, 400, "invalid_request", "Idempotency-Key")


@pytest.mark.parametrize(
    "key", [b"", b"has space", b"k" * 257, b"tab\tkey", "caf\u00e9".encode(), b"\x7f"]
)
async def test_invalid_idempotency_key_is_400(human: Caller, project: str, key: bytes) -> None:
    headers: dict[str, Any] = {
        **human.headers(),
        "Idempotency-Key": key,
        "Content-Type": "application/json",
    }
    r = await human.client.patch(
        POLICY, content=b'{"expected_revision": 1, "rules": "x"}', headers=headers
    )
    assert_error(r, 400, "invalid_request", "Idempotency-Key")


@pytest.mark.parametrize("key", ["k" * 256, "!", "~{}[]:;'\"<>?,./"])
async def test_idempotency_key_of_printable_ascii_up_to_256_is_accepted(
    human: Caller, project: str, key: str
) -> None:
    r = await human.patch(POLICY, {"expected_revision": 1, "rules": "x"}, key=key)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("key", [None, b"has space"])
async def test_a_refused_body_is_named_before_a_missing_or_invalid_key(
    human: Caller, project: str, key: bytes | None
) -> None:
    """A body decoding refuses is looked up under its key first (a retry
    after an upgrade gets its stored answer); without a usable key there is
    nothing to look up, and the body's refusal stands (rest/routing.py
    `_earlier_answer`), a 400 naming the body's field, never a fault."""
    headers: dict[str, Any] = {**human.headers(), "Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    r = await human.client.patch(
        POLICY, content=b'{"expected_revision": "one", "rules": "x"}', headers=headers
    )
    assert_error(r, 400, "invalid_request", "expected_revision")


async def test_action_post_without_idempotency_key_is_400(service: Service) -> None:
    agent = await service.principal("agent")
    r = await agent.client.post("/api/v1/sessions", headers=agent.headers())
    assert_error(r, 400, "invalid_request", "Idempotency-Key")


# -- action bodies ----------------------------------------------------------------


async def test_action_post_accepts_an_empty_body(service: Service) -> None:
    agent = await service.principal("agent")
    r = await agent.client.post("/api/v1/sessions", headers=agent.headers("empty-body"))
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("body", [b" \t\r\n", b"\x0b", b"\x0c", b"\x1c"])
async def test_an_action_body_of_json_whitespace_alone_is_empty(
    service: Service, body: bytes
) -> None:
    """JSON's whitespace is space, tab, CR and LF (RFC 8259): a body of a
    vertical tab or a form feed was read as empty (Python's `bytes.strip`)."""
    agent = await service.principal("agent")
    headers = {**agent.headers("ws-body"), "Content-Type": "application/json"}
    r = await agent.client.post("/api/v1/sessions", content=body, headers=headers)
    if body.strip(b" \t\r\n"):
        assert_error(r, 400, "invalid_request")
    else:
        assert r.status_code == 201, r.text


async def test_action_post_accepts_an_empty_object(service: Service) -> None:
    agent = await service.principal("agent")
    assert (await agent.post("/api/v1/sessions", {})).status_code == 201


async def test_action_post_refuses_unknown_fields(service: Service) -> None:
    agent = await service.principal("agent")
    assert_error(await agent.post("/api/v1/sessions", {"ttl": 5}), 400, "invalid_request", "ttl")


# -- query parameters and cursors ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "params", "field", "message"),
    [("/api/v1/projects/demo/tasks", {"bogus": "1"}, "bogus",
      "unknown query parameter bogus (this route takes cursor, limit, q, ready, status)"),
     (POLICY, {"cursor": "x"}, "cursor",
      "unknown query parameter cursor (this route takes none)"),
     ("/api/v1/projects/demo/tasks", {"z" * 500: "1"}, "z" * 40 + "...",
      f"unknown query parameter {'z' * 40}... (this route takes cursor, limit, q, ready, status)"),
     ("/api/v1/projects/demo/context", {}, "q", "q is required"),
     # the first refused in the request is named, as before (review51)
     ("/api/v1/projects/demo/tasks", {"zeta": "1", "alpha": "2"}, "zeta",
      "unknown query parameter zeta (this route takes cursor, limit, q, ready, status)"),
     ("/api/v1/projects/demo/tasks", {"limit": "abc", "bogus": "1"}, "limit",
      "limit must be a decimal integer"),
     # digits past 64 bits are an integer, only out of range (eventsjourney)
     ("/api/v1/projects/demo/events", {"after": str(2**63)}, "after",
      f"after must be at most {2**63 - 1}"),
     ("/api/v1/projects/demo/tasks", {"limit": str(-(2**63) - 1)}, "limit",
      f"limit must be at least {-(2**63)}"),
     ("/api/v1/projects/demo/events", {"after": "1.0"}, "after",
      "after must be a decimal integer"),
     # digits of another script are no decimal integer, not one out of range (review82)
     ("/api/v1/projects/demo/tasks", {"limit": "\u0661\u0662"}, "limit",
      "limit must be a decimal integer"),
     ("/api/v1/projects/demo/events", {"after": "-\u00b2"}, "after",
      "after must be a decimal integer")],
)  # fmt: skip
async def test_a_refused_query_parameter_is_told_in_a_query_strings_words(
    human: Caller, project: str, path: str, params: dict[str, str], field: str, message: str
) -> None:
    """They were refused in a body's words ("Object contains unknown field"),
    and an unknown one without the ones the route takes (errmsgaudit)."""
    r = await human.get(path, **params)
    assert_error(r, 400, "invalid_request", field)
    assert r.json()["error"]["message"] == message


@pytest.mark.parametrize("path", ["/api/v1/projects", f"{POLICY}/history"])
@pytest.mark.parametrize("cursor", ["!!!", "bm90IGpzb24", "WyJ4IiwieSJd", "W3RydWVd", "8J-Ygw"])
async def test_malformed_cursor_is_400(human: Caller, project: str, path: str, cursor: str) -> None:
    assert_error(await human.get(path, cursor=cursor), 400, "invalid_request", "cursor")


@pytest.mark.parametrize("position", [10**30, 2**63, -(2**63) - 1])
async def test_forged_cursor_with_a_huge_integer_is_400(
    human: Caller, project: str, position: int
) -> None:
    """Past SQLite's 64 bits a position would fail in the store: refused as
    a cursor no list wrote, from one past the largest (mutantaudit9)."""
    from waypost.pagination import encode_cursor

    r = await human.get(f"{POLICY}/history", cursor=encode_cursor(position))
    assert_error(r, 400, "invalid_request", "cursor")


@pytest.mark.parametrize("position", [2**63 - 1, -(2**63)])
async def test_a_cursor_at_the_ends_of_64_bits_is_read(
    human: Caller, project: str, position: int
) -> None:
    from waypost.pagination import encode_cursor

    r = await human.get(f"{POLICY}/history", cursor=encode_cursor(position))
    assert r.status_code == 200, r.text


async def test_a_list_without_limit_answers_50_items(human: Caller, project: str) -> None:
    """Section 13: "Defaults: list `limit` 50" (no test read a list without
    one; mutantaudit9)."""
    for n in range(51):
        r = await human.post(
            f"/api/v1/projects/{project}/knowledge", {"kind": "fact", "title": f"n{n}", "body": "b"}
        )
        assert r.status_code == 201, r.text
    page = (await human.get(f"/api/v1/projects/{project}/knowledge")).json()
    assert len(page["items"]) == 50 and page["next_cursor"] is not None
    rest = (
        await human.get(f"/api/v1/projects/{project}/knowledge", cursor=page["next_cursor"])
    ).json()
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None


@pytest.mark.parametrize("json_text", [' [ "2026-01-01T00:00:00.000Z" , "t" ] ', '\ufeff["a","b"]'])
async def test_a_cursor_whose_json_is_not_as_written_is_400(
    human: Caller, project: str, json_text: str
) -> None:
    """Spaces or a byte-order mark in the JSON passed: docs/api.md says a
    malformed cursor is one not as a list writes it, character for character."""
    from waypost.b64url import encode_b64url

    cursor = encode_b64url(json_text.encode())
    for path in ("/api/v1/projects/demo/tasks", "/api/v1/projects/demo/knowledge"):
        assert_error(await human.get(path, cursor=cursor), 400, "invalid_request", "cursor")
    query = 'query($c: String) { project(id: "demo") { tasks(after: $c) { totalCount } } }'
    r = await human.client.post(
        "/graphql", json={"query": query, "variables": {"c": cursor}}, headers=human.headers()
    )
    error = r.json()["errors"][0]
    assert error["extensions"]["code"] == "invalid_request", error
    assert error["extensions"]["field"] == "after", error


@pytest.mark.parametrize("path", ["/api/v1/projects", "/api/v1/projects/demo/knowledge"])
async def test_forged_cursor_with_a_lone_surrogate_is_400(
    human: Caller, project: str, path: str
) -> None:
    # base64 of ["\ud800"] and ["\ud800","x"]: JSON escapes that decode to no UTF-8 text
    cursor = "WyJcdWQ4MDAiXQ" if path.endswith("projects") else "WyJcdWQ4MDAiLCJ4Il0"
    assert_error(await human.get(path, cursor=cursor), 400, "invalid_request", "cursor")


async def test_an_empty_cursor_is_the_first_page_on_every_list(human: Caller, project: str) -> None:
    """docs/api.md: an empty `cursor=` means the first page, on every list route."""
    from tests.decisions_support import new_task, open_decision

    task_id = await new_task(human)
    decision = await open_decision(human, [task_id])
    r = await human.post(f"{BASE}/knowledge", {"kind": "fact", "title": "t", "body": "b"})
    assert r.status_code == 201, r.text
    knowledge_id = r.json()["id"]
    lists = [
        "/api/v1/projects",
        f"{POLICY}/history",
        f"{BASE}/tasks",
        f"{BASE}/tasks/{task_id}/revisions",
        f"{BASE}/tasks/{task_id}/checkpoints",
        f"{BASE}/tasks/{task_id}/submissions",
        f"{BASE}/knowledge",
        f"{BASE}/knowledge/{knowledge_id}",
        f"{BASE}/decisions",
        f"{BASE}/decisions/{decision['id']}",
    ]
    for path in lists:
        first, empty = await human.get(path), await human.get(path, cursor="")
        assert empty.status_code == 200, (path, empty.text)
        assert empty.json() == first.json(), path


def tampered_forms(cursor: str) -> list[str]:
    """A cursor a list made, with characters outside the alphabet that Python's
    base64 decoder silently skipped (four keep the padding whole)."""
    return [
        cursor[:4] + "$$$$" + cursor[4:],
        cursor + "****",
        "!!!!" + cursor,
        cursor[:8] + "...." + cursor[8:],
        cursor + "=",
    ]


async def test_a_tampered_cursor_is_400_not_the_page_it_was_made_from(
    human: Caller, project: str
) -> None:
    """Section 2: a malformed cursor is 400. Junk the decoder skipped read as
    the untouched cursor, and the page came back as if nothing was wrong."""
    for title in ("one", "two", "three"):
        assert (await human.post(f"{BASE}/tasks", {"title": title})).status_code == 201
    cursor = (await human.get(f"{BASE}/tasks", limit=1)).json()["next_cursor"]
    assert (await human.get(f"{BASE}/tasks", limit=1, cursor=cursor)).status_code == 200
    for tampered in tampered_forms(cursor):
        r = await human.get(f"{BASE}/tasks", limit=1, cursor=tampered)
        assert_error(r, 400, "invalid_request", "cursor")
        query = 'query ($c: String) { project(id: "demo") { tasks(first: 1, after: $c) { pageInfo'
        query += " { hasNextPage } } } }"
        errors = (await human.gql(query, {"c": tampered}))["errors"]
        assert [e["extensions"]["field"] for e in errors] == ["after"], (tampered, errors)


async def test_an_empty_cursor_is_an_unknown_parameter_where_nothing_pages_by_it(
    human: Caller, project: str
) -> None:
    """`cursor=` was dropped before the unknown-parameter check on every route:
    the event log (which pages by `after`) and the digest took it silently."""
    for path in ("/api/v1/me", f"{BASE}/digest", POLICY, f"{BASE}/events"):
        assert_error(await human.get(path, cursor=""), 400, "invalid_request", "cursor")


async def test_openapi_refuses_parameters_and_healthz_ignores_them(human: Caller) -> None:
    """docs/api.md: every /api/v1 route refuses an unknown parameter by name
    (openapi.json answered the document); a probe's query on /healthz is ignored."""
    assert_error(await human.get("/api/v1/openapi.json", x="1"), 400, "invalid_request", "x")
    assert (await human.get("/api/v1/openapi.json")).json()["openapi"].startswith("3.1")
    health = await human.client.get("/healthz", params={"x": "1"})
    assert health.status_code == 200 and health.json() == {"status": "ok"}


@pytest.mark.parametrize("value", ["1", "0", "TRUE", "False", "yes", "", " true"])
@pytest.mark.parametrize(
    ("path", "name"),
    [(f"{BASE}/knowledge", "include_shared"), (f"{BASE}/tasks", "ready"),
     (f"{BASE}/context", "include_shared")],
)  # fmt: skip
async def test_a_boolean_parameter_is_true_or_false_only(
    human: Caller, project: str, path: str, name: str, value: str
) -> None:
    """docs/api.md: a value of the wrong type is 400. msgspec's lax conversion
    read "1", "0" and "TRUE" as booleans, so `include_shared=1` opted in to
    other projects' records, an opt-in the contract makes explicit."""
    also = {"q": "x"} if path.endswith("/context") else {}
    assert_error(await human.get(path, **also, **{name: value}), 400, "invalid_request", name)
    for spelled in ("true", "false"):
        r = await human.get(path, **also, **{name: spelled})
        assert r.status_code == 200, (spelled, r.text)


@pytest.mark.parametrize(
    ("path", "name"),
    [(f"{BASE}/tasks", "status"), (f"{BASE}/knowledge", "kind"),
     (f"{BASE}/knowledge", "status"), (f"{BASE}/decisions", "status")],
)  # fmt: skip
async def test_a_filter_of_null_is_refused_not_read_as_no_filter(
    human: Caller, project: str, path: str, name: str
) -> None:
    """msgspec's lax conversion read the text "null" as no value, so
    `status=null` listed every status to a client that believed it filtered."""
    assert_error(await human.get(path, **{name: "null"}), 400, "invalid_request", name)


@pytest.mark.parametrize("limit", ["0", "201", "-1", "abc", "true", "2.0", "1e1", str(2**63)])
async def test_limit_outside_1_to_200_is_400(human: Caller, project: str, limit: str) -> None:
    assert_error(await human.get("/api/v1/projects", limit=limit), 400, "invalid_request", "limit")


async def test_an_integer_parameter_with_leading_zeros_is_the_number_it_writes(
    human: Caller, project: str
) -> None:
    """`limit=01` is decimal digits, as docs/api.md says an integer parameter is;
    it was refused in the decoder's words ("Expected `int | null`, got `str`")."""
    for name in ("second", "third"):
        await human.post("/api/v1/projects", {"id": name, "name": name}, key=f"p-{name}")
    padded = await human.get("/api/v1/projects", limit="002")
    assert padded.status_code == 200, padded.text
    assert padded.json() == (await human.get("/api/v1/projects", limit="2")).json()
    assert len(padded.json()["items"]) == 2
    events = await human.get(f"{BASE}/events", after="00", limit="0001")
    assert events.status_code == 200, events.text
    assert len(events.json()["items"]) == 1
    assert_error(await human.get("/api/v1/projects", limit="000"), 400, "invalid_request", "limit")
    # however many zeros lead (the length is judged without them)
    long_padded = await human.get("/api/v1/projects", limit="0" * 40 + "2")
    assert long_padded.json() == padded.json()
    for refused in ("-", "", "0" * 40, "00-1", "0x1", "٣"):
        r = await human.get("/api/v1/projects", limit=refused)
        assert_error(r, 400, "invalid_request", "limit")
    for refused in ("", "-", "+1"):  # `after` may be 0: these are still no number
        r = await human.get(f"{BASE}/events", after=refused)
        assert_error(r, 400, "invalid_request", "after")


async def test_unknown_query_parameter_is_400(human: Caller, project: str) -> None:
    r = await human.get("/api/v1/projects", sort="name")
    assert_error(r, 400, "invalid_request", "sort")


async def test_query_parameter_on_a_route_without_any_is_400(human: Caller) -> None:
    assert_error(await human.get("/api/v1/me", verbose="1"), 400, "invalid_request", "verbose")


async def test_repeated_query_parameter_is_400(human: Caller, project: str) -> None:
    r = await human.client.get("/api/v1/projects?limit=1&limit=2", headers=human.headers())
    assert_error(r, 400, "invalid_request", "limit")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/projects/demo/knowledge?q=%FF%FE", "q"),
        ("/api/v1/projects/demo/tasks?q=ok&cursor=%C3", "cursor"),
        ("/api/v1/projects/demo/context?q=%ED%A0%80", "q"),  # an encoded surrogate
        ("/api/v1/projects/demo/events/stream?after=%FF", "after"),
        ("/api/v1/projects?%FF=1", "\ufffd"),
    ],
)
async def test_a_query_parameter_that_is_not_utf_8_is_400_naming_it(
    human: Caller, project: str, path: str, field: str
) -> None:
    """It was decoded with U+FFFD in place of the bad bytes: a search for
    text nobody sent, answered as if it had been."""
    r = await human.client.get(path, headers=human.headers())
    assert_error(r, 400, "invalid_request", field)
    assert "UTF-8" in r.json()["error"]["message"]


async def test_percent_encoded_utf_8_in_a_query_is_read_as_sent(
    human: Caller, project: str
) -> None:
    created = await human.post(
        "/api/v1/projects/demo/knowledge", {"kind": "fact", "title": "中文 title", "body": "b"}
    )
    assert created.status_code == 201, created.text
    r = await human.client.get("/api/v1/projects/demo/knowledge?q=%E4%B8%AD%E6%96%87",
                               headers=human.headers())  # fmt: skip
    assert r.status_code == 200, r.text
    assert [k["title"] for k in r.json()["items"]] == ["中文 title"]


# -- one envelope, common headers, routes ----------------------------------------------


async def _error_responses(service: Service, human: Caller) -> list[httpx.Response]:
    """One response for each kind of refusal the REST shim makes."""
    c = service.client
    agent = await service.principal("agent")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    h = human.headers
    big = b"{" + b" " * BODY_LIMIT + b"}"
    return [
        await c.get("/api/v1/me"),  # 401
        await c.get("/nowhere"),  # 401 before routing
        await c.get("/nowhere", headers=h()),  # 404 unknown route
        await c.get("/api/v1/nowhere", headers=h()),
        await c.delete("/api/v1/projects", headers=h()),  # 405
        await human.get("/api/v1/projects/nope"),  # 404 record
        await agent.post("/api/v1/projects", {"id": "x", "name": "x"}),  # 403
        await c.get("/api/v1/me", headers={**h(), "Waypost-Session": "ses_none"}),  # 403
        await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"}),  # 409
        await human.patch(POLICY, {"expected_revision": 9, "rules": "x"}),  # 409
        await human.post("/api/v1/projects", {"id": "Bad Slug", "name": "x"}),  # 400
        await c.patch(POLICY, content=big, headers={**h("b"), "Content-Type": "application/json"}),
        await c.patch(POLICY, content=b"{}", headers={**h("c"), "Content-Type": "text/plain"}),
        await human.patch(POLICY, {"expected_revision": 1, "rules": "a"}, key="same"),
        await human.patch(POLICY, {"expected_revision": 2, "rules": "b"}, key="same"),  # 422
    ]


async def test_every_error_uses_the_one_envelope(service: Service, human: Caller) -> None:
    responses = await _error_responses(service, human)
    statuses = []
    for r in responses:
        if r.status_code < 400:
            continue
        statuses.append(r.status_code)
        body = r.json()
        assert set(body) == {"error"}, (r.request.url, body)
        assert set(body["error"]) == {"code", "message", "details"}
        assert isinstance(body["error"]["details"], dict)
        assert r.headers["content-type"].startswith("application/json")
    assert set(statuses) >= {400, 401, 403, 404, 405, 409, 413, 415, 422}


async def test_every_response_carries_no_store_and_nosniff(service: Service, human: Caller) -> None:
    responses = await _error_responses(service, human)
    responses += [
        await service.client.get("/healthz"),
        await human.get("/api/v1/me"),
        await human.get("/api/v1/openapi.json"),
        await service.client.head("/api/v1/me", headers=human.headers()),
        await service.client.post("/graphql", json={"query": "{ me { name } }"}),
        await service.client.post(
            "/graphql", json={"query": "{ me { name } }"}, headers=human.headers()
        ),
        await service.client.post(
            "/graphql", json=[{"query": "{ me { name } }"}], headers=human.headers()
        ),
    ]
    for r in responses:
        assert r.headers.get("cache-control") == "no-store", (r.request.url, r.status_code)
        assert r.headers.get("x-content-type-options") == "nosniff", r.request.url


async def test_unknown_route_is_404_in_the_envelope(human: Caller) -> None:
    assert_error(await human.get("/api/v1/unknown/route"), 404, "not_found")


async def test_wrong_method_is_405_with_allow(human: Caller) -> None:
    r = await human.client.put("/api/v1/projects", headers=human.headers())
    assert_error(r, 405, "method_not_allowed")
    assert "POST" in r.headers["allow"]


async def test_head_on_a_read_route_answers_like_get(human: Caller) -> None:
    r = await human.client.head("/api/v1/me", headers=human.headers())
    assert r.status_code == 200 and r.content == b""


async def test_healthz_answers_ok_without_a_token(service: Service) -> None:
    r = await service.client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


async def test_unexpected_fault_is_a_masked_500_envelope(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(rt: Any, project_id: str) -> dict[str, Any]:
        raise RuntimeError("secret path /var/lib/waypost.db")

    monkeypatch.setattr(policy, "get", broken)
    r = await human.get(POLICY)
    assert_error(r, 500, "internal")
    assert "secret" not in r.text and "RuntimeError" not in r.text
    assert r.headers["cache-control"] == "no-store"


async def test_huge_events_after_is_400_not_a_store_error(human: Caller, project: str) -> None:
    r = await human.get("/api/v1/projects/demo/events", after=str(10**30))
    assert_error(r, 400, "invalid_request", "after")


def test_parse_json_accepts_ordinary_documents() -> None:
    doc = {"a": [1, 2.5, -3, True, None, "é"], "b": {"c": {}}, "big": 2**63 - 1}
    assert parse_json(json.dumps(doc).encode()) == doc


async def test_a_lone_surrogate_escape_is_refused_with_its_path(
    human: Caller, project: str
) -> None:
    r = await raw_patch(human, b'{"expected_revision": 1, "rules": "a\\udc00b"}')
    assert_error(r, 400, "invalid_request", field="rules")


async def test_a_refusal_nested_under_a_lone_surrogate_key_has_an_encodable_path(
    human: Caller, project: str
) -> None:
    # the integer is refused first; its path runs through the surrogate key
    raw = b'{"expected_revision": 1, "x": {"\\ud800": 100000000000000000000000}}'
    r = await raw_patch(human, raw)
    assert_error(r, 400, "invalid_request", field="x.\\ud800")


async def test_a_paired_surrogate_escape_is_ordinary_text(human: Caller, project: str) -> None:
    r = await raw_patch(human, b'{"expected_revision": 1, "rules": "smile \\ud83d\\ude00"}')
    assert r.status_code == 200, r.text
    assert r.json()["rules"] == "smile \U0001f600"


async def test_a_lone_surrogate_in_a_graphql_string_is_refused(human: Caller, project: str) -> None:
    data = await human.gql(
        'mutation { policyUpdate(input: {idempotencyKey: "s1", projectId: "demo",'
        ' expectedRevision: 1, rules: "a\\ud800"}) { policy { revision }'
        " userErrors { code } } }"
    )
    # the GraphQL parser refuses the escape before any resolver runs
    assert data["data"] is None, data
    assert [e["extensions"]["code"] for e in data["errors"]] == ["invalid_request"], data


# -- NUL ---------------------------------------------------------------------------


def _written(service: Service) -> tuple[int, int, int]:
    conn = sqlite3.connect(service.db_path)
    try:
        return tuple(  # type: ignore[return-value]
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("events", "knowledge", "tasks")
        )
    finally:
        conn.close()


KNOWLEDGE, TASKS = "/api/v1/projects/demo/knowledge", "/api/v1/projects/demo/tasks"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (KNOWLEDGE, {"kind": "fact", "title": "t", "body": "a\x00b"}, "body"),
        (KNOWLEDGE, {"kind": "fact", "title": "t\x00", "body": "b"}, "title"),
        (TASKS, {"title": "t", "acceptance_criteria": ["ok", "x\x00"]}, "acceptance_criteria[1]"),
        (TASKS, {"title": "t", "description": "\x00"}, "description"),
    ],
)
async def test_text_holding_nul_is_a_400_naming_its_field_and_writes_nothing(
    service: Service, human: Caller, project: str, path: str, body: Any, field: str
) -> None:
    """NUL (U+0000) ends a string in C and in PostgreSQL's `text`: it was
    stored, with its event, in any text a body carried."""
    before = _written(service)
    r = await human.post(path, body)
    assert_error(r, 400, "invalid_request", field)
    assert "NUL" in r.json()["error"]["message"]
    assert _written(service) == before


async def test_a_nul_escape_in_policy_rules_is_refused(human: Caller, project: str) -> None:
    r = await raw_patch(human, b'{"expected_revision": 1, "rules": "a\\u0000b"}')
    assert_error(r, 400, "invalid_request", field="rules")
    # an escaped backslash before "u0000" is ordinary text
    r = await raw_patch(human, b'{"expected_revision": 1, "rules": "a\\\\u0000b"}')
    assert r.status_code == 200 and r.json()["rules"] == "a\\u0000b", r.text


@pytest.mark.parametrize("how", ["variables", "inline"])
async def test_nul_in_a_graphql_input_is_a_user_error_naming_its_field(
    service: Service, human: Caller, project: str, how: str
) -> None:
    before = _written(service)
    if how == "variables":
        data = await human.gql(
            'mutation($b: String!) { knowledgeCreate(input: {idempotencyKey: "n1",'
            ' projectId: "demo", kind: FACT, title: "t", body: $b, tags: ["ok"]})'
            " { userErrors { code field } } }",
            {"b": "a\x00"},
        )
        field = "body"
    else:
        data = await human.gql(
            'mutation { taskCreate(input: {idempotencyKey: "n2", projectId: "demo",'
            ' title: "t", acceptanceCriteria: ["x\\u0000"]}) { userErrors { code field } } }'
        )
        field = "acceptanceCriteria[0]"
    payload = next(iter(data["data"].values()))
    assert payload["userErrors"] == [{"code": "invalid_request", "field": field}], data
    assert _written(service) == before


async def test_nul_beside_another_fault_is_named_where_docs_api_says(
    human: Caller, project: str
) -> None:
    """docs/api.md: over REST the body's types, required fields and bounds
    come before NUL; over GraphQL the types and required fields come before
    it (graphql-core checks variables first) and the bounds after it."""
    r = await human.post(TASKS, {"title": "a\x00", "priority": "high"})
    assert_error(r, 400, "invalid_request", "priority")
    r = await human.post(TASKS, {"title": "a\x00", "priority": 9999999})
    assert_error(r, 400, "invalid_request", "priority")
    data = await human.gql(
        'mutation($t: String!) { taskCreate(input: {idempotencyKey: "n3", projectId: "demo",'
        " title: $t, priority: 9999999}) { userErrors { code field } } }",
        {"t": "a\x00"},
    )
    assert data["data"]["taskCreate"]["userErrors"] == [
        {"code": "invalid_request", "field": "title"}
    ]


# -- headers that take one value ----------------------------------------------------


@pytest.mark.parametrize("name", ["Idempotency-Key", "Content-Type", "Authorization"])
async def test_a_single_valued_header_sent_twice_is_400_naming_it(
    human: Caller, project: str, name: str
) -> None:
    """Taking the first of two Idempotency-Keys stored the receipt under one
    key while the client (or a proxy that merged them) meant the other."""
    values = {
        "Idempotency-Key": ["dup-a", "dup-b"],
        "Content-Type": ["application/json", "text/plain"],
        "Authorization": [f"Bearer {human.token}", "Bearer wp_other"],
    }[name]
    base = {**human.headers("dup-a"), "Content-Type": "application/json"}
    headers = [(k, v) for k, v in base.items() if k.lower() != name.lower()]
    headers += [(name, value) for value in values]
    r = await human.client.post(
        "/api/v1/projects", content=b'{"id": "dup", "name": "Dup"}', headers=headers
    )
    assert_error(r, 400, "invalid_request", name)
    assert (await human.get("/api/v1/projects/dup")).status_code == 404


async def test_a_session_header_sent_twice_is_400(service: Service) -> None:
    agent = await service.principal("agent")
    headers = [*agent.headers().items(), ("Waypost-Session", "a"), ("Waypost-Session", "b")]
    r = await agent.client.get("/api/v1/me", headers=headers)
    assert_error(r, 400, "invalid_request", "Waypost-Session")


async def test_graphql_refuses_two_content_types(human: Caller) -> None:
    headers = [
        *human.headers().items(),
        ("Content-Type", "application/json"),
        ("Content-Type", "text/plain"),
    ]
    r = await human.client.post(
        "/graphql", content=b'{"query": "{ me { name } }"}', headers=headers
    )
    assert r.status_code == 400
    [error] = r.json()["errors"]
    assert error["extensions"] == {"code": "invalid_request", "field": "Content-Type"}


async def test_spaces_around_a_header_value_are_not_part_of_it(
    service: Service, human: Caller, project: str
) -> None:
    """RFC 9110 5.5: `Idempotency-Key: k ` is the key `k` (httptools, which
    `serve` runs, hands the spaces over; h11 drops them)."""
    body = b'{"expected_revision": 1, "rules": "x"}'
    sent = []
    for key in (b"k-spaced \t", b" k-spaced"):
        headers = {**human.headers(), "Idempotency-Key": key, "Content-Type": "application/json "}
        sent.append(await human.client.patch(POLICY, content=body, headers=headers))
    assert [r.status_code for r in sent] == [200, 200], sent[0].text
    assert sent[1].headers.get("idempotent-replayed") == "true"
    agent = await service.agent()
    assert agent.session_id is not None
    headers = {**agent.headers(), "Waypost-Session": f"{agent.session_id}  "}
    assert (await agent.client.get("/api/v1/me", headers=headers)).status_code == 200


async def test_every_rest_answer_says_the_services_time(
    service: Service, human: Caller, project: str
) -> None:
    """`Waypost-Now`, as GraphQL answers carry it: the service's clock (here
    a test clock days away from the machine's), on answers and refusals."""
    ok = await human.get(f"/api/v1/projects/{project}")
    refused = await human.get("/api/v1/projects/nope")
    assert (ok.status_code, refused.status_code) == (200, 404)
    assert ok.headers["Waypost-Now"] == refused.headers["Waypost-Now"] == service.clock.iso()
    document = await human.get("/api/v1/openapi.json")
    refused = await human.get("/api/v1/openapi.json?x=1")
    assert (document.status_code, refused.status_code) == (200, 400)
    assert document.headers["Waypost-Now"] == refused.headers["Waypost-Now"] == service.clock.iso()


async def test_rest_names_a_decoding_fault_before_a_bad_key_and_a_bad_key_before_a_rule(
    human: Caller, project: str
) -> None:
    """api.md, Requests: over REST a bad `Idempotency-Key` is named after a
    fault the body's decoding finds (a type, a bound, a missing field, NUL),
    and before a rule the operation checks itself (a blank title), which
    runs only after the key's receipt was looked for (Idempotency)."""
    for body in ({"title": "x" * 201}, {}, {"title": 5}, {"title": "a\u0000"}):
        r = await human.post(f"{BASE}/tasks", body, key="bad key")
        assert error(r)[::2] == (400, {"field": "title"}), (body, r.text)
    r = await human.post(f"{BASE}/tasks", {"title": " "}, key="bad key")
    assert error(r)[::2] == (400, {"field": "Idempotency-Key"}), r.text


async def test_an_action_body_of_whitespace_is_a_body_that_needs_its_content_type(
    service: Service,
) -> None:
    """api.md, Requests: an action POST takes nothing at all without a
    `Content-Type`; whitespace alone is taken as an empty body only when
    sent as `application/json` (without, it is a body of no JSON type: 415)."""
    agent = await service.agent()
    path = f"/api/v1/sessions/{agent.session_id}/heartbeat"
    plain = agent.headers("beat-nothing")
    r = await agent.client.post(path, headers=plain)
    assert r.status_code == 200, r.text
    r = await agent.client.post(path, headers=agent.headers("beat-ws"), content=b" \n")
    assert error(r)[:2] == (415, "unsupported_media_type")
    json_headers = {**agent.headers("beat-ws-json"), "Content-Type": "application/json"}
    r = await agent.client.post(path, headers=json_headers, content=b" \n")
    assert r.status_code == 200, r.text
