"""`q` on the knowledge and task lists, and `Project.context` in GraphQL."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller
from tests.context_support import context, ids, knowledge, task
from tests.tasks_support import open_decision, set_policy

PACKET = """
query($q: String!, $limit: Int! = 20, $budget: Int! = 16384, $taskId: String) {
  project(id: "demo") {
    context(q: $q, limit: $limit, budget: $budget, taskId: $taskId) {
      policy { revision rules }
      items {
        __typename
        ... on Decision { restId question }
        ... on Task { restId title }
        ... on Knowledge { restId title }
      }
      instructionsComplete truncated nextActions
      rerank { applied reason }
    }
  }
}
"""


async def test_knowledge_list_q_filters_in_list_order(human: Caller, project: str) -> None:
    a = await knowledge(human, "zebra one")
    await knowledge(human, "okapi")
    b = await knowledge(human, "zebra two", body="also about NEAR operators")
    r = await human.get("/api/v1/projects/demo/knowledge", q="zebra")
    assert r.status_code == 200, r.text
    assert [i["id"] for i in r.json()["items"]] == sorted([a["id"], b["id"]], reverse=True)
    r = await human.get("/api/v1/projects/demo/knowledge", q="zebra NEAR", limit=1)
    assert [i["id"] for i in r.json()["items"]] == [b["id"]]
    r = await human.get("/api/v1/projects/demo/knowledge", q=" ".join(["x"] * 33))
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "q"


async def test_task_list_q_filters_and_pages(human: Caller, project: str) -> None:
    made = [(await task(human, f"zebra {n}"))["id"] for n in range(3)]
    await task(human, "okapi")
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {
            "q": "zebra",
            "limit": 2,
            **({"cursor": cursor} if cursor else {}),
        }
        page = (await human.get("/api/v1/projects/demo/tasks", **params)).json()
        seen += [i["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(made)
    r = await human.get("/api/v1/projects/demo/tasks", q='"')
    assert r.status_code == 200 and r.json()["items"] == []


async def test_graphql_lists_take_q(human: Caller, project: str) -> None:
    k = await knowledge(human, "zebra")
    t = await task(human, "zebra")
    data = await human.gql(
        '{ project(id: "demo") { knowledge(q: "zebra") { edges { node { restId } } }'
        ' tasks(q: "zebra") { edges { node { restId } } } } }'
    )
    project_data = data["data"]["project"]
    assert [e["node"]["restId"] for e in project_data["knowledge"]["edges"]] == [k["id"]]
    assert [e["node"]["restId"] for e in project_data["tasks"]["edges"]] == [t["id"]]


async def test_graphql_context_is_the_rest_packet(human: Caller, project: str) -> None:
    t = await task(human, "zebra task")
    decision = await open_decision(human, t["id"])
    await knowledge(human, "zebra lesson")
    rest = await context(human, "zebra")
    data = await human.gql(PACKET, {"q": "zebra"})
    assert "errors" not in data, data
    packet = data["data"]["project"]["context"]
    assert [i["restId"] for i in packet["items"]] == ids(rest)
    assert packet["items"][0] == {"__typename": "Decision", "restId": decision,
                                  "question": "Ship it?"}  # fmt: skip
    assert [i["__typename"] for i in packet["items"]][1:] in (
        ["Task", "Knowledge"],
        ["Knowledge", "Task"],
    )
    assert packet["policy"] == rest["policy"]
    assert packet["instructionsComplete"] is True and packet["truncated"] is False
    assert packet["rerank"] == {"applied": False, "reason": "disabled"}


async def test_graphql_context_advice_uses_graphqls_names(human: Caller, project: str) -> None:
    """`nextActions` told a GraphQL client to `set include_shared=true`, drop
    `task_id` or read "the policy route": names its API does not have."""
    t = await task(human, "walrus")
    advice = 'query($taskId: String) { project(id: "demo") { context(q: "zebra",'
    advice += ' taskId: $taskId, component: "api") { nextActions } } }'
    data = await human.gql(advice, {"taskId": t["id"]})
    [said] = data["data"]["project"]["context"]["nextActions"]
    assert "drop a scope filter (taskId, component)" in said, said
    assert "set includeShared: true" in said, said
    assert "include_shared" not in said and "task_id" not in said, said
    rest = await context(human, "zebra", task_id=t["id"], component="api")
    assert "drop a scope filter (task_id, component)" in rest["next_actions"][0]
    assert "set include_shared=true" in rest["next_actions"][0]
    # a policy no budget can hold beside an item: where to read it whole
    await set_policy(human, rules='"' * 65536)
    data = await human.gql(PACKET, {"q": "walrus", "budget": 131072})
    [said] = data["data"]["project"]["context"]["nextActions"]
    assert "the project's policy field" in said and "route" not in said, said
    assert "decisions field (status: PENDING, STALE or EXPIRED)" in said, said


async def test_graphql_context_bounds_name_the_argument(human: Caller, project: str) -> None:
    for variables, field in (
        ({"q": "a", "limit": 0}, "limit"),
        ({"q": "a", "budget": 10}, "budget"),
        ({"q": " "}, "q"),
        ({"q": "a", "taskId": "task_nope"}, "taskId"),
    ):
        data = await human.gql(PACKET, variables)
        (error,) = data["errors"]
        assert error["extensions"]["code"] == "invalid_request", error
        assert error["extensions"]["field"] == field, error


async def test_one_operation_runs_at_most_five_searches(human: Caller, project: str) -> None:
    """Each search is bounded by the time limit, but aliases multiplied them:
    thirty aliased packets held both places of the search lane for 10 s."""
    from waypost.schema.searches import MAX_SEARCHES

    t = await task(human, "zebra")
    fields = [
        'a0: context(q: "zebra") { items { ... on Task { restId } } }',
        'a1: tasks(q: "zebra") { nodes { restId } }',
        'a2: knowledge(q: "zebra") { nodes { restId } }',
        'a3: context(q: "zebra") { items { ... on Task { restId } } }',
        'a4: tasks(q: "zebra zebra") { nodes { restId } }',  # other words: another search
        'a5: context(q: "zebra") { items { ... on Task { restId } } }',
        'a6: knowledge(q: "zebra zebra") { nodes { restId } }',
        "plain: tasks { nodes { restId } }",  # no q: no search, never refused
    ]
    query = '{ project(id: "demo") { ' + " ".join(fields) + " } }"
    data = await human.gql(query)
    # a refused search nulls its project, as any refused non-null field does
    assert data["data"] == {"project": None}
    # a search past the fifth is refused (its siblings' work ends with their
    # parent); which one depends on when each starts (a list's search starts
    # in a task of its own, shared by every parent that asks for it)
    refused = [e["path"][-1] for e in data["errors"]]
    assert refused and set(refused) <= {"a4", "a5", "a6"} and MAX_SEARCHES == 5, refused
    assert {(e["extensions"]["code"], e["extensions"]["field"]) for e in data["errors"]} == {
        ("invalid_request", "q")
    }
    five = await human.gql('{ project(id: "demo") { ' + " ".join(fields[:5]) + " plain: "
                           + fields[7].removeprefix("plain: ") + " } }")  # fmt: skip
    assert "errors" not in five, five
    answered = five["data"]["project"]
    assert answered["a0"]["items"] == [{"restId": t["id"]}]
    assert answered["a4"]["nodes"] == answered["plain"]["nodes"] == [{"restId": t["id"]}]
    # the count is the operation's: the next request has its own five
    again = await human.gql('{ project(id: "demo") { ' + " ".join(fields[:5]) + " } }")
    assert "errors" not in again, again


async def test_each_root_mutation_counts_its_own_searches(human: Caller, project: str) -> None:
    """docs/graphql.md, full-text searches: each operation counts its own, and
    each root mutation is one (each reads what the ones before it wrote):
    two root mutations of three searches each run all six; five in one root
    mutation's selection pass, the sixth is refused there, after its write."""
    three = " ".join(f's{i}: tasks(q: "w{i}") {{ totalCount }}' for i in range(3))

    def create(alias: str, title: str, searches: str) -> str:
        return (
            f'{alias}: taskCreate(input: {{idempotencyKey: "roots-{alias}", projectId: "demo",'
            f' title: "{title}"}}) {{ task {{ project {{ {searches} }} }} }}'
        )

    both = await human.gql(f"mutation {{ {create('a', 'A', three)} {create('b', 'B', three)} }}")
    assert "errors" not in both, both
    assert both["data"]["b"]["task"]["project"] == {f"s{i}": {"totalCount": 0} for i in range(3)}
    six = " ".join(f's{i}: tasks(q: "v{i}") {{ totalCount }}' for i in range(6))
    data = await human.gql(f"mutation {{ {create('c', 'C', six)} }}")
    # a refused search is a non-null field: its parent, the project, is null
    assert data["data"] == {"c": {"task": {"project": None}}}, data
    [error] = data["errors"]
    assert error["path"][-1] == "s5" and error["extensions"] == {"code": "invalid_request",
                                                                 "field": "q"}  # fmt: skip
    titles = [t["title"] for t in (await human.get("/api/v1/projects/demo/tasks")).json()["items"]]
    assert titles == ["A", "B", "C"]  # the write stood


async def test_a_search_reached_through_many_parents_counts_once(
    human: Caller, project: str
) -> None:
    """The same `tasks(q:)` under each of 8 tasks' project is one search (read
    once per operation): counted at every parent, it was refused at the sixth."""
    for i in range(8):
        await task(human, f"t{i}")
    data = await human.gql(
        '{ project(id: "demo") { tasks(first: 100) { nodes { project {'
        ' tasks(q: "zzz") { totalCount } knowledge(q: "zzz") { totalCount } } } } } }'
    )
    assert "errors" not in data, data
    assert len(data["data"]["project"]["tasks"]["nodes"]) == 8
