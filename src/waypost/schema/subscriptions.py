"""GraphQL subscriptions (graphql-transport-ws at /graphql): a project's events
and a decision's changes, from committed events only (see `waypost.live`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TypeVar

import strawberry
from graphql import GraphQLError

from waypost.errors import InvalidRequest, WaypostError
from waypost.http.responses import graphql_extensions
from waypost.live import StreamEnded
from waypost.live.hub import PAGE
from waypost.live.streams import check_project, decision_changes, project_event_batches
from waypost.schema.context import Info
from waypost.schema.decisions import Decision
from waypost.schema.projects import Event
from waypost.schema.shared_events import shared_batch, shared_payload

T = TypeVar("T")
log = logging.getLogger("waypost.live")


def _graphql_error(error: WaypostError) -> GraphQLError:
    return GraphQLError(error.message, extensions=graphql_extensions(error))


async def _guarded(items: AsyncIterator[T]) -> AsyncIterator[T]:
    """Business refusals as GraphQL errors with `extensions.code`; a stopping
    server ends the subscription (`complete`)."""
    try:
        async for item in items:
            yield item
    except StreamEnded:
        return
    except WaypostError as error:
        raise _graphql_error(error) from error
    except Exception as fault:
        # Strawberry would send `str(fault)` to the client (a path, SQL) and
        # log nothing: the client gets the masked error, the log the cause
        log.exception("subscription failed")
        raise GraphQLError("internal error", extensions={"code": "internal"}) from fault


@strawberry.type(description="The events one message of `projectEventBatches` carries.")
class EventBatch:
    events: list[Event] = strawberry.field(
        description=f"One or more events, in sequence order, each once (at most {PAGE})."
    )

    @strawberry.field(description="The last event's sequence: resume with `after` set to it.")
    def last_sequence(self) -> int:
        return self.events[-1].sequence

    def resume_after(self) -> int:
        return self.events[0].sequence - 1

    @classmethod
    def from_json(cls, items: list[dict[str, object]]) -> EventBatch:
        return cls(events=[shared_payload(item, Event.from_json) for item in items])


async def _runs_of_events(
    info: Info, project_id: str, after: int | None
) -> AsyncIterator[list[dict[str, object]]]:
    """The project's events as the hub hands them to this subscriber: a run
    of one or more (at most the hub's page) on each wake."""
    ctx = info.context
    if after is not None and after < 0:
        # as the SSE route and the events connection refuse it
        raise InvalidRequest.field("after", "after must be an event sequence (0 or more)")
    await check_project(ctx.rt, project_id)
    async for item in project_event_batches(ctx.rt, ctx.actor, ctx.token, project_id, after):
        if isinstance(item, list):
            yield item


@strawberry.type(description="Live updates over WebSocket (`graphql-transport-ws`).")
class Subscription:
    @strawberry.subscription(
        description="The project's events in sequence order, each once, from committed"
        " transactions only: after `after`, else from the next new event."
    )
    async def project_events(
        self,
        info: Info,
        project_id: strawberry.ID,
        after: int | None = None,
    ) -> AsyncGenerator[Event, None]:
        async def items() -> AsyncIterator[Event]:
            async for run in _runs_of_events(info, project_id, after):
                for n, item in enumerate(run):
                    # each event of a run its own turn of the loop: a run is up
                    # to a page of 200, each executed and sent without a pause,
                    # so a subscriber catching up on 12,000 events held every
                    # other request for 5 s (slowconsumer); a live run is
                    # mostly one event, which waited for its turn already
                    if n:
                        await asyncio.sleep(0)
                    # the hub hands every subscriber the same event: one Event
                    # for all, so one execution answers them all (shared_events)
                    yield shared_payload(item, Event.from_json)

        async for event in _guarded(items()):
            yield event

    @strawberry.subscription(
        description="The same events as `projectEvents`, in the same order, each once, but"
        " as many as are ready in one message: for dashboards that follow a busy project"
        " (one message per subscriber per wake instead of one per event)."
    )
    async def project_event_batches(
        self,
        info: Info,
        project_id: strawberry.ID,
        after: int | None = None,
    ) -> AsyncGenerator[EventBatch, None]:
        async def items() -> AsyncIterator[EventBatch]:
            async for run in _runs_of_events(info, project_id, after):
                await asyncio.sleep(0)  # each batch its own turn, as each event above
                # subscribers woken together get the same run: one EventBatch
                # for all, so one execution answers them all (shared_events)
                yield shared_batch(run, EventBatch.from_json)

        async for batch in _guarded(items()):
            yield batch

    @strawberry.subscription(
        description="The decision now, then each time its generation, answer or status"
        " changes, including status changes caused elsewhere (stale after an edit of an"
        " affected task or of the rules, expired when its time passes)."
    )
    async def decision_changed(
        self,
        info: Info,
        id: strawberry.ID,
    ) -> AsyncGenerator[Decision, None]:
        ctx = info.context

        async def items() -> AsyncIterator[Decision]:
            async for found in decision_changes(ctx.rt, ctx.actor, ctx.token, id):
                yield Decision.from_json(found)

        async for decision in _guarded(items()):
            yield decision
