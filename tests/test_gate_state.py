"""The stored gate state (migration 0014) against the gate itself, through every
transition that changes what a decision blocks: each answer, expiry by the mere
passing of time (and a clock moved back), staleness by a judged task edit and
by a rules edit (and neither by other edits), reopening, cancelling and
reopening a task, and the sweep's timeout answer.

Each step checks, for every task of the project, that the stored state the
claim walks agrees with the gate derived from the history, and that the
`ready=true` list, the task's `ready` and an ordinary claim all agree with it
(`gate_state_support.claimable`)."""

from __future__ import annotations

from tests.conftest import Caller, Service
from tests.decisions_support import decision_path, edit_task, open_decision, reopen
from tests.gate_state_support import answer, assert_gate_exact, claimable
from tests.tasks_support import make_task, set_policy
from waypost.resolvers.core import sweep


async def top_and_spare(human: Caller, service: Service) -> tuple[str, str]:
    """A task an ordinary claim prefers (priority 9) and a spare one behind it, so
    the claim takes the first exactly when it is claimable."""
    top = (await make_task(human, "top", priority=9))["id"]
    service.clock.advance(seconds=1)
    spare = (await make_task(human, "spare", priority=0))["id"]
    return top, spare


async def test_each_answer_deny_defer_allow_and_each_reopening(
    service: Service, human: Caller, project: str
) -> None:
    top, _ = await top_and_spare(human, service)
    agent = await service.agent()
    assert await claimable(service, human, agent, top)
    decision = (await open_decision(human, [top]))["id"]
    assert not await claimable(service, human, agent, top)
    await answer(human, decision, "deny", 1)
    assert not await claimable(service, human, agent, top)
    assert (await reopen(human, decision, 1)).status_code == 200
    await answer(human, decision, "defer", 2)
    assert not await claimable(service, human, agent, top)
    assert (await reopen(human, decision, 2)).status_code == 200
    assert not await claimable(service, human, agent, top)
    await answer(human, decision, "allow", 3)
    assert await claimable(service, human, agent, top)
    # reopening a live allow blocks again until the next answer
    assert (await reopen(human, decision, 3)).status_code == 200
    assert not await claimable(service, human, agent, top)
    await answer(human, decision, "allow", 4)
    assert await claimable(service, human, agent, top)


async def test_two_decisions_on_one_task_both_must_allow(
    service: Service, human: Caller, project: str
) -> None:
    top, _ = await top_and_spare(human, service)
    agent = await service.agent()
    first = (await open_decision(human, [top]))["id"]
    second = (await open_decision(human, [top]))["id"]
    await answer(human, first, "allow", 1)
    assert not await claimable(service, human, agent, top)
    await answer(human, second, "allow", 1)
    assert await claimable(service, human, agent, top)


async def test_expiry_by_the_clock_alone_with_no_write(
    service: Service, human: Caller, project: str
) -> None:
    top, _ = await top_and_spare(human, service)
    activity = (await make_task(human, "review", priority=5, subject_task_id=top))["id"]
    agent = await service.agent()
    decision = await open_decision(human, [top], expires_at="2026-11-29T18:10:00Z")
    await answer(human, decision["id"], "allow", 1)
    assert await claimable(service, human, agent, top)
    service.clock.advance(minutes=10, seconds=-1)  # 18:10:00, exactly at expires_at: expired
    assert not await claimable(service, human, agent, top)
    # the activity's subject is expired too; nothing in the store was written
    assert (await assert_gate_exact(service))[activity] is False
    service.clock.advance(minutes=-1)  # a clock set back: allowed again, as the status says
    assert await claimable(service, human, agent, top)
    service.clock.advance(minutes=2)
    # an expired decision is reopened with a new expiry, then answered again
    r = await reopen(human, decision["id"], 1, expires_at="2026-11-29T19:00:00Z")
    assert r.status_code == 200, r.text
    assert not await claimable(service, human, agent, top)
    await answer(human, decision["id"], "allow", 2)
    assert await claimable(service, human, agent, top)


async def test_a_pending_decision_that_expires_stays_blocking(
    service: Service, human: Caller, project: str
) -> None:
    top, _ = await top_and_spare(human, service)
    agent = await service.agent()
    await open_decision(human, [top], expires_at="2026-11-29T18:05:00Z")
    assert not await claimable(service, human, agent, top)
    service.clock.advance(minutes=6)
    assert not await claimable(service, human, agent, top)


async def test_stale_by_a_judged_edit_of_another_affected_task(
    service: Service, human: Caller, project: str
) -> None:
    top, spare = await top_and_spare(human, service)
    other = (await make_task(human, "other", priority=1))["id"]
    activity = (await make_task(human, "review", priority=5, subject_task_id=top))["id"]
    agent = await service.agent()
    decision = (await open_decision(human, [top, other]))["id"]
    await answer(human, decision, "allow", 1)
    assert await claimable(service, human, agent, top)
    # priority and dependency edits are not judged: the allow holds
    await edit_task(human, other, priority=2)
    await edit_task(human, other, depends_on=[spare])
    assert await claimable(service, human, agent, top)
    await edit_task(human, other, description="the scope grew")
    assert not await claimable(service, human, agent, top)
    state = await assert_gate_exact(service)
    assert state[other] is False and state[activity] is False
    # reopened against the current revisions and allowed: free again
    assert (await reopen(human, decision, 1)).status_code == 200
    assert not await claimable(service, human, agent, top)
    await answer(human, decision, "allow", 2)
    assert await claimable(service, human, agent, top)
    assert (await assert_gate_exact(service))[activity] is True


async def test_stale_by_a_rules_edit_but_not_by_other_policy_edits(
    service: Service, human: Caller, project: str
) -> None:
    top, _ = await top_and_spare(human, service)
    agent = await service.agent()
    decision = (await open_decision(human, [top]))["id"]
    await answer(human, decision, "allow", 1)
    await set_policy(human, lease_seconds=1200, review_mode="any")
    assert await claimable(service, human, agent, top)
    await set_policy(human, rules="No deploys on Fridays.")
    assert not await claimable(service, human, agent, top)
    assert (await reopen(human, decision, 1)).status_code == 200
    await answer(human, decision, "allow", 2)
    assert await claimable(service, human, agent, top)


async def test_cancel_and_reopen_of_the_task_keep_to_the_gate(
    service: Service, human: Caller, project: str
) -> None:
    top, _ = await top_and_spare(human, service)
    agent = await service.agent()
    decision = (await open_decision(human, [top]))["id"]
    await edit_task(human, top, status="cancelled")
    assert not await claimable(service, human, agent, top)
    await edit_task(human, top, status="open")
    assert not await claimable(service, human, agent, top)  # still decision-blocked
    await answer(human, decision, "allow", 1)
    await edit_task(human, top, status="cancelled")
    assert not await claimable(service, human, agent, top)
    await edit_task(human, top, status="open")
    assert await claimable(service, human, agent, top)


async def test_the_sweeps_timeout_answer_frees_the_task(
    service: Service, human: Caller, project: str
) -> None:
    top, _ = await top_and_spare(human, service)
    await open_decision(human, [top], recommendation="Proceed", reversible=True)
    service.clock.advance(hours=24, seconds=1)
    agent = await service.agent()  # a session started after the day went by
    assert not await claimable(service, human, agent, top)
    report = await sweep.run_once(service.rt)
    assert report["decisions_timed_out"] == 1
    assert await claimable(service, human, agent, top)


async def test_a_new_activity_inherits_its_subjects_hold(
    service: Service, human: Caller, project: str
) -> None:
    subject, _ = await top_and_spare(human, service)
    decision = (await open_decision(human, [subject]))["id"]
    activity = (await make_task(human, "review", priority=20, subject_task_id=subject))["id"]
    agent = await service.agent()
    assert not await claimable(service, human, agent, activity)
    await answer(human, decision, "allow", 1)
    assert await claimable(service, human, agent, activity)
    r = await human.get(decision_path(decision))
    assert r.json()["status"] == "allowed"
