"""`python -m bench --suite workflow`: claims, ready lists, the digest and a
decision dashboard, measured side by side on projects of growing size.

Three database files (10, 1,000 and 10,000 tasks a project), each a real
SQLite file in a temp dir opened through `create_app` and its lifespan, so
every connection carries the service's PRAGMAs (WAL, synchronous=FULL,
foreign keys) and every request goes through the full ASGI app (gate, strict
decoding, resolver, receipt, event) with an in-process httpx client.

Projects (`*-gated` and `*-wall` carry pending decisions that block the oldest
tasks, which also come first in claim order, so an ordinary claim and a
`ready=true` page must step over them):

    p10          10 open tasks
    p1k       1,000 open tasks             p1k-gated   1,000 tasks, 500 decisions
    p10k     10,000 open tasks             p10k-gated 10,000 tasks, 500 decisions
                                           p10k-wall  10,000 tasks, 5,000 blocked by 50

The target row of issue 8 (a claim with 5,000 blocked tasks ahead within 2x of
an ordinary claim) is also measured alternated: claims on `p10k` and
`p10k-wall` take turns, sample by sample, in one row pair, so that a burst of
load from elsewhere on a shared machine lands on both sides alike.

Seeding bypasses the API for speed (bench/seeding.py says why that leaves
what is measured unchanged): it writes the same rows the resolvers would, in
one writer transaction per project. Claims are measured as claim + release
of the same task (release puts it back, so each sample sees the same state).

At the end, EXPLAIN QUERY PLAN of every statement the claim, the ready list,
the gate and the digest run on the 10,000-task database (captured with a
trace callback while the resolver functions run on a reader connection, so
the statements are the real ones, with their parameters inlined), with each
full scan of a stored table or whole index marked. Absolute numbers depend
on the machine; the ratios are the point.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.seeding import Gating, seed_project
from bench.timing import Result, measure, report
from waypost.app import create_app
from waypost.clock import SystemClock, format_time
from waypost.resolvers.access import principals
from waypost.resolvers.decisions import digest, gate
from waypost.resolvers.tasks import readiness
from waypost.resolvers.tasks import reads as task_reads
from waypost.runtime import Runtime
from waypost.settings import Settings

API = "/api/v1/projects"
DASHBOARD = """
query ($project: String!) { project(id: $project) { decisions(first: 50) { edges { node {
  restId question status generation createdAt
  generations(first: 10) { edges { node {
    generation at environment
    answer { disposition answer at }
    affected { taskId pinnedRevision task { restId title status revision ready } }
  } } }
} } } } }
"""
# (project, tasks, gating) per database file
LAYOUT: dict[str, list[tuple[str, int, Gating | None]]] = {
    "small": [("p10", 10, None)],
    "medium": [("p1k", 1_000, None), ("p1k-gated", 1_000, Gating(500, 1))],
    "large": [
        ("p10k", 10_000, None),
        ("p10k-gated", 10_000, Gating(500, 1)),
        ("p10k-wall", 10_000, Gating(50, 100)),
    ],
}


@dataclass
class Service:
    rt: Runtime
    client: httpx.AsyncClient
    human: dict[str, str]
    agent: dict[str, str]
    ids: dict[str, list[str]]  # task ids per project, creation order
    keys: Any = None

    def __post_init__(self) -> None:
        self.keys = itertools.count()

    async def send(
        self, method: str, path: str, who: dict[str, str], body: Any = None
    ) -> httpx.Response:
        headers = dict(who)
        if method != "GET":
            headers["Idempotency-Key"] = f"k{next(self.keys)}"
        r = await self.client.request(method, path, json=body, headers=headers)
        if r.status_code >= 300:
            raise SystemExit(f"benchmark request failed: {method} {path} {r.status_code} {r.text}")
        return r


@asynccontextmanager
async def service(
    path: Path, layout: list[tuple[str, int, Gating | None]]
) -> AsyncIterator[Service]:
    app = create_app(Settings(db_path=path, sweep_interval=3600), clock=SystemClock())
    async with app.router.lifespan_context(app):
        rt: Runtime = app.state.runtime
        at = format_time(rt.now())

        def people(conn: sqlite3.Connection) -> tuple[dict[str, Any], dict[str, Any]]:
            return (
                principals.create_principal(conn, "human", "bench", at),
                principals.create_principal(conn, "agent", "bench-agent", at),
            )

        human, agent = await rt.db.write(people)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            svc = Service(
                rt, client, {"Authorization": f"Bearer {human['token']}"},
                {"Authorization": f"Bearer {agent['token']}"}, {},
            )  # fmt: skip
            r = await svc.send("POST", "/api/v1/sessions", svc.agent)
            svc.agent["Waypost-Session"] = r.json()["id"]
            now = rt.now()
            for project_id, tasks, gating in layout:
                await svc.send("POST", API, svc.human, {"id": project_id, "name": project_id})

                def seed(
                    conn: sqlite3.Connection,
                    p: str = project_id,
                    n: int = tasks,
                    g: Gating | None = gating,
                ) -> list[str]:
                    return seed_project(conn, p, n, human["principal_id"], now, g)

                svc.ids[project_id] = await rt.db.write(seed)
            yield svc


# ---------------------------------------------------------------- rows


async def claim_rows(
    svc: Service, project_id: str, label: str, n: int, budget: float, expect: str
) -> list[Result]:
    """claim (no task_id) + release of the task it got; the claim alone as a second row."""
    claims: list[float] = []

    async def cycle(i: int) -> None:
        start = time.perf_counter()
        r = await svc.send("POST", f"{API}/{project_id}/claims", svc.agent, {})
        took = time.perf_counter() - start
        task_id = r.json()["task"]["id"]
        if task_id != expect:
            raise SystemExit(f"claim on {project_id} took {task_id}, expected {expect}")
        await svc.send("POST", f"{API}/{project_id}/tasks/{task_id}/release", svc.agent)
        if i >= 0:
            claims.append(took)

    pair = await measure(f"claim + release, {label}", n, cycle, budget=budget)
    return [pair, Result(f"  claim alone, {label}", claims)]


async def alternated_claim_rows(
    svc: Service, plain: tuple[str, str], blocked: tuple[str, str], n: int, budget: float
) -> list[Result]:
    """Claims (each followed by its release) on two projects of one database,
    alternated sample by sample, so both rows see the same load from whatever
    else runs on the machine: the side-by-side ratio of the target.
    `plain` and `blocked` are (project, the task its claim must take)."""
    taken: dict[str, list[float]] = {plain[0]: [], blocked[0]: []}

    async def one(project_id: str, expect: str, record: bool) -> None:
        start = time.perf_counter()
        r = await svc.send("POST", f"{API}/{project_id}/claims", svc.agent, {})
        took = time.perf_counter() - start
        if r.json()["task"]["id"] != expect:
            raise SystemExit(f"claim on {project_id} took {r.json()['task']['id']}, not {expect}")
        await svc.send("POST", f"{API}/{project_id}/tasks/{expect}/release", svc.agent)
        if record:
            taken[project_id].append(took)

    async def cycle(i: int) -> None:
        # swap the order every other cycle, so neither always runs first
        pair = (plain, blocked) if i % 2 == 0 else (blocked, plain)
        for project_id, expect in pair:
            await one(project_id, expect, i >= 0)

    await measure("alternated claims", n, cycle, budget=2 * budget)
    return [
        Result(f"  claim alone, alternated, {label}", taken[project_id])
        for project_id, label in (
            (plain[0], "10,000 tasks"),
            (blocked[0], "10,000 tasks, 5,000 blocked ahead"),
        )
    ]


async def list_rows(
    svc: Service, project_id: str, label: str, n: int, budget: float
) -> list[Result]:
    rows = []
    for query, name in (("limit=50", "all"), ("ready=true&limit=50", "ready=true")):

        async def page(i: int, query: str = query) -> None:
            r = await svc.send("GET", f"{API}/{project_id}/tasks?{query}", svc.human)
            if len(r.json()["items"]) != 50:
                raise SystemExit(f"short page on {project_id}?{query}")

        rows.append(await measure(f"GET tasks {name} limit=50, {label}", n, page, budget=budget))
    return rows


async def digest_row(svc: Service, project_id: str, label: str, n: int, budget: float) -> Result:
    async def get(i: int) -> None:
        await svc.send("GET", f"{API}/{project_id}/digest", svc.human)

    return await measure(f"GET digest, {label}", n, get, budget=budget, warmup=5)


async def dashboard_rows(svc: Service, project_id: str, n: int, budget: float) -> list[Result]:
    """50 decisions with their generations and affected tasks: one GraphQL query
    against the REST calls a client needs for the same data."""
    calls: list[int] = []

    async def graphql(i: int) -> None:
        r = await svc.client.post(
            "/graphql", json={"query": DASHBOARD, "variables": {"project": project_id}},
            headers=svc.human,
        )  # fmt: skip
        body = r.json()
        if "errors" in body or len(body["data"]["project"]["decisions"]["edges"]) != 50:
            raise SystemExit(f"dashboard query failed: {r.text[:500]}")

    async def rest(i: int) -> None:
        decisions = (
            await svc.send("GET", f"{API}/{project_id}/decisions?limit=50", svc.human)
        ).json()["items"]
        tasks: set[str] = set()
        for d in decisions:
            r = await svc.send("GET", f"{API}/{project_id}/decisions/{d['id']}?limit=10", svc.human)
            for g in r.json()["history"]["items"]:
                tasks.update(a["task_id"] for a in g["affected"])
        for task_id in sorted(tasks):
            await svc.send("GET", f"{API}/{project_id}/tasks/{task_id}", svc.human)
        calls.append(1 + len(decisions) + len(tasks))

    gql = await measure("GraphQL dashboard: 50 decisions, generations, tasks", n, graphql,
                        budget=budget, warmup=5)  # fmt: skip
    rst = await measure("REST, same data (list + per-decision + per-task GETs)", n, rest,
                        budget=budget, warmup=5)  # fmt: skip
    rst.name = rst.name.replace("GETs)", f"GETs = {calls[-1]} calls)")
    return [gql, rst]


# ---------------------------------------------------------------- query plans

_LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+\b")
_SCAN = re.compile(r"\bSCAN (\w+)( USING (?:COVERING )?INDEX \w+)?")


def _plans(conn: sqlite3.Connection, statements: list[str]) -> list[tuple[str, list[str]]]:
    seen: set[str] = set()
    out = []
    for sql in statements:
        shape = _LITERAL.sub("?", sql)
        if shape in seen or not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            continue
        seen.add(shape)
        rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
        out.append((shape, [str(r["detail"]) for r in rows]))
    return out


async def explain(svc: Service) -> list[tuple[str, str, list[str]]]:
    """(operation, statement shape, plan) for each distinct statement each operation runs."""
    now = svc.rt.now()
    gated = svc.ids["p10k-gated"]
    operations: list[tuple[str, Callable[[sqlite3.Connection], Any]]] = [
        ("claim (next_ready, 5,000 blocked ahead)",
         lambda c: readiness.next_ready(c, "p10k-wall", now)),
        ("ready list (ready=true, limit=50)",
         lambda c: task_reads.list_tasks_sync(c, "p10k-gated", now, ready=True, limit=50)),
        ("gate (blocking_decisions, 64 tasks)",
         lambda c: gate.blocking_decisions(c, "p10k-gated", gated[:64], now)),
        ("digest", lambda c: digest.digest_sync(c, "p10k-gated", now)),
    ]  # fmt: skip

    def run(conn: sqlite3.Connection) -> list[tuple[str, str, list[str]]]:
        result: list[tuple[str, str, list[str]]] = []
        for name, op in operations:
            statements: list[str] = []
            conn.set_trace_callback(statements.append)
            try:
                op(conn)
            finally:
                conn.set_trace_callback(None)
            result.extend((name, shape, plan) for shape, plan in _plans(conn, statements))
        return result

    return await svc.rt.db.read(run)


def print_plans(plans: list[tuple[str, str, list[str]]]) -> list[str]:
    """Print each plan; return one line per scan of a stored table or index
    (json_each, subqueries and CTEs are not stored tables)."""
    concerns = []
    for name, shape, plan in plans:
        text = re.sub(r"\s+", " ", shape)
        print(f"\n[{name}] {text[:300]}{' ...' if len(text) > 300 else ''}")
        for line in plan:
            scan = _SCAN.search(line)
            stored = bool(scan) and "VIRTUAL TABLE" not in line and "subquery" not in line
            # the readiness and gate CTEs (small, built once per statement)
            ctes = ("blocked", "holding", "pairs", "asked")
            stored = stored and scan is not None and scan.group(1) not in ctes
            mark = ""
            if stored and scan is not None:
                mark = "   <-- full index scan" if scan.group(2) else "   <-- FULL TABLE SCAN"
            print(f"    {line}{mark}")
            if mark:
                concerns.append(f"{name}: {line.strip()}")
    return concerns


def ratio(a: Result, b: Result) -> str:
    return f"{a.median / b.median:6.2f}x"


async def run_suite(directory: Path, n: int, budget: float) -> float:
    """Every row, the ratios, and the query plans; returns the seconds spent seeding."""
    results: dict[str, list[Result]] = {}
    seeding = 0.0
    plans: list[tuple[str, str, list[str]]] = []
    for db, layout in LAYOUT.items():
        started = time.perf_counter()
        async with service(directory / f"workflow-{db}.db", layout) as svc:
            seeding += time.perf_counter() - started
            rows: list[Result] = []
            for project_id, tasks, gating in layout:
                ids = svc.ids[project_id]
                blocked = gating.blocked if gating else 0
                label = f"{tasks:,} tasks" + (f", {blocked:,} blocked ahead" if blocked else "")
                rows += await claim_rows(svc, project_id, label, n, budget, ids[blocked])
                if tasks >= 1_000:
                    decisions = f", {gating.decisions} decisions" if gating else ", 0 decisions"
                    if project_id != "p10k-wall":
                        rows += await list_rows(svc, project_id, f"{tasks:,} tasks{decisions}",
                                                n, budget)  # fmt: skip
                    if gating is not None and gating.decisions == 500:
                        label = f"{tasks:,} tasks, 500 decisions"
                        rows.append(await digest_row(svc, project_id, label, n, budget))
                if project_id == "p1k-gated":
                    rows += await dashboard_rows(svc, project_id, n, budget)
            if db == "large":
                wall = Gating(50, 100).blocked
                rows += await alternated_claim_rows(
                    svc, ("p10k", svc.ids["p10k"][0]),
                    ("p10k-wall", svc.ids["p10k-wall"][wall]), n, budget,
                )  # fmt: skip
                plans = await explain(svc)
            results[db] = rows
    every = [r for rows in results.values() for r in rows]
    base = find(every, "GET tasks all limit=50, 1,000 tasks, 0")
    print()
    report(every, base, "x list")
    print_ratios(every)
    print("\nEXPLAIN QUERY PLAN on the 10,000-task database:")
    concerns = print_plans(plans)
    print("\nscans of stored tables or whole indexes:" if concerns else "\nno full scans")
    for line in concerns:
        print(f"  {line}")
    return seeding


def find(results: list[Result], prefix: str) -> Result:
    return next(r for r in results if r.name.startswith(prefix))


def print_ratios(rows: list[Result]) -> None:
    def claim(label: str) -> Result:
        return find(rows, f"  claim alone, {label}")

    def pair(label: str) -> Result:
        return find(rows, f"claim + release, {label}")

    def page(kind: str, label: str) -> Result:
        return find(rows, f"GET tasks {kind} limit=50, {label}")

    c10, c1k, c10k = claim("10 tasks"), claim("1,000 tasks"), claim("10,000 tasks")
    print("\nratios (median over median):")
    lines = [
        ("claim, 1,000 / 10 open tasks", ratio(c1k, c10)),
        ("claim, 10,000 / 10 open tasks", ratio(c10k, c10)),
        ("claim + release, 10,000 / 10 open tasks",
         ratio(pair("10,000 tasks"), pair("10 tasks"))),
        ("claim, 500 blocked ahead / none (1,000 tasks)",
         ratio(claim("1,000 tasks, 500 blocked"), c1k)),
        ("claim, 500 blocked ahead / none (10,000 tasks)",
         ratio(claim("10,000 tasks, 500 blocked"), c10k)),
        ("claim, 5,000 blocked ahead / none (10,000 tasks)",
         ratio(claim("10,000 tasks, 5,000 blocked"), c10k)),
        ("claim, 5,000 blocked ahead / none (10,000 tasks, alternated: the target)",
         ratio(claim("alternated, 10,000 tasks, 5,000"), claim("alternated, 10,000 tasks"))),
    ]  # fmt: skip
    for kind in ("all", "ready=true"):
        for d in ("0", "500"):
            big, small = page(kind, f"10,000 tasks, {d} "), page(kind, f"1,000 tasks, {d} ")
            lines.append(
                (f"GET tasks {kind}, {d} decisions: 10,000 / 1,000 tasks", ratio(big, small))
            )
    for size in ("1,000", "10,000"):
        for d in ("0", "500"):
            label = f"{size} tasks, {d} "
            lines.append((f"GET tasks ready=true / all, {label}decisions",
                          ratio(page("ready=true", label), page("all", label))))  # fmt: skip
        lines.append((f"GET tasks ready=true, 500 / 0 decisions, {size} tasks",
                      ratio(page("ready=true", f"{size} tasks, 500 "),
                            page("ready=true", f"{size} tasks, 0 "))))  # fmt: skip
    digest_1k = find(rows, "GET digest, 1,000 tasks")
    lines.append(("GET digest (1,000 tasks, 500 decisions) / GET tasks all (same project)",
                  ratio(digest_1k, page("all", "1,000 tasks, 500 "))))  # fmt: skip
    lines.append(("GET digest, 10,000 / 1,000 tasks (500 decisions)",
                  ratio(find(rows, "GET digest, 10,000 tasks"), digest_1k)))  # fmt: skip
    gql, rest = find(rows, "GraphQL dashboard"), find(rows, "REST, same data")
    lines.append(("dashboard: REST calls / one GraphQL query", ratio(rest, gql)))
    width = max(len(name) for name, _ in lines)
    for name, value in lines:
        print(f"  {name:{width}}  {value}")
