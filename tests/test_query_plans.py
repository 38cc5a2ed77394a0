"""Lists and look-ups walk an index, not the project, whatever their filters.

A probe at 100,000 records found three lists that sorted or filtered the
whole project: `include_shared` (`project_id = ? OR collection = 'shared'`
could use no index: 70 ms, 61 ms for a small project), a status few records
hold (76-106 ms) and a deep cursor (`a < ? OR (a = ? AND id < ?)`, 18.6 ms
90,000 records deep); and opening a decision looked its tasks up by
walking every task of the project (6.5 ms of writer time at 10,000 tasks).
The plans are checked here, and the merged walk of own and shared records
against the order it must keep.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.cost_support import unit_steps
from tests.knowledge_support import create, kpath, make_project
from waypost.resolvers.decisions.store import statuses, task_revisions
from waypost.resolvers.knowledge.models import KnowledgeListQuery
from waypost.resolvers.knowledge.store import count_rows, list_rows
from waypost.resolvers.tasks import store as task_store


async def _plans(service: Service, call: Any) -> list[str]:
    """The query plan lines of every statement `call(conn)` runs."""

    def unit(conn: sqlite3.Connection) -> list[str]:
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            call(conn)
        finally:
            conn.set_trace_callback(None)
        return [
            str(row[3])
            for sql in statements
            for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
        ]

    plans: list[str] = await service.rt.db.read(unit)
    return plans


def _scans(plans: list[str]) -> list[str]:
    """Plan lines that read a table other than through one of its indexes."""
    return [p for p in plans if p.startswith("SCAN k") and "USING" not in p]


def _copy_history(conn: sqlite3.Connection, table: str, key: str, owner: str, count: int) -> None:
    """`count` more rows of one history, copies of its first with the next
    revision numbers (or fresh ids): what a long-lived record accumulates."""
    first = dict(conn.execute(f"SELECT * FROM {table} WHERE {key} = ?", (owner,)).fetchone())
    top = conn.execute(f"SELECT count(*) FROM {table} WHERE {key} = ?", (owner,)).fetchone()[0]
    for n in range(top + 1, top + count + 1):
        if "revision" in first:
            first["revision"] = n
        else:
            first["id"] = f"{first['id'][:12]}_{n}"
        conn.execute(
            f"INSERT INTO {table} ({', '.join(first)}) VALUES ({', '.join('?' for _ in first)})",
            list(first.values()),
        )


async def _steps(service: Service, call: Any, write: bool = False) -> int:
    """The SQLite VM steps of `call(conn)` in one unit of work of the service."""
    return await unit_steps(service.rt.db, call, write)


async def test_every_list_walks_an_index(service: Service, human: Caller, project: str) -> None:
    await create(human, project, title="one")
    shared = KnowledgeListQuery(include_shared=True)
    plans = await _plans(service, lambda c: list_rows(c, project, shared, None, None, 51))
    assert _scans(plans) == [], plans
    assert any("knowledge_shared" in p for p in plans), plans
    plans = await _plans(service, lambda c: count_rows(c, project, shared, None))
    assert _scans(plans) == [], plans

    rare = KnowledgeListQuery(status="superseded")
    plans = await _plans(service, lambda c: list_rows(c, project, rare, None, None, 51))
    assert any("knowledge_by_status (project_id=? AND status=?)" in p for p in plans), plans

    after = ("2026-11-29T18:00:00.000Z", "kn_x")
    for backward, cmp in ((False, "<"), (True, ">")):
        plans = await _plans(
            service,
            lambda c, b=backward: list_rows(c, project, KnowledgeListQuery(), None, after, 51, b),
        )
        assert any(f"(updated_at,id){cmp}(?,?)" in p for p in plans), plans


async def test_own_and_shared_records_page_in_one_order(
    service: Service, human: Caller, project: str
) -> None:
    """Own records (some of them shared) and other projects' shared ones,
    with ties on updated_at (the clock stands still between some creates):
    every page in (updated_at, id) order, newest first, each record once."""
    other = await make_project(human, "other")
    made: list[dict[str, Any]] = []
    for i in range(18):
        if i % 3 == 0:
            service.clock.advance(seconds=1)
        if i % 2 == 0:
            extra = {"collection": "shared", "share_across_projects": True} if i % 4 else {}
            made.append(await create(human, project, title=f"own {i}", **extra))
        else:
            shared = i % 4 == 1
            extra = {"collection": "shared", "share_across_projects": True} if shared else {}
            record = await create(human, other, title=f"other {i}", **extra)
            if shared:
                made.append(record)
    expected = [
        r["id"] for r in sorted(made, key=lambda r: (r["updated_at"], r["id"]), reverse=True)
    ]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"include_shared": "true", "limit": 4}
        if cursor is not None:
            params["cursor"] = cursor
        page = (await human.get(kpath(project), **params)).json()
        seen.extend(item["id"] for item in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == expected
    data = await human.gql(
        '{ project(id: "demo") { knowledge(last: 5, includeShared: true)'
        " { totalCount edges { node { restId } } } } }"
    )
    listed = data["data"]["project"]["knowledge"]
    assert listed["totalCount"] == len(expected)
    assert [e["node"]["restId"] for e in listed["edges"]] == expected[-5:]


async def test_a_kind_is_one_range_of_its_index(
    service: Service, human: Caller, project: str
) -> None:
    """A page and a count of one kind walked every record of the project,
    and with `include_shared` every shared record (18 and 24 ms a page at
    50,000 records for a kind 20 of them have)."""
    await create(human, project, title="one")
    rare = KnowledgeListQuery(kind="rejected_approach")
    after = ("2026-11-29T18:00:00.000Z", "kn_x")
    for call in (
        lambda c: list_rows(c, project, rare, None, None, 51),
        lambda c: list_rows(c, project, rare, None, after, 51, True),
        lambda c: count_rows(c, project, rare, None),
    ):
        plans = await _plans(service, call)
        assert any("knowledge_by_kind (project_id=? AND kind=?" in p for p in plans), plans
    everywhere = KnowledgeListQuery(kind="rejected_approach", include_shared=True)
    for call in (
        lambda c: list_rows(c, project, everywhere, None, None, 51),
        lambda c: count_rows(c, project, everywhere, None),
    ):
        plans = await _plans(service, call)
        assert any("knowledge_by_kind (project_id=? AND kind=?" in p for p in plans), plans
        assert any("knowledge_shared_by_kind (kind=?" in p for p in plans), plans


async def test_a_status_of_the_shared_records_is_one_range_of_its_index(
    service: Service, human: Caller, project: str
) -> None:
    """With `include_shared`, a `status` filter walked every shared record
    of the file testing each one's status (11 ms a page at 8,000 shared
    records, 24 ms at 16,000), and with a `tag` every shared row of the tag
    (10 ms at 3,600): planaudit."""
    await create(human, project, title="one", tags=["ops"])
    rare = KnowledgeListQuery(status="deprecated", include_shared=True)
    for call in (
        lambda c: list_rows(c, project, rare, None, None, 51),
        lambda c: count_rows(c, project, rare, None),
    ):
        plans = await _plans(service, call)
        assert any("knowledge_shared_by_status (status=?" in p for p in plans), plans
    tagged = KnowledgeListQuery(status="deprecated", tag="ops", include_shared=True)
    plans = await _plans(service, lambda c: list_rows(c, project, tagged, None, None, 51))
    index = "knowledge_tags_shared_by_status (tag=? AND status=?"
    assert any(index in p for p in plans), plans


async def test_a_shared_page_does_not_step_over_the_projects_own_shared_records(
    service: Service, human: Caller, project: str
) -> None:
    """The shared part of an `include_shared` page left the project's own
    out (`project_id <> ?`), so it stepped over each of them that was newer
    than the other projects' shared records: it costs the same with 25 of
    them as with 125 now."""
    other = await make_project(human, "other")
    shared = {"collection": "shared", "share_across_projects": True}
    for n in range(30):
        await create(human, other, title=f"theirs {n}", **shared)
    service.clock.advance(seconds=1)
    query = KnowledgeListQuery(include_shared=True)

    async def mine_then_page(count: int) -> int:
        for _ in range(count):
            await create(human, project, title="mine", **shared)
        return await _steps(service, lambda c: list_rows(c, project, query, None, None, 21))

    few = await mine_then_page(25)
    many = await mine_then_page(100)
    assert many <= few + few // 100, (few, many)


async def test_a_decisions_tasks_are_looked_up_by_key(
    service: Service, human: Caller, project: str
) -> None:
    plans = await _plans(service, lambda c: task_revisions(c, project, ["task_a", "task_b"]))
    assert any("SEARCH t USING INDEX sqlite_autoindex_tasks_1 (id=?)" in p for p in plans), plans


async def test_a_refusals_decision_statuses_are_looked_up_by_id(
    service: Service, human: Caller, project: str
) -> None:
    """Filtered by project first, the statuses of a gate refusal read every
    decision of the project (45 ms a refusal at 200,000, inside the writer)."""
    params = {"project": project, "now": service.clock.iso()}
    plans = await _plans(service, lambda c: statuses(c, ["dec_a", "dec_b"], params))
    assert not any("decisions_by_project" in p for p in plans), plans
    assert any("(id=?)" in p for p in plans), plans


async def test_a_task_page_past_a_cursor_is_one_range_of_the_index(
    service: Service, human: Caller, project: str
) -> None:
    after = ("2026-11-29T18:00:00.000Z", "task_x")
    for backward, cmp in ((False, ">"), (True, "<")):
        plans = await _plans(
            service,
            lambda c, b=backward: task_store.list_rows(c, project, after, 51, backward=b),
        )
        assert any(f"(created_at,id){cmp}(?,?)" in p for p in plans), plans


async def test_a_task_list_of_one_status_walks_that_status_alone(
    service: Service, human: Caller, project: str
) -> None:
    """A status few tasks hold used to walk the project's tasks in creation
    order (4-9 ms for an empty page at 10,000 tasks); the filter and the order
    are now one range of `tasks_by_status`, forwards, backwards and past a cursor."""
    after = ("2026-11-29T18:00:00.000Z", "task_x")
    for cursor in (None, after):
        for backward in (False, True):
            plans = await _plans(
                service,
                lambda c, a=cursor, b=backward: task_store.list_rows(
                    c, project, a, 51, status="done", backward=b
                ),
            )
            assert any("tasks_by_status (project_id=? AND status=?" in p for p in plans), plans
            assert not any("TEMP B-TREE" in p for p in plans), plans


async def test_a_ready_task_list_walks_the_ready_tasks_alone(
    service: Service, human: Caller, project: str
) -> None:
    """`ready=true` walks the index of ready tasks (no blocked, leased or closed
    one in it): with `tasks_by_status` the planner stepped over every blocked
    open task for a page. Its count reads `tasks_claimable`'s entries alone."""
    ready = {"project": project, "now": "2026-11-30T00:00:00.000Z"}
    plans = await _plans(
        service,
        lambda c: task_store.list_rows(c, project, None, 51, ready=True, ready_params=ready),
    )
    assert any("tasks_ready_by_created (project_id=?)" in p for p in plans), plans
    plans = await _plans(
        service, lambda c: task_store.count_rows(c, project, ready=True, ready_params=ready)
    )
    assert any("tasks_claimable (project_id=?)" in p for p in plans), plans


async def test_a_packets_decisions_for_a_task_start_from_that_task(
    service: Service, human: Caller, project: str
) -> None:
    """The context packet's unresolved decisions for a task walked every
    decision of the project, each judged by its pins (117 ms at 50,000
    decisions for a task that had none); they start from the task's own
    decisions now, and judge each by its stored state."""
    from waypost.resolvers.decisions.lists_store import unresolved_ids
    from waypost.resolvers.decisions.operations import UNRESOLVED

    now = service.clock.iso()
    plans = await _plans(
        service, lambda c: unresolved_ids(c, project, now, UNRESOLVED, ["task_a"], 21)
    )
    assert any("decision_affected_by_task (task_id=?)" in p for p in plans), plans
    assert not any("decisions_by_project" in p for p in plans), plans
    assert not any("SUBQUERY" in p and "CORRELATED" in p for p in plans), plans


async def test_a_packets_decisions_for_the_project_cost_the_same_among_many_answered(
    service: Service, human: Caller, project: str
) -> None:
    """Without a task, the packet's unresolved decisions walked every
    decision of the project and tested its stored state (1.6 ms at 3,500
    decisions, 42 ms at 50,000, for every packet): they are the ranges of
    the pending, stale and expired decisions now, whatever else the project
    holds, still oldest first."""
    from tests.decisions_support import answer, edit_task, new_task, open_decision
    from waypost.resolvers.decisions.lists_store import unresolved_ids
    from waypost.resolvers.decisions.operations import UNRESOLVED

    task, judged = await new_task(human), await new_task(human, "Rewrite the ledger")
    stale = await open_decision(human, [judged])
    await answer(human, stale["id"])
    pending = await open_decision(human, [task])
    expiring = await open_decision(human, [task], expires_at="2026-11-29T19:00:00.000Z")
    await edit_task(human, judged, title="Drop the ledger")
    service.clock.advance(hours=2)
    now = service.clock.iso()

    def unresolved(conn: sqlite3.Connection) -> list[str]:
        return unresolved_ids(conn, project, now, UNRESOLVED, None, 21)

    async def answered(count: int) -> None:
        for _ in range(count):
            allowed = await open_decision(human, [task])
            await answer(human, allowed["id"])

    await answered(4)
    assert await service.rt.db.read(unresolved) == [stale["id"], pending["id"], expiring["id"]]
    few = await _steps(service, unresolved)
    await answered(200)
    many = await _steps(service, unresolved)
    assert many <= few + few // 100, (few, many)
    assert await service.rt.db.read(unresolved) == [stale["id"], pending["id"], expiring["id"]]
    plans = await _plans(service, unresolved)
    assert not any("decisions_by_project" in p for p in plans), plans


async def test_the_unanswered_decisions_are_one_range_of_their_index(
    service: Service, human: Caller, project: str
) -> None:
    """The digest's pending and timing-out lists and the sweep walked every
    decision of the project or every reversible one (76, 71 and 32 ms at
    50,000 decisions); the pending list starts from the unanswered decisions
    now (migration 0025's partial index), the other two from those that can
    still time out (0029's, over the project and over all projects), in the
    order they are answered (no sort)."""
    from waypost.resolvers.decisions import lists_store
    from waypost.resolvers.decisions.store import due_for_timeout

    now = service.clock.iso()
    calls: list[tuple[str, Any]] = [
        ("decision_holds_unanswered (project_id=?)",
         lambda c: lists_store.unanswered_ids(c, project, 201)),
        ("decision_holds_timing_out_by_project (project_id=? AND timeout_opened_at",
         lambda c: lists_store.timing_out_ids(c, project, now, now, 201)),
        ("decision_holds_timing_out (timeout_opened_at",
         lambda c: due_for_timeout(c, now, now, 50)),
    ]  # fmt: skip
    for index, call in calls:
        plans = await _plans(service, call)
        assert any(f"INDEX {index}" in p for p in plans), plans
        assert not any(
            "decisions_by_project" in p or "decisions_reversible" in p or "TEMP B-TREE" in p
            for p in plans
        ), plans


async def test_each_status_filter_walks_the_decisions_of_that_status(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list of one status (a page forwards, backwards and past a cursor,
    and its count) is one range of the partial index that holds that status
    (migrations 0025 and 0027), not a walk of the project's decisions until
    a page of that status turns up."""
    from waypost.resolvers.decisions import lists_store
    from waypost.resolvers.decisions.status import STATUS_INDEX, STATUSES

    now = service.clock.iso()
    after = ("2026-11-29T18:00:00.000Z", "dec_x")
    expired_pages: list[Any] = []
    for status in STATUSES:
        pages: list[Any] = []
        for cursor in (("", ""), after):
            for backward in (False, True):
                pages.append(
                    lambda c, s=status, a=cursor, b=backward: lists_store.list_page_rows(
                        c, project, now, s, a, 51, b
                    )
                )
        count = [lambda c, s=status: lists_store.count_of_status(c, project, now, s)]
        # `expired`, by expiry (0033): the count always, a page when few have passed
        by_expiry = count + pages if status == "expired" else []
        expired_pages = pages if status == "expired" else expired_pages
        for call in [*count, *pages]:
            plans = await _plans(service, call)
            index = "decision_holds_expiry" if call in by_expiry else STATUS_INDEX[status]
            assert any(f"INDEX {index} (project_id=?" in p for p in plans), plans
            assert not any("decisions_by_project" in p for p in plans), (status, plans)
            sorts = any("TEMP B-TREE" in p for p in plans)
            assert sorts == (call in pages and call in by_expiry), (status, plans)
    # with more than FEW_EXPIRED passed, a page walks them in list order
    monkeypatch.setattr(lists_store, "FEW_EXPIRED", -1)
    for call in expired_pages:
        plans = await _plans(service, call)
        assert any("INDEX decision_holds_expiring (project_id=?" in p for p in plans), plans
        assert not any("TEMP B-TREE" in p for p in plans), plans
    # without a filter, the count is the project's range of its index alone
    # (a join with the generations cost 24 ms at 50,000 decisions)
    plans = await _plans(service, lambda c: lists_store.count_of_status(c, project, now, None))
    assert plans == ["SEARCH d USING COVERING INDEX decisions_by_project (project_id=?)"], plans


async def test_a_status_few_decisions_have_costs_the_same_among_many_others(
    service: Service, human: Caller, project: str
) -> None:
    """A page and the count of `allowed`, `denied`, `deferred`, `stale` and
    `expired` walked every decision of the project for a page of that
    status: they cost the same with 4 other decisions as with 300."""
    from tests.decisions_support import answer, new_task, open_decision
    from waypost.resolvers.decisions import lists_store

    task = await new_task(human)
    for disposition in ("allow", "deny", "defer"):
        decision = await open_decision(human, [task])
        await answer(human, decision["id"], disposition=disposition)
    now = service.clock.iso()
    rare = ("allowed", "denied", "deferred", "stale", "expired")

    def lists(conn: sqlite3.Connection) -> None:
        for status in rare:
            lists_store.list_page_rows(conn, project, now, status, ("", ""), 51)
            lists_store.count_of_status(conn, project, now, status)

    for _ in range(4):
        await open_decision(human, [task])
    few = await _steps(service, lists)
    for _ in range(296):
        await open_decision(human, [task])
    many = await _steps(service, lists)
    assert many <= few + few // 100, (few, many)


async def _rules_edit_steps(service: Service, project: str) -> int:
    """The SQLite VM steps of one rules edit and its triggers."""
    return await _steps(
        service,
        lambda conn: conn.execute(
            "UPDATE projects SET policy_revision = policy_revision + 1,"
            " rules_revision = policy_revision + 1 WHERE id = ?",
            (project,),
        ),
        write=True,
    )


async def test_a_rules_edit_changes_only_the_released_and_fresh_decisions(
    service: Service, human: Caller, project: str
) -> None:
    """A rules edit walked every decision of the project (65-320 ms of
    writer time at 1,000-50,000, with nothing left to change); after the
    first, which makes them all stale, the next costs the same with 4
    decisions as with 400."""
    from tests.tasks_support import make_task, open_decision

    task = await make_task(human)
    for _ in range(4):
        await open_decision(human, task["id"])
    await _rules_edit_steps(service, project)
    few = await _rules_edit_steps(service, project)
    for _ in range(396):
        await open_decision(human, task["id"])
    await _rules_edit_steps(service, project)
    many = await _rules_edit_steps(service, project)
    assert many <= few + few // 100, (few, many)


async def test_a_history_page_reads_the_page_not_the_history(
    service: Service, human: Caller, project: str
) -> None:
    """One page of a task's revisions, checkpoints or submissions, or of a
    record's revisions, numbered the whole history below the cursor to keep
    a page of it (20-22 ms at 5,000 rows); checkpoints and submissions were
    indexed by `at`, not by the rowid they page by. A page costs the same
    at 30 rows as at 1,500 now, forwards and backwards."""
    from tests.tasks_support import claimed_by_agent, submit, task_path
    from waypost.resolvers.knowledge.store import revision_rows

    task, agent = await claimed_by_agent(service, human)
    check = await agent.post(task_path(task["id"], "checkpoint"), {"note": "halfway"})
    assert check.status_code == 200, check.text
    await submit(agent, task["id"])
    record = await create(human, project, title="one")
    histories = [
        ("task_revisions", "task_id", task["id"]),
        ("task_checkpoints", "task_id", task["id"]),
        ("submissions", "task_id", task["id"]),
        ("knowledge_revisions", "knowledge_id", record["id"]),
    ]

    def pages(conn: sqlite3.Connection) -> None:
        for table, _, owner in histories:
            for before, backward in ((2**62, False), (10, False), (0, True), (10, True)):
                others = [owner, "other"]
                if table == "knowledge_revisions":
                    if not backward:
                        revision_rows(conn, others, before, 21)
                else:
                    task_store.history_rows(conn, table, others, before, 21, backward)
        task_store.latest_submission_row(conn, task["id"])

    async def grow(count: int) -> None:
        def unit(conn: sqlite3.Connection) -> None:
            for table, key, owner in histories:
                _copy_history(conn, table, key, owner, count)

        await service.rt.db.write(unit)

    await grow(30)
    few = await _steps(service, pages)
    await grow(1470)
    many = await _steps(service, pages)
    assert many <= few + few // 100, (few, many)


async def test_a_page_of_a_tasks_decisions_costs_the_same_among_many(
    service: Service, human: Caller, project: str
) -> None:
    """`Task.decisions`: a page forwards, backwards and past a cursor looked
    up every pin of the task and numbered all its decisions (41 ms at 20,000
    on one task); it is one range of the task's list now (migration 0031)."""
    from tests.decisions_support import new_task, open_decision
    from waypost.resolvers.decisions import lists_store

    task = await new_task(human)
    middle: list[tuple[str, str]] = []

    def pages(conn: sqlite3.Connection) -> None:
        for start, backward in ((("\uffff", ""), False), (("", ""), True), (middle[0], False)):
            rows = lists_store.by_task_rows(conn, [task], start, 3, backward)
            assert len(rows) == 3, rows

    for _ in range(8):
        await open_decision(human, [task])
    found = await service.rt.db.read(
        lambda c: lists_store.by_task_rows(c, [task], ("\uffff", ""), 5, False)
    )
    middle.append((found[-1]["created_at"], found[-1]["id"]))  # older than the newest 4
    few = await _steps(service, pages)
    for _ in range(300):
        await open_decision(human, [task])
    many = await _steps(service, pages)
    assert many <= few + few // 100, (few, many)


async def test_migration_0031_lists_the_decisions_of_existing_tasks(
    service: Service, human: Caller, project: str, tmp_path: Path
) -> None:
    """Every task's list, from the pins already recorded (a decision on two
    tasks, a reopened one pinning its task again), is the one the trigger
    writes."""
    from tests.decisions_support import new_task, open_decision, reopen
    from tests.migration_support import copy_before, migration

    one, two = await new_task(human), await new_task(human, "Two")
    await open_decision(human, [one, two])
    again = await open_decision(human, [two])
    assert (await reopen(human, again["id"], 1)).status_code == 200
    query = "SELECT task_id, created_at, decision_id FROM task_decisions ORDER BY 1, 2, 3"
    expected = await service.rt.db.read(lambda c: [tuple(r) for r in c.execute(query)])
    assert len(expected) == 3
    conn = copy_before(service.db_path, tmp_path / "upgrade.db", "0031")
    try:
        conn.executescript(migration("0031").sql)
        assert [tuple(r) for r in conn.execute(query)] == expected
    finally:
        conn.close()


async def test_expired_decisions_cost_the_same_among_many_still_to_expire(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `expired` count and page walked every decision with an expiry,
    passed or not (6.4 ms for the count at 20,000 future expiries, asked by
    the console's inbox on every poll); by expiry (migration 0033) they cost
    the same with 4 future expiries as with 300. Both ways of a page (the
    passed ones sorted, or the list-order walk when more than FEW_EXPIRED
    have passed) give the same pages, forwards and backwards."""
    from tests.decisions_support import new_task, open_decision
    from waypost.resolvers.decisions import lists_store

    task = await new_task(human)
    hours = [5, 1, 9, 3, 12, 2, 7, 4, 11, 6, 8, 10]  # expiries, out of creation order
    for h in hours:
        await open_decision(human, [task], expires_at=f"2026-11-30T{h:02d}:00:00Z")
        service.clock.advance(seconds=1)
    service.clock.advance(hours=12)  # now 2026-11-30T06:00:12Z: 6 have expired
    now = service.clock.iso()

    def walk(conn: sqlite3.Connection, backward: bool) -> list[str]:
        found: list[str] = []
        after = ("\uffff", "") if backward else ("", "")
        while True:
            rows = lists_store.list_page_rows(conn, project, now, "expired", after, 2, backward)
            found += [r["decision_id"] for r in rows]
            if len(rows) < 2:
                return found
            after = (rows[-1]["created_at"], rows[-1]["decision_id"])

    def both_ways(conn: sqlite3.Connection) -> tuple[list[str], list[str], int]:
        return (
            walk(conn, False),
            walk(conn, True),
            lists_store.count_of_status(conn, project, now, "expired"),
        )

    sorted_way = await service.rt.db.read(both_ways)
    forward, backward, count = sorted_way
    assert count == 6 and len(forward) == 6 and backward == forward[::-1]
    monkeypatch.setattr(lists_store, "FEW_EXPIRED", -1)
    assert await service.rt.db.read(both_ways) == sorted_way
    monkeypatch.undo()

    def lists(conn: sqlite3.Connection) -> None:
        lists_store.list_page_rows(conn, project, now, "expired", ("", ""), 51)
        lists_store.count_of_status(conn, project, now, "expired")

    for _ in range(4):
        await open_decision(human, [task], expires_at="2026-12-30T00:00:00Z")
    few = await _steps(service, lists)
    for _ in range(296):
        await open_decision(human, [task], expires_at="2026-12-30T00:00:00Z")
    many = await _steps(service, lists)
    assert many <= few + few // 100, (few, many)


@pytest.mark.parametrize("table", ["knowledge", "tasks"])
async def test_a_list_filtered_by_a_common_term_walks_its_index_on_an_analyzed_file(
    service: Service, human: Caller, project: str, table: str
) -> None:
    """With planner statistics (an operator's ANALYZE, the bench files'
    `PRAGMA optimize`), SQLite drove a `q` list of many matches by rowid
    from the full-text index and sorted every match for one page: 330 ms
    for `the` at 100,000 records, against 13 ms walking the list's index
    (scaleaudit)."""
    if table == "knowledge":
        first = await create(human, project, title="retry budget")
    else:
        made = await human.post(f"/api/v1/projects/{project}/tasks", {"title": "retry budget"})
        assert made.status_code == 201, made.text
        first = made.json()
    match = '"retry"'
    conn = sqlite3.connect(service.db_path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        row = dict(conn.execute(f"SELECT * FROM {table} WHERE id = ?", (first["id"],)).fetchone())
        columns, marks = ", ".join(row), ", ".join("?" for _ in row)
        conn.execute("BEGIN")
        for n in range(1200):  # past FEW_MATCHES, so the list walks its index
            row["id"] = f"{first['id'][:12]}_{n}"
            conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(row.values()))
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        if table == "knowledge":
            rows = list_rows(conn, project, KnowledgeListQuery(q="retry"), match, None, 51)
        else:
            rows = task_store.list_rows(conn, project, None, 51, match=match)
        conn.set_trace_callback(None)
        plans = [
            str(row[3])
            for sql in statements
            if sql.startswith("SELECT t.*") or sql.startswith("SELECT k.*")
            for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")
        ]
    finally:
        conn.close()
    assert len(rows) == 51
    assert plans and not any("TEMP B-TREE FOR ORDER BY" in p for p in plans), plans


async def test_a_packets_decisions_cost_a_page_however_many_are_unresolved(
    service: Service, human: Caller, project: str
) -> None:
    """Each status's range was read whole and all of them sorted for the
    oldest few: after one rules edit made 55,561 decisions stale, every
    packet sorted them (28 ms; scaleaudit). Each range stops at the count
    now, and the answer is the same oldest first."""
    from tests.decisions_support import new_task, open_decision
    from waypost.resolvers.decisions.lists_store import unresolved_ids
    from waypost.resolvers.decisions.operations import UNRESOLVED

    task = await new_task(human)
    now = service.clock.iso()

    def oldest(conn: sqlite3.Connection) -> list[str]:
        return unresolved_ids(conn, project, now, UNRESOLVED, None, 3)

    opened = [(await open_decision(human, [task]))["id"] for _ in range(5)]
    assert await service.rt.db.read(oldest) == opened[:3]
    few = await _steps(service, oldest)
    for _ in range(200):
        await open_decision(human, [task])
    many = await _steps(service, oldest)
    assert many <= few + few // 10, (few, many)
    assert await service.rt.db.read(oldest) == opened[:3]


async def test_an_agents_live_session_is_found_among_many_ended_ones_at_one_cost(
    service: Service,
) -> None:
    """`GET /api/v1/me` without `Waypost-Session` names the agent's live
    session that expires last: it walked every session of the agent not yet
    expired, reading each to skip the ended ones (15-22 ms for an agent that
    started and ended 20,000 in 15 minutes; sessionsjourney). It reads the
    live ones alone now, whatever the ended ones."""
    from waypost.resolvers.access.store import latest_live_session_row

    agent = await service.agent("a-session-per-request")
    now = service.clock.iso()

    def ended(count: int) -> Any:
        def unit(conn: sqlite3.Connection) -> None:
            # later expiries than the live one: the walk met them first
            conn.executemany(
                "INSERT INTO sessions (id, principal_id, started_at, expires_at, ended_at)"
                " VALUES (?, ?, ?, '2099-01-01T00:00:00.000Z', ?)",
                [(f"ses_ended_{count}_{n}", agent.principal_id, now, now) for n in range(count)],
            )

        return unit

    def latest(conn: sqlite3.Connection) -> str:
        row = latest_live_session_row(conn, agent.principal_id, now)
        assert row is not None
        return str(row["id"])

    await service.rt.db.write(ended(5))
    assert await service.rt.db.read(latest) == agent.session_id
    few = await _steps(service, latest)
    await service.rt.db.write(ended(2000))
    many = await _steps(service, latest)
    assert await service.rt.db.read(latest) == agent.session_id
    assert many <= few + few // 100, (few, many)
    plans = await _plans(service, latest)
    assert any("sessions_live_by_principal" in p for p in plans), plans
    assert not any("TEMP B-TREE" in p for p in plans), plans
