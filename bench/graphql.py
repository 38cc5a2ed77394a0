"""`python -m bench --suite graphql`: the decision dashboard over GraphQL against
the REST calls that return the same data, side by side in one process, with
the SQL statements each runs; and the statement count of the GraphQL query as
the decisions grow from 3 to 300 (it must stay constant).

Decisions are made through the API (each with two tasks, an answer and a
reopen, so two generations), so the rows are the resolvers' own. Every
request goes through the full ASGI app with an in-process httpx client.
Numbers measured on a shared machine are noisy: read the ratios.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import httpx

from bench.timing import Result, measure, report
from waypost.app import create_app
from waypost.clock import SystemClock, format_time
from waypost.resolvers.access import principals
from waypost.runtime import Runtime, open_runtime
from waypost.schema import fastpath
from waypost.schema.fastpath import known
from waypost.schema.memo import Memo
from waypost.settings import Settings

API = "/api/v1/projects/dash"
# docs/graphql.md prints this query ("A dashboard query"); a test runs it as printed
DASHBOARD = """
query Dashboard($project: String!) {
  project(id: $project) {
    decisions(first: 50) {
      totalCount
      nodes {
        restId question status generation createdAt
        generations(first: 10) {
          nodes {
            generation at environment
            answer { disposition answer at }
            affected { taskId pinnedRevision task { restId title status revision ready } }
          }
        }
      }
    }
  }
}
"""

# a task board: each task's latest revisions and the decisions that affected it
# (Task.revisions and Task.decisions, on the fast path since 2026-12-05)
TASK_BOARD = """
query TaskBoard($project: String!) {
  project(id: $project) {
    tasks(first: 50) {
      nodes {
        restId title status revision ready
        revisions(first: 5) {
          totalCount nodes { revision priority changedFields at actor { name } }
        }
        decisions(first: 5) { totalCount nodes { restId question status generation } }
      }
    }
  }
}
"""

# a knowledge board: fifty records with scope, provenance, feedback and their
# latest revisions (on the fast path since 2026-12-05)
KNOWLEDGE_BOARD = """
query KnowledgeBoard($project: String!) {
  project(id: $project) {
    knowledge(first: 50) {
      totalCount
      nodes {
        restId kind collection title body status tags applicability revision updatedAt
        scope { components environments versions taskIds }
        provenance { summary sourceUri actorId recordedAt actor { name } }
        feedbackTotals { useful notUseful }
        revisions(first: 3) { nodes { revision title status feedback { useful notUseful } } }
      }
    }
  }
}
"""

# an activity feed: the last hundred events with what each is about (the
# union `subject`; on the fast path since 2026-12-05)
ACTIVITY_FEED = """
query ActivityFeed($project: String!) {
  project(id: $project) {
    events(last: 100) {
      nodes {
        sequence type at data actor { name }
        subject {
          __typename
          ... on Task { restId title taskStatus: status ready }
          ... on Decision { restId question decisionStatus: status }
          ... on Knowledge { restId title knowledgeStatus: status }
          ... on PolicyRevision { revision }
        }
      }
    }
  }
}
"""


@dataclass
class Bench:
    rt: Runtime
    client: httpx.AsyncClient
    human: dict[str, str]
    keys: Any = None

    def __post_init__(self) -> None:
        self.keys = itertools.count()

    async def send(self, method: str, path: str, body: Any = None) -> Any:
        headers = dict(self.human)
        if method != "GET":
            headers["Idempotency-Key"] = f"k{next(self.keys)}"
        r = await self.client.request(method, path, json=body, headers=headers)
        if r.status_code >= 300:
            raise SystemExit(f"bench request failed: {method} {path} {r.status_code} {r.text}")
        return r.json()

    async def add_decisions(self, count: int) -> None:
        for i in range(count):
            tasks = [
                (await self.send("POST", f"{API}/tasks", {"title": f"task {i}{s}"}))["id"]
                for s in "ab"
            ]
            decision = await self.send("POST", f"{API}/decisions", {
                "question": f"Ship change {i}?", "options": ["yes", "no"],
                "rationale": "It touches billing.", "required_actor": "human",
                "task_ids": tasks, "environment": "production",
            })  # fmt: skip
            path = f"{API}/decisions/{decision['id']}"
            await self.send("POST", f"{path}/answer", {
                "expected_generation": 1, "disposition": "defer", "answer": "no",
                "rationale": "Wait for the freeze to end.",
            })  # fmt: skip
            await self.send("POST", f"{path}/reopen", {
                "expected_generation": 1, "rationale": "The freeze ended.",
            })  # fmt: skip

    async def statements(self, run: Any) -> int:
        seen: list[str] = []
        await self.rt.db.set_trace(seen.append)
        try:
            await run(0)
        finally:
            await self.rt.db.set_trace(None)
        return len(seen)


@asynccontextmanager
async def bench_service(path: Path) -> AsyncIterator[Bench]:
    settings = Settings(db_path=path, sweep_interval=3600)
    async with open_runtime(settings, SystemClock()) as rt:
        app = create_app(rt)
        at = format_time(rt.now())
        human = await rt.db.write(lambda c: principals.create_principal(c, "human", "bench", at))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            bench = Bench(rt, client, {"Authorization": f"Bearer {human['token']}"})
            await bench.send("POST", "/api/v1/projects", {"id": "dash", "name": "Dashboard"})
            yield bench


async def graphql_call(b: Bench, query: str = DASHBOARD) -> dict[str, Any]:
    r = await b.client.post(
        "/graphql", json={"query": query, "variables": {"project": "dash"}}, headers=b.human
    )
    body: dict[str, Any] = r.json()
    if "errors" in body:
        raise SystemExit(f"dashboard query failed: {r.text[:500]}")
    return body


async def add_knowledge(b: Bench, count: int) -> None:
    """Records for the knowledge board: each corrected twice, with feedback."""
    scope = {"task_ids": [], "components": ["billing"], "environments": ["prod"], "versions": []}
    provenance = {"summary": "from a review", "source_uri": None, "source_task_id": None,
                  "source_submission_id": None}  # fmt: skip
    for i in range(count):
        record = await b.send("POST", f"{API}/knowledge", {
            "kind": "lesson", "title": f"Lesson {i}", "body": "Copy in batches of 10k. " * 8,
            "tags": ["db", "billing"], "scope": scope, "provenance": provenance,
        })  # fmt: skip
        path = f"{API}/knowledge/{record['id']}"
        for status in ("observed", "validated"):
            record = await b.send("PATCH", path, {
                "expected_revision": record["revision"], "title": record["title"],
                "body": record["body"] + status, "status": status, "scope": scope,
                "tags": record["tags"], "applicability": "", "provenance": provenance,
            })  # fmt: skip
        body = {"expected_revision": record["revision"], "useful": True}
        await b.send("POST", f"{path}/feedback", body)


async def edit_priorities(b: Bench, times: int) -> None:
    """Revisions for the task board: priority edits (not judged, so every
    answer keeps counting)."""
    tasks = (await b.send("GET", f"{API}/tasks?limit=50"))["items"]
    for task in tasks:
        revision = task["revision"]
        for step in range(times):
            path = f"{API}/tasks/{task['id']}"
            body = {"expected_revision": revision, "priority": step + 1}
            revision = (await b.send("PATCH", path, body))["revision"]


async def rest_everything(b: Bench) -> int:
    """The REST calls a client needs for the same data: the list, each decision's
    generations, each affected task. Returns how many calls that was."""
    decisions = (await b.send("GET", f"{API}/decisions?limit=50"))["items"]
    tasks: set[str] = set()
    for d in decisions:
        detail = await b.send("GET", f"{API}/decisions/{d['id']}?limit=10")
        for g in detail["history"]["items"]:
            tasks.update(a["task_id"] for a in g["affected"])
    for task_id in sorted(tasks):
        await b.send("GET", f"{API}/tasks/{task_id}")
    return 1 + len(decisions) + len(tasks)


@contextmanager
def per_field_execution() -> Iterator[None]:
    """The fast path switched off: graphql-core executes every field (the
    "before" of schema/fastpath/, measured in the same run)."""
    with (
        mock.patch.object(fastpath, "answer", lambda executor: None),
        mock.patch.object(known, "KNOWN", Memo(0)),  # no repeated request skips it either
    ):
        yield


async def side_by_side(b: Bench, n: int, budget: float) -> tuple[list[Result], list[int]]:
    """The rows on the current data, and each one's SQL statements."""
    calls: list[int] = []

    async def gql(i: int) -> None:
        await graphql_call(b)

    async def gql_per_field(i: int) -> None:
        with per_field_execution():
            await graphql_call(b)

    async def rest_list(i: int) -> None:
        await b.send("GET", f"{API}/decisions?limit=50")

    async def rest_all(i: int) -> None:
        calls.append(await rest_everything(b))

    async def board(i: int) -> None:
        await graphql_call(b, TASK_BOARD)

    async def board_per_field(i: int) -> None:
        with per_field_execution():
            await graphql_call(b, TASK_BOARD)

    async def knowledge_board(i: int) -> None:
        await graphql_call(b, KNOWLEDGE_BOARD)

    async def knowledge_board_per_field(i: int) -> None:
        with per_field_execution():
            await graphql_call(b, KNOWLEDGE_BOARD)

    async def rest_knowledge(i: int) -> None:
        await b.send("GET", f"{API}/knowledge?limit=50")

    async def feed(i: int) -> None:
        await graphql_call(b, ACTIVITY_FEED)

    async def feed_per_field(i: int) -> None:
        with per_field_execution():
            await graphql_call(b, ACTIVITY_FEED)

    rows = [
        await measure("GraphQL dashboard: 50 decisions, generations, tasks", n, gql,
                      budget=budget, warmup=5),
        await measure("REST decisions list, limit=50 (one call)", n, rest_list,
                      budget=budget, warmup=5),
        await measure("REST, all of it (list + per-decision + per-task GETs)", n, rest_all,
                      budget=budget, warmup=2),
        await measure("GraphQL dashboard, fast path off (graphql-core per field)", n,
                      gql_per_field, budget=budget, warmup=5),
        await measure("GraphQL task board: 50 tasks, 5 revisions and decisions each", n,
                      board, budget=budget, warmup=5),
        await measure("GraphQL task board, fast path off (graphql-core per field)", n,
                      board_per_field, budget=budget, warmup=5),
        await measure("GraphQL knowledge board: 50 records, 3 revisions each", n,
                      knowledge_board, budget=budget, warmup=5),
        await measure("GraphQL knowledge board, fast path off (graphql-core per field)", n,
                      knowledge_board_per_field, budget=budget, warmup=5),
        await measure("REST knowledge list, limit=50 (one call)", n,
                      rest_knowledge, budget=budget, warmup=5),
        await measure("GraphQL activity feed: 100 events with their subjects", n,
                      feed, budget=budget, warmup=5),
        await measure("GraphQL activity feed, fast path off (graphql-core per field)", n,
                      feed_per_field, budget=budget, warmup=5),
    ]  # fmt: skip
    rows[2].name += f" = {calls[-1]} calls"
    runs = (gql, rest_list, rest_all, gql_per_field, board, board_per_field,
            knowledge_board, knowledge_board_per_field, rest_knowledge, feed,
            feed_per_field)  # fmt: skip
    sql = [await b.statements(f) for f in runs]
    return rows, sql


async def run_suite(directory: Path, n: int, budget: float) -> None:
    async with bench_service(directory / "graphql-dashboard.db") as b:
        started = time.perf_counter()
        counts: list[tuple[int, int]] = []
        made = 0

        async def gql(i: int) -> None:
            await graphql_call(b)

        for size in (3, 50, 300):
            await b.add_decisions(size - made)
            made = size
            counts.append((size, await b.statements(gql)))
            if size == 50:
                await edit_priorities(b, 4)
                await add_knowledge(b, 50)
                rows, sql = await side_by_side(b, n, budget)
        print(f"(seeding through the API: {time.perf_counter() - started:.1f}s)\n")
        report(rows, rows[1], "x one REST list")
        print("\nSQL statements per request (trace hook on every connection):")
        for row, count in zip(rows, sql, strict=True):
            print(f"  {count:5d}  {row.name}")
        print("\nGraphQL dashboard statements as the decisions grow:")
        for size, count in counts:
            print(f"  {size:4d} decisions: {count} statements")
        ratio = rows[0].median / rows[1].median
        print(f"\nGraphQL dashboard / one REST list (median): {ratio:.2f}x (target: within 2x)")
        board = rows[5].median / rows[4].median
        print(f"Task board, graphql-core per field / fast path (median): {board:.2f}x")
        knowledge = rows[7].median / rows[6].median
        print(f"Knowledge board, graphql-core per field / fast path (median): {knowledge:.2f}x")
        rest = rows[6].median / rows[8].median
        print(f"Knowledge board / one REST knowledge list (median): {rest:.2f}x")
        feed = rows[10].median / rows[9].median
        print(f"Activity feed, graphql-core per field / fast path (median): {feed:.2f}x")
