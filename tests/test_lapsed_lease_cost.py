"""A claim that finds nothing ready names the lapsed leases (migration 0034):
its look-up is a range of the claimed tasks by lease expiry, so it costs the
same however many other claimed tasks hold a live lease (counted in SQLite
VM steps, not timed), and still names the lapsed ones longest lapsed first."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.cost_support import add_tasks, counting_steps, demo_db
from waypost.resolvers.tasks import store
from waypost.resolvers.tasks.leases import EXPIRED_LEASES_READ

NOW = "2026-12-01T00:00:00.000Z"


def _claim(conn: sqlite3.Connection, first: int, count: int, expires_at: str) -> None:
    owner = conn.execute("SELECT id FROM principals LIMIT 1").fetchone()[0]
    conn.executemany(
        "UPDATE tasks SET status = 'claimed', lease_owner_id = ?,"
        " lease_expires_at = ? WHERE id = ?",
        [(owner, expires_at, f"task_{i:06d}") for i in range(first, first + count)],
    )


def _lapsed(conn: sqlite3.Connection) -> tuple[list[str], int]:
    rows, steps = counting_steps(conn, lambda: store.expired_leases(conn, "demo", NOW, 21))
    return [row["id"] for row in rows], steps


def test_lapsed_leases_are_found_without_reading_the_live_ones(
    tmp_path: Path, migrated_template: Path
) -> None:
    conn, actor = demo_db(tmp_path / "leases.db", migrated_template)
    add_tasks(conn, actor, 3020, 0)
    _claim(conn, 0, 1, "2026-11-30T12:00:00.000Z")
    _claim(conn, 1, 1, "2026-11-30T06:00:00.000Z")
    _claim(conn, 2, 1, NOW)  # lapses at this very instant
    _claim(conn, 3, 3, "2026-12-01T00:15:00.000Z")  # still live
    found, few = _lapsed(conn)
    assert found == ["task_000001", "task_000000", "task_000002"]
    _claim(conn, 6, 3000, "2026-12-01T00:10:00.000Z")
    found, many = _lapsed(conn)
    assert found == ["task_000001", "task_000000", "task_000002"]
    assert many <= few + few // 100, (few, many)


def test_many_lapsed_leases_cost_a_claim_the_same_bounded_read(
    tmp_path: Path, migrated_template: Path
) -> None:
    """A claim reads at most EXPIRED_LEASES_READ of the lapsed leases, then
    names those no decision holds first: ordering every lapsed lease in SQL
    held the writer 7.5 ms an empty claim at 8,000 of them (review72)."""
    conn, actor = demo_db(tmp_path / "lapsed.db", migrated_template)
    add_tasks(conn, actor, 2500, 0)
    _claim(conn, 0, 250, "2026-11-30T12:00:00.000Z")

    def read() -> tuple[list[sqlite3.Row], int]:
        return counting_steps(
            conn, lambda: store.expired_leases(conn, "demo", NOW, EXPIRED_LEASES_READ)
        )

    rows, few = read()
    assert len(rows) == EXPIRED_LEASES_READ
    _claim(conn, 250, 2250, "2026-11-30T13:00:00.000Z")
    rows, many = read()
    assert [row["id"] for row in rows] == [f"task_{i:06d}" for i in range(EXPIRED_LEASES_READ)]
    assert many <= few + few // 100, (few, many)
