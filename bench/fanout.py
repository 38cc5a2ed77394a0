"""`python -m bench --suite fanout`: 100 subscribers on one project while 16
writers create tasks, as SSE streams and as GraphQL subscriptions, against
the same writers alone.

One real `waypost serve` process (the loop and HTTP parser `serve` picks by
default) on loopback. The writers are 16 keep-alive connections of the
minimal raw HTTP client of bench/store.py, creating tasks back to back. The
subscribers are 100 real connections, either to
`GET /api/v1/projects/bench/events/stream`, read raw, or WebSockets to
`/graphql` (graphql-transport-ws), each with one `projectEvents`
subscription (a message per event) or one `projectEventBatches`
subscription (a message per wake), read with the `websockets` client; or
100 `decisionChanged` subscriptions of one pending decision on a task the
writers never touch (what a console page of that decision holds open): they
should cost the writers nothing. Rounds alternate, twice: with the 100 SSE
streams open, with each kind of 100 subscriptions, each between two rounds
of the writers alone and compared with the mean of those two (the database
grows as the rounds go, and creates slow down with it).

Each subscriber's event ids are checked against the events the database
holds for the round: every committed event, in order, each once. Delivery
time is measured per event, on 10 of the streams, from the moment the
write that made it was sent (the COMMIT follows it, so this bounds
commit-to-delivery from above) and from the moment its acknowledgement
arrived (the COMMIT precedes it). The streams are read by a process of
their own, as cheaply as a socket read allows; it still shares the
machine's two cores with the server and the writers.
Figures taken on a shared machine are noisy; the ratio is the point.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx

from bench.context import stop, wait_up
from bench.store import ROOT, free_port, percentile
from waypost.live.hub import LiveLimits
from waypost.resolvers.access import principals
from waypost.resolvers.projects.models import ProjectCreate
from waypost.resolvers.projects.operations import insert_project
from waypost.storage.db import connect_sync, run_write
from waypost.storage.migrate import migrate

WRITERS = 16
SUBSCRIBERS = 100
TIMED = 10  # subscribers that time every delivery
SECONDS = 4.0
PROJECT = "bench"
AT = "2026-11-30T00:00:00.000Z"
TASKS = f"/api/v1/projects/{PROJECT}/tasks"
STREAM = f"/api/v1/projects/{PROJECT}/events/stream"
_ID = re.compile(rb"^id: (\d+)$", re.M)
_SUBJECT = re.compile(rb'"subject_id":"([^"]+)"')
SUBSCRIPTIONS = {
    "graphql": f'subscription($after: Int) {{ projectEvents(projectId: "{PROJECT}",'
    " after: $after) { sequence subjectId } }",
    "graphql-batches": f'subscription($after: Int) {{ projectEventBatches(projectId: "{PROJECT}",'
    " after: $after) { events { sequence subjectId } } }",
    # a decision on a task nobody edits: nothing the writers do changes it
    "decision": "subscription($id: ID!) { decisionChanged(id: $id) { generation status } }",
}
_GRAPHQL_EVENT = re.compile(r'"sequence":\s*(\d+),\s*"subjectId":\s*"([^"]+)"')
# projectEvents last in each cycle: its 100 subscribers leave the server
# busy with their backlog after they go, which slowed the round after it
TRANSPORTS = ("sse", "graphql-batches", "decision", "graphql")
NAMES = {
    "sse": "SSE streams",
    "graphql": "GraphQL subscriptions (projectEvents)",
    "graphql-batches": "GraphQL subscriptions (projectEventBatches)",
    "decision": "GraphQL decisionChanged subscriptions (of a decision the writes leave alone)",
}


@dataclass
class Writes:
    """What the writers did in one round: acknowledged writes and, per task
    id, when its request went out and when its acknowledgement came back."""

    done: int = 0
    sent: dict[str, float] = field(default_factory=dict)
    acked: dict[str, float] = field(default_factory=dict)


async def write_for(port: int, token: str, seconds: float, tag: str) -> Writes:
    writes = Writes()
    stop_at = time.perf_counter() + seconds

    async def writer(worker: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            i = 0
            while time.perf_counter() < stop_at:
                body = json.dumps({"title": f"fan-out {tag} {worker} {i}"}).encode()
                head = (
                    f"POST {TASKS} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                    f"Idempotency-Key: {tag}-{worker}-{i}\r\nAuthorization: Bearer {token}\r\n\r\n"
                )
                sent = time.perf_counter()
                writer.write(head.encode() + body)
                head_bytes = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head_bytes).group(1))  # type: ignore[union-attr]
                payload = await reader.readexactly(length)
                acked = time.perf_counter()
                if head_bytes[9:12] != b"201":
                    raise SystemExit(f"task create answered {head_bytes[:12]!r}")
                task_id = json.loads(payload)["id"]
                writes.sent[task_id], writes.acked[task_id] = sent, acked
                writes.done += 1
                i += 1
        finally:
            writer.close()

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    return writes


@dataclass
class Subscriber:
    ids: list[int] = field(default_factory=list)
    messages: int = 0  # `next` messages received (GraphQL)
    # (subject id, time received) of every event, for the delivery times
    seen: list[tuple[bytes, float]] = field(default_factory=list)


async def subscribe(
    port: int, token: str, ready: asyncio.Event, stop: asyncio.Event, timed: bool
) -> Subscriber:
    """One SSE stream from the live tail until `stop`, read raw. Only `timed`
    subscribers note when each event arrived (this process shares the
    machine's two cores with the server: the readers are kept cheap)."""
    sub = Subscriber()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET {STREAM} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    if head[9:12] != b"200":
        raise SystemExit(f"event stream answered {head[:12]!r}")
    buffer = b""
    opened = False
    try:
        while not stop.is_set():
            try:
                async with asyncio.timeout(0.2):
                    chunk = await reader.read(262144)
            except TimeoutError:
                continue
            if not chunk:
                break
            now = time.perf_counter()
            buffer += chunk
            if not opened and b": stream open" in buffer:
                opened = True
                ready.set()
            # chunked transfer encoding: frames arrive whole in practice, but
            # only complete frames (ending in a blank line) are counted
            cut = buffer.rfind(b"\n\n")
            if cut < 0:
                continue
            done, buffer = buffer[: cut + 2], buffer[cut + 2 :]
            sub.ids.extend(map(int, _ID.findall(done)))
            if timed:
                sub.seen.extend((m, now) for m in _SUBJECT.findall(done))
    finally:
        writer.close()
    return sub


async def subscribe_graphql(
    port: int,
    token: str,
    ready: asyncio.Event,
    stop: asyncio.Event,
    timed: bool,
    query: str,
    variables: dict[str, Any],
) -> Subscriber:
    """One subscription (`projectEvents` or `projectEventBatches` from
    `after`, the last event before the round: nothing committed after it is
    missed, however long the subscribe takes; or `decisionChanged`) until
    `stop`. Each `next` message is read with a regular expression, not
    parsed, to keep this process cheap."""
    from websockets.asyncio.client import connect

    sub = Subscriber()
    async with connect(
        f"ws://127.0.0.1:{port}/graphql", subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
        max_size=None, ping_interval=None,
    ) as ws:  # fmt: skip
        await ws.send(json.dumps({"type": "connection_init",
                                  "payload": {"Authorization": f"Bearer {token}"}}))  # fmt: skip
        acked = json.loads(await ws.recv())
        if acked.get("type") != "connection_ack":
            raise SystemExit(f"graphql-transport-ws answered {acked!r}")
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {
            "query": query, "variables": variables}}))  # fmt: skip
        ready.set()
        while not stop.is_set():
            try:
                async with asyncio.timeout(0.2):
                    message = await ws.recv()
            except TimeoutError:
                continue
            now = time.perf_counter()
            sub.messages += 1
            for sequence, subject in _GRAPHQL_EVENT.findall(str(message)):
                sub.ids.append(int(sequence))
                if timed:
                    sub.seen.append((subject.encode(), now))
    return sub


CONTEXT = multiprocessing.get_context("spawn")


def read_streams(
    port: int, tokens: list[str], transport: str, variables: dict[str, Any], pipe: Connection
) -> None:
    """The subscribers' process: open every stream, say so, read until told
    to stop, then send back what each stream received."""

    async def main() -> None:
        stop = asyncio.Event()
        ready = [asyncio.Event() for _ in range(SUBSCRIBERS)]

        def one(i: int) -> Any:
            token, timed = tokens[i % len(tokens)], i < TIMED
            if transport in SUBSCRIPTIONS:
                query = SUBSCRIPTIONS[transport]
                return subscribe_graphql(port, token, ready[i], stop, timed, query, variables)
            return subscribe(port, token, ready[i], stop, timed)

        subs = [asyncio.create_task(one(i)) for i in range(SUBSCRIBERS)]
        await asyncio.gather(*(e.wait() for e in ready))
        pipe.send("open")
        await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
        stop.set()
        pipe.send(await asyncio.gather(*subs))

    asyncio.run(main())


def committed_ids(db: Path, after: int) -> list[int]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT sequence FROM events WHERE project_id = ? AND sequence > ? ORDER BY sequence",
            (PROJECT, after),
        ).fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows]


def last_id(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT coalesce(max(sequence), 0) FROM events").fetchone()[0])
    finally:
        conn.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Rounds:
    """Per kind of round: writes/s and server CPU per write of each round,
    and (with subscribers) the delivery times in seconds."""

    rates: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    from_send: list[float] = field(default_factory=list)
    from_ack: list[float] = field(default_factory=list)


async def subscribed_round(
    port: int, token: str, stream_tokens: list[str], db: Path, server_pid: int, r: int,
    transport: str, rounds: Rounds, decision_id: str,
) -> None:  # fmt: skip
    """One round of writes with the 100 subscribers open."""
    await asyncio.sleep(0.5)  # let the last events settle before the streams start
    start = last_id(db)
    # the streams are read by a process of their own, so that reading
    # them never delays the writers' event loop (both share the 2 cores)
    parent, child = CONTEXT.Pipe()
    variables = {"id": decision_id} if transport == "decision" else {"after": start}
    args = (port, stream_tokens, transport, variables, child)
    readers = CONTEXT.Process(target=read_streams, args=args)
    readers.start()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, parent.recv)  # every stream is open
    # a subscription is in place some time after its `subscribe` was sent
    # (nothing answers it): its set-up is not the writers' round
    await asyncio.sleep(1.0)
    cpu = cpu_seconds(server_pid)
    # a tag of its own per round: a key sent again would be a replay
    writes = await write_for(port, token, SECONDS, f"{transport}{r}")
    rounds.rates.append(writes.done / SECONDS)
    # the last commit's events reach every stream (a subscription may lag)
    expected = committed_ids(db, start)
    await asyncio.sleep(1.0 if transport == "sse" else 3.0)
    # the deliveries still going out after the writers stopped are theirs
    rounds.cpu.append((cpu_seconds(server_pid) - cpu) / writes.done)
    parent.send("stop")
    got: list[Subscriber] = await loop.run_in_executor(None, parent.recv)
    readers.join()
    if transport == "decision":
        one_state = sum(1 for s in got if s.messages == 1)
        print(f"  round {r + 1}, {transport}: {len(expected)} events committed during the"
              f" subscriptions; with the decision's one state, nothing more:"
              f" {one_state}/{SUBSCRIBERS}")  # fmt: skip
        return
    complete = sum(1 for s in got if s.ids == expected)
    print(f"  round {r + 1}, {transport}: {len(expected)} events committed during the"
          f" streams; with every event in order, once: {complete}/{SUBSCRIBERS}")  # fmt: skip
    for s in got:
        for subject, at in s.seen:
            key = subject.decode()
            if key in writes.sent:
                rounds.from_send.append(at - writes.sent[key])
                rounds.from_ack.append(at - writes.acked[key])


async def alone_round(port: int, token: str, server_pid: int, tag: str, alone: Rounds) -> None:
    # the subscribers of the round before have just gone: let the server
    # finish with them (100 sockets closing, messages still queued) first
    await asyncio.sleep(1.0)
    cpu = cpu_seconds(server_pid)
    done = (await write_for(port, token, SECONDS, tag)).done
    alone.cpu.append((cpu_seconds(server_pid) - cpu) / done)
    alone.rates.append(done / SECONDS)


async def measure(
    port: int, token: str, stream_tokens: list[str], db: Path, server_pid: int, decision_id: str
) -> None:
    """Each round with subscribers between two rounds of the writers alone,
    and compared with their mean: the database grows by thousands of tasks a
    round and a create gets slower as it grows (16 % from one cycle of rounds
    to the next), so a round compared with the first of its cycle alone
    looked slower the later it came in the cycle."""
    alone = Rounds()
    with_streams = {transport: Rounds() for transport in TRANSPORTS}
    # (kind, the index of the round alone just before it), in the order run
    order: list[tuple[str, int]] = []
    await alone_round(port, token, server_pid, "alone0", alone)
    for r in range(2):
        for transport, rounds in with_streams.items():
            await subscribed_round(port, token, stream_tokens, db, server_pid, r, transport, rounds,
                                   decision_id)  # fmt: skip
            order.append((transport, len(alone.rates) - 1))
            await alone_round(port, token, server_pid, f"alone{len(alone.rates)}", alone)
    a = statistics.median(alone.rates)
    ca = statistics.median(alone.cpu) * 1e3
    print(f"\n  writes/s, {WRITERS} writers alone:             {a:8.1f}  (rounds: "
          f"{', '.join(f'{x:.1f}' for x in alone.rates)})")  # fmt: skip
    print(f"  server CPU per write, alone:             {ca:8.3f} ms")
    for transport, rounds in with_streams.items():
        # against the mean of the rounds alone just before and just after
        befores = [i for kind, i in order if kind == transport]
        ratios = [rate / ((alone.rates[i] + alone.rates[i + 1]) / 2)
                  for rate, i in zip(rounds.rates, befores, strict=True)]  # fmt: skip
        cpu_ratios = [cpu / ((alone.cpu[i] + alone.cpu[i + 1]) / 2)
                      for cpu, i in zip(rounds.cpu, befores, strict=True)]  # fmt: skip
        s = statistics.median(rounds.rates)
        cs = statistics.median(rounds.cpu) * 1e3
        print(f"\n  with {SUBSCRIBERS} {NAMES[transport]}:")
        print(f"    writes/s:                              {s:8.1f}  (rounds: "
              f"{', '.join(f'{x:.1f}' for x in rounds.rates)})")  # fmt: skip
        print(
            f"    throughput with them / alone:          {statistics.median(ratios):8.3f}"
            f"  (rounds: {', '.join(f'{x:.3f}' for x in ratios)}; target: drop < 10%)"
        )
        print(f"    server CPU per write:                  {cs:8.3f} ms"
              f"  ({statistics.median(cpu_ratios) - 1:+.1%}: what they cost the writers where"
              " CPU is the limit; steadier than throughput on a shared machine)")  # fmt: skip
        if rounds.from_send:
            print(f"    delivery over {len(rounds.from_send)} event deliveries:")
            for label, samples in (
                ("write sent -> delivered (bounds commit-to-delivery above)", rounds.from_send),
                ("write acknowledged -> delivered", rounds.from_ack),
            ):
                p50, p90, p99 = (percentile(samples, q) * 1e3 for q in (0.5, 0.9, 0.99))
                print(f"      {label}: p50 {p50:.1f} ms, p90 {p90:.1f} ms, p99 {p99:.1f} ms")


def seed(db: Path) -> tuple[str, list[str]]:
    """The project, the writers' principal and enough subscriber principals
    for 100 streams under the per-token cap; returns their tokens."""
    conn = connect_sync(db)
    try:
        migrate(conn)
        made = [
            run_write(conn, lambda c, i=i: principals.create_principal(c, "human", f"p{i}", AT))
            for i in range(1 + -(-SUBSCRIBERS // LiveLimits().per_token))
        ]
        owner = made[0]["principal_id"]
        project = ProjectCreate(id=PROJECT, name="Bench")
        run_write(conn, lambda c: insert_project(c, project, owner, "human", AT))
    finally:
        conn.close()
    return made[0]["token"], [m["token"] for m in made[1:]]


def open_decision(port: int, token: str) -> str:
    """A pending decision on a task of its own, which the writers never edit."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
        task = client.post(TASKS, json={"title": "judged"}, headers={"Idempotency-Key": "t"})
        body = {"question": "Ship it?", "options": ["yes", "no"], "rationale": "bench",
                "task_ids": [task.json()["id"]], "required_actor": "human",
                "environment": "production"}  # fmt: skip
        made = client.post(f"/api/v1/projects/{PROJECT}/decisions", json=body,
                           headers={"Idempotency-Key": "d"})  # fmt: skip
        made.raise_for_status()
        decision_id: str = made.json()["id"]
    return decision_id


def run_suite(directory: Path) -> None:
    db = directory / "fanout.db"
    writer_token, stream_tokens = seed(db)
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("WAYPOST_CLOCK_FILE", None)
    # serve's own defaults: uvloop and httptools when installed
    cmd = [sys.executable, "-m", "bench.serve_variant", "--db", str(db), "--port", str(port),
           "--loop", "auto", "--http", "auto"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    try:
        wait_up(f"http://127.0.0.1:{port}/healthz", proc)
        decision_id = open_decision(port, writer_token)
        asyncio.run(measure(port, writer_token, stream_tokens, db, proc.pid, decision_id))
    finally:
        stop(proc)
