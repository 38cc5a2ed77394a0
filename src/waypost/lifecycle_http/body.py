"""Request rules of the lifecycle listener, as the contract writes them.

POST: exactly `Content-Type: application/json` (no parameters), a declared
`Content-Length` up to 256 KiB that the body matches, and an
`Idempotency-Key`. Query strings: no duplicate or unknown names.
"""

from __future__ import annotations

from typing import TypeVar

from starlette.requests import Request

from waypost.decoding import decode_query, query_items
from waypost.errors import PayloadTooLarge, UnsupportedMediaType
from waypost.http.bodies import content_length, receive_body
from waypost.http.headers import content_coding_refusal
from waypost.resolvers.lifecycle import checks

T = TypeVar("T")
BODY_LIMIT = 256 * 1024


def _one(request: Request, name: str) -> str | None:
    values = request.headers.getlist(name)
    if len(values) > 1:
        raise checks.refuse("invalid_request", f"{name} appears twice", name)
    # spaces and tabs around a value are not part of it (RFC 9110, 5.5)
    return values[0].strip(" \t") if values else None


async def read_body(request: Request) -> bytes:
    media = _one(request, "content-type")
    # exactly, as the contract says (case included); spaces around a header
    # value are not part of it (RFC 9110, 5.5) and `_one` has trimmed them
    if media != "application/json":
        raise UnsupportedMediaType("Content-Type must be application/json")
    coded = content_coding_refusal(request.scope)
    if coded is not None:
        raise UnsupportedMediaType(coded)
    declared = _one(request, "content-length")
    # decimal ASCII digits only (`content_length`): "²" is no length either
    length = None if declared is None else content_length(declared)
    if length is None:
        raise checks.refuse("length_required", "a Content-Length is required", "Content-Length")
    if length > BODY_LIMIT:
        raise PayloadTooLarge(f"request bodies are limited to {BODY_LIMIT} bytes")
    # a client gone before the end raises ClientDisconnect: nobody is left to
    # answer, and the access line keeps 499 as on the public listener (a 400
    # `truncated_body` sent to the closed socket was logged and counted)
    body = await receive_body(request.receive, length)
    if body is None:
        raise checks.refuse("truncated_body", "the body is longer than declared")
    if len(body) != length:
        raise checks.refuse("truncated_body", "the body is shorter than declared")
    return body


def query(request: Request, model: type[T]) -> T:
    return decode_query(query_items(request.scope["query_string"]), model)


def path_id(request: Request) -> str:
    return checks.check_id(str(request.path_params["id"]), "id")


def idempotency_key(request: Request) -> str | None:
    return _one(request, "idempotency-key")
