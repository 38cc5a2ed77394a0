"""The tag label rules (docs/knowledge.md): every way in refuses a tag with an
unseen end or a bidi override, and a tag stored before the rules is still
found by the list's exact `tag` filter until its record is next corrected."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create, error_of, kpath, raw
from tests.test_knowledge_graphql import CREATE, create_input
from tests.test_knowledge_lessons import claimed, lesson, submit


async def _ids(human: Caller, project: str, tag: str) -> set[str]:
    r = await human.get(kpath(project), tag=tag)
    assert r.status_code == 200, r.text
    return {item["id"] for item in r.json()["items"]}


@pytest.mark.parametrize("stored", ["prod ", "\u200bprod", "\u202edorp"])
async def test_a_tag_stored_before_the_label_rules_is_found_by_its_exact_tag(
    service: Service, human: Caller, project: str, stored: str
) -> None:
    """docs/knowledge.md and docs/console.md: `the tag filter still finds it
    until then`; a filter refusing what no new record can hold would hide it."""
    record = await create(human, project, tags=["ok"])
    with raw(service.db_path) as conn:  # as an earlier build left the row
        conn.execute(
            "UPDATE knowledge SET tags = ? WHERE id = ?", (json.dumps(["ok", stored]), record["id"])
        )
    assert await _ids(human, project, stored) == {record["id"]}
    assert await _ids(human, project, "prod") == set()
    legacy = (await human.get(kpath(project, record["id"]))).json()
    assert legacy["tags"] == ["ok", stored]
    # a correction replaces the tags whole: it keeps to today's rules
    r = await human.patch(kpath(project, record["id"]), correction(legacy, title="again"))
    assert error_of(r) == (400, "invalid_request", "tags[1]")
    r = await human.patch(kpath(project, record["id"]), correction(legacy, tags=["ok", "prod"]))
    assert r.status_code == 200, r.text
    assert await _ids(human, project, stored) == set()
    assert await _ids(human, project, "prod") == {record["id"]}


async def test_a_submission_lesson_keeps_to_the_tag_rules(
    service: Service, human: Caller, project: str
) -> None:
    agent, task_id = await claimed(service, human, project)
    r = await submit(agent, project, task_id, [lesson(), lesson(tags=["ok", "prod\u202c"])])
    assert error_of(r) == (400, "invalid_request", "lessons[1].tags[1]"), r.text
    r = await submit(agent, project, task_id, [lesson(tags=[" prod"])])
    assert error_of(r) == (400, "invalid_request", "lessons[0].tags[0]"), r.text


async def test_graphql_create_keeps_to_the_tag_rules(human: Caller, project: str) -> None:
    for n, tag in enumerate(["prod\u00a0", "\ufeffprod", "a\u202ab"]):
        data = await human.gql(CREATE, {"input": create_input(f"g{n}", tags=["ok", tag])})
        errors = data["data"]["knowledgeCreate"]["userErrors"]
        assert [(e["code"], e["field"]) for e in errors] == [("invalid_request", "tags[1]")], data
