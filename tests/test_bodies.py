"""The one request-body reader (`http/bodies.py`), driven with a bare ASGI scope
and `receive`: how `Content-Length` is read, the limit, a client that goes."""

from __future__ import annotations

import pytest
from starlette.requests import ClientDisconnect, Request
from starlette.types import Message, Receive, Scope

from waypost.errors import InvalidRequest, PayloadTooLarge
from waypost.http.bodies import (
    PAST_EVERY_LIMIT,
    buffer_body,
    content_length,
    read_body,
    receive_body,
)
from waypost.lifecycle_http import body as lifecycle_body

# "²" and "٣" (ARABIC-INDIC DIGIT THREE) are digits to str.isdigit(), not to
# HTTP (nor, for "²", to int()); a sign or spaces inside are no length either
NOT_LENGTHS = ["\u00b2", "1\u00b2", "\u0663", "-1", "+1", "1 2", "0x10", "1e3", ""]


def scope(*headers: tuple[bytes, bytes]) -> Scope:
    return {"type": "http", "method": "POST", "path": "/", "headers": list(headers)}


def length(value: str) -> tuple[bytes, bytes]:
    # latin-1, as ASGI servers hand header bytes over ("²" is one byte, 0xB2)
    return (b"content-length", value.encode("latin-1", "backslashreplace"))


def receiving(*messages: Message) -> tuple[Receive, list[Message]]:
    """A `receive` handing over `messages`, and those it has handed."""
    handed: list[Message] = []

    async def receive() -> Message:
        handed.append(messages[len(handed)])
        return handed[-1]

    return receive, handed


def chunks(*parts: bytes, then_gone: bool = False) -> tuple[Receive, list[Message]]:
    """`receiving` one body in `parts`; with `then_gone`, the client goes
    where the body should go on."""
    messages: list[Message] = [
        {"type": "http.request", "body": part, "more_body": then_gone or i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]
    gone: list[Message] = [{"type": "http.disconnect"}] if then_gone else []
    return receiving(*messages, *gone)


@pytest.mark.parametrize("value", NOT_LENGTHS)
def test_only_ascii_decimal_digits_are_a_length(value: str) -> None:
    assert content_length(value) is None


def test_lengths_with_leading_zeros_and_past_64_bits() -> None:
    assert content_length("0") == 0
    assert content_length("0042") == 42
    assert content_length("0" * 30 + "7") == 7
    # digits past 64 bits are past every limit: never int()-ed whole
    assert content_length(str(2**64)) == PAST_EVERY_LIMIT
    assert content_length("9" * 5000) == PAST_EVERY_LIMIT


@pytest.mark.parametrize("value", NOT_LENGTHS)
async def test_a_length_that_is_no_number_is_refused_naming_the_header(value: str) -> None:
    receive, handed = chunks(b"{}")
    with pytest.raises(InvalidRequest) as refused:
        await read_body(scope(length(value)), receive, 1024)
    assert refused.value.details == {"field": "Content-Length"}
    assert handed == []  # refused before any of the body was read
    with pytest.raises(InvalidRequest):
        await buffer_body(scope(length(value)), chunks(b"{}")[0], 1024, "GraphQL request bodies")


@pytest.mark.parametrize("value", ["1025", str(2**63), "9" * 5000])
async def test_a_declared_length_past_the_limit_is_refused_before_reading(value: str) -> None:
    receive, handed = chunks(b"{}")
    with pytest.raises(PayloadTooLarge, match="MCP bodies are limited to 1024 bytes"):
        await read_body(scope(length(value)), receive, 1024, "MCP bodies")
    assert handed == []


async def test_a_body_is_read_whole_with_or_without_a_declared_length() -> None:
    receive, _ = chunks(b'{"a":', b" 1}")
    assert await read_body(scope(length("7")), receive, 1024) == b'{"a": 1}'
    receive, _ = chunks(b"", b"x" * 1024)
    assert await read_body(scope(), receive, 1024) == b"x" * 1024


async def test_a_streamed_body_is_refused_once_it_passes_the_limit() -> None:
    receive, handed = chunks(*[b"x" * 400] * 10)
    with pytest.raises(PayloadTooLarge, match="request bodies are limited to 1024 bytes"):
        await read_body(scope(), receive, 1024)
    assert len(handed) == 3  # the rest was never read
    assert await receive_body(chunks(*[b"x" * 400] * 3)[0], 1024) is None


async def test_a_client_that_goes_mid_body_is_a_disconnect() -> None:
    receive, _ = chunks(b"{", then_gone=True)
    with pytest.raises(ClientDisconnect):
        await read_body(scope(), receive, 1024)


async def test_a_buffered_body_is_handed_on_as_if_unread() -> None:
    receive, _ = receiving(
        {"type": "http.request", "body": b'{"q": 1}', "more_body": False},
        {"type": "http.disconnect"},  # once the answer is out
    )
    body, replay = await buffer_body(scope(), receive, 1024, "GraphQL request bodies")
    assert body == b'{"q": 1}'
    assert await replay() == {"type": "http.request", "body": body, "more_body": False}
    assert (await replay())["type"] == "http.disconnect"  # then the client's own


# -- the lifecycle listener's reader: the same reading, its own refusals --------


def lifecycle_request(value: str, receive: Receive) -> Request:
    media = (b"content-type", b"application/json")
    return Request(scope(media, length(value)), receive)


@pytest.mark.parametrize("value", NOT_LENGTHS)
async def test_the_lifecycle_reader_refuses_no_number_as_length_required(value: str) -> None:
    receive, handed = chunks(b"{}")
    with pytest.raises(InvalidRequest) as refused:
        await lifecycle_body.read_body(lifecycle_request(value, receive))
    assert refused.value.details["reason"] == "length_required"
    assert handed == []


async def test_the_lifecycle_reader_reads_a_body_of_its_declared_length() -> None:
    receive, _ = chunks(b'{"a":', b" 1}")
    assert await lifecycle_body.read_body(lifecycle_request("0008", receive)) == b'{"a": 1}'


@pytest.mark.parametrize(
    ("value", "receive"),
    [
        ("3", chunks(b"{}")[0]),  # shorter
        ("1", chunks(b"{}")[0]),  # longer
    ],
)
async def test_the_lifecycle_reader_holds_a_body_to_its_declared_length(
    value: str, receive: Receive
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        await lifecycle_body.read_body(lifecycle_request(value, receive))
    assert refused.value.details["reason"] == "truncated_body"


@pytest.mark.parametrize(
    ("value", "receive"),
    [
        ("3", chunks(b"{}", then_gone=True)[0]),  # shorter, and the client went
        ("0", receiving({"type": "http.disconnect"})[0]),  # even nothing, if it went
    ],
)
async def test_the_lifecycle_reader_passes_a_client_gone_mid_body_up(
    value: str, receive: Receive
) -> None:
    """Nobody is left to answer: the listener's middleware ends the request
    and its access line says 499 (a `400 truncated_body` sent to the closed
    socket was logged and counted: lifecyclejourney)."""
    with pytest.raises(ClientDisconnect):
        await lifecycle_body.read_body(lifecycle_request(value, receive))
