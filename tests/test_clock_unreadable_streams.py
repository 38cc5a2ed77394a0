"""A clock file being rewritten (operations.md "The clock file": unreadable for
a moment, `Unavailable` with `Retry-After: 1`) while a decision is followed.

The project's event stream rides it out (`still_valid` treats it as a busy
store, not a bad token), and graphql.md says a WebSocket `next` goes out with
no `extensions.now` "when the clock file cannot be read then": a passing
rewrite is not the end of a subscription. `decisionChanged` on a decision
with an `expires_at` read the clock outside that guard (`_lapsed`, to see the
expiry pass, `load_changes` to judge the status it read) and ended with
`unavailable` instead, its follower missing the answer that came next
(clockjourney)."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from datetime import datetime, timedelta
from typing import Any

from tests.conftest import Caller, MovableClock, Service
from tests.decisions_support import new_task, open_decision, send_answer
from tests.live_support import QUICK
from waypost.clock import format_time
from waypost.errors import Unavailable
from waypost.live import hub_for
from waypost.live.streams import decision_changes
from waypost.resolvers.access import principals


class _UnreadableToOneTask:
    """The movable clock, except that the task `target` finds it unreadable for
    its next `times` reads (as a simulation rewriting the file makes it);
    requests and the writer read it as usual."""

    def __init__(self, clock: MovableClock, times: int) -> None:
        self.clock = clock
        self.times = times
        self.target: asyncio.Task[Any] | None = None

    def now(self) -> datetime:
        try:
            task = asyncio.current_task()
        except RuntimeError:  # a thread with no event loop: the writer's
            task = None
        if task is not None and task is self.target and self.times > 0:
            self.times -= 1
            raise Unavailable("the clock file holds no valid instant", retry_after=1)
        return self.clock.now()


async def _follow_through_an_unreadable_clock(
    service: Service, human: Caller, expires_at: str | None, polls_first: bool
) -> list[str]:
    """Follow a decision, make the clock unreadable to the follower for its
    next two reads (after a few of its polls when `polls_first`), answer the
    decision: the statuses the follower yields."""
    hub_for(service.rt, QUICK)  # polls every 0.1 s
    task = await new_task(human)
    decision = await open_decision(human, [task], expires_at=expires_at)
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    changes = decision_changes(service.rt, actor, human.token, decision["id"])
    statuses: list[str] = []
    own_clock = service.rt.clock
    flaky = _UnreadableToOneTask(service.clock, times=2)
    async with aclosing(changes), asyncio.timeout(10):
        statuses.append((await anext(changes))["status"])

        async def following() -> dict[str, Any]:
            return await anext(changes)

        nxt = asyncio.create_task(following())
        flaky.target = nxt
        service.rt.clock = flaky
        try:
            if polls_first:
                await asyncio.sleep(0.5)  # a few of the follower's polls
            assert (await send_answer(human, decision["id"])).status_code == 200
            statuses.append((await nxt)["status"])
        finally:
            service.rt.clock = own_clock
    return statuses


async def test_an_answer_met_while_the_clock_is_unreadable_still_reaches_the_follower(
    service: Service, human: Caller, project: str
) -> None:
    """The answer wakes the follower, whose read of the decision reads the
    clock (`load_changes`, to judge the status): unreadable for a moment, it
    ended the subscription and the answer was never sent."""
    statuses = await _follow_through_an_unreadable_clock(service, human, None, polls_first=False)
    assert statuses == ["pending", "allowed"]


async def test_a_poll_for_the_expiry_while_the_clock_is_unreadable_does_not_end_the_follower(
    service: Service, human: Caller, project: str
) -> None:
    """A decision that expires tomorrow is looked at every poll to see the
    expiry pass (`_lapsed`), which reads the clock: unreadable for a moment,
    with nothing written, it ended the subscription (over the WebSocket an
    `unavailable` error and `complete`: seen against `waypost serve` with
    its clock file holding no instant for 2.5 s), so the answer written
    once the file was whole again never reached it."""
    expires = format_time(service.clock.now() + timedelta(days=1))
    statuses = await _follow_through_an_unreadable_clock(service, human, expires, polls_first=True)
    assert statuses == ["pending", "allowed"]
