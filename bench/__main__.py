"""`python -m bench`: the idempotent mutation round trip, measured side by side.

The workflow suite (claims, ready lists, digest, dashboard) lives in
bench/workflow.py and runs after this one by default (`--suite`).

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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import context, disk, fanout, store, workflow
from bench import graphql as graphql_bench
from bench.timing import Result, measure, report
from waypost.app import create_app
from waypost.clock import SystemClock, format_time
from waypost.resolvers.access import principals
from waypost.settings import Settings

POLICY = "/api/v1/projects/bench/policy"
GQL_UPDATE = (
    "mutation ($input: PolicyUpdateInput!) { policyUpdate(input: $input) {"
    " policy { revision } userErrors { code } replayed } }"
)


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


def mutation_suite(directory: Path, n: int) -> None:
    results = asyncio.run(service_round_trips(directory, n))
    raw = [disk.commit_cost(directory, mode, n) for mode in ("FULL", "NORMAL")]
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


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--suite",
        choices=("all", "mutation", "store", "workflow", "context", "graphql", "fanout"),
        default="all",
        help="mutation: the policy round trip; store: knowledge create under 16 clients vs a"
        " bare endpoint, uvloop/httptools, replay (bench/store.py); workflow: claims, lists,"
        " digest, dashboard (bench/workflow.py); context: the context packet against bare"
        " FTS5 and Datasette (bench/context.py, not part of all: it seeds large files);"
        " graphql: the dashboard query against REST with SQL counts (bench/graphql.py);"
        " fanout: 100 SSE streams, then 100 GraphQL subscriptions, under 16 writers, one"
        " real server (bench/fanout.py);"
        " all (default): mutation, store and workflow",
    )  # fmt: skip
    parser.add_argument("--store-rounds", type=int, default=3, help="alternated rounds (3)")
    parser.add_argument(
        "--store-seconds", type=float, default=2.0, help="seconds per server per round (2.0)"
    )
    parser.add_argument("--store-n", type=int, default=300, help="sequential samples (300)")
    parser.add_argument(
        "--fsync-delay-us", type=int, default=0,
        help="store suite: make each server's fsync this much slower, as on a slower disk"
        " (needs a C compiler; bench/disk.py)",
    )  # fmt: skip
    parser.add_argument(
        "--before-src", type=Path, default=None,
        help="another checkout to measure beside this one in the store suite",
    )  # fmt: skip
    parser.add_argument(
        "--sizes", default="10000,100000,1000000",
        help="context suite: knowledge records per size, comma-separated; tasks are a"
        " tenth (10000,100000,1000000: issue 14's three; 10000,100000 for a quick run)",
    )  # fmt: skip
    parser.add_argument("--queries", type=int, default=200, help="context suite: queries (200)")
    parser.add_argument("-n", type=int, default=1000, help="samples per mutation row (1000)")
    parser.add_argument(
        "--workflow-n", type=int, default=200, help="samples per workflow row at most (200)"
    )
    parser.add_argument(
        "--budget", type=float, default=2.0,
        help="seconds per workflow row before it stops early, keeping >= 10 samples (2.0)",
    )  # fmt: skip
    parser.add_argument(
        "--dir", type=Path, default=None, help="directory for the database files (default: temp)"
    )
    args = parser.parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)  # the docs' example names a new one
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="waypost-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        # The load before the bench starts says whether anything else shares
        # the machine: only rows of one run compare when something does.
        load = os.getloadavg()[0]
        print(f"waypost bench: suite {args.suite}, database in {directory},"
              f" python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version},"
              f" {os.cpu_count()} cpus, load average {load:.2f} before the run")  # fmt: skip
        if args.suite in ("all", "mutation"):
            print(f"\n== mutation round trip (n={args.n} per row)")
            mutation_suite(directory, args.n)
        if args.suite in ("all", "store"):
            print("\n== store (bench/store.py)")
            store.run_suite(
                directory, args.store_rounds, args.store_seconds, args.store_n, args.before_src,
                args.fsync_delay_us,
            )  # fmt: skip
        if args.suite == "graphql":
            print(f"\n== GraphQL dashboard vs REST (n<={args.workflow_n} per row)")
            asyncio.run(graphql_bench.run_suite(directory, args.workflow_n, args.budget))
        if args.suite == "fanout":
            print("\n== event fan-out: 100 subscribers on one project, 16 writers")
            fanout.run_suite(directory)
        if args.suite == "context":
            print(f"\n== context (sizes {args.sizes}, {args.queries} queries per size)")
            sizes = [int(size) for size in args.sizes.split(",")]
            # with --dir the seeded files stay there and later runs reuse them
            context.run_suite(args.dir or directory, sizes, args.queries)
        if args.suite in ("all", "workflow"):
            print(f"\n== workflow (n<={args.workflow_n} per row, {args.budget}s budget per row)")
            seeding = asyncio.run(workflow.run_suite(directory, args.workflow_n, args.budget))
            print(f"\nworkflow seeding (bulk SQL, not measured): {seeding:.1f}s")
    print(f"total time {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
