"""A DataLoader batch in which one key finds nothing (docs/graphql.md, "Ids
and nodes": `node(id:)` "answers `null` for an unknown record or type", and
`project(id:)`, `Project.task(id:)`, `Project.decision(id:)`,
`Project.knowledgeItem(id:)` are nullable fields that answer `null` for an id
they do not know). The unknown id shares its batch with known ones: it must
come back `null` without an error, and must not take the others with it
(a batch read that indexed its rows by the asked ids failed every load of
the batch, masked as `internal`, nullauditreview)."""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.conftest import Caller
from tests.decisions_support import new_task, open_decision
from tests.fastpath_support import both
from tests.knowledge_support import create


def gid(type_name: str, rest_id: str) -> str:
    return base64.urlsafe_b64encode(f"{type_name}:{rest_id}".encode()).decode().rstrip("=")


async def _known(human: Caller) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A task, a decision on it and a knowledge record in "demo", each known."""
    task = await new_task(human, "Known task")
    return (
        task,
        await open_decision(human, [task]),
        await create(human, "demo", title="Known record"),
    )


async def test_node_batches_answer_null_for_the_unknown_ids_only(
    human: Caller, project: str
) -> None:
    task, decision, record = await _known(human)
    query = """query ($t: ID!, $tx: ID!, $d: ID!, $dx: ID!, $k: ID!, $kx: ID!, $u: ID!, $ux: ID!,
                      $p: ID!, $px: ID!) {
        t: node(id: $t) { ... on Task { restId } }      tx: node(id: $tx) { id }
        d: node(id: $d) { ... on Decision { restId } }  dx: node(id: $dx) { id }
        k: node(id: $k) { ... on Knowledge { restId } } kx: node(id: $kx) { id }
        u: node(id: $u) { ... on Principal { restId } } ux: node(id: $ux) { id }
        p: node(id: $p) { ... on Project { restId } }   px: node(id: $px) { id } }"""
    variables = {
        "t": gid("Task", task), "tx": gid("Task", "task_nope"),
        "d": gid("Decision", decision["id"]), "dx": gid("Decision", "dec_nope"),
        "k": gid("Knowledge", record["id"]), "kx": gid("Knowledge", "kn_nope"),
        "u": gid("Principal", human.principal_id), "ux": gid("Principal", "prn_nope"),
        "p": gid("Project", "demo"), "px": gid("Project", "nope"),
    }  # fmt: skip
    data = await human.gql(query, variables)
    assert data == {"data": {
        "t": {"restId": task}, "tx": None,
        "d": {"restId": decision["id"]}, "dx": None,
        "k": {"restId": record["id"]}, "kx": None,
        "u": {"restId": human.principal_id}, "ux": None,
        "p": {"restId": "demo"}, "px": None,
    }}  # fmt: skip


async def test_project_lookups_answer_null_for_the_unknown_ids_only(
    human: Caller, project: str
) -> None:
    """The same on the fast path and on graphql-core's (one batch each way)."""
    task, decision, record = await _known(human)
    query = """query ($t: String!, $d: String!, $k: String!) {
        a: project(id: "demo") {
          t: task(id: $t) { restId } tx: task(id: "task_nope") { restId }
          d: decision(id: $d) { restId } dx: decision(id: "dec_nope") { restId }
          k: knowledgeItem(id: $k) { restId } kx: knowledgeItem(id: "kn_nope") { restId } }
        b: project(id: "nope") { restId } }"""
    answered = await both(human, query, {"t": task, "d": decision["id"], "k": record["id"]})
    assert answered.fast == answered.slow
    assert answered.answered  # the fast path's own answer, not a fallback after a fault
    assert json.loads(answered.fast) == {"data": {
        "a": {"t": {"restId": task}, "tx": None, "d": {"restId": decision["id"]}, "dx": None,
              "k": {"restId": record["id"]}, "kx": None},
        "b": None}}  # fmt: skip


async def test_node_of_an_unknown_type_is_null_without_an_error(
    human: Caller, project: str
) -> None:
    """`null`, not a masked fault whose `data` happens to be null too (the
    node test of test_graphql_core.py compared `data` alone)."""
    query = 'query ($n: ID!) { n: node(id: $n) { id } p: node(id: "%s") { id } }'
    data = await human.gql(query % gid("Project", "demo"), {"n": gid("Nothing", "x")})
    assert data == {"data": {"n": None, "p": {"id": gid("Project", "demo")}}}


async def test_errors_come_in_document_order_whichever_fails_first(
    human: Caller, project: str
) -> None:
    """A refusal met after some reads (a cursor under a task's project)
    written before one met at once (a malformed global id): listed as
    written, not as they failed."""
    await new_task(human, "A task")
    query = """{ a: project(id: "demo") { tasks(first: 1) { nodes {
          project { decisions(after: "bad") { totalCount } } } } }
        b: node(id: "bad") { id } }"""
    data = await human.gql(query)
    assert [e["path"] for e in data["errors"]] == [
        ["a", "tasks", "nodes", 0, "project", "decisions"],
        ["b"],
    ], data
    assert [e["extensions"] for e in data["errors"]] == [
        {"code": "invalid_request", "field": "after"},
        {"code": "invalid_request", "field": "id"},
    ]
