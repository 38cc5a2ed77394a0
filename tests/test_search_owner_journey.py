"""searchjourney: the owner words of migration 0039 are invisible to a reader.

docs/context.md ("Ranking less") says the owner column is never matched and
weighs 0 in BM25, and that "no order depends on" the owner words; "Ranking"
says equal ranks are ordered by the item id. A shared record holds two owner
words (`x...` and `shared`) where a project-only record holds one, so BM25's
length normalisation ranks a shared record below a project-only record of
the very same text: sharing a record demotes it, and the order of the same
two records changed across the upgrade to 0039 (shared first by id before,
project-only first after).

docs/operations.md ("Backups, restore and verify"): on a damaged file a check
that cannot run fails with its reason and the others still run; a dropped
search index is reported as `<index>: missing` (mutantaudit7). Since 0039
each index reads its content through a view (`tasks_search`,
`knowledge_search`); a file without it ended verify with
`verify_failed: SQL logic error` and no report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Caller, Service
from tests.context_support import context, ids, knowledge
from tests.knowledge_support import make_project
from tests.test_verify_each_check import tampered
from waypost.maintenance import verify


async def test_a_shared_record_and_a_project_record_of_equal_text_tie_on_rank(
    human: Caller, project: str
) -> None:
    shared = await knowledge(
        human, "ibex rollback", body="same text", collection="shared", share_across_projects=True
    )
    own = await knowledge(human, "ibex rollback", body="same text")
    assert shared["id"] < own["id"]
    for include_shared in ("false", "true"):
        packet = await context(human, "ibex", include_shared=include_shared)
        # equal text, equal rank: the item id orders them (docs/context.md, "Ranking")
        assert ids(packet) == [shared["id"], own["id"]], include_shared


async def test_another_projects_shared_record_ties_with_an_own_record_of_equal_text(
    human: Caller, project: str
) -> None:
    await make_project(human, "other")
    r = await human.post(
        "/api/v1/projects/other/knowledge",
        {"kind": "lesson", "title": "ibex rollback", "body": "same text",
         "collection": "shared", "share_across_projects": True},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    theirs = r.json()
    own = await knowledge(human, "ibex rollback", body="same text")
    assert theirs["id"] < own["id"]
    packet = await context(human, "ibex", include_shared="true")
    assert ids(packet) == [theirs["id"], own["id"]]


@pytest.mark.parametrize("view", ["tasks_search", "knowledge_search"])
async def test_verify_reports_a_dropped_search_content_view(
    service: Service, human: Caller, project: str, tmp_path: Path, view: str
) -> None:
    copy, conn = await tampered(service, human, tmp_path)
    conn.execute(f"DROP VIEW {view}")
    conn.close()
    report = verify(copy)  # raised sqlite3.OperationalError: SQL logic error
    assert report["ok"] is False
    full_text = report["checks"]["full_text"]
    assert full_text["ok"] is False, full_text
    assert report["checks"]["integrity"]["ok"] is True  # the other checks still ran
