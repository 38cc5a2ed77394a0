"""A filtered connection's totalCount on the fast path
counts under the same filters as its page, byte for byte as graphql-core.
(Unpinned before: mutantaudit5.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.fastpath_support import both, seed


@pytest.fixture
async def seeded(service: Service, human: Caller) -> dict[str, Any]:
    return await seed(service, human)


@pytest.mark.parametrize(
    "args",
    ["ready: true", "ready: false", "status: OPEN", "ready: true, status: OPEN"],
)
async def test_filtered_task_counts_answer_byte_for_byte(
    human: Caller, seeded: dict[str, Any], args: str
) -> None:
    query = f'{{ project(id: "demo") {{ tasks({args}) {{ totalCount nodes {{ restId }} }} }} }}'
    result = await both(human, query)
    assert result.answered and result.fast == result.slow
    data = json.loads(result.fast)["data"]["project"]["tasks"]
    all_tasks = json.loads(
        (await both(human, '{ project(id: "demo") { tasks { totalCount } } }')).fast
    )
    if args.startswith("ready"):  # the seed has ready and unready tasks
        assert data["totalCount"] < all_tasks["data"]["project"]["tasks"]["totalCount"]


@pytest.mark.parametrize(
    "args", ["status: PENDING", "status: DENIED", "includeShared: true", "kind: FACT", 'tag: "db"']
)
async def test_filtered_decision_and_knowledge_counts_answer_byte_for_byte(
    human: Caller, seeded: dict[str, Any], args: str
) -> None:
    field = "decisions" if args.startswith("status") else "knowledge"
    query = f'{{ project(id: "demo") {{ {field}({args}) {{ totalCount nodes {{ restId }} }} }} }}'
    result = await both(human, query)
    assert result.answered and result.fast == result.slow
