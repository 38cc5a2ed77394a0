"""What is memoized per query text and variables (schema/memo.py): the query
limits' pass and the fast path's plan. The same text with other variables
must be measured and planned again: a memo may save work, never change an
answer."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Caller, Service
from tests.fastpath_support import both, seed
from waypost.schema.fastpath import plan as fastpath_plan
from waypost.schema.memo import Memo, variables_key

PAGE = """
query ($project: String!, $first: Int, $more: Boolean!) {
  project(id: $project) {
    decisions(first: $first) {
      totalCount
      nodes { restId status generations(first: 10) @include(if: $more) { nodes { generation } } }
    }
  }
}
"""
# 500 + 500 * 100 = 50,500 nodes: over the limit; 100 + 100 * 100 is within
NODES = """
query ($n: Int!) {
  project(id: "demo") { decisions(first: $n) { nodes { generations(first: 100) {
    nodes { generation } } } } }
}
"""


async def test_the_same_text_with_other_variables_is_planned_again(
    service: Service, human: Caller
) -> None:
    await seed(service, human)
    bodies: set[bytes] = set()
    for variables in [
        {"project": "demo", "first": 2, "more": False},
        {"project": "demo", "first": 2, "more": True},
        {"project": "demo", "first": 5, "more": True},
        {"project": "other", "first": 5, "more": True},
        {"project": "demo", "first": 2, "more": False},  # a memo hit: the first answer again
    ]:
        answered = await both(human, PAGE, variables)
        assert answered.answered and answered.fast == answered.slow, answered
        bodies.add(answered.fast)
    assert len(bodies) == 4
    assert any(entry[1] is not None for entry in fastpath_plan._PLANS.items.values())


async def test_the_limits_are_measured_for_each_variables(human: Caller, project: str) -> None:
    def refused(data: dict[str, Any]) -> bool:
        return any("node limit" in e["message"] for e in data.get("errors", []))

    assert not refused(await human.gql(NODES, {"n": 100}))
    assert refused(await human.gql(NODES, {"n": 500}))
    assert not refused(await human.gql(NODES, {"n": 100}))
    assert refused(await human.gql(NODES, {"n": 500}))


def test_only_plain_json_variables_have_a_key() -> None:
    assert variables_key(None) == variables_key({}) == ""
    plain = {"a": [1, "1", None, True, 1.5], "b": {"c": "d"}}
    assert variables_key(plain) == repr(json.loads(json.dumps(plain)))
    assert variables_key({"a": 1}) != variables_key({"a": "1"}) != variables_key({"a": True})
    assert variables_key({"a": object()}) is None
    assert variables_key({"a": [{"b": {1, 2}}]}) is None


def test_a_memo_keeps_the_most_recently_used_entries() -> None:
    memo: Memo[int] = Memo(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # "a" is now the most recent
    memo.put("c", 3)
    assert memo.get("b") is None and memo.get("a") == 1 and memo.get("c") == 3
