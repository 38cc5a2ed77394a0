"""An operation's loaders let go of what they read once its answer is
complete (schema/loaders.py `Loaders.release`).

The loaders' batch functions are the `Loaders`' own methods, so loaders and
`Loaders` make a reference cycle: every record, schema object and future an
operation had read stayed alive until a full collection of the garbage
collector found the cycle. A dashboard of 100 decisions left some 25,000
objects so; under a flood of them on a real `serve` the full collections
took 0.4-0.9 s each, holding the event loop and every other request
(gcpause). Released, they go as the answer does, by reference counting.
"""

from __future__ import annotations

import gc

from bench.graphql import DASHBOARD  # the query docs/graphql.md prints
from tests.conftest import Caller, Service
from tests.decisions_support import new_task, open_decision
from tests.fastpath_support import graphql_core_only
from waypost.resolvers.access import principals
from waypost.schema import schema
from waypost.schema.context import Context
from waypost.schema.decisions import Decision, DecisionAffected, DecisionGeneration
from waypost.schema.loaders import Loaders
from waypost.schema.tasks import Task

BUILT = (Decision, DecisionGeneration, DecisionAffected, Task)


async def _context(service: Service, human: Caller) -> Context:
    actor = await service.rt.db.read(lambda conn: principals.authenticate(conn, human.token, "api"))
    return Context(rt=service.rt, actor=actor, token=human.token)


async def test_a_dashboard_leaves_nothing_for_the_collector(
    service: Service, human: Caller, project: str
) -> None:
    """With the collector off, no schema object the dashboard built is left
    among the objects it tracks once the answer is had (before: every one of
    them, until a full collection)."""
    tasks = [await new_task(human, f"task {n}") for n in range(6)]
    for d in range(4):
        await open_decision(human, [tasks[(d + k) % 6] for k in range(3)], question=f"Batch {d}?")
    context = await _context(service, human)
    with graphql_core_only():
        gc.collect()
        gc.disable()
        try:
            result = await schema.execute(
                DASHBOARD, variable_values={"project": project}, context_value=context
            )
            assert not result.errors, result.errors
            assert result.data is not None
            assert len(result.data["project"]["decisions"]["nodes"]) == 4
            del result
            left = [type(o).__name__ for o in gc.get_objects() if isinstance(o, BUILT)]
        finally:
            gc.enable()
    assert not left, f"{len(left)} schema objects left for the collector: {sorted(set(left))}"


async def test_each_root_mutations_loaders_are_released(
    service: Service, human: Caller, project: str
) -> None:
    """Each root mutation reads through loaders of its own (it reads what the
    ones before it wrote): all of them are released with the operation."""
    context = await _context(service, human)
    made: list[Loaders] = []
    real = context.start_operation

    def spied() -> Loaders:
        real()
        loaders = context._loaders
        made.append(loaders)
        return loaders

    context.start_operation = spied  # type: ignore[method-assign]
    created = "{ task { title project { name } } }"
    asked = (
        "mutation { "
        + " ".join(
            f'{n}: taskCreate(input: {{idempotencyKey: "{n}", projectId: "{project}",'
            f' title: "{n}"}}) {created}'
            for n in ("a", "b")
        )
        + " }"
    )
    result = await schema.execute(asked, context_value=context)
    assert not result.errors, result.errors
    assert len(made) == 3  # the operation's, then one per root mutation
    for loaders in made:
        assert not loaders.memo and not loaders._objects and not loaders._once
        assert not any(loader.cache_map.cache_map for loader in vars(loaders).values()
                       if hasattr(loader, "cache_map"))  # fmt: skip
