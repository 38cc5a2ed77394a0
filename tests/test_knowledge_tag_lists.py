"""Tag-filtered knowledge lists walk the tag's rows (migration 0022) and list
exactly what the unfiltered list holds with that tag, in the same order.

The tag rows carry a copy of the record's project, status, updated_at and
sharing, kept by triggers; a copy can drift. So the records here are created
in two projects (some shared), with ties on `updated_at`, then corrected
(tags, status, time), and every tag list, with and without a status filter
and `include_shared`, walked two by two over REST and counted over GraphQL,
is compared with the unfiltered list filtered here.
"""

from __future__ import annotations

import random
from typing import Any

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create, kpath, make_project
from tests.test_query_plans import _plans
from waypost.resolvers.knowledge.models import KnowledgeListQuery
from waypost.resolvers.knowledge.store import count_rows, list_rows

TAGS = ["db", "ops", "ui", "rare"]
STATUSES = ["observed", "validated", "deprecated"]


async def _walk(caller: Caller, project: str, **params: Any) -> list[str]:
    """Every item id of a REST list, two per page."""
    ids: list[str] = []
    cursor: str | None = None
    for _ in range(100):  # a drifted copy could hand back a cursor that never ends
        query = {**params, "limit": 2, **({"cursor": cursor} if cursor else {})}
        r = await caller.get(kpath(project), **query)
        assert r.status_code == 200, r.text
        page = r.json()
        ids += [i["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids
    raise AssertionError(f"no end after 100 pages: {ids[:6]}...")


async def _count(caller: Caller, project: str, **variables: Any) -> int:
    data = await caller.gql(
        """query($p: String!, $tag: String, $status: KnowledgeStatus, $shared: Boolean) {
          project(id: $p) { knowledge(tag: $tag, status: $status, includeShared: $shared) {
            totalCount } } }""",
        {"p": project, **variables},
    )
    assert "errors" not in data, data
    count: int = data["data"]["project"]["knowledge"]["totalCount"]
    return count


async def test_tag_lists_agree_with_the_unfiltered_list(
    service: Service, human: Caller, project: str
) -> None:
    rng = random.Random(22)
    other = await make_project(human, "other")
    records: list[dict[str, Any]] = []
    for n in range(24):
        if rng.random() < 0.6:  # the rest share this instant with the previous record
            service.clock.advance(seconds=1)
        shared = rng.random() < 0.3
        records.append(
            await create(
                human,
                rng.choice([project, other]),
                title=f"record {n}",
                status=rng.choice(STATUSES),
                tags=rng.sample(TAGS[:3], rng.randint(0, 2)) + (["rare"] if n == 7 else []),
                **({"collection": "shared", "share_across_projects": True} if shared else {}),
            )
        )
    for record in rng.sample(records, 10):  # corrections move tags, status and updated_at
        service.clock.advance(seconds=rng.choice([0, 1]))
        change = correction(
            record, tags=rng.sample(TAGS[:3], rng.randint(0, 3)), status=rng.choice(STATUSES)
        )
        r = await human.patch(kpath(record["project_id"], record["id"]), change)
        assert r.status_code == 200, r.text

    for include_shared in (False, True):
        shared_flag = {"include_shared": "true"} if include_shared else {}
        everything = (await human.get(kpath(project), limit=200, **shared_flag)).json()["items"]
        for tag in [*TAGS, "none"]:
            for status in [None, *STATUSES]:
                expected = [
                    i["id"]
                    for i in everything
                    if tag in i["tags"] and (status is None or i["status"] == status)
                ]
                filters = {"tag": tag, **({"status": status} if status else {})}
                assert await _walk(human, project, **filters, **shared_flag) == expected, (
                    filters,
                    include_shared,
                )
                variables = {"tag": tag, "shared": include_shared}
                if status:
                    variables["status"] = status.upper()
                assert await _count(human, project, **variables) == len(expected)


async def test_a_tag_list_is_one_range_of_the_tag_rows(
    service: Service, human: Caller, project: str
) -> None:
    """No tag list sorts: each part is a range of the tag rows' primary key,
    of `knowledge_tags_by_status`, or of `knowledge_tags_shared`. (Through
    `k.id IN (... tag = ?)` SQLite sorted all the tag's records for a page.)"""
    await create(human, project, tags=["db"])
    after = ("2026-11-29T18:00:00.000Z", "kn_x")
    for query in (
        KnowledgeListQuery(tag="db"),
        KnowledgeListQuery(tag="db", status="validated"),
        KnowledgeListQuery(tag="db", include_shared=True),
    ):
        for cursor in (None, after):
            for backward in (False, True):
                plans = await _plans(
                    service,
                    lambda c, q=query, a=cursor, b=backward: list_rows(
                        c, project, q, None, a, 51, b
                    ),
                )
                # a sort only of a part's own page, when the two parts merge
                sorts = [i for i, p in enumerate(plans) if "TEMP B-TREE" in p]
                assert all(plans[i - 1].startswith("SCAN (subquery") for i in sorts), plans
                assert any("SEARCH g USING PRIMARY KEY (tag=? AND project_id=?" in p
                           or "knowledge_tags_by_status (tag=? AND project_id=? AND status=?" in p
                           for p in plans), plans  # fmt: skip
                if query.include_shared:
                    assert any("knowledge_tags_shared (tag=?" in p for p in plans), plans
        plans = await _plans(service, lambda c, q=query: count_rows(c, project, q, None))
        walks = [p for p in plans if p.startswith(("SCAN", "SEARCH"))]
        assert walks and all(p.startswith(("SCAN CONSTANT ROW", "SEARCH")) for p in walks), plans
