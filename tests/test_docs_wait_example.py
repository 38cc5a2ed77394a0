"""docs/graphql.md's httpx example of waiting on a decision instead of
polling, run as printed (its base URL and token replaced) against the
service on a real socket."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from tests.conftest import Caller, Service
from tests.decisions_support import answer, new_task, open_decision, reopen
from tests.live_support import running

DOC = Path(__file__).resolve().parent.parent / "docs" / "graphql.md"


def _example(base: str, token: str) -> dict[str, Any]:
    """The example's definitions (the lines before its usage), executed."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    [block] = [b for b in blocks if "def wait_for_answer" in b]
    definitions = block[: block.index("r = httpx.post(")]
    text = definitions.replace('"http://127.0.0.1:8080"', repr(base))
    text = text.replace('"Bearer wp_..."', repr(f"Bearer {token}"))
    scope: dict[str, Any] = {}
    exec(compile(text, str(DOC), "exec"), scope)
    return scope


async def test_the_wait_example_waits_out_a_reopened_decision(
    service: Service, human: Caller, project: str
) -> None:
    """It read the project's whole log (`Last-Event-ID: 0`) and took the first
    generation's answer event for an answer: after a reopening it returned
    at once while the decision was pending again."""
    task_id = await new_task(human)
    decision = await open_decision(human, [task_id])
    await answer(human, decision["id"], disposition="deny", answer="Stop",
                 conditions_confirmed=False)  # fmt: skip
    reopened = await reopen(human, decision["id"], 1)
    assert reopened.status_code == 200, reopened.text
    async with running(service) as base:
        wait_for_answer = _example(base, human.token)["wait_for_answer"]
        waiting = asyncio.create_task(asyncio.to_thread(wait_for_answer, project, {decision["id"]}))
        await asyncio.sleep(1.5)  # three keep-alives (0.5 s here), each a re-read
        assert not waiting.done(), "it returned while the decision was pending"
        await answer(human, decision["id"], 2)
        await asyncio.wait_for(waiting, 10)
