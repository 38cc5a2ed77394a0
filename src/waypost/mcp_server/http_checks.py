"""What /mcp checks of a request before the SDK sees it: its headers (one of
each, the origin, the media types), its body (read by the REST parser and
the envelope's rules), and the refusals it is answered with.

The SDK parses with json.loads and compares media types as sent; these
checks go first so that nothing it would mishandle reaches it.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
from mcp.types import INVALID_PARAMS, INVALID_REQUEST
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from waypost.errors import PayloadTooLarge, UnsupportedMediaType, WaypostError
from waypost.http.bodies import buffer_body, replaying
from waypost.http.headers import content_coding_refusal, header
from waypost.http.responses import send_json
from waypost.mcp_server.envelope import (
    ID_SEARCH_MAX,
    MESSAGE_LIMIT,
    Refusal,
    RequestId,
    envelope_refusal,
    is_request_id,
    params_refusal,
    read_message,
    request_id_quickly,
    tool_refusal,
    unknown_method,
)
from waypost.mcp_server.tools import tool_names

BODY_LIMIT = MESSAGE_LIMIT
TOO_LARGE = f"MCP bodies are limited to {BODY_LIMIT} bytes"


def _sdk_reads_as_json(media_type: str | None) -> bool:
    """Whether the SDK would parse this body as JSON: it looks at the part
    before the first `;` only (`application/json; foo=bar` too), so every such
    body must pass our parser first, not only the strict REST media types."""
    return (media_type or "").split(";", 1)[0].strip().lower() == "application/json"


async def json_rpc_error(
    send: Send, status: int, code: int, message: str, request_id: str | int | None = None
) -> None:
    """A JSON-RPC error (with no request id when the request could not be read)."""
    await send_json(send, status, Refusal(request_id, code, message).as_json())


def bad_initialize(message: Any) -> Refusal | None:
    """The refusal of an initialize request whose params MCP refuses.

    The SDK answers it with a 200 and an error, and keeps the session it
    opened for it until the idle timeout: sixteen such mistakes shut the
    principal out of new sessions. None for anything else."""
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    return params_refusal(message)


def refused_in_session(message: Any) -> Refusal | None:
    """`-32601` for a request naming a method MCP does not have, `-32602`
    naming the field for one whose params MCP's schema refuses; None for
    anything else, left to the SDK. Only asked for a request in one of the
    caller's live sessions whose headers the SDK would take (its checks of
    the session and the headers come first)."""
    if not isinstance(message, dict):
        return None
    if not is_request_id(message.get("id")):
        return None  # a notification: the SDK's to read
    return unknown_method(message) or params_refusal(message) or tool_refusal(message, tool_names())


# what the SDK reads in place of a refused message whose headers it refuses
_STAND_IN = b'{"jsonrpc": "2.0", "id": 0, "method": "ping"}'


def stand_in(scope: Scope, unread: Receive) -> tuple[Scope, Receive]:
    """The request the SDK is handed in place of a refused message, for it
    to answer its own refusal of the headers: a ping, with its own length,
    so that nothing this endpoint refused reaches the SDK (its json.loads,
    its body limit, a tool) even where its checks differ from ours."""
    headers = [
        (k, v) for k, v in scope["headers"] if k not in (b"content-length", b"transfer-encoding")
    ]
    headers.append((b"content-length", str(len(_STAND_IN)).encode()))
    return {**scope, "headers": headers}, replaying(_STAND_IN, unread)


def sdk_would_serve(scope: Scope, message: Any) -> bool:
    """The SDK's own checks of a POST's headers, as it makes them: an Accept
    naming both JSON and the event stream (by prefix; `*/*` is not enough),
    and a protocol version it supports when one is named, except for an
    `initialize` request (which is how a version is agreed: the SDK skips
    it; a notification of that name, with no id, is held to it)."""
    accepted = [t.strip() for t in (header(scope, b"accept") or "").split(",")]
    version = header(scope, b"mcp-protocol-version")
    return (
        any(t.startswith("application/json") for t in accepted)
        and any(t.startswith("text/event-stream") for t in accepted)
        and (
            version is None
            or version in SUPPORTED_PROTOCOL_VERSIONS
            or (_method_of(message) == "initialize" and is_request_id(id_of(message)))
        )
    )


def _method_of(message: Any) -> str | None:
    """The method of a POST's message, a refused one's too where known."""
    if isinstance(message, Refusal):
        return message.method
    found = message.get("method") if isinstance(message, dict) else None
    return found if isinstance(found, str) else None


# Headers that carry one value here, as a refusal spells them (the SDK reads
# the first of each; this endpoint reads them with `header`, which refuses a
# repeat)
_SINGLE_HEADERS = {
    b"mcp-session-id": "Mcp-Session-Id",
    b"mcp-protocol-version": "MCP-Protocol-Version",
    b"last-event-id": "Last-Event-ID",
    b"origin": "Origin",
    b"host": "Host",
}


# This server keeps no event store: its stream events carry no id, so any
# Last-Event-ID names none of them.
NO_RESUMING = (
    "this server does not resume streams (its events carry no id): open the stream"
    " without Last-Event-ID; for an answer a dropped stream lost, send the request"
    " again: a write with the same id in the same session, or the same"
    " idempotency_key, is answered from its receipt, not run twice"
)


def _repeated_header(scope: Scope) -> str | None:
    """What to say of a header sent twice, or None. Read later, a repeat
    raised outside any handler: a 500 and an ERROR traceback for any caller."""
    try:
        for name, spelled in _SINGLE_HEADERS.items():
            header(scope, name, spelled)
    except WaypostError as error:
        return error.message
    return None


def _loopback(host: str) -> bool:
    """Whether `host` (a Host header's or an origin's, port and all) names
    this machine: `localhost`, 127.0.0.0/8 or [::1]."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def _origin_refusal(scope: Scope) -> str | None:
    """What to say of a request whose `Origin` this endpoint refuses, or None.

    MCP (2025-06-18, transports, "Security Warning"): servers MUST validate
    the Origin header, and answer 403 when it is present and invalid, against
    DNS rebinding. Clients that are no browser send none. A request from a
    browser is served only when its origin and the host it names are both
    this machine: in a rebinding, the page's origin and the Host header name
    the attacker's host, so comparing them with each other proves nothing.
    (A page of another origin cannot send the bearer token without a CORS
    preflight, which /mcp never grants: this check is the rest of the way.)"""
    origin = header(scope, b"origin")
    if origin is None:
        return None
    scheme, sep, rest = origin.partition("://")
    if (
        sep
        and scheme.lower() in ("http", "https")
        and _loopback(rest)
        and _loopback(header(scope, b"host") or "")
    ):
        return None
    return (
        f"Origin {origin[:100]} may not call this endpoint: a browser's request is served"
        " only from a loopback origin to a loopback host"
    )


def media_types_lowered(scope: Scope) -> Scope:
    """The scope with `Content-Type` and `Accept` in lower case, and its
    `Accept` lines joined into one.

    Media types are case-insensitive (RFC 9110, 8.3.1), and /api/v1 and
    /graphql compare them so; the SDK compares them as sent (`Application/JSON`
    was 415, an `Accept` of `Application/JSON, Text/Event-Stream` 406). Accept
    is a list: two lines mean what one line of both, comma-separated, means
    (RFC 9110, 5.3), and the SDK reads the first line only, so a client that
    sent JSON and the event stream on two lines was refused."""
    headers = scope["headers"]
    accepts = [v for k, v in headers if k == b"accept"]
    if len(accepts) < 2 and not any(
        k in (b"content-type", b"accept") and v != v.lower() for k, v in headers
    ):
        return scope
    kept = [(k, v.lower() if k == b"content-type" else v) for k, v in headers if k != b"accept"]
    if accepts:
        kept.append((b"accept", b", ".join(accepts).lower()))
    return {**scope, "headers": kept}


# the headers the SDK compares as sent, whose value this endpoint reads
# without the spaces and tabs around it (RFC 9110, 5.5; `header`)
_COMPARED_AS_SENT = (b"mcp-session-id", b"mcp-protocol-version", b"last-event-id")


def padding_stripped(scope: Scope) -> Scope:
    """The scope with the spaces and tabs around the values of
    `Mcp-Session-Id`, `MCP-Protocol-Version` and `Last-Event-ID` taken off,
    so that the SDK reads the value this endpoint's checks judged (httptools
    hands them over: a padded live session id was the SDK's 404 for a valid
    request and served for a refused one; a `Last-Event-ID` of blanks, none
    here, sent the SDK down its resuming path, which never answers)."""
    headers = scope["headers"]
    if not any(k in _COMPARED_AS_SENT and v != v.strip(b" \t") for k, v in headers):
        return scope
    kept = [(k, v.strip(b" \t") if k in _COMPARED_AS_SENT else v) for k, v in headers]
    return {**scope, "headers": kept}


def id_of(message: Any) -> RequestId | None:
    """The id of a POST's request, when it has one (a refused one's too)."""
    if isinstance(message, Refusal):
        return message.request_id
    found = message.get("id") if isinstance(message, dict) else None
    return found if is_request_id(found) else None


async def read_post(scope: Scope, receive: Receive, send: Send) -> tuple[Any, Receive] | None:
    """A POST's JSON-RPC message and a `receive` that hands its body on; the
    message is a `Refusal` for one whose params or size are refused (answered
    once the session is known). None when the POST was answered here: a media
    type or content coding refused, a body past the limit with no id found,
    a message the envelope refuses.

    The SDK parses with json.loads: a body nested a few thousand levels deep
    raised RecursionError (a 500), and duplicate keys, NaN or integers past
    64 bits passed. The REST parser goes first, then the envelope's own rules
    (mcp_server/envelope.py)."""
    try:
        if not _sdk_reads_as_json(header(scope, b"content-type")):
            raise UnsupportedMediaType("send the message as application/json")
        coded = content_coding_refusal(scope)
        if coded is not None:
            raise UnsupportedMediaType(coded)
        # read up to the id search's bound: a message past the limit is
        # refused with its id where one is found (the official client waited
        # for ever on a 413 with `"id": null`)
        body, receive = await buffer_body(scope, receive, ID_SEARCH_MAX, "MCP bodies")
        too_large = len(body) > BODY_LIMIT
        found = request_id_quickly(body) if too_large else None
        if too_large and found is None:
            await json_rpc_error(send, 413, INVALID_REQUEST, TOO_LARGE)
            return None
    except ClientDisconnect:
        return None
    except PayloadTooLarge:  # past the search's bound too: no id is looked for
        await json_rpc_error(send, 413, INVALID_REQUEST, TOO_LARGE)
        return None
    except WaypostError as error:
        await json_rpc_error(send, error.status, INVALID_REQUEST, error.message)
        return None
    if too_large:
        # answered as a refused argument is, with its id: 200 in a live
        # session, where the official client took a 413 for the transport
        # failing and ended the whole session
        return Refusal(found, INVALID_REQUEST, TOO_LARGE, status=413), receive
    message = read_message(body)
    refusal = message if isinstance(message, Refusal) else envelope_refusal(message)
    if refusal is not None and refusal.code != INVALID_PARAMS and not refusal.silent:
        await send_json(send, 400, refusal.as_json())
        return None
    return message, receive


def headers_refusal(scope: Scope) -> tuple[int, str] | None:
    """(status, text) refusing the request for its headers, before any
    session is looked at; None when they pass."""
    repeated = _repeated_header(scope)
    if repeated is not None:
        return 400, repeated
    foreign = _origin_refusal(scope)
    if foreign is not None:
        return 403, foreign
    if scope["method"] == "GET" and header(scope, b"last-event-id"):
        # the SDK, with no event store, returned from such a GET without
        # an answer: uvicorn's 500 and an ERROR line, for any client
        return 400, NO_RESUMING
    return None
