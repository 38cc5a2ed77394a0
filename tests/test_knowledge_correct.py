"""Knowledge corrections: complete content under expected_revision, new immutable revisions."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import (
    correction,
    create,
    error_of,
    kpath,
    make_project,
    make_task,
    raw,
)


async def test_correction_writes_the_next_revision(service: Service, project: str) -> None:
    agent = await service.agent()
    record = await create(agent, project, tags=["a"])
    service.clock.advance(minutes=5)
    r = await agent.patch(
        kpath(project, record["id"]),
        correction(record, title="Retry once", status="validated", tags=["a", "b"]),
    )
    assert r.status_code == 200, r.text
    fixed = r.json()
    assert fixed["revision"] == 2 and fixed["title"] == "Retry once"
    assert fixed["status"] == "validated" and fixed["tags"] == ["a", "b"]
    assert fixed["created_at"] == record["created_at"]
    assert fixed["updated_at"] == service.clock.iso()
    assert fixed["provenance"]["recorded_at"] == service.clock.iso()
    assert fixed["provenance"]["actor_session_id"] == agent.session_id


async def test_correction_never_changes_an_earlier_revision(
    service: Service, human: Caller, project: str
) -> None:
    record = await create(human, project, tags=["a"], scope={"components": ["api"]})
    with raw(service.db_path) as conn:
        before = [tuple(r) for r in conn.execute("SELECT * FROM knowledge_revisions")]
    service.clock.advance(minutes=1)
    other = await service.principal("human", "bob")
    empty_scope = {"task_ids": [], "components": [], "environments": [], "versions": []}
    provenance = {"summary": "wrong", "source_uri": "https://x.test", "source_task_id": None,
                  "source_submission_id": None}  # fmt: skip
    r = await other.patch(
        kpath(project, record["id"]),
        correction(record, title="new", body="changed", tags=[], scope=empty_scope,
                   status="deprecated", applicability="never", provenance=provenance),
    )  # fmt: skip
    assert r.status_code == 200, r.text
    with raw(service.db_path) as conn:
        after = [tuple(r) for r in conn.execute("SELECT * FROM knowledge_revisions ORDER BY 2")]
    assert after[0] == before[0] and len(after) == 2
    detail = (await human.get(kpath(project, record["id"]))).json()
    first = detail["history"]["items"][1]
    assert first["title"] == record["title"] and first["tags"] == ["a"]
    assert first["provenance"]["actor_id"] == human.principal_id
    assert detail["history"]["items"][0]["provenance"]["actor_id"] == other.principal_id


async def test_stale_expected_revision_is_a_revision_conflict(human: Caller, project: str) -> None:
    record = await create(human, project)
    path = kpath(project, record["id"])
    assert (await human.patch(path, correction(record, title="two"))).status_code == 200
    r = await human.patch(path, correction(record, title="stale"))
    assert r.status_code == 409
    error = r.json()["error"]
    assert error["code"] == "revision_conflict"
    assert error["details"] == {"expected_revision": 1, "current_revision": 2}
    # the way on, in words: which revision it is at, and to read it again
    assert error["message"].startswith(
        "the knowledge record changed since revision 1: it is at revision 2; read it again"
    )
    r = await human.patch(path, correction(record, expected_revision=9))
    assert r.status_code == 409
    assert r.json()["error"]["message"].startswith(
        "the knowledge record was never at revision 9: it is at revision 2"
    )
    assert (await human.get(path)).json()["title"] == "two"


async def test_a_stale_correction_is_a_conflict_before_it_is_judged_against_now(
    human: Caller, project: str
) -> None:
    """A stale correction is judged by its revision first (as a task edit
    is): one that would close a supersession cycle, or name a task gone
    from the project, only against rows its caller never read, was a 400
    telling the caller its request was wrong instead of to read again
    (raceaudit: 34 of 60 racing rounds)."""
    a = await create(human, project, title="a")
    b = await create(human, project, title="b")
    b_path, a_path = kpath(project, b["id"]), kpath(project, a["id"])
    superseding = correction(b, status="superseded", superseded_by_id=a["id"])
    assert (await human.patch(b_path, superseding)).status_code == 200  # b -> a
    assert (await human.patch(a_path, correction(a, title="a, revised"))).status_code == 200
    # a's caller read revision 1, before b was superseded by a
    stale = correction(a, status="superseded", superseded_by_id=b["id"])
    r = await human.patch(a_path, stale)
    assert r.status_code == 409, r.text
    error = r.json()["error"]
    assert error["code"] == "revision_conflict"
    assert error["details"] == {"expected_revision": 1, "current_revision": 2}
    # read again, the same change is judged against what is there: a cycle
    current = (await human.get(a_path)).json()
    r = await human.patch(
        a_path, correction(current, status="superseded", superseded_by_id=b["id"])
    )
    assert error_of(r) == (400, "invalid_request", "superseded_by_id")


async def test_correction_writes_a_corrected_event(human: Caller, project: str) -> None:
    record = await create(human, project)
    await human.patch(kpath(project, record["id"]), correction(record, title="x", tags=["t"]))
    events = (await human.get(f"/api/v1/projects/{project}/events")).json()["items"]
    event = events[-1]
    assert event["type"] == "knowledge.corrected" and event["subject_id"] == record["id"]
    # the new title and tags a list shows, never the body (dashdrift)
    assert event["data"] == {
        "revision": 2, "status": "observed", "changed_fields": ["title", "tags"],
        "values": {"title": "x", "tags": ["t"]}, "superseded_by_id": None,
    }  # fmt: skip


@pytest.mark.parametrize("name", ["kind", "collection", "share_across_projects", "project_id"])
async def test_correction_cannot_name_identity_fields(
    human: Caller, project: str, name: str
) -> None:
    record = await create(human, project)
    r = await human.patch(kpath(project, record["id"]), correction(record, **{name: "fact"}))
    assert error_of(r) == (400, "invalid_request", name)


@pytest.mark.parametrize(
    "name",
    ["expected_revision", "title", "body", "status", "scope", "tags", "applicability",
     "provenance"],
)  # fmt: skip
async def test_correction_needs_the_complete_content(
    human: Caller, project: str, name: str
) -> None:
    record = await create(human, project)
    body = correction(record)
    del body[name]
    r = await human.patch(kpath(project, record["id"]), body)
    assert error_of(r) == (400, "invalid_request", name)


NESTED_MEMBERS = [
    ("scope", "task_ids"), ("scope", "components"), ("scope", "environments"),
    ("scope", "versions"), ("provenance", "summary"), ("provenance", "source_uri"),
    ("provenance", "source_task_id"), ("provenance", "source_submission_id"),
]  # fmt: skip


@pytest.mark.parametrize(("parent", "name"), NESTED_MEMBERS)
async def test_correction_needs_every_scope_and_provenance_member(
    human: Caller, project: str, parent: str, name: str
) -> None:
    # an omitted member would otherwise silently clear it (e.g. a lesson's pinned task)
    record = await create(human, project, scope={"components": ["api"]})
    body = correction(record)
    del body[parent][name]
    r = await human.patch(kpath(project, record["id"]), body)
    assert error_of(r) == (400, "invalid_request", f"{parent}.{name}")
    current = (await human.get(kpath(project, record["id"]))).json()
    assert current["revision"] == 1 and current["scope"]["components"] == ["api"]


async def test_correction_accepts_null_provenance_members_and_empty_scope(
    human: Caller, project: str
) -> None:
    record = await create(human, project, provenance={"source_uri": "https://x.test/1"})
    body = correction(
        record,
        provenance={
            "summary": "",
            "source_uri": None,
            "source_task_id": None,
            "source_submission_id": None,
        },
    )
    r = await human.patch(kpath(project, record["id"]), body)  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["provenance"]["source_uri"] is None


async def test_correction_refuses_tasks_outside_the_project(human: Caller, project: str) -> None:
    other = await make_project(human, "other")
    foreign = await make_task(human, other, "elsewhere")
    mine = await make_task(human, project, "here")
    record = await create(human, project)
    path = kpath(project, record["id"])
    scope = {**record["scope"], "task_ids": [mine, foreign]}
    r = await human.patch(path, correction(record, scope=scope))
    assert error_of(r) == (400, "invalid_request", "scope.task_ids[1]")
    provenance = {**correction(record)["provenance"], "source_task_id": foreign}
    r = await human.patch(path, correction(record, provenance=provenance))
    assert error_of(r) == (400, "invalid_request", "provenance.source_task_id")
    assert (await human.get(path)).json()["revision"] == 1


async def test_correction_refuses_a_scope_value_with_an_unseen_end(
    human: Caller, project: str
) -> None:
    """A correction keeps to create's scope rules: `prod ` matched no
    `environment=prod` filter."""
    record = await create(human, project)
    path = kpath(project, record["id"])
    scope = {**record["scope"], "environments": ["staging", "prod "]}
    r = await human.patch(path, correction(record, scope=scope))
    assert error_of(r) == (400, "invalid_request", "scope.environments[1]")
    assert (await human.get(path)).json()["revision"] == 1


async def test_correction_keeps_to_the_tag_rules(human: Caller, project: str) -> None:
    """A correction replaces the tags whole, so it keeps to create's rules:
    `prod ` is found by no `tag=prod`."""
    record = await create(human, project)
    path = kpath(project, record["id"])
    r = await human.patch(path, correction(record, tags=["ok", "prod "]))
    assert error_of(r) == (400, "invalid_request", "tags[1]")
    assert (await human.get(path)).json()["revision"] == 1


def _scope(**dimensions: list[str]) -> dict[str, list[str]]:
    return {"task_ids": [], "components": [], "environments": [], "versions": [], **dimensions}


def _provenance(**members: Any) -> dict[str, Any]:
    base = {"summary": "", "source_uri": None, "source_task_id": None, "source_submission_id": None}
    return {**base, **members}


def _many(n: int) -> list[str]:
    return [f"v{i}" for i in range(n)]


CORRECTION_REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"title": "x" * 201}, "title"),
    ({"title": "  "}, "title"),
    ({"body": "x" * (64 * 1024 + 1)}, "body"),
    ({"body": "é" * (32 * 1024 + 1)}, "body"),  # 64 KiB + 2 bytes of UTF-8
    ({"tags": _many(33)}, "tags"),
    ({"tags": ["ok", "x" * 65]}, "tags[1]"),
    ({"tags": ["dup", "dup"]}, "tags[1]"),
    ({"scope": _scope(task_ids=[f"task_{i}" for i in range(101)])}, "scope.task_ids"),
    ({"scope": _scope(components=_many(101))}, "scope.components"),
    ({"scope": _scope(environments=_many(101))}, "scope.environments"),
    ({"scope": _scope(versions=_many(101))}, "scope.versions"),
    ({"scope": _scope(versions=["1", "x" * 201])}, "scope.versions[1]"),
    ({"scope": {**_scope(), "regions": []}}, "scope.regions"),
    ({"status": "retired"}, "status"),
    ({"expected_revision": 0}, "expected_revision"),
    ({"expected_revision": True}, "expected_revision"),
    ({"provenance": _provenance(actor_id="me")}, "provenance.actor_id"),
    ({"provenance": _provenance(summary="x" * 4097)}, "provenance.summary"),
    ({"provenance": _provenance(source_uri="")}, "provenance.source_uri"),
    ({"provenance": _provenance(source_submission_id="sub_x")}, "provenance.source_submission_id"),
    ({"applicability": "x" * 4097}, "applicability"),
    ({"superseded_by_id": "not an id"}, "superseded_by_id"),
]


@pytest.mark.parametrize(("changes", "field"), CORRECTION_REFUSALS)
async def test_correction_enforces_the_create_limits(
    human: Caller, project: str, changes: dict[str, Any], field: str
) -> None:
    record = await create(human, project)
    r = await human.patch(kpath(project, record["id"]), correction(record, **changes))
    assert error_of(r) == (400, "invalid_request", field)
    assert (await human.get(kpath(project, record["id"]))).json()["revision"] == 1


async def test_superseded_needs_a_replacement(human: Caller, project: str) -> None:
    record = await create(human, project)
    r = await human.patch(kpath(project, record["id"]), correction(record, status="superseded"))
    assert error_of(r) == (400, "invalid_request", "superseded_by_id")


async def test_superseded_names_another_record_of_the_project(human: Caller, project: str) -> None:
    old = await create(human, project, title="old way")
    new = await create(human, project, title="new way")
    r = await human.patch(
        kpath(project, old["id"]),
        correction(old, status="superseded", superseded_by_id=new["id"]),
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "superseded" and r.json()["superseded_by_id"] == new["id"]
    replacement = (await human.get(kpath(project, new["id"]))).json()
    assert replacement["revision"] == 1 and replacement["status"] == "observed"


async def test_a_record_cannot_supersede_itself(human: Caller, project: str) -> None:
    record = await create(human, project)
    r = await human.patch(
        kpath(project, record["id"]),
        correction(record, status="superseded", superseded_by_id=record["id"]),
    )
    assert error_of(r) == (400, "invalid_request", "superseded_by_id")


async def test_a_supersession_cycle_is_refused(human: Caller, project: str) -> None:
    a = await create(human, project, title="a")
    b = await create(human, project, title="b")
    c = await create(human, project, title="c")

    async def supersede(record: dict[str, Any], by: str) -> Any:
        path = kpath(project, record["id"])
        current = (await human.get(path)).json()
        return await human.patch(
            path, correction(current, status="superseded", superseded_by_id=by)
        )

    assert (await supersede(a, b["id"])).status_code == 200  # a -> b
    assert (await supersede(b, c["id"])).status_code == 200  # a -> b -> c: a chain is fine
    r = await supersede(c, a["id"])  # c -> a would close the loop
    assert error_of(r) == (400, "invalid_request", "superseded_by_id")
    assert (await human.get(kpath(project, c["id"]))).json()["status"] == "observed"


async def test_replacement_must_exist_in_the_same_project(human: Caller, project: str) -> None:
    record = await create(human, project)
    other = await make_project(human, "other")
    elsewhere = await create(human, other, collection="shared", share_across_projects=True)
    for replacement in ("kn_missing", elsewhere["id"]):
        r = await human.patch(
            kpath(project, record["id"]),
            correction(record, status="superseded", superseded_by_id=replacement),
        )
        assert error_of(r) == (400, "invalid_request", "superseded_by_id")


async def test_superseded_by_id_needs_status_superseded(human: Caller, project: str) -> None:
    record = await create(human, project)
    new = await create(human, project)
    r = await human.patch(
        kpath(project, record["id"]),
        correction(record, status="validated", superseded_by_id=new["id"]),
    )
    assert error_of(r) == (400, "invalid_request", "superseded_by_id")


async def test_a_superseded_record_can_be_corrected_back(human: Caller, project: str) -> None:
    record = await create(human, project)
    new = await create(human, project)
    path = kpath(project, record["id"])
    r = await human.patch(path, correction(record, status="superseded", superseded_by_id=new["id"]))
    r = await human.patch(path, correction(r.json(), status="validated", superseded_by_id=None))
    assert r.status_code == 200 and r.json()["superseded_by_id"] is None
    assert r.json()["revision"] == 3


async def test_correcting_an_unknown_record_is_not_found(human: Caller, project: str) -> None:
    record = await create(human, project)
    r = await human.patch(kpath(project, "kn_missing"), correction(record))
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


async def test_a_project_record_is_not_found_through_another_project(
    human: Caller, project: str
) -> None:
    record = await create(human, project)
    other = await make_project(human, "other")
    r = await human.patch(kpath(other, record["id"]), correction(record))
    assert r.status_code == 404
    assert (await human.get(kpath(other, record["id"]))).status_code == 404


async def test_a_shared_record_is_corrected_only_through_its_source_project(
    human: Caller, project: str
) -> None:
    record = await create(human, project, collection="shared", share_across_projects=True)
    other = await make_project(human, "other")
    r = await human.patch(kpath(other, record["id"]), correction(record, title="hijack"))
    assert r.status_code == 403
    assert r.json()["error"]["details"]["reason"] == "source_project_only"
    # and names the project to correct it through, not the caller's (mutantaudit11)
    assert r.json()["error"]["details"]["project_id"] == project
    assert (await human.get(kpath(project, record["id"]))).json()["revision"] == 1


async def test_history_pages_newest_first_with_a_revision_cursor(
    human: Caller, project: str
) -> None:
    record = await create(human, project)
    path = kpath(project, record["id"])
    for n in range(2, 6):
        r = await human.patch(path, correction(record, expected_revision=n - 1, title=f"r{n}"))
        assert r.status_code == 200
    first = (await human.get(path, limit=2)).json()
    assert [i["revision"] for i in first["history"]["items"]] == [5, 4]
    second = (await human.get(path, limit=2, cursor=first["history"]["next_cursor"])).json()
    assert [i["revision"] for i in second["history"]["items"]] == [3, 2]
    third = (await human.get(path, limit=2, cursor=second["history"]["next_cursor"])).json()
    assert [i["revision"] for i in third["history"]["items"]] == [1]
    assert third["history"]["next_cursor"] is None
    assert third["revision"] == 5 and third["title"] == "r5"


@pytest.mark.parametrize(("params", "field"), [
    ({"limit": 0}, "limit"), ({"limit": 201}, "limit"), ({"cursor": "%%%"}, "cursor"),
    ({"cursor": "WyJhIl0"}, "cursor"), ({"page": 2}, "page"),
])  # fmt: skip
async def test_history_refuses_bad_limits_and_cursors(
    human: Caller, project: str, params: dict[str, Any], field: str
) -> None:
    record = await create(human, project)
    r = await human.get(kpath(project, record["id"]), **params)
    assert error_of(r) == (400, "invalid_request", field)


async def test_history_accepts_limit_200(human: Caller, project: str) -> None:
    record = await create(human, project)
    r = await human.get(kpath(project, record["id"]), limit=200)
    assert r.status_code == 200 and len(r.json()["history"]["items"]) == 1


async def test_knowledge_never_writes_the_binding_rules(human: Caller, project: str) -> None:
    record = await create(human, project, status="validated", body="Always run the linter.")
    await human.patch(kpath(project, record["id"]), correction(record, title="rule?"))
    await human.post(
        kpath(project, record["id"], "feedback"), {"expected_revision": 2, "useful": True}
    )
    policy = (await human.get(f"/api/v1/projects/{project}/policy")).json()
    assert policy["rules"] == "" and policy["revision"] == 1
