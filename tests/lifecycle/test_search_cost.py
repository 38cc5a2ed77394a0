"""A search of the tenant's memos costs a page, not the tenant.

At 50,000 memos every search with `q` ran the full-text match once per memo
of the tenant (1.2-3.5 s: past the time limit, so `503`), and a page past a
cursor walked from the newest memo down to it (23 ms); scaleaudit2, on
2026-12-03.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from tests.cost_support import unit_steps
from tests.lifecycle.support import Lifecycle, Member, memo
from waypost.resolvers.lifecycle import store
from waypost.resolvers.lifecycle.queries import memo_match


async def _register(
    author: Member, first: int, count: int, rare_every: int = 0, clock: Any = None
) -> None:
    """Memos `adr.m<first>`...; with `clock`, each a millisecond after the last."""
    for n in range(first, first + count):
        title = "Ledger partitions" + (" kalu" if rare_every and n % rare_every == 0 else "")
        r = await author.register(memo(f"adr.m{n:04d}", title=title))
        assert r.status_code == 200, r.text
        if clock is not None:
            clock.advance(milliseconds=1)


async def _steps(lifecycle: Lifecycle, call: Any) -> int:
    """The SQLite VM steps of `call(conn)` in one read."""
    return await unit_steps(lifecycle.service.rt.db, call)


def _oldest_but_four(conn: sqlite3.Connection) -> tuple[str, str]:
    row = conn.execute(
        "SELECT updated_at, id FROM lifecycle_memos ORDER BY updated_at, id DESC LIMIT 1 OFFSET 4"
    ).fetchone()
    return (row[0], row[1])


async def test_a_rare_term_and_a_deep_page_cost_the_same_among_many_memos(
    lifecycle: Lifecycle, author: Member, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(A page past a cursor still walks the memos updated in the cursor's
    own millisecond: the order is newest first, then by id.)"""
    monkeypatch.setattr(store, "PROBE_MEMOS", 0)  # the way of a large tenant
    rare = memo_match("kalu")

    async def searches() -> int:
        deep = await lifecycle.service.rt.db.read(_oldest_but_four)

        def search(conn: sqlite3.Connection) -> None:
            assert len(store.search(conn, "acme", rare, None, 21)) == 1
            assert len(store.search(conn, "acme", None, deep, 21)) == 4

        return await _steps(lifecycle, search)

    clock = lifecycle.service.clock
    await _register(author, 0, 1, rare_every=1, clock=clock)
    await _register(author, 1, 29, clock=clock)
    few = await searches()
    await _register(author, 30, 300, clock=clock)
    many = await searches()
    assert many <= few + few // 100, (few, many)


@pytest.mark.parametrize("q", ["kalu", "ledger", "nowhere"])
async def test_every_way_of_searching_walks_the_same_pages(
    lifecycle: Lifecycle, author: Member, monkeypatch: pytest.MonkeyPatch, q: str
) -> None:
    """A small tenant matches each of its memos (`store.PROBE_MEMOS`); else
    a page is made from the tenant's matches when they are few
    (`store.FEW_MATCHES`), and the tenant's memos are walked and kept when
    among them when they are many: the same items in the same pages every
    way, ties of `updated_at` included (the test clock stands still), with
    another tenant's memos in the same index."""
    await _register(author, 0, 40, rare_every=3)
    elsewhere = await lifecycle.member("author", tenant="globex")
    await _register(elsewhere, 100, 50, rare_every=5)

    def walk(conn: sqlite3.Connection) -> list[list[tuple[Any, ...]]]:
        pages, after = [], None
        while True:
            rows = [tuple(r) for r in store.search(conn, "acme", memo_match(q), after, 8)]
            pages.append(rows[:7])
            if len(rows) <= 7:
                return pages
            after = (rows[6][2], rows[6][0])

    walks = []
    # the 40 memos one by one; from the matches; the memos kept when among
    # the matches (when any match)
    for probe, few in ((1000, 1000), (0, 1000), (0, 0)):
        monkeypatch.setattr(store, "PROBE_MEMOS", probe)
        monkeypatch.setattr(store, "FEW_MATCHES", few)
        walks.append(await lifecycle.service.rt.db.read(walk))
    assert walks[0] == walks[1] == walks[2]
    found = sum(len(p) for p in walks[0])
    assert found == {"kalu": 14, "ledger": 40, "nowhere": 0}[q]


async def test_a_small_tenant_does_not_pay_for_a_large_ones_matches(
    lifecycle: Lifecycle, author: Member
) -> None:
    """A tenant of a few memos beside a large one read every match of the
    file to find its own (7-8 ms for `the` beside 50,000 memos): it matches
    its own memos one by one now."""
    small = await lifecycle.member("author", tenant="small")
    await _register(small, 900, 5)
    ledger = memo_match("ledger")

    def five(conn: sqlite3.Connection) -> None:
        assert len(store.search(conn, "small", ledger, None, 21)) == 5

    async def search() -> int:
        return await _steps(lifecycle, five)

    await _register(author, 0, 40)
    few = await search()
    await _register(author, 40, 200)
    many = await search()
    assert many <= few + few // 100, (few, many)


async def test_a_term_common_elsewhere_and_absent_here_costs_its_matches(
    lifecycle: Lifecycle, author: Member, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large tenant searching a term other tenants hold many times and it
    holds none of walked all its memos looking for one (22 ms at 50,000):
    the page is made from its own matches, which are few (none)."""
    monkeypatch.setattr(store, "PROBE_MEMOS", 10)
    monkeypatch.setattr(store, "FEW_MATCHES", 30)  # 40 matches in the file: many
    elsewhere = await lifecycle.member("author", tenant="globex")
    await _register(elsewhere, 900, 40, rare_every=1)
    rare = memo_match("kalu")

    def none(conn: sqlite3.Connection) -> None:
        assert store.search(conn, "acme", rare, None, 21) == []

    async def steps() -> int:
        # one segment: FTS5 reads each of its segments for a term, and 340
        # commits leave more than 40 did
        await lifecycle.service.rt.db.write(
            lambda conn: conn.execute(
                "INSERT INTO lifecycle_search (lifecycle_search) VALUES ('optimize')"
            )
        )
        return await _steps(lifecycle, none)

    await _register(author, 0, 40)
    few = await steps()
    await _register(author, 40, 300)
    many = await steps()
    assert many <= few + few // 100, (few, many)
