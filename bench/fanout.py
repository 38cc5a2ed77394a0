"""`python -m bench --suite fanout`: 100 listeners on one project while 16
writers create tasks through the API, against the same writers alone.

Both phases run the full ASGI app in one process (in-process httpx client),
alternated twice, for a few seconds each. The listeners are the hub's own
(`waypost.live`): the part every SSE stream and GraphQL subscription shares;
the socket per client is left out. Each listener checks that it received
every committed event of the project, in order, each once. Commit-to-delivery
is measured from the first commit callback that the hub had not yet read
(an upper bound: later commits of the same read waited less). Figures taken
on a shared machine are noisy; the ratio is the point.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from pathlib import Path
from typing import Any

from bench.graphql import API, Bench, bench_service
from waypost.live import hub_for

WRITERS = 16
LISTENERS = 100
SECONDS = 3.0


async def write_for(b: Bench, seconds: float) -> int:
    """16 writers creating tasks for `seconds`; returns the writes acknowledged."""
    done = 0
    stop = time.perf_counter() + seconds
    names = itertools.count()

    async def writer() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await b.send("POST", f"{API}/tasks", {"title": f"fan-out {next(names)}"})
            done += 1

    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    return done


async def run_suite(directory: Path) -> None:
    async with bench_service(directory / "fanout.db") as b:
        hub = hub_for(b.rt)
        await hub.start()
        commit_times: list[float] = []
        seq_commit: dict[int, float] = {}
        original_committed, original_read = hub.committed, hub._read_new

        def committed() -> None:
            commit_times.append(time.perf_counter())
            original_committed()

        async def read_new() -> None:
            pending = commit_times[:]
            commit_times.clear()
            before = hub.position
            await original_read()
            if pending:
                for seq in range(before + 1, hub.position + 1):
                    seq_commit[seq] = pending[0]

        b.rt.db.remove_commit_listener(original_committed)
        b.rt.db.add_commit_listener(committed)
        hub._read_new = read_new  # type: ignore[method-assign]

        alone: list[float] = []
        shared: list[float] = []
        latencies: list[float] = []
        received: list[list[int]] = []
        for _round in range(2):
            alone.append(await write_for(b, SECONDS) / SECONDS)
            start = hub.position
            stop = asyncio.Event()
            got: list[list[int]] = [[] for _ in range(LISTENERS)]

            async def listen(
                i: int, start: int = start, stop: asyncio.Event = stop, got: list[list[int]] = got
            ) -> None:
                async with hub.listen("dash", f"bench-{i}", start) as listener:
                    while not stop.is_set() or listener.last < hub.position:
                        batch = await listener.next_batch(0.2)
                        now = time.perf_counter()
                        for e in batch:
                            got[i].append(e["sequence"])
                            if e["sequence"] in seq_commit:
                                latencies.append(now - seq_commit[e["sequence"]])

            tasks = [asyncio.create_task(listen(i)) for i in range(LISTENERS)]
            await asyncio.sleep(0.2)
            shared.append(await write_for(b, SECONDS) / SECONDS)
            last = await b.rt.db.read(lambda c: _all_after(c, 0)[-1])
            while hub.position < last:  # the hub has read every committed event
                await asyncio.sleep(0.01)
            stop.set()
            await asyncio.gather(*tasks)
            expected = await b.rt.db.read(lambda c, s=start: _all_after(c, s))
            received.extend(got)
            bad = sum(1 for g in got if g != expected)
            print(f"  round {_round + 1}: {len(expected)} events committed; listeners with"
                  f" every event in order, once: {LISTENERS - bad}/{LISTENERS}")  # fmt: skip
        a, s = statistics.median(alone), statistics.median(shared)
        print(f"\n  writes/s, 16 writers alone:            {a:8.1f}  (rounds: "
              f"{', '.join(f'{x:.1f}' for x in alone)})")  # fmt: skip
        print(f"  writes/s, with 100 listeners:          {s:8.1f}  (rounds: "
              f"{', '.join(f'{x:.1f}' for x in shared)})")  # fmt: skip
        print(f"  throughput with listeners / alone:     {s / a:8.3f}  (target: drop < 10%)")
        b.rt.db.remove_commit_listener(committed)
        b.rt.db.add_commit_listener(original_committed)
        lat = sorted(latencies)
        if lat:
            p = [lat[int(q * (len(lat) - 1))] * 1e3 for q in (0.5, 0.9, 0.99)]
            print(f"  commit-to-delivery over {len(lat)} deliveries: p50 {p[0]:.1f} ms,"
                  f" p90 {p[1]:.1f} ms, p99 {p[2]:.1f} ms (under shared load)")  # fmt: skip


def _all_after(conn: Any, start: int) -> list[int]:
    rows = conn.execute(
        "SELECT sequence FROM events WHERE project_id = 'dash' AND sequence > ? ORDER BY sequence",
        (start,),
    ).fetchall()
    return [r[0] for r in rows]
