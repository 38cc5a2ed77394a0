"""Server-made ids: the contract's alphabet and length, unique, and in time order."""

from __future__ import annotations

import time

from waypost.ids import ID_PATTERN, _time_part, new_id


def test_ids_fit_the_contract_and_do_not_repeat() -> None:
    made = [new_id("task") for _ in range(20_000)]
    assert len(set(made)) == len(made)
    assert all(ID_PATTERN.match(i) for i in made)
    assert all(i.startswith("task_") and len(i) == len("task_") + 24 for i in made)


def test_the_time_part_sorts_as_the_time_does() -> None:
    times = [0, 1, 63, 64, 4095, 1_700_000_000_000, 1_800_000_000_123, 2**48 - 1]
    parts = [_time_part(ms) for ms in times]
    assert parts == sorted(parts)
    assert len(set(parts)) == len(parts) and all(len(p) == 8 for p in parts)


def test_ids_made_later_sort_after_earlier_ones() -> None:
    first = new_id("kn")
    time.sleep(0.002)
    assert new_id("kn")[: 3 + 8] > first[: 3 + 8]
