"""The fast path's registry: (type, field) -> a batch resolver, and what
every domain's registrations share.

A resolver takes every parent at one level of the result at once (all fifty
decisions of a page, all their generations, ...) and returns one value per
parent, as REST JSON, so each relation costs one batch of reads per level,
exactly as the DataLoaders make it, whatever the number of parents. Each
domain module (`projects`, `decisions`, `tasks`, `knowledge`, `events`)
registers its types' fields here; `fields.py` imports them all, so that the
registry is whole wherever it is read.

Only fields whose normal resolver does nothing but read are registered, and
their reads are the same functions (`loaders.*_sync`, the lists and counts
the resolvers run), except tasks by id: those come from `tasks.stored_gate`,
the same task JSON with `ready` read from the stored gate state and
`blocked_by` derived from the history only when `blockedBy` is selected (a
dashboard asks every task whether it is ready, rarely why not). The
caller's authority is bearer authentication's for all of them. Fields with
their own authority rules (`Session`, `mySession`), anything that writes,
and anything not listed take graphql-core's path. The getters mirror the
types' `from_json` (JSON key -> field); the equality tests compare both
paths on every field registered.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import itemgetter
from typing import Any

from waypost.resolvers.projects import policy
from waypost.resolvers.tasks import stored_gate
from waypost.schema import budget, loaders
from waypost.schema.fastpath.reads import ConnectionValue, Json, Reads
from waypost.schema.relay import global_id

Resolver = Callable[[Reads, list[Any], dict[str, Any]], list[Any]]
Read = Callable[[Reads, list[str]], list[Json | None]]

FIELDS: dict[tuple[str, str], Resolver] = {}


def typename(name: str) -> Resolver:
    return lambda r, parents, a: [name] * len(parents)


def key(name: str) -> Resolver:
    get = itemgetter(name)
    return lambda r, parents, a: list(map(get, parents))


def global_id_of(type_name: str) -> Resolver:
    return lambda r, parents, a: [global_id(type_name, p["id"]) for p in parents]


def read_principals(r: Reads, ids: list[str]) -> list[Json | None]:
    return loaders.principals_sync(r.conn, ids)


def read_projects(r: Reads, ids: list[str]) -> list[Json | None]:
    return loaders.projects_sync(r.conn, ids)


def read_submissions(r: Reads, ids: list[str]) -> list[Json | None]:
    return loaders.submissions_sync(r.conn, ids)


def read_tasks(r: Reads, ids: list[str]) -> list[Json | None]:
    # `ready` from the stored gate state; `blocked_by` derived only if selected
    # (`_blocked_by`): the loader's task JSON derives it for every task. Only
    # the keys some selection of the operation reads (each column costs).
    found = stored_gate.tasks_by_ids(r.conn, ids, r.now, _task_keys(r.selected))
    return [found.get(i) for i in ids]


# The task JSON key each field of the fast path reads from a task record
# (`id`, `project_id`, `subject_task_id` are always there: `Task.id`,
# `restId`, `projectId`, `project`, `subject`, `activities`, `Project.task`;
# a test checks that every registered Task field is covered).
TASK_KEYS: dict[tuple[str, str], str] = {
    ("Task", "title"): "title",
    ("Task", "description"): "description",
    ("Task", "acceptanceCriteria"): "acceptance_criteria",
    ("Task", "kind"): "kind",
    ("Task", "priority"): "priority",
    ("Task", "status"): "status",
    ("Task", "revision"): "revision",
    ("Task", "ready"): "ready",
    ("Task", "blockedBy"): "blocked_by",
    ("Task", "createdAt"): "created_at",
    ("Task", "updatedAt"): "updated_at",
    ("Task", "dependsOn"): "depends_on",
    ("Task", "revisions"): "revision",  # revisions are numbered 1..revision
    ("Task", "lease"): "lease",
    ("Task", "publication"): "publication",
    ("DecisionAffected", "currentRevision"): "revision",
}


@lru_cache(maxsize=256)
def _task_keys(selected: frozenset[tuple[str, str]]) -> frozenset[str]:
    return frozenset(TASK_KEYS[s] for s in selected if s in TASK_KEYS)


def read_policies(r: Reads, ids: list[str]) -> list[Json | None]:
    """The projects' policies (their latest revisions), by project id."""
    return policy.policies_by_ids(r.conn, ids)


def read_decisions(r: Reads, ids: list[str]) -> list[Json | None]:
    return loaders.decisions_sync(r.conn, ids, r.now_at)


def once_per_project(
    parents: list[Any], read: Callable[[str], ConnectionValue]
) -> list[ConnectionValue]:
    """One page per distinct project among `parents`: a project reached through
    each of 2,000 affected tasks read its `decisions(first: 100)` 2,000 times
    (34 s) before the object limit refused the answer."""
    pages: dict[str, ConnectionValue] = {}
    result = []
    for p in parents:
        page = pages.get(p["id"])
        if page is None:
            page = pages[p["id"]] = read(p["id"])
        result.append(page)
    return result


def ref(kind: str, read: Read, attribute: str) -> Resolver:
    """A reference by id (null when the id is null or names no record)."""

    def resolve(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
        ids = [p[attribute] for p in parents]
        found = r.records(kind, [i for i in ids if i is not None], read)
        it = iter(found)
        return [None if i is None else next(it) for i in ids]

    return resolve


def refs(kind: str, read: Read, attribute: str) -> Resolver:
    """A list of references by ids; ids naming no record are left out (as
    `load_tasks` does)."""

    def resolve(r: Reads, parents: list[Any], a: dict[str, Any]) -> list[Any]:
        lists = [p[attribute] for p in parents]
        # every id becomes an object of the next level: past the limit, refuse
        # before reading them (graphql-core counts these lists whole as they
        # start too: schema/execution.py `_ID_LISTS`)
        if r.objects + sum(map(len, lists)) > r.max_objects:
            raise budget.ObjectsExceeded
        found = iter(r.records(kind, [i for ids in lists for i in ids], read))
        return [[x for x in (next(found) for _ in ids) if x is not None] for ids in lists]

    return resolve


def register(type_name: str, fields: dict[str, Resolver]) -> None:
    for name, resolver in fields.items():
        FIELDS[(type_name, name)] = resolver


def connection(type_name: str) -> None:
    """`XConnection` and `XEdge` (relay.Connection.of: nodes zipped with cursors)."""
    register(f"{type_name}Connection", {
        "edges": lambda r, ps, a: [list(zip(c.cursors, c.items, strict=True)) for c in ps],
        "nodes": lambda r, ps, a: [c.items for c in ps],
        "pageInfo": lambda r, ps, a: ps,
        "totalCount": lambda r, ps, a: [c.total(r) for c in ps],
    })  # fmt: skip
    register(f"{type_name}Edge", {
        "cursor": lambda r, ps, a: [e[0] for e in ps],
        "node": lambda r, ps, a: [e[1] for e in ps],
    })  # fmt: skip


# the parent of a PageInfo is its ConnectionValue
register("PageInfo", {
    "hasNextPage": lambda r, ps, a: [p.has_next for p in ps],
    "hasPreviousPage": lambda r, ps, a: [p.has_previous for p in ps],
    "startCursor": lambda r, ps, a: [p.cursors[0] if p.cursors else None for p in ps],
    "endCursor": lambda r, ps, a: [p.cursors[-1] if p.cursors else None for p in ps],
})  # fmt: skip
