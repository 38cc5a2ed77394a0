"""Knowledge create: shape, server-filled provenance, every limit and refusal."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import create, error_of, kpath, make_task, new_body, raw


async def test_create_returns_the_flat_object_with_revision_1(human: Caller, project: str) -> None:
    r = await human.post(kpath(project), new_body(tags=["ci"], applicability="on linux runners"))
    assert r.status_code == 201, r.text
    record = r.json()
    assert set(record) == {
        "id", "project_id", "kind", "title", "body", "status", "scope", "tags", "applicability",
        "provenance", "collection", "share_across_projects", "superseded_by_id", "revision",
        "created_at", "updated_at",
    }  # fmt: skip
    assert record["project_id"] == project and record["revision"] == 1
    assert record["status"] == "observed" and record["collection"] == "project"
    assert record["share_across_projects"] is False and record["superseded_by_id"] is None
    assert record["scope"] == {"task_ids": [], "components": [], "environments": [], "versions": []}
    assert record["tags"] == ["ci"] and record["applicability"] == "on linux runners"


async def test_create_fills_actor_session_and_service_time(service: Service, project: str) -> None:
    agent = await service.agent()
    service.clock.advance(minutes=3)
    record = await create(agent, project, provenance={"summary": "seen twice"})
    assert record["provenance"] == {
        "summary": "seen twice",
        "source_uri": None,
        "source_task_id": None,
        "source_submission_id": None,
        "actor_id": agent.principal_id,
        "actor_session_id": agent.session_id,
        "recorded_at": service.clock.iso(),
    }
    assert record["created_at"] == record["updated_at"] == service.clock.iso()


async def test_create_by_an_agent_without_a_session_records_no_session(
    service: Service, project: str
) -> None:
    agent = await service.principal("agent")
    record = await create(agent, project)
    assert record["provenance"]["actor_session_id"] is None


async def test_create_refuses_client_supplied_actor_and_time(human: Caller, project: str) -> None:
    for name in ("actor_id", "actor_session_id", "recorded_at"):
        r = await human.post(kpath(project), new_body(provenance={name: "x"}))
        assert error_of(r) == (400, "invalid_request", f"provenance.{name}")


async def test_create_writes_one_event_and_a_replay_writes_none(
    human: Caller, project: str
) -> None:
    first = await human.post(kpath(project), new_body(), key="same-key")
    again = await human.post(kpath(project), new_body(), key="same-key")
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    events = (await human.get(f"/api/v1/projects/{project}/events")).json()["items"]
    created = [e for e in events if e["type"] == "knowledge.created"]
    assert [e["subject_id"] for e in created] == [first.json()["id"]]
    # its title, which a list shows, without a read of the record (dashdrift)
    assert created[0]["data"] == {
        "revision": 1, "title": first.json()["title"], "kind": "lesson", "status": "observed",
        "collection": "project",
    }  # fmt: skip
    listed = (await human.get(kpath(project))).json()["items"]
    assert len(listed) == 1


async def test_create_needs_an_idempotency_key(human: Caller, project: str) -> None:
    r = await human.client.post(kpath(project), json=new_body(), headers=human.headers())
    assert error_of(r) == (400, "invalid_request", "Idempotency-Key")


async def test_create_in_an_unknown_project_is_not_found(human: Caller) -> None:
    r = await human.post(kpath("nope"), new_body())
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("kind", ["lesson", "fact", "rejected_approach", "checkpoint"])
async def test_create_accepts_each_kind(human: Caller, project: str, kind: str) -> None:
    assert (await create(human, project, kind=kind))["kind"] == kind


@pytest.mark.parametrize("status", ["observed", "validated", "deprecated"])
async def test_create_accepts_each_status_but_superseded(
    human: Caller, project: str, status: str
) -> None:
    assert (await create(human, project, status=status))["status"] == status


async def test_create_refuses_status_superseded(human: Caller, project: str) -> None:
    r = await human.post(kpath(project), new_body(status="superseded"))
    assert error_of(r) == (400, "invalid_request", "status")


async def test_create_refuses_superseded_by_id(human: Caller, project: str) -> None:
    r = await human.post(kpath(project), new_body(superseded_by_id="kn_x"))
    assert error_of(r) == (400, "invalid_request", "superseded_by_id")


async def test_shared_collection_needs_the_explicit_opt_in(human: Caller, project: str) -> None:
    r = await human.post(kpath(project), new_body(collection="shared"))
    assert error_of(r) == (400, "invalid_request", "share_across_projects")
    r = await human.post(kpath(project), new_body(collection="shared", share_across_projects=False))
    assert error_of(r) == (400, "invalid_request", "share_across_projects")
    record = await create(human, project, collection="shared", share_across_projects=True)
    assert record["collection"] == "shared" and record["share_across_projects"] is True


async def test_project_collection_refuses_the_shared_opt_in(human: Caller, project: str) -> None:
    r = await human.post(kpath(project), new_body(share_across_projects=True))
    assert error_of(r) == (400, "invalid_request", "share_across_projects")
    r = await human.post(kpath(project), new_body(collection="project", share_across_projects=True))
    assert error_of(r) == (400, "invalid_request", "share_across_projects")


def _many(n: int, prefix: str = "v") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


# (fields to set, refused field); each row is one limit or rule of section 6
# or one of the bounds docs/knowledge.md fixes.
REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"kind": "opinion"}, "kind"),
    ({"status": "current"}, "status"),
    ({"collection": "global"}, "collection"),
    ({"title": "x" * 201}, "title"),
    ({"title": ""}, "title"),
    ({"title": "   "}, "title"),
    ({"title": "\u200b\ufeff\u2060"}, "title"),  # zero-width space, BOM, word joiner
    ({"title": "\u3164"}, "title"),  # the Hangul filler, drawn blank
    ({"title": 7}, "title"),
    ({"body": "x" * (64 * 1024 + 1)}, "body"),
    ({"body": "é" * (32 * 1024 + 1)}, "body"),  # 64 KiB + 2 bytes of UTF-8
    ({"tags": _many(33)}, "tags"),
    ({"tags": ["ok", "x" * 65]}, "tags[1]"),
    ({"tags": ["ok", ""]}, "tags[1]"),
    ({"tags": ["a", "b", "a"]}, "tags[2]"),
    ({"tags": ["ok", "  "]}, "tags[1]"),
    ({"tags": ["caf\u00e9", "cafe\u0301"]}, "tags[1]"),  # composed, decomposed: one tag
    ({"tags": ["a", "a\u200b"]}, "tags[1]"),
    ({"tags": ["next\u0085line"]}, "tags[0]"),  # NEL, a C1 control
    ({"tags": ["csi\u009b2J"]}, "tags[0]"),
    ({"tags": ["para\u2029graph"]}, "tags[0]"),
    # matched exactly by the list's `tag` filter, as a scope value by the
    # packet's: an end no reader sees kept it from every `tag=prod` page
    ({"tags": ["prod "]}, "tags[0]"),
    ({"tags": ["ok", "\u200bprod"]}, "tags[1]"),
    ({"tags": ["\u200b"]}, "tags[0]"),
    ({"tags": ["ok", "\u00a0"]}, "tags[1]"),
    ({"tags": ["p\u202edorp"]}, "tags[0]"),  # drawn `pprod`, holds `pdorp`
    ({"scope": {"components": ["a\u202dpi"]}}, "scope.components[0]"),  # an override inside
    ({"scope": {"components": ["caf\u00e9", "cafe\u0301"]}}, "scope.components[1]"),
    ({"scope": {"components": _many(101)}}, "scope.components"),
    ({"scope": {"environments": _many(101)}}, "scope.environments"),
    ({"scope": {"versions": _many(101)}}, "scope.versions"),
    ({"scope": {"task_ids": _many(101, "task_")}}, "scope.task_ids"),
    ({"scope": {"components": ["api", "x" * 201]}}, "scope.components[1]"),
    ({"scope": {"versions": ["1.0", ""]}}, "scope.versions[1]"),
    ({"scope": {"environments": ["prod", "prod"]}}, "scope.environments[1]"),
    # matched exactly by the context filters: a value that shows nothing, or
    # has a space no reader sees, was kept from every packet asking for it
    ({"scope": {"environments": ["prod "]}}, "scope.environments[0]"),
    ({"scope": {"environments": ["ok", "\u00a0prod"]}}, "scope.environments[1]"),
    ({"scope": {"components": [" "]}}, "scope.components[0]"),
    ({"scope": {"components": ["\u200b"]}}, "scope.components[0]"),
    ({"scope": {"versions": ["1.0\n2.0"]}}, "scope.versions[0]"),
    ({"scope": {"versions": ["1.0\t"]}}, "scope.versions[0]"),
    ({"scope": {"environments": ["prod\u200b"]}}, "scope.environments[0]"),  # zero-width space
    ({"scope": {"environments": ["\u202eprod"]}}, "scope.environments[0]"),  # a bidi control
    ({"scope": {"environments": ["prod\u00ad"]}}, "scope.environments[0]"),  # a soft hyphen
    ({"scope": {"environments": ["prod\u3164"]}}, "scope.environments[0]"),  # drawn blank
    # a version is a scope value as an environment is (docs/knowledge.md)
    ({"scope": {"versions": ["2.1 "]}}, "scope.versions[0]"),
    ({"scope": {"versions": ["2.0", "\u200b2.1"]}}, "scope.versions[1]"),
    ({"scope": {"versions": ["2\u202e1"]}}, "scope.versions[0]"),
    ({"scope": {"components": ["api\u00a0"]}}, "scope.components[0]"),
    ({"scope": {"task_ids": ["ok", "not a task id"]}}, "scope.task_ids[1]"),
    ({"scope": {"regions": []}}, "scope.regions"),
    ({"applicability": "x" * 4097}, "applicability"),
    ({"provenance": {"summary": "x" * 4097}}, "provenance.summary"),
    ({"provenance": {"source_uri": "x" * 2049}}, "provenance.source_uri"),
    ({"provenance": {"source_uri": ""}}, "provenance.source_uri"),
    ({"provenance": {"source_task_id": "bad id!"}}, "provenance.source_task_id"),
    ({"share_across_projects": "yes"}, "share_across_projects"),
    ({"revision": 3}, "revision"),
]


@pytest.mark.parametrize(("fields", "field"), REFUSALS)
async def test_create_refuses_out_of_bounds_fields(
    service: Service, human: Caller, project: str, fields: dict[str, Any], field: str
) -> None:
    r = await human.post(kpath(project), new_body(**fields))
    assert error_of(r) == (400, "invalid_request", field), r.text
    with raw(service.db_path) as conn:
        assert conn.execute("SELECT count(*) FROM knowledge").fetchone()[0] == 0


async def test_create_refuses_missing_required_fields(human: Caller, project: str) -> None:
    for name in ("kind", "title", "body"):
        body = new_body()
        del body[name]
        r = await human.post(kpath(project), body)
        assert error_of(r) == (400, "invalid_request", name)


async def test_create_accepts_every_limit_exactly(human: Caller, project: str) -> None:
    record = await create(
        human,
        project,
        title="t" * 200,
        body="é" * (32 * 1024),  # exactly 64 KiB of UTF-8
        tags=[f"{i:02d}" + "x" * 62 for i in range(32)],
        scope={
            "components": [f"c{i}" for i in range(100)],
            "environments": [f"e{i}".ljust(200, "e") for i in range(100)],
            "versions": [f"v{i}" for i in range(100)],
        },
        applicability="a" * 4096,
        provenance={"summary": "s" * 4096, "source_uri": "u" * 2048},
    )
    assert len(record["tags"]) == 32 and len(record["scope"]["components"]) == 100
    assert len(record["body"].encode()) == 64 * 1024


async def test_scope_values_keep_inner_spaces_and_any_script(human: Caller, project: str) -> None:
    scope = {
        "task_ids": [],
        "components": ["eu west", "café", "日本"],
        "environments": ["prod"],
        "versions": ["cafe\u0301"],
    }  # fmt: skip  (a combining mark last shows)
    assert (await create(human, project, scope=scope))["scope"] == scope


async def test_tags_keep_inner_spaces_any_script_and_direction_marks(
    human: Caller, project: str
) -> None:
    """The label rules refuse the ends and the overrides, nothing a tag in
    another script needs: a right-to-left word, a mark or isolate inside, a
    combining mark or an emoji's variation selector last."""
    hebrew = "\u05e9\u05dc\u05d5\u05dd"  # shalom
    tags = [
        "needs review",
        "ملف",
        "a\u200fb",
        f"x \u2067{hebrew}\u2069 y",
        "cafe\u0301",
        "ok \u26a0\ufe0f",
    ]
    assert (await create(human, project, tags=tags))["tags"] == tags


async def test_create_refuses_a_task_that_does_not_exist(human: Caller, project: str) -> None:
    r = await human.post(kpath(project), new_body(scope={"task_ids": ["task_missing"]}))
    assert error_of(r) == (400, "invalid_request", "scope.task_ids[0]")
    r = await human.post(kpath(project), new_body(provenance={"source_task_id": "task_missing"}))
    assert error_of(r) == (400, "invalid_request", "provenance.source_task_id")


async def test_create_refuses_an_unknown_source_submission(human: Caller, project: str) -> None:
    r = await human.post(kpath(project), new_body(provenance={"source_submission_id": "sub_x"}))
    assert error_of(r) == (400, "invalid_request", "provenance.source_submission_id")


async def test_a_refused_create_writes_no_event_and_its_key_can_be_retried(
    human: Caller, project: str
) -> None:
    r = await human.post(kpath(project), new_body(title=""), key="retry-me")
    assert error_of(r) == (400, "invalid_request", "title")
    r = await human.post(kpath(project), new_body(), key="retry-me")
    assert r.status_code == 201 and "Idempotent-Replayed" not in r.headers
    events = (await human.get(f"/api/v1/projects/{project}/events")).json()["items"]
    assert [e["type"] for e in events if e["type"].startswith("knowledge.")] == [
        "knowledge.created"
    ]


async def test_create_refuses_a_task_named_twice_in_its_scope(
    service: Service, human: Caller, project: str
) -> None:
    """docs/knowledge.md: `scope.task_ids`, no duplicates."""
    task_id = await make_task(human, project)
    r = await human.post(kpath(project), new_body(scope={"task_ids": [task_id, task_id]}))
    assert error_of(r) == (400, "invalid_request", "scope.task_ids[1]"), r.text
    with raw(service.db_path) as conn:
        assert conn.execute("SELECT count(*) FROM knowledge").fetchone()[0] == 0
    assert (await create(human, project, scope={"task_ids": [task_id]}))["scope"]["task_ids"] == [
        task_id
    ]
