"""Status from pins: which edits invalidate an allow, expiry, and the status order."""

from __future__ import annotations

import itertools
import sqlite3
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import (
    edit_task,
    get_decision,
    get_task,
    new_task,
    open_decision,
    send_answer,
    set_policy,
)
from waypost.resolvers.decisions.operations import unresolved_sync
from waypost.resolvers.decisions.status import (
    STATUS_WHERE,
    STATUSES,
    decision_status,
    work_allowed,
)


async def _allowed(human: Caller, task_ids: list[str], **overrides: Any) -> str:
    decision = await open_decision(human, task_ids, **overrides)
    r = await send_answer(human, decision["id"])
    assert r.json()["status"] == "allowed", r.text
    return str(decision["id"])


@pytest.mark.parametrize(
    "edit",
    [
        {"title": "A different migration"},
        {"description": "Now also drops a column."},
        {"acceptance_criteria": ["row counts match"]},
        {"kind": "chore"},
    ],
)
async def test_a_judged_field_edit_makes_an_allow_stale(
    human: Caller, project: str, edit: dict[str, Any]
) -> None:
    task = await new_task(human)
    decision = await _allowed(human, [task])
    await edit_task(human, task, **edit)
    found = await get_decision(human, decision)
    assert found["status"] == "stale" and found["work_allowed"] is False
    blocked = await get_task(human, task)
    assert blocked["ready"] is False and blocked["blocked_by"]["decisions"] == [decision]


async def test_priority_and_dependency_edits_keep_an_allow(human: Caller, project: str) -> None:
    task = await new_task(human)
    dependency = await new_task(human, "Back up the table")
    decision = await _allowed(human, [task])
    await edit_task(human, task, priority=7)
    await edit_task(human, task, depends_on=[dependency])
    await edit_task(human, task, depends_on=[])
    assert (await get_task(human, task))["revision"] == 4
    assert (await get_decision(human, decision))["status"] == "allowed"
    assert (await get_task(human, task))["ready"] is True


async def test_a_patch_that_sets_judged_fields_to_their_current_values_keeps_an_allow(
    human: Caller, project: str
) -> None:
    task = await new_task(human, description="Rewrite billing.", acceptance_criteria=["ok"])
    decision = await _allowed(human, [task])
    same = await get_task(human, task)
    judged = {f: same[f] for f in ("title", "description", "acceptance_criteria", "kind")}
    await edit_task(human, task, **judged)  # nothing differs: a revision changing nothing
    await edit_task(human, task, **judged, priority=3)  # only the priority differs
    revisions = (await human.get(f"/api/v1/projects/demo/tasks/{task}/revisions")).json()["items"]
    assert [(x["revision"], x["changed_fields"], x["judged_change"]) for x in revisions[:2]] == [
        (3, ["priority"], False), (2, [], False)
    ]  # fmt: skip
    assert (await get_decision(human, decision))["status"] == "allowed"
    assert (await get_task(human, task))["ready"] is True


async def test_a_judged_edit_that_is_undone_leaves_the_allow_stale_until_reopened(
    human: Caller, project: str
) -> None:
    task = await new_task(human, "Migrate the billing table")
    decision = await _allowed(human, [task])
    await edit_task(human, task, title="Drop the billing table")
    await edit_task(human, task, title="Migrate the billing table")
    assert (await get_decision(human, decision))["status"] == "stale"
    assert (await get_task(human, task))["ready"] is False


async def test_a_rules_edit_that_is_undone_leaves_the_allow_stale_until_reopened(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await _allowed(human, [task])
    await set_policy(human, rules="Deploys need two reviewers.")
    await set_policy(human, rules="")
    assert (await get_decision(human, decision))["status"] == "stale"


async def test_a_judged_edit_to_one_task_of_a_multi_task_scope_blocks_every_task(
    human: Caller, project: str
) -> None:
    first = await new_task(human)
    second = await new_task(human, "Migrate the invoices table")
    decision = await _allowed(human, [first, second])
    await edit_task(human, second, title="Migrate the invoices and credits tables")
    assert (await get_decision(human, decision))["status"] == "stale"
    for task in (first, second):
        assert (await get_task(human, task))["blocked_by"]["decisions"] == [decision]


async def test_a_rules_text_edit_makes_an_allow_stale(human: Caller, project: str) -> None:
    task = await new_task(human)
    decision = await _allowed(human, [task])
    await set_policy(human, rules="Deploys need two reviewers.")
    assert (await get_decision(human, decision))["status"] == "stale"
    assert (await get_task(human, task))["ready"] is False


@pytest.mark.parametrize(
    "change",
    [
        {"lease_seconds": 1200},
        {"review_mode": "any"},
        {"agent_rule_editing": True},
        {"allow_relayed_human_answers": True},
        {"rules": ""},  # the same text as before: no change to what was judged
    ],
)
async def test_other_policy_changes_keep_an_allow(
    human: Caller, project: str, change: dict[str, Any]
) -> None:
    task = await new_task(human)
    decision = await _allowed(human, [task])
    await set_policy(human, **change)
    assert (await get_decision(human, decision))["status"] == "allowed"


async def test_an_allow_expires_at_its_expiry(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await _allowed(human, [task], expires_at="2026-11-29T20:00:00.000Z")
    service.clock.advance(hours=1, minutes=59, seconds=59)
    assert (await get_decision(human, decision))["status"] == "allowed"
    service.clock.advance(seconds=1)
    found = await get_decision(human, decision)
    assert found["status"] == "expired" and found["work_allowed"] is False
    assert (await get_task(human, task))["ready"] is False


async def test_expiry_wins_over_a_stale_pin(service: Service, human: Caller, project: str) -> None:
    task = await new_task(human)
    decision = await _allowed(human, [task], expires_at="2026-11-29T19:00:00.000Z")
    await edit_task(human, task, title="Changed")
    assert (await get_decision(human, decision))["status"] == "stale"
    service.clock.advance(hours=2)
    assert (await get_decision(human, decision))["status"] == "expired"


@pytest.mark.parametrize("disposition", ["deny", "defer"])
async def test_a_stale_pin_wins_over_deny_and_defer(
    human: Caller, project: str, disposition: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await send_answer(human, decision["id"], disposition=disposition, answer="Stop")
    await edit_task(human, task, description="changed")
    assert (await get_decision(human, decision["id"]))["status"] == "stale"


async def test_an_unanswered_decision_goes_stale_when_its_task_changes(
    human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task])
    await edit_task(human, task, kind="bugfix")
    assert (await get_decision(human, decision["id"]))["status"] == "stale"


async def test_only_the_current_generation_blocks_a_task(human: Caller, project: str) -> None:
    task = await new_task(human)
    allowed = await _allowed(human, [task])
    pending = await open_decision(human, [task])
    ready = await get_task(human, task)
    assert ready["blocked_by"]["decisions"] == [pending["id"]]
    assert allowed not in ready["blocked_by"]["decisions"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("allow", None, "2026-01-01T00:00:00.000Z", False), "allowed"),
        (("deny", None, "2026-01-01T00:00:00.000Z", False), "denied"),
        (("defer", None, "2026-01-01T00:00:00.000Z", False), "deferred"),
        ((None, None, "2026-01-01T00:00:00.000Z", False), "pending"),
        (("allow", None, "2026-01-01T00:00:00.000Z", True), "stale"),
        ((None, "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z", True), "expired"),
        (("allow", "2026-01-01T00:00:00.001Z", "2026-01-01T00:00:00.000Z", False), "allowed"),
    ],
)
def test_status_function_applies_the_contract_order(
    args: tuple[Any, Any, Any, Any], expected: str
) -> None:
    status = decision_status(*args)
    assert status == expected
    assert work_allowed(status) is (expected == "allowed")


def test_the_stored_status_conditions_say_what_the_function_says() -> None:
    """`STATUS_WHERE` (the lists' filters over stored state) against
    `decision_status`, on every combination of their inputs: exactly one
    condition holds for each, and it is the function's status."""
    conn = sqlite3.connect(":memory:")
    now = "2026-01-01T00:00:00.000Z"
    expiries = [None, "2025-12-31T23:59:59.999Z", now, "2026-01-01T00:00:00.001Z"]
    for disposition, expires_at, stale in itertools.product(
        [None, "allow", "deny", "defer"], expiries, [0, 1]
    ):
        held = conn.execute(
            "SELECT " + ", ".join(f"({where})" for where in STATUS_WHERE.values()) + " FROM"
            " (SELECT :expires AS expires_at, :stale AS stale,"
            "  :disposition IS NOT NULL AS answered, :disposition AS disposition) h",
            {"expires": expires_at, "stale": stale, "disposition": disposition, "now": now},
        ).fetchone()
        matching = [status for status, hit in zip(STATUS_WHERE, held, strict=True) if hit]
        assert matching == [decision_status(disposition, expires_at, now, stale)], (
            disposition, expires_at, stale,
        )  # fmt: skip
    assert set(STATUS_WHERE) == set(STATUSES)


async def test_unresolved_lists_pending_and_invalidated_decisions_for_a_task_or_project(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    other = await new_task(human, "Other")
    pending = await open_decision(human, [task])
    service.clock.advance(seconds=1)
    stale = await _allowed(human, [other])
    service.clock.advance(seconds=1)
    expired = await open_decision(human, [task], expires_at="2026-11-29T18:30:00.000Z")
    await _allowed(human, [task])
    denied = await open_decision(human, [task])
    await send_answer(human, denied["id"], disposition="deny", answer="Stop")
    await edit_task(human, other, title="Changed")
    service.clock.advance(hours=1)
    now_at = service.clock.iso()

    def read(task_id: str | None) -> list[str]:
        def fn(conn: Any) -> list[str]:
            tasks = None if task_id is None else [task_id]
            return [d["id"] for d in unresolved_sync(conn, "demo", now_at, tasks)]

        return fn

    assert await service.rt.db.read(read(None)) == [pending["id"], stale, expired["id"]]
    assert await service.rt.db.read(read(task)) == [pending["id"], expired["id"]]
    assert await service.rt.db.read(read(other)) == [stale]


async def test_a_status_filter_lists_and_counts_exactly_the_decisions_of_that_status(
    service: Service, human: Caller, project: str
) -> None:
    """Every status at once, expiry beside a stale pin and beside each answer:
    the REST list, and the GraphQL list and `totalCount`, of each status hold
    exactly the decisions whose own status it is (the expired filter tests
    the expiry before the pins, lists_store._of_status)."""
    soon = "2026-11-29T19:00:00.000Z"
    tasks = [await new_task(human, f"Task {n}") for n in range(4)]
    made: list[str] = []
    for expires_at in (None, soon):
        extra = {"expires_at": expires_at} if expires_at else {}
        made.append((await open_decision(human, [tasks[0]], **extra))["id"])  # pending
        made.append(await _allowed(human, [tasks[1]], **extra))
        for disposition in ("deny", "defer"):
            decision = await open_decision(human, [tasks[2]], **extra)
            await send_answer(human, decision["id"], disposition=disposition, answer="Stop")
            made.append(decision["id"])
        made.append(await _allowed(human, [tasks[3]], **extra))  # stale, next
    await edit_task(human, tasks[3], title="Changed")
    service.clock.advance(hours=2)  # the second five have expired
    own = {d: (await get_decision(human, d))["status"] for d in made}
    assert sorted(own.values()) == sorted(
        ["pending", "allowed", "denied", "deferred", "stale", *["expired"] * 5]
    )
    query = """query($s: DecisionStatus) { project(id: "demo") {
        decisions(status: $s) { totalCount nodes { restId } } } }"""
    for status in ("pending", "allowed", "denied", "deferred", "stale", "expired"):
        # in list order: one creation instant (the test clock stands still), then id
        expected = sorted(d for d in made if own[d] == status)
        r = await human.get("/api/v1/projects/demo/decisions", status=status)
        assert r.status_code == 200, r.text
        assert [i["id"] for i in r.json()["items"]] == expected, status
        data = (await human.gql(query, {"s": status.upper()}))["data"]["project"]["decisions"]
        assert data["totalCount"] == len(expected), status
        assert [n["restId"] for n in data["nodes"]] == expected, status
