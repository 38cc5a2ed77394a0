"""Knowledge over GraphQL: the same resolvers, rules and codes as REST."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create, kpath, make_project, make_task
from waypost.schema.relay import global_id

CREATE = """
mutation($input: KnowledgeCreateInput!) {
  knowledgeCreate(input: $input) {
    knowledge { id restId kind status collection shareAcrossProjects title revision
                scope { taskIds components } tags provenance { summary actorId recordedAt } }
    userErrors { code field message }
    replayed
  }
}"""

CORRECT = """
mutation($input: KnowledgeCorrectInput!) {
  knowledgeCorrect(input: $input) {
    knowledge { restId revision status title supersededBy { restId title } }
    userErrors { code field }
  }
}"""

FEEDBACK = """
mutation($input: KnowledgeFeedbackInput!) {
  knowledgeFeedback(input: $input) {
    feedback { revision useful comment knowledge { restId } }
    userErrors { code field }
  }
}"""


def create_input(key: str, **fields: Any) -> dict[str, Any]:
    return {"idempotencyKey": key, "projectId": "demo", "kind": "LESSON", "title": "T",
            "body": "B", **fields}  # fmt: skip


def correct_input(key: str, record: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body = correction(record)
    return {
        "idempotencyKey": key, "projectId": record["project_id"], "id": record["id"],
        "expectedRevision": body["expected_revision"], "title": body["title"],
        "body": body["body"], "status": body["status"].upper(),
        "scope": {"taskIds": [], "components": [], "environments": [], "versions": []},
        "tags": body["tags"], "applicability": body["applicability"],
        "provenance": {"summary": "fixed", "sourceUri": None, "sourceTaskId": None,
                       "sourceSubmissionId": None},
        **fields,
    }  # fmt: skip


async def test_knowledge_create_returns_the_record(human: Caller, project: str) -> None:
    data = await human.gql(
        CREATE,
        {"input": create_input("g1", status="VALIDATED", tags=["x"],
                               scope={"components": ["api"]}, provenance={"summary": "s"})},
    )  # fmt: skip
    payload = data["data"]["knowledgeCreate"]
    assert payload["userErrors"] == [] and payload["replayed"] is False
    k = payload["knowledge"]
    assert k["kind"] == "LESSON" and k["status"] == "VALIDATED" and k["collection"] == "PROJECT"
    assert k["scope"] == {"taskIds": [], "components": ["api"]} and k["tags"] == ["x"]
    assert k["provenance"]["actorId"] == human.principal_id
    rest = (await human.get(kpath(project, k["restId"]))).json()
    assert rest["title"] == "T" and rest["status"] == "validated"
    again = await human.gql(
        CREATE,
        {"input": create_input("g1", status="VALIDATED", tags=["x"],
                               scope={"components": ["api"]}, provenance={"summary": "s"})},
    )  # fmt: skip
    assert again["data"]["knowledgeCreate"]["replayed"] is True
    assert again["data"]["knowledgeCreate"]["knowledge"]["restId"] == k["restId"]


async def test_knowledge_create_reports_user_errors_with_camel_case_fields(
    human: Caller, project: str
) -> None:
    cases = [
        (create_input("e1", status="SUPERSEDED"), "status"),
        (create_input("e2", collection="SHARED"), "shareAcrossProjects"),
        (create_input("e3", scope={"taskIds": ["task_nope"]}), "scope.taskIds[0]"),
        (create_input("e4", tags=["a"] * 2), "tags[1]"),
        (create_input("e5", title="x" * 201), "title"),
    ]
    for variables, field in cases:
        data = await human.gql(CREATE, {"input": variables})
        payload = data["data"]["knowledgeCreate"]
        assert payload["knowledge"] is None
        assert payload["userErrors"][0]["code"] == "invalid_request"
        assert payload["userErrors"][0]["field"] == field
    assert (await human.get(kpath(project))).json()["items"] == []


async def test_knowledge_correct_and_its_revision_conflict(human: Caller, project: str) -> None:
    old = await create(human, project)
    new = await create(human, project, title="replacement")
    data = await human.gql(
        CORRECT,
        {"input": correct_input("c1", old, status="SUPERSEDED", supersededById=new["id"])},
    )
    payload = data["data"]["knowledgeCorrect"]
    assert payload["userErrors"] == []
    assert payload["knowledge"]["revision"] == 2 and payload["knowledge"]["status"] == "SUPERSEDED"
    assert payload["knowledge"]["supersededBy"] == {"restId": new["id"], "title": "replacement"}
    stale = await human.gql(CORRECT, {"input": correct_input("c2", old, title="late")})
    assert stale["data"]["knowledgeCorrect"]["userErrors"] == [
        {"code": "revision_conflict", "field": None}
    ]


async def test_knowledge_correct_needs_every_provenance_member(human: Caller, project: str) -> None:
    record = await create(human, project, provenance={"source_uri": "https://x.test/1"})
    variables = correct_input("c3", record)
    del variables["provenance"]["sourceUri"]
    data = await human.gql(CORRECT, {"input": variables})
    assert data["data"]["knowledgeCorrect"]["userErrors"] == [
        {"code": "invalid_request", "field": "provenance.sourceUri"}
    ]
    # and the message names it as the field does (it said `source_uri`)
    saying = CORRECT.replace("userErrors { code field }", "userErrors { message }")
    data = await human.gql(saying, {"input": variables})
    [error] = data["data"]["knowledgeCorrect"]["userErrors"]
    assert error["message"] == "Object missing required field `sourceUri`", error
    del variables["scope"]["versions"]  # the schema itself requires every scope dimension
    data = await human.gql(CORRECT, {"input": variables})
    assert data["errors"] and data["data"] is None
    assert (await human.get(kpath(project, record["id"]))).json()["revision"] == 1


async def test_knowledge_feedback_and_totals(human: Caller, project: str) -> None:
    record = await create(human, project)
    base = {"projectId": project, "id": record["id"], "expectedRevision": 1}
    for n, useful in enumerate([True, False, True]):
        data = await human.gql(
            FEEDBACK, {"input": {"idempotencyKey": f"f{n}", "useful": useful, **base}}
        )
        assert data["data"]["knowledgeFeedback"]["feedback"]["revision"] == 1
    await human.patch(kpath(project, record["id"]), correction(record, title="v2"))
    stale = await human.gql(FEEDBACK, {"input": {"idempotencyKey": "f9", "useful": True, **base}})
    assert stale["data"]["knowledgeFeedback"]["userErrors"][0]["code"] == "revision_conflict"
    data = await human.gql(
        """query($id: String!) { project(id: "demo") { knowledgeItem(id: $id) {
             revision feedbackTotals { useful notUseful }
             revisions(first: 1) { edges { node { revision title feedback { useful notUseful } } }
                                  pageInfo { hasNextPage endCursor } } } } }""",
        {"id": record["id"]},
    )
    item = data["data"]["project"]["knowledgeItem"]
    assert item["feedbackTotals"] == {"useful": 2, "notUseful": 1}
    assert item["revisions"]["edges"][0]["node"] == {
        "revision": 2, "title": "v2", "feedback": {"useful": 0, "notUseful": 0}
    }  # fmt: skip
    cursor = item["revisions"]["pageInfo"]["endCursor"]
    assert item["revisions"]["pageInfo"]["hasNextPage"] is True
    data = await human.gql(
        """query($id: String!, $after: String) { project(id: "demo") { knowledgeItem(id: $id) {
             revisions(first: 5, after: $after) { edges { node { revision feedback { useful } } }
                                                  pageInfo { hasNextPage } } } } }""",
        {"id": record["id"], "after": cursor},
    )
    revisions = data["data"]["project"]["knowledgeItem"]["revisions"]
    assert [e["node"] for e in revisions["edges"]] == [{"revision": 1, "feedback": {"useful": 2}}]
    assert revisions["pageInfo"]["hasNextPage"] is False


async def test_project_knowledge_filters_and_shared_records(
    service: Service, human: Caller, project: str
) -> None:
    source = await make_project(human, "source")
    shared = await create(human, source, collection="shared", share_across_projects=True)
    service.clock.advance(seconds=1)
    fact = await create(human, project, kind="fact", tags=["db"])
    service.clock.advance(seconds=1)
    await create(human, project, status="deprecated")
    query = """query($kind: KnowledgeKind, $status: KnowledgeStatus, $tag: String,
                     $shared: Boolean! = false, $first: Int) {
      project(id: "demo") { knowledge(kind: $kind, status: $status, tag: $tag,
                                      includeShared: $shared, first: $first) {
        edges { node { restId status project { restId } } } pageInfo { hasNextPage } } } }"""

    async def ids(**variables: Any) -> list[str]:
        data = await human.gql(query, variables)
        assert "errors" not in data, data
        return [e["node"]["restId"] for e in data["data"]["project"]["knowledge"]["edges"]]

    assert await ids(kind="FACT") == [fact["id"]]
    assert await ids(tag="db") == [fact["id"]]
    assert len(await ids(status="DEPRECATED")) == 1
    assert shared["id"] not in await ids()
    assert (await ids(shared=True))[-1] == shared["id"]
    assert len(await ids(shared=True, first=1)) == 1
    data = await human.gql(query, {"shared": True})
    nodes = [e["node"] for e in data["data"]["project"]["knowledge"]["edges"]]
    assert nodes[-1]["project"] == {"restId": source}
    bad = await human.gql(query, {"first": 101})
    assert bad["errors"][0]["extensions"]["code"] == "invalid_request"


async def test_knowledge_item_of_another_project_is_null(human: Caller, project: str) -> None:
    other = await make_project(human, "other")
    record = await create(human, other)
    data = await human.gql(
        'query($id: String!) { project(id: "demo") { knowledgeItem(id: $id) { restId } } }',
        {"id": record["id"]},
    )
    assert data["data"]["project"]["knowledgeItem"] is None


async def test_node_resolves_a_knowledge_global_id(human: Caller, project: str) -> None:
    created = await human.gql(CREATE, {"input": create_input("n1")})
    node_id = created["data"]["knowledgeCreate"]["knowledge"]["id"]
    data = await human.gql(
        "query($id: ID!) { node(id: $id) { ... on Knowledge { restId title } } }", {"id": node_id}
    )
    assert data["data"]["node"]["title"] == "T"


async def test_source_task_and_scope_tasks_are_objects(human: Caller, project: str) -> None:
    task_id = await make_task(human, project, "the source")
    record = await create(
        human, project, scope={"task_ids": [task_id]}, provenance={"source_task_id": task_id}
    )
    data = await human.gql(
        """query($id: String!) { project(id: "demo") { knowledgeItem(id: $id) {
             sourceTask { restId title } scope { tasks { restId } }
             provenance { actor { restId } sourceTask { restId } } } } }""",
        {"id": record["id"]},
    )
    item = data["data"]["project"]["knowledgeItem"]
    assert item["sourceTask"] == {"restId": task_id, "title": "the source"}
    assert item["scope"]["tasks"] == [{"restId": task_id}]
    assert item["provenance"] == {
        "actor": {"restId": human.principal_id}, "sourceTask": {"restId": task_id}
    }  # fmt: skip


async def test_a_page_of_records_costs_a_fixed_number_of_reads_and_statements(
    service: Service, human: Caller, project: str
) -> None:
    query = """{ project(id: "demo") { knowledge(first: 50) { edges { node {
        restId feedbackTotals { useful } supersededBy { restId title }
        revisions(first: 2) { edges { node { revision feedback { useful } } } } } } } } }"""
    newest: dict[str, Any] | None = None

    async def cost_for(total: int) -> tuple[int, int]:
        nonlocal newest
        while len((await human.get(kpath(project), limit=200)).json()["items"]) < total:
            made = await create(human, project)
            if newest is not None:  # each record superseded by the next: distinct references
                body = correction(newest, status="superseded", superseded_by_id=made["id"])
                r = await human.patch(kpath(project, newest["id"]), body)
                assert r.status_code == 200, r.text
            newest = made
        statements: list[str] = []
        await service.rt.db.set_trace(statements.append)
        try:
            data = await human.gql(query)
        finally:
            await service.rt.db.set_trace(None)
        edges = data["data"]["project"]["knowledge"]["edges"]
        assert len(edges) == total
        assert sum(1 for e in edges if e["node"]["supersededBy"]) == total - 1
        reads = sum(1 for s in statements if s.strip().upper().startswith("BEGIN"))
        return reads, len(statements)

    small, large = await cost_for(2), await cost_for(9)
    assert small == large


async def test_a_project_only_replacement_is_null_through_another_project(
    human: Caller, project: str
) -> None:
    """A shared record may name a project-only replacement of its own project;
    through another project that replacement is unreadable (REST: 404), so
    every GraphQL path to it from there is null: the list, its revisions,
    `knowledgeItem`, the context packet, a feedback payload."""
    source = await make_project(human, "source")
    hidden = await create(human, source, kind="fact", title="heron plan", body="internal only")
    shared = await create(
        human, source, title="heron approach", collection="shared", share_across_projects=True
    )
    r = await human.patch(
        kpath(source, shared["id"]),
        correction(shared, status="superseded", superseded_by_id=hidden["id"]),
    )
    assert r.status_code == 200, r.text
    assert (await human.get(kpath(project, hidden["id"]))).status_code == 404
    replaced = "supersededById supersededBy { restId body }"
    query = f"""query($p: String!, $id: String!) {{ project(id: $p) {{
      knowledge(includeShared: true, q: "heron") {{ nodes {{ restId {replaced}
        revisions {{ nodes {{ revision {replaced} }} }} }} }}
      knowledgeItem(id: $id) {{ {replaced} }}
      context(q: "heron", includeShared: true) {{
        items {{ ... on Knowledge {{ restId {replaced} }} }} }}
    }} }}"""

    async def seen_from(p: str) -> dict[str, Any]:
        data = await human.gql(query, {"p": p, "id": shared["id"]})
        assert "errors" not in data, data
        return dict(data["data"]["project"])

    there = await seen_from(project)
    [listed] = there["knowledge"]["nodes"]
    assert listed["supersededById"] == hidden["id"] and listed["supersededBy"] is None
    newest = listed["revisions"]["nodes"][0]
    assert newest["revision"] == 2 and newest["supersededBy"] is None
    assert there["knowledgeItem"]["supersededBy"] is None
    [packed] = [i for i in there["context"]["items"] if i]
    assert packed["restId"] == shared["id"] and packed["supersededBy"] is None

    home = await seen_from(source)
    seen = home["knowledgeItem"]["supersededBy"]
    assert seen == {"restId": hidden["id"], "body": "internal only"}
    by_id = await human.gql(
        "query($id: ID!) { node(id: $id) { ... on Knowledge { supersededBy { restId } } } }",
        {"id": global_id("Knowledge", shared["id"])},
    )
    assert by_id["data"]["node"] == {"supersededBy": {"restId": hidden["id"]}}

    given = await human.gql(
        FEEDBACK.replace("knowledge { restId }", "knowledge { restId supersededBy { restId } }"),
        {"input": {"idempotencyKey": "f1", "projectId": project, "id": shared["id"],
                   "expectedRevision": 2, "useful": True}},
    )  # fmt: skip
    feedback = given["data"]["knowledgeFeedback"]["feedback"]
    assert feedback["knowledge"] == {"restId": shared["id"], "supersededBy": None}
