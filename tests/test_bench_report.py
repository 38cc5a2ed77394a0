"""The benches' own arithmetic: the context bench's paired ratio
(bench/context.py) on known samples, the store bench's CPU reading."""

from __future__ import annotations

import math
import os
import time

from bench.context import Row, paired_median
from bench.store import percentile, process_cpu_seconds


def test_the_paired_median_compares_each_query_with_itself() -> None:
    """Query i of one row against query i of the base row: a row faster on
    the cheap query and slower on the costly one has a median ratio the
    quotient of the two p50s does not show (0.3 here)."""
    base = Row("bare", samples=[1.0, 10.0, 100.0])
    row = Row("packet", samples=[3.0, 1.0, 200.0])
    assert row.pct(0.5) / base.pct(0.5) == 0.3
    assert paired_median(row, base) == 2.0


def test_percentiles_are_nearest_rank() -> None:
    """`int(q * n)` was one rank high: p99 of 100 samples was their maximum."""
    hundred = [float(i) for i in range(100, 0, -1)]
    assert (percentile(hundred, 0.5), percentile(hundred, 0.99)) == (50.0, 99.0)
    assert percentile([float(i) for i in range(1, 201)], 0.99) == 198.0
    assert percentile([7.0], 0.99) == 7.0


def test_a_rows_percentile_can_take_the_queries_that_matched_alone() -> None:
    row = Row("packet", samples=[1.0, 5.0, 2.0, 6.0, 7.0])
    matched = [False, True, False, True, True]
    assert row.pct(0.5, matched) == 6.0
    assert row.pct(0.5, [not m for m in matched]) == 1.0


def test_a_row_cut_short_is_paired_over_the_queries_it_ran() -> None:
    base = Row("bare", samples=[1.0, 2.0, 4.0, 8.0])
    prefix = Row("datasette", samples=[10.0, 40.0])
    assert paired_median(prefix, base) == 15.0


def test_a_process_cpu_time_grows_with_its_work_and_is_none_when_gone() -> None:
    """The store bench's CPU per create reads a server's time from /proc."""
    before = process_cpu_seconds(os.getpid())
    assert before is not None
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # spend CPU this process owns
        pass
    after = process_cpu_seconds(os.getpid())
    assert after is not None and after > before
    assert process_cpu_seconds(2**22 + 1) is None  # past Linux's largest pid


def test_a_percentile_of_no_samples_is_nan() -> None:
    """A server that answered no create as asked has no latencies to rank."""
    assert math.isnan(percentile([], 0.5))
