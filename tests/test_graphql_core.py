"""GraphQL over the core (service contract section 12): root fields, Node ids,
connections, mutations with userErrors, abuse limits and masked faults."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphql import get_introspection_query

from tests.conftest import Caller, MovableClock, Service
from tests.decisions_support import new_task, open_decision
from waypost.app import create_app
from waypost.resolvers.projects import store as project_store
from waypost.settings import Settings

PROJECT_CREATE = """
mutation ($input: ProjectCreateInput!) {
  projectCreate(input: $input) {
    project { id restId name createdBy { restId } }
    userErrors { code field message }
    replayed
  }
}
"""
POLICY_UPDATE = """
mutation ($input: PolicyUpdateInput!) {
  policyUpdate(input: $input) {
    policy { revision rules reviewMode leaseSeconds agentRuleEditing
             integrationOwner { restId } updatedBy { restId } }
    userErrors { code field message }
    replayed
  }
}
"""


async def post(caller: Caller, payload: Any, **kw: Any) -> httpx.Response:
    return await caller.client.post("/graphql", json=payload, headers=caller.headers(), **kw)


def codes(data: dict[str, Any]) -> list[str]:
    return [e["extensions"]["code"] for e in data.get("errors", [])]


def gid(type_name: str, rest_id: str) -> str:
    return base64.urlsafe_b64encode(f"{type_name}:{rest_id}".encode()).decode().rstrip("=")


# -- queries -------------------------------------------------------------------


async def test_me_is_the_caller(human: Caller) -> None:
    data = await human.gql("{ me { id restId kind name } }")
    assert data["data"]["me"] == {
        "id": gid("Principal", human.principal_id),
        "restId": human.principal_id,
        "kind": "HUMAN",
        "name": "alice",
    }


async def test_my_session_is_the_agents_live_session(service: Service) -> None:
    agent = await service.agent()
    data = await agent.gql("{ me { kind } mySession { restId principal { restId } } }")
    assert data["data"] == {
        "me": {"kind": "AGENT"},
        "mySession": {"restId": agent.session_id, "principal": {"restId": agent.principal_id}},
    }


async def test_projects_is_a_relay_connection_with_rest_cursors(human: Caller) -> None:
    for slug in ("a", "b", "c"):
        await human.post("/api/v1/projects", {"id": slug, "name": slug})
    query = """query ($after: String) { projects(first: 2, after: $after) {
        edges { cursor node { restId } } pageInfo { hasNextPage endCursor } } }"""
    first = (await human.gql(query, {"after": None}))["data"]["projects"]
    assert [e["node"]["restId"] for e in first["edges"]] == ["a", "b"]
    assert first["pageInfo"] == {"hasNextPage": True, "endCursor": first["edges"][1]["cursor"]}
    rest_page = (await human.get("/api/v1/projects", limit=2)).json()
    assert rest_page["next_cursor"] == first["pageInfo"]["endCursor"]
    second = (await human.gql(query, {"after": first["pageInfo"]["endCursor"]}))["data"]
    assert [e["node"]["restId"] for e in second["projects"]["edges"]] == ["c"]
    assert second["projects"]["pageInfo"]["hasNextPage"] is False


async def test_project_exposes_policy_history_and_events(human: Caller, project: str) -> None:
    await human.patch(
        "/api/v1/projects/demo/policy",
        {"expected_revision": 1, "rules": "two", "integration_owner": human.principal_id},
    )
    data = await human.gql(
        """{ project(id: "demo") {
            id restId name createdBy { restId }
            policy { revision rules updatedBy { restId } }
            policyHistory(first: 1) { edges { node { revision rules actor { restId }
                                                     actorKind integrationOwner { restId } } }
                                      pageInfo { hasNextPage } }
            events { edges { cursor node { sequence type data } } pageInfo { hasNextPage } }
        } }"""
    )
    p = data["data"]["project"]
    assert p["id"] == gid("Project", "demo") and p["restId"] == "demo"
    assert p["createdBy"] == {"restId": human.principal_id}
    assert p["policy"] == {
        "revision": 2,
        "rules": "two",
        "updatedBy": {"restId": human.principal_id},
    }
    assert p["policyHistory"]["edges"] == [
        {
            "node": {
                "revision": 2,
                "rules": "two",
                "actor": {"restId": human.principal_id},
                "actorKind": "HUMAN",
                "integrationOwner": {"restId": human.principal_id},
            }
        }
    ]
    assert p["policyHistory"]["pageInfo"]["hasNextPage"] is True
    assert [e["node"]["type"] for e in p["events"]["edges"]] == [
        "project.created",
        "policy.updated",
    ]
    assert p["events"]["edges"][1]["node"]["data"]["revision"] == 2
    assert p["events"]["pageInfo"]["hasNextPage"] is False


async def test_events_connection_pages_by_sequence(human: Caller, project: str) -> None:
    for revision in (1, 2):
        await human.patch(
            "/api/v1/projects/demo/policy", {"expected_revision": revision, "rules": str(revision)}
        )
    query = """query ($after: String) { project(id: "demo") { events(first: 2, after: $after) {
        edges { cursor node { sequence } } pageInfo { hasNextPage endCursor } } } }"""
    first = (await human.gql(query, {"after": None}))["data"]["project"]["events"]
    assert len(first["edges"]) == 2 and first["pageInfo"]["hasNextPage"] is True
    after = first["pageInfo"]["endCursor"]
    second = (await human.gql(query, {"after": after}))["data"]["project"]["events"]
    assert len(second["edges"]) == 1 and second["pageInfo"]["hasNextPage"] is False
    assert int(second["edges"][0]["cursor"]) > int(after)


async def test_events_connection_with_exactly_first_left_has_no_next_page(
    human: Caller, project: str
) -> None:
    query = '{ project(id: "demo") { events(first: 1) { pageInfo { hasNextPage } } } }'
    data = await human.gql(query)
    assert data["data"]["project"]["events"]["pageInfo"]["hasNextPage"] is False


@pytest.mark.parametrize("after", ["x", "-1", "1.5", "[1]", "99999999999999999999999"])
async def test_malformed_events_cursor_is_invalid_request(
    human: Caller, project: str, after: str
) -> None:
    query = 'query ($a: String) { project(id: "demo") { events(after: $a) { edges { cursor } } } }'
    data = await human.gql(query, {"a": after})
    assert codes(data) == ["invalid_request"]


async def test_malformed_policy_history_cursor_is_invalid_request(
    human: Caller, project: str
) -> None:
    data = await human.gql(
        '{ project(id: "demo") { policyHistory(after: "!!") { edges { cursor } } } }'
    )
    assert codes(data) == ["invalid_request"]
    # the argument that carried it (REST's `cursor` named no argument here)
    assert data["errors"][0]["extensions"]["field"] == "after"


@pytest.mark.parametrize("connection", ["tasks", "knowledge", "decisions", "policyHistory"])
@pytest.mark.parametrize("argument", ["after", "before"])
async def test_a_malformed_cursor_names_its_argument(
    human: Caller, project: str, connection: str, argument: str
) -> None:
    size = "first" if argument == "after" else "last"
    data = await human.gql(
        f'query ($c: String) {{ project(id: "demo") {{ {connection}({size}: 2, {argument}: $c)'
        " { totalCount } } }",
        {"c": "!!"},
    )
    assert codes(data) == ["invalid_request"], data
    assert data["errors"][0]["extensions"]["field"] == argument
    # placed on the connection that refused it, not on the project it bubbled to
    assert data["errors"][0]["path"] == ["project", connection]


async def test_unknown_project_is_null(human: Caller) -> None:
    assert (await human.gql('{ project(id: "nope") { restId } }'))["data"] == {"project": None}


async def test_node_resolves_projects_and_principals_by_global_id(
    human: Caller, project: str
) -> None:
    query = """query ($p: ID!, $u: ID!) {
        p: node(id: $p) { id ... on Project { restId name } }
        u: node(id: $u) { id ... on Principal { restId kind } } }"""
    data = await human.gql(
        query, {"p": gid("Project", "demo"), "u": gid("Principal", human.principal_id)}
    )
    assert data["data"] == {
        "p": {"id": gid("Project", "demo"), "restId": "demo", "name": "Demo"},
        "u": {"id": gid("Principal", human.principal_id), "restId": human.principal_id,
              "kind": "HUMAN"},
    }  # fmt: skip


async def test_node_resolves_the_callers_own_session_only(service: Service) -> None:
    agent = await service.agent("bot")
    other = await service.agent("other-bot")
    query = "query ($id: ID!) { node(id: $id) { id ... on Session { restId principalId } } }"
    assert agent.session_id and other.session_id
    mine = await agent.gql(query, {"id": gid("Session", agent.session_id)})
    assert mine["data"]["node"] == {
        "id": gid("Session", agent.session_id),
        "restId": agent.session_id,
        "principalId": agent.principal_id,
    }
    theirs = await agent.gql(query, {"id": gid("Session", other.session_id)})
    assert theirs["data"] == {"node": None}


@pytest.mark.parametrize("value", [gid("Project", "nope"), gid("Nothing", "x")])
async def test_node_of_unknown_record_or_type_is_null(human: Caller, value: str) -> None:
    data = await human.gql("query ($id: ID!) { node(id: $id) { id } }", {"id": value})
    assert data["data"] == {"node": None}


async def test_malformed_global_id_is_invalid_request(human: Caller) -> None:
    data = await human.gql('{ node(id: "%%%") { id } }')
    assert codes(data) == ["invalid_request"]


async def test_a_tampered_global_id_is_invalid_request(human: Caller, project: str) -> None:
    """Junk inside a global id was skipped by the decoder, so `node` found the
    record of the id it was copied from."""
    query = "query ($id: ID!) { node(id: $id) { id } }"
    good = gid("Project", "demo")
    assert (await human.gql(query, {"id": good}))["data"] == {"node": {"id": good}}
    for tampered in (good[:4] + "$$$$" + good[4:], good + "****", "...." + good):
        data = await human.gql(query, {"id": tampered})
        assert codes(data) == ["invalid_request"], (tampered, data)


@pytest.mark.parametrize("first", [0, -1, 101])
async def test_first_outside_1_to_100_is_refused(human: Caller, project: str, first: int) -> None:
    for field in (
        "projects",
        'project(id: "demo") { policyHistory',
        'project(id: "demo") { events',
    ):
        closing = "}" if "{" in field else ""
        data = await human.gql(
            f"query ($f: Int) {{ {field}(first: $f) {{ edges {{ cursor }} }} {closing} }}",
            {"f": first},
        )
        assert codes(data) == ["invalid_request"], (field, data)
        assert data["errors"][0]["extensions"]["field"] == "first"


async def test_first_of_100_is_accepted(human: Caller, project: str) -> None:
    data = await human.gql("{ projects(first: 100) { edges { cursor } } }")
    assert "errors" not in data


# -- mutations ---------------------------------------------------------------------------


async def test_project_create_returns_the_project(human: Caller) -> None:
    data = await human.gql(
        PROJECT_CREATE, {"input": {"idempotencyKey": "c1", "id": "gql", "name": "Over GraphQL"}}
    )
    payload = data["data"]["projectCreate"]
    assert payload == {
        "project": {"id": gid("Project", "gql"), "restId": "gql", "name": "Over GraphQL",
                    "createdBy": {"restId": human.principal_id}},
        "userErrors": [],
        "replayed": False,
    }  # fmt: skip
    assert (await human.get("/api/v1/projects/gql")).status_code == 200


async def test_project_create_duplicate_is_a_state_conflict_user_error(
    human: Caller, project: str
) -> None:
    data = await human.gql(
        PROJECT_CREATE, {"input": {"idempotencyKey": "c1", "id": "demo", "name": "Again"}}
    )
    assert data["data"]["projectCreate"]["project"] is None
    assert data["data"]["projectCreate"]["userErrors"] == [
        {"code": "state_conflict", "field": "id", "message": "a project with this id exists"}
    ]


async def test_project_create_bad_slug_is_an_invalid_request_user_error(human: Caller) -> None:
    data = await human.gql(
        PROJECT_CREATE, {"input": {"idempotencyKey": "c1", "id": "Not A Slug", "name": "x"}}
    )
    [error] = data["data"]["projectCreate"]["userErrors"]
    assert (error["code"], error["field"]) == ("invalid_request", "id")


async def test_project_create_by_an_agent_is_forbidden(service: Service) -> None:
    agent = await service.agent()
    data = await agent.gql(
        PROJECT_CREATE, {"input": {"idempotencyKey": "c1", "id": "mine", "name": "x"}}
    )
    assert data["data"]["projectCreate"]["userErrors"][0]["code"] == "forbidden"


async def test_policy_update_writes_the_next_revision(
    service: Service, human: Caller, project: str
) -> None:
    agent = await service.principal("agent")
    data = await human.gql(
        POLICY_UPDATE,
        {"input": {"idempotencyKey": "u1", "projectId": "demo", "expectedRevision": 1,
                   "rules": "r", "reviewMode": "ANY", "leaseSeconds": 120,
                   "agentRuleEditing": True, "integrationOwner": agent.principal_id}},
    )  # fmt: skip
    assert data["data"]["policyUpdate"] == {
        "policy": {"revision": 2, "rules": "r", "reviewMode": "ANY", "leaseSeconds": 120,
                   "agentRuleEditing": True, "integrationOwner": {"restId": agent.principal_id},
                   "updatedBy": {"restId": human.principal_id}},
        "userErrors": [],
        "replayed": False,
    }  # fmt: skip
    rest = (await human.get("/api/v1/projects/demo/policy")).json()
    assert rest["review_mode"] == "any" and rest["revision"] == 2


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        ({"expectedRevision": 5, "rules": "x"}, "revision_conflict", None),
        ({"expectedRevision": 1, "leaseSeconds": 1}, "invalid_request", "leaseSeconds"),
        ({"expectedRevision": 1, "rules": None}, "invalid_request", "rules"),
        ({"expectedRevision": 1}, "invalid_request", ""),
        ({"expectedRevision": 1, "integrationOwner": "prn_x"}, "invalid_request",
         "integrationOwner"),
    ],
)  # fmt: skip
async def test_policy_update_refusals_are_user_errors_with_rest_codes(
    human: Caller, project: str, change: dict[str, Any], code: str, field: str | None
) -> None:
    data = await human.gql(
        POLICY_UPDATE, {"input": {"idempotencyKey": "u1", "projectId": "demo", **change}}
    )
    payload = data["data"]["policyUpdate"]
    assert payload["policy"] is None
    [error] = payload["userErrors"]
    assert (error["code"], error["field"]) == (code, field)


async def test_policy_update_by_an_undelegated_agent_is_forbidden(
    service: Service, project: str
) -> None:
    agent = await service.agent()
    data = await agent.gql(
        POLICY_UPDATE,
        {"input": {"idempotencyKey": "u1", "projectId": "demo", "expectedRevision": 1,
                   "rules": "x"}},
    )  # fmt: skip
    assert data["data"]["policyUpdate"]["userErrors"][0]["code"] == "forbidden"


async def test_policy_update_of_unknown_project_is_not_found(human: Caller) -> None:
    data = await human.gql(
        POLICY_UPDATE,
        {"input": {"idempotencyKey": "u1", "projectId": "nope", "expectedRevision": 1,
                   "rules": "x"}},
    )  # fmt: skip
    assert data["data"]["policyUpdate"]["userErrors"][0]["code"] == "not_found"


# -- limits ---------------------------------------------------------------------------------


def nested(depth: int) -> str:
    """A selection of the given depth, counted as graphql-depth-limit and Strawberry
    count it: root fields are at depth 0, so `{ me { name } }` has depth 1. Field
    names need not exist for the depth rule."""
    inner = "leaf"
    for i in range(depth):
        inner = f"f{i} {{ {inner} }}"
    return "{ " + inner + " }"


async def test_depth_over_16_is_refused(human: Caller) -> None:
    data = (await post(human, {"query": nested(17)})).json()
    assert any("exceeds maximum operation depth of 16" in e["message"] for e in data["errors"])
    assert set(codes(data)) == {"invalid_request"}


async def test_depth_of_16_passes_the_depth_rule(human: Caller) -> None:
    data = (await post(human, {"query": nested(16)})).json()
    assert data["errors"]  # the made-up fields do not exist...
    assert not any("depth" in e["message"] for e in data["errors"])  # ...but depth is fine


async def test_standard_introspection_query_passes(human: Caller) -> None:
    r = await post(human, {"query": get_introspection_query()})
    assert r.status_code == 200
    data = r.json()
    assert "errors" not in data, data.get("errors")
    assert data["data"]["__schema"]["queryType"]["name"] == "Query"


def aliases(n: int, prefix: str = "a") -> str:
    return " ".join(f"{prefix}{i}: me {{ name }}" for i in range(n))


async def test_thirty_aliases_pass(human: Caller) -> None:
    data = (await post(human, {"query": "{ " + aliases(30) + " }"})).json()
    assert "errors" not in data


async def test_thirty_one_aliases_are_refused(human: Caller) -> None:
    data = (await post(human, {"query": "{ " + aliases(31) + " }"})).json()
    assert data["data"] is None and codes(data) == ["invalid_request"]
    assert "aliases" in data["errors"][0]["message"]


async def test_aliases_are_counted_through_fragments(human: Caller) -> None:
    query = "{ ...F " + aliases(20, "b") + " } fragment F on Query { " + aliases(11) + " }"
    data = (await post(human, {"query": query})).json()
    assert data["data"] is None and codes(data) == ["invalid_request"]


async def test_more_than_5000_tokens_are_refused(human: Caller) -> None:
    query = "{ me { " + "name " * 5000 + "} }"
    assert len(query.encode()) < 64 * 1024
    data = (await post(human, {"query": query})).json()
    assert data["data"] is None and codes(data) == ["invalid_request"]
    assert "5000 tokens" in data["errors"][0]["message"]


async def test_body_over_64_kib_is_413_graphql_shaped(human: Caller) -> None:
    query = "{ me { name } }" + " " * (64 * 1024)
    r = await post(human, {"query": query})
    assert r.status_code == 413
    assert r.json()["errors"][0]["extensions"]["code"] == "payload_too_large"


async def test_a_body_of_exactly_64_kib_is_run_and_one_byte_more_is_413(human: Caller) -> None:
    """The contract's 64 KiB, to the byte (the test above sends far more)."""
    head, tail = b'{"query": "{ me { name } }"', b"}"
    headers = {**human.headers(), "Content-Type": "application/json"}
    exact = head + b" " * (64 * 1024 - len(head) - len(tail)) + tail
    r = await human.client.post("/graphql", content=exact, headers=headers)
    assert r.status_code == 200 and r.json()["data"]["me"]["name"], r.text
    r = await human.client.post("/graphql", content=exact + b" ", headers=headers)
    assert r.status_code == 413
    assert r.json()["errors"][0]["extensions"]["code"] == "payload_too_large"


async def test_a_content_length_that_is_no_number_is_400_graphql_shaped(human: Caller) -> None:
    # "²" (0xB2) is a digit to str.isdigit(), not to HTTP: int() raised, a 500
    headers = {**human.headers(), "Content-Type": "application/json"}
    h = [*((k.encode(), v.encode()) for k, v in headers.items()), (b"content-length", b"\xb2")]
    r = await human.client.post("/graphql", content=b'{"query": "{ me { name } }"}', headers=h)
    assert r.status_code == 400, r.text
    extensions = r.json()["errors"][0]["extensions"]
    assert extensions == {"code": "invalid_request", "field": "Content-Length"}


async def test_streamed_body_over_64_kib_is_413(human: Caller) -> None:
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"query": "{ me { name } }'
        for _ in range(1000):
            sent += 1
            yield b" " * 1024

    headers = {**human.headers(), "Content-Type": "application/json"}
    r = await human.client.post("/graphql", content=body(), headers=headers)
    assert r.status_code == 413
    assert r.json()["errors"][0]["extensions"]["code"] == "payload_too_large"
    assert sent <= 66


async def test_batching_is_refused(human: Caller) -> None:
    r = await post(human, [{"query": "{ me { name } }"}, {"query": "{ me { kind } }"}])
    assert r.status_code == 400
    assert r.json() == {
        "errors": [
            {
                "message": "the body must be a JSON object (batched requests are not supported)",
                "extensions": {"code": "invalid_request"},
            }
        ]
    }


@pytest.mark.parametrize(
    ("raw", "content_type", "status", "code"),
    [
        (b"{", "application/json", 400, "invalid_request"),
        (b'{"query": "{ me { name } }", "query": "{ me { kind } }"}', "application/json", 400,
         "invalid_request"),
        (b"{}", "application/json", 400, "invalid_request"),
        (b"query=%7Bme%7D", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
    ],
)  # fmt: skip
async def test_malformed_http_requests_get_graphql_shaped_errors(
    human: Caller, raw: bytes, content_type: str, status: int, code: str
) -> None:
    r = await human.client.post(
        "/graphql", content=raw, headers={**human.headers(), "Content-Type": content_type}
    )
    assert r.status_code == status
    assert r.json()["errors"][0]["extensions"]["code"] == code
    assert r.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("document", ["", "   ", "\n\t,", "# only a comment", "  ,, # and\n"])
async def test_a_document_with_nothing_in_it_is_400(human: Caller, document: str) -> None:
    """An empty query was 400 (Strawberry's own check) but one of spaces or
    a comment only was 200 with a syntax error: both hold no operation."""
    r = await human.client.post("/graphql", json={"query": document}, headers=human.headers())
    assert r.status_code == 400
    [error] = r.json()["errors"]
    assert error == {"message": "No GraphQL query found in the request",
                     "extensions": {"code": "invalid_request"}}  # fmt: skip


async def test_get_is_refused_when_graphiql_is_off(human: Caller) -> None:
    for params in ({"query": "{ me { name } }"}, {}):
        r = await human.client.get("/graphql", params=params, headers=human.headers())
        assert r.status_code == 405 and r.headers["allow"] == "POST"
        assert r.json()["errors"][0]["extensions"]["code"] == "method_not_allowed"
    assert (await human.client.get("/graphql")).status_code == 401
    assert (await human.client.head("/graphql")).status_code == 401


@pytest.fixture
async def graphiql(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(db_path=tmp_path / "ide.db", sweep_interval=3600, graphiql=True)
    app = create_app(settings, clock=MovableClock())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client


async def test_graphiql_page_is_served_without_a_token_when_enabled(
    graphiql: httpx.AsyncClient,
) -> None:
    r = await graphiql.get("/graphql", headers={"Accept": "text/html"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "graphiql" in r.text.lower()
    assert r.headers["cache-control"] == "no-store"
    # HEAD answers as GET does (it was 401 without a token)
    head = await graphiql.head("/graphql", headers={"Accept": "text/html"})
    assert head.status_code == 200 and head.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("range_header", ["bytes=5-2", "bytes=x", "bytes=99999999-", "bytes=0-3"])
async def test_a_range_on_the_graphiql_page_is_ignored(
    graphiql: httpx.AsyncClient, range_header: str
) -> None:
    """The page answered a malformed or unsatisfiable Range in plain text (400,
    416), outside the error envelope, and a valid one with a piece of itself."""
    whole = await graphiql.get("/graphql", headers={"Accept": "text/html"})
    r = await graphiql.get("/graphql", headers={"Accept": "text/html", "Range": range_header})
    assert r.status_code == 200 and r.content == whole.content
    assert "content-range" not in r.headers and r.headers["x-frame-options"] == "DENY"


async def test_graphiql_does_not_open_queries_to_callers_without_a_token(
    graphiql: httpx.AsyncClient,
) -> None:
    r = await graphiql.get("/graphql", params={"query": "{ me { name } }"})
    assert r.status_code == 405
    r = await graphiql.post("/graphql", json={"query": "{ me { name } }"})
    assert r.status_code == 401


async def test_a_refused_variable_is_not_echoed_whole(human: Caller, project: str) -> None:
    """graphql-core quotes the value it refuses: a 60,000-character enum
    variable came back whole in the error's message."""
    value = "k" * 60_000
    query = 'query($s: TaskStatus) { project(id: "demo") { tasks(status: $s) { totalCount } } }'
    r = await post(human, {"query": query, "variables": {"s": value}})
    error = r.json()["errors"][0]
    assert error["extensions"]["code"] == "invalid_request"
    assert len(error["message"]) <= 203 and error["message"].endswith("...")
    assert len(r.content) < 1000


async def test_unexpected_fault_is_masked(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(row: Any) -> dict[str, Any]:
        raise RuntimeError("secret: /var/lib/waypost.db is corrupt")

    # the policy field reads through the request's loader, which shapes rows with this
    monkeypatch.setattr(project_store, "policy_json", broken)
    data = await human.gql('{ project(id: "demo") { policy { revision } } }')
    assert data["errors"][0]["message"] == "Unexpected error."
    assert data["errors"][0]["extensions"] == {"code": "internal"}
    assert "secret" not in str(data)


async def test_graphql_responses_carry_no_store_and_nosniff(human: Caller) -> None:
    r = await post(human, {"query": "{ me { name } }"})
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_event_actor_is_a_principal_object(human: Caller, project: str) -> None:
    data = await human.gql(
        '{ project(id: "demo") { events { edges { node { actorId actor { restId name } } } } } }'
    )
    [edge] = data["data"]["project"]["events"]["edges"]
    assert edge["node"] == {
        "actorId": human.principal_id,
        "actor": {"restId": human.principal_id, "name": "alice"},
    }


SESSION_ACTION = """
mutation ($hb: SessionActionInput!, $end: SessionActionInput!) {
  sessionHeartbeat(input: $hb) { session { expiresAt endedAt } userErrors { code } }
  sessionEnd(input: $end) { session { endedAt } userErrors { code } }
}
"""


async def test_session_heartbeat_and_end_over_graphql(service: Service) -> None:
    agent = await service.agent()
    service.clock.advance(minutes=5)
    data = await agent.gql(
        SESSION_ACTION,
        {"hb": {"idempotencyKey": "h", "sessionId": agent.session_id},
         "end": {"idempotencyKey": "e", "sessionId": agent.session_id}},
    )  # fmt: skip
    assert data["data"]["sessionHeartbeat"] == {
        "session": {"expiresAt": "2026-11-29T18:20:00.000Z", "endedAt": None},
        "userErrors": [],
    }
    assert data["data"]["sessionEnd"]["session"]["endedAt"] == "2026-11-29T18:05:00.000Z"


async def test_session_action_on_someone_elses_session_is_a_user_error(service: Service) -> None:
    one = await service.agent("one")
    other = await service.principal("agent", "other")
    data = await other.gql(
        SESSION_ACTION,
        {"hb": {"idempotencyKey": "h", "sessionId": one.session_id},
         "end": {"idempotencyKey": "e", "sessionId": one.session_id}},
    )  # fmt: skip
    assert data["data"]["sessionHeartbeat"] == {
        "session": None,
        "userErrors": [{"code": "forbidden"}],
    }
    assert data["data"]["sessionEnd"]["userErrors"] == [{"code": "forbidden"}]


async def test_user_errors_carry_the_rest_reason(service: Service, project: str) -> None:
    agent = await service.principal("agent", "no-session")
    data = await agent.gql(
        "mutation ($input: TaskClaimInput!) { taskClaim(input: $input) {"
        " userErrors { code field reason } } }",
        {"input": {"idempotencyKey": "claim-1", "projectId": "demo"}},
    )
    assert data["data"]["taskClaim"]["userErrors"] == [
        {"code": "forbidden", "field": None, "reason": "session_required"}
    ], data


# `me` is no field of the fast path (schema/fastpath): these run through
# graphql-core's resolvers, whose project checks and per-operation caches the
# fast path's answers hid (mutantaudit3)
TWO_PROJECTS = """{ me { restId }
  a: project(id: "demo") { ...Lists } b: project(id: "other") { ...Lists } }
fragment Lists on Project {
  tasks(first: 5) { nodes { title } } decisions(first: 5) { totalCount }
  knowledge(first: 5) { nodes { title } } }"""
OTHERS_RECORDS = """query ($id: String!, $task: String!) { me { restId }
  project(id: "other") { decision(id: $id) { restId } task(id: $task) { restId } } }"""


async def other_project(human: Caller) -> None:
    r = await human.post("/api/v1/projects", {"id": "other", "name": "Other"})
    assert r.status_code == 201, r.text


async def test_two_projects_connections_with_the_same_arguments_are_each_their_own(
    human: Caller, project: str
) -> None:
    task = await new_task(human, "in demo")
    await open_decision(human, [task])
    await other_project(human)
    r = await human.post("/api/v1/projects/other/tasks", {"title": "in other"})
    assert r.status_code == 201, r.text
    record = {"kind": "fact", "title": "known in demo", "body": "b", "collection": "project"}
    r = await human.post("/api/v1/projects/demo/knowledge", record)
    assert r.status_code == 201, r.text
    data = (await human.gql(TWO_PROJECTS))["data"]
    assert data["a"]["tasks"]["nodes"] == [{"title": "in demo"}], data
    assert data["b"]["tasks"]["nodes"] == [{"title": "in other"}], data
    assert data["a"]["knowledge"]["nodes"] == [{"title": "known in demo"}], data
    assert data["b"]["knowledge"]["nodes"] == [], data
    assert (data["a"]["decisions"]["totalCount"], data["b"]["decisions"]["totalCount"]) == (1, 0)


async def test_another_projects_task_and_decision_are_null_through_this_one(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await other_project(human)
    answer = await human.gql(OTHERS_RECORDS, {"id": decision["id"], "task": task})
    assert answer["data"]["project"] == {"decision": None, "task": None}, answer


def _rest_refusal(r: Any) -> tuple[str, Any]:
    error = r.json()["error"]
    return error["code"], error.get("details", {}).get("field")


async def test_the_same_bad_input_is_refused_alike_on_both_surfaces(
    human: Caller, project: str
) -> None:
    query = """
    mutation($i: TaskCreateInput!) {
      taskCreate(input: $i) { task { restId } userErrors { code field message } }
    }"""
    cases: list[tuple[dict[str, Any], dict[str, Any], str | None]] = [
        ({"title": " "}, {"title": " "}, "title"),
        ({"title": "t", "acceptance_criteria": ["a", " "]},
         {"title": "t", "acceptanceCriteria": ["a", " "]}, "acceptanceCriteria[1]"),
        ({"title": "t", "depends_on": ["task_nope"]},
         {"title": "t", "dependsOn": ["task_nope"]}, "dependsOn[0]"),
        ({"title": "t", "subject_task_id": "task_nope"},
         {"title": "t", "subjectTaskId": "task_nope"}, "subjectTaskId"),
    ]  # fmt: skip
    for n, (rest_body, graphql_input, field) in enumerate(cases):
        r = await human.post("/api/v1/projects/demo/tasks", rest_body)
        code, rest_field = _rest_refusal(r)
        variables = {"i": {"idempotencyKey": f"p-{n}", "projectId": "demo", **graphql_input}}
        payload = (await human.gql(query, variables))["data"]["taskCreate"]
        [refusal] = payload["userErrors"]
        assert (refusal["code"], refusal["field"]) == (code, field), (rest_body, refusal)
        assert r.status_code == 400 and code == "invalid_request"
        # the same words, with the field named as each surface names it
        assert refusal["message"] == r.json()["error"]["message"].replace(rest_field, field)
