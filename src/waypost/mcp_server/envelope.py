"""What a JSON-RPC message must be before the MCP SDK reads it, on both transports.

The SDK validates each message with pydantic and, on a failure, answers with
the whole validation report and the id `"server-error"` (over HTTP) or a log
notification saying "Internal Server Error" (over stdio); a message whose `id`
is `null`, `true` or `1.5` it reads as a notification and never answers.
JSON-RPC 2.0 says what each deserves: `-32700` for text that is not JSON,
`-32600` (with `"id": null` when the id cannot be trusted) for anything that
is not one request, notification or response, `-32601` for a method that
does not exist. Both transports refuse here first, in the same words (a
client's response aside: `/mcp` refuses a malformed one, stdio answers none).
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import msgspec
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ClientNotification,
    ClientRequest,
)
from pydantic import BaseModel, ValidationError

from waypost.decoding import clip, is_utf8, parse_json
from waypost.errors import WaypostError
from waypost.http.slow_clients import BODY_MOST
from waypost.ids import SLUG_CHARS

RequestId = str | int
# one message: the REST body limit plus room for the JSON-RPC envelope
MESSAGE_LIMIT = 256 * 1024 + 16 * 1024

# every request method the SDK knows, with the model it reads its request by
# (it answers "method not found" itself for those without a handler); it
# reads any other name as a malformed request
REQUEST_MODELS: dict[str, type[BaseModel]] = {
    method: model
    for model in typing.get_args(ClientRequest.model_fields["root"].annotation)
    for method in typing.get_args(model.model_fields["method"].annotation)
}
REQUEST_METHODS = frozenset(REQUEST_MODELS)
# and every notification a client may send, likewise
NOTIFICATION_MODELS: dict[str, type[BaseModel]] = {
    method: model
    for model in typing.get_args(ClientNotification.model_fields["root"].annotation)
    for method in typing.get_args(model.model_fields["method"].annotation)
}


@dataclass(frozen=True)
class Refusal:
    """A JSON-RPC error to answer instead of handing the message on."""

    request_id: RequestId | None
    code: int
    message: str
    # a message that is answered nothing (a notification, a client's
    # response): dropped with this said in one WARNING line, and over /mcp
    # in a live session a 202. An error answer to a notification ended the
    # official client's /mcp session (its writer raised on the 400), and
    # over stdio it logged the `"id": null` answer as unreadable.
    silent: bool = False
    # the HTTP status of its answer outside a live session (inside one, 200)
    status: int = 400
    # the refused request's method, where the refusal is of its params
    # (the SDK checks an `initialize`'s headers as no other request's)
    method: str | None = None

    def as_json(self) -> dict[str, Any]:
        error = {"code": self.code, "message": self.message}
        return {"jsonrpc": "2.0", "id": self.request_id, "error": error}


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_request_id(value: Any) -> bool:
    return isinstance(value, str) or _is_integer(value)


def read_message(raw: bytes) -> Any:
    """The message parsed strictly (the REST parser: no duplicate keys, NaN,
    integers past 64 bits, invalid UTF-8 or lone surrogates); a `Refusal`
    (`-32700`) when it is not JSON.

    A value the parser refuses inside a request's `params` (an argument of
    2**63, a NaN, a duplicate key) is JSON all the same: it is `-32602`
    naming the argument, a JSON-RPC error answered in the caller's session.
    As a parse error, HTTP 400, it ended the official client's whole /mcp
    session. A message nested more than MESSAGE_DEPTH levels is refused
    likewise (`-32602` inside a request's params, else `-32600`), and a
    notification or a response nested so is a `silent` refusal (dropped)."""
    try:
        message = parse_json(raw)
    except WaypostError as error:
        field = error.details.get("field")
        return _in_params(raw, field, error.message) or Refusal(
            request_id_of(raw), PARSE_ERROR, error.message
        )
    # fewer brackets than the bound cannot nest past it: most messages are
    # not walked at all
    if raw.count(b"[") + raw.count(b"{") > MESSAGE_DEPTH:
        deep = _nested_too_deep(message)
        if deep is not None:
            return _depth_refusal(message, deep[:100])
    return message


def _depth_refusal(message: Any, deep: str) -> Refusal:
    """What a message nested past MESSAGE_DEPTH at `deep` gets: a request,
    `-32602` inside its params, else `-32600`; a notification or a client's
    response, nothing (`silent`)."""
    said = f"nests more than {MESSAGE_DEPTH} levels deep"
    if isinstance(message, dict) and (is_response(message) or "id" not in message):
        return Refusal(None, INVALID_REQUEST, f"{deep}: {said}", silent=True)
    found = message.get("id") if isinstance(message, dict) else None
    request_id = found if is_request_id(found) else None
    if request_id is not None and deep.startswith("params.") and _request_but_params(message):
        said = f"Invalid params: {deep}: {said}"
        return Refusal(request_id, INVALID_PARAMS, said, method=message["method"])
    return Refusal(request_id, INVALID_REQUEST, f"{deep}: {said}")


def _in_params(raw: bytes, field: Any, said: str) -> Refusal | None:
    """`-32602` naming `field` when it lies inside the params of a request,
    else None."""
    request_id = request_id_of(raw)
    if request_id is None or not isinstance(field, str) or not field.startswith("params."):
        return None
    method = _method_of_a_request_but_params(raw)
    if method is None:
        return None
    return Refusal(request_id, INVALID_PARAMS, f"Invalid params: {field}: {said}", method=method)


def _method_of_a_request_but_params(raw: bytes) -> str | None:
    """The method of `raw` when, read leniently, it is a request in a
    well-formed envelope of a method this server has, with a `params`
    object: only then is a value the strict parser refused there `-32602`
    (anything else stays a parse error, as before). None otherwise."""
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return str(message["method"]) if _request_but_params(message) else None


def _request_but_params(message: Any) -> bool:
    """`_method_of_a_request_but_params` of a message already read, as a yes or no."""
    if not isinstance(message, dict) or not isinstance(message.get("params"), dict):
        return False
    if any(key != "params" and key.startswith("params") for key in message):
        return False  # a member named `params.x` holds no value inside params
    envelope = {**message, "params": {}}
    return (
        "method" in message
        and envelope_refusal(envelope) is None
        and unknown_method(envelope) is None
    )


# A message longer than this is refused without looking for its id. Below
# the transport's bound on any request body (BODY_MOST, 1 MiB, less room for
# chunk framing): past that the connection is closed, so a body the endpoint
# was still reading for its id (up to 1,088 KiB, as it was) got no answer at
# all, or its 413, by how the reads fell.
ID_SEARCH_MAX = BODY_MOST - 64 * 1024


class _Head(msgspec.Struct):
    """A request's id and method, every other member skipped unread."""

    id: Any = None
    method: Any = None


def request_id_quickly(raw: bytes) -> RequestId | None:
    """The id of a request too large to take, read by msgspec (which skips
    the rest in C: 2 ms for 600 KB where `request_id_of`'s lenient reading
    held the event loop 136 ms for a 1 MB body of small objects). None when
    msgspec cannot read it (NaN, a byte-order mark, deep nesting), when it is
    no request, or when its id is no string or integer; of two `id` keys,
    the last."""
    try:
        head = msgspec.json.decode(raw, type=_Head)
    except (msgspec.DecodeError, RecursionError):  # nested past msgspec's depth
        return None
    return head.id if head.method is not None and is_request_id(head.id) else None


class _TwoIds(Exception):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if sum(1 for key, _ in pairs if key == "id") > 1:
        raise _TwoIds  # which one the client waits on cannot be told
    return dict(pairs)


def request_id_of(raw: bytes) -> RequestId | None:
    """The id of a request the strict parser refuses (an integer past 64
    bits, NaN, a duplicate key elsewhere) or one too long to take, when a
    lenient reading finds exactly one: its error answered with `"id": null`
    left the caller (the official client) waiting for ever. None when there
    is none, two, or one no answer could carry (a lone surrogate)."""
    if len(raw) > ID_SEARCH_MAX:
        return None
    try:
        try:
            message = json.loads(raw, object_pairs_hook=_object)
        except UnicodeDecodeError:
            # a byte no UTF-8 reading takes (a Latin-1 letter in an argument)
            # hides no id: read it as a lone surrogate, refused below if the
            # id is what holds it
            text = raw.decode("utf-8-sig", "surrogateescape")  # a leading BOM as bytes
            message = json.loads(text, object_pairs_hook=_object)
    except (ValueError, RecursionError, _TwoIds):
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    found = message.get("id")
    if isinstance(found, str) and not is_utf8(found):
        return None
    return found if is_request_id(found) else None


def is_response(message: Any) -> bool:
    """A client's answer to a request of the server (never answered back:
    JSON-RPC replies to requests only, and an error about it would carry an
    id of the server's numbering, which the client's own requests may use).

    Both transports drop such answers, because no tool asks the client
    anything (no ping, sampling, elicitation or roots request: grep for the
    SDK's `send_ping`, `create_message`, `elicit`, `list_roots`). A tool that
    starts to ask must let its answers through to the SDK first."""
    return (
        isinstance(message, dict)
        and "method" not in message
        and ("result" in message or "error" in message)
    )


def envelope_refusal(message: Any) -> Refusal | None:
    """Why `message` is not one JSON-RPC 2.0 request, notification or
    response; None when it is one."""
    if isinstance(message, list):
        return Refusal(
            None, INVALID_REQUEST,
            "send one JSON-RPC message per request: this server takes no batches",
        )  # fmt: skip
    if not isinstance(message, dict):
        return Refusal(None, INVALID_REQUEST, "a JSON-RPC message is a JSON object")
    if is_response(message):
        return _response_refusal(message)
    if "id" in message and not is_request_id(message["id"]):
        return Refusal(None, INVALID_REQUEST, "id must be a string or an integer")
    request_id = message.get("id")
    if message.get("jsonrpc") != "2.0":
        return Refusal(request_id, INVALID_REQUEST, 'jsonrpc must be "2.0"')
    if "method" not in message:
        said = "a message needs a method, a result or an error"
        return Refusal(request_id, INVALID_REQUEST, said)
    if "result" in message or "error" in message:
        return Refusal(request_id, INVALID_REQUEST, "a request holds no result or error")
    if not isinstance(message["method"], str):
        return Refusal(request_id, INVALID_REQUEST, "method must be a string")
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return Refusal(request_id, INVALID_REQUEST, "params must be an object")
    return None


def _response_refusal(message: dict[str, Any]) -> Refusal | None:
    """A response's shape: a string or integer id, `"jsonrpc": "2.0"`, and a
    result object or an error object with an integer code and a string
    message. Its refusal carries no id (see `is_response`)."""
    if not is_request_id(message.get("id")):
        return Refusal(None, INVALID_REQUEST, "a response needs the id of its request")
    if message.get("jsonrpc") != "2.0":
        return Refusal(None, INVALID_REQUEST, 'jsonrpc must be "2.0"')
    if "result" in message and "error" in message:
        return Refusal(None, INVALID_REQUEST, "a response holds a result or an error")
    if "result" in message:
        if not isinstance(message["result"], dict):
            return Refusal(None, INVALID_REQUEST, "result must be an object")
        return None
    error = message["error"]
    code = error.get("code") if isinstance(error, dict) else None
    if not _is_integer(code) or not isinstance(error.get("message"), str):
        said = "error must be an object with an integer code and a string message"
        return Refusal(None, INVALID_REQUEST, said)
    return None


def dropped_notification(message: dict[str, Any]) -> str | None:
    """Why a notification (a message `envelope_refusal` passed, without an
    id) is dropped before the SDK reads it, or None to pass it on: "" for a
    method MCP does not have (new versions add notifications; ignoring the
    unknown is what the protocol asks), a sentence naming the first wrong
    field for params its schema refuses. The SDK logged both at WARNING on
    the root logger, with pydantic's whole report ("8 validation errors for
    ClientNotification")."""
    if "id" in message:
        return None
    model = NOTIFICATION_MODELS.get(message.get("method"))  # type: ignore[arg-type]
    if model is None:
        return ""
    try:
        model.model_validate(message)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])[:100]
        return f"{clip(str(message['method']), 100)}: {where}: {first['msg'][:100]}"
    return None


def unknown_method(message: dict[str, Any]) -> Refusal | None:
    """`-32601` for a request (it has an id) naming a method MCP does not
    have, which the SDK would answer `-32602` "Invalid request parameters".
    Only for a message `envelope_refusal` passed."""
    method, request_id = message.get("method"), message.get("id")
    if isinstance(method, str) and is_request_id(request_id) and method not in REQUEST_METHODS:
        return Refusal(request_id, METHOD_NOT_FOUND, f"Method not found: {method[:100]}")
    return None


def tool_refusal(message: dict[str, Any], tool_names: Collection[str]) -> Refusal | None:
    """`-32602` for `tools/call` naming a tool this server does not have (MCP
    2025-06-18, server/tools, "Error Handling": unknown tools are protocol
    errors, not a tool's result), and for a list given a cursor: each list
    is one page, so no cursor is one this server gave (pagination: "Invalid
    cursors SHOULD result in an error with code -32602"; the resource lists
    answered in full again, so a client that sent a stale cursor got every
    resource twice). None for anything else; only for a request
    `params_refusal` passed."""
    request_id, params = message.get("id"), message.get("params")
    if not is_request_id(request_id) or not isinstance(params, dict):
        return None
    method = message.get("method")
    if method == "tools/call":
        name = params.get("name")
        if isinstance(name, str) and name not in tool_names:
            said = f"Unknown tool: {clip(name)} (tools/list names the tools)"
            return Refusal(request_id, INVALID_PARAMS, said)
    if method == "resources/read":
        uri = params.get("uri")
        if isinstance(uri, str) and RESOURCE_URI.fullmatch(uri) is None:
            return Refusal(request_id, RESOURCE_NOT_FOUND, unknown_resource(uri))
    if method in ONE_PAGE_LISTS and params.get("cursor") is not None:
        said = (
            f"Invalid cursor: {method} answers every {ONE_PAGE_LISTS[method]} on one page;"
            " ask without a cursor"
        )
        return Refusal(request_id, INVALID_PARAMS, said)
    return None


# The resources' URIs, held to this as the client sent them: the SDK parses
# one into a URL first, which drops tabs and line breaks anywhere in it,
# trims its ends and resolves `..`, so `waypost://projects/de\tmo/policy`
# read demo's policy while the same id as a tool argument was refused.
# Used with fullmatch: `$` would also match before a final line break. The
# scheme in any case (RFC 3986, 3.1; the SDK lowered it, and
# `WAYPOST://...` was read).
RESOURCE_URI = re.compile(f"(?ia:waypost)://projects/({SLUG_CHARS})/(policy|digest)")
# JSON-RPC code of a resource read of no resource, as the MCP specification
# suggests (a plain exception became code 0)
RESOURCE_NOT_FOUND = -32002


def unknown_resource(uri: str) -> str:
    """The refusal of a URI no resource has, naming it as sent, clipped (it
    echoed a 200 KB URI back whole)."""
    return f"unknown resource {clip(uri)}; use waypost://projects/{{project}}/policy or /digest"


# The lists this server answers whole (what each holds, for the refusal above).
ONE_PAGE_LISTS = {
    "tools/list": "tool",
    "resources/list": "resource",
    "resources/templates/list": "resource template",
}


# pydantic, with which the SDK reads every message, stops at 255 levels of
# nesting (the parser takes about 1,000): the SDK then answered "Invalid
# request parameters" naming nothing (a notification: nothing), and logged
# a WARNING on the root logger.
MESSAGE_DEPTH = 200


def _nested_too_deep(message: Any) -> str | None:
    """The path of a value nested more than MESSAGE_DEPTH levels into
    `message` (its members are the first level), or None. Level by level,
    depth alone, keeping each level; the path of the one value found is
    traced back through them. Building every path took reading a 260 KiB
    message of 88,000 lists from 29 to 134 ms of the event loop, this walk
    to 50 ms (`read_message` walks only messages with more brackets than the
    bound). No recursion: the parser admits deeper documents than Python's
    recursion limit."""
    levels: list[list[Any]] = []
    level = [message] if type(message) in (dict, list) else []
    while level:
        levels.append(level)
        if len(levels) > MESSAGE_DEPTH + 1:
            return _path_to(level[0], levels)
        inner: list[Any] = []
        for value in level:
            items = value.values() if type(value) is dict else value
            inner += [item for item in items if type(item) is list or type(item) is dict]
        level = inner
    return None


def _path_to(found: Any, levels: list[list[Any]]) -> str:
    """The path of `found`, a value of the last of `levels`: each step up is
    the value of the level above that holds it (by identity)."""
    keys: list[str] = []
    child = found
    for above in reversed(levels[:-1]):
        parent, key = next(
            (value, key)
            for value in above
            for key, item in (value.items() if type(value) is dict else enumerate(value))
            if item is child
        )
        keys.append(str(key))
        child = parent
    return ".".join(reversed(keys))


def params_refusal(message: dict[str, Any]) -> Refusal | None:
    """`-32602` naming the first wrong field of a request whose params MCP's
    schema refuses (`initialize` without `clientInfo`, `tools/call` without
    `name`): the SDK answered "Invalid request parameters" and nothing more,
    and logged its whole validation report. None for anything else; only for
    a message `envelope_refusal` passed. The caller decides whether a
    message without an id is held to a request's schema (`/mcp` does so for
    `initialize`, which opens a session whatever its id); its refusal has
    `"id": null`."""
    model = REQUEST_MODELS.get(message.get("method"))  # type: ignore[arg-type]
    if model is None:
        return None
    request_id = message.get("id") if is_request_id(message.get("id")) else None
    try:
        model.model_validate(message)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])[:100]
        return Refusal(request_id, INVALID_PARAMS, f"Invalid params: {where}: {first['msg'][:100]}")
    return None
