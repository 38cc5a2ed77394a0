"""The fast path for read-only queries of plain data.

graphql-core executes every field the same way (a `ResolveInfo`, a resolver
call, a completion, an awaitable per async field): about 2,000 fields for a
dashboard of fifty decisions, which cost ten times the REST call returning
the same decisions. For a query whose every selected field is registered
here (`fields.FIELDS`), the whole operation is instead answered in one step:

- after parsing, validation and the query limits (nothing changes there);
- its selection sets compiled once (`plan.py`, graphql-core's own field
  collection and argument coercion);
- run level by level inside one read unit of work (`run.py`), every relation
  one batch of the same reads the DataLoaders make (`registry.py` and the
  domain modules `fields.py` gathers), building
  the JSON result directly.

Anything else falls back to graphql-core, unchanged: mutations and
subscriptions, an unregistered field, and any error at all (a refused
argument, a null in a non-null field, a fault): since a query writes nothing,
running it again there renders the error exactly as before.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable, Hashable
from datetime import datetime
from typing import Any

from graphql import GraphQLError
from graphql.execution.executor import Executor

from waypost.cancelling import CallerGone
from waypost.clock import format_time
from waypost.errors import WaypostError
from waypost.runtime import Runtime
from waypost.schema import budget
from waypost.schema.budget import ObjectsExceeded
from waypost.schema.fastpath import known
from waypost.schema.fastpath.plan import SelectionPlan, compile_query
from waypost.schema.fastpath.reads import Fallback, Reads
from waypost.schema.fastpath.run import execute
from waypost.storage.connection import is_busy, is_damage, storage_refusal
from waypost.storage.readers import begin_snapshot

log = logging.getLogger("waypost.graphql")


def answer(executor: Executor[Any]) -> Awaitable[dict[str, Any] | None] | None:
    """The operation's `data` by the fast path (an awaitable: None when it
    fell back at run time), or None when it does not apply at all. The
    awaitable raises `budget.ObjectsExceeded` for a result past the limit."""
    rt = getattr(executor.context_value, "rt", None)
    actor = getattr(executor.context_value, "actor", None)
    caller = actor.principal_id if actor is not None else ""
    middleware = executor.middleware_manager
    # field middleware (none in this schema) must see every field: keep its path
    if rt is None or (middleware and middleware.middlewares):
        return None
    plan = compile_query(executor)
    if plan is None:
        return None
    key = getattr(executor.context_value, "known_key", None)
    if key is None:
        return _run(rt, plan, caller)
    operation = executor.operation  # what Strawberry names the operation by
    return _learn(rt, plan, caller, key, operation.name.value if operation.name else None)


async def _learn(
    rt: Runtime, plan: SelectionPlan, caller: str, key: Hashable, name: str | None
) -> dict[str, Any] | None:
    """Run the plan; once it answered, the view may answer `key` directly (the
    plan is the document's, whoever sends it: `caller` is only this run's)."""
    data = await _run(rt, plan, caller)
    if data is not None:
        known.KNOWN.put(key, known.Known(plan, name))
    return data


async def answer_known(rt: Runtime, entry: known.Known, caller: str) -> dict[str, Any] | None:
    """The `data` of a request the pipeline answered before (known.py), or None
    when the fast path falls back this time or the result is past the
    execution limit (the pipeline then answers, and renders that error)."""
    try:
        return await _run(rt, entry.plan, caller)
    except ObjectsExceeded:
        return None


def _judged_on_its_snapshot(rt: Runtime) -> Callable[[sqlite3.Connection], datetime]:
    """The instant a fast path read is judged at, given its connection."""
    if rt.db.in_pinned():
        at = rt.now()  # read on the pipeline's snapshot, begun before its instant
        return lambda conn: at
    moving = rt.moving_now()

    def once_begun(conn: sqlite3.Connection) -> datetime:
        begin_snapshot(conn)
        return moving()

    return once_begun


async def _run(rt: Runtime, plan: SelectionPlan, caller: str) -> dict[str, Any] | None:
    # Inside the pipeline's query (schema/snapshot.py) its snapshot has begun
    # and its instant is read; a request answered from `known` is judged once
    # its own snapshot has begun (it may wait for a reader first), and the
    # request's instant moves there
    judged = _judged_on_its_snapshot(rt)
    limit = budget.max_objects(rt)

    def unit(conn: sqlite3.Connection) -> dict[str, Any] | None:
        try:
            now = judged(conn)
            reads = Reads(conn, now, format_time(now), caller, plan.selected, max_objects=limit)
            return execute(reads, plan, [None])[0]
        except (Fallback, WaypostError, GraphQLError):
            return None  # an answer graphql-core renders (a refused argument, ...)
        except ObjectsExceeded:
            raise  # answered as it is: the normal path would only stop later
        except sqlite3.Error as error:
            if is_busy(error) or is_damage(error) or storage_refusal(error) is not None:
                raise  # the store's condition: Database.read maps it, no fault here
            log.warning("GraphQL fast path fault; answered by graphql-core", exc_info=True)
            return None
        except Exception:
            # a fault of the fast path itself: the normal path still answers
            # (and meets any fault of the store again, and reports it)
            log.warning("GraphQL fast path fault; answered by graphql-core", exc_info=True)
            return None

    try:
        # on a reader in turn by caller: not every reader (storage/db.py)
        data: dict[str, Any] | None = await rt.db.read_long(unit, who=caller)
    except (ObjectsExceeded, CallerGone):
        raise  # CallerGone: left while it waited for a place; no one to answer
    except Exception:  # a busy or closed store: the normal path answers as it does
        data = None
    return data
