"""Decisions over GraphQL: the same rules as REST, nested history, bounded SQL."""

from __future__ import annotations

import itertools
from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import edit_task, new_task, open_decision, reopen, send_answer
from waypost.schema.relay import global_id

_keys = itertools.count()

OPEN = """
mutation Open($input: DecisionOpenInput!) {
  decisionOpen(input: $input) {
    decision { id restId status workAllowed generation requiredActor options
               current { environment conditions answer { disposition } } }
    userErrors { code field message }
    replayed
  }
}"""

ANSWER = """
mutation Answer($input: DecisionAnswerInput!) {
  decisionAnswer(input: $input) {
    decision { restId status workAllowed
               current { answer { disposition answer relayed relay { prompt response }
                                  actor { restId } authorizedBy { restId }
                                  relayPolicyRevision timedOut } } }
    userErrors { code field message }
    replayed
  }
}"""

REOPEN = """
mutation Reopen($input: DecisionReopenInput!) {
  decisionReopen(input: $input) {
    decision { restId status generation current { reopenRationale environment } }
    userErrors { code field message }
  }
}"""


def key() -> str:
    return f"gql-{next(_keys)}"


def open_input(task_ids: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "idempotencyKey": key(),
        "projectId": "demo",
        "question": "May the migration run?",
        "options": ["Proceed", "Stop"],
        "rationale": "It rewrites billing.",
        "requiredActor": "HUMAN",
        "taskIds": task_ids,
        "environment": "staging",
        **extra,
    }


def answer_input(decision_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "idempotencyKey": key(),
        "projectId": "demo",
        "decisionId": decision_id,
        "expectedGeneration": 1,
        "disposition": "ALLOW",
        "answer": "Proceed",
        "rationale": "Checked.",
        "conditionsConfirmed": True,
        **extra,
    }


async def test_decision_open_answer_and_reopen_mutations(human: Caller, project: str) -> None:
    task = await new_task(human)
    opened = await human.gql(OPEN, {"input": open_input([task], conditions=["backup"])})
    payload = opened["data"]["decisionOpen"]
    assert payload["userErrors"] == [] and payload["replayed"] is False
    decision = payload["decision"]
    assert decision["status"] == "PENDING" and decision["workAllowed"] is False
    assert decision["requiredActor"] == "HUMAN" and decision["options"] == ["Proceed", "Stop"]
    assert decision["current"] == {
        "environment": "staging", "conditions": ["backup"], "answer": None
    }  # fmt: skip
    answered = await human.gql(ANSWER, {"input": answer_input(decision["restId"])})
    result = answered["data"]["decisionAnswer"]
    assert result["userErrors"] == []
    assert result["decision"]["status"] == "ALLOWED" and result["decision"]["workAllowed"]
    assert result["decision"]["current"]["answer"]["actor"] == {"restId": human.principal_id}
    reopened = await human.gql(
        REOPEN,
        {"input": {"idempotencyKey": key(), "projectId": "demo", "decisionId": decision["restId"],
                   "expectedGeneration": 1, "rationale": "Again.", "environment": "prod"}},
    )  # fmt: skip
    assert reopened["data"]["decisionReopen"]["decision"] == {
        "restId": decision["restId"], "status": "PENDING", "generation": 2,
        "current": {"reopenRationale": "Again.", "environment": "prod"},
    }  # fmt: skip


async def test_mutation_refusals_come_back_as_user_errors_with_rest_codes(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    agent = await service.agent()
    refused = await agent.gql(
        OPEN, {"input": open_input([task], recommendation="Proceed", reversible=True)}
    )
    assert refused["data"]["decisionOpen"]["decision"] is None
    assert refused["data"]["decisionOpen"]["userErrors"][0]["code"] == "forbidden"
    bad = await human.gql(OPEN, {"input": open_input([task, "task_missing"])})
    assert bad["data"]["decisionOpen"]["userErrors"] == [
        {
            "code": "invalid_request",
            "field": "taskIds[1]",
            "message": "no such task in this project",
        }
    ]
    # a task's global id where its REST id is taken: the refusal says which to give
    bad = await human.gql(OPEN, {"input": open_input([task, global_id("Task", task)])})
    assert bad["data"]["decisionOpen"]["userErrors"] == [
        {
            "code": "invalid_request",
            "field": "taskIds[1]",
            "message": f'no such task in this project (that is the global id of Task "{task}":'
            " give its REST id, `restId`)",
        }
    ]
    decision = await open_decision(human, [task])
    for extra, code, field in (
        ({"answer": "Maybe"}, "invalid_request", "answer"),
        ({"conditionsConfirmed": False}, "invalid_request", "conditionsConfirmed"),
        ({"expectedGeneration": 2}, "generation_conflict", None),
    ):
        r = await human.gql(ANSWER, {"input": answer_input(decision["id"], **extra)})
        errors = r["data"]["decisionAnswer"]["userErrors"]
        assert [(e["code"], e["field"]) for e in errors] == [(code, field)], r
    r = await agent.gql(ANSWER, {"input": answer_input(decision["id"])})
    assert r["data"]["decisionAnswer"]["userErrors"][0]["code"] == "forbidden"


async def test_relayed_answer_over_graphql(service: Service, human: Caller, project: str) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    r = await human.patch(
        "/api/v1/projects/demo/policy",
        {"expected_revision": 1, "allow_relayed_human_answers": True},
    )
    assert r.status_code == 200
    agent = await service.agent()
    relay = {"prompt": "Proceed?", "response": "yes, proceed"}
    r = await agent.gql(ANSWER, {"input": answer_input(decision["id"], relay=relay)})
    answer = r["data"]["decisionAnswer"]["decision"]["current"]["answer"]
    assert answer["relayed"] is True and answer["relay"] == relay
    assert answer["actor"] == {"restId": agent.principal_id}
    assert answer["authorizedBy"] == {"restId": human.principal_id}
    assert answer["relayPolicyRevision"] == 2


async def test_mutation_replay_is_flagged(human: Caller, project: str) -> None:
    task = await new_task(human)
    variables = {"input": open_input([task])}
    first = (await human.gql(OPEN, variables))["data"]["decisionOpen"]
    again = (await human.gql(OPEN, variables))["data"]["decisionOpen"]
    assert again["replayed"] is True and again["decision"] == first["decision"]


OPEN_WITH_HISTORY = """
mutation Open($input: DecisionOpenInput!) {
  decisionOpen(input: $input) {
    decision { status current { generation answer { disposition } }
               generations(first: 5) { totalCount nodes { generation answer { disposition } } } }
    replayed
  }
}"""


async def test_a_replay_shows_its_generation_as_it_was_not_as_answered_since(
    human: Caller, project: str
) -> None:
    """docs/graphql.md: a replay's record is as it was then, and its history
    connections are as of that record. Its generation 1 showed the answer
    given since, beside `current.answer: null`."""
    task = await new_task(human)
    variables = {"input": open_input([task])}
    first = (await human.gql(OPEN_WITH_HISTORY, variables))["data"]["decisionOpen"]
    decision_id = (await human.get("/api/v1/projects/demo/decisions")).json()["items"][0]["id"]
    assert (await send_answer(human, decision_id)).status_code == 200
    again = (await human.gql(OPEN_WITH_HISTORY, variables))["data"]["decisionOpen"]
    assert again["replayed"] is True and again["decision"] == first["decision"]
    assert again["decision"]["generations"]["nodes"] == [{"generation": 1, "answer": None}]


DETAIL = """
query Detail($id: String!) {
  project(id: "demo") {
    decision(id: $id) {
      id restId status workAllowed generation reversible recommendation
      createdBy { restId }
      affected { task { restId title } pinnedRevision currentRevision }
      generations(first: 1) {
        edges { cursor node { generation reopenRationale answer { disposition }
                              actor { restId } } }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
}"""


async def test_decision_detail_with_generations_and_affected_tasks(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await send_answer(human, decision["id"], disposition="deny", answer="Stop")
    await edit_task(human, task, priority=3)  # not judged: the pin holds
    await edit_task(human, task, title="Rescoped")
    assert (await reopen(human, decision["id"], 1, rationale="Rescoped.")).status_code == 200
    await edit_task(human, task, priority=4)
    data = await human.gql(DETAIL, {"id": decision["id"]})
    found = data["data"]["project"]["decision"]
    assert found["status"] == "PENDING" and found["generation"] == 2
    assert found["createdBy"] == {"restId": human.principal_id}
    assert found["affected"] == [
        {"task": {"restId": task, "title": "Rescoped"}, "pinnedRevision": 3, "currentRevision": 4}
    ]
    edges = found["generations"]["edges"]
    assert [e["node"]["generation"] for e in edges] == [2]
    assert edges[0]["node"]["reopenRationale"] == "Rescoped."
    assert found["generations"]["pageInfo"]["hasNextPage"] is True
    after = found["generations"]["pageInfo"]["endCursor"]
    more = await human.gql(
        'query($id: String!, $after: String) { project(id: "demo") { decision(id: $id) {'
        " generations(after: $after) { edges { node { generation answer { disposition } } } }"
        " } } }",
        {"id": decision["id"], "after": after},
    )
    nodes = [e["node"] for e in more["data"]["project"]["decision"]["generations"]["edges"]]
    assert nodes == [{"generation": 1, "answer": {"disposition": "DENY"}}]
    node = await human.gql(
        "query($id: ID!) { node(id: $id) { ... on Decision { restId status } } }",
        {"id": found["id"]},
    )
    assert node["data"]["node"] == {"restId": decision["id"], "status": "PENDING"}


async def test_project_decisions_filter_and_digest(human: Caller, project: str) -> None:
    task = await new_task(human)
    pending = await open_decision(human, [task])
    allowed = await open_decision(human, [task])
    await send_answer(human, allowed["id"])
    data = await human.gql(
        '{ project(id: "demo") {'
        " pending: decisions(status: PENDING) { edges { node { restId } } }"
        " all: decisions { edges { node { restId status } } }"
        " digest { pendingDecisions { restId } blockedTasks { restId ready }"
        "          readyTaskCount truncated { pendingDecisions } }"
        ' missing: decision(id: "dec_nope") { restId } } }'
    )
    project_data = data["data"]["project"]
    assert [e["node"]["restId"] for e in project_data["pending"]["edges"]] == [pending["id"]]
    statuses = {e["node"]["restId"]: e["node"]["status"] for e in project_data["all"]["edges"]}
    assert statuses == {pending["id"]: "PENDING", allowed["id"]: "ALLOWED"}
    assert project_data["digest"] == {
        "pendingDecisions": [{"restId": pending["id"]}],
        "blockedTasks": [{"restId": task, "ready": False}],
        "readyTaskCount": 0,
        "truncated": {"pendingDecisions": False},
    }
    assert project_data["missing"] is None


async def test_a_decision_of_another_project_is_not_found_through_this_one(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    assert (await human.post("/api/v1/projects", {"id": "other", "name": "O"})).status_code == 201
    data = await human.gql(
        'query($id: String!) { project(id: "other") { decision(id: $id) { restId } } }',
        {"id": decision["id"]},
    )
    assert data["data"]["project"]["decision"] is None


async def test_task_blocked_by_resolves_decision_objects(human: Caller, project: str) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    data = await human.gql(
        '{ project(id: "demo") { tasks { edges { node { blockedBy {'
        " decisions { ... on Decision { restId status } } } } } } } }"
    )
    blocked = data["data"]["project"]["tasks"]["edges"][0]["node"]["blockedBy"]
    assert blocked["decisions"] == [{"restId": decision["id"], "status": "PENDING"}]


DASHBOARD = """
{ project(id: "demo") {
    decisions(first: 50) { edges { node {
      restId status workAllowed createdBy { name }
      affected { task { title status } pinnedRevision currentRevision }
      generations(first: 100) { edges { node {
        generation environment actor { name }
        affected { task { title } pinnedRevision currentRevision }
        answer { disposition actor { name } }
      } } }
    } } }
} }"""


async def _populate(human: Caller, count: int) -> None:
    for i in range(count):
        first = await new_task(human, f"Task {i}a")
        second = await new_task(human, f"Task {i}b")
        decision = await open_decision(human, [first, second])
        await send_answer(human, decision["id"], disposition="defer", answer="Stop")
        assert (await reopen(human, decision["id"], 1)).status_code == 200


async def _count_statements(service: Service, human: Caller) -> tuple[int, dict[str, Any]]:
    statements: list[str] = []
    await service.rt.db.set_trace(statements.append)
    try:
        data = await human.gql(DASHBOARD)
    finally:
        await service.rt.db.set_trace(None)
    assert "errors" not in data, data
    return len(statements), data


async def test_dashboard_of_fifty_decisions_runs_a_bounded_number_of_statements(
    service: Service, human: Caller, project: str
) -> None:
    await _populate(human, 3)
    few, _ = await _count_statements(service, human)
    await _populate(human, 47)
    many, data = await _count_statements(service, human)
    edges = data["data"]["project"]["decisions"]["edges"]
    assert len(edges) == 50
    assert all(len(e["node"]["generations"]["edges"]) == 2 for e in edges)
    assert all(len(e["node"]["affected"]) == 2 for e in edges)
    assert many == few, (few, many)
    assert many <= 40


async def test_time_inputs_are_datetime_and_still_checked_as_rest_checks_them(
    human: Caller, project: str
) -> None:
    """Section 14: times are the DateTime scalar; the two `expiresAt` inputs
    were typed String. The scalar takes the string and the resolver still
    answers a malformed one with a userError naming the field."""
    for name in ("DecisionOpenInput", "DecisionReopenInput"):
        typed = await human.gql(
            "query ($n: String!) { __type(name: $n) { inputFields { name type { name } } } }",
            {"n": name},
        )
        fields = {f["name"]: f["type"]["name"] for f in typed["data"]["__type"]["inputFields"]}
        assert fields["expiresAt"] == "DateTime", name
    task = await new_task(human)
    later = "2026-12-31T00:00:00.000Z"
    with_expiry = OPEN.replace("environment conditions", "environment conditions expiresAt")
    opened = await human.gql(with_expiry, {"input": open_input([task], expiresAt=later)})
    assert opened["data"]["decisionOpen"]["decision"]["current"]["expiresAt"] == later
    for bad, field in (("next tuesday", "expiresAt"), ("2026-12-31T00:00:00", "expiresAt")):
        r = await human.gql(OPEN, {"input": open_input([task], expiresAt=bad)})
        errors = r["data"]["decisionOpen"]["userErrors"]
        assert [(e["code"], e["field"]) for e in errors] == [("invalid_request", field)], r
    # a literal in the document parses as the variable does
    literal = await human.gql(
        'mutation ($t: String!) { decisionOpen(input: {idempotencyKey: "lit-1", projectId: "demo",'
        ' question: "Go?", options: ["Yes", "No"], rationale: "r", requiredActor: HUMAN,'
        f' taskIds: [$t], environment: "e", expiresAt: "{later}"}})'
        " { decision { current { expiresAt } } userErrors { code } } }",
        {"t": task},
    )
    assert literal["data"]["decisionOpen"]["decision"]["current"]["expiresAt"] == later
    wrong = await human.gql(OPEN, {"input": open_input([task], expiresAt=5)})
    assert "data" not in wrong or wrong["data"] is None, wrong
    assert "DateTime" in wrong["errors"][0]["message"]
