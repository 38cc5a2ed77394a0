"""An input field the schema declares nullable takes `null`; one that does
not take it is declared non-null, with the default it takes when left out
(graphqlnulls).

Until 2026-12-07 `DecisionOpenInput.reversible: Boolean`, `conditions:
[String!]`, `KnowledgeCreateInput.status/tags/scope/...` and the rest were
declared nullable, but an explicit `null` was a userError (``Expected `bool`,
got `null` ``; for an enum, ``Expected `str` ``), as it is a 400 over REST:
the schema told clients and their code generators that null was fine. A
field with a constant default (the one REST takes when it is left out) is now
`Type! = default`: left out it takes the default, `null` is refused by
validation. A field whose `null` means something (none, or a clear) stays
nullable and means it; an edit's field (left out: unchanged) has no constant
default and stays nullable, its `null` a userError naming an enum's values.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from graphql import GraphQLInputObjectType, GraphQLNonNull

from tests.conftest import Caller
from waypost.schema import schema

# (input type, field): the declaration, default included, as schema.graphql prints it
DEFAULTED = {
    ("DecisionOpenInput", "conditions"): "[String!]! = []",
    ("DecisionOpenInput", "reversible"): "Boolean! = false",
    ("DecisionAnswerInput", "conditionsConfirmed"): "Boolean! = false",
    ("KnowledgeCreateInput", "status"): "KnowledgeStatus! = OBSERVED",
    ("KnowledgeCreateInput", "scope"):
        "KnowledgeScopeInput! = { taskIds: [], components: [], environments: [], versions: [] }",
    ("KnowledgeCreateInput", "tags"): "[String!]! = []",
    ("KnowledgeCreateInput", "applicability"): 'String! = ""',
    ("KnowledgeCreateInput", "provenance"): "KnowledgeProvenanceInput! = {  }",
    ("KnowledgeCreateInput", "collection"): "KnowledgeCollection! = PROJECT",
    ("KnowledgeCreateInput", "shareAcrossProjects"): "Boolean! = false",
    ("KnowledgeScopeInput", "taskIds"): "[String!]! = []",
    ("KnowledgeScopeInput", "components"): "[String!]! = []",
    ("KnowledgeScopeInput", "environments"): "[String!]! = []",
    ("KnowledgeScopeInput", "versions"): "[String!]! = []",
    ("LessonProvenanceInput", "summary"): 'String! = ""',
    ("SubmissionLessonInput", "status"): "KnowledgeStatus! = OBSERVED",
    ("SubmissionLessonInput", "scope"):
        "KnowledgeScopeInput! = { taskIds: [], components: [], environments: [], versions: [] }",
    ("SubmissionLessonInput", "tags"): "[String!]! = []",
    ("SubmissionLessonInput", "applicability"): 'String! = ""',
    ("SubmissionLessonInput", "provenance"): 'LessonProvenanceInput! = { summary: "" }',
    ("SubmissionLessonInput", "collection"): "KnowledgeCollection! = PROJECT",
    ("SubmissionLessonInput", "shareAcrossProjects"): "Boolean! = false",
    ("TaskCreateInput", "description"): 'String! = ""',
    ("TaskCreateInput", "acceptanceCriteria"): "[String!]! = []",
    ("TaskCreateInput", "kind"): 'String! = "feature"',
    ("TaskCreateInput", "priority"): "Int! = 0",
    ("TaskCreateInput", "dependsOn"): "[String!]! = []",
    ("TaskSubmitInput", "lessons"): "[SubmissionLessonInput!]! = []",
    ("TaskPublicationResultInput", "detail"): 'String! = ""',
}  # fmt: skip

# the input fields that stay nullable: `null` is none (as left out) or a clear
NULL_MEANS_SOMETHING = {
    ("DecisionOpenInput", "expiresAt"), ("DecisionOpenInput", "recommendation"),
    ("DecisionAnswerInput", "relay"), ("DecisionReopenInput", "expiresAt"),
    ("KnowledgeCorrectInput", "supersededById"), ("KnowledgeFeedbackInput", "comment"),
    ("KnowledgeProvenanceInput", "sourceUri"), ("KnowledgeProvenanceInput", "sourceTaskId"),
    ("KnowledgeProvenanceInput", "sourceSubmissionId"), ("LessonProvenanceInput", "sourceUri"),
    ("PolicyUpdateInput", "integrationOwner"), ("TaskClaimInput", "taskId"),
    ("TaskCreateInput", "subjectTaskId"), ("TaskSubmitInput", "expectedRevision"),
}  # fmt: skip
# ... and those without a constant default: left out, unchanged (an edit), carried
# over (a reopen), or required by knowledgeCorrect, which shares the type; `null`
# is a userError, as a 400 over REST
NO_CONSTANT_DEFAULT = {
    ("DecisionReopenInput", "environment"), ("DecisionReopenInput", "conditions"),
    ("KnowledgeProvenanceInput", "summary"),
    *(("PolicyUpdateInput", f) for f in ("rules", "agentRuleEditing",
      "allowRelayedHumanAnswers", "leaseSeconds", "reviewMode", "provenance")),
    *(("TaskUpdateInput", f) for f in ("title", "description", "acceptanceCriteria", "kind",
      "priority", "dependsOn", "status")),
}  # fmt: skip


def declared(type_name: str, field: str) -> str:
    """`Type! = default` of an input field, as the printed schema declares it."""
    printed = str(schema)
    block = re.search(rf"^input {type_name} \{{\n(.*?)^\}}", printed, re.S | re.M)
    assert block is not None, type_name
    line = re.search(rf"^  {field}: (.*)$", block.group(1), re.M)
    assert line is not None, (type_name, field)
    return line.group(1)


def test_fields_with_a_constant_default_are_non_null_with_that_default() -> None:
    for (type_name, field), declaration in DEFAULTED.items():
        assert declared(type_name, field) == declaration, (type_name, field)


def test_every_nullable_input_field_is_one_whose_null_is_taken_or_has_no_default() -> None:
    """A new optional field is declared as one of the two on purpose."""
    nullable = {
        (name, field)
        for name, kind in schema._schema.type_map.items()
        if isinstance(kind, GraphQLInputObjectType) and not name.startswith("__")
        for field, definition in kind.fields.items()
        if not isinstance(definition.type, GraphQLNonNull)
    }
    assert nullable == NULL_MEANS_SOMETHING | NO_CONSTANT_DEFAULT
    assert not nullable & set(DEFAULTED)


def payload(answer: dict[str, Any], mutation: str) -> dict[str, Any]:
    assert "errors" not in answer, answer
    found: dict[str, Any] = answer["data"][mutation]
    assert found["userErrors"] == [], found
    return found


async def run(human: Caller, query: str, **given: Any) -> dict[str, Any]:
    """The payload of the mutation `query` runs, with a new key, in project demo."""
    found = re.search(r"\{ (\w+)\(input", query)
    assert found is not None
    variables = {"i": {"idempotencyKey": key(), "projectId": "demo", **given}}
    return payload(await human.gql(query, variables), found.group(1))


TASK_CREATE = """mutation($i: TaskCreateInput!) { taskCreate(input: $i) {
  task { restId description acceptanceCriteria kind priority dependsOn { id } subject { id } }
  userErrors { code field message } replayed } }"""
DECISION_OPEN = """mutation($i: DecisionOpenInput!) { decisionOpen(input: $i) {
  decision { restId reversible recommendation current { conditions expiresAt } }
  userErrors { code field message } } }"""
DECISION_ANSWER = """mutation($i: DecisionAnswerInput!) { decisionAnswer(input: $i) {
  decision { status current { answer { conditionsConfirmed } } }
  userErrors { code field message } } }"""
DECISION_REOPEN = """mutation($i: DecisionReopenInput!) { decisionReopen(input: $i) {
  decision { generation current { environment conditions expiresAt } }
  userErrors { code field message } } }"""
KNOWLEDGE_CREATE = """mutation($i: KnowledgeCreateInput!) { knowledgeCreate(input: $i) {
  knowledge { status tags applicability collection shareAcrossProjects
    scope { taskIds components environments versions }
    provenance { summary sourceUri sourceTaskId sourceSubmissionId } }
  userErrors { code field message } } }"""
TASK_CLAIM = """mutation($i: TaskClaimInput!) { taskClaim(input: $i) {
  task { restId } userErrors { code field message } } }"""
TASK_SUBMIT = """mutation($i: TaskSubmitInput!) { taskSubmit(input: $i) {
  task { status } lessons { status tags applicability collection shareAcrossProjects
    scope { taskIds components environments versions } provenance { summary sourceUri } }
  userErrors { code field message } } }"""
TASK_UPDATE = """mutation($i: TaskUpdateInput!) { taskUpdate(input: $i) {
  task { revision } userErrors { code field message } } }"""
POLICY_UPDATE = """mutation($i: PolicyUpdateInput!) { policyUpdate(input: $i) {
  policy { revision integrationOwner { id } } userErrors { code field message } } }"""
PUBLICATION_RESULT = """mutation($i: TaskPublicationResultInput!) {
  taskPublicationResult(input: $i) { task { restId } userErrors { code field message } } }"""

_keys = iter(range(10**6))


def key() -> str:
    return f"nulls-{next(_keys)}"


async def new_task(human: Caller, title: str = "t") -> str:
    r = await human.post("/api/v1/projects/demo/tasks", {"title": title})
    assert r.status_code == 201, r.text
    task_id: str = r.json()["id"]
    return task_id


QUESTION = {"question": "ship?", "options": ["yes", "no"], "rationale": "r"}


async def new_decision(human: Caller, task_id: str, **extra: Any) -> str:
    body = {**QUESTION, "required_actor": "human", "task_ids": [task_id], "environment": "prod"}
    r = await human.post("/api/v1/projects/demo/decisions", {**body, **extra})
    assert r.status_code == 201, r.text
    decision_id: str = r.json()["id"]
    return decision_id


def opening(task_id: str) -> dict[str, Any]:
    return {**QUESTION, "requiredActor": "HUMAN", "taskIds": [task_id], "environment": "prod"}


NO_SCOPE = {"taskIds": [], "components": [], "environments": [], "versions": []}
LESSON = {"kind": "LESSON", "title": "l", "body": "b"}


async def test_left_out_the_fields_take_their_defaults(human: Caller, project: str) -> None:
    task = (await run(human, TASK_CREATE, title="t"))["task"]
    assert task == {
        "restId": task["restId"],
        "description": "",
        "acceptanceCriteria": [],
        "kind": "feature",
        "priority": 0,
        "dependsOn": [],
        "subject": None,
    }

    decision = (await run(human, DECISION_OPEN, **opening(task["restId"])))["decision"]
    assert decision["reversible"] is False
    assert decision["recommendation"] is None
    assert decision["current"] == {"conditions": [], "expiresAt": None}

    answer = {"expectedGeneration": 1, "disposition": "DENY", "answer": "no", "rationale": "r"}
    answered = await run(human, DECISION_ANSWER, decisionId=decision["restId"], **answer)
    assert answered["decision"] == {
        "status": "DENIED",
        "current": {"answer": {"conditionsConfirmed": False}},
    }

    made = await run(human, KNOWLEDGE_CREATE, **LESSON, scope={"components": ["api"]})
    assert made["knowledge"] == {
        "status": "OBSERVED",
        "tags": [],
        "applicability": "",
        "collection": "PROJECT",
        "shareAcrossProjects": False,
        "scope": {**NO_SCOPE, "components": ["api"]},
        "provenance": {
            "summary": "",
            "sourceUri": None,
            "sourceTaskId": None,
            "sourceSubmissionId": None,
        },
    }

    working = await new_task(human, "with a lesson")
    await run(human, TASK_CLAIM, taskId=working)
    submitted = await run(human, TASK_SUBMIT, taskId=working, summary="s", lessons=[LESSON])
    assert submitted["lessons"] == [
        {
            "status": "OBSERVED",
            "tags": [],
            "applicability": "",
            "collection": "PROJECT",
            "shareAcrossProjects": False,
            "scope": NO_SCOPE,
            "provenance": {"summary": "", "sourceUri": None},
        }
    ]
    other = await new_task(human, "no lessons")
    await run(human, TASK_CLAIM, taskId=other)
    submitted = await run(human, TASK_SUBMIT, taskId=other, summary="s")
    assert submitted["lessons"] == []


async def test_a_field_given_its_default_is_the_same_input_as_left_out(
    human: Caller, project: str
) -> None:
    """A receipt's fingerprint is of the input less the fields at their
    defaults: a retry that spells a default out replays, and an input that
    leaves them out is the request it was before they had defaults."""
    base = {"idempotencyKey": key(), "projectId": "demo", "title": "t"}
    first = payload(await human.gql(TASK_CREATE, {"i": base}), "taskCreate")
    spelt = {**base, "description": "", "acceptanceCriteria": [], "kind": "feature"}
    spelt.update(priority=0, dependsOn=[])
    again = payload(await human.gql(TASK_CREATE, {"i": spelt}), "taskCreate")
    assert again["replayed"] is True
    assert again["task"] == first["task"]
    other = await human.gql(TASK_CREATE, {"i": {**base, "priority": 1}})
    refused = other["data"]["taskCreate"]["userErrors"]
    assert [e["code"] for e in refused] == ["idempotency_key_reused"]


# (query, the input but its key, the field set to null, as a path)
NULLS: list[tuple[str, dict[str, Any], str]] = [
    *((TASK_CREATE, {"title": "t"}, f)
      for f in ("description", "acceptanceCriteria", "kind", "priority", "dependsOn")),
    *((DECISION_OPEN, opening("task_x"), f) for f in ("conditions", "reversible")),
    (DECISION_ANSWER, {"decisionId": "dec_x", "expectedGeneration": 1, "disposition": "ALLOW",
                       "answer": "yes", "rationale": "r"}, "conditionsConfirmed"),
    *((KNOWLEDGE_CREATE, LESSON, f)
      for f in ("status", "scope", "tags", "applicability", "provenance", "collection",
                "shareAcrossProjects", "scope.taskIds", "scope.components",
                "scope.environments", "scope.versions")),
    *((TASK_SUBMIT, {"taskId": "task_x", "summary": "s", "lessons": [LESSON]}, f)
      for f in ("lessons", "lessons[0].status", "lessons[0].scope", "lessons[0].tags",
                "lessons[0].applicability", "lessons[0].provenance", "lessons[0].collection",
                "lessons[0].shareAcrossProjects", "lessons[0].provenance.summary")),
    (PUBLICATION_RESULT, {"taskId": "task_x", "outcome": "SUCCEEDED"}, "detail"),
]  # fmt: skip


def with_null(value: dict[str, Any], path: str) -> dict[str, Any]:
    """A copy of `value` with `null` at `path` (`lessons[0].provenance.summary`)."""
    result = copy.deepcopy(value)
    parts = re.findall(r"\[(\d+)\]|([^.\[]+)", path)
    at: Any = result
    for index, name in parts[:-1]:
        at = at[int(index)] if index else at.setdefault(name, {})
    at[parts[-1][1]] = None
    return result


ENUM_VALUES = {"LESSON", "HUMAN", "ALLOW", "SUCCEEDED"}


def literal(value: Any) -> str:
    """`value` written as a GraphQL literal (the enum values above bare)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value in ENUM_VALUES else f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {literal(v)}" for k, v in value.items()) + "}"
    return str(value)


@pytest.mark.parametrize(("query", "given", "path"), NULLS)
async def test_an_explicit_null_for_a_defaulted_field_is_refused_by_validation(
    human: Caller, project: str, query: str, given: dict[str, Any], path: str
) -> None:
    sent = {"idempotencyKey": key(), "projectId": "demo", **with_null(given, path)}
    answer = await human.gql(query, {"i": sent})
    assert answer["data"] is None, answer
    (error,) = answer["errors"]
    assert error["extensions"] == {"code": "invalid_request", "field": f"i.{path}"}
    assert error["message"].endswith("not to be null.")
    # a literal null too: refused as the document is validated
    written = re.sub(r"^mutation\(\$i: \w+!\) ", "mutation ", query)
    written = written.replace("(input: $i)", f"(input: {literal(sent)})")
    answer = await human.gql(written)
    assert answer["data"] is None, answer
    (error,) = answer["errors"]
    assert error["extensions"] == {"code": "invalid_request"}
    assert re.fullmatch(r"Expected value of non-null type '.+!' not to be null\.", error["message"])
    assert (await human.get("/api/v1/projects/demo/tasks")).json()["items"] == []  # nothing ran


async def test_null_where_it_means_none_or_a_clear(human: Caller, project: str) -> None:
    task_id = await new_task(human)
    # taskClaim: taskId null is the next ready task, as left out
    claimed = await run(human, TASK_CLAIM, taskId=None)
    assert claimed["task"]["restId"] == task_id

    # decisionOpen: expiresAt and recommendation null are none
    opened = await run(
        human, DECISION_OPEN, **opening(task_id), expiresAt=None, recommendation=None
    )
    assert opened["decision"]["recommendation"] is None
    assert opened["decision"]["current"]["expiresAt"] is None

    # decisionReopen: expiresAt null clears the expiry; the other pins carry over
    pinned = {"expires_at": "2099-01-01T00:00:00Z", "conditions": ["staging first"]}
    expiring = await new_decision(human, task_id, **pinned)
    reopen = {"expectedGeneration": 1, "rationale": "again", "expiresAt": None}
    reopened = await run(human, DECISION_REOPEN, decisionId=expiring, **reopen)
    assert reopened["decision"] == {
        "generation": 2,
        "current": {"environment": "prod", "conditions": ["staging first"], "expiresAt": None},
    }

    # taskCreate: subjectTaskId null is no subject
    created = await run(human, TASK_CREATE, title="t2", subjectTaskId=None)
    assert created["task"]["subject"] is None

    # knowledgeCreate: a provenance source null is none
    sources = {"sourceUri": None, "sourceTaskId": None}
    made = await run(human, KNOWLEDGE_CREATE, **LESSON, provenance=sources)
    assert made["knowledge"]["provenance"]["sourceUri"] is None

    # policyUpdate: integrationOwner null clears the owner
    owner = {"expected_revision": 1, "integration_owner": human.principal_id}
    r = await human.patch("/api/v1/projects/demo/policy", owner)
    assert r.status_code == 200, r.text
    cleared = await run(human, POLICY_UPDATE, expectedRevision=2, integrationOwner=None)
    assert cleared["policy"] == {"revision": 3, "integrationOwner": None}


@pytest.mark.parametrize(
    ("query", "given", "field", "says"),
    [(POLICY_UPDATE, {"expectedRevision": 1}, "reviewMode",
      "Expected one of ANY, HUMAN, NONE, got `null`"),
     (POLICY_UPDATE, {"expectedRevision": 1}, "rules", "Expected `str`, got `null`"),
     (TASK_UPDATE, {"taskId": "TASK", "expectedRevision": 1}, "status",
      "Expected one of CANCELLED, OPEN, got `null`"),
     (TASK_UPDATE, {"taskId": "TASK", "expectedRevision": 1}, "title",
      "Expected `str`, got `null`"),
     (DECISION_REOPEN, {"decisionId": "DEC", "expectedGeneration": 1, "rationale": "r"},
      "environment", "Expected `str`, got `null`")],
)  # fmt: skip
async def test_null_for_a_field_without_a_default_is_a_user_error_naming_an_enums_values(
    human: Caller, project: str, query: str, given: dict[str, Any], field: str, says: str
) -> None:
    """Left out, an edit's field is unchanged: no constant default to declare,
    so it stays nullable and a `null` is a userError. An enum's says the values
    taken, not JSON's `str` (which REST still says: its field is a string)."""
    task_id = await new_task(human)
    ids = {"TASK": task_id, "DEC": await new_decision(human, task_id)}
    given = {k: ids.get(v, v) if isinstance(v, str) else v for k, v in given.items()}
    sent = {"idempotencyKey": key(), "projectId": "demo", **given, field: None}
    answer = await human.gql(query, {"i": sent})
    assert "errors" not in answer, answer
    mutation = next(iter(answer["data"]))
    assert answer["data"][mutation]["userErrors"] == [
        {"code": "invalid_request", "field": field, "message": says}
    ]


async def test_rest_still_says_jsons_type_for_an_enums_null(human: Caller, project: str) -> None:
    r = await human.patch(
        "/api/v1/projects/demo/policy", {"expected_revision": 1, "review_mode": None}
    )
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "Expected `str`, got `null`"
    assert r.json()["error"]["details"] == {"field": "review_mode"}
