"""Each kind is read one past `limit`, so a packet of
one kind only still says it was cut (packet.py read_sync's `limit + 1`).
(Unpinned before: mutantaudit5.)"""

from __future__ import annotations

from tests.conftest import Caller
from tests.context_support import context, knowledge, task
from tests.tasks_support import open_decision


async def test_matches_alone_past_the_limit_are_truncated(human: Caller, project: str) -> None:
    for n in range(4):
        await knowledge(human, f"zebra {n}")
    packet = await context(human, "zebra", limit=3)
    assert len(packet["items"]) == 3
    assert packet["truncated"] is True
    assert any("limit=3" in a for a in packet["next_actions"])


async def test_decisions_alone_past_the_limit_are_truncated(human: Caller, project: str) -> None:
    t = await task(human, "walrus")
    for _ in range(4):
        await open_decision(human, t["id"])
    packet = await context(human, "nomatchword", limit=3)
    assert [i["type"] for i in packet["items"]] == ["decision"] * 3
    assert packet["truncated"] is True
    assert any("limit=3" in a for a in packet["next_actions"])
