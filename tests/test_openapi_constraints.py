"""The OpenAPI document states what the server enforces where JSON Schema
can say it: distinct options, dependencies, tags and scope values; at least
one field in a PATCH; integer revisions."""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller
from tests.tasks_support import make_task
from waypost import rest
from waypost.rest import openapi

SCHEMAS: dict[str, Any] = openapi.build(rest.TABLES)["components"]["schemas"]


def test_arrays_of_distinct_values_say_unique_items() -> None:
    assert SCHEMAS["DecisionCreate"]["properties"]["options"]["uniqueItems"] is True
    assert SCHEMAS["TaskCreate"]["properties"]["depends_on"]["uniqueItems"] is True
    assert SCHEMAS["TaskPatch"]["properties"]["depends_on"]["uniqueItems"] is True
    assert SCHEMAS["KnowledgeCreate"]["properties"]["tags"]["uniqueItems"] is True
    for dimension in ("task_ids", "components", "environments", "versions"):
        assert SCHEMAS["ScopeInput"]["properties"][dimension]["uniqueItems"] is True


def test_patches_need_a_field_besides_the_revision() -> None:
    for name in ("PolicyPatch", "TaskPatch"):
        schema = SCHEMAS[name]
        assert schema["minProperties"] == 2
        named = {req for alt in schema["anyOf"] for req in alt["required"]}
        assert "expected_revision" not in named
        assert named == set(schema["properties"]) - {"expected_revision", "provenance"}


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
