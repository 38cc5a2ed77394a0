"""Generations read with only the keys a reader shows
(`views.load_generations_showing`, the GraphQL fast path's older
generations) hold the same values as the whole objects (`load_generations`),
for answered, relayed, deferred, reopened and unanswered generations, and
every field the fast path registers on generations and answers names its
key."""

from __future__ import annotations

import sqlite3
from typing import Any

from tests.conftest import Caller, Service
from tests.fastpath_support import seed
from waypost.resolvers.decisions import views
from waypost.schema.fastpath.fields import ANSWER_KEYS, FIELDS, GENERATION_KEYS

PROJECTIONS: list[tuple[frozenset[str], frozenset[str]]] = [
    (frozenset({"at", "environment", "answer", "affected"}), frozenset({"disposition", "at"})),
    (frozenset({"answer"}), frozenset({"relay", "relayed", "timed_out"})),
    (frozenset({"answer"}), frozenset({"relay"})),
    (frozenset({"conditions", "expires_at", "reopen_rationale"}), frozenset()),
    (frozenset(views.GENERATION_KEYS), frozenset(views.ANSWER_KEYS)),
    (frozenset(), frozenset()),
]


def test_every_generation_and_answer_field_names_its_key() -> None:
    for type_name, keys, known in (
        ("DecisionGeneration", GENERATION_KEYS, views.GENERATION_KEYS),
        ("DecisionAnswer", ANSWER_KEYS, views.ANSWER_KEYS),
    ):
        registered = {name for (t, name) in FIELDS if t == type_name} - {"__typename"}
        assert registered == set(keys), type_name
        assert set(keys.values()) <= known


async def test_shown_keys_hold_the_whole_objects_values(service: Service, human: Caller) -> None:
    await seed(service, human)

    def read(conn: sqlite3.Connection) -> int:
        keys = [(r[0], r[1]) for r in conn.execute(
            "SELECT decision_id, generation FROM decision_generations ORDER BY 1, 2")]  # fmt: skip
        whole = views.load_generations(conn, keys)
        assert any(g["answer"] and g["answer"]["relayed"] for g in whole.values())
        assert any(g["answer"] is None for g in whole.values())
        for shown, answer_shown in PROJECTIONS:
            part = views.load_generations_showing(conn, keys, shown, answer_shown)
            assert part.keys() == whole.keys()
            for key, generation in part.items():
                expected: dict[str, Any] = whole[key]
                for name in {*shown, "generation"}:
                    if name != "answer":
                        assert generation[name] == expected[name], (key, name)
                if "answer" in shown:
                    answer = generation["answer"]
                    if expected["answer"] is None:
                        assert answer is None, key
                        continue
                    for name in {*answer_shown, "disposition"}:
                        assert answer[name] == expected["answer"][name], (key, name)
        return len(keys)

    assert await service.rt.db.read(read) > 5
