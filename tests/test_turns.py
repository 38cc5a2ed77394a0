"""storage/turns.py: a place that comes free goes to the caller served
least lately; a cancelled wait loses nothing and keeps no place."""

from __future__ import annotations

import asyncio

from waypost.cancelling import holding_until_done
from waypost.storage.turns import FairGate


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_places_go_in_turn_to_the_callers_waiting() -> None:
    gate = FairGate(1)
    order: list[str] = []

    async def take(who: str) -> None:
        await gate.acquire(who)
        order.append(who)

    await gate.acquire("a")  # a holds the place; a, a, b, c, b wait
    waits = [asyncio.create_task(take(who)) for who in ("a", "a", "b", "c", "b")]
    await _settle()
    assert gate.waiting() == 5
    holder = "a"
    for _ in waits:
        gate.release(holder)  # whoever holds the place gives it back
        await _settle()
        holder = order[-1]
    # b and c (never served) before a's second; then in turn
    assert order == ["b", "c", "a", "b", "a"], order
    gate.release(holder)
    assert not gate.locked() and gate.waiting() == 0
    assert gate._served == {} and not gate._holding  # nothing kept for idle callers


async def test_one_caller_alone_gets_every_place_in_order() -> None:
    gate = FairGate(1)
    await gate.acquire("a")
    waits = [asyncio.create_task(gate.acquire("a")) for _ in range(3)]
    await _settle()
    for i in range(3):
        gate.release("a")
        await _settle()
        assert [w.done() for w in waits] == [j <= i for j in range(3)]
    gate.release("a")
    assert not gate.locked()


async def test_a_cancelled_wait_keeps_no_place_and_loses_none() -> None:
    gate = FairGate(1)
    await gate.acquire("a")
    gone = asyncio.create_task(gate.acquire("b"))
    kept = asyncio.create_task(gate.acquire("c"))
    await _settle()
    gone.cancel()
    await _settle()
    assert gone.cancelled() and gate.waiting() == 1
    gate.release("a")
    await _settle()
    assert kept.done()  # the place went to c, not to the caller that left
    gate.release("c")
    assert not gate.locked() and gate._served == {}


async def test_a_place_given_as_its_waiter_is_cancelled_is_passed_on() -> None:
    gate = FairGate(1)
    await gate.acquire("a")
    given = asyncio.create_task(gate.acquire("b"))
    after = asyncio.create_task(gate.acquire("c"))
    await _settle()
    gate.release("a")  # b's wait is granted ...
    given.cancel()  # ... and cancelled before it runs on
    await _settle()
    assert given.cancelled() and after.done()  # c has the place b could not use
    gate.release("c")
    assert not gate.locked() and gate.waiting() == 0


async def test_holding_until_done_takes_the_callers_turn() -> None:
    gate = FairGate(1)
    release = asyncio.Event()
    ran: list[str] = []

    async def work(who: str) -> str:
        ran.append(who)
        if who == "a":
            await release.wait()
        return who

    first = asyncio.create_task(holding_until_done(gate.of("a"), lambda: work("a")))
    await _settle()
    rest = [
        asyncio.create_task(holding_until_done(gate.of(w), lambda w=w: work(w)))  # type: ignore[misc]
        for w in ("a", "a", "b")
    ]
    await _settle()
    release.set()
    assert await asyncio.gather(first, *rest) == ["a", "a", "a", "b"]
    assert ran == ["a", "b", "a", "a"]
