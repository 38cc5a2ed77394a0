"""`waypost admin backup`: one consistent copy of a live database.

A backup goes through SQLite's online backup API: one read transaction on the
live database copies every page of one consistent snapshot (in WAL mode the
writer is never blocked by it), so it is safe while `serve` runs, and commits
still in the WAL are included, which a `cp` of the file would miss.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from waypost.maintenance.files import BackupError, open_read_only, present
from waypost.storage.connection import NOT_A_DATABASE_FILE, is_busy
from waypost.storage.schema_guard import NotWaypostDatabase, refuse_foreign

_STOPPING = {signal.SIGINT, signal.SIGTERM}


def backup(source: Path, target_name: str | Path) -> dict[str, Any]:
    """Copy `source` into the new file `target_name` (mode 0600) and check the copy.

    The copy is written under a temporary name beside `target` and takes
    `target`'s name only once complete: a copy cut short (SIGTERM, SIGKILL,
    a full disk) left a file under the backup's name that opened as an empty
    database. A copy that fails `integrity_check` is kept for inspection, but
    refused (`corrupt`, exit 1): a cron job's `backup || alert` must fire on it."""
    if not present(source):
        raise BackupError("not_found", f"no database at {source}")
    if source.is_dir():  # SQLite says only "disk I/O error" of it
        raise BackupError("database_unusable", f"{source}: {NOT_A_DATABASE_FILE}")
    if os.path.lexists(target_name):
        raise BackupError("target_exists", f"{target_name} exists; choose a new file")
    typed = os.fsdecode(target_name)
    if os.path.basename(typed) in ("", ".", ".."):
        # `newdir/` or `newdir/.` names a directory: a copy to a file called
        # `newdir` answers a request the operator did not make ('' is none)
        raise BackupError("cannot_create", f"{typed!r}: names no file; give the backup a file name")
    _refuse_companion_name(typed)
    target = Path(target_name)
    checked = _refuse_foreign_source(source)
    _refuse_unnameable(target)
    partial = _partial_name(target)
    # Ctrl-C and SIGTERM wait while the partial copy is created: one landing
    # between its creation and the `try` that deletes it left it behind
    # (a flaky test under load showed the window)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
    try:
        try:
            # O_EXCL: never overwrite a file by mistake
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise BackupError("cannot_create", f"{target}: {exc.strerror or exc}") from exc
        try:
            os.close(fd)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # heard from here on
            found = _copy(source, partial)
            if not checked:  # the source was locked then: the copy says what it is
                _refuse_foreign_source(partial, source)
            _take_name(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    check, pages = found
    if check != "ok":
        raise BackupError(
            "corrupt",
            f"the copy fails integrity_check ({check.splitlines()[0]}); it is kept at"
            f" {target} for inspection: the source database is damaged",
        )
    return {"backup": str(target), "bytes": target.stat().st_size, "pages": pages,
            "integrity": check}  # fmt: skip


# A file name's bytes on the file systems SQLite files live on (ext4, XFS,
# btrfs, APFS, NTFS), less the "-journal" SQLite adds to the partial copy's.
_NAME_BYTES = 255 - len("-journal")


# the names SQLite gives a database's journal, WAL and WAL index: the file
# name followed by one of these
_COMPANION_SUFFIXES = ("-journal", "-wal", "-shm")


def _refuse_companion_name(typed: str) -> None:
    """A target named as a database file's `-journal`, `-wal` or `-shm` (the
    file beside it exists) is refused before anything is copied: SQLite
    takes such a file for that database's own at its next open and, finding
    no journal or WAL header in it, deletes or resets it. `--to
    waypost.db-journal` beside the live database succeeded, every admin
    command then answered "database is busy" while `serve` ran (a hot
    journal), and the next start deleted the backup; `--to other.db-wal`
    beside a stopped database was reset by its next open (filemistakes)."""
    for name in (typed, os.path.realpath(typed)):
        for suffix in _COMPANION_SUFFIXES:
            stem = name[: -len(suffix)]
            if name.endswith(suffix) and stem and os.path.isfile(stem):
                raise BackupError(
                    "cannot_create",
                    f"{typed}: SQLite takes a file of that name for the {suffix[1:]} file"
                    f" of the database {stem} beside it, and deletes or resets it when that"
                    " database is next opened; choose another name",
                )


def _partial_name(target: Path) -> Path:
    """`TARGET.partial-PID` beside the target, the target's part cut to fit
    a file name: a target of 242-255 bytes was refused as "File name too
    long", though the name the operator chose fits."""
    suffix = f".partial-{os.getpid()}"
    room = _NAME_BYTES - len(suffix)
    return target.with_name(os.fsdecode(os.fsencode(target.name)[:room]) + suffix)


def _refuse_unnameable(target: Path) -> None:
    """A name longer than its directory's file system holds is refused before
    the copy (`cannot_create`, as for a directory that does not exist): the
    partial copy's name is cut to fit, so a 300-byte name was copied whole
    first and then failed to take its name (`backup_failed`)."""
    try:
        longest = os.pathconf(target.parent, "PC_NAME_MAX")
    except OSError:
        return  # the partial copy's creation says what is wrong with the directory
    # (some FUSE and network file systems answer -1 or 0: no bound known)
    if longest > 0 and len(os.fsencode(target.name)) > longest:
        raise BackupError(
            "cannot_create", f"{target}: File name too long ({longest} bytes at most)"
        )


def _take_name(partial: Path, target: Path) -> None:
    """Give the finished copy `target`'s name, never over a file made meanwhile."""
    try:
        os.link(partial, target)  # fails if `target` exists, where rename would replace it
    except FileExistsError as exc:
        raise BackupError("target_exists", f"{target} exists; choose a new file") from exc
    except OSError:
        # a file system without hard links: rename, having looked once more
        if os.path.lexists(target):
            raise BackupError("target_exists", f"{target} exists; choose a new file") from None
        os.rename(partial, target)


def _refuse_foreign_source(source: Path, named: Path | None = None) -> bool:
    """Another application's SQLite file is refused, as by every other admin
    command (it was copied and the backup reported `ok`). A file SQLite cannot
    read is left to the copy, which says what it found. False when another
    process's lock kept it from looking: it does not wait for it (its own 5 s
    came on top of the copy's, upgrade88), and the copy is looked at instead."""
    conn = open_read_only(source, timeout=0)
    try:
        refuse_foreign(conn)
    except NotWaypostDatabase as exc:
        raise BackupError("database_unusable", f"{named or source}: {exc}") from exc
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            return False
    except sqlite3.DatabaseError:
        pass
    finally:
        conn.close()
    return True


# SQLite's codes for a write that failed: the copy is the only file a backup
# writes, so these are the target's disk, never the database's
_FULL = sqlite3.SQLITE_FULL
# SQLITE_IOERR_WRITE, SQLITE_IOERR_FSYNC, SQLITE_IOERR_SHMSIZE (the copy of a
# WAL database opens its WAL to leave it, and a full disk cannot size its -shm)
_WRITE_FAILED = (778, 1034, 4874)

# how long a copy waits for another process's write lock, as verify does:
# SQLite's busy handler waits it out, trying again every few milliseconds
_LOCK_WAIT = 5.0


def _target_refusal(exc: BaseException, target: Path) -> BackupError | None:
    """A copy its own disk refused, said with the directory it was written in:
    "backup_failed: database or disk is full" left an operator to wonder
    whether the live database's disk was full (diskfulljourney)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.Error) or code is None:
        return None
    where = target.parent.resolve()
    if code & 0xFF == _FULL:
        said = f"the disk holding {where} is full"
    elif code in _WRITE_FAILED:
        said = f"writing the copy in {where} failed"
    else:
        return None
    return BackupError(
        "cannot_write", f"{said} (SQLite: {exc}); no copy kept, the database is untouched"
    )


def _waiting(source: Path) -> Callable[[int, int, int], None]:
    """A progress callback that gives up at the first SQLITE_BUSY or
    SQLITE_LOCKED, which a step answers once the source connection's busy
    handler has waited `_LOCK_WAIT` seconds for the lock: Python's backup
    loop retried them for ever, in C, where neither SIGTERM nor Ctrl-C is
    heard (restorejourney); a call into Python code here lets their
    handlers run. The waiting itself is SQLite's, which tries again every
    few milliseconds: counting 250 ms rounds of Python's loop with no busy
    timeout instead found no gap between another process's steady commits
    (review89: 7 of 10 backups of such a file refused, where SQLite's own
    handler copied all 10)."""

    def progress(status: int, remaining: int, total: int) -> None:
        if status in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise sqlite3.OperationalError(
                f"database is locked: another process kept {source} locked for"
                f" {_LOCK_WAIT:g} s; no copy made"
            )

    return progress


def _copy(source: Path, target: Path) -> tuple[str, int]:
    """One snapshot of `source` into `target`; its integrity_check and page count."""
    src = open_read_only(source, locking=True, timeout=_LOCK_WAIT)
    dst = sqlite3.connect(target)
    try:
        # pages=-1: the whole database in one step, so from one snapshot
        src.backup(dst, pages=-1, progress=_waiting(source))
        # the copy stands alone: no -wal file beside it to lose
        dst.execute("PRAGMA journal_mode = DELETE")
        check = dst.execute("PRAGMA integrity_check").fetchone()[0]
        pages = dst.execute("PRAGMA page_count").fetchone()[0]
    except BaseException as exc:
        dst.close()
        # the copy and the journal files a failed copy may leave beside it
        for leftover in [target, *(Path(f"{target}-{s}") for s in ("journal", "wal", "shm"))]:
            leftover.unlink(missing_ok=True)
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            # malformed, not a database: SQLite could not even read it through
            raise BackupError(
                "corrupt", f"the source database cannot be read through ({exc}); no copy made"
            ) from exc
        refused = _target_refusal(exc, target)
        if refused is not None:
            raise refused from exc
        raise
    finally:
        src.close()
    dst.close()
    return check, pages
