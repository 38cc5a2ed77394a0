"""The digest's `proceeded_by_timeout` is "most recent
first" (docs/decisions.md, The digest); no test held two of them.
(Unpinned before: mutantaudit5.)"""

from __future__ import annotations

from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import BASE, new_task, open_decision
from tests.test_decisions_sweep import run_sweep

REVERSIBLE = {"required_actor": "either", "recommendation": "Proceed", "reversible": True}


async def digest(caller: Caller) -> dict[str, Any]:
    r = await caller.get(f"{BASE}/digest")
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


async def test_proceeded_by_timeout_lists_the_most_recent_first(
    service: Service, human: Caller, project: str
) -> None:
    made = []
    for title in ("first", "second", "third"):
        made.append(
            (await open_decision(human, [await new_task(human, title)], **REVERSIBLE))["id"]
        )
        service.clock.advance(hours=24)
        assert await run_sweep(service) == 1
        service.clock.advance(minutes=5)
    listed = (await digest(human))["proceeded_by_timeout"]
    assert [d["id"] for d in listed] == made[::-1]
