"""The INFO line "writes are committed again" must mean that a write was
committed. On a real full disk (an 8 MB ext4 loop device filled by a filler
file) and on an ext4 remounted read-only by an error (errors=remount-ro), a
`serve` refusing every client write with 503 logged "writes are committed
again: N refused in 10.0 s before this" every 10 s: the sweep's pass, which
had nothing to purge, committed an empty transaction, which needs no room
on the disk (diskfulljourney). An operator reading the log was told the
service had recovered while nothing had been freed and every write still
failed.

The disk is filled here as in test_storage_conditions.py: past
`max_page_count` SQLite answers SQLITE_FULL ("database or disk is full"),
the error a full filesystem gives, through the same writer path (COMMIT
refused, `Outage.refused`)."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Caller, Service
from tests.test_storage_conditions import fill_the_disk, free_the_disk
from waypost.storage.migrate import migrate


def _recovered(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "committed again" in r.getMessage()]


async def test_a_sweep_pass_that_writes_nothing_does_not_say_writes_are_committed_again(
    service: Service, human: Caller, project: str, caplog: pytest.LogCaptureFixture
) -> None:
    from waypost.resolvers.core import sweep

    caplog.set_level(logging.INFO, logger="waypost.storage")
    await fill_the_disk(service.rt.db)
    big = {"kind": "fact", "title": "big", "body": "x" * 60_000}
    refused = await human.post("/api/v1/projects/demo/knowledge", big)
    assert refused.status_code == 503, refused.text
    # what `serve` runs every --sweep-interval: nothing to purge or time out
    report = await sweep.run_once(service.rt)
    assert not any(report.values()), report
    # the disk is as full as before: the same write is refused again
    still = await human.post("/api/v1/projects/demo/knowledge", big)
    assert still.status_code == 503, still.text
    # observed: ["writes are committed again: 1 refused in 0.0 s before this
    # (the last: the database's disk is full)"]
    assert _recovered(caplog) == []
    # a write that is committed does say it
    await free_the_disk(service.rt.db)
    kept = await human.post("/api/v1/projects/demo/knowledge", big)
    assert kept.status_code == 201, kept.text
    assert len(_recovered(caplog)) == 1 and "2 refused" in _recovered(caplog)[0]


def test_serve_started_on_a_full_disk_says_the_disk_is_full(tmp_path: Path) -> None:
    """A database stopped cleanly (no -wal, no -shm beside it) on a disk with
    no free byte: `serve` cannot make the 32 KiB -shm and said `Error:
    database_unusable: PATH: disk I/O error`, exit 1, which sends an operator
    looking for a failing device or a damaged file (and a restore) where a
    file deleted would do (diskfulljourney). Needs a filesystem it can fill:
    a tmpfs of 1 MiB, mounted by root; skipped otherwise."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        made = sqlite3.connect(tmp_path / "w.db", isolation_level=None)
        made.execute("PRAGMA journal_mode = WAL")  # as serve leaves it
        migrate(made)
        made.close()  # the last connection: no -wal or -shm left beside it
        path = mnt / "w.db"
        shutil.copyfile(tmp_path / "w.db", path)
        filler = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:  # every byte left, taken
            while True:
                os.write(filler, b"\0" * 4096)
        except OSError as full:
            assert full.errno == errno.ENOSPC
        finally:
            os.close(filler)
        result = subprocess.run(
            [sys.executable, "-m", "waypost.cli", "serve", "--db", str(path), "--port", "0",
             "--lifecycle-port", "0"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 1, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith(f"Error: database_unusable: {path}: "), result.stderr
        # observed: "Error: database_unusable: .../w.db: disk I/O error"
        reason = last.removeprefix(f"Error: database_unusable: {path}: ")
        assert "full" in reason, last
    finally:
        subprocess.run(["umount", str(mnt)])


async def test_a_batch_whose_last_unit_writes_nothing_still_says_writes_are_committed_again(
    service: Service, human: Caller, project: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer tells the line when *a* unit of the committed batch
    changed a row, not only its last one: a write batched ahead of a unit
    that changes nothing (a conditional update that matched no row, a
    sweep's empty pass) was committed all the same (review80)."""
    import asyncio
    import threading

    caplog.set_level(logging.INFO, logger="waypost.storage")
    db = service.rt.db
    await fill_the_disk(db)
    big = {"kind": "fact", "title": "big", "body": "x" * 60_000}
    refused = await human.post("/api/v1/projects/demo/knowledge", big)
    assert refused.status_code == 503, refused.text
    await free_the_disk(db)
    assert _recovered(caplog) == []

    started, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        started.set()
        assert release.wait(10)  # the writer waits here for the two below

    def rename(conn: sqlite3.Connection) -> int:
        return conn.execute("UPDATE projects SET name = 'Renamed' WHERE id = 'demo'").rowcount

    def nothing(conn: sqlite3.Connection) -> int:
        return conn.execute("UPDATE projects SET name = 'x' WHERE id = 'none'").rowcount

    batches: list[int] = []
    db.observe_batches(lambda units, seconds: batches.append(units))
    try:
        held = asyncio.ensure_future(db.write(hold))
        assert await asyncio.to_thread(started.wait, 10)
        both = asyncio.gather(db.write(rename), db.write(nothing))
        await asyncio.sleep(0.1)  # both waiting for the writer
        release.set()
        await held
        assert list(await both) == [1, 0]
    finally:
        db.observe_batches(service.rt.metrics.observe_commit)
    # (the held unit, past the batch's time bound, commits alone)
    assert batches[-1] == 2, batches  # rename and nothing, in one batch
    (line,) = _recovered(caplog)
    assert "1 refused" in line
