"""`waypost mcp`: the MCP server over stdio, for clients that launch a process.

The tools are backed by the REST API of a running Waypost (`--url`), with the
token from WAYPOST_TOKEN. The MCP session is the process: it ends (and so
does the agent session it kept) when the client closes standard input (or
sends SIGTERM, SIGINT or SIGHUP), once every request read before has been
answered (JSON-RPC answers each request:
a write already on its way commits, and its caller learns so from the
answer), a `decision_wait` ending at once as over `/mcp` when its client
leaves.

The transport is this module's, not the SDK's `stdio_server`: that one read
lines with `json.loads` leniency (duplicate keys, NaN), turned invalid UTF-8
into U+FFFD, took a request whose id is null for a notification, and answered
every line it could not use with a log notification ("Internal Server Error")
instead of the JSON-RPC error the line's sender waits for. Each line here is
held to the rules `POST /mcp` holds a body to (`envelope.py`) and a refused
one is answered in JSON-RPC's own terms; the SDK sees only well-formed
messages. Memory stays bounded whatever a line's length: past the id
search's bound (`ID_SEARCH_MAX`, as for a body of `/mcp`) a line is refused
and the rest of it skipped as it arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import ValidationError

from waypost import __version__
from waypost.json_text import line_breaks_escaped
from waypost.mcp_server.backend import HttpBackend
from waypost.mcp_server.envelope import (
    ID_SEARCH_MAX,
    MESSAGE_LIMIT,
    Refusal,
    dropped_notification,
    envelope_refusal,
    is_response,
    params_refusal,
    read_message,
    request_id_of,
    tool_refusal,
    unknown_method,
)
from waypost.mcp_server.running import RunningCalls, cancelled_request, id_key
from waypost.mcp_server.server import build_server
from waypost.mcp_server.stdio_files import StdinChunks, StdoutLines
from waypost.mcp_server.tools import tool_names

log = logging.getLogger("waypost.mcp")

READ_CHUNK = 64 * 1024
# \r, \n and \r\n each end a line, as in the text mode the SDK's transport
# read standard input in
LINE_END = re.compile(rb"\r\n|\r|\n")
# Once standard input has ended, how long the answers of requests still
# running are waited for. A route call's HTTP requests time out at 30 s and
# a decision_wait ends at once, so this only bounds a fault of ours.
DRAIN_SECONDS = 60.0
# Once standard input has ended (or a signal came), a client that takes
# nothing of a line for this long is not reading any more: the answers left
# are not written. A write to its full pipe held the process (and the agent
# session it kept) past the drain's bound, and past the client's SIGKILL.
# The SDK's client waits 2 s after closing our input, then signals.
OUTPUT_STALL_SECONDS = 2.0
# the requests the SDK serves before an `initialize` (it refused any other
# with an empty "Invalid request parameters")
_BEFORE_INITIALIZE = frozenset({"initialize", "ping"})
# Signals that end the process as the end of its input does (every request
# read is answered, the agent session ended); a second one ends it at once.
# Python's defaults ended it unanswered and with its agent session left live
# (SIGTERM, SIGHUP), or not until a line came in (SIGINT: the cancelled read
# waited in its thread).
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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
    if _is_lifecycle_listener(response):
        raise TokenRefused(
            f"{client.base_url} is Waypost's lifecycle listener (the decision-memo API, serve's"
            " --lifecycle-port), which has no tools' routes: give --url the public listener"
            " (serve's --port)"
        )
    if response.status_code == 401:
        raise TokenRefused(f"{client.base_url} refused the token in WAYPOST_TOKEN (401)")
    if response.status_code == 404:
        # a path the API is not under (`/mcp`, copied from the HTTP
        # transport's URL; `/api`): it started, and every tool answered
        # `not_found` with advice about ids (mcpconformance)
        raise TokenRefused(
            f"{client.base_url} has no Waypost API under it (GET /api/v1/me answered 404):"
            " give --url the public listener's base URL, the one /api/v1 is under, such"
            " as http://127.0.0.1:8080"
        )


def _is_lifecycle_listener(response: httpx.Response) -> bool:
    """Whether the answer is the lifecycle listener's refusal: its envelope is
    `{"error": "code"}`, the public one's error an object. Pointed there,
    `waypost mcp` said the token was refused, naming no way on (stdiocohabit)."""
    try:
        body = response.json()
    except ValueError:
        return False
    return (
        response.status_code in (401, 404)
        and isinstance(body, dict)
        and (isinstance(body.get("error"), str))
    )


def message_of_line(line: bytes) -> JSONRPCMessage | Refusal | None:
    """One line as the message for the SDK, the refusal to answer instead, or
    None for a line left unanswered (a client's response: this server asks
    nothing, and answering one could echo an id the client's requests use)."""
    if len(line) > MESSAGE_LIMIT:
        said = f"MCP messages are limited to {MESSAGE_LIMIT} bytes"
        return Refusal(request_id_of(line), INVALID_REQUEST, said)
    message: Any = read_message(line)
    if isinstance(message, Refusal) and message.silent:
        log.warning("a message was dropped unanswered (%s)", message.message)
        return None
    if isinstance(message, Refusal):
        return message
    if is_response(message):
        log.warning("a response to no request of this server was dropped (%.200s)", line)
        return None
    refusal = envelope_refusal(message) or unknown_method(message)
    if refusal is None and "id" in message:  # a request: held to MCP's schema
        refusal = params_refusal(message) or tool_refusal(message, tool_names())
    if refusal is not None:
        return refusal
    dropped = dropped_notification(message)
    if dropped is not None:
        if dropped:
            log.warning("a notification its schema refuses was dropped (%s)", dropped)
        return None
    try:
        return JSONRPCMessage.model_validate(message)
    except ValidationError:  # what envelope_refusal lets through, the model should take
        return Refusal(message.get("id"), INVALID_REQUEST, "not a JSON-RPC message")


ServerReads = MemoryObjectReceiveStream[SessionMessage | Exception]
ServerWrites = MemoryObjectSendStream[SessionMessage]


class ChunkSource(Protocol):
    async def read1(self, size: int, /) -> bytes: ...


async def lines_of(given: ChunkSource) -> AsyncIterator[bytes]:
    """Each line of `given` (blank ones too). A line past `ID_SEARCH_MAX` is
    cut there (refused as too long, with no id looked for) and the rest of
    it skipped as it arrives: a 40 MB line was read whole first. Each chunk
    is searched once; a `\r\n` split between two chunks makes one blank
    line more, which is no message."""
    parts: list[bytes] = []  # the line so far
    size = 0
    skipping = False  # in the rest of a line already cut
    while chunk := await given.read1(READ_CHUNK):
        *ended, rest = LINE_END.split(chunk)
        for piece in ended:
            if skipping:
                skipping = False  # the end of the line already cut
            else:
                yield b"".join((*parts, piece))
            parts, size = [], 0
        if skipping:
            continue
        parts.append(rest)
        size += len(rest)
        if size > ID_SEARCH_MAX:
            yield b"".join(parts)[: ID_SEARCH_MAX + 1]
            parts, size, skipping = [], 0, True
    if size and not skipping:
        yield b"".join(parts)


class _Unanswered:
    """The requests handed to the SDK and not answered yet, by id (a
    request reusing an id that is here is refused, as over /mcp)."""

    def __init__(self) -> None:
        self._ids: Counter[Any] = Counter()
        self._changed = anyio.Condition()
        # cancelled by the client: the next answer of each is not written
        self.cancelled: set[Any] = set()

    def add(self, request_id: Any) -> None:
        self._ids[request_id] += 1

    def __contains__(self, request_id: Any) -> bool:
        return request_id in self._ids

    async def answered(self, request_id: Any) -> None:
        if request_id not in self._ids:
            return
        self._ids[request_id] -= 1
        if not self._ids[request_id]:
            del self._ids[request_id]
        async with self._changed:
            self._changed.notify_all()

    async def drained(self) -> None:
        async with self._changed:
            while self._ids:
                await self._changed.wait()

    def __len__(self) -> int:
        return sum(self._ids.values())


@dataclass(frozen=True)
class Stdio:
    """The server's streams, and a way to end the input early (a signal)."""

    read: ServerReads
    write: ServerWrites
    stop_reading: Callable[[], None]


@contextlib.asynccontextmanager
async def checked_stdio(
    input_ended: asyncio.Event | None = None, calls: RunningCalls | None = None
) -> AsyncIterator[Stdio]:
    """The server's (read, write) streams over newline-delimited JSON-RPC on
    standard input and output (bytes: the UTF-8 check is the parser's).

    At the end of the input (or at `stop_reading`) `input_ended` is set (a
    decision_wait then ends) and the SDK's read stream is closed only once
    every request handed to it has been answered: the SDK cancels the calls
    still running when its stream ends, so a write piped in with its input
    closed behind it committed unanswered. A client's cancel goes to
    `calls` (the request's id as `running.id_key` gives it), not to the SDK."""
    given = StdinChunks(sys.stdin.fileno())
    taken = StdoutLines(sys.stdout.fileno())
    to_server: MemoryObjectSendStream[SessionMessage | Exception]
    server_reads: ServerReads
    to_server, server_reads = anyio.create_memory_object_stream(0)
    server_writes: ServerWrites
    from_server: MemoryObjectReceiveStream[SessionMessage]
    server_writes, from_server = anyio.create_memory_object_stream(0)
    one_line_at_a_time = anyio.Lock()
    unanswered = _Unanswered()
    # only the wait for input is cancelled: a line read is handed on whole
    reading = anyio.CancelScope()
    output_closed = False
    initialized = False
    input_over = False
    writing: anyio.CancelScope | None = None  # the write of a line, while it waits

    async def write_line(data: bytes) -> None:
        nonlocal output_closed, writing
        # one line for every line reader: a text holding U+2028 split an
        # answer for `str.splitlines` (unicodeaudit), as over /mcp
        data = line_breaks_escaped(data)
        async with one_line_at_a_time:
            if output_closed:
                return
            with anyio.CancelScope() as writing:
                if input_over:
                    writing.deadline = anyio.current_time() + OUTPUT_STALL_SECONDS
                try:
                    await taken.write(data + b"\n")
                except (BrokenPipeError, ConnectionResetError):
                    # the client stopped reading: what is running still ends
                    # (and commits) as it would, unread
                    output_closed = True
                except OSError as exc:
                    # a full device, a file that went away: nothing more can
                    # be written, and what is running still ends as it would
                    output_closed = True
                    log.error("standard output failed (%s): the answers left are not"
                              " written", exc.strerror or exc)  # fmt: skip
            if writing.cancelled_caught:
                output_closed = True
                log.warning("the client took no output for %.0f s after its input ended:"
                            " the answers left are not written", OUTPUT_STALL_SECONDS)  # fmt: skip
            writing = None

    def end_of_input() -> None:
        nonlocal input_over
        input_over = True
        if writing is not None:  # a write waiting since before: bounded from now
            writing.deadline = anyio.current_time() + OUTPUT_STALL_SECONDS

    async def hand_on(message: JSONRPCMessage) -> None:
        nonlocal initialized
        root = message.root
        if isinstance(root, JSONRPCRequest):
            if not initialized and root.method not in _BEFORE_INITIALIZE:
                said = "Received request before initialization was complete: send initialize first"
                await write_line(_compact(Refusal(root.id, INVALID_PARAMS, said).as_json()))
                return
            if root.id in unanswered:
                # as over /mcp (HTTP 409): MCP forbids reusing an id, and two
                # answers of one id, the second's first, passed a wait's answer
                # to a client as its task_create's (agentmcpjourney)
                said = (
                    "a request with this id is still running: wait for its answer"
                    " (sent again once it has answered, it is answered from its receipt)"
                )
                await write_line(_compact(Refusal(root.id, INVALID_REQUEST, said).as_json()))
                return
            initialized = initialized or root.method == "initialize"
            unanswered.add(root.id)
        elif isinstance(root, JSONRPCNotification) and root.method == "notifications/cancelled":
            # a string or an integer, as ids are (a list is unhashable, and
            # `true` equals the id 1): any other is ignored
            cancelled = cancelled_request(root.model_dump(by_alias=True, exclude_none=True))
            if cancelled is not None and cancelled in unanswered:
                unanswered.cancelled.add(cancelled)
                if calls is not None:
                    calls.cancel(id_key(cancelled), received=True)
            # taken here, not by the SDK, whose handling ended the process
            # when the cancel met the answer (running.py)
            return
        await to_server.send(SessionMessage(message))

    async def take_line(line: bytes) -> None:
        if not line.strip():  # a blank line is no message
            return
        found = message_of_line(line)
        if isinstance(found, Refusal):
            await write_line(_compact(found.as_json()))
        elif found is not None:
            await hand_on(found)

    async def read_lines() -> None:
        async with to_server:
            with reading:
                async for line in lines_of(given):
                    with anyio.CancelScope(shield=True):
                        await take_line(line)
            end_of_input()
            if input_ended is not None:
                input_ended.set()
            with anyio.move_on_after(DRAIN_SECONDS):
                await unanswered.drained()
            if len(unanswered):
                log.warning("standard input ended; %d requests still unanswered after %.0f s"
                            " are cancelled", len(unanswered), DRAIN_SECONDS)  # fmt: skip

    async def write_messages() -> None:
        async with from_server:
            async for sent in from_server:
                root = sent.message.root
                if isinstance(root, JSONRPCResponse | JSONRPCError):
                    # MCP: a request its client cancelled gets no answer,
                    # whatever it came to (a cancel can meet the answer);
                    # one cancel takes one answer (an id is in flight once:
                    # a request reusing it meanwhile is refused above)
                    dropped = root.id in unanswered.cancelled
                    unanswered.cancelled.discard(root.id)
                    await unanswered.answered(root.id)
                    if calls is not None:
                        calls.answered(id_key(root.id))
                    if dropped:
                        continue
                text = sent.message.model_dump_json(by_alias=True, exclude_none=True)
                await write_line(text.encode())

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_lines)
        tasks.start_soon(write_messages)
        yield Stdio(server_reads, server_writes, reading.cancel)


def _compact(data: dict[str, Any]) -> bytes:
    """JSON without spaces, as the SDK writes its lines (ASCII: a refusal may
    quote a client's lone surrogate, which UTF-8 cannot carry)."""
    return json.dumps(data, separators=(",", ":")).encode()


async def serve_stdio(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}", "User-Agent": f"waypost-mcp/{__version__}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30.0) as client:
        await check_token(client)
        backend = HttpBackend(client)
        # the client's going is the end of the input: a decision_wait then
        # ends at once, as one over /mcp does when its POST's client leaves
        input_ended = asyncio.Event()
        calls = RunningCalls(lambda ctx: id_key(ctx.request_id))
        server = build_server(lambda ctx: backend, calls, client_gone=lambda ctx: input_ended)
        async with anyio.create_task_group() as process:
            async with checked_stdio(input_ended, calls) as stdio:
                process.start_soon(_end_on_signals, stdio.stop_reading, process.cancel_scope)
                await server.run(stdio.read, stdio.write, server.create_initialization_options())
            process.cancel_scope.cancel()  # the signal watch


async def _end_on_signals(stop_reading: Callable[[], None], everything: anyio.CancelScope) -> None:
    """The first ending signal ends the input; a second ends the process now
    (the agent session is still ended: that call is shielded)."""
    with anyio.open_signal_receiver(*ENDING_SIGNALS) as signals:
        received = 0
        async for signum in signals:
            received += 1
            name = signal.Signals(signum).name
            if received == 1:
                log.warning("%s: answering the requests read, then ending (send it again to"
                            " end at once)", name)  # fmt: skip
                stop_reading()
            else:
                log.warning("%s again: ending at once", name)
                everything.cancel()
                return


def main(url: str, token: str) -> None:
    if sys.stdin is None or sys.stdout is None:  # Python's sign of a closed descriptor 0 or 1
        raise SystemExit(
            "waypost mcp: standard input and output must be open (an MCP client"
            " launches it with both piped)"
        )
    anyio.run(serve_stdio, url, token)
