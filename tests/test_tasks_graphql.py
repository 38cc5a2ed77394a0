"""GraphQL over tasks: the Task type, Project.tasks/task, mutations and DataLoaders."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.tasks_support import claim, decline, make_task, open_decision, submit, task_path

TASK_FIELDS = """
  id restId title status revision ready priority kind acceptanceCriteria
  blockedBy { decisionIds decisionsTruncated dependencies { restId } }
  lease { owner { restId } sessionId expiresAt workflow expired }
  publication { holder { restId } preparedAt result { outcome detail } }
"""


ACTIONS = {
    "taskRenew", "taskRelease", "taskRecover", "taskComplete", "taskPublicationPrepare",
    "taskPublicationFinalize",
}  # fmt: skip
_keys = iter(range(10**6))


async def mutate(caller: Caller, name: str, input: dict[str, Any], fields: str) -> dict[str, Any]:
    key = f"gql-{next(_keys)}"
    input_type = "TaskActionInput" if name in ACTIONS else f"{name[0].upper()}{name[1:]}Input"
    query = (
        f"mutation($input: {input_type}!) {{ {name}(input: $input) {{"
        f" {fields} userErrors {{ code field message }} replayed }} }}"
    )
    data = await caller.gql(query, {"input": {"idempotencyKey": key, **input}})
    assert "errors" not in data, data
    result: dict[str, Any] = data["data"][name]
    return result


async def test_a_refusal_names_its_field_in_graphql_words(human: Caller, project: str) -> None:
    """The rules are written in REST's words: the message said
    `acceptance_criteria[1] must not be blank` beside `field: acceptanceCriteria[1]`."""
    refused = await mutate(
        human,
        "taskCreate",
        {"projectId": "demo", "title": "Parse", "acceptanceCriteria": ["fast", " "]},
        "task { title }",
    )
    (error,) = refused["userErrors"]
    assert error["field"] == "acceptanceCriteria[1]", error
    assert error["message"] == "acceptanceCriteria[1] must not be blank", error


def test_a_lessons_rule_names_its_field_in_graphql_words() -> None:
    """A rule a lesson shares with a record names the field alone: the message
    said `share_across_projects` beside `lessons[0].shareAcrossProjects`."""
    from waypost.schema.errors import in_graphql_words

    said = in_graphql_words(
        "collection=shared requires share_across_projects=true",
        "lessons[0].share_across_projects",
    )
    assert said == "collection=shared requires shareAcrossProjects=true"
    missing = in_graphql_words(
        "Object missing required field `source_uri`", "provenance.source_uri"
    )
    assert missing == "Object missing required field `sourceUri`"


def test_other_input_fields_a_message_names_are_in_graphql_words() -> None:
    """A refusal of `status` said "naming superseded_by_id" (parityaudit):
    any input field the text names reads as GraphQL names it; a REST
    `details` key, which `details` keeps in REST's words, and an error code
    do not change."""
    from waypost.schema.errors import in_graphql_words

    said = in_graphql_words(
        "a record cannot be created superseded; correct it later naming superseded_by_id",
        "status",
    )
    assert said == "a record cannot be created superseded; correct it later naming supersededById"
    kept = "reopen each (details.reopen, decision_ids): decision_required, not task_id alone"
    assert in_graphql_words(kept, None) == kept.replace("task_id", "taskId")


async def test_task_create_and_query_through_project(human: Caller, project: str) -> None:
    created = await mutate(
        human,
        "taskCreate",
        {"projectId": "demo", "title": "Parse", "acceptanceCriteria": ["fast"], "priority": 3},
        f"task {{ {TASK_FIELDS} }}",
    )
    assert created["userErrors"] == []
    task = created["task"]
    assert (task["status"], task["revision"], task["ready"]) == ("OPEN", 1, True)
    data = await human.gql(
        'query($id: String!) { project(id: "demo") { task(id: $id) { title'
        " revisions { edges { node { revision changedFields judgedChange actor { restId } } } }"
        " project { restId } } } }",
        {"id": task["restId"]},
    )
    found = data["data"]["project"]["task"]
    assert found["title"] == "Parse" and found["project"]["restId"] == "demo"
    revision = found["revisions"]["edges"][0]["node"]
    assert revision["revision"] == 1 and revision["judgedChange"] is True
    assert revision["actor"]["restId"] == human.principal_id


async def test_node_resolves_a_task_by_global_id(human: Caller, project: str) -> None:
    created = await mutate(human, "taskCreate", {"projectId": "demo", "title": "x"}, "task { id }")
    data = await human.gql(
        "query($id: ID!) { node(id: $id) { ... on Task { title } } }", {"id": created["task"]["id"]}
    )
    assert data["data"]["node"] == {"title": "x"}


async def test_unknown_task_is_null(human: Caller, project: str) -> None:
    data = await human.gql('{ project(id: "demo") { task(id: "task_nope") { title } } }')
    assert data["data"]["project"]["task"] is None


async def test_depends_on_subject_and_activities_are_objects(human: Caller, project: str) -> None:
    base = await make_task(human, "base")
    subject = await make_task(human, "subject", depends_on=[base["id"]])
    review = await make_task(human, "review", subject_task_id=subject["id"])
    data = await human.gql(
        'query($id: String!) { project(id: "demo") { task(id: $id) {'
        " dependsOn { title } activities { title subject { title } }"
        " blockedBy { dependencies { title } } } } }",
        {"id": subject["id"]},
    )
    task = data["data"]["project"]["task"]
    assert task["dependsOn"] == [{"title": "base"}]
    assert task["blockedBy"]["dependencies"] == [{"title": "base"}]
    assert task["activities"] == [{"title": "review", "subject": {"title": "subject"}}]
    assert review["subject_task_id"] == subject["id"]


async def test_project_tasks_filters_by_status_and_ready(
    service: Service, human: Caller, project: str
) -> None:
    a = await make_task(human, "a")
    service.clock.advance(seconds=1)
    await make_task(human, "b", depends_on=[a["id"]])
    data = await human.gql(
        '{ project(id: "demo") { all: tasks { edges { node { title } } }'
        " ready: tasks(ready: true) { edges { node { title } } }"
        " open: tasks(status: OPEN, first: 1) { edges { node { title } } pageInfo { hasNextPage } }"
        " } }"
    )
    p = data["data"]["project"]
    assert [e["node"]["title"] for e in p["all"]["edges"]] == ["a", "b"]
    assert [e["node"]["title"] for e in p["ready"]["edges"]] == ["a"]
    assert p["open"]["pageInfo"]["hasNextPage"] is True


async def test_workflow_through_graphql_mutations(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    agent = await service.agent()
    ids = {"projectId": "demo", "taskId": task["id"]}
    claimed = await mutate(
        agent,
        "taskClaim",
        {"projectId": "demo"},
        "task { restId } lease { workflow owner { restId } }",
    )
    assert claimed["userErrors"] == [] and claimed["task"]["restId"] == task["id"]
    assert claimed["lease"]["owner"]["restId"] == agent.principal_id
    renewed = await mutate(agent, "taskRenew", ids, "lease { expiresAt }")
    assert renewed["lease"]["expiresAt"] == "2026-11-29T18:15:00.000Z"
    noted = await mutate(
        agent, "taskCheckpoint", {**ids, "note": "n"}, "checkpoint { note actor { restId } }"
    )
    assert noted["checkpoint"]["note"] == "n"
    submitted = await mutate(
        agent, "taskSubmit", {**ids, "summary": "done", "lessons": []},
        "submission { summary taskRevision task { status } } lessons { restId }",
    )  # fmt: skip
    assert submitted["submission"]["task"]["status"] == "SUBMITTED"
    refused = await mutate(agent, "taskComplete", ids, "task { status }")
    assert refused["task"] is None
    assert refused["userErrors"][0]["code"] == "forbidden"
    completed = await mutate(human, "taskComplete", ids, "task { status }")
    assert completed["task"]["status"] == "DONE"


async def test_a_submit_naming_an_old_revision_is_a_revision_conflict(
    service: Service, human: Caller, project: str
) -> None:
    """taskSubmit's `expectedRevision` is REST's `expected_revision`."""
    task = await make_task(human)
    agent = await service.agent()
    ids = {"projectId": "demo", "taskId": task["id"]}
    await mutate(agent, "taskClaim", {**ids}, "task { restId }")
    await mutate(
        human, "taskUpdate", {**ids, "expectedRevision": 1, "title": "t2"}, "task { revision }"
    )
    fields = "submission { taskRevision }"
    stale = await mutate(
        agent, "taskSubmit", {**ids, "summary": "s", "expectedRevision": 1}, fields
    )
    assert stale["submission"] is None
    assert [e["code"] for e in stale["userErrors"]] == ["revision_conflict"]
    assert "it is at revision 2" in stale["userErrors"][0]["message"]
    done = await mutate(agent, "taskSubmit", {**ids, "summary": "s", "expectedRevision": 2}, fields)
    assert done["submission"] == {"taskRevision": 2}


async def test_user_errors_carry_rest_codes_and_camel_case_fields(
    human: Caller, project: str
) -> None:
    task = await make_task(human)
    ids = {"projectId": "demo", "taskId": task["id"]}
    stale = await mutate(
        human, "taskUpdate", {**ids, "expectedRevision": 7, "title": "x"}, "task { title }"
    )
    assert stale["userErrors"][0]["code"] == "revision_conflict"
    bad = await mutate(
        human, "taskCreate", {"projectId": "demo", "title": "t", "dependsOn": ["task_missing"]},
        "task { title }",
    )  # fmt: skip
    assert bad["userErrors"][0]["code"] == "invalid_request"
    assert bad["userErrors"][0]["field"] == "dependsOn[0]"
    nothing = await mutate(
        human, "taskClaim", {"projectId": "demo", "taskId": task["id"]}, "task { restId }"
    )
    assert nothing["userErrors"] == []
    again = await mutate(human, "taskClaim", {"projectId": "demo"}, "task { restId }")
    assert again["userErrors"][0]["code"] == "not_found"


async def test_user_errors_carry_the_rest_details(
    service: Service, human: Caller, project: str
) -> None:
    """Only `reason` came through: the lapsed leases a refusal said to
    recover, the decisions it said to reopen or leave and a lease's holder
    were in REST's `details` alone, and an agent on GraphQL could not act
    on the advice (agentflow)."""
    task = await make_task(human)
    ids = {"projectId": "demo", "taskId": task["id"]}

    async def refusal(name: str, input: dict[str, Any]) -> dict[str, Any]:
        key = f"gql-details-{next(_keys)}"
        input_type = "TaskActionInput" if name in ACTIONS else f"{name[0].upper()}{name[1:]}Input"
        data = await human.gql(
            f"mutation($input: {input_type}!) {{ {name}(input: $input) {{"
            " userErrors { code field reason details } } }",
            {"input": {"idempotencyKey": key, **input}},
        )
        [error] = data["data"][name]["userErrors"]
        return dict(error)

    stale = await refusal("taskUpdate", {**ids, "expectedRevision": 7, "title": "x"})
    assert stale["details"] == {"expected_revision": 7, "current_revision": 1}
    bad = await refusal("taskCreate", {"projectId": "demo", "title": "t", "dependsOn": ["x"]})
    assert (bad["field"], bad["details"]) == ("dependsOn[0]", {"field": "dependsOn[0]"})
    decision = await open_decision(human, task["id"])
    await decline(human, decision, "defer")
    held = await refusal("taskClaim", ids)
    assert (held["code"], held["reason"]) == ("decision_required", "declined")
    assert held["details"]["decision_ids"] == held["details"]["declined"] == [decision]
    # a lapsed lease: nothing is ready, and the refusal names what to recover
    other = await make_task(human)
    await claim(human, other["id"])
    service.clock.advance(hours=2)
    nothing = await refusal("taskClaim", {"projectId": "demo"})
    assert (nothing["code"], nothing["reason"]) == ("not_found", "nothing_ready")
    assert nothing["details"]["expired_leases"] == [other["id"]]


async def test_update_cancel_recover_and_publication_mutations(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    ids = {"projectId": "demo", "taskId": task["id"]}
    prepared = await mutate(human, "taskPublicationPrepare", ids, f"task {{ {TASK_FIELDS} }}")
    assert prepared["task"]["publication"]["holder"]["restId"] == human.principal_id
    result = await mutate(
        human, "taskPublicationResult", {**ids, "outcome": "FAILED", "detail": "conflict"},
        "task { publication { result { outcome detail } } }",
    )  # fmt: skip
    assert result["task"]["publication"]["result"] == {"outcome": "FAILED", "detail": "conflict"}
    final = await mutate(
        human, "taskPublicationFinalize", ids, "task { publication { preparedAt } }"
    )
    assert final["task"]["publication"] is None
    agent = await service.agent()
    await mutate(agent, "taskClaim", ids | {"taskId": task["id"]}, "task { restId }")
    service.clock.advance(minutes=16)
    recovered = await mutate(
        human, "taskRecover", ids,
        "lease { owner { restId } expired } previousLease { owner { restId } expired }"
        " checkpoints { note }",
    )  # fmt: skip
    assert recovered["previousLease"]["owner"]["restId"] == agent.principal_id
    assert (recovered["previousLease"]["expired"], recovered["lease"]["expired"]) == (True, False)
    assert recovered["lease"]["owner"]["restId"] == human.principal_id
    released = await mutate(human, "taskRelease", ids, "task { status }")
    assert released["task"]["status"] == "OPEN"
    cancelled = await mutate(
        human, "taskUpdate", {**ids, "expectedRevision": 1, "status": "CANCELLED"},
        "task { status revision }",
    )  # fmt: skip
    assert cancelled["task"] == {"status": "CANCELLED", "revision": 2}


async def test_an_agent_cannot_remove_an_open_dependency_over_graphql(
    service: Service, human: Caller, project: str
) -> None:
    first = await make_task(human, "first")
    task = await make_task(human, "after", depends_on=[first["id"]])
    agent = await service.agent()
    refused = await mutate(
        agent, "taskUpdate",
        {"projectId": "demo", "taskId": task["id"], "expectedRevision": 1, "dependsOn": []},
        "task { ready }",
    )  # fmt: skip
    assert refused["task"] is None
    [error] = refused["userErrors"]
    assert (error["code"], error["field"]) == ("forbidden", "dependsOn"), error
    assert (await human.get(task_path(task["id"]))).json()["depends_on"] == [first["id"]]


async def test_replayed_mutation_says_so(human: Caller, project: str) -> None:
    query = (
        "mutation($input: TaskCreateInput!) { taskCreate(input: $input) {"
        " task { restId } replayed } }"
    )
    variables = {"input": {"idempotencyKey": "same", "projectId": "demo", "title": "t"}}
    first = (await human.gql(query, variables))["data"]["taskCreate"]
    second = (await human.gql(query, variables))["data"]["taskCreate"]
    assert second["replayed"] is True and second["task"] == first["task"]
    r = await human.get(task_path(first["task"]["restId"]))
    assert r.status_code == 200


PAGE_QUERY = """
{ project(id: "demo") { tasks(first: 100) { edges { node {
  title ready lease { owner { name } expired } publication { holder { name } }
  revisions(first: 5) { edges { node { revision actor { name } dependsOn { title } } } }
  checkpoints(first: 3) { edges { node { note actor { name } } } }
  submissions(first: 2) { edges { node { summary task { title } } } }
  dependsOn { title dependsOn { title } }
  subject { title }
  activities { title }
  blockedBy { decisionIds decisions { id } dependencies { title } }
} } } } }
"""


async def count_statements(service: Service, caller: Caller, query: str) -> int:
    statements: list[str] = []
    await service.rt.db.set_trace(statements.append)
    try:
        data = await caller.gql(query)
    finally:
        await service.rt.db.set_trace(None)
    assert "errors" not in data, data
    return len(statements)


async def make_graph(human: Caller, start: int, count: int) -> list[str]:
    """A chain of tasks, each depending on or an activity of the one before; some
    claimed with a checkpoint, some submitted, some published, some blocked."""
    made: list[str] = []
    for i in range(start, start + count):
        fields: dict[str, Any] = {}
        if made:
            fields = {"depends_on": [made[-1]]} if i % 2 else {"subject_task_id": made[-1]}
        task_id = (await make_task(human, f"t{i}", **fields))["id"]
        made.append(task_id)
        r = await human.patch(task_path(task_id), {"expected_revision": 1, "priority": i})
        assert r.status_code == 200
        if i % 4 == 0:  # no dependency: ready to claim
            await claim(human, task_id)
            r = await human.post(task_path(task_id, "checkpoint"), {"note": f"n{i}"})
            assert r.status_code == 200, r.text
            if i % 8 == 0:
                await submit(human, task_id)
        if i % 10 == 5:
            r = await human.post(task_path(task_id, "publication/prepare"))
            assert r.status_code == 200, r.text
        if i % 10 == 0:
            await open_decision(human, task_id)
    return made


async def test_task_page_with_nested_references_costs_a_bounded_number_of_statements(
    service: Service, human: Caller, project: str
) -> None:
    await make_graph(human, 0, 10)
    small = await count_statements(service, human, PAGE_QUERY)
    made = await make_graph(human, 10, 90)
    large = await count_statements(service, human, PAGE_QUERY)
    # one task blocked by several decisions costs no more than one blocked by one
    for _ in range(3):
        await open_decision(human, made[-1])
    assert await count_statements(service, human, PAGE_QUERY) == large
    # ten times the tasks: the same statements, but for the gate's, whose
    # number follows which tasks of a batch the stored state holds (its
    # confirmed walk for those, a derivation for the rest), not how many
    assert large - small <= 4
    assert large <= 40


PROJECT_THROUGH_EVERY_TASK = """{ project(id: "demo") { %s tasks(first: 100) { nodes {
  project { decisions(first: 5) { totalCount nodes { restId } }
            tasks(first: 3) { totalCount nodes { restId } }
            knowledge(first: 2) { totalCount nodes { restId } } } } } } }"""


async def test_a_project_reached_through_every_task_reads_its_lists_once(
    service: Service, human: Caller, project: str
) -> None:
    """Each reference to the project read its connections again: a project's
    `decisions(first: 100)` under 2,000 affected tasks was read 2,000 times (34
    s, 1.7 GB) before the object limit refused the answer. Both paths: the
    fast one, and graphql-core's (which a `q` filter sends the query to)."""
    for i in range(12):
        task = await make_task(human, f"t{i}")
        if i < 3:
            await open_decision(human, task["id"])
    for prefix in ("", 'search: tasks(q: "zzz") { totalCount }'):
        statements: list[str] = []
        await service.rt.db.set_trace(statements.append)
        try:
            data = await human.gql(PROJECT_THROUGH_EVERY_TASK % prefix)
        finally:
            await service.rt.db.set_trace(None)
        assert "errors" not in data, data
        nodes = data["data"]["project"]["tasks"]["nodes"]
        assert len(nodes) == 12 and all(n == nodes[0] for n in nodes)
        assert nodes[0]["project"]["decisions"]["totalCount"] == 3
        # the page and the count of the project's decisions, each read once
        pages = [s for s in statements if "SELECT d.id AS decision_id" in s]
        counts = [s for s in statements if "SELECT count(*) FROM decisions d" in s]
        assert (len(pages), len(counts)) == (1, 1), (prefix, len(pages), len(counts))
        knowledge_counts = [s for s in statements if "count(*)" in s and "knowledge" in s]
        assert len(knowledge_counts) == 1, (prefix, knowledge_counts)


async def test_task_submit_returns_lessons_as_knowledge_objects(
    service: Service, human: Caller, project: str
) -> None:
    task = await make_task(human)
    agent = await service.agent()
    ids = {"projectId": "demo", "taskId": task["id"]}
    await mutate(agent, "taskClaim", ids, "task { restId }")
    lesson = {"kind": "LESSON", "title": "Retry the flaky step", "body": "It passes on retry."}
    submitted = await mutate(
        agent, "taskSubmit", {**ids, "summary": "done", "lessons": [lesson]},
        "submission { restId } lessons { title provenance { sourceTaskId } }",
    )  # fmt: skip
    assert submitted["userErrors"] == []
    assert submitted["lessons"] == [
        {"title": "Retry the flaky step", "provenance": {"sourceTaskId": task["id"]}}
    ]


async def test_task_submit_lessons_are_a_typed_camel_case_input(
    service: Service, human: Caller, project: str
) -> None:
    """Service contract section 13: input fields camelCase, enum values UPPER_CASE,
    also inside a submission's lessons (once JSON in the REST snake_case shape)."""
    task = await make_task(human)
    agent = await service.agent()
    ids = {"projectId": "demo", "taskId": task["id"]}
    await mutate(agent, "taskClaim", ids, "task { restId }")
    query = (
        "mutation($input: TaskSubmitInput!) { taskSubmit(input: $input)"
        " { userErrors { code field } } }"
    )
    for lesson in (
        {"kind": "lesson", "title": "t", "body": "b"},
        {"kind": "LESSON", "title": "t", "body": "b", "share_across_projects": True},
        {"kind": "LESSON", "title": "t", "body": "b", "provenance": {"sourceTaskId": "x"}},
    ):
        body = {"idempotencyKey": "k1", **ids, "summary": "s", "lessons": [lesson]}
        data = await agent.gql(query, {"input": body})
        assert data["errors"][0]["extensions"]["code"] == "invalid_request", (lesson, data)
    lesson = {
        "kind": "FACT", "title": "t", "body": "b",
        "scope": {"taskIds": ["task_missing"]}, "provenance": {"sourceUri": "https://x.example"},
    }  # fmt: skip
    refused = await mutate(
        agent, "taskSubmit", {**ids, "summary": "done", "lessons": [lesson]}, "task { restId }"
    )
    [error] = refused["userErrors"]
    assert error["field"] == "lessons[0].scope.taskIds[0]", error
    # the message names the field as `field` does, the lesson's place included
    lesson = {"kind": "FACT", "title": "t", "body": "b", "tags": ["x", "x"]}
    refused = await mutate(
        agent, "taskSubmit", {**ids, "summary": "done", "lessons": [lesson]}, "task { restId }"
    )
    [error] = refused["userErrors"]
    assert error["field"] == "lessons[0].tags[1]", error
    assert error["message"] == "lessons[0].tags[1] is a duplicate of an earlier entry", error
