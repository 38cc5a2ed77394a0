"""`waypost mcp`: the MCP server over stdio, for clients that launch a process.

The tools are backed by the REST API of a running Waypost (`--url`), with the
token from WAYPOST_TOKEN. The MCP session is the process: it ends (and so
does the agent session it kept) when the client closes standard input.

The transport is this module's, not the SDK's `stdio_server`: that one read
lines with `json.loads` leniency (duplicate keys, NaN), turned invalid UTF-8
into U+FFFD, took a request whose id is null for a notification, and answered
every line it could not use with a log notification ("Internal Server Error")
instead of the JSON-RPC error the line's sender waits for. Each line here is
held to the rules `POST /mcp` holds a body to (`envelope.py`) and a refused
one is answered in JSON-RPC's own terms; the SDK sees only well-formed
messages.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, JSONRPCMessage
from pydantic import ValidationError

from waypost import __version__
from waypost.mcp_server.backend import HttpBackend
from waypost.mcp_server.envelope import (
    MESSAGE_LIMIT,
    Refusal,
    envelope_refusal,
    is_response,
    read_message,
    request_id_of,
    unknown_method,
)
from waypost.mcp_server.server import build_server

log = logging.getLogger("waypost.mcp")


class TokenRefused(Exception):
    pass


async def check_token(client: httpx.AsyncClient) -> None:
    """Refuse to start with a token Waypost refuses; start anyway when it is down
    (a desktop client may launch us first: tools then say it is unreachable)."""
    try:
        response = await client.get("/api/v1/me")
    except httpx.HTTPError as exc:
        print(f"waypost mcp: cannot reach {client.base_url} yet ({type(exc).__name__})",
              file=sys.stderr)  # fmt: skip
        return
    if response.status_code == 401:
        raise TokenRefused(f"{client.base_url} refused the token in WAYPOST_TOKEN (401)")


def message_of_line(line: bytes) -> JSONRPCMessage | Refusal | None:
    """One line as the message for the SDK, the refusal to answer instead, or
    None for a line left unanswered (a client's response: this server asks
    nothing, and answering one could echo an id the client's requests use)."""
    if len(line) > MESSAGE_LIMIT:
        said = f"MCP messages are limited to {MESSAGE_LIMIT} bytes"
        return Refusal(request_id_of(line), INVALID_REQUEST, said)
    message: Any = read_message(line)
    if isinstance(message, Refusal):
        return message
    if is_response(message):
        log.warning("a response to no request of this server was dropped (%.200s)", line)
        return None
    refusal = envelope_refusal(message) or unknown_method(message)
    if refusal is not None:
        return refusal
    try:
        return JSONRPCMessage.model_validate(message)
    except ValidationError:  # what envelope_refusal lets through, the model should take
        return Refusal(message.get("id"), INVALID_REQUEST, "not a JSON-RPC message")


ServerReads = MemoryObjectReceiveStream[SessionMessage | Exception]
ServerWrites = MemoryObjectSendStream[SessionMessage]


@contextlib.asynccontextmanager
async def checked_stdio(
    stdin: anyio.AsyncFile[bytes] | None = None,
    stdout: anyio.AsyncFile[bytes] | None = None,
) -> AsyncIterator[tuple[ServerReads, ServerWrites]]:
    """The server's (read, write) streams over newline-delimited JSON-RPC on
    standard input and output (bytes: the UTF-8 check is the parser's)."""
    given = stdin or anyio.wrap_file(sys.stdin.buffer)
    taken = stdout or anyio.wrap_file(sys.stdout.buffer)
    to_server: MemoryObjectSendStream[SessionMessage | Exception]
    server_reads: ServerReads
    to_server, server_reads = anyio.create_memory_object_stream(0)
    server_writes: ServerWrites
    from_server: MemoryObjectReceiveStream[SessionMessage]
    server_writes, from_server = anyio.create_memory_object_stream(0)
    one_line_at_a_time = anyio.Lock()

    async def write_line(data: bytes) -> None:
        async with one_line_at_a_time:
            await taken.write(data + b"\n")
            await taken.flush()

    async def read_lines() -> None:
        async with to_server:
            async for read in given:
                # \r, \n and \r\n each end a line, as in the text mode the
                # SDK's transport read standard input in
                for line in read.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
                    if not line.strip():  # a blank line is no message
                        continue
                    found = message_of_line(line)
                    if isinstance(found, Refusal):
                        await write_line(_compact(found.as_json()))
                    elif found is not None:
                        await to_server.send(SessionMessage(found))

    async def write_messages() -> None:
        async with from_server:
            async for sent in from_server:
                text = sent.message.model_dump_json(by_alias=True, exclude_none=True)
                await write_line(text.encode())

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_lines)
        tasks.start_soon(write_messages)
        yield server_reads, server_writes


def _compact(data: dict[str, Any]) -> bytes:
    """JSON without spaces, as the SDK writes its lines (ASCII: a refusal may
    quote a client's lone surrogate, which UTF-8 cannot carry)."""
    return json.dumps(data, separators=(",", ":")).encode()


async def serve_stdio(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}", "User-Agent": f"waypost-mcp/{__version__}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30.0) as client:
        await check_token(client)
        backend = HttpBackend(client)
        server = build_server(lambda ctx: backend)
        async with checked_stdio() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def main(url: str, token: str) -> None:
    anyio.run(serve_stdio, url, token)
