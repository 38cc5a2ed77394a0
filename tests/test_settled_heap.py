"""`serve` sets the garbage collector for a long-running server and puts it back."""

from __future__ import annotations

import gc

from waypost.serving import GC_YOUNG_THRESHOLD, settled_heap


def test_the_heap_is_frozen_and_the_young_threshold_raised_while_serving() -> None:
    before = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    with settled_heap():
        assert gc.get_freeze_count() > frozen_before
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_the_settings_are_restored_when_serving_fails() -> None:
    before = gc.get_threshold()
    try:
        with settled_heap():
            raise OSError("address in use")
    except OSError:
        pass
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
