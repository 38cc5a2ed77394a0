"""Opening one SQLite connection: file mode, pragmas and set-up hooks, once.

Everything a connection needs is done here when it opens and never again per
call: re-registering an SQL function (`create_function`) expires every
prepared statement of the connection, so a hook that ran on each unit of work
would make SQLite re-prepare every statement after it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from waypost.storage.schema_guard import refuse_unrunnable

# Installs what a connection needs beyond the pragmas (SQL functions, ...).
ConnectionHook = Callable[[sqlite3.Connection], None]

# Statements kept prepared per connection (Python's default is 128); the
# service has a few hundred distinct statements, the hot ones well under this.
CACHED_STATEMENTS = 256


def is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


# Storage conditions that refuse a write without anything being wrong with
# the request: the disk is full, the file or its directory went read-only,
# the device failed a read or write. Nothing was committed, and the same
# request may succeed once an operator has acted: 503 with Retry-After.
_STORAGE_REFUSALS = {
    sqlite3.SQLITE_FULL: "the database's disk is full",
    sqlite3.SQLITE_READONLY: "the database is read-only",
    sqlite3.SQLITE_IOERR: "the database's storage failed a read or write",
}
STORAGE_RETRY_AFTER = 30  # seconds: an operator has to act first


def storage_refusal(exc: BaseException) -> str | None:
    """What stopped a write, when SQLite says it was the storage (else None)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.Error) or code is None:
        return None
    return _STORAGE_REFUSALS.get(code & 0xFF)


def is_damage(exc: BaseException) -> bool:
    """SQLite found the file damaged (SQLITE_CORRUPT) or no database at all
    (SQLITE_NOTADB): no request can succeed until an operator restores it."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.DatabaseError)
        and code is not None
        and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    )


def rollback_if_open(conn: sqlite3.Connection) -> None:
    """ROLLBACK, unless SQLite already ended the transaction itself (disk
    full, an I/O error): a ROLLBACK then raises "no transaction is active",
    which would replace the error that says why."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def check_writable(conn: sqlite3.Connection) -> None:
    """Raise if writes to this database would fail: SQLite opens a file it may
    not write read-only without a word (and BEGIN IMMEDIATE still succeeds),
    so the service would start, answer reads and refuse every write."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        # a write statement that changes nothing: it needs a writable file
        conn.execute("DELETE FROM schema_migrations WHERE 0")
    finally:
        rollback_if_open(conn)


def create_private(path: Path) -> None:
    """Create the database file mode 0600 if it does not exist yet.

    SQLite would create it with the process umask (often 0644); it gives the
    `-wal` and `-shm` files it creates later the mode of the database file,
    so creating the file first is what keeps all three owner-only.

    An empty file (`touch waypost.db`, made with the umask's mode) is no
    database yet: SQLite writes a new one into it, so it is made 0600 too.
    SQLite made the database and its `-wal` and `-shm` 0644 in it, silently.
    """
    if str(path) == ":memory:":
        return
    if path.exists():
        _make_empty_file_private(path)
        return
    _refuse_orphaned_wal(path)
    # the file a symbolic link names, when the link is there and its file not
    # yet: O_EXCL refuses to follow the link (EEXIST), which read as "it
    # exists", and SQLite then created the file with the umask's mode
    target = Path(os.path.realpath(path))
    try:
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise FileNotFoundError(f"the directory {target.parent} does not exist") from None
        raise
    os.close(fd)


def _make_empty_file_private(path: Path) -> None:
    """chmod 0600 an empty regular file about to become the database (a file
    that already holds one keeps its mode: `open_to_others`)."""
    try:
        found = os.stat(path)
        if stat.S_ISREG(found.st_mode) and found.st_size == 0 and found.st_mode & 0o077:
            os.chmod(path, 0o600)
    except PermissionError:
        pass  # not its owner: the start-up warning names the mode


def open_to_others(path: Path) -> dict[str, int]:
    """The database's files (itself, its `-wal`, its `-shm`) that users other
    than the owner may read or write, with their modes. A file an older
    build created with the umask's 0644 stays so, and SQLite gives the `-wal`
    and `-shm` it creates the file's mode: this build created them 0644 too,
    holding every record and token hash, and said nothing."""
    if str(path) == ":memory:":
        return {}
    shared: dict[str, int] = {}
    for name in (os.path.realpath(path), companion(path, "-wal"), companion(path, "-shm")):
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
        except OSError:
            continue  # not there (yet): SQLite makes it with the file's mode
        if mode & 0o077:
            shared[name] = mode
    return shared


def refuse_unwritable_directory(path: Path) -> None:
    """Refuse, before anything is created, a directory in which this user
    may not create the files SQLite needs: the database file when it is
    new, and the `-wal` and `-shm` it makes beside it. SQLite said only
    "unable to open database file", and a new file "[Errno 1] Operation not
    permitted", neither naming the directory (diskfulljourney: a directory
    made immutable, or a file system mounted read-only)."""
    if str(path) == ":memory:":
        return
    names = (str(path), companion(path, "-wal"), companion(path, "-shm"))
    if all(os.path.exists(name) for name in names):
        return  # nothing to create
    directory = os.path.dirname(os.path.realpath(path)) or "."
    if os.path.isdir(directory) and not os.access(directory, os.W_OK):
        raise PermissionError(
            f"this user may not create files in {directory}: SQLite makes the -wal and"
            " -shm files beside the database; give the service's user write access to"
            " that directory"
        )


def refuse_unwritable(path: Path) -> None:
    """Refuse, before SQLite opens anything, a database file (or a `-wal` or
    `-shm` beside it) that this user may not write. SQLite opens such a file
    read-only and creates the missing `-wal` and `-shm` with the file's own
    mode, read-only too: the refusal that followed then outlived a mended
    mode (the `-shm` still could not be written, and the message named the
    database file)."""
    if str(path) == ":memory:":
        return
    for name, what in (
        (str(path), "the file"),
        (companion(path, "-wal"), "its -wal file"),
        (companion(path, "-shm"), "its -shm file"),
    ):
        if os.path.exists(name) and not os.access(name, os.W_OK):
            raise PermissionError(
                f"this user may not write {what}: give the service's user write access"
                " to the database file and the -wal and -shm files beside it"
            )


# what a directory given as the database is called, by `serve` and every
# admin command alike
NOT_A_DATABASE_FILE = "is a directory, not a database file"
NOT_A_REGULAR_FILE = "not a regular file"


def refuse_other_names(path: Path) -> None:
    """Refuse a database file that has more than one name (hard links).

    SQLite names the `-wal` and `-shm` after the name a process opened, so
    a process that opens the file by another name writes another WAL
    through another index, and each process's checkpoint writes its pages
    over the other's: two `serve` processes, one on `waypost.db` and one on
    a hard link to it, each acknowledged 80 writes, and after both stopped
    the file held one's 80 and none of the other's, `admin verify` clean
    (filemistakes). A symbolic link is no other name (SQLite resolves it)."""
    if str(path) == ":memory:":
        return
    try:
        found = os.stat(path)
    except OSError:
        return  # no file yet (or none to look at): SQLite says what is wrong
    if stat.S_ISDIR(found.st_mode):
        # a directory's link count is 2 and more: it was called a file of
        # that many names, and the operator sent looking for them (docsjourney)
        raise PermissionError(NOT_A_DATABASE_FILE)
    if not stat.S_ISREG(found.st_mode):
        # a FIFO, socket or device: `serve` said "disk I/O error" where the
        # admin commands say this (operatorjourney)
        raise PermissionError(NOT_A_REGULAR_FILE)
    names = found.st_nlink
    if names > 1:
        raise PermissionError(
            f"the file has {names} names (hard links): a process that opens it by another"
            " name writes another -wal, and the two overwrite each other's writes; remove"
            f" the other names (find / -xdev -samefile {path}) or copy the file instead"
            " ('admin backup'), then start again"
        )


def companion(path: Path, suffix: str) -> str:
    """The name of the database's `-wal` or `-shm` file: SQLite names them
    after the file a symbolic link points to (the link's own name has none)."""
    return f"{os.path.realpath(path)}{suffix}"


def _refuse_orphaned_wal(path: Path) -> None:
    """Refuse to create a database beside a `-wal` file that holds pages: it
    is the missing database's latest writes (the file was moved or deleted),
    and a new database at the path would reset it."""
    wal = Path(companion(path, "-wal"))
    try:
        size = wal.stat().st_size
    except FileNotFoundError:
        return
    # looked at again: another process creating the same new database at the
    # same instant may have made the file, and filled its -wal, since this
    # one found no file (one of three connections opening a new file at
    # once was refused so, in a full run of the suite)
    if size > 0 and not os.path.exists(path):
        raise FileNotFoundError(
            f"the file is missing but {wal.name} beside it holds {size:,} bytes of its"
            " writes: put the database file back (or move the -wal away to start anew)"
        )


# a -wal file begins with a 32-byte header; a frame follows it
_WAL_HEADER_BYTES = 32


def wal_frame_bytes(path: Path) -> int:
    """The size of the database's `-wal` when it holds frames, else 0 (none,
    or only its header: the last process closed the file, or it is new)."""
    if str(path) == ":memory:":
        return 0
    try:
        size = os.stat(companion(path, "-wal")).st_size
    except OSError:
        return 0
    return size if size > _WAL_HEADER_BYTES else 0


def foreign_wal(path: Path) -> str | None:
    """Why the database file at `path` must not be opened, when it is in
    rollback-journal mode (bytes 18 and 19 of its header are not 2: a
    backup, which `admin backup` writes so) while a `-wal` beside it holds
    frames; else None.

    SQLite never leaves that state itself (a file enters WAL mode, its
    header 2, before its first frame is written), and it replays any `-wal`
    it finds beside a file, whatever wrote it: a backup put in place of a
    file whose `-wal` stayed behind (restored while `serve` still ran, whose
    stop does not checkpoint a moved file, or after a crash) had the other
    file's pages written over its own: malformed, and the writes of that
    `-wal` gone from the file they belonged to.

    It opens the file to read its header, and closing any descriptor of a
    file drops every POSIX lock this process holds on it (SQLite's too): so
    it runs before this process opens its first connection to the file
    (`Database._open`; an admin command's `present`), never beside one."""
    size = wal_frame_bytes(path)
    if not size:  # no frames: nothing to replay, no file opened
        return None
    wal = Path(companion(path, "-wal"))
    try:
        with open(os.path.realpath(path), "rb") as file:
            header = file.read(20)
    except OSError:
        return None
    if not header.startswith(b"SQLite format 3\x00"):
        return None
    if header[18:20] == b"\x02\x02":
        return None
    return (
        f"{wal.name} beside it holds {size:,} bytes of another file's writes (this file"
        " is in rollback-journal mode, as a backup is, and SQLite would write those pages"
        f" over it): put that -wal back beside the file it came from, or move it away,"
        " then start again"
    )


def configure(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """PRAGMAs every connection needs; durability first (see docs/operations.md)."""
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    refuse_unrunnable(conn)  # before WAL mode changes the file
    _enter_wal(conn, busy_timeout_ms)
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")


def _enter_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """`PRAGMA journal_mode = WAL`, waiting out other connections doing the same.

    Switching a fresh file to WAL needs an exclusive lock, and SQLite answers
    "database is locked" at once (without its busy handler) when several
    processes open a new database together, e.g. `serve` and an admin command.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def connect(
    path: Path,
    busy_timeout_ms: int = 5000,
    hooks: Sequence[ConnectionHook] = (),
    *,
    read_only: bool = False,
) -> sqlite3.Connection:
    """A configured connection in autocommit mode (transactions are explicit).

    `check_same_thread=False`: the writer and reader threads own their
    connections, but they are opened and closed from the event loop's thread.
    """
    refuse_unwritable_directory(path)
    create_private(path)
    refuse_unwritable(path)
    refuse_other_names(path)
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, cached_statements=CACHED_STATEMENTS
    )
    try:
        configure(conn, busy_timeout_ms)
        if read_only:
            conn.execute("PRAGMA query_only = ON")
        for hook in hooks:
            hook(conn)
    except BaseException:
        conn.close()
        raise
    return conn
