"""The database's three files stay the ones the service opened.

SQLite goes on reading and writing the files it opened after they were
renamed, replaced or deleted under it (its descriptors still point at them),
while any other process that opens the path gets other files. Deleting the
`-shm` file under a running `serve` and then running one `admin` write let
two processes write one WAL with two indexes, which destroyed the database;
a renamed database left the writes acknowledged since in a `-wal` file that
the next database created at the path reset; a deleted `-wal` held every
acknowledged write since in a file no process could open after a crash.
A backup copied over the live file in place (`cp backup waypost.db`: the
same inode, so no identity changed) was read through the WAL's newer pages
and written on by the service, which acknowledged writes into a file that
SQLite then found malformed, and its stop's checkpoint wrote the WAL over
the backup (filemistakes): so the writer also reads the file's header,
which says WAL mode for as long as any connection has the file open (a
backup's says rollback journal; a file being copied over says nothing).

So the writer looks before every batch (three `stat` calls, a few
microseconds), and reads look at most once a second: once a file is not the
one opened, the service stops answering from its store (503) until it is
restarted on a file an operator has put right (docs/operations.md).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from waypost.errors import Unavailable
from waypost.storage.connection import STORAGE_RETRY_AFTER, companion

log = logging.getLogger("waypost.storage")

_READ_CHECK_SECONDS = 1.0


def _identity(name: str) -> tuple[int, int]:
    st = os.stat(name)
    return st.st_dev, st.st_ino


def files_changed_refusal() -> Unavailable:
    """The answer to every read and write once the database's files changed
    under the service (the paths stay in the log: they are not the client's)."""
    return Unavailable(
        "the database's files were changed under the service; an operator must restart it",
        {"reason": "database_files_changed"},
        retry_after=STORAGE_RETRY_AFTER,
    )


class FileWatch:
    """What the database's files were when they were opened, and whether a
    path now names another file (or none)."""

    def __init__(self, path: Path) -> None:
        # absolute names: the working directory may change
        self._names = [os.path.abspath(path), companion(path, "-wal"), companion(path, "-shm")]
        self._known = [_identity(name) for name in self._names]
        # the file SQLite has open, to read its header: kept open until every
        # connection is closed (`close`), since closing a descriptor of the
        # file drops every POSIX lock this process holds on it, SQLite's too
        self._file: int | None = os.open(self._names[0], os.O_RDONLY)
        self._lock = threading.Lock()
        self._checked_at = time.monotonic()
        # once set, never cleared: a process that wrote through other files
        # (a new `-shm`) left this one's view of the WAL stale
        self.changed: str | None = None

    @property
    def wal_name(self) -> str:
        """The `-wal` file SQLite writes for this database: named once, at
        open, as SQLite names it (a symbolic link replaced since then does
        not move it, and resolving the link again cost a `realpath` of the
        whole path per batch)."""
        return self._names[1]

    def check(self) -> str | None:
        """What changed (e.g. "/srv/w.db-shm was deleted"), or None; the
        first change found is logged once and kept."""
        if self.changed is None:
            found = self._look()
            if found is not None:
                name, what = found
                with self._lock:
                    if self.changed is None:
                        self.changed = f"{name} {what}"
                        log.error(
                            "%s while the service was running: every read and write now"
                            " answers 503 until serve is restarted (docs/operations.md,"
                            " 'The database's files')",
                            self.changed,
                        )
        return self.changed

    def check_now_and_then(self) -> str | None:
        """`check`, at most once a second (for reads, which run on the event
        loop's thread and the pool's)."""
        now = time.monotonic()
        if self.changed is None and now - self._checked_at >= _READ_CHECK_SECONDS:
            self._checked_at = now
            return self.check()
        return self.changed

    def index_replaced(self) -> bool:
        """Whether the `-shm` path names another file than the one opened: the
        WAL's index of some other process, which may have written through it
        (looked at now, whatever change was found first, or none: a stop
        can come before any read or write looked)."""
        name, known = self._names[2], self._known[2]
        try:
            return _identity(name) != known
        except OSError:
            return False  # deleted and not made again: nobody else indexed the WAL

    def overwritten(self) -> bool:
        """Whether the file opened no longer holds a database in WAL mode:
        another file was copied over it in place (looked at now, whatever
        change was found first). Its pages are then no longer the ones the
        WAL was written over: a checkpoint would write them over the file
        put there."""
        if self._file is None:
            return False
        try:
            header = os.pread(self._file, 20, 0)
        except OSError:
            return False  # no verdict: the reads and writes will say
        return not (header.startswith(b"SQLite format 3\x00") and header[18:20] == b"\x02\x02")

    def close(self) -> None:
        """Let go of the file, once every connection to it is closed."""
        if self._file is not None:
            os.close(self._file)
            self._file = None

    def _look(self) -> tuple[str, str] | None:
        for name, known in zip(self._names, self._known, strict=True):
            try:
                if _identity(name) != known:
                    return name, "was replaced by another file"
            except FileNotFoundError:
                return name, "was deleted or moved"
            except OSError:
                continue  # unreadable directory: no verdict (the writes will say)
        if self.overwritten():
            return self._names[0], "was overwritten in place (another file copied over it)"
        return None
