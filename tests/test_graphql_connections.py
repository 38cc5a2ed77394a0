"""GraphQL connections (totalCount, nodes, both directions), DateTime,
Task.decisions, and a description on everything in the schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from graphql import get_introspection_query

from bench.graphql import DASHBOARD
from tests.conftest import Caller, Service
from tests.decisions_support import edit_task, new_task, open_decision, reopen

TASKS = """
query ($first: Int, $after: String, $last: Int, $before: String) {
  project(id: "demo") { tasks(first: $first, after: $after, last: $last, before: $before) {
    totalCount
    nodes { title }
    edges { cursor node { title } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  } } }"""


async def _tasks(human: Caller, **variables: Any) -> dict[str, Any]:
    data = await human.gql(TASKS, variables)
    assert "errors" not in data, data
    result: dict[str, Any] = data["data"]["project"]["tasks"]
    return result


def _titles(connection: dict[str, Any]) -> list[str]:
    titles = [n["title"] for n in connection["nodes"]]
    assert titles == [e["node"]["title"] for e in connection["edges"]]
    return titles


async def test_tasks_page_forward_and_backward_with_total_count(
    service: Service, human: Caller, project: str
) -> None:
    for i in range(5):
        service.clock.advance(seconds=1)  # creation order is time order, then id
        await new_task(human, f"T{i}")
    first = await _tasks(human, first=2)
    assert first["totalCount"] == 5
    assert _titles(first) == ["T0", "T1"]
    info = first["pageInfo"]
    assert info["hasNextPage"] and not info["hasPreviousPage"]
    assert info["startCursor"] == first["edges"][0]["cursor"]
    assert info["endCursor"] == first["edges"][-1]["cursor"]

    middle = await _tasks(human, first=2, after=info["endCursor"])
    assert _titles(middle) == ["T2", "T3"]
    assert middle["pageInfo"]["hasNextPage"] and middle["pageInfo"]["hasPreviousPage"]

    last = await _tasks(human, last=2)
    assert _titles(last) == ["T3", "T4"]
    assert not last["pageInfo"]["hasNextPage"] and last["pageInfo"]["hasPreviousPage"]

    back = await _tasks(human, last=2, before=last["pageInfo"]["startCursor"])
    assert _titles(back) == ["T1", "T2"]
    assert back["pageInfo"]["hasNextPage"] and back["pageInfo"]["hasPreviousPage"]

    start = await _tasks(human, last=5, before=back["pageInfo"]["startCursor"])
    assert _titles(start) == ["T0"]
    assert start["pageInfo"]["hasNextPage"] and not start["pageInfo"]["hasPreviousPage"]
    # the cursors are the same in both directions: forward from the start cursor
    # of a backward page continues from there
    again = await _tasks(human, first=1, after=start["pageInfo"]["endCursor"])
    assert _titles(again) == ["T1"]


async def test_first_and_last_together_are_refused(human: Caller, project: str) -> None:
    for variables, field in (
        ({"first": 1, "last": 1}, "last"),
        ({"last": 1, "after": "x"}, "after"),
        ({"first": 1, "before": "x"}, "before"),
        ({"last": 101}, "last"),
        ({"last": 0}, "last"),
    ):
        data = await human.gql(TASKS, variables)
        error = data["errors"][0]
        assert error["extensions"]["code"] == "invalid_request", data
        assert error["extensions"]["field"] == field, data


async def test_every_list_counts_and_pages_backward(human: Caller, project: str) -> None:
    task = await new_task(human, "Gated")
    decision = await open_decision(human, [task])
    assert (await reopen(human, decision["id"], 1)).status_code == 200
    assert (await reopen(human, decision["id"], 2)).status_code == 200
    await edit_task(human, task, title="Gated, renamed")
    query = """query ($task: String!) { project(id: "demo") {
      events(last: 2) { totalCount nodes { sequence type } pageInfo { hasPreviousPage } }
      policyHistory(last: 1) { totalCount nodes { revision } }
      decisions(last: 1) { totalCount nodes { restId
        generations(last: 1) { totalCount nodes { generation }
                               pageInfo { hasPreviousPage hasNextPage } }
        newest: generations(first: 1) { nodes { generation } pageInfo { endCursor } } } }
      knowledge(last: 1) { totalCount nodes { restId } }
      task(id: $task) { revisions(last: 1) { totalCount nodes { revision } }
                       checkpoints(last: 1) { totalCount nodes { note } }
                       submissions(last: 1) { totalCount } }
    } projects(last: 1) { totalCount nodes { restId } } }"""
    data = await human.gql(query, {"task": task})
    assert "errors" not in data, data
    p = data["data"]["project"]
    events = p["events"]
    assert events["totalCount"] >= 5 and events["pageInfo"]["hasPreviousPage"]
    sequences = [e["sequence"] for e in events["nodes"]]
    assert sequences == sorted(sequences) and events["nodes"][-1]["type"] == "task.updated"
    assert p["policyHistory"] == {"totalCount": 1, "nodes": [{"revision": 1}]}
    d = p["decisions"]
    assert d["totalCount"] == 1 and d["nodes"][0]["restId"] == decision["id"]
    generations = d["nodes"][0]["generations"]
    # newest first: the last item of the list is the oldest generation
    assert generations["totalCount"] == 3 and generations["nodes"] == [{"generation": 1}]
    assert generations["pageInfo"] == {"hasPreviousPage": True, "hasNextPage": False}
    assert d["nodes"][0]["newest"]["nodes"] == [{"generation": 3}]
    assert p["knowledge"] == {"totalCount": 0, "nodes": []}
    t = p["task"]
    assert t["revisions"] == {"totalCount": 2, "nodes": [{"revision": 1}]}
    assert t["checkpoints"] == {"totalCount": 0, "nodes": []}
    assert t["submissions"] == {"totalCount": 0}
    assert data["data"]["projects"] == {"totalCount": 1, "nodes": [{"restId": "demo"}]}


async def test_generations_page_backward_before_a_cursor(human: Caller, project: str) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    for generation in (1, 2, 3):
        assert (await reopen(human, decision["id"], generation)).status_code == 200
    query = """query ($id: String!, $before: String) { project(id: "demo") { decision(id: $id) {
      generations(last: 2, before: $before) { nodes { generation }
        pageInfo { hasPreviousPage hasNextPage startCursor } } } } }"""
    first = await human.gql(query, {"id": decision["id"]})
    page = first["data"]["project"]["decision"]["generations"]
    assert [n["generation"] for n in page["nodes"]] == [2, 1]
    assert page["pageInfo"]["hasPreviousPage"] and not page["pageInfo"]["hasNextPage"]
    before = page["pageInfo"]["startCursor"]
    second = await human.gql(query, {"id": decision["id"], "before": before})
    page = second["data"]["project"]["decision"]["generations"]
    assert [n["generation"] for n in page["nodes"]] == [4, 3]
    assert not page["pageInfo"]["hasPreviousPage"] and page["pageInfo"]["hasNextPage"]


async def test_a_made_up_position_below_one_is_the_oldest_end(human: Caller, project: str) -> None:
    """docs/api.md: a made-up cursor is read as a position in the list. Before
    -1 gave one revision where two were asked; before -3 gave none under
    `hasPreviousPage: true`."""
    from waypost.pagination import encode_cursor

    task = await new_task(human)
    for revision in (1, 2):
        r = await human.patch(f"/api/v1/projects/demo/tasks/{task}",
                              {"expected_revision": revision, "title": f"T{revision}"})  # fmt: skip
        assert r.status_code == 200, r.text
    query = """query ($id: String!, $before: String) { project(id: "demo") { task(id: $id) {
      revisions(last: 2, before: $before) { nodes { revision }
        pageInfo { hasPreviousPage } } } } }"""
    for position in (0, -1, -3, -(2**62)):
        data = await human.gql(query, {"id": task, "before": encode_cursor(position)})
        page = data["data"]["project"]["task"]["revisions"]
        assert [n["revision"] for n in page["nodes"]] == [2, 1], (position, page)
        assert page["pageInfo"]["hasPreviousPage"] is True


async def test_task_decisions_lists_every_decision_newest_first(
    service: Service, human: Caller, project: str
) -> None:
    task, other = await new_task(human, "A"), await new_task(human, "B")
    older = await open_decision(human, [task, other])
    service.clock.advance(seconds=1)
    newer = await open_decision(human, [task], question="Ship it on Friday?")
    elsewhere = await open_decision(human, [other])
    data = await human.gql(
        """query ($id: String!) { project(id: "demo") { task(id: $id) {
          decisions { totalCount nodes { restId question } }
          blockedBy { decisions { restId status createdAt } } } } }""",
        {"id": task},
    )
    assert "errors" not in data, data
    t = data["data"]["project"]["task"]
    assert t["decisions"]["totalCount"] == 2
    assert [n["restId"] for n in t["decisions"]["nodes"]] == [newer["id"], older["id"]]
    assert elsewhere["id"] not in str(t)
    # blockedBy.decisions are Decision objects: no inline fragment needed
    blocking = t["blockedBy"]["decisions"]
    assert {d["restId"] for d in blocking} == {older["id"], newer["id"]}
    assert all(d["status"] == "PENDING" for d in blocking)


async def test_times_are_datetime_strings_as_in_rest(human: Caller, project: str) -> None:
    task = await new_task(human)
    rest = (await human.get(f"/api/v1/projects/demo/tasks/{task}")).json()
    data = await human.gql(
        'query ($t: String!) { project(id: "demo") {'
        " createdAt task(id: $t) { createdAt updatedAt } } }",
        {"t": task},
    )
    assert data["data"]["project"]["task"] == {
        "createdAt": rest["created_at"],
        "updatedAt": rest["updated_at"],
    }
    kinds = await human.gql('{ __type(name: "Task") { fields { name type { ofType { name } } } } }')
    fields = {f["name"]: f["type"]["ofType"] for f in kinds["data"]["__type"]["fields"]}
    assert fields["createdAt"] == {"name": "DateTime"}


async def test_every_type_field_argument_and_enum_value_has_a_description(
    service: Service, human: Caller
) -> None:
    """Over introspection, as client tools see the schema."""
    data = await human.gql(get_introspection_query(descriptions=True))
    missing: list[str] = []
    for t in data["data"]["__schema"]["types"]:
        name = t["name"]
        if name.startswith("__"):
            continue
        if not t["description"]:
            missing.append(name)
        for f in (t["fields"] or []) + (t["inputFields"] or []):
            if not f["description"]:
                missing.append(f"{name}.{f['name']}")
            missing += [
                f"{name}.{f['name']}({a['name']})"
                for a in f.get("args", [])
                if not a["description"]
            ]
        missing += [f"{name}.{v['name']}" for v in t["enumValues"] or [] if not v["description"]]
    assert missing == []
    assert len(data["data"]["__schema"]["types"]) > 50


async def test_the_dashboard_query_in_the_docs_runs_as_printed(human: Caller, project: str) -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "graphql.md").read_text()
    section = text.split("## A dashboard query", 1)[1]
    query = section.split("```graphql", 1)[1].split("```", 1)[0]
    assert query.strip() == DASHBOARD.strip()  # the bench times the same text
    task = await new_task(human)
    decision = await open_decision(human, [task])
    assert (await reopen(human, decision["id"], 1)).status_code == 200
    data = await human.gql(query, {"project": "demo"})
    assert "errors" not in data, data
    decisions = data["data"]["project"]["decisions"]
    assert decisions["totalCount"] == 1
    generations = decisions["nodes"][0]["generations"]["nodes"]
    assert [g["generation"] for g in generations] == [2, 1]
    assert generations[0]["affected"][0]["task"]["restId"] == task


async def test_errors_come_in_document_order(human: Caller, project: str) -> None:
    """One refusal under each item of a list: listed by path, as the items
    come (batched loaders failed them in no fixed order; 1, 0, 2 was seen)."""
    for n in range(6):
        await new_task(human, f"Task {n}")
    query = """{ project(id: "demo") { tasks(first: 6) { nodes {
        project { decisions(after: "bad") { totalCount } } } } } }"""
    for _ in range(5):
        errors = (await human.gql(query))["errors"]
        assert [e["path"][3] for e in errors] == list(range(6))
    # fields by where they stand, not by their names
    errors = (await human.gql('{ zz: node(id: "bad1") { id } aa: node(id: "bad2") { id } }'))[
        "errors"
    ]
    assert [e["path"][0] for e in errors] == ["zz", "aa"], errors


HISTORY = "totalCount nodes { %s } pageInfo { hasNextPage hasPreviousPage }"


def _consistent(history: dict[str, Any], field: str, expected: list[int]) -> None:
    assert [n[field] for n in history["nodes"]] == expected, history
    assert history["totalCount"] == len(expected)


async def test_a_replayed_payload_shows_its_history_as_of_the_record_it_answers(
    human: Caller, project: str
) -> None:
    """A replay answers with the record as it was (revision 1), but its
    `revisions` loaded the live history: `totalCount: 1` over two nodes, and
    `last: 2` one node. The history is now the record's own, as it was."""
    from tests.decisions_support import decision_path
    from tests.knowledge_support import correction

    def sel(connection: str, field: str) -> str:
        """The connection twice: forward and backward."""
        return (
            f"first: {connection}(first: 5) {{ {HISTORY % field} }}"
            f" last: {connection}(last: 5) {{ {HISTORY % field} }}"
        )

    create_task = (
        'mutation { taskCreate(input: {idempotencyKey: "t1", projectId: "demo", title: "Old"})'
        f" {{ replayed task {{ restId revision {sel('revisions', 'revision')} }} }} }}"
    )
    first = (await human.gql(create_task))["data"]["taskCreate"]
    task_id = first["task"]["restId"]
    edited = await human.patch(
        f"/api/v1/projects/demo/tasks/{task_id}", {"expected_revision": 1, "title": "New"}
    )
    assert edited.status_code == 200, edited.text
    again = (await human.gql(create_task))["data"]["taskCreate"]
    assert again["replayed"] is True and again["task"]["revision"] == 1
    for alias in ("first", "last"):
        _consistent(again["task"][alias], "revision", [1])
        assert not again["task"][alias]["pageInfo"]["hasNextPage"]

    create_knowledge = (
        'mutation { knowledgeCreate(input: {idempotencyKey: "k1", projectId: "demo",'
        ' kind: LESSON, title: "Old", body: "b", status: OBSERVED,'
        ' provenance: {summary: "s"}})'
        f" {{ replayed knowledge {{ restId revision {sel('revisions', 'revision')} }} }} }}"
    )
    made = (await human.gql(create_knowledge))["data"]["knowledgeCreate"]
    knowledge_id = made["knowledge"]["restId"]
    record = (await human.get(f"/api/v1/projects/demo/knowledge/{knowledge_id}")).json()
    fixed = await human.patch(
        f"/api/v1/projects/demo/knowledge/{knowledge_id}", correction(record, title="New")
    )
    assert fixed.status_code == 200, fixed.text
    again = (await human.gql(create_knowledge))["data"]["knowledgeCreate"]
    assert again["replayed"] is True
    for alias in ("first", "last"):
        _consistent(again["knowledge"][alias], "revision", [1])

    open_q = (
        'mutation { decisionOpen(input: {idempotencyKey: "d1", projectId: "demo",'
        ' question: "Go?", options: ["A", "B"], rationale: "r", requiredActor: HUMAN,'
        f' taskIds: ["{task_id}"], environment: "e"}})'
        f" {{ replayed decision {{ restId generation {sel('generations', 'generation')} }} }} }}"
    )
    opened = (await human.gql(open_q))["data"]["decisionOpen"]
    reopened = await human.post(
        decision_path(opened["decision"]["restId"], "reopen"),
        {"expected_generation": 1, "rationale": "again"},
    )
    assert reopened.status_code == 200, reopened.text
    again = (await human.gql(open_q))["data"]["decisionOpen"]
    assert again["replayed"] is True and again["decision"]["generation"] == 1
    for alias in ("first", "last"):
        _consistent(again["decision"][alias], "generation", [1])


@pytest.mark.parametrize("connection", ["revisions", "checkpoints", "submissions", "decisions"])
@pytest.mark.parametrize("direction", ["after", "before"])
async def test_a_malformed_cursor_fails_its_own_field_only(
    human: Caller, project: str, connection: str, direction: str
) -> None:
    """Tasks' histories load in one batch per request: a bad cursor in one
    task's field failed the batch, so a sibling that sent no cursor came back
    null too, with an error naming `cursor` (and `Task.decisions` named
    `after/before`)."""
    good, bad = await new_task(human, "good"), await new_task(human, "bad")
    size = "first" if direction == "after" else "last"
    query = (
        '{ project(id: "demo") {'
        f' a: task(id: "{good}") {{ {connection}({size}: 2) {{ totalCount }} }}'
        f' b: task(id: "{bad}") {{ {connection}({size}: 2, {direction}: "x") {{ totalCount }} }}'
        " } }"
    )
    data = await human.gql(query)
    assert data["data"]["project"]["a"] is not None, data
    assert data["data"]["project"]["a"][connection]["totalCount"] >= 0
    [error] = data["errors"]
    assert error["path"][:2] == ["project", "b"]
    assert error["extensions"] == {"code": "invalid_request", "field": direction}


async def test_event_cursors_are_read_as_rest_reads_after(human: Caller, project: str) -> None:
    """`events(after:)` read its cursor as JSON: " 5" passed and "05" was
    refused, the other way round from REST's `?after=`."""
    for i in range(3):
        await new_task(human, f"E{i}")
    query = '{ project(id: "demo") { events(first: 10, after: %s) { nodes { sequence } } } }'
    plain = await human.gql(query % '"1"')
    padded = await human.gql(query % '"001"')
    assert "errors" not in padded and padded["data"] == plain["data"]
    rest = (await human.get("/api/v1/projects/demo/events", after="001")).json()
    assert [e["sequence"] for e in rest["items"]] == [
        n["sequence"] for n in plain["data"]["project"]["events"]["nodes"]
    ]
    for refused in ('" 1"', '"1 "', '"-1"', '"1.0"', '"[1]"'):
        data = await human.gql(query % refused)
        assert data["errors"][0]["extensions"] == {"code": "invalid_request", "field": "after"}


def test_the_node_argument_is_described_as_a_global_id() -> None:
    from waypost.schema import schema

    argument = schema._schema.query_type.fields["node"].args["id"]  # type: ignore[union-attr]
    assert "global id" in (argument.description or "")
    assert "REST id" not in (argument.description or "")


@pytest.mark.parametrize("direction", ["after", "before"])
async def test_a_malformed_cursor_names_the_argument_given_it_in_a_two_way_query(
    human: Caller, project: str, direction: str
) -> None:
    """A query written for both directions declares `after` and `before` and
    sends one: the error named `cursor`, for it looked at which arguments
    the text names, not at which were given a value."""
    variables = {"f": 2, "a": "x"} if direction == "after" else {"l": 2, "b": "x", "a": ""}
    for connection in ("projects", 'project(id: "demo") { policyHistory'):
        closing = "}" * connection.count("{")
        query = (
            "query ($f: Int, $a: String, $l: Int, $b: String) {"
            f" {connection}(first: $f, after: $a, last: $l, before: $b) {{ totalCount }}"
            f" {closing} }}"
        )
        data = await human.gql(query, variables)
        [error] = data["errors"]
        assert error["extensions"] == {"code": "invalid_request", "field": direction}, data


EVENTS = """query ($project: String!, $first: Int, $after: String, $last: Int, $before: String) {
  project(id: $project) { events(first: $first, after: $after, last: $last, before: $before) {
    nodes { sequence } pageInfo { hasPreviousPage hasNextPage } } } }"""


async def test_an_event_cursor_says_what_lies_on_its_other_side_in_this_project(
    human: Caller, project: str
) -> None:
    """An event cursor is a position in the log every project shares, not an
    event of this project: `after: "0"` (the start, as REST's `?after=0`)
    answered `hasPreviousPage: true`, and so did a position before a
    project's first event; a `before` past its last event `hasNextPage: true`."""
    from tests.knowledge_support import make_project, make_task

    async def page(project_id: str, **variables: Any) -> tuple[list[int], dict[str, bool]]:
        data = await human.gql(EVENTS, {"project": project_id, **variables})
        assert "errors" not in data, data
        events = data["data"]["project"]["events"]
        return [n["sequence"] for n in events["nodes"]], events["pageInfo"]

    await new_task(human)
    other = await make_project(human, "other")
    await make_task(human, other, "Elsewhere")
    everything, _ = await page(other, first=100)
    first, last = everything[0], everything[-1]
    assert first > 1  # the demo project's events came first
    assert await page(other, first=1, after="0") == (
        [first],
        {"hasPreviousPage": False, "hasNextPage": len(everything) > 1},
    )
    assert (await page(other, first=1, after=str(first - 1)))[1]["hasPreviousPage"] is False
    assert (await page(other, first=1, after=str(first)))[1]["hasPreviousPage"] is True
    assert (await page(other, last=1, before=str(last + 1000)))[1]["hasNextPage"] is False
    assert (await page(other, last=1, before=str(last)))[1]["hasNextPage"] is True
    # the demo project's own log, from its start
    own, info = await page("demo", first=1, after="0")
    assert own == [1] and info["hasPreviousPage"] is False


EVENTS_BEFORE = """query ($before: String) { project(id: "demo") {
  events(last: 2, before: $before) { nodes { sequence } pageInfo { startCursor } } } }"""


async def test_events_paged_backward_never_repeat_the_cursors_event(
    human: Caller, project: str
) -> None:
    """`before` is exclusive, as `after` is (backward paging over events was
    tested without a cursor only: mutantaudit3)."""
    task = await new_task(human, "A")
    for i in range(4):
        await edit_task(human, task, title=f"A{i}")
    last = (await human.gql(EVENTS_BEFORE, {}))["data"]["project"]["events"]
    newest = [n["sequence"] for n in last["nodes"]]
    before = {"before": last["pageInfo"]["startCursor"]}
    page = (await human.gql(EVENTS_BEFORE, before))["data"]["project"]["events"]
    older = [n["sequence"] for n in page["nodes"]]
    assert older == [newest[0] - 2, newest[0] - 1], (newest, older)


async def test_an_empty_cursor_is_no_cursor_on_every_connection(
    human: Caller, project: str
) -> None:
    """docs/graphql.md, Connections: an empty `after` or `before` is no cursor
    (the first page), on every connection, `events` included, as an empty
    REST `cursor=` is; the forward page it gives says no page lies before it."""
    for title in ("A", "B", "C"):
        await new_task(human, title)
    query = """query ($a: String, $b: String) { project(id: "demo") {
      tasks(first: 2, after: $a) { nodes { title } pageInfo { hasPreviousPage } }
      back: tasks(last: 2, before: $b) { nodes { title } pageInfo { hasNextPage } }
      events(first: 2, after: $a) { nodes { sequence } pageInfo { hasPreviousPage } }
      policyHistory(first: 1, after: $a) { nodes { revision } } }
      projects(first: 1, after: $a) { nodes { restId } } }"""
    empty = await human.gql(query, {"a": "", "b": ""})
    assert "errors" not in empty, empty
    assert empty == await human.gql(query, {"a": None, "b": None})
    project_data = empty["data"]["project"]
    assert [n["title"] for n in project_data["tasks"]["nodes"]] == ["A", "B"]
    assert project_data["tasks"]["pageInfo"]["hasPreviousPage"] is False
    assert [n["title"] for n in project_data["back"]["nodes"]] == ["B", "C"]
    assert project_data["back"]["pageInfo"]["hasNextPage"] is False
    assert [n["sequence"] for n in project_data["events"]["nodes"]] == [1, 2]
