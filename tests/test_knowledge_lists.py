"""Knowledge lists: newest first, filters, opaque cursor, shared records on request."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create, error_of, kpath, make_project


async def test_list_is_newest_first_by_update(
    service: Service, human: Caller, project: str
) -> None:
    a = await create(human, project, title="a")
    service.clock.advance(minutes=1)
    b = await create(human, project, title="b")
    service.clock.advance(minutes=1)
    await human.patch(kpath(project, a["id"]), correction(a, title="a2"))
    items = (await human.get(kpath(project))).json()["items"]
    assert [i["id"] for i in items] == [a["id"], b["id"]]
    assert items[0]["title"] == "a2" and items[0]["revision"] == 2


async def test_equal_times_are_ordered_by_id_descending(human: Caller, project: str) -> None:
    ids = [(await create(human, project))["id"] for _ in range(5)]
    items = (await human.get(kpath(project))).json()["items"]
    assert [i["id"] for i in items] == sorted(ids, reverse=True)


async def test_cursor_pages_through_every_record_once(
    service: Service, human: Caller, project: str
) -> None:
    made = []
    for n in range(7):
        made.append((await create(human, project, title=f"r{n}"))["id"])
        if n % 2:
            service.clock.advance(seconds=1)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = (await human.get(kpath(project), **params)).json()
        seen.extend(i["id"] for i in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(made) and len(seen) == 7
    full = (await human.get(kpath(project), limit=200)).json()
    assert [i["id"] for i in full["items"]] == seen and full["next_cursor"] is None


async def test_cursor_stays_stable_when_a_listed_record_changes(
    service: Service, human: Caller, project: str
) -> None:
    old = await create(human, project, title="old")
    service.clock.advance(minutes=1)
    mid = await create(human, project, title="mid")
    service.clock.advance(minutes=1)
    new = await create(human, project, title="new")
    page = (await human.get(kpath(project), limit=1)).json()
    assert [i["id"] for i in page["items"]] == [new["id"]]
    service.clock.advance(minutes=1)
    await human.patch(kpath(project, new["id"]), correction(new, title="newer"))
    rest = (await human.get(kpath(project), cursor=page["next_cursor"])).json()
    assert [i["id"] for i in rest["items"]] == [mid["id"], old["id"]]


async def test_filters_by_kind_status_and_tag(human: Caller, project: str) -> None:
    fact = await create(human, project, kind="fact", tags=["db", "ops"])
    lesson = await create(human, project, kind="lesson", status="validated", tags=["db"])
    await create(human, project, kind="checkpoint", status="deprecated")

    async def ids(**params: Any) -> set[str]:
        r = await human.get(kpath(project), **params)
        assert r.status_code == 200, r.text
        return {i["id"] for i in r.json()["items"]}

    assert await ids(kind="fact") == {fact["id"]}
    assert await ids(status="validated") == {lesson["id"]}
    assert await ids(tag="db") == {fact["id"], lesson["id"]}
    assert await ids(tag="ops") == {fact["id"]}
    assert await ids(tag="db", kind="lesson") == {lesson["id"]}
    assert await ids(tag="missing") == set()
    # exact, code point for code point (docs/knowledge.md): no case folding,
    # no normalising, so `DB` and a decomposed `café` are other tags
    upper = await create(human, project, tags=["DB", "caf\u00e9"])
    assert await ids(tag="DB") == {upper["id"]}
    assert await ids(tag="db") == {fact["id"], lesson["id"]}
    assert await ids(tag="cafe\u0301") == set()


async def test_tag_filter_follows_corrections(human: Caller, project: str) -> None:
    record = await create(human, project, tags=["old"])
    await human.patch(kpath(project, record["id"]), correction(record, tags=["new"]))
    assert (await human.get(kpath(project), tag="old")).json()["items"] == []
    assert len((await human.get(kpath(project), tag="new")).json()["items"]) == 1


async def test_every_status_is_listed_with_its_status(human: Caller, project: str) -> None:
    new = await create(human, project, status="validated")
    old = await create(human, project, status="observed")
    await human.patch(
        kpath(project, old["id"]), correction(old, status="superseded", superseded_by_id=new["id"])
    )
    await create(human, project, status="deprecated")
    statuses = sorted(i["status"] for i in (await human.get(kpath(project))).json()["items"])
    assert statuses == ["deprecated", "superseded", "validated"]


async def test_shared_records_of_other_projects_appear_only_on_request(
    human: Caller, project: str
) -> None:
    source = await make_project(human, "source")
    shared = await create(
        human,
        source,
        collection="shared",
        share_across_projects=True,
        provenance={"summary": "from the source team", "source_uri": "https://x.test/1"},
    )
    private = await create(human, source, title="not shared")
    mine = await create(human, project)

    default = (await human.get(kpath(project))).json()["items"]
    assert [i["id"] for i in default] == [mine["id"]]
    explicit_off = (await human.get(kpath(project), include_shared="false")).json()["items"]
    assert [i["id"] for i in explicit_off] == [mine["id"]]

    with_shared = (await human.get(kpath(project), include_shared="true")).json()["items"]
    assert {i["id"] for i in with_shared} == {mine["id"], shared["id"]}
    assert private["id"] not in {i["id"] for i in with_shared}
    seen = next(i for i in with_shared if i["id"] == shared["id"])
    assert seen["project_id"] == source
    assert seen["provenance"] == shared["provenance"]
    # the shared record's own detail is readable through the other project too
    detail = (await human.get(kpath(project, shared["id"]))).json()
    assert detail["project_id"] == source


async def test_a_projects_own_shared_records_are_always_listed(human: Caller, project: str) -> None:
    record = await create(human, project, collection="shared", share_across_projects=True)
    assert [i["id"] for i in (await human.get(kpath(project))).json()["items"]] == [record["id"]]


@pytest.mark.parametrize(("params", "field"), [
    ({"limit": 0}, "limit"), ({"limit": 201}, "limit"), ({"limit": "x"}, "limit"),
    ({"cursor": "not-a-cursor"}, "cursor"), ({"cursor": "WzFd"}, "cursor"),
    ({"kind": "opinion"}, "kind"), ({"status": "current"}, "status"),
    ({"include_shared": "maybe"}, "include_shared"), ({"tag": "x" * 65}, "tag"),
    ({"sort": "asc"}, "sort"),
])  # fmt: skip
async def test_list_refuses_bad_parameters(
    human: Caller, project: str, params: dict[str, Any], field: str
) -> None:
    await create(human, project)
    r = await human.get(kpath(project), **params)
    assert error_of(r) == (400, "invalid_request", field)


async def test_list_of_an_unknown_project_is_not_found(human: Caller) -> None:
    assert (await human.get(kpath("nope"))).status_code == 404


async def test_default_page_is_50(human: Caller, project: str) -> None:
    for _ in range(51):
        await create(human, project)
    page = (await human.get(kpath(project))).json()
    assert len(page["items"]) == 50 and page["next_cursor"] is not None


@pytest.mark.parametrize("tag", [None, "walked"])
async def test_a_record_revised_after_the_clock_stepped_back_is_not_walked_twice(
    service: Service, human: Caller, project: str, tag: str | None
) -> None:
    """A revision stamped `updated_at` by a clock stepped back (an NTP
    correction) moved its record behind a forward walk, which then returned
    it a second time; `updated_at` now never moves back."""
    made = []
    for n in range(3):
        made.append(await create(human, project, title=f"r{n}", tags=["walked"]))
        service.clock.advance(seconds=1)
    filters = {"tag": tag} if tag else {}
    first = (await human.get(kpath(project), limit=2, **filters)).json()
    assert [i["id"] for i in first["items"]] == [made[2]["id"], made[1]["id"]]
    service.clock.advance(hours=-1)
    newest = made[2]
    r = await human.patch(kpath(project, newest["id"]), correction(newest, title="r2 fixed"))
    assert r.status_code == 200, r.text
    assert r.json()["updated_at"] == newest["updated_at"]  # not an hour back
    assert r.json()["provenance"]["recorded_at"] == service.clock.iso()  # the revision's own time
    rest = (await human.get(kpath(project), cursor=first["next_cursor"], **filters)).json()
    assert [i["id"] for i in rest["items"]] == [made[0]["id"]]
