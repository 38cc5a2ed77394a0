"""A point read (`Database.read_point`, the loop's own connection, which
never waits) that finds the file held by another process goes to the reader
pool, which waits for it there (storage/db.py). The hold is real: another
process runs what SQLite does while it recovers a WAL (it holds the WAL's
write and recovery locks, and the wal-index header's two copies disagree),
so the loop's connection gets SQLITE_BUSY_RECOVERY."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from waypost.storage.db import Database

# The wal-index's lock bytes start at offset 120 of the -shm file (SQLite's
# unix VFS): 0 is the WAL's write lock, 2 its recovery lock.
_RECOVERING = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 120)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 122)
byte = os.pread(fd, 1, 64)  # in the header's second copy
os.pwrite(fd, bytes([byte[0] ^ 0xFF]), 64)
print("held", flush=True)
sys.stdin.readline()
os.pwrite(fd, byte, 64)
fcntl.lockf(fd, fcntl.LOCK_UN, 1, 122)
fcntl.lockf(fd, fcntl.LOCK_UN, 1, 120)
print("released", flush=True)
sys.stdin.readline()
"""


class Recovering:
    """Another process that holds the database as a WAL recovery does, until
    `release()`."""

    def __init__(self, db_path: Path) -> None:
        shm = Path(f"{db_path}-shm")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _RECOVERING, str(shm)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None and self.process.stdin is not None
        assert self.process.stdout.readline().strip() == "held"
        self.released = False

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "released"

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=5)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


async def test_a_point_read_the_file_is_held_for_goes_to_the_pool_and_is_answered(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / "w.db"
    db = Database(db_path)
    await db.open()
    busy: list[str] = []
    threads: list[str] = []
    try:
        # the loop's connection never waits for a lock (it would stall the
        # loop, every request of both listeners, for the busy timeout); and it
        # has read once, so it has the wal-index mapped
        timeout = await db.read_point(lambda c: c.execute("PRAGMA busy_timeout").fetchone()[0])
        assert timeout == 0
        holder = Recovering(db_path)
        try:

            def count(conn: sqlite3.Connection) -> int:
                threads.append(threading.current_thread().name)
                try:
                    return int(conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0])
                except sqlite3.OperationalError as exc:
                    busy.append(exc.sqlite_errorname)
                    # the other process is done once the loop's try has failed:
                    # the pool's read then finds the file free
                    holder.release()
                    raise

            found = await db.read_point(count)
        finally:
            holder.close()
    finally:
        await db.close()
    assert found > 0
    assert busy == ["SQLITE_BUSY_RECOVERY"]  # the loop's connection did not wait
    assert threads[0] == threading.current_thread().name
    assert len(threads) == 2 and threads[1].startswith("waypost-reader")
