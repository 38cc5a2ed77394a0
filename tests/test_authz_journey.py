"""authzjourney: completion rules by caller kind that only the slow task
state machine held. Under review_mode `any` a human who made the latest
submission is the submitter like any agent, and may not complete it;
another human may (docs/tasks.md, "Submission and completion")."""

from __future__ import annotations

from tests.conftest import Caller, Service
from tests.tasks_support import claim, error, make_task, set_policy, submit, task_path


async def test_a_human_submitter_cannot_complete_its_own_task_under_review_mode_any(
    service: Service, human: Caller, project: str
) -> None:
    await set_policy(human, review_mode="any")
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    r = await human.post(task_path(task["id"], "complete"))
    assert error(r) == (403, "forbidden", {"reason": "review_mode", "review_mode": "any"})
    other = await service.principal("human", "second-human")
    r = await other.post(task_path(task["id"], "complete"))
    assert r.status_code == 200 and r.json()["status"] == "done"


async def test_an_agent_completes_a_human_submission_under_review_mode_any(
    service: Service, human: Caller, project: str
) -> None:
    await set_policy(human, review_mode="any")
    task = await make_task(human)
    await claim(human, task["id"])
    await submit(human, task["id"])
    agent = await service.agent("reviewer")
    r = await agent.post(task_path(task["id"], "complete"))
    assert r.status_code == 200 and r.json()["status"] == "done"
