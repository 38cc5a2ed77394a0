"""A stream's re-check (live/streams.still_valid) while the clock file cannot
be read for a moment (a simulation rewriting it): Unavailable with
Retry-After 1, which says nothing of the token or the session. The re-check
must ask again later, as it does for a busy store; since 6d452c9 it reads
the clock for the session's lapse, outside its handling of Unavailable."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Caller, Service
from waypost.clock import FileClock
from waypost.live.streams import still_valid


async def test_an_unreadable_clock_does_not_end_a_sessionless_stream(
    service: Service, human: Caller, tmp_path: Path
) -> None:
    own_clock = service.rt.clock
    service.rt.clock = FileClock(tmp_path / "no-clock-yet")
    try:
        assert await still_valid(service.rt, human.token) is True
    finally:
        service.rt.clock = own_clock


async def test_an_unreadable_clock_does_not_end_a_stream_in_a_session(
    service: Service, tmp_path: Path
) -> None:
    agent = await service.principal("agent", "ada")
    session = await agent.start_session()
    own_clock = service.rt.clock
    service.rt.clock = FileClock(tmp_path / "no-clock-yet")
    try:
        assert await still_valid(service.rt, agent.token, session) is True
    finally:
        service.rt.clock = own_clock
    assert await still_valid(service.rt, agent.token, session) is True


async def test_a_stream_in_a_session_ends_once_the_session_lapses_by_the_clock(
    service: Service,
) -> None:
    """Lapsed, not ended: judged at the service's clock (docs/graphql.md, the
    stream ends when its session "ends or lapses"); the same token in no
    session goes on."""
    agent = await service.principal("agent", "ada")
    session = await agent.start_session()
    assert await still_valid(service.rt, agent.token, session) is True
    service.clock.advance(minutes=14, seconds=59)
    assert await still_valid(service.rt, agent.token, session) is True
    service.clock.advance(seconds=1)  # expires_at <= now: lapsed
    assert await still_valid(service.rt, agent.token, session) is False
    assert await still_valid(service.rt, agent.token) is True
