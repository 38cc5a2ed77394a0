"""`waypost mcp` over stdio at the edges of its input: the end of it, a line
of any length, a request MCP's schema refuses, a request its client cancels.
Each runs the real process against a real `waypost serve`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_support import Waypost
from tests.test_mcp import _an_agent_and_a_decision, own_waypost

pytestmark = pytest.mark.slow

HELLO = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.fixture(scope="module")
def waypost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Waypost]:
    with own_waypost(tmp_path_factory.mktemp("mcp-stdio")) as running:
        yield running


async def _mcp(waypost: Waypost | str, token: str, log: Path) -> asyncio.subprocess.Process:
    """`waypost mcp` for the service `waypost` (or at that URL)."""
    url = waypost if isinstance(waypost, str) else waypost.url
    with log.open("wb") as stderr:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "waypost.cli", "mcp", "--url", url,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            env={**os.environ, "WAYPOST_TOKEN": token, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip


async def _initialized(waypost: Waypost | str, token: str, log: Path) -> asyncio.subprocess.Process:
    """`waypost mcp` past its `initialize` (answered, as id 1)."""
    process = await _mcp(waypost, token, log)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(_line(HELLO) + _line(INITIALIZED))
    assert (await _answer(process))["id"] == 1
    return process


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _call(request_id: int, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}  # fmt: skip


async def _answer(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdout is not None
    got: dict[str, Any] = json.loads(await asyncio.wait_for(process.stdout.readline(), 30))
    return got


def _tool_text(answer: dict[str, Any]) -> str:
    text: str = answer["result"]["content"][0]["text"]
    return text


async def test_every_request_read_before_the_input_ends_is_answered(
    waypost: Waypost, tmp_path: Path
) -> None:
    """The process ended with its input, cancelling the calls still running: a
    record piped in with the input closed behind it was written 9 times in 10
    and answered none, so its client could not tell. Now each is answered (a
    decision_wait at once, as over /mcp when its client leaves) and then the
    process ends."""
    project, agent, decision = _an_agent_and_a_decision(waypost, "piped", "piper")
    process = await _mcp(waypost, agent, tmp_path / "mcp.log")
    assert process.stdin is not None and process.stdout is not None
    record = _call(2, "knowledge_record", project=project, kind="fact",
                   title="Piped in", body="Written with the input closed behind it.")  # fmt: skip
    wait = _call(3, "decision_wait", project=project, decision_id=decision["id"],
                 timeout_seconds=240)  # fmt: skip
    process.stdin.write(_line(HELLO) + _line(INITIALIZED) + _line(record) + _line(wait))
    process.stdin.write(_line({"jsonrpc": "2.0", "id": 4, "method": "ping"}))
    process.stdin.close()
    out = await asyncio.wait_for(process.stdout.read(), 60)  # the wait's bound is 240 s
    assert await asyncio.wait_for(process.wait(), 30) == 0
    answers = {m["id"]: m for m in map(json.loads, out.splitlines())}
    assert sorted(answers) == [1, 2, 3, 4]
    written = json.loads(_tool_text(answers[2]))
    stored = waypost.rest("GET", f"/api/v1/projects/{project}/knowledge/{written['id']}")
    assert stored.status_code == 200 and stored.json()["title"] == "Piped in"
    assert answers[3]["result"]["isError"] is True
    assert "client went away" in _tool_text(answers[3])


async def test_an_answer_is_one_line_for_every_line_reader(
    waypost: Waypost, tmp_path: Path
) -> None:
    """NEL, U+2028 and U+2029 were written raw: an answer carrying a text
    with one was two lines or more to `str.splitlines` (unicodeaudit)."""
    project, agent, _ = _an_agent_and_a_decision(waypost, "lines", "liner")
    process = await _initialized(waypost, agent, tmp_path / "mcp.log")
    assert process.stdin is not None and process.stdout is not None
    body = "a\x85b\u2028c\u2029d"
    process.stdin.write(_line(_call(2, "knowledge_record", project=project, kind="fact",
                                    title="Separators", body=body)))  # fmt: skip
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    process.stdin.close()
    assert await asyncio.wait_for(process.wait(), 30) == 0
    assert len(line.decode().splitlines()) == 1, line
    assert json.loads(_tool_text(json.loads(line)))["body"] == body


async def test_a_line_of_any_length_is_refused_in_bounded_memory(
    waypost: Waypost, tmp_path: Path
) -> None:
    """A 40 MB line was read whole before it was refused (the process's peak
    memory grew by about twice the line). Past the id search's bound it is
    cut and the rest skipped as it arrives; the session serves on."""
    token = waypost.principal("agent", "long-liner")
    process = await _mcp(waypost, token, tmp_path / "mcp.log")
    assert process.stdin is not None
    try:
        process.stdin.write(_line(HELLO))
        assert (await _answer(process))["id"] == 1
        before = _peak_memory_kib(process.pid)
        head = b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "pad": "'
        process.stdin.write(head + b"x" * 40_000_000 + b'"}\n')
        await process.stdin.drain()
        refused = await _answer(process)
        # a line past the id search's bound is refused without its id, as
        # /mcp refuses such a body
        assert refused["id"] is None and refused["error"]["code"] == -32600, refused
        assert "limited to" in refused["error"]["message"]
        grown = _peak_memory_kib(process.pid) - before
        assert grown < 16 * 1024, f"peak memory grew by {grown} KiB for one 40 MB line"
        process.stdin.write(_line({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
        assert (await _answer(process))["id"] == 8
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)


def _peak_memory_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc")


async def test_a_request_mcp_refuses_is_answered_with_its_reason(
    waypost: Waypost, tmp_path: Path
) -> None:
    """The SDK answered each of these "Invalid request parameters" with an
    empty `data`, and logged its whole validation report (about 6,000
    characters); `/mcp` named the field of a bad initialize. Both transports
    now name it, and stdio says a request came before `initialize`."""
    token = waypost.principal("agent", "mis-sender")
    log = tmp_path / "mcp.log"
    process = await _mcp(waypost, token, log)
    assert process.stdin is not None
    try:
        early = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        no_client = {**HELLO, "id": 2, "params": {"protocolVersion": "2025-06-18",
                                                  "capabilities": {}}}  # fmt: skip
        nameless = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"arguments": {}}}  # fmt: skip
        listed = {**_call(5, "digest"), "params": {"name": "digest", "arguments": [1]}}
        expected = [
            (early, "initialize"),
            (no_client, "params.clientInfo"),
            ({**HELLO, "id": 3}, None),
            (nameless, "params.name"),
            (listed, "params.arguments"),
        ]
        for message, named in expected:
            process.stdin.write(_line(message))
            got = await _answer(process)
            assert got["id"] == message["id"], got
            if named is None:
                assert "result" in got, got
            else:
                assert got["error"]["code"] == -32602 and named in got["error"]["message"], got
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)
    assert "Failed to validate request" not in log.read_text()


async def test_a_request_its_client_cancelled_gets_no_answer(
    waypost: Waypost, tmp_path: Path
) -> None:
    """MCP: the receiver of a cancellation should not answer the cancelled
    request. The SDK answered it `{"code": 0, "message": "Request cancelled"}`."""
    project, agent, decision = _an_agent_and_a_decision(waypost, "called-off", "canceller")
    process = await _initialized(waypost, agent, tmp_path / "mcp.log")
    assert process.stdin is not None and process.stdout is not None
    try:
        wait = _call(9, "decision_wait", project=project, decision_id=decision["id"],
                     timeout_seconds=240)  # fmt: skip
        process.stdin.write(_line(wait))
        await asyncio.sleep(0.5)  # the wait is running
        # ids no request can have are ignored, as the SDK ignores them: a
        # list or an object crashed the process (unhashable), and `true`
        # (equal to 1) marked another request cancelled
        for odd in ({"a": 1}, [9], True, 9.0, None):
            process.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": odd}}))  # fmt: skip
        process.stdin.write(_line({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
        assert (await _answer(process))["id"] == 8
        process.stdin.write(
            _line(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 9, "reason": "no longer needed"},
                }
            )
        )
        await asyncio.sleep(0.5)  # what the SDK answers the cancellation comes first
        process.stdin.write(_line({"jsonrpc": "2.0", "id": 10, "method": "ping"}))
        got = await _answer(process)
        assert got["id"] == 10, got
    finally:
        process.stdin.close()
        rest = await asyncio.wait_for(process.stdout.read(), 30)
        await asyncio.wait_for(process.wait(), 30)
    # nothing for request 9, not even at the end of the input (where a wait
    # still running answers that its client went away)
    assert rest == b""


async def test_a_cancel_that_meets_the_answer_ends_nothing(
    waypost: Waypost, tmp_path: Path
) -> None:
    """A cancel that arrived after a call's work was done and before its
    answer was sent made the SDK assert ("Request already responded to"),
    which ended the whole session: over stdio the process exited with
    status 1 (an audit: after 6 calls each cancelled 3 ms after it was sent),
    over /mcp the session (after 39). Each call now either answers or is
    cancelled, and the session goes on."""
    agent = waypost.principal("agent", "prompt-canceller")
    process = await _initialized(waypost, agent, tmp_path / "mcp.log")
    assert process.stdin is not None and process.stdout is not None
    answered: set[int] = set()

    async def read_answers() -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            answered.add(json.loads(line)["id"])

    try:
        reader = asyncio.create_task(read_answers())
        for request_id in range(100, 400):
            try:
                process.stdin.write(_line(_call(request_id, "me")))
                await process.stdin.drain()
                # from at once to about the time a call takes, so that some
                # cancels meet a call between its work and its answer
                await asyncio.sleep((request_id % 7) * 0.0008)
                process.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                           "params": {"requestId": request_id}}))  # fmt: skip
            except ConnectionResetError:
                pytest.fail("the process ended: " + (tmp_path / "mcp.log").read_text()[-2000:])
        process.stdin.write(_line({"jsonrpc": "2.0", "id": 999, "method": "ping"}))
        await process.stdin.drain()
        for _ in range(300):
            if 999 in answered:
                break
            await asyncio.sleep(0.1)
        assert 999 in answered, (tmp_path / "mcp.log").read_text()
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)
        reader.cancel()
    assert process.returncode == 0
    log = (tmp_path / "mcp.log").read_text()
    assert "Traceback" not in log and "already responded" not in log, log


async def test_a_cancel_right_behind_its_request_still_cancels_it(
    waypost: Waypost, tmp_path: Path
) -> None:
    """A cancel read before its call's handler had started (the SDK starts
    each in a task of its own) was ignored: the cancelled waits ran on to
    their bound, each holding one of the token's 16 streams, and the next
    wait was refused `too_many_streams` (an audit: 16 waits, each followed
    at once by its cancel). Kept until the call starts, it cancels it."""
    project, agent, decision = _an_agent_and_a_decision(waypost, "cancelled-at-once", "hasty")
    process = await _initialized(waypost, agent, tmp_path / "mcp.log")
    assert process.stdin is not None and process.stdout is not None
    try:
        for request_id in range(100, 116):
            wait = _call(request_id, "decision_wait", project=project,
                         decision_id=decision["id"], timeout_seconds=240)  # fmt: skip
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": request_id}}  # fmt: skip
            process.stdin.write(_line(wait) + _line(cancel))
        await asyncio.sleep(1)  # the cancelled waits give their streams back
        last = _call(200, "decision_wait", project=project, decision_id=decision["id"],
                     timeout_seconds=1)  # fmt: skip
        process.stdin.write(_line(last))
        answer = await _answer(process)
        # no answer for the 16 cancelled ones; the 17th has a stream of its own
        assert answer["id"] == 200, answer
        assert "too_many_streams" not in _tool_text(answer), answer
        assert json.loads(_tool_text(answer))["outcome"] == "timeout", answer
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)


async def test_a_cancel_takes_one_answer_of_an_id_used_twice(
    waypost: Waypost, tmp_path: Path
) -> None:
    """MCP forbids using an id twice, but a client that did (a ping, its
    cancel, then a task_create with the ping's id) lost the second request
    whole: the cancel kept for the ping, which has no call to cancel, was
    handed to the task_create as it started, and its answer was dropped
    too (review35: 10 rounds, no task made and no answer). One cancel takes
    one answer: each task_create is made, answered as cancelled, or refused
    as still running (the ping not answered yet, as over /mcp)."""
    project = waypost.project("reused-ids")
    agent = waypost.principal("agent", "reuser")
    process = await _initialized(waypost, agent, tmp_path / "mcp.log")
    assert process.stdin is not None and process.stdout is not None
    try:
        for n in range(100, 110):
            create = _call(n, "task_create", project=project, title=f"Reused {n}",
                           idempotency_key=f"reused-{n}")  # fmt: skip
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": n}}  # fmt: skip
            ping = {"jsonrpc": "2.0", "id": n, "method": "ping"}
            process.stdin.write(_line(ping) + _line(cancel) + _line(create))
        process.stdin.write(_line({"jsonrpc": "2.0", "id": 999, "method": "ping"}))
        answers: dict[int, list[dict[str, Any]]] = {}
        while 999 not in answers:
            got = await _answer(process)
            answers.setdefault(got["id"], []).append(got)
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)
    listed = waypost.rest("GET", f"/api/v1/projects/{project}/tasks?limit=100").json()["items"]
    made = {t["title"] for t in listed}
    for n in range(100, 110):
        told = [a for a in answers.get(n, []) if "result" in a and "content" in a["result"]]
        cancelled = any(_tool_text(a) == "Request cancelled" for a in told)
        running = any(a.get("error", {}).get("code") == -32600 for a in answers.get(n, []))
        assert (f"Reused {n}" in made) != running or cancelled, (n, answers.get(n), made)


async def test_an_id_still_running_is_refused_as_over_http(
    waypost: Waypost, tmp_path: Path
) -> None:
    """A decision_wait with id 500, then a task_create with id 500: both ran,
    and the task_create's answer came first under the wait's id, which a
    client takes as the wait's (agentmcpjourney). Over /mcp the second is
    refused at once, HTTP 409 `-32600` "still running": so it is here."""
    project = waypost.project("reused-running")
    task_id = waypost.task(project, "Held")
    decision = waypost.rest("POST", f"/api/v1/projects/{project}/decisions", {
        "question": "Go?", "options": ["Yes", "No"], "rationale": "r",
        "required_actor": "human", "task_ids": [task_id], "environment": "dev"}).json()  # fmt: skip
    agent = waypost.principal("agent", "reuser-running")
    process = await _initialized(waypost, agent, tmp_path / "mcp.log")
    assert process.stdin is not None and process.stdout is not None
    try:
        wait = _call(500, "decision_wait", project=project, decision_id=decision["id"],
                     timeout_seconds=2)  # fmt: skip
        create = _call(500, "task_create", project=project, title="Never made",
                       idempotency_key="never-made")  # fmt: skip
        process.stdin.write(_line(wait) + _line(create))
        first = await _answer(process)
        assert first["id"] == 500 and first["error"]["code"] == -32600, first
        assert "still running" in first["error"]["message"], first
        second = await _answer(process)
        assert second["id"] == 500 and json.loads(_tool_text(second))["outcome"] == "timeout"
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)
    listed = waypost.rest("GET", f"/api/v1/projects/{project}/tasks").json()["items"]
    assert [t["title"] for t in listed] == ["Held"]


@pytest.mark.parametrize(
    "ending", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
)
async def test_a_signal_ends_the_process_as_its_input_ending_does(
    waypost: Waypost, tmp_path: Path, ending: signal.Signals
) -> None:
    """SIGTERM and SIGHUP killed the process at once, leaving the agent
    session it kept live (with its leases' authority) for 15 minutes; after
    a tool call SIGINT did nothing until a line came in (the cancelled read
    waited in its thread). Each now ends it as the end of its input does."""
    project = waypost.project(f"signalled-{ending.name.lower()}")
    task_id = waypost.task(project)
    agent = waypost.principal("agent", f"signalled-{ending.name.lower()}")
    process = await _mcp(waypost, agent, tmp_path / "mcp.log")
    assert process.stdin is not None
    process.stdin.write(_line(HELLO) + _line(INITIALIZED))
    assert (await _answer(process))["id"] == 1
    process.stdin.write(_line(_call(2, "task_claim", project=project, task_id=task_id)))
    claimed = await _answer(process)
    session_id = claimed["result"]["structuredContent"]["lease"]["session_id"]
    process.send_signal(ending)
    assert await asyncio.wait_for(process.wait(), 15) == 0
    beat = waypost.rest("POST", f"/api/v1/sessions/{session_id}/heartbeat", {}, token=agent)
    assert beat.status_code == 403, beat.text
    assert beat.json()["error"]["details"]["reason"] == "session_not_live"
    process.stdin.close()


async def test_a_second_signal_ends_the_process_at_once(tmp_path: Path) -> None:
    """The first signal waits for the answers of the calls on their way (up
    to 60 s); a second one does not."""
    async with _a_service_that_never_answers_a_call() as (url, held):
        process = await _mcp(url, "wp_any", tmp_path / "mcp.log")
        assert process.stdin is not None
        process.stdin.write(_line(HELLO) + _line(INITIALIZED))
        assert (await _answer(process))["id"] == 1
        process.stdin.write(_line(_call(2, "policy", project="stalled")))
        await asyncio.wait_for(held.wait(), 10)  # the call is on its way
        process.send_signal(signal.SIGTERM)
        with pytest.raises(TimeoutError):  # the call is waited for
            await asyncio.wait_for(asyncio.shield(process.wait()), 2)
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 10)
    assert "ending at once" in (tmp_path / "mcp.log").read_text()


@contextlib.asynccontextmanager
async def _a_service_that_never_answers_a_call() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """An HTTP server that accepts the token (`GET /api/v1/me`) and holds
    every other request unanswered until it stops: its URL, and an event set
    once it holds one."""
    stopping, held = asyncio.Event(), asyncio.Event()
    handlers: set[asyncio.Task[Any]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            while (await reader.readuntil(b"\r\n\r\n")).startswith(b"GET /api/v1/me "):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: 2\r\n\r\n{}")  # fmt: skip
            held.set()
            await stopping.wait()  # any other request is held
        except asyncio.IncompleteReadError:  # the client closed the connection
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", held
    finally:
        stopping.set()
        server.close()
        await server.wait_closed()
        await asyncio.gather(*handlers)


def test_a_non_blocking_standard_input_is_read_as_a_blocking_one(tmp_path: Path) -> None:
    """A client may hand over a pipe in non-blocking mode: a read with nothing
    there yet raises EAGAIN instead of waiting, which is no end of input."""
    import fcntl
    import subprocess
    import time

    reading, writing = os.pipe()
    fcntl.fcntl(reading, fcntl.F_SETFL, fcntl.fcntl(reading, fcntl.F_GETFL) | os.O_NONBLOCK)
    with (tmp_path / "mcp.log").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "waypost.cli", "mcp", "--url", "http://127.0.0.1:9"],
            stdin=reading, stdout=subprocess.PIPE, stderr=stderr,
            env={**os.environ, "WAYPOST_TOKEN": "wp_any"},
        )  # fmt: skip
    os.close(reading)
    try:
        time.sleep(1)  # it reads a pipe with nothing in it
        assert process.poll() is None
        os.write(writing, _line(HELLO))
        assert process.stdout is not None
        assert json.loads(process.stdout.readline())["id"] == 1
    finally:
        os.close(writing)
        code = process.wait(30)
        if process.stdout is not None:
            process.stdout.close()
    assert code == 0


async def test_a_second_signal_ends_it_though_its_client_stopped_reading(tmp_path: Path) -> None:
    """Its output was written in anyio's worker threads, and a write to a full
    pipe cannot be cancelled: with a client that no longer read, the second
    signal's "at once" waited for ever."""
    import fcntl

    log = tmp_path / "mcp.log"
    # its output goes to a pipe of the test's own, which the test can look
    # into (asyncio's would read it into a buffer meanwhile)
    reading, writing = os.pipe()
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "waypost.cli", "mcp", "--url", "http://127.0.0.1:9",
            stdin=asyncio.subprocess.PIPE, stdout=writing, stderr=stderr,
            env={**os.environ, "WAYPOST_TOKEN": "wp_any", "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    os.close(writing)
    try:
        assert process.stdin is not None
        process.stdin.write(_line(HELLO) + _line(INITIALIZED))
        first = b""
        while not first.endswith(b"\n"):
            first += await asyncio.wait_for(asyncio.to_thread(os.read, reading, 65536), 30)
        assert json.loads(first)["id"] == 1
        # answers no one reads, more than a pipe holds (each lists every tool)
        listing = b"".join(_line({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/list"})
                           for i in range(40))  # fmt: skip
        process.stdin.write(listing)
        holds = fcntl.fcntl(reading, fcntl.F_GETPIPE_SZ)
        for _ in range(600):  # until the pipe is full (a page short: a write waits)
            if _unread(reading) >= holds - 4096:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the pipe never filled")
        process.send_signal(signal.SIGTERM)
        for _ in range(600):  # until the first signal has been taken
            if "then ending" in log.read_text():
                break
            await asyncio.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        exited = await _exit_status(process, 10)
        process.stdin.close()
        while await asyncio.wait_for(asyncio.to_thread(os.read, reading, 65536), 10):
            pass  # what was left unread
        await asyncio.wait_for(process.wait(), 10)
    finally:
        os.close(reading)
    assert exited is not None
    assert "ending at once" in log.read_text()


def _unread(fd: int) -> int:
    """How many bytes wait in the pipe `fd`."""
    import fcntl
    import struct
    import termios

    answer = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
    unread: int = struct.unpack("i", answer)[0]
    return unread


async def _exit_status(process: asyncio.subprocess.Process, seconds: float) -> int | None:
    """The process's exit status once it has exited, None if it has not within
    `seconds` (then it is killed). asyncio's `wait()` also waits for the end
    of the output, which a pipe left unread never reaches: on a loaded
    machine the test's own reader had paused, and `wait()` timed out though
    the process had exited at once."""
    for _ in range(int(seconds * 10)):
        if process.returncode is not None:
            return process.returncode
        await asyncio.sleep(0.1)
    process.kill()
    return None


async def test_a_client_that_stopped_reading_does_not_hold_it_after_its_input_ends(
    waypost: Waypost, tmp_path: Path
) -> None:
    """A write to a full pipe held the process past the drain's 60 s (for
    ever), and so the agent session it kept: a client that closed our input
    without reading the answers left, then killed us as MCP says, left the
    session live. Once the input has ended, a client that takes nothing for
    2 s is no longer read for."""
    project = waypost.project("unread")
    task_id = waypost.task(project)
    agent = waypost.principal("agent", "unreader")
    process = await _mcp(waypost, agent, tmp_path / "mcp.log")
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(_line(HELLO) + _line(INITIALIZED))
    assert (await _answer(process))["id"] == 1
    process.stdin.write(_line(_call(2, "task_claim", project=project, task_id=task_id)))
    session_id = (await _answer(process))["result"]["structuredContent"]["lease"]["session_id"]
    listing = b"".join(_line({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/list"})
                       for i in range(40))  # fmt: skip
    process.stdin.write(listing)
    process.stdin.close()  # and never read again
    assert await _exit_status(process, 15) == 0  # killed if held, as before
    beat = waypost.rest("POST", f"/api/v1/sessions/{session_id}/heartbeat", {}, token=agent)
    assert beat.status_code == 403, beat.text
    await asyncio.wait_for(process.stdout.read(), 10)  # what was left unread
    await asyncio.wait_for(process.wait(), 10)
    assert "took no output" in (tmp_path / "mcp.log").read_text()


def test_a_non_blocking_standard_output_gets_every_answer_whole(tmp_path: Path) -> None:
    """A client may hand over its pipe in non-blocking mode: a write to it
    when full raises EAGAIN, or writes part of a line. Every answer still
    arrives whole, one per line (through anyio's file, answers were lost)."""
    import fcntl
    import subprocess

    reading, writing = os.pipe()
    fcntl.fcntl(writing, fcntl.F_SETFL, fcntl.fcntl(writing, fcntl.F_GETFL) | os.O_NONBLOCK)
    requests = (
        _line(HELLO)
        + _line(INITIALIZED)
        + b"".join(
            _line({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/list"}) for i in range(30)
        )
    )
    with (tmp_path / "mcp.log").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "waypost.cli", "mcp", "--url", "http://127.0.0.1:9"],
            stdin=subprocess.PIPE, stdout=writing, stderr=stderr,
            env={**os.environ, "WAYPOST_TOKEN": "wp_any"},
        )  # fmt: skip
    os.close(writing)
    assert process.stdin is not None
    process.stdin.write(requests)
    process.stdin.close()
    out = b""
    with os.fdopen(reading, "rb") as answers:
        while chunk := answers.read(4096):  # slowly: the pipe fills again and again
            out += chunk
            time.sleep(0.002)
    assert process.wait(30) == 0
    ids = [json.loads(line)["id"] for line in out.splitlines()]
    assert ids == [1, *range(100, 130)]


def test_a_client_that_closed_our_output_is_still_served_to_the_end(tmp_path: Path) -> None:
    """The answers go nowhere (EPIPE), but what was read still runs and the
    process ends at the end of its input, without a traceback."""
    import subprocess

    requests = (
        _line(HELLO)
        + _line(INITIALIZED)
        + b"".join(_line({"jsonrpc": "2.0", "id": 100 + i, "method": "ping"}) for i in range(30))
    )
    with (tmp_path / "mcp.log").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "waypost.cli", "mcp", "--url", "http://127.0.0.1:9"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env={**os.environ, "WAYPOST_TOKEN": "wp_any"},
        )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    process.stdout.close()
    process.stdin.write(requests)
    process.stdin.close()
    assert process.wait(30) == 0
    assert "Traceback" not in (tmp_path / "mcp.log").read_text()


def test_an_output_that_cannot_be_written_is_logged_once_without_a_traceback(
    tmp_path: Path,
) -> None:
    """A full device (ENOSPC) ends the output as a closed pipe does: what was
    read still runs, the process ends at the end of its input, and the log
    says why the answers went unwritten, once."""
    import subprocess

    requests = (
        _line(HELLO)
        + _line(INITIALIZED)
        + b"".join(_line({"jsonrpc": "2.0", "id": 100 + i, "method": "ping"}) for i in range(5))
    )
    with (tmp_path / "mcp.log").open("wb") as stderr, open("/dev/full", "wb") as full:
        process = subprocess.Popen(
            [sys.executable, "-m", "waypost.cli", "mcp", "--url", "http://127.0.0.1:9"],
            stdin=subprocess.PIPE, stdout=full, stderr=stderr,
            env={**os.environ, "WAYPOST_TOKEN": "wp_any"},
        )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(requests)
    process.stdin.close()
    assert process.wait(30) == 0
    said = (tmp_path / "mcp.log").read_text()
    assert "Traceback" not in said
    assert said.count("standard output failed (No space left on device)") == 1


def test_a_closed_standard_output_is_refused_with_a_reason(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "waypost.cli", "mcp", "--url", "http://127.0.0.1:9"],
        input=_line(HELLO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "WAYPOST_TOKEN": "wp_any"}, timeout=30,
        preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert done.returncode == 1
    said = done.stderr.decode()
    assert "standard input and output must be open" in said
    assert "Traceback" not in said


async def test_a_resource_uri_is_held_to_its_pattern_as_sent_over_stdio(
    waypost: Waypost, tmp_path: Path
) -> None:
    """The SDK normalises a URI before the server sees it: a tab inside, a
    line break at its end or `..` read the project's policy over stdio too."""
    project = waypost.project("stdio-uris")
    token = waypost.principal("agent", "uri-reader")
    process = await _initialized(waypost, token, tmp_path / "mcp.log")
    assert process.stdin is not None
    read = {"jsonrpc": "2.0", "method": "resources/read"}
    try:
        good = f"waypost://projects/{project}/policy"
        sent = [
            good.replace("stdio", "st\tdio"),
            good + "\n",
            good.replace("/policy", "/x/../policy"),
        ]
        for n, uri in enumerate(sent, start=2):
            process.stdin.write(_line({**read, "id": n, "params": {"uri": uri}}))
            got = await _answer(process)
            assert got["error"]["code"] == -32002, got
            assert got["error"]["message"].startswith(f"unknown resource {uri[:40]}"), got
        process.stdin.write(_line({**read, "id": 9, "params": {"uri": good}}))
        assert (await _answer(process))["result"]["contents"][0]["uri"] == good
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)


def test_a_refused_token_stops_it_with_an_error_on_standard_error(waypost: Waypost) -> None:
    """docs/mcp.md: at start it asks `GET /api/v1/me`, and a refused token
    stops it with an error on standard error, exit status 1 (mcpdocaudit: the
    official client's failing to connect was pinned, not the status or where
    the error is said)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "waypost.cli", "mcp", "--url", waypost.url],
        input=_line(HELLO) + _line(INITIALIZED), capture_output=True,
        env={**os.environ, "WAYPOST_TOKEN": "wp_not-a-token"}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == b""  # standard output is the protocol's: nothing there
    said = done.stderr.decode()
    assert "refused the token in WAYPOST_TOKEN" in said and "Traceback" not in said


async def test_an_unreachable_service_lets_it_start_and_its_tools_answer_unavailable(
    tmp_path: Path,
) -> None:
    """docs/mcp.md: an unreachable Waypost does not stop it (a desktop client
    may start it first), and the tools then answer `unavailable` until the
    service is up (mcpdocaudit: the start was pinned, not the tools' answer)."""
    log = tmp_path / "mcp.log"
    process = await _initialized("http://127.0.0.1:9", "wp_any", log)
    assert process.stdin is not None
    process.stdin.write(_line(_call(2, "me")))
    answer = await _answer(process)
    assert answer["id"] == 2 and answer["result"]["isError"], answer
    assert _tool_text(answer).startswith("unavailable: cannot reach Waypost"), answer
    process.stdin.close()
    assert await asyncio.wait_for(process.wait(), 60) == 0
    assert "cannot reach http://127.0.0.1:9 yet" in log.read_text()
