"""Every success response in the OpenAPI document has a JSON Schema, and the
server's real answers conform to it: one scenario calls every operation of
the document with a successful answer (humans and agents, sessions, the task
workflow, decisions, knowledge, context, digest, events, a review outcome)
and validates each body against its operation's schema (Draft 2020-12, `$ref`s
resolved in the whole document)."""

from __future__ import annotations

import re
from typing import Any

import httpx
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.conftest import Caller, Service
from tests.decisions_support import answer_body, decision_body
from tests.knowledge_support import correction
from tests.lifecycle.support import Lifecycle, memo, with_docs
from tests.live_support import next_data_event, running, sse_events
from waypost import rest
from waypost.lifecycle_http import create_lifecycle_app
from waypost.lifecycle_http.verifiers import WaypostTokenVerifier
from waypost.resolvers.core import sweep
from waypost.rest import openapi, response_schemas

URI = "https://waypost.test/api/v1/openapi.json"
P = "/api/v1/projects/demo"
K = f"{P}/knowledge"
D = f"{P}/decisions"


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def validator(document: dict[str, Any], pointer: list[str]) -> Draft202012Validator:
    """A validator for the schema at `pointer` in `document`, its `$ref`s
    resolved against the whole document."""
    resource = Resource.from_contents(document, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(URI, resource)
    fragment = "/".join(_escape(s) for s in pointer)
    return Draft202012Validator(
        {"$ref": f"{URI}#/{fragment}"},
        registry=registry,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def problems(check: Draft202012Validator, body: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message[:300]}"
        for e in sorted(check.iter_errors(body), key=lambda e: list(map(str, e.absolute_path)))
    ]


def operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m.upper(), path) for path, item in document["paths"].items() for m in item}


class Conformance:
    """Checks answers against the document and remembers which operations
    answered successfully."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.seen: set[tuple[str, str]] = set()
        self._templates: list[tuple[str, str, re.Pattern[str], int]] = []
        for method, path in operations(document):
            parts = ["[^/]+" if p.startswith("{") else re.escape(p) for p in path[1:].split("/")]
            literal = sum(len(p) for p in path.split("/") if not p.startswith("{"))
            self._templates.append((method, path, re.compile("/" + "/".join(parts)), literal))

    def template(self, method: str, path: str) -> str:
        found = [
            (lit, t) for m, t, rx, lit in self._templates if m == method and rx.fullmatch(path)
        ]
        assert found, f"{method} {path} is in no operation of the document"
        return max(found)[1]

    def ok(self, response: httpx.Response) -> Any:
        """The answer's body, after checking it is the operation's documented
        success and conforms to its schema."""
        method, path = response.request.method, response.request.url.path
        template = self.template(method, path)
        op = self.document["paths"][template][method.lower()]
        (status,) = [s for s in op["responses"] if s.startswith("2")]
        assert str(response.status_code) == status, (method, path, response.text)
        assert response.headers["content-type"] == "application/json"
        pointer = [
            "paths",
            template,
            method.lower(),
            "responses",
            status,
            "content",
            "application/json",
            "schema",
        ]
        body = response.json()
        found = problems(validator(self.document, pointer), body)
        assert not found, (method, path, found)
        self.seen.add((method, template))
        return body

    def conforms(self, name: str, body: Any) -> None:
        found = problems(validator(self.document, ["components", "schemas", name]), body)
        assert not found, (name, found)


# --- the document -----------------------------------------------------------------


def test_every_success_response_has_a_schema() -> None:
    document = openapi.build(rest.TABLES)
    schemas = document["components"]["schemas"]
    for path, item in document["paths"].items():
        for method, op in item.items():
            (status,) = [s for s in op["responses"] if s.startswith("2")]
            content = op["responses"][status]["content"]
            if path == openapi.STREAM_PATH:
                assert op == openapi.STREAM_OPERATION  # the stream stays as it is
                assert set(content) == {"text/event-stream"}
                continue
            assert set(content) == {"application/json"}, (method, path)
            # a route whose handler has no entry in SCHEMAS and RESPONSES of
            # rest/response_schemas.py is documented without a schema
            assert "schema" in content["application/json"], (
                f"{method.upper()} {path}: add its handler ({op['operationId']}) to SCHEMAS and"
                " RESPONSES in src/waypost/rest/response_schemas.py"
            )
            ref = content["application/json"]["schema"]["$ref"]
            assert ref.removeprefix("#/components/schemas/") in schemas, (method, path, ref)
    assert set(response_schemas.RESPONSES) == {
        op["operationId"] for item in document["paths"].values() for op in item.values()
    } - {"event_stream"}


def test_response_schemas_are_valid_reachable_and_named_apart_from_requests() -> None:
    document = openapi.build(rest.TABLES)
    schemas = document["components"]["schemas"]
    for name in response_schemas.SCHEMAS:
        Draft202012Validator.check_schema(schemas[name])
        assert schemas[name]["title"] == name
    # each shape is used: reachable from some success response
    reached: set[str] = set()
    todo = set(response_schemas.RESPONSES.values())
    while todo:
        name = todo.pop()
        reached.add(name)
        refs = re.findall(r"#/components/schemas/(\w+)", repr(schemas[name]))
        todo |= set(refs) - reached
    assert reached == set(response_schemas.SCHEMAS)
    # the request models keep their own names (build refuses a clash)
    models = {m.__name__ for t in rest.TABLES for r in t.routes for m in (r.body, r.query) if m}
    assert not models & set(response_schemas.SCHEMAS)


# --- the scenario -----------------------------------------------------------------


async def review_outcome(service: Service, c: Conformance) -> None:
    """A lifecycle review request, and its outcome on the public listener."""
    rt = service.rt
    app = create_lifecycle_app(rt, WaypostTokenVerifier(rt))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://lifecycle.test") as client:
        lifecycle = Lifecycle(service, client)
        author = await lifecycle.member("author")
        reviewer = await lifecycle.member("reviewer")
        m, docs = with_docs(memo(), b"incident notes")
        assert (await author.register(m, docs)).status_code == 200
        options = {"profile": "standard", "reviewers": [reviewer.id]}
        r = await author.post(
            f"/v1/decisions/{m['id']}/review-requests", {"version": 1, "options": options}
        )
        assert r.status_code == 200, r.text
        request_id = r.json()["request_id"]
    body = {"disposition": "changes_requested", "rationale": "name the rollback owner"}
    outcome = c.ok(await reviewer.api.post(f"/api/v1/reviews/{request_id}/outcome", body))
    assert (outcome["request_id"], outcome["reviewer"], outcome["memo_id"]) == (
        request_id,
        reviewer.id,
        m["id"],
    )


async def sessions_and_projects(service: Service, human: Caller, c: Conformance) -> Caller:
    me = c.ok(await human.get("/api/v1/me"))
    assert me == {
        "principal": {"id": human.principal_id, "kind": "human", "name": "alice"},
        "session": None,
    }
    agent = await service.principal("agent", "bot")
    session = c.ok(await agent.post("/api/v1/sessions"))
    agent.session_id = session["id"]
    assert session["ended_at"] is None
    assert c.ok(await agent.get("/api/v1/me"))["session"] == session
    service.clock.advance(minutes=1)
    beat = c.ok(await agent.post(f"/api/v1/sessions/{session['id']}/heartbeat"))
    assert beat["expires_at"] > session["expires_at"]

    project = c.ok(await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"}))
    assert project["created_by"] == human.principal_id
    c.ok(await human.post("/api/v1/projects", {"id": "ops", "name": "Ops"}))
    listed = c.ok(await human.get("/api/v1/projects", limit=1))
    assert [p["id"] for p in listed["items"]] == ["demo"] and listed["next_cursor"]
    assert c.ok(await human.get(P)) == project

    assert c.ok(await human.get(f"{P}/policy"))["revision"] == 1
    delegated = {
        "rules": "Record a rollback owner.",
        "agent_rule_editing": True,
        "allow_relayed_human_answers": True,
        "provenance": "kickoff",
    }
    c.ok(await human.patch(f"{P}/policy", {"expected_revision": 1, **delegated}))
    rules = {"expected_revision": 2, "rules": "Record a rollback owner before migrations."}
    assert c.ok(await agent.patch(f"{P}/policy", rules))["updated_by"] == agent.principal_id
    history = c.ok(await human.get(f"{P}/policy/history"))["items"]
    assert [h["revision"] for h in history] == [3, 2, 1]
    assert (history[0]["actor_kind"], history[0]["actor_session_id"]) == ("agent", session["id"])
    return agent


async def tasks_and_knowledge(
    human: Caller, agent: Caller, c: Conformance
) -> tuple[dict[str, str], dict[str, str]]:
    """Tasks t1..t4 (t2 depends on t1, t3 reviews t1) and knowledge k1..k3."""
    body = {
        "title": "Migrate the billing table",
        "acceptance_criteria": ["rollback tested"],
        "priority": 5,
    }
    t1 = c.ok(await human.post(f"{P}/tasks", body))["id"]
    body = {"title": "Drop the old billing columns", "depends_on": [t1]}
    t2 = c.ok(await agent.post(f"{P}/tasks", body))["id"]
    body = {"title": "Review the billing migration", "kind": "review", "subject_task_id": t1}
    t3 = c.ok(await human.post(f"{P}/tasks", body))["id"]
    body = {"title": "Publish the release notes"}
    created = c.ok(await human.post(f"{P}/tasks", body, key="t4"))
    again = await human.post(f"{P}/tasks", body, key="t4")
    assert again.headers["Idempotent-Replayed"] == "true" and c.ok(again) == created
    t4 = created["id"]
    edited = c.ok(await human.patch(f"{P}/tasks/{t1}", {"expected_revision": 1, "priority": 7}))
    assert edited["revision"] == 2
    ready = c.ok(await human.get(f"{P}/tasks", ready="true"))["items"]
    assert {t["id"] for t in ready} == {t1, t3, t4}  # all made at one instant: order by id
    assert len(c.ok(await human.get(f"{P}/tasks", q="billing", limit=2))["items"]) == 2
    blocked = c.ok(await human.get(f"{P}/tasks/{t2}"))
    assert (blocked["ready"], blocked["blocked_by"]["dependencies"]) == (False, [t1])
    revisions = c.ok(await human.get(f"{P}/tasks/{t1}/revisions"))["items"]
    assert revisions[0]["changed_fields"] == ["priority"]

    body = {
        "kind": "lesson",
        "title": "Billing migrations need a rollback owner",
        "body": "The last one had none.",
        "tags": ["billing", "migrations"],
        "scope": {"task_ids": [t1], "components": ["billing"]},
        "provenance": {"summary": "incident review", "source_uri": "https://x.test/42"},
    }
    k1 = c.ok(await agent.post(K, body))
    assert k1["provenance"]["actor_session_id"] == agent.session_id
    body = {"kind": "fact", "title": "The billing table holds 40M rows", "body": "Counted."}
    k2 = c.ok(await human.post(K, body))
    body = {
        "kind": "rejected_approach",
        "title": "Online billing schema swaps",
        "body": "They lock for minutes.",
        "collection": "shared",
        "share_across_projects": True,
    }
    k3 = c.ok(await human.post("/api/v1/projects/ops/knowledge", body))
    k1 = c.ok(await agent.patch(f"{K}/{k1['id']}", correction(k1, status="validated")))
    k2 = c.ok(
        await human.patch(
            f"{K}/{k2['id']}", correction(k2, status="superseded", superseded_by_id=k1["id"])
        )
    )
    assert k2["superseded_by_id"] == k1["id"]
    body = {"expected_revision": 2, "useful": True, "comment": "saved us"}
    feedback = c.ok(await agent.post(f"{K}/{k1['id']}/feedback", body))
    assert feedback["actor_session_id"] == agent.session_id
    body = {"expected_revision": 1, "useful": False}
    feedback = c.ok(await human.post(f"{K}/{k3['id']}/feedback", body))
    assert (feedback["project_id"], feedback["comment"]) == ("ops", None)
    listed = c.ok(await human.get(K, include_shared="true"))["items"]
    assert {k["id"] for k in listed} == {k1["id"], k2["id"], k3["id"]}
    detail = c.ok(await human.get(f"{K}/{k1['id']}", limit=1))
    assert detail["history"]["next_cursor"] and detail["feedback"] == {"useful": 1, "not_useful": 0}
    tasks = {"t1": t1, "t2": t2, "t3": t3, "t4": t4}
    return tasks, {"k1": k1["id"], "k2": k2["id"], "k3": k3["id"]}


async def decisions(
    human: Caller, agent: Caller, tasks: dict[str, str], c: Conformance
) -> dict[str, str]:
    d1 = c.ok(await human.post(D, decision_body([tasks["t1"]])))["id"]
    body = decision_body([tasks["t2"]], question="May the old columns go?")
    d2 = c.ok(await agent.post(D, body))["id"]
    body = decision_body(
        [tasks["t3"]],
        question="Is a second reviewer needed?",
        required_actor="either",
        recommendation="Proceed",
        reversible=True,
    )
    d3 = c.ok(await human.post(D, body))["id"]
    assert len(c.ok(await human.get(D, status="pending"))["items"]) == 3
    allowed = c.ok(await human.post(f"{D}/{d1}/answer", answer_body(1)))
    assert (allowed["status"], allowed["work_allowed"]) == ("allowed", True)
    relay = {"prompt": "May the old columns go?", "response": "Yes, after the migration."}
    relayed = c.ok(await agent.post(f"{D}/{d2}/answer", answer_body(1, relay=relay)))
    answer = relayed["current"]["answer"]
    assert (answer["relay"], answer["authorized_by"], answer["relay_policy_revision"]) == (
        relay,
        human.principal_id,
        2,
    )
    body = {
        "expected_generation": 1,
        "rationale": "The columns feed a report.",
        "expires_at": "2026-12-31T00:00:00+00:00",
    }
    reopened = c.ok(await human.post(f"{D}/{d2}/reopen", body))
    assert (reopened["status"], reopened["generation"]) == ("pending", 2)
    assert reopened["current"]["expires_at"] == "2026-12-31T00:00:00.000Z"
    detail = c.ok(await human.get(f"{D}/{d2}"))
    assert [g["generation"] for g in detail["history"]["items"]] == [2, 1]
    return {"d1": d1, "d2": d2, "d3": d3}


async def workflow(
    service: Service, human: Caller, agent: Caller, t1: str, t4: str, c: Conformance
) -> None:
    task = f"{P}/tasks/{t1}"
    claimed = c.ok(await agent.post(f"{P}/claims"))  # the ready task of highest priority
    assert (claimed["task"]["id"], claimed["lease"]["session_id"]) == (t1, agent.session_id)
    c.ok(await agent.post(f"{task}/renew"))
    noted = c.ok(await agent.post(f"{task}/checkpoint", {"note": "copied half the rows"}))
    assert noted["checkpoint"]["task_id"] == t1
    released = c.ok(await agent.post(f"{task}/release"))
    assert (released["status"], released["lease"]) == ("open", None)
    c.ok(await agent.post(f"{P}/claims", {"task_id": t1}))
    service.clock.advance(minutes=16)  # the lease and the agent's session lapse
    relief = await service.principal("agent", "relief")
    relief.session_id = c.ok(await relief.post("/api/v1/sessions"))["id"]
    recovered = c.ok(await relief.post(f"{task}/recover"))
    assert recovered["previous_lease"]["owner_id"] == agent.principal_id
    assert [n["note"] for n in recovered["checkpoints"]] == ["copied half the rows"]
    lesson = {
        "kind": "lesson",
        "title": "Copy billing rows in batches of 10k",
        "body": "Larger batches stalled replication.",
        "tags": ["billing"],
    }
    body = {"summary": "Migrated with a tested rollback.", "lessons": [lesson]}
    submitted = c.ok(await relief.post(f"{task}/submit", body))
    provenance = submitted["lessons"][0]["provenance"]
    assert (provenance["source_task_id"], provenance["source_submission_id"]) == (
        t1,
        submitted["submission"]["id"],
    )
    ended = c.ok(await relief.post(f"/api/v1/sessions/{relief.session_id}/end"))
    assert ended["ended_at"] == service.clock.iso()
    assert c.ok(await human.post(f"{task}/complete"))["status"] == "done"
    assert len(c.ok(await human.get(f"{task}/checkpoints"))["items"]) == 1
    assert len(c.ok(await human.get(f"{task}/submissions"))["items"]) == 1

    publish = f"{P}/tasks/{t4}/publication"
    held = c.ok(await human.post(f"{publish}/prepare"))["publication"]
    assert (held["holder_id"], held["result"]) == (human.principal_id, None)
    body = {"outcome": "succeeded", "detail": "release notes v1.2 are out"}
    result = c.ok(await human.post(f"{publish}/result", body))["publication"]["result"]
    assert result["outcome"] == "succeeded"
    assert c.ok(await human.post(f"{publish}/finalize"))["publication"] is None


async def context_and_digest(
    service: Service, human: Caller, ids: dict[str, str], c: Conformance
) -> None:
    packet = c.ok(await human.get(f"{P}/context", q="billing"))
    assert {i["type"] for i in packet["items"]} == {"decision", "task", "knowledge"}
    assert {i["id"] for i in packet["items"][:2]} == {ids["d2"], ids["d3"]}  # decisions first
    small = c.ok(await human.get(f"{P}/context", q="billing", limit=1))
    assert small["truncated"] and small["next_actions"]

    digest = c.ok(await human.get(f"{P}/digest"))
    assert {d["id"] for d in digest["pending_decisions"]} == {ids["d2"], ids["d3"]}
    assert {t["id"] for t in digest["blocked_tasks"]} == {ids["t2"], ids["t3"]}
    service.clock.advance(hours=19)
    soon = c.ok(await human.get(f"{P}/digest"))["timing_out_soon"]
    assert [d["id"] for d in soon] == [ids["d3"]]
    service.clock.advance(hours=6)
    assert (await sweep.run_once(service.rt))["decisions_timed_out"] == 1
    proceeded = c.ok(await human.get(f"{P}/digest"))["proceeded_by_timeout"]
    assert [d["current"]["answer"]["timed_out"] for d in proceeded] == [True]


async def events(service: Service, human: Caller, c: Conformance) -> None:
    """The event list, and the same events on the stream (each an `Event`)."""
    listed = c.ok(await human.get(f"{P}/events", after=0, limit=200))["items"]
    assert {e["type"] for e in listed} == set(response_schemas.EVENT_TYPES)
    stream = openapi.STREAM_PATH.replace("{project}", "demo")
    async with (
        running(service) as base,
        httpx.AsyncClient(base_url=base, timeout=10) as client,
        client.stream("GET", stream, params={"after": 0}, headers=human.headers()) as r,
    ):
        assert r.status_code == 200
        received = sse_events(r)
        streamed = [(await next_data_event(received)).json() for _ in listed]
    assert streamed == listed
    for event in streamed:
        c.conforms("Event", event)
    c.seen.add(("GET", openapi.STREAM_PATH))


async def test_every_operation_answers_as_its_schema_says(service: Service, human: Caller) -> None:
    r = await human.get("/api/v1/openapi.json")
    assert r.status_code == 200
    c = Conformance(r.json())
    await review_outcome(service, c)
    agent = await sessions_and_projects(service, human, c)
    tasks, knowledge = await tasks_and_knowledge(human, agent, c)
    ids = {**tasks, **knowledge, **await decisions(human, agent, tasks, c)}
    await workflow(service, human, agent, tasks["t1"], tasks["t4"], c)
    await context_and_digest(service, human, ids, c)
    await events(service, human, c)
    unseen = operations(c.document) - c.seen
    assert not unseen, f"call these in one of this test's scenarios above: {sorted(unseen)}"
    assert c.seen == operations(c.document)


# --- the schemas refuse what the server never sends ---------------------------------


async def test_the_schemas_are_strict(human: Caller, project: str) -> None:
    document = openapi.build(rest.TABLES)
    c = Conformance(document)
    task = c.ok(await human.post(f"{P}/tasks", {"title": "Write the parser"}))
    decision = c.ok(await human.post(D, decision_body([task["id"]])))
    record = c.ok(await human.post(K, {"kind": "fact", "title": "The parser", "body": ""}))
    packet = c.ok(await human.get(f"{P}/context", q="parser"))
    wrong: list[tuple[str, dict[str, Any]]] = [
        ("Task", {**task, "owner": None}),  # no other key
        ("Task", {k: v for k, v in task.items() if k != "lease"}),  # every key
        ("Task", {**task, "status": "paused"}),
        ("Task", {**task, "created_at": "2026-11-29T18:00:00Z"}),  # milliseconds, always
        ("Task", {**task, "blocked_by": {**task["blocked_by"], "decisions": [1]}}),
        ("Decision", {**decision, "work_allowed": True}),  # pending blocks
        ("Decision", {**decision, "current": {**decision["current"], "affected": []}}),
        ("Knowledge", {**record, "share_across_projects": True}),  # a project record
        ("Knowledge", {**record, "superseded_by_id": task["id"]}),  # observed
        ("ContextPacket", {**packet, "truncated": True, "next_actions": []}),
        ("ContextPacket", {**packet, "items": [{**record, "type": "task"}]}),
    ]
    for name, body in wrong:
        check = validator(document, ["components", "schemas", name])
        assert not check.is_valid(body), (name, body)
