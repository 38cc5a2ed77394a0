"""The timeout sweep: which decisions it answers after 24 hours, how, and which it skips."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Caller, Service
from tests.decisions_support import (
    BASE,
    decision_body,
    edit_task,
    get_decision,
    new_task,
    open_decision,
    reopen,
    send_answer,
)
from tests.serve_support import write_clock
from waypost.app import create_app
from waypost.resolvers.access import principals
from waypost.resolvers.core import sweep
from waypost.resolvers.decisions import timeouts
from waypost.settings import Settings


async def run_sweep(service: Service) -> int:
    report = await sweep.run_once(service.rt)
    count: int = report["decisions_timed_out"]
    return count


def insert_agent_asked_human_decision(db_path: Path, task_id: str, agent_id: str, at: str) -> str:
    """A reversible human-required decision an agent opened, as rows recorded before
    the service refused them (the API no longer accepts one)."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO decisions VALUES ('dec_legacy', 'demo', 'Legacy?', ?,"
            " 'old row', 'human', 'Proceed', 1, 1, ?, ?, 'agent')",
            ('["Proceed", "Stop"]', at, agent_id),
        )
        conn.execute(
            "INSERT INTO decision_generations VALUES ('dec_legacy', 1, 1, 'staging', '[]', NULL,"
            " NULL, ?, 'agent', NULL, ?)",
            (agent_id, at),
        )
        conn.execute("INSERT INTO decision_affected VALUES ('dec_legacy', 1, 0, ?, 1)", (task_id,))
        conn.execute("COMMIT")
    finally:
        conn.close()
    return "dec_legacy"


async def test_sweep_answers_a_reversible_decision_after_24_hours_with_its_recommendation(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    agent = await service.agent()
    decision = await open_decision(
        agent, [task], required_actor="either", recommendation="Stop", reversible=True
    )
    service.clock.advance(hours=23, minutes=59, seconds=59)
    assert await run_sweep(service) == 0
    assert (await get_decision(human, decision["id"]))["status"] == "pending"
    service.clock.advance(seconds=1)
    assert await run_sweep(service) == 1
    found = await get_decision(human, decision["id"])
    assert found["status"] == "allowed" and found["work_allowed"] is True
    assert found["current"]["answer"] == {
        "disposition": "allow",
        "answer": "Stop",
        "rationale": found["current"]["answer"]["rationale"],
        "conditions_confirmed": True,
        "actor_id": agent.principal_id,
        "actor_session_id": None,
        "relayed": False,
        "relay": None,
        "authorized_by": None,
        "relay_policy_revision": None,
        "timed_out": True,
        "at": "2026-11-30T18:00:00.000Z",
    }
    events = (await human.get(f"{BASE}/events")).json()["items"]
    timed_out = [e for e in events if e["type"] == "decision.timed_out"]
    assert len(timed_out) == 1
    assert timed_out[0]["actor_id"] == agent.principal_id
    assert timed_out[0]["actor_session_id"] is None
    # the keys of decision.answered, which it stands for
    assert timed_out[0]["data"] == {"generation": 1, "disposition": "allow", "answer": "Stop",
                                    "relayed": False, "task_ids": [task]}  # fmt: skip
    assert await run_sweep(service) == 0


async def test_sweep_times_out_a_human_required_decision_a_human_asked(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], recommendation="Proceed", reversible=True)
    service.clock.advance(hours=24)
    assert await run_sweep(service) == 1
    answer = (await get_decision(human, decision["id"]))["current"]["answer"]
    assert answer["timed_out"] is True and answer["actor_id"] == human.principal_id


async def test_sweep_never_answers_a_decision_that_is_not_reversible(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(human, [task], recommendation="Proceed")
    service.clock.advance(days=30)
    assert await run_sweep(service) == 0
    assert (await get_decision(human, decision["id"]))["status"] == "pending"


async def test_sweep_skips_a_stale_decision(service: Service, human: Caller, project: str) -> None:
    task = await new_task(human)
    decision = await open_decision(
        human, [task], required_actor="either", recommendation="Proceed", reversible=True
    )
    await edit_task(human, task, title="A different scope")
    service.clock.advance(hours=25)
    assert await run_sweep(service) == 0
    found = await get_decision(human, decision["id"])
    assert found["status"] == "stale" and found["current"]["answer"] is None


async def test_sweep_skips_an_expired_decision(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(
        human, [task], required_actor="either", recommendation="Proceed", reversible=True,
        expires_at="2026-11-30T12:00:00.000Z",
    )  # fmt: skip
    service.clock.advance(hours=25)
    assert await run_sweep(service) == 0
    found = await get_decision(human, decision["id"])
    assert found["status"] == "expired" and found["current"]["answer"] is None


async def test_sweep_skips_a_decision_that_expired_while_no_sweep_ran(
    service: Service, human: Caller, project: str
) -> None:
    """Its expiry is past its 24 h (the stored timeout column keeps it), and
    no sweep ran before it passed (the service was down): the status check
    itself must refuse it, which no test reached (mutantaudit1)."""
    task = await new_task(human)
    decision = await open_decision(
        human, [task], required_actor="either", recommendation="Proceed", reversible=True,
        expires_at="2026-12-01T00:00:00.000Z",
    )  # fmt: skip
    service.clock.advance(hours=31)
    assert await run_sweep(service) == 0
    found = await get_decision(human, decision["id"])
    assert found["status"] == "expired" and found["current"]["answer"] is None


async def test_sweep_leaves_answered_decisions_alone(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(
        human, [task], required_actor="either", recommendation="Proceed", reversible=True
    )
    await send_answer(human, decision["id"], disposition="defer", answer="Stop")
    service.clock.advance(hours=48)
    assert await run_sweep(service) == 0
    assert (await get_decision(human, decision["id"]))["status"] == "deferred"


async def test_sweep_skips_a_human_required_cycle_an_agent_opened_until_a_human_reopens_it(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    agent = await service.agent()
    legacy = insert_agent_asked_human_decision(
        service.db_path, task, agent.principal_id, service.clock.iso()
    )
    service.clock.advance(days=3)
    assert await run_sweep(service) == 0
    assert (await get_decision(human, legacy))["status"] == "pending"
    assert (await reopen(human, legacy, 1)).status_code == 200
    service.clock.advance(hours=24)
    assert await run_sweep(service) == 1
    answer = (await get_decision(human, legacy))["current"]["answer"]
    assert answer["timed_out"] is True and answer["actor_id"] == human.principal_id


async def test_a_reopening_restarts_the_window_and_the_reopener_is_the_one_who_asked(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    agent = await service.agent()
    decision = await open_decision(
        human, [task], required_actor="either", recommendation="Proceed", reversible=True
    )
    service.clock.advance(hours=20)
    agent.session_id = None  # the first session lapsed long ago
    await agent.start_session()
    assert (await reopen(agent, decision["id"], 1)).status_code == 200
    service.clock.advance(hours=23)
    assert await run_sweep(service) == 0
    service.clock.advance(hours=1)
    assert await run_sweep(service) == 1
    found = await get_decision(human, decision["id"])
    assert found["generation"] == 2
    assert found["current"]["answer"]["actor_id"] == agent.principal_id
    assert found["history"]["items"][1]["answer"] is None


async def test_a_timed_out_allow_goes_stale_on_a_judged_edit_and_can_be_reopened(
    service: Service, human: Caller, project: str
) -> None:
    task = await new_task(human)
    decision = await open_decision(
        human, [task], required_actor="agent", recommendation="Proceed", reversible=True
    )
    service.clock.advance(hours=24)
    assert await run_sweep(service) == 1
    await edit_task(human, task, description="Bigger scope")
    assert (await get_decision(human, decision["id"]))["status"] == "stale"
    r = await reopen(human, decision["id"], 1)
    assert r.status_code == 200 and r.json()["status"] == "pending"


@contextlib.asynccontextmanager
async def sweeping(tmp_path: Path) -> AsyncIterator[tuple[Any, Caller, Path]]:
    """An app whose sweep runs every 20 ms on a file clock, with project
    `demo` and a human in it: (app, human, clock file)."""
    clock_file = tmp_path / "clock"
    clock_file.write_text("2026-11-29T18:00:00.000Z")
    settings = Settings(db_path=tmp_path / "w.db", sweep_interval=0.02, clock_file=clock_file)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        rt = app.state.runtime
        created = await rt.db.write(
            lambda conn: principals.create_principal(conn, "human", "hana", "2026-11-29T18:00:00Z")
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w.test") as client:
            human = Caller(client, created["principal_id"], "human", created["token"])
            assert (await human.post("/api/v1/projects", {"id": "demo", "name": "D"})).is_success
            yield app, human, clock_file


async def open_timing_out(human: Caller) -> str:
    """A decision the sweep answers once 24 hours have passed."""
    task = await new_task(human)
    r = await human.post(
        f"{BASE}/decisions",
        decision_body([task], required_actor="either", recommendation="Proceed", reversible=True),
    )
    assert r.status_code == 201, r.text
    decision_id: str = r.json()["id"]
    return decision_id


async def test_the_sweep_inside_serve_follows_the_clock_file(tmp_path: Path) -> None:
    async with sweeping(tmp_path) as (_, human, clock_file):
        decision = await open_timing_out(human)
        write_clock(clock_file, "2026-11-30T18:00:00.000Z")  # the sweep reads it meanwhile
        for _ in range(250):  # the sweep runs every 20 ms; give it up to 5 s
            found = await get_decision(human, decision)
            if found["status"] == "allowed":
                break
            await asyncio.sleep(0.02)
        assert found["status"] == "allowed"
        assert found["current"]["answer"]["at"] == "2026-11-30T18:00:00.000Z"


async def test_the_sweep_reads_the_time_under_the_writer_lock(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its time was read before its write waited for the writer: a decision
    that came due while the write queued was left for the next sweep, and
    one that expired meanwhile could be answered as of before its expiry.
    Writes read the time under the lock, and the sweep now does too."""
    task = await new_task(human)
    decision = await open_decision(human, [task], recommendation="Proceed", reversible=True)
    service.clock.advance(hours=23, minutes=59, seconds=59)
    monkeypatch.setattr(sweep, "STEPS", [("decisions_timed_out", sweep.answer_timed_out)])
    release = threading.Event()
    busy = asyncio.create_task(service.rt.db.write(lambda c: release.wait(10)))
    await asyncio.sleep(0.05)  # the writer is busy with that unit
    sweeping = asyncio.create_task(sweep.run_once(service.rt))
    await asyncio.sleep(0.05)  # the sweep's write is queued
    service.clock.advance(seconds=2)  # the decision comes due meanwhile
    release.set()
    await busy
    assert (await sweeping)["decisions_timed_out"] == 1
    found = await get_decision(human, decision["id"])
    assert found["status"] == "allowed"
    assert found["current"]["answer"]["at"] == "2026-11-30T18:00:01.000Z"


async def test_one_pass_answers_a_backlog_larger_than_one_batch(
    service: Service, human: Caller, project: str
) -> None:
    """Each unit answers at most BATCH decisions; the pass used to stop there,
    so decision BATCH + 1 waited another --sweep-interval (5 minutes by
    default) after it came due. The pass now runs units until fewer are due."""
    task = await new_task(human)
    opened = [
        await open_decision(human, [task], recommendation="Proceed", reversible=True)
        for _ in range(timeouts.BATCH + 1)
    ]
    service.clock.advance(hours=24)
    assert await run_sweep(service) == timeouts.BATCH + 1
    last = await get_decision(human, opened[-1]["id"])
    assert last["status"] == "allowed" and last["current"]["answer"]["timed_out"] is True
    assert await run_sweep(service) == 0


async def test_a_pass_that_reaches_its_round_cap_says_so(
    service: Service, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A batched step that still finds a full batch after its last round stops
    (the next pass goes on), and the log says so instead of nothing."""
    always_full = sweep.Batched(lambda conn, now: 3, limit=3, max_rounds=2)
    monkeypatch.setattr(sweep, "STEPS", [("endless", always_full)])
    with caplog.at_level("WARNING", logger="waypost.sweep"):
        report = await sweep.run_once(service.rt)
    assert report == {"endless": 6}
    # the sweep's own lines (another logger's may come in by a timer: conftest.own_condition_log)
    assert [r.getMessage() for r in caplog.records if r.name == "waypost.sweep"] == [
        "sweep: endless stopped after 2 rounds; the next pass goes on"
    ]


async def test_a_unit_stops_answering_when_its_time_is_up_and_the_pass_goes_on(
    service: Service, human: Caller, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer re-derives the gate of each task the decision pins from all of
    that task's pins: on a task pinned by 20,000 decisions 6 ms each, so a
    unit of 500 held the writer 3 s. A unit now stops once its time is up
    (here at once: one answer a unit), and the pass runs units until one
    finds nothing due, so the backlog is still answered within the pass."""
    task = await new_task(human)
    for _ in range(4):
        await open_decision(human, [task], recommendation="Proceed", reversible=True)
    service.clock.advance(hours=24)
    monkeypatch.setattr(timeouts, "UNIT_SECONDS", 0.0)
    units: list[int] = []
    write = service.rt.db.write

    async def counted(unit: Any, **options: Any) -> Any:
        # each in a transaction of its own: a write queued meanwhile commits
        # between two of them (test_writer)
        assert options == {"solo": True}
        done = await write(unit, **options)
        units.append(done)
        return done

    monkeypatch.setattr(service.rt.db, "write", counted)
    assert await run_sweep(service) == 4
    assert units == [0, 1, 1, 1, 1, 0]  # the receipts' one empty unit, then the decisions


async def test_only_a_pass_that_did_something_logs_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every pass logged `sweep: {...: 0}` at INFO, one line every
    --sweep-interval whether or not it did anything."""

    def sweep_lines(level: str) -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "waypost" and r.levelname == level and r.getMessage().startswith("sweep:")
        ]

    with caplog.at_level("DEBUG", logger="waypost"):
        async with sweeping(tmp_path) as (app, human, clock_file):

            def runs() -> float:
                registry = app.state.runtime.metrics.registry
                found = registry.get_sample_value("waypost_sweep_runs_total", {"outcome": "ok"})
                return found or 0.0

            async def passes(n: int) -> None:
                start = runs()
                for _ in range(500):
                    if runs() >= start + n:
                        return
                    await asyncio.sleep(0.01)
                raise AssertionError("the sweep did not run")

            await passes(3)
            assert sweep_lines("INFO") == []
            assert len(sweep_lines("DEBUG")) >= 3
            await open_timing_out(human)
            write_clock(clock_file, "2026-11-30T18:00:00.000Z")
            await passes(2)
    assert sweep_lines("INFO") == ["sweep: {'receipts_purged': 0, 'decisions_timed_out': 1}"]
