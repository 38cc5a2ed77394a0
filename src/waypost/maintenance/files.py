"""Opening the database files the admin commands read, and their one error."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from waypost.storage.connection import NOT_A_REGULAR_FILE, foreign_wal


class BackupError(Exception):
    """A refused backup or verify, with a code as the CLI prints it (`code: message`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def present(path: Path) -> bool:
    """Whether a file is at `path`; a path that cannot even be looked at (a
    directory this user may not search, a name too long) is `database_unusable`,
    said in one line, not a traceback, and so is a FIFO, a socket or a device
    (opening a FIFO read-only waits for a writer: the command hung; a
    directory is refused by each command in its own words)."""
    try:
        exists = path.exists()
        special = exists and not path.is_file() and not path.is_dir()
    except OSError as exc:
        raise BackupError("database_unusable", f"{path}: {exc.strerror or exc}") from exc
    if special:
        raise BackupError("database_unusable", f"{path}: {NOT_A_REGULAR_FILE}")
    if exists and path.is_file():
        foreign = foreign_wal(path)
        if foreign is not None:
            raise BackupError("database_unusable", f"{path}: {foreign}")
    return exists


def open_read_only(
    path: Path, *, locking: bool = False, timeout: float = 5.0
) -> sqlite3.Connection:
    """`path` opened read-only. Through a URI, whose path is percent-encoded
    here: `prod#1.db` was read as the file `prod` (a new, empty one), and
    `prod%41.db` as `prodA.db`.

    A WAL file at rest is read as immutable: SQLite otherwise creates its
    `-wal` and `-shm` and, read-only, cannot remove them (an empty `-wal`
    and a 32 KiB `-shm` were left beside the file after a list or a backup,
    cliaudit); for a file this user may not write, with the file's
    read-only mode, and they kept `serve` refused after the file's mode was
    mended. At rest (no `-wal`, no `-shm`: no connection has it open) the
    file holds every commit; were a service to start on it and checkpoint
    during the read, the read could fail as malformed, never change the
    file. A `locking` read (a backup's copy, which must be one snapshot
    whatever starts beside it) takes SQLite's locks on a file it may write,
    and leaves those two files."""
    resolved = path.resolve()  # the name SQLite gives the -wal and -shm (a symlink's target)
    uri = f"{resolved.as_uri()}?mode=ro"
    writable = os.access(resolved, os.W_OK)
    if (not locking or not writable) and _wal_at_rest(resolved):
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True, timeout=timeout)


def _wal_at_rest(path: Path) -> bool:
    """In WAL mode by its header (bytes 18 and 19 are 2) with no `-wal` and
    no `-shm` beside it."""
    try:
        with path.open("rb") as file:
            header = file.read(20)
    except OSError:
        return False
    beside = (Path(f"{path}{suffix}") for suffix in ("-wal", "-shm"))
    return header[18:20] == b"\x02\x02" and not any(os.path.lexists(p) for p in beside)
