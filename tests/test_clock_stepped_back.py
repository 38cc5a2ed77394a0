"""The service's clock stepped back (an NTP correction, a VM restored from a
snapshot) while it serves: what is ordered by sequence stays so, and a renew
starts its period from the clock as it now reads (docs/api.md, docs/tasks.md)."""

from __future__ import annotations

from tests.conftest import Caller, Service
from tests.tasks_support import BASE, claimed_by_agent, make_task, task_path


async def test_events_written_after_the_clock_stepped_back_follow_by_sequence(
    service: Service, human: Caller, project: str
) -> None:
    """docs/api.md: the event log is `after=SEQ`, ordered by sequence, not by
    time; an event stamped earlier (the clock stepped back) still comes after
    those written before it, and a walk by `next_after` meets each once."""
    await make_task(human, "before the step")
    service.clock.advance(hours=-1)
    await make_task(human, "after the step")
    await make_task(human, "after the step, again")
    everything = (await human.get(f"{BASE}/events", after=0, limit=200)).json()["items"]
    sequences = [e["sequence"] for e in everything]
    assert sequences == sorted(sequences)
    times = [e["at"] for e in everything]
    assert times != sorted(times)  # the step is in the log: later events stamped earlier
    walked: list[int] = []
    after = 0
    while True:
        page = (await human.get(f"{BASE}/events", after=after, limit=1)).json()
        if not page["items"]:
            break
        walked += [e["sequence"] for e in page["items"]]
        after = page["next_after"]
    assert walked == sequences


async def test_a_renew_under_a_clock_stepped_back_starts_its_period_from_now(
    service: Service, human: Caller, project: str
) -> None:
    """docs/tasks.md: `renew` starts a new period from now. Unlike a session's
    heartbeat (which never shortens, docs/api.md), a renew after the clock
    stepped back an hour gives now + lease_seconds, earlier than the expiry it
    replaces: the lease is again lease_seconds long by the service's clock."""
    task, agent = await claimed_by_agent(service, human)
    lease = (await human.get(task_path(task["id"]))).json()["lease"]
    assert lease["expires_at"] == "2026-11-29T18:15:00.000Z"
    service.clock.advance(hours=-1)
    r = await agent.post(task_path(task["id"], "renew"))
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["expires_at"] == "2026-11-29T17:15:00.000Z"
    stored = (await human.get(task_path(task["id"]))).json()["lease"]
    assert stored["expires_at"] == "2026-11-29T17:15:00.000Z"
