"""The OpenAPI document states what the server enforces where JSON Schema
can say it: distinct options, dependencies, tags and scope values; at least
one field in a PATCH; integers within 64 bits; RFC 3339 expiries; searches
with a term; the model of each submitted lesson."""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import Caller
from tests.decisions_support import decision_body
from tests.tasks_support import make_task
from waypost import rest
from waypost.rest import openapi, response_schemas

SCHEMAS: dict[str, Any] = openapi.build(rest.TABLES)["components"]["schemas"]


def test_arrays_of_distinct_values_say_unique_items() -> None:
    assert SCHEMAS["DecisionCreate"]["properties"]["options"]["uniqueItems"] is True
    assert SCHEMAS["TaskCreate"]["properties"]["depends_on"]["uniqueItems"] is True
    assert SCHEMAS["TaskPatch"]["properties"]["depends_on"]["uniqueItems"] is True
    assert SCHEMAS["KnowledgeCreate"]["properties"]["tags"]["uniqueItems"] is True
    for dimension in ("task_ids", "components", "environments", "versions"):
        assert SCHEMAS["ScopeInput"]["properties"][dimension]["uniqueItems"] is True


def test_patches_need_a_field_besides_the_revision() -> None:
    """Said as counts of properties (closed objects), not as an `anyOf` of one
    `required` per field, which client generators read as a union of types
    (the PATCH bodies came out as `Any`: codegenaudit)."""
    from jsonschema import Draft202012Validator

    for name in ("PolicyPatch", "TaskPatch"):
        schema = SCHEMAS[name]
        assert "anyOf" not in schema and schema["additionalProperties"] is False
        counting = Draft202012Validator(
            {k: v for k, v in schema.items() if k in ("required", "minProperties", "if", "then")}
        )
        fields = set(schema["properties"]) - {"expected_revision", "provenance"}
        for field in fields:
            assert counting.is_valid({"expected_revision": 1, field: 0}), (name, field)
            if "provenance" in schema["properties"]:
                assert counting.is_valid({"expected_revision": 1, "provenance": "p", field: 0})
        assert not counting.is_valid({"expected_revision": 1})
        if "provenance" in schema["properties"]:
            assert not counting.is_valid({"expected_revision": 1, "provenance": "p"})
    assert "provenance" in SCHEMAS["PolicyPatch"]["properties"]


def test_a_new_record_cannot_be_superseded() -> None:
    """The server refuses a record created `superseded`; the document listed it."""
    for name in ("KnowledgeCreate", "SubmissionLessonInput"):
        status = SCHEMAS[name]["properties"]["status"]
        assert sorted(status["enum"]) == ["deprecated", "observed", "validated"], name
        assert status["default"] == "observed"


async def test_a_record_created_superseded_is_refused(human: Caller, project: str) -> None:
    body = {"kind": "fact", "title": "t", "body": "b", "status": "superseded"}
    r = await human.post("/api/v1/projects/demo/knowledge", body)
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "status"
    assert "superseded_by_id" in r.json()["error"]["message"]


def test_revisions_are_integers() -> None:
    for name in ("PolicyPatch", "TaskPatch", "KnowledgeCorrect"):
        prop = SCHEMAS[name]["properties"]["expected_revision"]
        assert prop["type"] == "integer" and prop["minimum"] == 1


async def test_the_server_refuses_what_the_document_rules_out(human: Caller, project: str) -> None:
    path = "/api/v1/projects/demo"
    r = await human.patch(f"{path}/policy", {"expected_revision": 1})
    assert r.status_code == 400  # no field to change
    r = await human.patch(f"{path}/policy", {"expected_revision": 1.0, "rules": "x"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "expected_revision"
    task = await make_task(human)
    decision = {"question": "Q?", "options": ["A", "A"], "rationale": "r",
                "required_actor": "human", "task_ids": [task["id"]],
                "environment": "prod"}  # fmt: skip
    r = await human.post(f"{path}/decisions", decision)
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "options[1]"


def test_body_integers_stay_within_64_bits_and_say_they_take_no_fraction() -> None:
    """JSON Schema's integer admits 1.0 and any size; the strict decoder refuses
    both ("integer out of the 64-bit range")."""
    for name, field in (("PolicyPatch", "expected_revision"), ("TaskCreate", "priority"),
                        ("DecisionAnswer", "expected_generation")):  # fmt: skip
        prop = SCHEMAS[name]["properties"][field]
        assert prop["maximum"] <= 2**63 - 1 and prop["minimum"] >= -(2**63)
        assert "fraction" in prop["description"]


def test_expiries_are_date_times_and_searches_need_a_term() -> None:
    for name in ("DecisionCreate", "DecisionReopen"):
        [text] = [
            b for b in SCHEMAS[name]["properties"]["expires_at"]["anyOf"] if b["type"] != "null"
        ]
        assert text["format"] == "date-time"
    assert SCHEMAS["ContextQuery"]["properties"]["q"]["minLength"] == 1
    for name in ("TaskListQuery", "KnowledgeListQuery"):
        [text] = [b for b in SCHEMAS[name]["properties"]["q"]["anyOf"] if b["type"] != "null"]
        assert text["minLength"] == 1 and text["maxLength"] == 1024
    for name in ("ContextQuery", "TaskListQuery", "KnowledgeListQuery"):
        # JSON Schema's length is in characters; the bound is in bytes
        assert "1,024 bytes of UTF-8" in SCHEMAS[name]["properties"]["q"]["description"]


def test_each_submitted_lesson_has_the_lesson_model() -> None:
    """`lessons` was an array of any objects; the submit refuses all but lessons."""
    items = SCHEMAS["SubmitBody"]["properties"]["lessons"]["items"]
    assert items == {"$ref": "#/components/schemas/SubmissionLessonInput"}
    assert {"kind", "title", "body"} <= set(SCHEMAS["SubmissionLessonInput"]["required"])


async def test_the_documented_bounds_are_the_servers(human: Caller, project: str) -> None:
    """What the document now says is what the server does at the edges."""
    task = await make_task(human)
    r = await human.patch(
        f"/api/v1/projects/{project}/tasks/{task['id']}",
        {"expected_revision": 2**63, "title": "x"},
        key="big",
    )
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "expected_revision"
    blank = await human.get(f"/api/v1/projects/{project}/tasks", q="   ")
    assert blank.status_code == 400 and blank.json()["error"]["details"]["field"] == "q"
    r = await human.post(
        f"/api/v1/projects/{project}/decisions",
        decision_body([task["id"]], expires_at="tomorrow"),
        key="when",
    )
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "expires_at"


def test_text_measured_in_bytes_states_its_character_bound() -> None:
    """The server refuses rules, policy provenance and knowledge bodies past
    their byte bounds; the document let any length through."""
    bounds = {("PolicyPatch", "rules"): 65536, ("PolicyPatch", "provenance"): 4096,
              ("KnowledgeCreate", "body"): 65536, ("KnowledgeCorrect", "body"): 65536,
              ("SubmissionLessonInput", "body"): 65536, ("TaskCreate", "description"): 65536,
              ("TaskPatch", "description"): 65536, ("CheckpointBody", "note"): 65536,
              ("SubmitBody", "summary"): 65536}  # fmt: skip
    for (model, field), most in bounds.items():
        prop = SCHEMAS[model]["properties"][field]
        assert prop["maxLength"] == most and "UTF-8" in prop["description"], (model, field)


async def test_the_byte_bounds_and_the_name_pattern_are_the_servers(
    human: Caller, project: str
) -> None:
    """One character past each stated bound is refused naming the field; a
    name the stated pattern refuses is refused by the server, one it
    admits is taken."""
    base = f"/api/v1/projects/{project}"
    over = {"expected_revision": 1, "rules": "a" * 65537}
    r = await human.patch(f"{base}/policy", over, key="rules")
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "rules"
    lesson = {"kind": "lesson", "title": "t", "body": "a" * 65537}
    r = await human.post(f"{base}/knowledge", lesson, key="body")
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "body"
    pattern = re.compile(SCHEMAS["ProjectCreate"]["properties"]["name"]["pattern"])
    cases = (("a\tb", False), ("a\u2028b", False), ("Ünïcode name", True))
    for i, (name, taken) in enumerate(cases):
        assert bool(pattern.search(name)) is taken
        r = await human.post("/api/v1/projects", {"id": "named", "name": name}, key=f"n{i}")
        assert (r.status_code == 201) is taken, (name, r.text)


def test_a_body_of_optional_fields_may_be_left_out() -> None:
    """A claim without a body is served (`{}` is read); the document said a
    body was required."""
    claims = openapi.build(rest.TABLES)["paths"]["/api/v1/projects/{project}/claims"]["post"]
    assert claims["requestBody"]["required"] is False
    created = openapi.build(rest.TABLES)["paths"]["/api/v1/projects"]["post"]
    assert created["requestBody"]["required"] is True


def _free_text(schema: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Each string schema of a body's property that has no enum, format or
    pattern of its own from msgspec, with where it is."""
    found: list[tuple[str, dict[str, Any]]] = []
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") == "string" and not {"enum", "format"} & set(branch):
            found.append((where, branch))
        if isinstance(branch.get("items"), dict):
            found += _free_text(branch["items"], f"{where}[]")
    return found


def test_no_body_text_may_hold_nul_by_the_document() -> None:
    """docs/api.md: text holds no NUL in any string of a mutation's body; the
    document let such a body through (a client validating against it sent
    one the server refused: schemaaudit)."""
    queries = {r.query.__name__ for t in rest.TABLES for r in t.routes if r.query is not None}
    answers = set(response_schemas.components())
    checked = 0
    for name, schema in SCHEMAS.items():
        if name in queries | answers or "properties" not in schema:
            continue
        for prop_name, prop in schema["properties"].items():
            for where, text in _free_text(prop, f"{name}.{prop_name}"):
                pattern = re.compile(text["pattern"])
                assert pattern.search("a\x00b") is None, where
                if text["pattern"] == openapi.NUL_FREE_PATTERN:  # text of many lines
                    assert pattern.search("a b\nc\u00e9"), where
                checked += 1
    assert checked > 40
    # and the query parameters the server refuses it in: `q`, the context filters
    for name in ("q", "task_id", "component", "environment", "version"):
        [text] = _free_text(SCHEMAS["ContextQuery"]["properties"][name], name)
        assert re.compile(text[1]["pattern"]).search("a\x00") is None, name


async def test_a_body_with_nul_is_refused_as_the_document_says(human: Caller, project: str) -> None:
    title = SCHEMAS["TaskCreate"]["properties"]["title"]
    assert re.search(title["pattern"], "Ship\x00it") is None
    r = await human.post("/api/v1/projects/demo/tasks", {"title": "Ship\x00it"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"] == "title must not hold NUL (U+0000)"
    r = await human.get("/api/v1/projects/demo/context", q="ship\x00")
    assert r.json()["error"]["message"] == "q must not hold NUL (U+0000)"


def test_query_parameters_promise_no_null() -> None:
    """A query string cannot carry `null` (`?limit=null` and `?limit=` are
    refused); the parameters said `anyOf [..., null]` with `"default": null`
    (schemaaudit)."""
    document = openapi.build(rest.TABLES)
    parameters = [
        p
        for operations in document["paths"].values()
        for operation in operations.values()
        for p in operation.get("parameters", [])
        if p["in"] == "query"
    ]
    assert len(parameters) > 30
    for parameter in parameters:
        schema = parameter["schema"]
        assert "null" not in str(schema) and schema.get("default", 0) is not None, parameter
    limits = [p["schema"] for p in parameters if p["name"] == "limit"]
    assert limits and all(s["type"] == "integer" and s["minimum"] == 1 for s in limits)


async def test_a_null_query_value_is_refused(human: Caller, project: str) -> None:
    for query in ({"limit": "null"}, {"limit": ""}, {"ready": "null"}):
        r = await human.get("/api/v1/projects/demo/tasks", **query)
        assert r.status_code == 400, (query, r.text)
