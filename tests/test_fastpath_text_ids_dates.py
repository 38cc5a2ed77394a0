"""ID and DateTime leaves count toward the text limit
on the fast path as on graphql-core's (run.py `_TEXT`); the inbox test's
documents reach the limit through String and enum leaves only.
(Unpinned before: mutantaudit5.)"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from tests.conftest import Caller, Service
from tests.fastpath_support import both, seed
from waypost.schema import budget


@pytest.fixture
async def seeded(service: Service, human: Caller) -> dict[str, Any]:
    return await seed(service, human)


async def test_ids_and_times_count_as_text_on_both_paths(
    human: Caller, seeded: dict[str, Any]
) -> None:
    document = '{ project(id: "demo") { decisions { nodes { id createdAt } } } }'
    refused = 0
    for text in range(0, 600, 11):
        with mock.patch.object(budget, "MAX_TEXT", text):
            result = await both(human, document)
        assert result.fast == result.slow, ("text", text)
        refused += b"execution limits" in result.fast
    assert refused > 0
