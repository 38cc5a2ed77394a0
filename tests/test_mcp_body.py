"""POST /mcp bodies pass the REST JSON parser before the MCP SDK reads them:
a deeply nested body was a 500 (RecursionError in the SDK's json.loads), and
duplicate keys, NaN and integers past 64 bits were accepted."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from tests.conftest import Caller, MovableClock, Service
from tests.knowledge_support import create
from tests.mcp_support import MCP_HEADERS, messages_of, open_session
from waypost.errors import Unavailable
from waypost.mcp_server.backend import LocalBackend
from waypost.mcp_server.envelope import MESSAGE_LIMIT, Refusal
from waypost.mcp_server.http_checks import padding_stripped
from waypost.mcp_server.stdio import message_of_line


def _call(arguments: str) -> bytes:
    return (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call",'
        f' "params": {{"name": "digest", "arguments": {arguments}}}}}'
    ).encode()


@pytest.mark.parametrize(
    ("arguments", "words", "answer_id"),
    [
        ('{"x": ' + "[" * 5000 + "]" * 5000 + "}", "nests too deeply", None),
        ('{"project": "a"', "complete JSON document", None),
    ],
)
async def test_a_body_the_rest_parser_refuses_is_a_json_rpc_parse_error(
    human: Caller, arguments: str, words: str, answer_id: int | None
) -> None:
    """With the request's id when a lenient reading finds it (an error with
    `"id": null` leaves the official client waiting), else null."""
    r = await human.client.post(
        "/mcp", content=_call(arguments), headers={**human.headers(), **MCP_HEADERS}
    )
    assert r.status_code == 400, r.text
    answer = r.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == answer_id
    assert answer["error"]["code"] == -32700, answer
    assert words in answer["error"]["message"], answer
    assert r.headers["cache-control"] == "no-store"


async def test_a_byte_that_is_no_utf8_keeps_the_requests_id(human: Caller) -> None:
    """A Latin-1 letter in an argument: the parse error said `"id": null`, on
    which the official client waits for ever."""
    body = _call('{"title": "cafX"}').replace(b"X", b"\xe9")
    for sent in (body, b"\xef\xbb\xbf" + body):  # with a byte-order mark too, as json.loads takes
        headers = {**human.headers(), **MCP_HEADERS}
        r = await human.client.post("/mcp", content=sent, headers=headers)
        assert r.status_code == 400, r.text
        assert r.json() == {"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32700, "message": "the body is not valid UTF-8"}}  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "words", "where"),
    [
        ('{"project": "a", "project": "b"}', "duplicate key", "params.arguments.project"),
        ('{"limit": NaN}', "NaN", "params.arguments.limit"),
        ('{"expected_revision": 9223372036854775808}', "64-bit", "params.arguments"),
    ],
)
async def test_a_refused_value_in_the_params_is_invalid_params_and_the_session_goes_on(
    human: Caller, arguments: str, words: str, where: str
) -> None:
    """A value the strict parser refuses inside `params` (2**63 in an
    argument) was a parse error with HTTP 400, on which the official client
    dropped its whole session: it is JSON, so it is `-32602` naming it."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    r = await human.client.post("/mcp", content=_call(arguments), headers=headers)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["id"] == 1 and answer["error"]["code"] == -32602, answer
    message = answer["error"]["message"]
    assert message.startswith(f"Invalid params: {where}") and words in message, message
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert (await human.client.post("/mcp", json=ping, headers=headers)).status_code == 200
    # outside a live session it is no answer in one (the SDK's 400 for a well-formed call)
    outside = {**human.headers(), **MCP_HEADERS}
    r = await human.client.post("/mcp", content=_call(arguments), headers=outside)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32602, r.text


@pytest.mark.parametrize(
    "text",
    [
        '{"jsonrpc": "1.0", "id": 1, "method": "ping", "params": {"x": NaN}}',
        '{"jsonrpc": "2.0", "id": 1, "method": "nope", "params": {"x": NaN}}',
        '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params.x": NaN}',
    ],
)
async def test_a_refused_value_in_what_is_no_request_stays_a_parse_error(
    human: Caller, text: str
) -> None:
    """Only a request of a method this server has, in a well-formed envelope,
    has its params refused as such (the review found -32602 for a message
    with `jsonrpc` 1.0, an unknown method, a member named `params.x`)."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    r = await human.client.post("/mcp", content=text.encode(), headers=headers)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700, r.text


async def test_every_media_type_the_sdk_reads_as_json_passes_the_parser(human: Caller) -> None:
    """The SDK reads any `application/json; ...` as JSON: such a body must not
    skip the REST parser (a body nested 5,000 levels was its 500 again)."""
    deep = _call('{"x": ' + "[" * 5000 + "]" * 5000 + "}")
    for media in ("application/json; foo=bar", "Application/JSON; charset=latin-1"):
        headers = {**human.headers(), **MCP_HEADERS, "Content-Type": media}
        r = await human.client.post("/mcp", content=deep, headers=headers)
        assert r.status_code == 400, (media, r.text)
        assert r.json()["error"]["code"] == -32700


async def test_a_body_over_the_limit_is_413_with_its_id(human: Caller) -> None:
    """The 413 said `"id": null`, on which the official client waits for
    ever: the id is looked for as a parse error's is (within 960 KiB)."""
    many = json.dumps({"x": [{}] * 200_000})  # 800 KB of small objects (read by msgspec)
    for arguments, request_id in (
        (json.dumps({"x": "y" * (300 * 1024)}), 1),
        (many, 1),
        (json.dumps({"x": "y" * (970 * 1024)}), None),  # past the id search's bound
        # nested past msgspec's depth: the review found a 500
        ("[" * 50_000 + '"' + "y" * (250 * 1024) + '"' + "]" * 50_000, None),
    ):
        body = _call(arguments)
        headers = {**human.headers(), **MCP_HEADERS}
        r = await human.client.post("/mcp", content=body, headers=headers)
        assert r.status_code == 413, r.text
        assert r.json() == {"jsonrpc": "2.0", "id": request_id, "error": {
            "code": -32600, "message": "MCP bodies are limited to 278528 bytes"}}  # fmt: skip


@pytest.mark.parametrize(("extra", "answered"), [(0, {"result": {}}), (1, {"error": {
    "code": -32600, "message": "MCP bodies are limited to 278528 bytes"}})])  # fmt: skip
async def test_a_message_of_exactly_the_limit_is_read_and_one_byte_more_is_not(
    human: Caller, extra: int, answered: dict[str, Any]
) -> None:
    """The limit counts the body's bytes: a ping padded (with the whitespace
    JSON allows) to exactly 278,528 bytes is answered, one byte more is the
    call's own refusal (in a live session, as a refused argument is)."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    body = ping + b" " * (MESSAGE_LIMIT - len(ping) + extra)
    r = await human.client.post("/mcp", content=body, headers=headers)
    assert r.status_code == 200, r.text
    data = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert json.loads(data[0] if data else r.text) == {"jsonrpc": "2.0", "id": 1, **answered}


async def test_a_content_length_that_is_no_number_is_400(human: Caller) -> None:
    # "²" (0xB2) is a digit to str.isdigit(), not to HTTP: int() raised, a 500
    headers = {**human.headers(), **MCP_HEADERS}
    h = [*((k.encode(), v.encode()) for k, v in headers.items()), (b"content-length", b"\xb2")]
    r = await human.client.post("/mcp", content=_call("{}"), headers=h)
    assert r.status_code == 400, r.text
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "Content-Length must be decimal digits"}}  # fmt: skip


async def test_another_media_type_is_415_and_two_are_refused(human: Caller) -> None:
    """As on the REST routes and /graphql (contract, sections 2 and 14); the
    SDK answered a plain-text 400."""
    r = await human.client.post(
        "/mcp",
        content=b"not json",
        headers={**human.headers(), **MCP_HEADERS, "Content-Type": "text/plain"},
    )
    assert r.status_code == 415, r.text
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "send the message as application/json"}}  # fmt: skip
    headers = [*human.headers().items(), ("Accept", MCP_HEADERS["Accept"]),
               ("Content-Type", "application/json"), ("Content-Type", "text/plain")]  # fmt: skip
    r = await human.client.post("/mcp", content=_call("{}"), headers=headers)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"] == "send one Content-Type header, not several"


async def test_a_body_with_a_content_coding_is_415(human: Caller) -> None:
    """No coding is decoded: a plain body labelled gzip was served (200)."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    for coding in ["gzip", "br, identity"]:
        ping = b'{"jsonrpc": "2.0", "id": 3, "method": "ping"}'
        r = await human.client.post(
            "/mcp", content=ping, headers={**headers, "Content-Encoding": coding}
        )
        assert r.status_code == 415, r.text
        assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600,
            "message": "send the body without a content coding (no Content-Encoding)"}}  # fmt: skip


async def test_an_unknown_method_is_method_not_found_with_its_id(human: Caller) -> None:
    """The SDK read any method name it does not know as malformed parameters
    (-32602 "Invalid request parameters"); JSON-RPC's code is -32601."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    for request_id in (7, "seven"):
        body = {"jsonrpc": "2.0", "id": request_id, "method": "no/such", "params": {}}
        r = await human.client.post("/mcp", json=body, headers=headers)
        assert r.status_code == 200, r.text
        error = {"code": -32601, "message": "Method not found: no/such"}
        assert r.json() == {"jsonrpc": "2.0", "id": request_id, "error": error}


async def test_a_request_whose_params_mcp_refuses_is_told_which_field(human: Caller) -> None:
    """The SDK answered "Invalid request parameters" with an empty `data` (and
    logged its whole validation report); the field is named now, as for a bad
    initialize and over stdio."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    for params, named in (
        ({"arguments": {}}, "params.name"),
        ({"name": "digest", "arguments": [1]}, "params.arguments"),
    ):
        body = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": params}
        r = await human.client.post("/mcp", json=body, headers=headers)
        assert r.status_code == 200, r.text
        error = r.json()["error"]
        assert r.json()["id"] == 8 and error["code"] == -32602, r.text
        assert error["message"].startswith(f"Invalid params: {named}: "), r.text


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def test_params_nested_past_what_the_sdk_reads_are_told_where(
    human: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    """Past 255 levels (the parser takes about 1,000) the SDK answered
    "Invalid request parameters" naming nothing, and the root logger a
    WARNING with pydantic's report; over stdio too."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    call = '"tools/call", "params": {"name": "policy", "arguments": {"project": NESTED}}'
    deep = [
        (call.replace("NESTED", _nested(260)), "params.arguments.project.0.0."),
        ('"ping", "params": {"x": NESTED}'.replace("NESTED", _nested(300)), "params.x.0.0."),
    ]
    with caplog.at_level(logging.WARNING):
        for method_and_params, where in deep:
            body = '{"jsonrpc": "2.0", "id": 9, "method": ' + method_and_params + "}"
            r = await human.client.post("/mcp", content=body.encode(), headers=headers)
            assert r.status_code == 200, r.text
            answer = r.json()
            assert answer["id"] == 9 and answer["error"]["code"] == -32602, answer
            message = answer["error"]["message"]
            assert message.startswith(f"Invalid params: {where}"), message
            assert message.endswith(": nests more than 200 levels deep"), message
            line = message_of_line(body.encode())  # waypost mcp: the same refusal
            assert isinstance(line, Refusal) and line.as_json() == answer
    assert not [rec for rec in caplog.records if "Failed to validate" in rec.getMessage()]
    # within the bound, the argument's own check names it as before
    body = '{"jsonrpc": "2.0", "id": 10, "method": ' + call.replace("NESTED", _nested(150)) + "}"
    r = await human.client.post("/mcp", content=body.encode(), headers=headers)
    assert r.status_code == 200 and "nests more than" not in r.text, r.text
    assert "project must be of type string" in r.text, r.text  # (an event stream)


async def test_a_message_nested_too_deep_outside_params_is_refused_or_dropped(
    human: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    """A notification's params, a client's response, or a member beside
    `params`, nested past 255 levels: the SDK logged "Failed to validate ..."
    at WARNING on the root logger (and answered a request's "Invalid
    request parameters" naming nothing). A request is refused whole now,
    naming where; a notification or a response, which is answered nothing,
    is dropped with one line (an error answer to one ended the official
    client's /mcp session)."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    request = '{"jsonrpc": "2.0", "id": 12, "method": "ping", "extra": NESTED}'
    body = request.replace("NESTED", _nested(300)).encode()
    with caplog.at_level(logging.WARNING):
        r = await human.client.post("/mcp", content=body, headers=headers)
        assert r.status_code == 400, r.text
        answer = r.json()
        assert answer["id"] == 12 and answer["error"]["code"] == -32600, answer
        assert answer["error"]["message"].startswith("extra.0.0.")
        assert answer["error"]["message"].endswith(": nests more than 200 levels deep")
        line = message_of_line(body)  # waypost mcp: the same refusal
        assert isinstance(line, Refusal) and line.as_json() == answer
        unanswered = [
            ('{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"x": NESTED}}',
             "params.x.0.0."),
            ('{"jsonrpc": "2.0", "id": 5, "result": {"x": NESTED}}', "result.x.0.0."),
        ]  # fmt: skip
        for template, where in unanswered:
            body = template.replace("NESTED", _nested(230)).encode()
            r = await human.client.post("/mcp", content=body, headers=headers)
            assert r.status_code == 202 and r.content == b"", r.text
            assert message_of_line(body) is None
            said = [rec.getMessage() for rec in caplog.records]
            dropped = [x for x in said if x.startswith("a message was dropped unanswered")]
            assert len(dropped) >= 2 and all(where in x for x in dropped[-2:]), said
    lines = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.WARNING]
    assert not [said for said in lines if "Failed to validate" in said], lines
    dropped = [said for said in lines if said.startswith("a message was dropped unanswered")]
    assert len(dropped) == 4, lines  # two over each transport
    assert all("nests more than 200 levels deep" in said for said in dropped), dropped
    ping = {"jsonrpc": "2.0", "id": 13, "method": "ping"}
    r = await human.client.post("/mcp", json=ping, headers=headers)
    assert r.status_code == 200 and '"id":13,"result":{}' in r.text.replace(" ", ""), r.text


async def test_a_notification_unknown_or_malformed_is_dropped_with_at_most_one_line(
    human: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK logged either at WARNING on the root logger with pydantic's
    whole report ("8 validation errors for ClientNotification"). A method
    MCP does not have is ignored, as the protocol asks (new versions add
    notifications); params its schema refuses are one line naming the field."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    unknown = {"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": 1}}
    malformed = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"reason": 5}}
    with caplog.at_level(logging.DEBUG):
        for body in (unknown, malformed):
            r = await human.client.post("/mcp", json=body, headers=headers)
            assert r.status_code == 202 and r.content == b"", r.text
            assert message_of_line(json.dumps(body).encode()) is None  # waypost mcp
    lines = [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
    assert [rec.name for rec in lines] == ["waypost.mcp", "waypost.mcp"], lines
    for rec in lines:
        said = rec.getMessage()
        assert said.startswith("a notification its schema refuses was dropped"), said
        assert "notifications/cancelled: params.reason: Input should be a valid string" in said
    ping = {"jsonrpc": "2.0", "id": 11, "method": "ping"}
    r = await human.client.post("/mcp", json=ping, headers=headers)
    assert r.status_code == 200 and '"id":11,"result":{}' in r.text.replace(" ", ""), r.text


async def test_an_unknown_method_outside_a_live_session_gets_the_sdks_checks(
    human: Caller,
) -> None:
    """The session and headers are checked first, as for any method: an
    unknown or missing session is the SDK's 404 or 400 (a 404 is a client's
    signal to initialize again), not a -32601 that hides it."""
    body = {"jsonrpc": "2.0", "id": 8, "method": "no/such"}
    r = await human.client.post("/mcp", json=body, headers={**human.headers(), **MCP_HEADERS})
    assert r.status_code == 400 and "session" in r.text.lower(), r.text
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": "0" * 32}
    r = await human.client.post("/mcp", json=body, headers=headers)
    assert r.status_code == 404, r.text
    # in a live session, the SDK's header checks still come first
    live = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": await open_session(human)}
    for name, value, status in [("Accept", "*/*", 406), ("Accept", "application/json", 406),
                                ("Mcp-Protocol-Version", "1999-01-01", 400)]:  # fmt: skip
        r = await human.client.post("/mcp", json=body, headers={**live, name: value})
        assert r.status_code == status, (name, value, r.status_code, r.text)


async def test_a_refused_message_in_a_session_not_the_callers_is_the_sdks_404(
    service: Service, human: Caller
) -> None:
    """A message refused before the SDK (a key twice, an integer past 64
    bits, a body over the limit) with an ended, unknown or another
    principal's session id was answered 400 or 413: MCP answers a
    terminated session's requests 404, and the official client, which
    starts again on a 404, died on the 400 after a restart."""
    ended = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS}
    r = await human.client.delete("/mcp", headers={**headers, "Mcp-Session-Id": ended})
    assert r.status_code == 200, r.text
    other = await service.principal("agent", "neighbour")
    anothers = await open_session(other)
    bodies = [
        _call('{"project": "a", "project": "b"}'),
        _call('{"limit": 18446744073709551616}'),
        _call(json.dumps({"x": "y" * (300 * 1024)})),
    ]
    for session_id in (ended, "0" * 32, anothers):
        for body in bodies:
            r = await human.client.post(
                "/mcp", content=body, headers={**headers, "Mcp-Session-Id": session_id}
            )
            assert r.status_code == 404, (session_id, body[:60], r.status_code, r.text)
            assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "Session not found"}}  # fmt: skip
    # in a live session of the caller's own, each is still answered as itself
    mine = {**headers, "Mcp-Session-Id": await open_session(human)}
    statuses = [(await human.client.post("/mcp", content=b, headers=mine)).json() for b in bodies]
    assert [s["error"]["code"] for s in statuses] == [-32602, -32602, -32600], statuses


async def test_a_refused_message_in_a_live_session_gets_the_sdks_header_checks_first(
    human: Caller,
) -> None:
    """A refused argument, a body past the limit or a dropped notification
    was answered (200, 202) without the Accept and protocol version checks a
    valid message gets first (406, 400): the SDK's own answer now, and
    nothing the endpoint refused runs."""
    live = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": await open_session(human)}
    refused = [
        _call('{"limit": NaN}'),
        _call(json.dumps({"x": "y" * (300 * 1024)})),
        ('{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"x": '
         + _nested(230) + "}}").encode(),
    ]  # fmt: skip
    for body in refused:
        for name, value, status in [("Accept", "*/*", 406), ("Accept", "application/json", 406),
                                    ("Mcp-Protocol-Version", "1999-01-01", 400)]:  # fmt: skip
            r = await human.client.post("/mcp", content=body, headers={**live, name: value})
            assert r.status_code == status, (body[:60], name, value, r.status_code, r.text)
            error = r.json()["error"]
            assert error["code"] == -32600, r.text
            assert ("Not Acceptable" if status == 406 else "protocol version") in error["message"]
        r = await human.client.post("/mcp", content=body, headers=live)
        assert r.status_code in (200, 202), r.text  # with both checks passed: as before


async def test_an_initialize_is_not_held_to_the_protocol_version_refused_or_not(
    human: Caller,
) -> None:
    """The SDK checks no `MCP-Protocol-Version` on an `initialize` (that is
    how a version is agreed): a refused one in a live session is answered
    as a valid one would be (200), not with the version's 400 and a null id."""
    live = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": await open_session(human),
            "MCP-Protocol-Version": "1999-01-01"}  # fmt: skip
    hello = ('{"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {'
             '"protocolVersion": "2025-06-18", "capabilities": {"x": NaN},'
             ' "clientInfo": {"name": "test", "version": "1"}}}')  # fmt: skip
    r = await human.client.post("/mcp", content=hello.replace("NaN", "{}"), headers=live)
    assert r.status_code == 200, r.text  # a valid one, as the SDK answers it
    r = await human.client.post("/mcp", content=hello, headers=live)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == 3 and r.json()["error"]["code"] == -32602, r.text
    assert "params.capabilities.x" in r.json()["error"]["message"], r.text
    # a notification of that name (no id) is held to it, as the SDK holds it
    notice = '{"jsonrpc": "2.0", "method": "initialize", "params": {}}'
    r = await human.client.post("/mcp", content=notice, headers=live)
    assert r.status_code == 400 and "protocol version" in r.text, r.text


async def test_a_batch_is_refused_in_one_sentence(human: Caller) -> None:
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
    r = await human.client.post("/mcp", json=batch, headers={**human.headers(), **MCP_HEADERS})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == -32600 and "one JSON-RPC message per request" in error["message"]
    assert "validation" not in r.text.lower(), r.text


@pytest.mark.parametrize(
    ("message", "answer_id", "words"),
    [
        ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, None, "id must be"),
        ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, None, "id must be"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, None, "id must be"),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}, None, "id must be"),
        ({"jsonrpc": "1.0", "id": 3, "method": "tools/list"}, 3, 'jsonrpc must be "2.0"'),
        ({"id": 3, "method": "tools/list"}, 3, 'jsonrpc must be "2.0"'),
        ({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": [1]}, 3, "params"),
        ({"jsonrpc": "2.0", "id": 3, "method": 7}, 3, "method must be a string"),
        ({"jsonrpc": "2.0", "id": 3}, 3, "needs a method"),
        ("x", None, "a JSON-RPC message is a JSON object"),
        # a response's id is of the server's numbering: never echoed back
        ({"jsonrpc": "2.0", "id": 5, "result": 5}, None, "result must be an object"),
        ({"jsonrpc": "2.0", "id": 5, "error": {"code": "x"}}, None, "error must be an object"),
        # a client's own id of the SDK's placeholder name stands
        (
            {"jsonrpc": "2.0", "id": "server-error", "method": "x", "params": [1]},
            "server-error",
            "params must be an object",
        ),
    ],
)
async def test_a_message_that_is_not_json_rpc_is_invalid_request_with_its_id(
    human: Caller, message: object, answer_id: object, words: str
) -> None:
    """The SDK took a request whose id is null, true or 1.5 for a notification
    (202, the tool never ran, the client waited for ever), and answered other
    malformed envelopes with pydantic's report under the id "server-error"."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    r = await human.client.post("/mcp", json=message, headers=headers)
    assert r.status_code == 400, r.text
    answer = r.json()
    assert answer["id"] == answer_id and answer["error"]["code"] == -32600, answer
    assert words in answer["error"]["message"] and "pydantic" not in r.text, answer


async def test_the_sdks_own_errors_answer_with_a_null_id_and_the_services_headers(
    human: Caller,
) -> None:
    body = {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}
    unknown = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": "0" * 32}
    r = await human.client.post("/mcp", json=body, headers=unknown)
    assert r.status_code == 404, r.text
    assert r.json()["id"] is None and "server-error" not in r.text
    assert int(r.headers["content-length"]) == len(r.content)
    assert r.headers["cache-control"] == "no-store"
    # an answer as an event stream carries them too (the SDK said no-cache)
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    r = await human.client.post("/mcp", json=hello, headers={**human.headers(), **MCP_HEADERS})
    assert r.headers["content-type"].startswith("text/event-stream"), r.headers
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_a_fault_listing_resources_reaches_the_client_masked(
    human: Caller,
    project: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`resources/list` caught only the API's own refusals: any other fault
    went out as its text (a path, SQL) with JSON-RPC code 0, and nothing was
    logged."""

    async def failing(self: LocalBackend, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk I/O error at /srv/secret/waypost.db")

    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    monkeypatch.setattr(LocalBackend, "call", failing)
    body = {"jsonrpc": "2.0", "id": 3, "method": "resources/list", "params": {}}
    with caplog.at_level(logging.ERROR, "waypost"):
        r = await human.client.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200, r.text
    # answered as one server-sent event: `data: {...}`
    (data,) = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    error = json.loads(data)["error"]
    assert error["code"] == -32603 and error["message"] == "internal: internal error"
    assert "secret" not in r.text and "secret" in caplog.text


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
@pytest.mark.parametrize(
    ("name", "spelled"),
    [
        ("mcp-session-id", "Mcp-Session-Id"),
        ("mcp-protocol-version", "MCP-Protocol-Version"),
    ],
)
async def test_a_repeated_header_is_a_json_rpc_invalid_request(
    human: Caller, caplog: pytest.LogCaptureFixture, method: str, name: str, spelled: str
) -> None:
    """A repeated Mcp-Session-Id (any made-up ids) or MCP-Protocol-Version
    was read outside any handler: a 500 and an ERROR traceback for any
    caller with a token."""
    session_id = await open_session(human)
    given = {"mcp-session-id": session_id, "accept": MCP_HEADERS["Accept"],
             "mcp-protocol-version": "2025-06-18"}  # fmt: skip
    headers = [(k, v) for k, v in {**human.headers(), **MCP_HEADERS, **given}.items()]
    headers.append((name, given[name]))
    body = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping"}) if method == "POST" else None
    with caplog.at_level(logging.WARNING):
        r = await human.client.request(method, "/mcp", content=body, headers=headers)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == -32600 and f"send one {spelled} header" in error["message"]
    assert r.json()["id"] == (4 if method == "POST" else None)
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]


async def test_a_stream_asked_to_resume_is_told_that_streams_are_not_resumed(
    human: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    """GET /mcp with a Last-Event-ID: the SDK, which keeps no event store
    here, returned without an answer (uvicorn's plain-text 500 and an
    ERROR line) for any value; the session went on."""
    session_id = await open_session(human)
    headers = {**human.headers(), "Accept": "text/event-stream", "Mcp-Session-Id": session_id,
               "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
    with caplog.at_level(logging.WARNING):
        for last in ["5", "garbage", "\xe9".encode("latin-1")]:
            r = await human.client.get("/mcp", headers={**headers, "Last-Event-ID": last})
            assert r.status_code == 400, r.text
            assert r.headers["cache-control"] == "no-store"
            answer = r.json()
            assert answer["id"] is None and answer["error"]["code"] == -32600
            assert "does not resume streams" in answer["error"]["message"]
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    r = await human.client.post("/mcp", json=ping, headers=headers)
    assert r.status_code == 200 and '"id":7,"result":{}' in r.text.replace(" ", ""), r.text


async def test_accept_on_two_lines_is_one_accept_of_both(human: Caller) -> None:
    """Accept is a list (RFC 9110, 5.3): JSON on one line and the event
    stream on another mean both. The SDK read the first line only (406), and
    then a repeat was refused as if Accept were one value (400)."""
    session_id = await open_session(human)
    headers = [*human.headers().items(), ("Content-Type", "application/json"),
               ("Accept", "application/json"), ("Accept", "Text/Event-Stream"),
               ("Mcp-Session-Id", session_id)]  # fmt: skip
    body = json.dumps({"jsonrpc": "2.0", "id": 6, "method": "ping"})
    r = await human.client.post("/mcp", content=body, headers=headers)
    assert r.status_code == 200, r.text
    [data] = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert json.loads(data) == {"jsonrpc": "2.0", "id": 6, "result": {}}
    # one of the two is still not enough, on any number of lines
    headers = [h for h in headers if h[1] != "Text/Event-Stream"] + [("Accept", "*/*")]
    r = await human.client.post("/mcp", content=body, headers=headers)
    assert r.status_code == 406, r.text


async def test_an_unknown_tool_and_a_tools_list_cursor_are_invalid_params(human: Caller) -> None:
    """MCP 2025-06-18, server/tools: unknown tools are protocol errors (they
    were a tool result with `isError`); pagination: an invalid cursor SHOULD
    be -32602 (it was ignored and the whole list answered)."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "n" * 500, "arguments": {}}}  # fmt: skip
    r = await human.client.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == 5
    error = r.json()["error"]
    assert error["code"] == -32602 and error["message"].startswith("Unknown tool: nnn")
    assert len(error["message"]) < 120  # the name is clipped, not echoed
    # docs/mcp.md: clipped to 40 characters, and the message says where the names are
    assert error["message"] == "Unknown tool: " + "n" * 40 + "... (tools/list names the tools)"
    body = {"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"cursor": "garbage"}}
    r = await human.client.post("/mcp", json=body, headers=headers)
    assert r.json()["error"]["code"] == -32602 and "Invalid cursor" in r.text
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
    r = await human.client.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200 and '"name":"digest"' in r.text.replace(" ", ""), r.text


async def test_prompts_are_not_offered(human: Caller) -> None:
    """docs/mcp.md, Resources: "Prompts are not offered": the initialize answer
    names no prompts capability and `prompts/list` is a method this server
    does not have (mcpdocaudit)."""
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    r = await human.client.post("/mcp", json=hello, headers={**human.headers(), **MCP_HEADERS})
    [answer] = messages_of(r)
    assert set(answer["result"]["capabilities"]) <= {"experimental", "resources", "tools"}
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    body = {"jsonrpc": "2.0", "id": 9, "method": "prompts/list", "params": {}}
    r = await human.client.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200, r.text
    [listed] = messages_of(r)
    assert listed["id"] == 9 and listed["error"]["code"] == -32601, listed


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("http://evil.example", "127.0.0.1:8080", False),
        ("null", "127.0.0.1:8080", False),
        ("http://localhost.evil.example:8080", "127.0.0.1:8080", False),
        # a rebinding: the page's origin and the Host name the attacker's host
        ("http://evil.example:8080", "evil.example:8080", False),
        ("http://localhost:6274", "evil.example:8080", False),
        ("http://localhost:6274", "127.0.0.1:8080", True),
        ("http://127.0.0.2:6274", "localhost:8080", True),
        ("https://[::1]:6274", "[::1]:8080", True),
    ],
)
async def test_a_browser_request_is_served_only_from_loopback_to_loopback(
    human: Caller, origin: str, host: str, allowed: bool
) -> None:
    """MCP 2025-06-18, transports, "Security Warning": servers MUST validate
    the Origin header and answer 403 when it is present and invalid (DNS
    rebinding); any Origin was served."""
    headers = {**human.headers(), **MCP_HEADERS, "Origin": origin, "Host": host}
    body = {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    r = await human.client.post("/mcp", json=body, headers=headers)
    if allowed:
        assert r.status_code == 200, r.text
        return
    assert r.status_code == 403, r.text
    assert r.json()["id"] == 3 and r.json()["error"]["code"] == -32600
    assert "may not call this endpoint" in r.json()["error"]["message"]


async def test_media_types_are_case_insensitive(human: Caller) -> None:
    """RFC 9110, 8.3.1 (and contract section 14 for /api/v1 and /graphql):
    `Application/JSON` was 415 and `Accept: Application/JSON,
    Text/Event-Stream` 406, by the SDK's own comparison."""
    headers = {**human.headers(), "Content-Type": "Application/JSON",
               "Accept": "Application/JSON, Text/Event-Stream"}  # fmt: skip
    body = {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    r = await human.client.post("/mcp", content=json.dumps(body), headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["mcp-session-id"]


@pytest.mark.parametrize("method", ["resources/list", "resources/templates/list"])
async def test_a_resource_list_given_a_cursor_is_invalid_params(human: Caller, method: str) -> None:
    """Each resource list is one page too: a cursor is none this server gave
    (it was ignored and the whole list answered again, so a client that sent
    a stale cursor got every resource twice)."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    body = {"jsonrpc": "2.0", "id": 8, "method": method, "params": {"cursor": "bogus"}}
    r = await human.client.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == 8
    error = r.json()["error"]
    assert error["code"] == -32602
    assert error["message"].startswith(f"Invalid cursor: {method} answers every resource")
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": {}}
    r = await human.client.post("/mcp", json=body, headers=headers)
    assert r.status_code == 200 and '"result"' in r.text and '"id":9' in r.text, r.text


async def test_a_store_unreadable_while_authenticating_keeps_the_session(
    human: Caller, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clock (or the token rows) unreadable while a /mcp request was
    authenticated answered 503 in REST's shape, with no JSON-RPC id: in a
    live session the official client ended the whole session on it. In one
    now: 200, a tool call's a tool error, another request's a JSON-RPC
    error with its id, a notification's a 202; outside one the 503 with its
    `Retry-After`, in JSON-RPC; and the session goes on once it reads again."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "project_list", "arguments": {}}}  # fmt: skip

    def unreadable() -> datetime:
        raise Unavailable("the clock file holds no valid instant", retry_after=1)

    said = "unavailable: the clock file holds no valid instant"
    with monkeypatch.context() as m:
        m.setattr(clock, "now", unreadable)
        r = await human.client.post("/mcp", json=call, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["id"] == 7 and r.json()["result"]["isError"] is True, r.text
        assert r.json()["result"]["content"][0]["text"].startswith(said), r.text
        listing = {"jsonrpc": "2.0", "id": "l", "method": "tools/list"}
        r = await human.client.post("/mcp", json=listing, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["id"] == "l" and r.json()["error"]["code"] == -32603, r.text
        assert r.json()["error"]["message"].startswith(said), r.text
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 7}}  # fmt: skip
        r = await human.client.post("/mcp", json=cancel, headers=headers)
        assert r.status_code == 202, r.text
        # a client's response: never answered with its id (the server's numbering)
        response = {"jsonrpc": "2.0", "id": 14, "result": {}}
        r = await human.client.post("/mcp", json=response, headers=headers)
        assert r.status_code == 202 and not r.content, r.text
        outside = {k: v for k, v in headers.items() if k != "Mcp-Session-Id"}
        r = await human.client.post("/mcp", json=call, headers=outside)
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert r.json()["id"] == 7 and r.json()["result"]["isError"] is True, r.text
    r = await human.client.post("/mcp", json=call, headers=headers)
    assert r.status_code == 200, r.text
    [data] = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    answer = json.loads(data)
    assert answer["id"] == 7 and not answer["result"].get("isError"), data
    assert [p["id"] for p in answer["result"]["structuredContent"]["items"]] == [], data


async def test_cancels_that_meet_their_calls_answers_end_nothing(human: Caller) -> None:
    """A cancel that met its call's answer ended the whole session: the SDK
    asserted "Request already responded to", or a cancel that came while the
    answer was sent let its CancelledError out and the session's task group
    ended without a word (an audit: after 11 to 55 calls each cancelled a
    few milliseconds after it was sent). Cancels are taken here now: each
    call is answered, with its result or as cancelled, and the session goes on."""
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}

    async def call_and_cancel(request_id: int) -> str:
        call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": "project_list", "arguments": {}}}  # fmt: skip
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": request_id}}  # fmt: skip
        calling = asyncio.create_task(human.client.post("/mcp", json=call, headers=headers))
        for _ in range(request_id % 40):
            await asyncio.sleep(0)
        cancelled = await human.client.post("/mcp", json=cancel, headers=headers)
        assert cancelled.status_code == 202, cancelled.text
        answered = await calling
        assert answered.status_code == 200, answered.text
        [data] = [line[6:] for line in answered.text.splitlines() if line.startswith("data: ")]
        answer = json.loads(data)
        if "error" in answer:  # as the SDK answered a cancel
            assert answer["error"]["message"] == "Request cancelled", answer
            return "cancelled"
        result = answer["result"]
        if result.get("isError"):
            assert result["content"][0]["text"] == "Request cancelled", result
            return "cancelled"
        return "answered"

    seen = Counter([await call_and_cancel(n) for n in range(1, 401)])
    # both happen: cancels that came in time, and ones that came too late
    assert seen["cancelled"] and seen["answered"] and sum(seen.values()) == 400, seen
    ping = {"jsonrpc": "2.0", "id": "last", "method": "ping"}
    r = await human.client.post("/mcp", json=ping, headers=headers)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "uri",
    [
        "waypost://projects/de\tmo/policy",
        "waypost://projects/demo/policy\n",
        " waypost://projects/demo/digest ",
        "waypost://projects/demo/x/../policy",
        "waypost://projects/demo/policy\u0000",
        "waypost://projects/" + "x" * 5000 + "/policy",
    ],
)
async def test_a_resource_uri_is_held_to_its_pattern_as_sent(human: Caller, uri: str) -> None:
    """The SDK parses a URI into a URL before the server sees it, dropping
    tabs and line breaks, trimming its ends and resolving `..`: each of these
    read demo's policy (the same id as a tool argument is refused), and the
    refusal echoed the URI whole (5 KB here)."""
    r = await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    assert r.status_code == 201, r.text
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    read = {"jsonrpc": "2.0", "id": 8, "method": "resources/read"}
    r = await human.client.post("/mcp", json={**read, "params": {"uri": uri}}, headers=headers)
    error = r.json()["error"]
    assert error["code"] == -32002, r.text
    assert error["message"].startswith(f"unknown resource {uri[:40]}")
    assert len(error["message"]) < 160
    # a scheme in any case is the same scheme (RFC 3986, 3.1)
    for sent in ("waypost://projects/demo/policy", "WAYPOST://projects/demo/policy"):
        r = await human.client.post("/mcp", json={**read, "params": {"uri": sent}}, headers=headers)
        [data] = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
        contents = json.loads(data)["result"]["contents"][0]
        assert contents["uri"] == "waypost://projects/demo/policy", r.text


def test_a_resource_uris_scheme_is_ascii_in_any_case() -> None:
    """RFC 3986's schemes are ASCII: Unicode case folding took a long s
    (U+017F) for an s (review38)."""
    from waypost.mcp_server.envelope import RESOURCE_URI

    assert RESOURCE_URI.fullmatch("WayPost://projects/demo/policy")
    assert RESOURCE_URI.fullmatch("waypo\u017ft://projects/demo/policy") is None


PING = b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}'
# a request this endpoint refuses for its params (a key twice) before the SDK sees it
TWICE = (b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call",'
         b' "params": {"name": "me", "arguments": {"a": 1, "a": 2}}}')  # fmt: skip


@pytest.mark.parametrize("padded", ["Mcp-Session-Id", "MCP-Protocol-Version"])
@pytest.mark.parametrize(("before", "after"), [("", " "), ("", "\t"), (" \t", "")])
async def test_a_padded_header_gets_one_verdict_for_a_valid_and_a_refused_request(
    service: Service, padded: str, before: str, after: str
) -> None:
    """Spaces and tabs around a header's value are not part of it (RFC 9110,
    5.5): the endpoint's own checks strip them (`header`), the SDK does not
    (httptools, which `serve` runs, hands them over; so does this client).
    docs/mcp.md says the SDK's verdict on the session and the protocol
    version holds "for a refused message as for a valid one"; with
    `Mcp-Session-Id: <live id><space>` a ping was the SDK's 404 "Session not
    found" while a request refused for its params was answered in the
    session (200), and with `MCP-Protocol-Version: 2025-06-18<space>` the
    ping was the SDK's 400 "Unsupported protocol version" and the refused
    one a 200 (mcpsessionmodel)."""
    agent = await service.agent()
    session_id = await open_session(agent)
    headers = {**agent.headers(session=False), **MCP_HEADERS,
               "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
    headers[padded] = before + headers[padded] + after
    valid = await agent.client.post("/mcp", content=PING, headers=headers)
    refused = await agent.client.post("/mcp", content=TWICE, headers=headers)
    assert valid.status_code == refused.status_code == 200, (valid.text, refused.text)
    assert messages_of(valid)[0]["result"] == {}  # the ping, answered in its session
    assert messages_of(refused)[0]["error"]["code"] == -32602


def test_the_headers_the_sdk_compares_reach_it_without_their_padding() -> None:
    """What the SDK reads of each header it compares as sent is the value
    this endpoint judged: a `Last-Event-ID` of blanks is none (this endpoint
    lets the GET through), and the SDK, given the blanks, took its resuming
    path, which returns without answering when there is no event store."""
    scope: dict[str, Any] = {"headers": [
        (b"mcp-session-id", b" \tabc\t "), (b"mcp-protocol-version", b"2025-06-18 "),
        (b"last-event-id", b" \t"), (b"user-agent", b" kept as sent "),
    ]}  # fmt: skip
    assert padding_stripped(scope)["headers"] == [
        (b"mcp-session-id", b"abc"), (b"mcp-protocol-version", b"2025-06-18"),
        (b"last-event-id", b""), (b"user-agent", b" kept as sent "),
    ]  # fmt: skip
    unpadded = {"headers": [(b"mcp-session-id", b"abc")]}
    assert padding_stripped(unpadded) is unpadded  # nothing to take off: the same scope


@pytest.mark.parametrize("separator", ["\x85", "\u2028", "\u2029"], ids=["nel", "ls", "ps"])
async def test_a_tool_answer_is_one_line_per_event_whatever_its_text(
    human: Caller, project: str, separator: str
) -> None:
    """NEL, U+2028 and U+2029 left raw in an event-stream answer broke it
    into lines for readers that end a line there (`str.splitlines`, httpx's
    `iter_lines`): a stored text holding one made every answer that carried
    it unreadable to them, as the public event stream's were before
    (docs/graphql.md, "Server-Sent Events"; unicodeaudit)."""
    body = f"first{separator}second"
    record = await create(human, project, title="Line separator probe", body=body)
    session_id = await open_session(human)
    headers = {**human.headers(), **MCP_HEADERS, "Mcp-Session-Id": session_id}
    arguments = {"project": project, "knowledge_id": record["id"]}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "knowledge_get", "arguments": arguments}}  # fmt: skip
    r = await human.client.post("/mcp", json=call, headers=headers)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in r.text.splitlines() if line]
    assert [line.split(":", 1)[0] for line in lines] == ["event", "data"], lines
    answer = json.loads(lines[1].removeprefix("data: "))
    assert json.loads(answer["result"]["content"][0]["text"])["body"] == body
