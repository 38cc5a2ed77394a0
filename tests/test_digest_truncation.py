"""Each digest list is cut at its limit and `truncated`
says so exactly when something was left out (digest.py reads one past the
limit; nothing pinned it, since no test held more than 200 items).
(Unpinned before: mutantaudit5.)"""

from __future__ import annotations

from typing import Any
from unittest import mock

from tests.conftest import Caller, Service
from tests.decisions_support import BASE, new_task, open_decision
from waypost.resolvers.decisions import digest as digest_module

REVERSIBLE = {"required_actor": "either", "recommendation": "Proceed", "reversible": True}


async def digest(caller: Caller) -> dict[str, Any]:
    r = await caller.get(f"{BASE}/digest")
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


LISTS = ("pending_decisions", "timing_out_soon", "blocked_tasks")


async def test_digest_lists_are_cut_at_the_limit_and_say_so(
    service: Service, human: Caller, project: str
) -> None:
    with mock.patch.object(digest_module, "DIGEST_LIMIT", 2):
        for n in range(2):
            await open_decision(human, [await new_task(human, f"t{n}")], **REVERSIBLE)
        exactly = await digest(human)  # two of each: nothing left out
        assert [len(exactly[name]) for name in LISTS] == [2, 0, 2]
        assert not any(exactly["truncated"].values())

        await open_decision(human, [await new_task(human, "t2")], **REVERSIBLE)
        service.clock.advance(hours=19)  # all three within six hours of their timeout
        more = await digest(human)
        assert [len(more[name]) for name in LISTS] == [2, 2, 2]
        assert all(more["truncated"][name] for name in LISTS), more["truncated"]
