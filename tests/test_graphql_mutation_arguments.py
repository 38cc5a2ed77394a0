"""A mutation whose selection would meet a paging refusal, or a refusal of a
search field's arguments, is refused before it runs
(schema/mutation_arguments.py): the refusal used to come after the write had
committed, so the answer read as refused while the write stood."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller
from waypost.pagination import MALFORMED_CURSOR

CREATE = """mutation ($key: String!, $n: Int, $after: String) {
  taskCreate(input: {idempotencyKey: $key, projectId: "demo", title: "paged"}) {
    task { id revisions(first: $n, after: $after) { totalCount } }
    userErrors { code }
  }
}"""


async def titles(human: Caller) -> list[str]:
    listed = (await human.get("/api/v1/projects/demo/tasks")).json()["items"]
    return [t["title"] for t in listed]


async def send(human: Caller, query: str, **variables: Any) -> dict[str, Any]:
    r = await human.client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=human.headers()
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


@pytest.mark.parametrize(
    ("variables", "field", "says"),
    [
        ({"n": 0}, "first", "first must be from 1 to 100"),
        ({"n": 101}, "first", "first must be from 1 to 100"),
        ({"n": 5, "after": "garbage"}, "after", MALFORMED_CURSOR),
        # an event sequence, the events connection's cursor, is no cursor of
        # another connection: it passed, and the write stood (gqlfuzz)
        ({"n": 5, "after": "0"}, "after", MALFORMED_CURSOR),
        # an Int sent as a float is that Int (graphql-core coerces 0.0 to 0):
        # the check read the raw 0.0 as no Int and let the write commit
        ({"n": 0.0}, "first", "first must be from 1 to 100"),
        ({"n": 101.0}, "first", "first must be from 1 to 100"),
    ],
)
async def test_a_refused_paging_argument_refuses_the_mutation_and_writes_nothing(
    human: Caller, project: str, variables: dict[str, Any], field: str, says: str
) -> None:
    answer = await send(human, CREATE, key="k1", **variables)
    assert answer["data"] is None
    [error] = answer["errors"]
    assert error["extensions"] == {"code": "invalid_request", "field": field}
    assert error["message"] == says
    assert await titles(human) == []
    # nothing was stored under the key: the corrected request creates the task
    fixed = await send(human, CREATE, key="k1", n=5)
    assert fixed["data"]["taskCreate"]["task"]["revisions"] == {"totalCount": 1}
    assert await titles(human) == ["paged"]


async def test_literals_defaults_and_fragments_are_checked_too(human: Caller, project: str) -> None:
    literal = CREATE.replace("first: $n,", "first: $n, last: 2,")
    answer = await send(human, literal, key="k2", n=3)
    assert answer["errors"][0]["extensions"] == {"code": "invalid_request", "field": "last"}
    defaulted = CREATE.replace("$n: Int,", "$n: Int = 0,")
    answer = await send(human, defaulted, key="k3")
    assert answer["errors"][0]["extensions"] == {"code": "invalid_request", "field": "first"}
    spread = """mutation ($key: String!) {
      taskCreate(input: {idempotencyKey: $key, projectId: "demo", title: "paged"}) {
        task { ...Paged } } }
    fragment Paged on Task { revisions(first: 1, before: "zz") { totalCount } }"""
    answer = await send(human, spread, key="k4")
    assert answer["errors"][0]["extensions"] == {"code": "invalid_request", "field": "before"}
    assert await titles(human) == []


async def test_a_cursor_the_service_made_passes(human: Caller, project: str) -> None:
    first = await send(human, CREATE, key="k5", n=1)
    task_id = first["data"]["taskCreate"]["task"]["id"]
    query = """query ($id: ID!) { node(id: $id) { ... on Task {
      revisions(first: 1) { edges { cursor } } } } }"""
    cursor = (await send(human, query, id=task_id))["data"]["node"]["revisions"]["edges"][0][
        "cursor"
    ]
    again = await send(human, CREATE, key="k6", n=1, after=cursor)
    assert again["data"]["taskCreate"]["task"]["revisions"] == {"totalCount": 1}
    assert await titles(human) == ["paged", "paged"]


async def test_the_events_connection_takes_a_sequence_and_only_that(
    human: Caller, project: str
) -> None:
    events = CREATE.replace(
        "revisions(first: $n, after: $after)", "project { events(first: $n, after: $after)"
    ).replace("{ totalCount } }", "{ totalCount } } }")
    passed = await send(human, events, key="k7", n=1, after="0")
    assert passed["data"]["taskCreate"]["task"]["project"]["events"]["totalCount"] >= 1
    encoded = await send(human, CREATE, key="k8", n=1)  # a revisions cursor, made by the service
    task_id = encoded["data"]["taskCreate"]["task"]["id"]
    query = """query ($id: ID!) { node(id: $id) { ... on Task {
      revisions(first: 1) { edges { cursor } } } } }"""
    page = (await send(human, query, id=task_id))["data"]["node"]["revisions"]
    refused = await send(human, events, key="k9", n=1, after=page["edges"][0]["cursor"])
    assert refused["data"] is None
    assert refused["errors"][0]["extensions"] == {"code": "invalid_request", "field": "after"}
    assert await titles(human) == ["paged", "paged"]


async def test_fields_that_never_run_and_other_operations_are_not_checked(
    human: Caller, project: str
) -> None:
    skipped = CREATE.replace(
        "revisions(first: $n, after: $after)",
        "revisions(first: $n, after: $after) @include(if: false)",
    )
    answer = await send(human, skipped, key="k7", n=0)
    assert "errors" not in answer, answer
    assert set(answer["data"]["taskCreate"]["task"]) == {"id"}
    # the request runs `Mine`; the document's other (broken) mutation is no business of it
    both = CREATE.replace("mutation (", "mutation Broken(") + " query Mine { me { name } }"
    r = await human.client.post(
        "/graphql",
        json={"query": both, "operationName": "Mine", "variables": {"key": "k8", "n": 0}},
        headers=human.headers(),
    )
    assert r.json()["data"]["me"]["name"]


PACKET = "context(q: $q, limit: $limit) { truncated }"
TYPES = {"q": "String!", "limit": "Int", "tag": "String", "shared": "Boolean"}


def nested(selection: str) -> str:
    """A task create whose payload selects `selection` on the task's project,
    declaring the variables the selection uses (GraphQL refuses unused ones)."""
    declared = "".join(f", ${n}: {t}" for n, t in TYPES.items() if f"${n}" in selection)
    return (
        f"mutation ($key: String!{declared}) {{"
        ' taskCreate(input: {idempotencyKey: $key, projectId: "demo", title: "searched"}) {'
        f" task {{ project {{ {selection} }} }} userErrors {{ code }} }} }}"
    )


@pytest.mark.parametrize(
    ("selection", "variables", "field"),
    [
        ("tasks(q: $q) { totalCount }", {"q": ""}, "q"),
        ("tasks(q: $q) { totalCount }", {"q": "a\u0000b"}, "q"),
        ("knowledge(q: $q) { totalCount }", {"q": "   "}, "q"),
        ("knowledge(q: $q) { totalCount }", {"q": " ".join(["w"] * 33)}, "q"),
        ("knowledge(q: $q, tag: $tag) { totalCount }", {"q": "ok", "tag": "t" * 201}, "tag"),
        (PACKET, {"q": "ok", "limit": 0}, "limit"),
        (PACKET, {"q": "x" * 1025}, "q"),
        ("context(q: $q, budget: 5) { truncated }", {"q": "ok"}, "budget"),
        ('context(q: $q, component: "") { truncated }', {"q": "ok"}, "component"),
        # an explicit null where the argument is non-null with a default
        ("knowledge(includeShared: $shared) { totalCount }", {"shared": None}, "includeShared"),
        (PACKET, {"q": "ok", "limit": None}, "limit"),
    ],
)
async def test_a_refused_search_argument_refuses_the_mutation_and_writes_nothing(
    human: Caller, project: str, selection: str, variables: dict[str, Any], field: str
) -> None:
    """`tasks(q: "")` under a mutation's payload wrote the task, then answered
    `project: null` with a top-level error: a retry with a new key wrote twice."""
    answer = await send(human, nested(selection), key="k1", **variables)
    assert answer["data"] is None, answer
    [error] = answer["errors"]
    assert error["extensions"] == {"code": "invalid_request", "field": field}
    assert await titles(human) == []


async def test_search_arguments_that_pass_and_defaults_run_the_mutation(
    human: Caller, project: str
) -> None:
    selection = "tasks(q: $q) { totalCount } knowledge(q: $q) { totalCount } " + PACKET
    # $limit left out: the argument's default (20), as execution takes it
    answer = await send(human, nested(selection), key="k1", q="searched")
    assert "errors" not in answer, answer
    found = answer["data"]["taskCreate"]["task"]["project"]
    assert found["tasks"] == {"totalCount": 1} and found["context"] == {"truncated": False}
    assert await titles(human) == ["searched"]


def test_every_registered_check_names_a_field_of_the_schema_and_reads_its_arguments() -> None:
    """A check is found by its type's and field's names: a renamed type would
    silently skip it, a renamed argument raise KeyError before execution."""
    from graphql import Undefined

    from waypost.errors import InvalidRequest
    from waypost.schema import schema
    from waypost.schema.mutation_arguments import CHECKS

    assert CHECKS, "the search fields register their checks when the schema is built"
    for (type_name, field_name), check in CHECKS.items():
        parent = schema._schema.get_type(type_name)
        assert parent is not None, type_name
        field = parent.fields[field_name]  # type: ignore[union-attr]
        arguments = {
            name: (None if arg.default_value is Undefined else arg.default_value)
            for name, arg in field.args.items()
        }
        if "q" in arguments:
            arguments["q"] = "fine words"
        try:
            check(arguments)
        except InvalidRequest as refusal:  # a refusal is fine; a KeyError is not
            raise AssertionError(f"{type_name}.{field_name}: {refusal}") from refusal


async def test_a_variable_that_does_not_coerce_is_refused_in_its_own_words(
    human: Caller, project: str
) -> None:
    """A variable that did not coerce left every variable out of the check,
    which then refused `q` as null: the client was sent after the wrong
    argument. Execution's own refusal of the variable comes now."""
    query = nested("context(q: $q, limit: $limit) { truncated }")
    answer = await send(human, query, key="k1", q="ok", limit="x")
    [error] = answer["errors"]
    assert "$limit" in error["message"], error
    assert error.get("extensions", {}).get("field") != "q"
    assert await titles(human) == []


async def test_fields_that_do_run_are_checked_in_inline_fragments_and_under_directives(
    human: Caller, project: str
) -> None:
    """A field `@include(if: true)` or `@skip(if: false)` runs, as does one in
    an inline fragment (typed or not): its bad argument refuses the mutation
    before it writes, as a plain field's does."""
    included = CREATE.replace(
        "revisions(first: $n, after: $after)",
        "revisions(first: $n, after: $after) @skip(if: false) @include(if: true)",
    )
    answer = await send(human, included, key="k21", n=0)
    assert answer["data"] is None
    assert answer["errors"][0]["extensions"] == {"code": "invalid_request", "field": "first"}
    for fragment in ("... on Task", "..."):
        inline = CREATE.replace(
            "task { id revisions(first: $n, after: $after) { totalCount } }",
            "task { id " + fragment + " { revisions(first: $n, after: $after) { totalCount } } }",
        )
        answer = await send(human, inline, key="k22", n=0)
        assert answer["data"] is None, fragment
        assert answer["errors"][0]["extensions"] == {"code": "invalid_request", "field": "first"}
    assert await titles(human) == []
