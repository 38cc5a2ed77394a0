"""The execution limit (schema/budget.py): a result holds at most MAX_OBJECTS
objects, counted the same way by graphql-core's path and by the fast path;
past it the answer is one error and no data. And a project's digest is read
once per request however many references reach it.

The limit is lowered here so that a handful of records reaches it; the
counting is the same at any value."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings

from tests.conftest import Caller, Service
from tests.decisions_support import edit_task, new_task, open_decision
from tests.fastpath_support import both, graphql_core_only
from tests.live_support import graphql_ws, running
from tests.test_graphql_fastpath import documents, world
from waypost.resolvers.decisions import digest
from waypost.resolvers.tasks import stored_gate
from waypost.schema import budget
from waypost.schema.execution import PlainFieldExecutor
from waypost.schema.fastpath import known
from waypost.schema.limits import CACHED_QUERIES
from waypost.schema.memo import Memo
from waypost.schema.tasks import Task

# Objects: root, project, connection, and per decision itself, `current`,
# one `affected` entry, its task and the task's project (5 each). Fields of
# an object type, counted as they start: `project`, `decisions`, `nodes`, and
# per decision `current`, `affected`, `task` and `project` (4 each).
NESTED = """query { project(id: "demo") { decisions(first: 10) { nodes {
  restId current { affected { task { title project { name } } } } } } } }"""


def objects_for(decisions: int) -> int:
    return 3 + 5 * decisions + 3 + 4 * decisions


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    with mock.patch.object(known, "KNOWN", Memo(CACHED_QUERIES)):
        yield


def limited(limit: int) -> Any:
    return mock.patch.object(budget, "MAX_OBJECTS", limit)


def over_the_limit(body: bytes, mutation: bool = False) -> bool:
    """Whether the answer is the limit's one error, in a query's or (with
    `mutation`) a mutation's words."""
    answer = json.loads(body)
    if answer.get("data") is not None:
        return False
    [error] = answer["errors"]
    assert error["extensions"] == {"code": "invalid_request"}
    words = (
        f"The result exceeds the execution limits ({budget.MAX_OBJECTS:,} objects,"
        if mutation
        else f"The result exceeds the execution limits of {budget.MAX_OBJECTS:,} objects and"
    )
    assert error["message"].startswith(words), error["message"]
    assert len(error["message"]) <= 200  # as a message is kept (decoding.py)
    return True


async def two_decisions(human: Caller) -> None:
    for title in ("Back up", "Migrate"):
        await open_decision(human, [await new_task(human, title)])


async def test_a_result_at_the_limit_answers_and_one_past_it_is_one_error(
    human: Caller, project: str
) -> None:
    await two_decisions(human)
    with limited(objects_for(2)):
        at = await both(human, NESTED)
    assert at.answered  # the fast path counted it
    assert at.fast == at.slow
    assert len(json.loads(at.fast)["data"]["project"]["decisions"]["nodes"]) == 2
    with limited(objects_for(2) - 1):
        past = await both(human, NESTED)
        # graphql-core's path stops at the same object, and says the same
        assert over_the_limit(past.fast) and past.fast == past.slow


async def test_text_past_its_limit_is_one_error_on_both_paths(human: Caller, project: str) -> None:
    """Few objects can still make a huge result: characters of text are
    counted too (budget.MAX_TEXT), the same way on both paths."""
    description = "A long description. " * 10
    for title in ("Back up", "Migrate"):
        await new_task(human, title, description=description)
    query = 'query { project(id: "demo") { tasks(first: 10) { nodes { description } } } }'
    with mock.patch.object(budget, "MAX_TEXT", 2 * len(description)):
        at = await both(human, query)
    assert at.answered and at.fast == at.slow
    assert len(json.loads(at.fast)["data"]["project"]["tasks"]["nodes"]) == 2
    with mock.patch.object(budget, "MAX_TEXT", 2 * len(description) - 1):
        past = await both(human, query)
        assert over_the_limit(past.fast) and past.fast == past.slow
        # and on graphql-core's own path
        with graphql_core_only():
            r = await human.client.post("/graphql", json={"query": query}, headers=human.headers())
        assert over_the_limit(r.content)


async def test_graphql_core_counts_every_object_it_completes(human: Caller, project: str) -> None:
    """The whole query runs on graphql-core here; `me` is one field and one
    object more."""
    await two_decisions(human)
    query = "query { me { name } " + NESTED.removeprefix("query {")
    with graphql_core_only(), limited(objects_for(2) + 2):
        r = await human.client.post("/graphql", json={"query": query}, headers=human.headers())
        assert r.status_code == 200 and json.loads(r.content)["data"]["me"]["name"] == "alice"
    with graphql_core_only(), limited(objects_for(2) + 1):
        r = await human.client.post("/graphql", json={"query": query}, headers=human.headers())
        assert r.status_code == 200 and over_the_limit(r.content)


async def hubs_of_revisions(human: Caller) -> list[str]:
    """Five base tasks, and four hubs depending on all five, each edited
    twice (three revisions of five dependencies): returns the base tasks."""
    base = [await new_task(human, f"base {n}") for n in range(5)]
    for n in range(4):
        hub = await new_task(human, f"hub {n}", depends_on=base)
        for priority in (1, 2):
            await edit_task(human, hub, priority=priority)
    return base


async def test_a_list_of_dependencies_counts_whole_as_it_starts(
    human: Caller, project: str
) -> None:
    """A revision's `dependsOn` counted its tasks only as they completed, so
    a page of revisions built every dependency before the count passed the
    limit: 3,100 revisions of 100 each made 310,000 tasks first, holding the
    event loop 3 s (gqlloopaudit). Counted whole as the field starts, a list
    that starts past the limit builds none of its tasks. (On graphql-core's
    path; the count is the same.)"""
    await hubs_of_revisions(human)
    query = """query { project(id: "demo") { tasks(first: 9) { nodes {
      revisions { nodes { revision dependsOn { title } } } } } } }"""
    built: list[str] = []
    from_json = Task.from_json

    def counted(d: dict[str, Any]) -> Task:
        built.append(d["id"])
        return from_json(d)

    def ask() -> Any:
        return human.client.post("/graphql", json={"query": query}, headers=human.headers())

    with graphql_core_only(), mock.patch.object(Task, "from_json", counted):
        r = await ask()
        assert json.loads(r.content)["data"]["project"], r.text
        whole, built[:] = len(built), []
        assert whole == 9 + 4 * 3 * 5  # the page, and five per hub revision
        with limited(70):  # passed as the page's revisions start their dependencies
            r = await ask()
            assert r.status_code == 200 and over_the_limit(r.content)
    # the lists that started within the limit were built, no other (before,
    # every list had started, and built its tasks, before any completed)
    assert len(built) - 9 <= 3 * 5, built


async def test_the_fast_path_refuses_a_list_of_ids_before_reading_its_tasks(
    human: Caller, project: str
) -> None:
    """The same lists on the fast path (revisions joined it on 2026-12-05):
    every id of a level's lists becomes an object of the next level, so a
    level whose ids pass the limit is refused before its tasks are read,
    where graphql-core refuses it too."""
    base = await hubs_of_revisions(human)
    query = """query { project(id: "demo") { tasks(first: 9) { nodes {
      revisions { nodes { revision dependsOn { title } } } } } } }"""
    read: list[list[str]] = []
    by_ids = stored_gate.tasks_by_ids

    def reading(conn: Any, ids: list[str], *args: Any) -> Any:
        read.append(list(ids))
        return by_ids(conn, ids, *args)

    # 76 objects down to the revisions' `dependsOn` fields, and their 60 tasks
    whole = 76 + 4 * 3 * 5
    with mock.patch.object(stored_gate, "tasks_by_ids", reading):
        with limited(whole):
            answers = await both(human, query)
            assert answers.answered and answers.fast == answers.slow
        assert sorted(read[0]) == sorted(base)  # the fast path read the dependencies
        read.clear()
        with limited(whole - 1):
            answers = await both(human, query)
            assert answers.fast == answers.slow and over_the_limit(answers.fast)
    assert read == []  # refused before the 60 ids were read


async def test_a_decisions_affected_entries_are_made_only_when_asked_for(
    human: Caller, project: str
) -> None:
    """Every decision of a list carries its current generation, whose
    affected entries were made whether asked for or not: 1.6 of 2.6 s of a
    task's hundred decisions of a hundred tasks each (gqlloopaudit)."""
    from waypost.schema import decisions as module

    tasks = [await new_task(human, f"task {n}") for n in range(3)]
    await open_decision(human, tasks)
    made: list[str] = []
    real = module.DecisionAffected

    def counted(**fields: Any) -> Any:
        made.append(fields["task_id"])
        return real(**fields)

    query = """query {{ project(id: "demo") {{ task(id: "{task}") {{
      decisions {{ nodes {{ question {more} }} }} }} }} }}"""
    with graphql_core_only(), mock.patch.object(module, "DecisionAffected", counted):
        for more, expected in (("", []), ("affected { pinnedRevision }", tasks)):
            made.clear()
            body = {"query": query.format(task=tasks[0], more=more)}
            r = await human.client.post("/graphql", json=body, headers=human.headers())
            assert json.loads(r.content)["data"]["project"]["task"], r.text
            assert sorted(made) == sorted(expected), more


async def test_a_known_query_whose_result_grew_past_the_limit_is_refused(
    human: Caller, project: str
) -> None:
    """A request answered before is answered without the pipeline
    (fastpath/known.py); its result may grow past the limit since."""
    await two_decisions(human)
    with limited(objects_for(2)):
        for _ in range(2):  # learned, then answered as known
            r = await human.client.post("/graphql", json={"query": NESTED}, headers=human.headers())
            assert json.loads(r.content)["data"]["project"]["decisions"]["nodes"]
        await open_decision(human, [await new_task(human, "Announce")])
        r = await human.client.post("/graphql", json={"query": NESTED}, headers=human.headers())
        assert r.status_code == 200 and over_the_limit(r.content)


async def test_lists_without_first_nesting_through_references_are_stopped(
    human: Caller, project: str
) -> None:
    """The digest's lists have no `first`, so the node limit cannot see this
    query grow with the square of the pending decisions: the execution limit does."""
    for n in range(4):
        await open_decision(human, [await new_task(human, f"task {n}")])
    query = """query { project(id: "demo") { digest { pendingDecisions { current { affected {
      task { project { digest { pendingDecisions { restId } } } } } } } } } }"""
    # objects: root, project, digest, 4 x (decision, current, affected, task,
    # project, digest, 4 decisions) = 3 + 4 x 10; fields: project, digest,
    # pendingDecisions, 4 x (current, affected, task, project, digest,
    # pendingDecisions) = 3 + 4 x 6
    with limited(70):
        r = await human.client.post("/graphql", json={"query": query}, headers=human.headers())
        assert len(json.loads(r.content)["data"]["project"]["digest"]["pendingDecisions"]) == 4
    await open_decision(human, [await new_task(human, "task 4")])  # 58 + 33
    with limited(70):
        r = await human.client.post("/graphql", json={"query": query}, headers=human.headers())
        assert r.status_code == 200 and over_the_limit(r.content)


async def test_a_digest_is_read_once_per_project_per_request(human: Caller, project: str) -> None:
    for n in range(3):
        await open_decision(human, [await new_task(human, f"task {n}")])
    query = """query { project(id: "demo") { digest { pendingDecisions { restId } }
      tasks(first: 10) { nodes { project { digest { pendingDecisions { restId } } } } } } }"""
    real = digest.digests_of_projects
    calls: list[str] = []

    def counted(conn: Any, project_ids: list[str], now: Any, parts: Any) -> Any:
        calls.extend(project_ids)
        return real(conn, project_ids, now, parts)

    with mock.patch.object(digest, "digests_of_projects", counted):
        r = await human.client.post("/graphql", json={"query": query}, headers=human.headers())
    data = json.loads(r.content)["data"]["project"]
    assert len(data["tasks"]["nodes"]) == 3
    assert all(t["project"]["digest"] == data["digest"] for t in data["tasks"]["nodes"])
    assert calls == ["demo"]


OPEN_TWO = """mutation ($t: [String!]!) {
  a: decisionOpen(input: {idempotencyKey: "k1", projectId: "demo", question: "Q1?",
      options: ["Yes", "No"], rationale: "r", requiredActor: HUMAN, taskIds: $t,
      environment: "prod"})
    { decision { restId project { digest { pendingDecisions { restId } } } } }
  b: decisionOpen(input: {idempotencyKey: "k2", projectId: "demo", question: "Q2?",
      options: ["Yes", "No"], rationale: "r", requiredActor: HUMAN, taskIds: $t,
      environment: "prod"})
    { decision { restId project { digest { pendingDecisions { restId } } } } }
}"""


async def test_each_root_mutation_reads_what_the_ones_before_it_wrote(
    human: Caller, project: str
) -> None:
    """Loaders are fresh for each root mutation."""
    t = await new_task(human, "t")
    r = await human.client.post(
        "/graphql", json={"query": OPEN_TWO, "variables": {"t": [t]}}, headers=human.headers()
    )
    data = json.loads(r.content)["data"]
    a, b = data["a"]["decision"], data["b"]["decision"]
    assert [d["restId"] for d in a["project"]["digest"]["pendingDecisions"]] == [a["restId"]]
    assert {d["restId"] for d in b["project"]["digest"]["pendingDecisions"]} == {
        a["restId"],
        b["restId"],
    }


async def test_a_mutations_answer_is_limited_and_every_mutation_still_runs(
    human: Caller, project: str
) -> None:
    """A mutation's answer was not limited at all: a replay of one
    `taskCreate` answered 48 MB of `dependsOn { description }` per alias,
    writing nothing. Now it is one error past the limit, as a query's is; but
    the root fields still all run (stopping one would skip the writes after
    it), and their keys replay what each one did."""
    t = await new_task(human, "t")
    with limited(3):
        r = await human.client.post(
            "/graphql", json={"query": OPEN_TWO, "variables": {"t": [t]}}, headers=human.headers()
        )
        assert over_the_limit(r.content, mutation=True)
    [error] = json.loads(r.content)["errors"]
    assert "Every mutation ran: replay the same idempotency keys" in error["message"]
    # both ran: their keys replay, with a selection within the limit
    small = OPEN_TWO.replace(
        "{ decision { restId project { digest { pendingDecisions { restId } } } } }",
        "{ replayed decision { restId } }",
    )
    r = await human.client.post(
        "/graphql", json={"query": small, "variables": {"t": [t]}}, headers=human.headers()
    )
    data = json.loads(r.content)["data"]
    assert data["a"]["replayed"] and data["b"]["replayed"]
    listed = (await human.get("/api/v1/projects/demo/decisions")).json()["items"]
    assert {d["id"] for d in listed} == {data["a"]["decision"]["restId"],
                                         data["b"]["decision"]["restId"]}  # fmt: skip


async def test_a_replayed_mutations_text_is_limited(human: Caller, project: str) -> None:
    """The audit's case: text reached through a mutation's payload, replayed
    for free, counted against the text limit as a query's is."""
    long = "x" * 60_000
    deps = [await new_task(human, f"dep {i}", description=long) for i in range(4)]
    query = """mutation ($deps: [String!]!) { taskCreate(input: {idempotencyKey: "big-1",
        projectId: "demo", title: "m", dependsOn: $deps}) { replayed task {
        a: dependsOn { description } b: dependsOn { description } } } }"""
    for replay in (False, True):
        with mock.patch.object(budget, "MAX_TEXT", 200_000):
            r = await human.client.post(
                "/graphql", json={"query": query, "variables": {"deps": deps}},
                headers=human.headers(),
            )  # fmt: skip
        answer = json.loads(r.content)
        assert answer["data"] is None and len(r.content) < 1_000, replay
        assert (
            "Every mutation ran: replay the same idempotency keys" in answer["errors"][0]["message"]
        )
    tasks = (await human.get("/api/v1/projects/demo/tasks", limit=100)).json()["items"]
    assert [x["title"] for x in tasks].count("m") == 1  # written once, replayed once


async def test_a_subscription_event_reads_the_records_afresh(
    service: Service, human: Caller, project: str
) -> None:
    """A WebSocket keeps one context for its whole life: each event gets
    loaders of its own (a task's title was the first event's for ever)."""
    t = await new_task(human, "old title")
    d = await open_decision(human, [t])
    query = "subscription ($id: ID!) { decisionChanged(id: $id) { affected { task { title } } } }"
    async with running(service) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(query, {"id": d["id"]})

        async def title() -> str:
            while True:
                m = await client.receive()
                if m.get("id") == op:
                    return str(
                        m["payload"]["data"]["decisionChanged"]["affected"][0]["task"]["title"]
                    )

        assert await title() == "old title"
        await edit_task(human, t, title="new title")
        assert await title() == "new title"


def test_both_paths_draw_the_line_at_the_same_place(
    tmp_path: Path, migrated_template: Path
) -> None:
    """For generated dashboard queries, at one below, at and one above the
    count graphql-core reaches, both paths answer the same bytes. Queries that
    meet a field error are left out: with the limit as well, which answer
    comes depends on which the path meets first (docs/graphql.md, "Limits")."""
    counts: list[int] = []
    real = PlainFieldExecutor.build_response

    def noted(self: PlainFieldExecutor, data: Any) -> Any:
        counts.append(self.objects)
        return real(self, data)

    with (
        world(migrated_template, tmp_path / "w.db") as (loop, human, seeded),
        mock.patch.object(PlainFieldExecutor, "build_response", noted),
    ):
        task_ids = [*seeded["tasks"], seeded["elsewhere"], "task_nope"]

        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
        @given(documents(task_ids, [*seeded["knowledge"], "kn_nope"]))
        def check(document: tuple[str, dict[str, Any]]) -> None:
            query, variables = document
            counts.clear()
            unlimited = loop.run_until_complete(both(human, query, variables))
            if not counts or b'"errors"' in unlimited.slow:
                return  # refused before execution, or a field error (above)
            reached = counts[-1]  # graphql-core's run is the last
            for limit in (reached - 1, reached, reached + 1):
                with limited(max(limit, 1)):
                    answers = loop.run_until_complete(both(human, query, variables))
                assert answers.fast == answers.slow, (limit, query, variables)

        check()


async def test_serve_sets_the_object_limit(service: Service, human: Caller, project: str) -> None:
    """`serve --graphql-max-objects N` (Settings.graphql_max_objects)."""
    await two_decisions(human)
    settings = service.rt.settings
    assert settings is not None
    for limit, refused in ((objects_for(2), False), (objects_for(2) - 1, True)):
        service.rt.settings = dataclasses.replace(settings, graphql_max_objects=limit)
        try:
            r = await human.client.post("/graphql", json={"query": NESTED}, headers=human.headers())
        finally:
            service.rt.settings = settings
        answer = json.loads(r.content)
        assert (answer["data"] is None) is refused, answer
        if refused:
            assert f"limits of {limit:,} objects" in answer["errors"][0]["message"]
