"""The per-request DataLoaders: every read the schema makes beyond a root list.

`get_context` makes one `Loaders` per request, so a query reads each record
once however often it is referenced, and nothing is cached across requests
(each request sees the database as it is). Every loader batches the keys
asked for in one tick of the event loop into one read on a reader connection:
a constant number of statements whatever the number of records shown. The
loaders hold REST JSON (the resolvers' shapes); the schema types are built
from it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Hashable, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from strawberry.dataloader import DataLoader

from waypost.clock import format_time
from waypost.errors import WaypostError
from waypost.pagination import Page
from waypost.resolvers.access import principals as access
from waypost.resolvers.decisions import by_task, digest
from waypost.resolvers.decisions import views as decision_views
from waypost.resolvers.knowledge import feedback
from waypost.resolvers.knowledge import operations as knowledge
from waypost.resolvers.projects import operations as projects
from waypost.resolvers.projects import policy
from waypost.resolvers.tasks import reads as task_reads
from waypost.runtime import Runtime
from waypost.schema.relay import Connection

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")
Json = dict[str, Any]


# --- the reads behind the loaders, on one connection --------------------------
# Plain functions, so the fast path (schema/fastpath/) makes exactly the same
# reads as the loaders inside its single read unit of work.


def principals_sync(conn: sqlite3.Connection, ids: Sequence[str]) -> list[Json | None]:
    return access.principals_by_ids(conn, ids)


def projects_sync(conn: sqlite3.Connection, ids: Sequence[str]) -> list[Json | None]:
    return projects.projects_by_ids(conn, ids)


def tasks_sync(conn: sqlite3.Connection, ids: Sequence[str], now: datetime) -> list[Json | None]:
    found = task_reads.tasks_json_by_ids(conn, ids, now)
    return [found.get(i) for i in ids]


def submissions_sync(conn: sqlite3.Connection, ids: Sequence[str]) -> list[Json | None]:
    found = task_reads.submissions_json_by_ids(conn, ids)
    return [found.get(i) for i in ids]


def decisions_sync(conn: sqlite3.Connection, ids: Sequence[str], now_at: str) -> list[Json | None]:
    found = decision_views.load_decisions(conn, ids, now_at)
    return [found.get(i) for i in ids]


def generations_sync(
    conn: sqlite3.Connection, keys: Sequence[decision_views.HistoryRequest]
) -> list[Page[Json]]:
    return decision_views.history_pages(conn, keys)


def shared(awaited: Awaitable[T]) -> Awaitable[T]:
    """A shield of `awaited` (a loader's future, or a task) for one of its
    waiters, and its outcome seen even when every waiter has left: when graphql-core cancels the
    fields waiting on it (a sibling's error ended their parent), a read that
    then failed (a refused `q`) was never seen, and asyncio logged it as an
    ERROR with its traceback ("Task exception was never retrieved")."""
    future = asyncio.ensure_future(awaited)  # a loader's future as it is
    future.add_done_callback(_seen)
    return asyncio.shield(future)


def _seen(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class SharedLoader(DataLoader[K, V]):
    """A DataLoader whose loads can be abandoned one by one.

    Every `load` of one key hands out the same future. When graphql-core
    cancels the task of one field (a sibling's error ends its parent), that
    task's await cancelled the shared future too, and every other field
    waiting on the same key failed with CancelledError (a 500; seen once in
    tests/test_graphql_fastpath.py's generated queries). Each caller now
    awaits a shield of the future, so cancelling one leaves the others, and
    the batch, alone.
    """

    def load(self, key: K) -> Awaitable[V]:
        return shared(super().load(key))


class Loaders:
    """One request's loaders (see the module docstring)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        # the request's answers worth computing once (Context.memo)
        self.memo: dict[tuple[object, ...], object] = {}
        self.principal = self._make(self._principals)
        self.project = self._make(self._projects)
        self.policy = self._make(self._policies)
        self.policy_revision = self._make(self._policy_revisions)
        self.task = self._make(self._tasks)
        self.activities = self._make(self._activities)
        self.submission = self._make(self._submissions)
        self.decision = self._make(self._decisions)
        self.generations = self._make(self._generations)
        self.task_decisions = self._make(self._task_decisions)
        self.task_decision_counts = self._make(self._task_decision_counts)
        self.digest = self._make(self._digests)
        self.knowledge = self._make(self._knowledge)
        self.knowledge_feedback = self._make(self._knowledge_feedback)
        self.knowledge_revisions = self._make(self._knowledge_revisions)
        self._objects: dict[int, Any] = {}
        self.searches = 0  # full-text searches this operation started (schema/searches.py)
        self._once: dict[Hashable, asyncio.Future[Any]] = {}
        self._histories: dict[str, DataLoader[Any, Any]] = {}
        self._history_counts: dict[str, DataLoader[Any, Any]] = {}

    def release(self) -> None:
        """Let go of what the operation read, once it has its answer. The
        loaders refer back to these Loaders (their batch functions are its
        methods, a connection's `totalCount` calls its `once`): a cycle that
        only the garbage collector's full collection freed, with every record,
        schema object and future the operation had cached. A dashboard's
        25,000 objects each, under a flood of them, made full collections of
        0.4-0.8 s that held the event loop (gcpause). Emptied, the cycle holds
        nothing and the records go as the answer does."""
        loaders = [v for v in vars(self).values() if isinstance(v, DataLoader)]
        for loader in [*loaders, *self._histories.values(), *self._history_counts.values()]:
            loader.cache_map.clear()
            loader.batch = None  # the last batch's tasks hold their futures and values
        self.memo.clear()
        self._objects.clear()
        self._once.clear()
        self._histories.clear()
        self._history_counts.clear()

    def shared_object(self, found: Json | None, make: Callable[[Json], V]) -> V | None:
        """One schema object per loaded record per operation (built once, however
        many entries reference it)."""
        if found is None:
            return None
        key = id(found)
        made = self._objects.get(key)
        if made is None:
            made = self._objects[key] = (found, make(found))
        return cast(V, made[1])

    def once(self, key: Hashable, make: Callable[[], Awaitable[V]]) -> Awaitable[V]:
        """One value per key per operation: a project's connection that many
        references reach with the same arguments (its `decisions(first: 100)`
        under each of 2,000 affected tasks) is read and built once, not 2,000
        times (34 s before the object limit refused the answer). Shielded as
        `SharedLoader` shields its loads."""
        found = self._once.get(key)
        if found is None:
            found = self._once[key] = asyncio.ensure_future(make())
        return cast(Awaitable[V], shared(found))

    async def connection(
        self,
        key: tuple[Hashable, ...],
        page: Callable[[], Awaitable[Page[Json]]],
        make: Callable[[Json], V],
        count: Callable[[], Awaitable[int]],
    ) -> Connection[V]:
        """A project's connection for one set of arguments (`key`), its page
        and its `totalCount` each read once per operation (see `once`)."""

        async def read() -> Connection[V]:
            return Connection.of(await page(), make, lambda: self.once((*key, "totalCount"), count))

        return await self.once(key, read)

    @staticmethod
    def _make(batch: Callable[[Sequence[K]], Awaitable[list[V]]]) -> DataLoader[K, V]:
        return SharedLoader(load_fn=batch)

    async def _read(self, fn: Callable[[sqlite3.Connection], V]) -> V:
        return await self.rt.db.read(fn)

    def _now_at(self) -> str:
        return format_time(self.rt.now())

    # --- batch functions: one read each ------------------------------------

    async def _principals(self, ids: Sequence[str]) -> list[Json | None]:
        return await self._read(lambda c: principals_sync(c, ids))

    async def _projects(self, ids: Sequence[str]) -> list[Json | None]:
        return await self._read(lambda c: projects_sync(c, ids))

    async def _policies(self, ids: Sequence[str]) -> list[Json | None]:
        return await self._read(lambda c: policy.policies_by_ids(c, ids))

    async def _policy_revisions(self, keys: Sequence[tuple[str, int]]) -> list[Json | None]:
        return await self._read(lambda c: policy.revisions_by_keys(c, keys))

    async def _tasks(self, ids: Sequence[str]) -> list[Json | None]:
        now = self.rt.now()
        return await self._read(lambda c: tasks_sync(c, ids, now))

    async def _activities(self, ids: Sequence[str]) -> list[list[Json]]:
        now = self.rt.now()
        found = await self._read(lambda c: task_reads.activities_json(c, ids, now))
        return [found[i] for i in ids]

    async def _submissions(self, ids: Sequence[str]) -> list[Json | None]:
        return await self._read(lambda c: submissions_sync(c, ids))

    async def _decisions(self, ids: Sequence[str]) -> list[Json | None]:
        now_at = self._now_at()
        return await self._read(lambda c: decisions_sync(c, ids, now_at))

    async def _generations(self, keys: Sequence[decision_views.HistoryRequest]) -> list[Page[Json]]:
        return await self._read(lambda c: generations_sync(c, keys))

    async def _task_decisions(self, keys: Sequence[by_task.ByTaskKey]) -> list[Page[Json]]:
        now_at = self._now_at()
        found = await self._read(lambda c: by_task.pages_sync(c, keys, now_at))
        return [found[k] for k in keys]

    async def _task_decision_counts(self, ids: Sequence[str]) -> list[int]:
        found = await self._read(lambda c: by_task.counts_sync(c, ids))
        return [found[i] for i in ids]

    async def _digests(self, ids: Sequence[str]) -> list[Json]:
        # once per project per request: a query may reach the same project's
        # digest through every task it lists (each digest is up to 800 items)
        now = self.rt.now()

        def each(c: sqlite3.Connection) -> list[Json | WaypostError]:
            found: list[Json | WaypostError] = []
            for project_id in ids:
                try:
                    found.append(digest.digest_sync(c, project_id, now))
                except WaypostError as error:
                    found.append(error)
            return found

        # the DataLoader raises an error item in the load that asked for it
        return cast(list[Json], await self._read(each))

    async def _knowledge(self, ids: Sequence[str]) -> list[Json | None]:
        found = await self._read(lambda c: knowledge.get_many_sync(c, ids))
        return [found.get(i) for i in ids]

    async def _knowledge_feedback(self, ids: Sequence[str]) -> list[dict[str, int]]:
        return await self._read(lambda c: feedback.totals_sync(c, ids))

    async def _knowledge_revisions(
        self, keys: Sequence[tuple[str, str | None, int | None]]
    ) -> list[Page[Json]]:
        return await self._read(lambda c: knowledge.history_pages_sync(c, keys))

    # --- task histories: one loader per history table -------------------------

    def history(self, history: task_reads.History) -> DataLoader[task_reads.HistoryKey, Page[Json]]:
        found = self._histories.get(history.table)
        if found is None:

            async def batch(keys: Sequence[task_reads.HistoryKey]) -> list[Page[Json]]:
                pages = await self._read(lambda c: task_reads.history_pages(c, history, keys))
                return [pages[k] for k in keys]

            found = self._histories[history.table] = self._make(batch)
        return found

    def history_count(self, history: task_reads.History) -> DataLoader[str, int]:
        found = self._history_counts.get(history.table)
        if found is None:

            async def batch(ids: Sequence[str]) -> list[int]:
                counts = await self._read(lambda c: task_reads.count_histories(c, history, ids))
                return [counts[i] for i in ids]

            found = self._history_counts[history.table] = self._make(batch)
        return found
