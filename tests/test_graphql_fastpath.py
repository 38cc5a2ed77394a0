"""The GraphQL fast path answers exactly as graphql-core does, byte for byte.

Every query here is sent twice through the whole app over the same seeded
SQLite file: as served (the fast path answers the queries it can) and with the
fast path switched off. Realistic dashboard queries, errors (bad arguments,
limits, unknown records), and a generated variety of selections over the
registered fields (aliases, fragments, inline fragments, @skip/@include with
variables, paging arguments) must give identical response bodies, and the
fast path must actually have answered the ones without errors.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.graphql import DASHBOARD
from tests.conftest import Caller, MovableClock, Service, copy_database, serving
from tests.fastpath_support import both, seed, spying
from waypost.schema import budget
from waypost.schema.fastpath import known
from waypost.schema.fastpath import plan as fastpath_plan
from waypost.schema.fastpath.fields import FIELDS
from waypost.schema.memo import Memo
from waypost.settings import Settings


@pytest.fixture
async def seeded(service: Service, human: Caller) -> dict[str, Any]:
    return await seed(service, human)


REALISTIC = [
    (DASHBOARD, {"project": "demo"}),
    (DASHBOARD, {"project": "other"}),
    (DASHBOARD, {"project": "nope"}),
    (
        """query ($p: String!) { project(id: $p) { id restId name createdAt createdById
             createdBy { id restId kind name }
             decisions(first: 3) { totalCount pageInfo { hasNextPage hasPreviousPage
               startCursor endCursor } edges { cursor node { id restId status } } } } }""",
        {"p": "demo"},
    ),
    (
        """{ project(id: "demo") { decisions { nodes {
             id restId projectId question options rationale requiredActor recommendation
             reversible status workAllowed generation createdAt
             createdBy { name } project { restId }
             current { generation policyRevision environment conditions expiresAt
               reopenRationale actorId actorSessionId at actor { name kind }
               answer { disposition answer rationale conditionsConfirmed actorId
                 actorSessionId relayed relay { prompt response } relayPolicyRevision
                 timedOut at actor { name } authorizedBy { name } } }
             affected { taskId pinnedRevision currentRevision task {
               id restId projectId title description acceptanceCriteria kind priority
               status revision ready createdAt updatedAt project { name }
               dependsOn { restId } subject { restId }
               blockedBy { decisionIds decisionsTruncated decisions { restId }
                 dependencies { restId title } } } }
             generations(first: 2) { totalCount pageInfo { hasNextPage startCursor endCursor }
               edges { cursor node { generation answer { answer } } } }
           } } } }""",
        None,
    ),
    (
        """query ($yes: Boolean!) { a: project(id: "demo") { ...P } b: project(id: "other") {
             __typename ...P } }
           fragment P on Project { __typename decisions(status: DENIED) {
             nodes { ...D t: __typename status @skip(if: $yes) } } }
           fragment D on Decision { restId ... on Decision { generation @include(if: $yes) } }""",
        {"yes": True},
    ),
    (
        """{ project(id: "demo") { decisions(first: 1) { pageInfo { endCursor } } } }""",
        None,
    ),
    # a dashboard's home query names its reader (dashjourney: `me` sent it all
    # through graphql-core)
    (
        """{ me { id restId kind name } project(id: "demo") { name createdBy { name } } }""",
        None,
    ),
    (
        """{ project(id: "demo") { tasks { nodes { restId revision
             revisions(first: 2) { totalCount pageInfo { hasNextPage endCursor }
               nodes { revision title description acceptanceCriteria kind priority
                 dependsOnIds changedFields judgedChange at actor { name }
                 dependsOn { restId revision } } }
             checkpoints { totalCount edges { cursor node { restId note actorSessionId at
               actor { kind } } } }
             submissions { totalCount nodes { restId taskRevision summary actorSessionId at
               task { restId status } actor { name } } }
             decisions(first: 2) { totalCount pageInfo { hasNextPage hasPreviousPage }
               nodes { restId status generation affected { taskId } } } } } } }""",
        None,
    ),
    (
        """{ project(id: "demo") { events(first: 100) { totalCount
             pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
             edges { cursor node { sequence projectId type subjectType subjectId actorId
               actorSessionId at data actor { name } project { restId }
               subject { __typename
                 ... on Project { restId name }
                 ... on PolicyRevision { revision rules agentRuleEditing
                   allowRelayedHumanAnswers integrationOwnerId leaseSeconds reviewMode
                   actorId actorKind actorSessionId at provenance actor { name }
                   integrationOwner { name } }
                 ... on Task { restId title revision ready }
                 ... on Knowledge { restId title supersededBy { restId } }
                 ... on Decision { restId status generation } } } } }
           policyHistory(first: 3) { totalCount pageInfo { hasNextPage endCursor }
             nodes { revision rules actor { kind } } } }
           other: project(id: "other") { events(last: 5) { nodes { sequence type
             subject { ... on Knowledge { restId supersededBy { restId } } } } } } }""",
        None,
    ),
    (
        """fragment K on Knowledge { id restId projectId kind collection shareAcrossProjects
             revision createdAt updatedAt title body status tags applicability supersededById
             scope { taskIds components environments versions tasks { restId ready } }
             provenance { summary sourceUri sourceTaskId sourceSubmissionId actorId
               actorSessionId recordedAt actor { name } sourceTask { restId title }
               sourceSubmission { restId taskRevision summary task { restId } actor { name } } }
             project { restId } sourceTask { restId } feedbackTotals { useful notUseful }
             supersededBy { restId supersededBy { restId } }
             revisions(first: 2) { totalCount pageInfo { hasNextPage endCursor }
               nodes { knowledgeId revision title status feedback { useful notUseful }
                 supersededBy { restId } provenance { actorId } } } }
           query ($shared: Boolean!) { demo: project(id: "demo") {
             knowledge(includeShared: $shared) { totalCount nodes { ...K } }
             lesson: knowledge(kind: LESSON, tag: "db", first: 1) { nodes { restId } }
             old: knowledge(status: SUPERSEDED) { totalCount nodes { restId } } }
           other: project(id: "other") { knowledge { nodes { ...K } } } }""",
        {"shared": True},
    ),
]


@pytest.mark.parametrize(("query", "variables"), REALISTIC)
async def test_dashboard_queries_answer_byte_for_byte(
    human: Caller, seeded: dict[str, Any], query: str, variables: dict[str, Any] | None
) -> None:
    result = await both(human, query, variables)
    assert result.fast == result.slow
    assert b'"errors"' not in result.fast
    assert result.answered


async def test_pages_through_cursors_as_graphql_core_does(
    human: Caller, seeded: dict[str, Any]
) -> None:
    query = """query ($after: String, $g: String) { project(id: "demo") {
        decisions(first: 2, after: $after) { pageInfo { endCursor hasNextPage hasPreviousPage }
          nodes { restId generations(first: 1, after: $g) {
            pageInfo { endCursor hasNextPage hasPreviousPage }
            nodes { generation } } } } } }"""
    after: str | None = None
    pages = 0
    while True:
        first = await both(human, query, {"after": after, "g": None})
        assert first.fast == first.slow and first.answered
        page = first.fast.decode()
        # the second generation page of every decision on this page
        data = json.loads(page)["data"]["project"]["decisions"]
        for node in data["nodes"]:
            cursor = node["generations"]["pageInfo"]["endCursor"]
            second = await both(human, query, {"after": after, "g": cursor})
            assert second.fast == second.slow and second.answered
            # a forward page after a cursor has a page before it (docs/graphql.md)
            later = json.loads(second.fast)["data"]["project"]["decisions"]["nodes"]
            assert all(n["generations"]["pageInfo"]["hasPreviousPage"] for n in later)
        pages += 1
        if not data["pageInfo"]["hasNextPage"]:
            break
        after = data["pageInfo"]["endCursor"]
    assert pages == 3  # five decisions, two a page


def console_query(name: str) -> str:
    """One of the console's GraphQL documents, its fragments put in."""
    text = (files("waypost.console") / "static" / "js" / "queries.js").read_text()

    def const(found: str) -> str:
        match = re.search(rf"const {found} = ([`\"])(.*?)\1;", text, re.S)
        assert match is not None, found
        return re.sub(r"\$\{(\w+)\}", lambda m: const(m.group(1)), match.group(2))

    return const(name)


INBOXES = [
    (console_query("INBOX_ONE_PROJECT"), {"id": "demo"}),
    (console_query("INBOX_ONE_PROJECT"), {"id": "other"}),
    (console_query("INBOX"), {}),
]


@pytest.mark.parametrize(("query", "variables"), INBOXES)
async def test_the_console_inbox_answers_byte_for_byte(
    human: Caller, seeded: dict[str, Any], query: str, variables: dict[str, Any]
) -> None:
    """The inbox (policy, digest, stale and expired decisions) is the fast
    path's: through `serve`, 313-381 ms by graphql-core for a project of
    3,200 decisions, 91 ms on the fast path (30-39 ms with the stored
    status, docs/graphql.md)."""
    result = await both(human, query, variables)
    assert result.fast == result.slow
    assert b'"errors"' not in result.fast and b'"digest"' in result.fast
    # every project's inbox too (`Query.projects` joined the fast path: the
    # console asks for it every few seconds, 3.1x the one-project form's
    # cost through graphql-core)
    assert result.answered


# the console's pages: a decision (with its policy history, generations and
# affected tasks' revisions), knowledge, policy, the decision list
PAGES = ["DECISION", "DECISION_VERSION", "DECISION_LIST", "KNOWLEDGE_LIST", "KNOWLEDGE_ITEM",
         "POLICY", "PROJECTS", "PROJECT_NAME"]  # fmt: skip


@pytest.mark.parametrize("name", PAGES)
async def test_the_console_pages_answer_byte_for_byte(
    human: Caller, seeded: dict[str, Any], name: str
) -> None:
    """Each of the console's read pages is the fast path's (the decision
    page took graphql-core's until `Project.decision` was registered)."""
    query = console_query(name)
    variables: dict[str, Any] = {"project": "demo", "shared": True}
    if "$id" in query:
        variables["id"] = (
            seeded["knowledge"][0] if "knowledge" in query else (seeded["decisions"][1])
        )
    used = {"$" + m for m in re.findall(r"\$(\w+)", query)}
    variables = {k: v for k, v in variables.items() if f"${k}" in used}
    result = await both(human, query, variables)
    assert result.fast == result.slow
    assert b'"errors"' not in result.fast, result.fast[:300]
    assert result.answered, name


PROJECT_PAGES = [
    "{ projects(first: 2) { totalCount pageInfo { hasNextPage hasPreviousPage startCursor"
    " endCursor } edges { cursor node { id restId name createdAt } } } }",
    "{ projects(last: 1) { totalCount pageInfo { hasNextPage hasPreviousPage }"
    " nodes { restId policy { revision } } } }",
]


@pytest.mark.parametrize("query", PROJECT_PAGES)
async def test_project_pages_answer_byte_for_byte(
    human: Caller, seeded: dict[str, Any], query: str
) -> None:
    result = await both(human, query)
    assert result.answered and result.fast == result.slow
    data = json.loads(result.fast)["data"]["projects"]
    assert data["totalCount"] >= 2
    cursor = data["pageInfo"].get("endCursor") or data["pageInfo"].get("startCursor")
    if cursor:
        for follow in (f'first: 2, after: "{cursor}"', f'last: 1, before: "{cursor}"'):
            page = await both(human, f"{{ projects({follow}) {{ nodes {{ restId }} }} }}")
            assert page.answered and page.fast == page.slow


async def test_activities_are_answered_on_the_fast_path(
    human: Caller, seeded: dict[str, Any]
) -> None:
    """`Task.activities` took graphql-core's path, which built a nested
    result far past the object limit before refusing it: 5 s of the event
    loop for one query of 400 tasks with 100 dependencies each
    (taskgraphaudit)."""
    query = (
        '{ project(id: "demo") { tasks { nodes { restId activities { restId'
        " subject { restId } activities { restId } } } } } }"
    )
    result = await both(human, query)
    assert result.answered and result.fast == result.slow
    nodes = json.loads(result.fast)["data"]["project"]["tasks"]["nodes"]
    assert any(n["activities"] for n in nodes), nodes  # the seed's "Verify" on "Migrate"


@pytest.mark.parametrize("last", [1, 2, 5])
async def test_revisions_page_backward_on_the_fast_path(
    human: Caller, seeded: dict[str, Any], last: int
) -> None:
    """Backward pages of `revisions` (a task's, a knowledge record's) and of
    a decision's `generations` took graphql-core's path; they are each the
    forward page that holds them (`relay.backward_window`), read in one
    batch for the whole level."""
    query = """query ($last: Int, $before: String, $k: String!) { project(id: "demo") {
      tasks { nodes { restId revisions(last: $last, before: $before) { totalCount
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
        edges { cursor node { revision priority } } } } }
      knowledgeItem(id: $k) { revisions(last: $last, before: $before) { totalCount
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
        nodes { revision status supersededBy { restId } } } }
      decision(id: $d) { generations(last: $last, before: $before) { totalCount
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
        edges { cursor node { generation answer { answer } } } } } } }"""
    query = query.replace("$k: String!", "$k: String!, $d: String!")
    lesson, twice = seeded["knowledge"][0], seeded["decisions"][1]
    before: str | None = None
    for _ in range(4):  # toward the oldest, past its end
        variables = {"last": last, "before": before, "k": lesson, "d": twice}
        result = await both(human, query, variables)
        assert result.answered and result.fast == result.slow, variables
        data = json.loads(result.fast)["data"]["project"]
        cursors = [n["revisions"]["pageInfo"]["startCursor"] for n in data["tasks"]["nodes"]]
        before = next((c for c in cursors if c is not None), "WzFd")  # position 1
    # one field at a time: with several failing, graphql-core reports as many
    # errors as complete before the null reaches `project` (timing decides)
    one = """query ($before: String, $k: String!, $t: String!) { project(id: "demo") {
      task(id: $t) { revisions(last: 2, before: $before) { nodes { revision } } }
      knowledgeItem(id: $k) { revisions(last: 2, before: $before) { nodes { revision } } } } }"""
    task = seeded["tasks"][1]
    for forged in ("WzBd", "Wy0zXQ", "Wzk5OV0", "bm9wZQ"):  # 0, -3, 999, not a cursor
        for shown in (
            one.replace("knowledgeItem(id: $k)", "k: knowledgeItem(id: $k) @skip(if: true)"),
            one.replace("task(id: $t)", "t: task(id: $t) @skip(if: true)"),
        ):
            result = await both(human, shown, {"before": forged, "k": lesson, "t": task})
            assert result.fast == result.slow, forged


async def test_knowledge_is_answered_on_the_fast_path(
    human: Caller, seeded: dict[str, Any]
) -> None:
    """A record reached through a project that cannot read its replacement
    (a shared record of `other` superseded by one of `other`'s own) shows
    `supersededBy` null there, as REST answers 404 for it; through its own
    project, the replacement."""
    hidden, shared = seeded["knowledge"][2:]
    query = """query ($id: String!) {
      demo: project(id: "demo") { knowledgeItem(id: $id) { ...K } }
      other: project(id: "other") { knowledgeItem(id: $id) { ...K } } }
    fragment K on Knowledge { restId supersededById supersededBy { restId }
      revisions { nodes { revision supersededBy { restId } } } }"""
    result = await both(human, query, {"id": shared})
    assert result.answered and result.fast == result.slow
    data = json.loads(result.fast)["data"]
    assert data["demo"]["knowledgeItem"]["supersededById"] == hidden
    assert data["demo"]["knowledgeItem"]["supersededBy"] is None
    assert data["demo"]["knowledgeItem"]["revisions"]["nodes"][0]["supersededBy"] is None
    assert data["other"]["knowledgeItem"]["supersededBy"] == {"restId": hidden}
    # a project-only record of another project is not readable at all
    result = await both(human, query, {"id": hidden})
    assert result.answered and result.fast == result.slow
    data = json.loads(result.fast)["data"]
    assert data["demo"]["knowledgeItem"] is None
    assert data["other"]["knowledgeItem"]["restId"] == hidden


async def test_the_inbox_stops_at_the_same_limits_on_both_paths(
    human: Caller, seeded: dict[str, Any]
) -> None:
    """Objects and text counted alike, enum names included (the fast path
    counted none, so near the text limit it answered what graphql-core refused)."""
    query, variables = INBOXES[0]
    refused = 0
    for objects in [*range(1, 12), *range(20, 400, 7)]:
        with mock.patch.object(budget, "MAX_OBJECTS", objects):
            result = await both(human, query, variables)
        assert result.fast == result.slow, ("objects", objects)
        refused += b"execution limits" in result.fast
    enums = '{ project(id: "demo") { decisions { nodes { restId status requiredActor } } } }'
    for text in range(0, 400, 3):
        for document in (query, enums):
            with mock.patch.object(budget, "MAX_TEXT", text):
                result = await both(human, document, variables if document is query else None)
            assert result.fast == result.slow, ("text", text, document[:40])
            refused += b"execution limits" in result.fast
    assert refused > 0


ERRORS = [
    '{ project(id: "demo") { decisions(first: 0) { totalCount } } }',
    '{ project(id: "demo") { decisions(first: 1, last: 1) { totalCount } } }',
    '{ project(id: "demo") { decisions(after: "bad") { totalCount } } }',
    '{ project(id: "demo") { decisions(first: 101) { totalCount } } }',
    '{ project(id: "demo") { decisions { nodes { generations(after: "bad") { totalCount } } } } }',
    '{ project(id: "demo") { decisions { nodes { generations(first: 1, before: "x") {'
    " totalCount } } } } }",
    # the node limit: 100 x 100 x 100 generations, refused before anything runs
    '{ project(id: "demo") { decisions(first: 100) { nodes { project { decisions(first: 100)'
    " { nodes { generations(first: 100) { totalCount } } } } } } } }",
    '{ project(id: "demo") { decisions { nodes { nope } } } }',
    "{ project { name } }",
    "{ projects(first: 0) { totalCount } }",
    "{ projects(first: 1, last: 1) { totalCount } }",
    '{ projects(after: "bad") { totalCount } }',
]


@pytest.mark.parametrize("query", ERRORS)
async def test_errors_are_rendered_as_graphql_core_renders_them(
    human: Caller, seeded: dict[str, Any], query: str
) -> None:
    result = await both(human, query)
    assert b'"errors"' in result.fast
    assert result.fast == result.slow
    assert not result.answered


async def test_queries_beyond_the_registry_and_mutations_take_the_normal_path(
    human: Caller, seeded: dict[str, Any]
) -> None:
    # `node` is not registered (it reaches any type by a global id)
    for query in (
        '{ project(id: "demo") { restId } node(id: "UHJvamVjdDpkZW1v") { id } }',
        "{ me { name } mySession { restId } }",
        '{ __type(name: "Decision") { name } }',
    ):
        with spying() as seen:
            r = await human.gql(query)
        assert "errors" not in r, r
        assert seen == [], query
    with spying() as seen:
        r = await human.gql(
            'mutation { projectCreate(input: {idempotencyKey: "m1", id: "third", name: "T"})'
            " { project { restId name } userErrors { code } } }"
        )
    assert r["data"]["projectCreate"]["project"] == {"restId": "third", "name": "T"}
    assert seen == []


async def test_me_answered_again_without_the_pipeline_is_each_callers_own(
    service: Service, human: Caller, seeded: dict[str, Any]
) -> None:
    """A document the fast path answered once is answered again straight
    from its plan (known.py), whoever sends it: `me` is read for the caller
    of each request, never the one the plan was learnt from."""
    agent = await service.agent("builder-9")
    query = '{ me { restId name } project(id: "demo") { restId } }'
    for caller, name in ((human, "alice"), (agent, "builder-9"), (human, "alice")):
        for _ in range(2):  # learnt, then answered from `known`
            with spying() as seen:
                r = await caller.gql(query)
            assert r["data"]["me"] == {"restId": caller.principal_id, "name": name}, r
            assert seen in ([True], []), seen
    assert known.KNOWN.get(known.request_key({"query": query})) is not None


async def test_an_unauthenticated_query_is_refused_before_any_execution(
    service: Service, seeded: dict[str, Any]
) -> None:
    with spying() as seen:
        body = {"query": DASHBOARD, "variables": {"project": "demo"}}
        r = await service.client.post("/graphql", json=body)
    assert r.status_code == 401
    assert r.json()["errors"][0]["extensions"]["code"] == "unauthenticated"
    assert seen == []


def test_every_registered_field_exists_in_the_schema() -> None:
    from waypost.schema import schema

    types = schema._schema.type_map
    for type_name, field_name in FIELDS:
        found = types.get(type_name)
        assert found is not None and field_name in found.fields, (type_name, field_name)  # type: ignore[attr-defined]


# the fields of the fast path's types it leaves to graphql-core, on purpose
UNREGISTERED = {
    ("Project", "context"),  # a search on the search readers, the reranker after it
    ("Query", "mySession"),
    ("Query", "node"),  # an interface: any type by a global id
}


def test_a_type_the_fast_path_knows_has_every_field_registered() -> None:
    """A field added to such a type and not registered would send every query
    selecting it to graphql-core (several times slower, docs/graphql.md):
    register it in its domain's module, or name it here with the reason."""
    from waypost.schema import schema

    types = schema._schema.type_map
    known = {t for t, _ in FIELDS}
    missing = {
        (t, name)
        for t in known
        for name in types[t].fields  # type: ignore[attr-defined]
        if (t, name) not in FIELDS
    }
    assert missing - UNREGISTERED == set(), (
        "register these in their domain's module of schema/fastpath/ (or name them in"
        " UNREGISTERED with the reason)"
    )
    assert missing == UNREGISTERED


# --- generated selections ------------------------------------------------------------

LEAVES: dict[str, list[str]] = {
    "Project": ["id", "restId", "name", "createdAt", "createdById", "__typename"],
    "DecisionConnection": ["totalCount"],
    "DecisionGenerationConnection": ["totalCount"],
    "DecisionEdge": ["cursor"],
    "TaskConnection": ["totalCount"],
    "TaskEdge": ["cursor"],
    "DecisionGenerationEdge": ["cursor"],
    "PageInfo": ["hasNextPage", "hasPreviousPage", "startCursor", "endCursor"],
    "Decision": ["id", "restId", "projectId", "question", "options", "rationale",
                 "requiredActor", "recommendation", "reversible", "status", "workAllowed",
                 "generation", "createdAt", "__typename"],
    "DecisionGeneration": ["generation", "policyRevision", "environment", "conditions",
                           "expiresAt", "reopenRationale", "actorId", "actorSessionId", "at"],
    "DecisionAnswer": ["disposition", "answer", "rationale", "conditionsConfirmed", "actorId",
                       "actorSessionId", "relayed", "relayPolicyRevision", "timedOut", "at"],
    "Relay": ["prompt", "response"],
    "DecisionAffected": ["taskId", "pinnedRevision", "currentRevision"],
    "Task": ["id", "restId", "projectId", "title", "description", "acceptanceCriteria", "kind",
             "priority", "status", "revision", "ready", "createdAt", "updatedAt"],
    "BlockedBy": ["decisionIds", "decisionsTruncated"],
    "Principal": ["id", "restId", "kind", "name"],
    "Policy": ["projectId", "revision", "rules", "agentRuleEditing", "allowRelayedHumanAnswers",
               "leaseSeconds", "reviewMode", "updatedAt"],
    "Digest": ["projectId", "generatedAt", "readyTaskCount"],
    "DigestTruncated": ["pendingDecisions", "proceededByTimeout", "timingOutSoon",
                        "blockedTasks"],
    "TaskRevisionConnection": ["totalCount"],
    "TaskCheckpointConnection": ["totalCount"],
    "SubmissionConnection": ["totalCount"],
    "TaskRevisionEdge": ["cursor"],
    "TaskCheckpointEdge": ["cursor"],
    "SubmissionEdge": ["cursor"],
    "TaskRevision": ["revision", "title", "description", "acceptanceCriteria", "kind",
                     "priority", "dependsOnIds", "changedFields", "judgedChange", "at"],
    "TaskCheckpoint": ["restId", "note", "actorSessionId", "at"],
    "Submission": ["restId", "taskRevision", "summary", "actorSessionId", "at"],
    "KnowledgeConnection": ["totalCount"],
    "KnowledgeEdge": ["cursor"],
    "KnowledgeRevisionConnection": ["totalCount"],
    "KnowledgeRevisionEdge": ["cursor"],
    "Knowledge": ["id", "restId", "projectId", "kind", "collection", "shareAcrossProjects",
                  "revision", "createdAt", "updatedAt", "title", "body", "status", "tags",
                  "applicability", "supersededById", "__typename"],
    "KnowledgeRevision": ["knowledgeId", "revision", "title", "status", "supersededById"],
    "KnowledgeScope": ["taskIds", "components", "environments", "versions"],
    "KnowledgeProvenance": ["summary", "sourceUri", "sourceTaskId", "sourceSubmissionId",
                            "actorId", "actorSessionId", "recordedAt"],
    "FeedbackTotals": ["useful", "notUseful"],
    "Lease": ["sessionId", "expiresAt", "workflow", "expired"],
    "Publication": ["holderSessionId", "preparedAt"],
    "PublicationResult": ["outcome", "detail", "at"],
    "EventConnection": ["totalCount"],
    "EventEdge": ["cursor"],
    "PolicyRevisionConnection": ["totalCount"],
    "PolicyRevisionEdge": ["cursor"],
    "Event": ["sequence", "projectId", "type", "subjectType", "subjectId", "actorId",
              "actorSessionId", "at", "data"],
    "PolicyRevision": ["revision", "rules", "agentRuleEditing", "allowRelayedHumanAnswers",
                       "integrationOwnerId", "leaseSeconds", "reviewMode", "actorId",
                       "actorKind", "actorSessionId", "at", "provenance"],
}  # fmt: skip
# the union of an event's subject: inline fragments on its types
SUBJECT_PARTS = [
    "__typename",
    "... on Task { restId title ready }",
    "... on Decision { restId status generation }",
    "... on Knowledge { restId title supersededBy { restId } }",
    "... on PolicyRevision { revision rules actor { name } }",
    "... on Project { restId name }",
    "... on Task { t: __typename }",
]
LINKS: dict[str, dict[str, str]] = {
    "Project": {"createdBy": "Principal", "decisions": "DecisionConnection",
                "tasks": "TaskConnection", "task": "Task", "policy": "Policy",
                "digest": "Digest", "knowledge": "KnowledgeConnection",
                "knowledgeItem": "Knowledge", "events": "EventConnection",
                "policyHistory": "PolicyRevisionConnection"},
    "Policy": {"integrationOwner": "Principal", "updatedBy": "Principal"},
    "Digest": {"pendingDecisions": "Decision", "proceededByTimeout": "Decision",
               "timingOutSoon": "Decision", "blockedTasks": "Task",
               "truncated": "DigestTruncated"},
    "TaskConnection": {"nodes": "Task", "edges": "TaskEdge", "pageInfo": "PageInfo"},
    "TaskEdge": {"node": "Task"},
    "DecisionConnection": {"nodes": "Decision", "edges": "DecisionEdge", "pageInfo": "PageInfo"},
    "DecisionGenerationConnection": {"nodes": "DecisionGeneration",
                                     "edges": "DecisionGenerationEdge", "pageInfo": "PageInfo"},
    "DecisionEdge": {"node": "Decision"},
    "DecisionGenerationEdge": {"node": "DecisionGeneration"},
    "Decision": {"current": "DecisionGeneration", "affected": "DecisionAffected",
                 "createdBy": "Principal", "project": "Project",
                 "generations": "DecisionGenerationConnection"},
    "DecisionGeneration": {"affected": "DecisionAffected", "answer": "DecisionAnswer",
                           "actor": "Principal"},
    "DecisionAnswer": {"relay": "Relay", "actor": "Principal", "authorizedBy": "Principal"},
    "DecisionAffected": {"task": "Task"},
    "Task": {"blockedBy": "BlockedBy", "project": "Project", "dependsOn": "Task",
             "subject": "Task", "activities": "Task", "revisions": "TaskRevisionConnection",
             "checkpoints": "TaskCheckpointConnection", "submissions": "SubmissionConnection",
             "decisions": "DecisionConnection", "lease": "Lease", "publication": "Publication"},
    "Lease": {"owner": "Principal"},
    "Publication": {"holder": "Principal", "result": "PublicationResult"},
    "BlockedBy": {"decisions": "Decision", "dependencies": "Task"},
    **{f"{t}Connection": {"nodes": t, "edges": f"{t}Edge", "pageInfo": "PageInfo"}
       for t in ("TaskRevision", "TaskCheckpoint", "Submission")},
    **{f"{t}Edge": {"node": t} for t in ("TaskRevision", "TaskCheckpoint", "Submission")},
    **{f"{t}Connection": {"nodes": t, "edges": f"{t}Edge", "pageInfo": "PageInfo"}
       for t in ("Knowledge", "KnowledgeRevision")},
    **{f"{t}Edge": {"node": t} for t in ("Knowledge", "KnowledgeRevision")},
    "Knowledge": {"scope": "KnowledgeScope", "provenance": "KnowledgeProvenance",
                  "supersededBy": "Knowledge", "project": "Project", "sourceTask": "Task",
                  "feedbackTotals": "FeedbackTotals", "revisions": "KnowledgeRevisionConnection"},
    "KnowledgeRevision": {"scope": "KnowledgeScope", "provenance": "KnowledgeProvenance",
                          "supersededBy": "Knowledge", "feedback": "FeedbackTotals"},
    "KnowledgeScope": {"tasks": "Task"},
    **{f"{t}Connection": {"nodes": t, "edges": f"{t}Edge", "pageInfo": "PageInfo"}
       for t in ("Event", "PolicyRevision")},
    **{f"{t}Edge": {"node": t} for t in ("Event", "PolicyRevision")},
    "Event": {"actor": "Principal", "project": "Project", "subject": "EventSubject"},
    "PolicyRevision": {"actor": "Principal", "integrationOwner": "Principal"},
    "KnowledgeProvenance": {"actor": "Principal", "sourceTask": "Task",
                            "sourceSubmission": "Submission"},
    "TaskRevision": {"dependsOn": "Task", "actor": "Principal"},
    "TaskCheckpoint": {"actor": "Principal"},
    "Submission": {"task": "Task", "actor": "Principal"},
}  # fmt: skip
PAGING = ["", "", "(first: 1)", "(first: 2)", "(first: 100)", "(last: 2)", "(first: 0)",
          '(after: "bad")']  # fmt: skip
ARGS: dict[tuple[str, str], list[str]] = {
    ("Project", "decisions"): [*PAGING, "(status: PENDING)", "(status: DENIED, first: 1)"],
    ("Decision", "generations"): PAGING,
    ("Project", "tasks"): [
        *PAGING,
        "(ready: true)",
        "(ready: false, first: 2)",
        "(status: OPEN)",
        '(q: "migrate")',
        '(q: "\\"")',
    ],
    ("Project", "task"): ['(id: "task_nope")', "(id: $task)"],
    ("Task", "revisions"): PAGING,
    ("Task", "checkpoints"): PAGING,
    ("Task", "submissions"): PAGING,
    ("Task", "decisions"): PAGING,
    ("Project", "knowledge"): [
        *PAGING,
        "(includeShared: true)",
        "(kind: FACT)",
        "(status: SUPERSEDED, includeShared: true)",
        '(tag: "db")',
        '(q: "batches")',
    ],
    ("Project", "knowledgeItem"): ["(id: $knowledge)", '(id: "kn_nope")'],
    ("Knowledge", "revisions"): PAGING,
    ("Project", "events"): [*PAGING, '(after: "3")', '(last: 3, before: "20")'],
    ("Project", "policyHistory"): PAGING,
}
FRAGMENTS = {
    "TaskBits": "fragment TaskBits on Task { restId title status ready revision }",
    "DecisionBits": "fragment DecisionBits on Decision { restId status generation question }",
    "GenBits": "fragment GenBits on DecisionGeneration { generation at answer { answer } }",
}
SPREADS = {"Task": "TaskBits", "Decision": "DecisionBits", "DecisionGeneration": "GenBits"}
STARTS = [
    ("Project", "*"),
    ("Decision", "decisions { nodes { * } }"),
    ("DecisionGeneration", "decisions(first: 3) { nodes { generations { nodes { * } } } }"),
    ("Task", "decisions { nodes { affected { task { * } } } }"),
    ("Task", "tasks(first: 3) { nodes { * } }"),
    ("DecisionAnswer", "decisions { edges { node { current { answer { * } } } } }"),
    ("Digest", "digest { * }"),
    ("TaskRevision", "tasks(first: 3) { nodes { revisions { nodes { * } } } }"),
    ("Submission", "tasks { nodes { submissions(first: 2) { nodes { * } } } }"),
    ("Knowledge", "knowledge(includeShared: true) { nodes { * } }"),
    ("KnowledgeRevision", "knowledge { nodes { revisions { nodes { * } } } }"),
    ("Event", "events(first: 100) { nodes { * } }"),
    ("PolicyRevision", "policyHistory { nodes { * } }"),
]
aliases = st.sampled_from(["", "", "", "x: ", "y: "])
directives = st.sampled_from(["", "", "", " @include(if: $yes)", " @skip(if: $yes)",
                              " @skip(if: true)", " @include(if: true)"])  # fmt: skip


def selection(type_name: str, depth: int) -> st.SearchStrategy[str]:
    if type_name == "EventSubject":
        return st.lists(st.sampled_from(SUBJECT_PARTS), min_size=1, max_size=3).map(" ".join)
    leaf = st.tuples(aliases, st.sampled_from(LEAVES[type_name]), directives).map("".join)
    options = [leaf]
    links = LINKS.get(type_name, {})
    if depth > 0 and links:

        def linked(name: str) -> st.SearchStrategy[str]:
            args = st.sampled_from(ARGS.get((type_name, name), [""]))
            sub = selection(links[name], depth - 1)
            return st.tuples(aliases, st.just(name), args, directives, sub).map(
                lambda t: f"{t[0]}{t[1]}{t[2]}{t[3]} {{ {t[4]} }}"
            )

        # links weigh more than leaves, so examples reach deep into the graph
        options += [st.sampled_from(sorted(links)).flatmap(linked)] * 3
        inline = st.deferred(lambda: selection(type_name, depth - 1))
        options.append(
            st.tuples(directives, inline).map(lambda t: f"... on {type_name}{t[0]} {{ {t[1]} }}")
        )
    if type_name in SPREADS:
        options.append(st.just(f"...{SPREADS[type_name]}"))
    return st.lists(st.one_of(options), min_size=1, max_size=3).map(" ".join)


@st.composite
def documents(
    draw: st.DrawFn, task_ids: list[str], knowledge_ids: list[str]
) -> tuple[str, dict[str, Any]]:
    project = draw(st.sampled_from(['"demo"', '"demo"', '"other"', '"nope"', "$project"]))
    # start at the project, or deeper along the dashboard's path (so every
    # type of the registry is reached often), then select at random
    start, prefix = draw(st.sampled_from(STARTS))
    body = draw(selection(start, draw(st.integers(1, 4))))
    root = f"{draw(aliases)}project(id: {project}) {{ {prefix.replace('*', body)} }}"
    if draw(st.booleans()):
        root += " __typename"
    text = "{ " + root + " }"
    used = [name for name in FRAGMENTS if f"...{name}" in text]
    declared = []
    variables: dict[str, Any] = {}
    if "$yes" in text:
        declared.append("$yes: Boolean!")
        variables["yes"] = draw(st.booleans())
    if "$project" in text:
        declared.append("$project: String!")
        variables["project"] = "demo"
    if "$task" in text:
        declared.append("$task: String!")
        variables["task"] = draw(st.sampled_from(task_ids))
    if "$knowledge" in text:
        declared.append("$knowledge: String!")
        variables["knowledge"] = draw(st.sampled_from(knowledge_ids))
    head = f"query ({', '.join(declared)}) " if declared else "query "
    return head + text + " " + " ".join(FRAGMENTS[name] for name in used), variables


@contextmanager
def world(
    template: Path, db_path: Path
) -> Iterator[tuple[asyncio.AbstractEventLoop, Caller, dict[str, Any]]]:
    """One seeded service for every example (the examples only read)."""
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()

    async def start() -> tuple[Caller, dict[str, Any]]:
        settings_ = Settings(db_path=copy_database(template, db_path), sweep_interval=3600)
        service = await stack.enter_async_context(serving(settings_, MovableClock()))
        human = await service.principal("human", "alice")
        return human, await seed(service, human)

    try:
        human, seeded = loop.run_until_complete(start())
        yield loop, human, seeded
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


def test_any_selection_answers_as_graphql_core_does(
    tmp_path: Path, migrated_template: Path
) -> None:
    answered = []
    with world(migrated_template, tmp_path / "w.db") as (loop, human, seeded):
        # this project's tasks, another project's (null here) and none
        task_ids = [*seeded["tasks"], seeded["elsewhere"], "task_nope"]

        @settings(max_examples=80, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
        @given(documents(task_ids, [*seeded["knowledge"], "kn_nope"]))
        def check(document: tuple[str, dict[str, Any]]) -> None:
            query, variables = document
            result = loop.run_until_complete(both(human, query, variables))
            assert result.fast == result.slow, query
            # without an error or a text filter (`q` runs on the search readers
            # under the time limit, through graphql-core), the fast path
            # answered: backward pages too, since 2026-12-05
            if b'"errors"' not in result.fast and "q:" not in query:
                assert result.answered, query
            answered.append(result.answered)

        check()
    assert sum(answered) >= len(answered) // 3, "the fast path answered too few examples"


async def test_the_fast_path_reads_a_constant_number_of_statements(
    service: Service, human: Caller, seeded: dict[str, Any]
) -> None:
    async def statements() -> int:
        seen: list[str] = []
        await service.rt.db.set_trace(seen.append)
        try:
            with spying() as answered:
                data = await human.gql(DASHBOARD, {"project": "demo"})
        finally:
            await service.rt.db.set_trace(None)
        assert "errors" not in data and answered == [True], data
        return len(seen)

    few = await statements()
    tasks = seeded["tasks"]
    for i in range(12):
        r = await human.post("/api/v1/projects/demo/decisions", {
            "question": f"Ship {i}?", "options": ["Yes", "No"], "rationale": "more",
            "required_actor": "human", "task_ids": tasks[i % 4 :][:2], "environment": "prod",
        })  # fmt: skip
        assert r.status_code == 201, r.text
    assert await statements() == few


# the decision gate's statements (decisions/store.py: blocking_pairs, held_pairs, statuses)
_GATE_STATEMENT = re.compile(
    r"\s*(WITH pairs\(|SELECT j\.value AS task_id, \(SELECT json_group_array"
    r"|SELECT s\.decision_id, waypost_decision_status\(s\.disposition)"
)


async def test_a_project_reached_through_many_tasks_reads_each_list_once(
    service: Service, human: Caller, seeded: dict[str, Any]
) -> None:
    """Its events, policy history, knowledge and decisions, reached through
    each of a page of tasks: the same bytes as graphql-core, and one read
    of each list however many tasks lead to it (fastpathreview: the events
    and policy history of a repeated project were never tested)."""
    query = """query ($n: Int!) { project(id: "demo") { tasks(first: $n) { nodes { restId project {
      events(first: 3) { totalCount pageInfo { hasNextPage endCursor }
        edges { cursor node { sequence type subject { __typename } } } }
      policyHistory(first: 2) { totalCount edges { node { revision } } }
      knowledge(first: 2) { totalCount nodes { restId } }
      decisions(first: 2) { totalCount nodes { restId } } } } } } }"""

    async def statements(n: int) -> int:
        result = await both(human, query, {"n": n})
        assert result.fast == result.slow and result.answered, result.fast
        assert result.fast.count(b'"policyHistory"') == n
        seen: list[str] = []
        await service.rt.db.set_trace(seen.append)
        try:
            with spying() as answered:
                await human.gql(query, {"n": n})
        finally:
            await service.rt.db.set_trace(None)
        assert answered == [True]
        # the gate's statements follow which tasks the stored state holds
        # (readiness.py), not how many tasks there are
        return len([s for s in seen if not _GATE_STATEMENT.match(s)])

    assert len(seeded["tasks"]) >= 4
    assert await statements(4) == await statements(1)


async def test_a_fault_of_the_fast_path_is_logged_and_graphql_core_answers(
    human: Caller, seeded: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(r: Any, parents: list[Any], a: dict[str, Any]) -> list[Any]:
        raise RuntimeError("a bug in a fast resolver")

    query = '{ project(id: "demo") { name decisions { nodes { restId question } } } }'
    expected = await both(human, query)
    # plans are memoized with their resolvers: fresh memos see the patched one
    with (
        mock.patch.dict(FIELDS, {("Decision", "question"): broken}),
        mock.patch.object(fastpath_plan, "_PLANS", Memo(8)),
        mock.patch.object(known, "KNOWN", Memo(8)),
    ):
        result = await both(human, query)
    assert result.fast == result.slow == expected.fast
    assert not result.answered
    assert "GraphQL fast path fault" in caplog.text


async def test_an_agent_reads_what_the_normal_path_lets_it_read(
    service: Service, seeded: dict[str, Any]
) -> None:
    agent = await service.agent("reader")
    for project in ("demo", "other", "nope"):
        result = await both(agent, DASHBOARD, {"project": project})
        assert result.fast == result.slow and result.answered
    # a session is its owner's only: not a field the fast path answers
    with spying() as seen:
        data = await agent.gql("{ mySession { restId } }")
    assert data["data"]["mySession"]["restId"] == agent.session_id and seen == []


async def test_arguments_below_a_null_are_never_checked(
    human: Caller, seeded: dict[str, Any]
) -> None:
    # graphql-core never resolves `decisions` of a missing project, so never
    # refuses its `first: 0`: the fast path answers the same, itself
    query = '{ project(id: "nope") { decisions(first: 0) { totalCount } } }'
    result = await both(human, query)
    assert result.fast == result.slow == b'{"data":{"project":null}}'
    assert result.answered


@pytest.mark.parametrize("limit", [0, 1])
async def test_a_digests_truncated_alone_is_complete_on_the_fast_path(
    human: Caller, seeded: dict[str, Any], limit: int
) -> None:
    """`truncated` selected without the lists it describes: the fast path
    fills no list part (digest.PARTS), yet each flag is the whole digest's
    (the lists cut at a small limit, so that the flags are true)."""
    from waypost.resolvers.decisions import digest

    query = (
        "{ projects { nodes { id digest { truncated {"
        " pendingDecisions proceededByTimeout timingOutSoon blockedTasks } } } } }"
    )
    with mock.patch.object(digest, "DIGEST_LIMIT", limit):
        result = await both(human, query)
    assert result.answered and result.fast == result.slow
    assert b'"pendingDecisions":true' in result.fast
