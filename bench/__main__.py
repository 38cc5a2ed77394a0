"""`python -m bench`: the idempotent mutation round trip, measured side by side.

Everything runs in one process, one after the other, on a real SQLite file
(WAL, synchronous=FULL, as `serve` configures it), through the full ASGI app
(gate, strict decoding, resolver, receipt, event) with an in-process httpx
client, so the figures are comparable with each other. Absolute numbers
depend on the machine and its disk; the ratios are the point.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from waypost.app import create_app
from waypost.clock import SystemClock, format_time
from waypost.resolvers import principals
from waypost.settings import Settings

POLICY = "/api/v1/projects/bench/policy"
GQL_UPDATE = (
    "mutation ($input: PolicyUpdateInput!) { policyUpdate(input: $input) {"
    " policy { revision } userErrors { code } replayed } }"
)


@dataclass
class Result:
    name: str
    samples: list[float]  # seconds

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p90(self) -> float:
        return statistics.quantiles(self.samples, n=10)[-1]


async def measure(name: str, n: int, call: Callable[[int], Awaitable[None]]) -> Result:
    for i in range(min(20, n)):  # warm caches and code paths first
        await call(-1 - i)
    samples = []
    for i in range(n):
        start = time.perf_counter()
        await call(i)
        samples.append(time.perf_counter() - start)
    return Result(name, samples)


async def service_round_trips(directory: Path, n: int) -> list[Result]:
    settings = Settings(db_path=directory / "bench.db", sweep_interval=3600)
    app = create_app(settings, clock=SystemClock())
    async with app.router.lifespan_context(app):
        rt = app.state.runtime
        at = format_time(rt.now())
        human = await rt.db.write(
            lambda conn: principals.create_principal(conn, "human", "bench", at)
        )
        headers = {"Authorization": f"Bearer {human['token']}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

            async def send(method: str, path: str, key: str, body: Any) -> httpx.Response:
                r = await client.request(
                    method, path, json=body, headers={**headers, "Idempotency-Key": key}
                )
                if r.status_code >= 300:
                    raise SystemExit(f"benchmark request failed: {r.status_code} {r.text}")
                return r

            await send("POST", "/api/v1/projects", "project", {"id": "bench", "name": "Bench"})
            revision = 1

            async def fresh_patch(i: int) -> None:
                nonlocal revision
                body = {"expected_revision": revision, "rules": f"rules {i}"}
                await send("PATCH", POLICY, f"patch-{i}", body)
                revision += 1

            async def fresh_graphql(i: int) -> None:
                nonlocal revision
                key, rules = f"gql-{i}", f"gql {i}"
                variables = {"input": {"idempotencyKey": key, "projectId": "bench",
                                       "expectedRevision": revision, "rules": rules}}  # fmt: skip
                r = await client.post(
                    "/graphql", json={"query": GQL_UPDATE, "variables": variables},
                    headers=headers,
                )  # fmt: skip
                if r.json()["data"]["policyUpdate"]["userErrors"]:
                    raise SystemExit(f"benchmark mutation failed: {r.text}")
                revision += 1

            replay_body = {"expected_revision": revision, "rules": "replayed"}
            await send("PATCH", POLICY, "replay", replay_body)
            revision += 1

            async def replay(i: int) -> None:
                r = await send("PATCH", POLICY, "replay", replay_body)
                assert r.headers["idempotent-replayed"] == "true"

            async def get_policy(i: int) -> None:
                r = await client.get(POLICY, headers=headers)
                assert r.status_code == 200

            async def healthz(i: int) -> None:
                await client.get("/healthz")

            return [
                await measure(
                    "PATCH policy (fresh key: writes revision, event, receipt)", n, fresh_patch
                ),
                await measure("PATCH policy replay (same key and body)", n, replay),
                await measure("GraphQL policyUpdate (fresh idempotencyKey)", n, fresh_graphql),
                await measure("GET policy", n, get_policy),
                await measure("GET /healthz (no token, no database)", n, healthz),
            ]


def commit_cost(directory: Path, synchronous: str, n: int) -> Result:
    """One small INSERT per committed transaction on a raw WAL connection."""
    path = directory / f"raw-{synchronous.lower()}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("CREATE TABLE t (x INTEGER)")
    samples = []
    for i in range(n):
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?)", (i,))
        conn.execute("COMMIT")
        samples.append(time.perf_counter() - start)
    conn.close()
    return Result(f"raw SQLite commit, WAL synchronous={synchronous}", samples)


def report(results: list[Result], base: Result) -> None:
    width = max(len(r.name) for r in results)
    print(f"{'':{width}}  {'median':>9}  {'p90':>9}  {'per s':>7}  {'x GET':>6}")
    for r in results:
        print(
            f"{r.name:{width}}  {r.median * 1e3:7.3f}ms  {r.p90 * 1e3:7.3f}ms"
            f"  {1 / r.median:7.0f}  {r.median / base.median:6.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="samples per measurement (1000)")
    parser.add_argument(
        "--dir", type=Path, default=None, help="directory for the database files (default: temp)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="waypost-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        print(f"waypost bench: n={args.n} per row, database in {directory},"
              f" python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version},"
              f" {os.cpu_count()} cpus")  # fmt: skip
        results = asyncio.run(service_round_trips(directory, args.n))
        raw = [commit_cost(directory, mode, args.n) for mode in ("FULL", "NORMAL")]
    get = next(r for r in results if r.name == "GET policy")
    print()
    report([*results, *raw], get)
    fresh, replay = results[0], results[1]
    print()
    print(f"fresh mutation / replay: {fresh.median / replay.median:.2f}x;"
          f" fresh mutation / GET: {fresh.median / get.median:.2f}x;"
          f" replay / GET: {replay.median / get.median:.2f}x")  # fmt: skip
    print(f"fsync share: FULL commit {raw[0].median * 1e3:.3f}ms vs NORMAL"
          f" {raw[1].median * 1e3:.3f}ms ({raw[0].median / raw[1].median:.1f}x)")  # fmt: skip
    print(f"total time {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
