"""A per-request loader's load can be abandoned without failing the other
fields that wait on the same key (schema/loaders.py `SharedLoader`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from strawberry.dataloader import DataLoader

from waypost.schema.loaders import SharedLoader


async def _double(keys: Sequence[int]) -> list[int]:
    await asyncio.sleep(0.02)
    return [k * 2 for k in keys]


async def _one_consumer_cancelled(loader: DataLoader[int, int]) -> str:
    async def consumer() -> int:
        return await loader.load(21)

    first, second = asyncio.create_task(consumer()), asyncio.create_task(consumer())
    await asyncio.sleep(0.005)
    first.cancel()  # as graphql-core cancels a field whose parent already failed
    try:
        return f"got {await second}"
    except asyncio.CancelledError:
        return "cancelled"


async def test_cancelling_one_load_leaves_the_others_of_the_same_key() -> None:
    # (Strawberry's own DataLoader, 0.341, hands every load of a key the same
    # future: there one cancel failed every waiter)
    assert await _one_consumer_cancelled(SharedLoader(load_fn=_double)) == "got 42"
