"""`waypost admin verify`: every check's result on a database file,
through a private copy when the file itself cannot be checked as it is."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from waypost.maintenance.checks import ANY_FILE, CHECKS, Check, database_kind, schema_refused
from waypost.maintenance.files import BackupError, open_read_only, present
from waypost.storage.connection import NOT_A_DATABASE_FILE, check_writable, storage_refusal
from waypost.storage.migrate import MigrationError, available, migrate, recorded, refusals


def verify(path: Path) -> dict[str, Any]:
    """Every check's result; `ok` only when all pass. Changes nothing.

    Two cases are checked through a private copy made with the backup API,
    and the report says why. A database this process may not write (a backup
    on read-only media): FTS5's integrity-check is a write statement (rolled
    back). A file of an earlier build, with migrations not applied yet: the
    checks read today's schema, so they run on the copy once the migrations
    are applied to it, as `serve` would apply them at start (on the file
    itself they failed with "no such column", and a sound backup of the
    build before an upgrade was reported `verify_failed`)."""
    if not present(path):
        raise BackupError("not_found", f"no database at {path}")
    if path.is_dir():  # SQLite says only "unable to open database file" of it
        raise BackupError("verify_failed", f"{path}: {NOT_A_DATABASE_FILE}")
    pending = _pending_migrations(path)
    writable = _writable(path)
    if writable and not pending:
        return _verify(path)
    reasons = [] if writable else ["the database is read-only"]
    if pending:
        reasons.append(
            f"{_migrations(len(pending))} not applied yet ({', '.join(pending)}):"
            " checked with them applied, as serve applies them at start"
        )
    with tempfile.TemporaryDirectory(prefix="waypost-verify-") as scratch:
        copy = Path(scratch) / "copy.db"
        src = open_read_only(path)
        dst = sqlite3.connect(copy, isolation_level=None)
        unmigrated = None
        try:
            src.backup(dst, pages=-1)
            if pending:
                migrate(dst)
        except sqlite3.OperationalError:
            raise  # busy, locked, I/O: not a finding about the file (verify_failed)
        except (sqlite3.DatabaseError, MigrationError) as exc:
            # a damaged file: the migration that met the damage is rolled
            # back, and the checks that need today's schema cannot run
            unmigrated = f"the migrations could not be applied to a copy: {exc}"
        finally:
            src.close()
            dst.close()
        return {**_verify(copy, unmigrated), "checked_a_copy": "; ".join(reasons)}


def _pending_migrations(path: Path) -> list[str]:
    """The migrations this build would apply to the Waypost file at `path`
    (none when it records one this build does not know, or an edited one:
    the migrations check reports that; nor for a file that cannot be read)."""
    try:
        conn = open_read_only(path)
    except sqlite3.Error:
        return []
    try:
        if database_kind(conn) != "waypost":
            return []
        applied, known = recorded(conn), available()
        if refusals(applied, known):
            return []
        return [m.name for m in known if m.name not in applied]
    except sqlite3.OperationalError:
        raise  # busy, locked, I/O: not a finding about the file (verify_failed)
    except sqlite3.DatabaseError:
        return []  # damaged: the checks run on it as it is and report what fails
    finally:
        conn.close()


def _writable(path: Path) -> bool:
    """Whether a write statement could run (it is not one here: rolled back).
    A file this user may not write is not opened for it: SQLite would open
    it read-only and leave a read-only `-wal` and `-shm` beside it."""
    if not os.access(path, os.W_OK):
        return False
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    try:
        check_writable(conn)
    except sqlite3.OperationalError as exc:
        if str(exc).startswith("no such table"):
            return True  # no schema_migrations: the report says what the file is
        if storage_refusal(exc) is None:
            raise
        return False
    except sqlite3.DatabaseError:
        return True  # damaged: the checks run on it as it is and report what fails
    finally:
        conn.close()
    return True


def _verify(path: Path, unmigrated: str | None = None) -> dict[str, Any]:
    """The checks on the file at `path`; `unmigrated`: why it lacks this
    build's schema (the migrations failed on it), so that only the checks
    that hold for any file run, and `migrations` fails with that reason."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    conn.row_factory = sqlite3.Row
    try:
        try:
            kind = database_kind(conn)
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError:
            kind = "waypost"  # damaged: the checks run on it and report what fails
        refused = kind == "waypost" and schema_refused(conn)
        results = {}
        for name, run in CHECKS:
            check = Check(name)
            if unmigrated is not None and name not in ANY_FILE:
                check.add(f"not run: {unmigrated}")
                results[name] = check.to_json()
                continue
            if refused and name not in ANY_FILE:
                # not this build's schema: they ended the whole report in
                # `verify_failed: no such table`, where `migrations` says why
                check.add("not run: serve refuses this file's schema (see the migrations check)")
                results[name] = check.to_json()
                continue
            if kind != "waypost" and name not in ANY_FILE:
                # Waypost's tables are not there to check: an empty file has
                # nothing to find; another application's file is no Waypost one
                if kind == "foreign":
                    check.add("not run: not a Waypost database")
                results[name] = check.to_json()
                continue
            if unmigrated is not None and name == "migrations":
                check.add(unmigrated)
            try:
                run(conn, check)
            except sqlite3.OperationalError:
                raise  # busy, locked, I/O: not a finding about the file (verify_failed)
            except sqlite3.DatabaseError as exc:
                # a damaged file fails the checks it breaks; the report goes on
                check.add(f"the check could not run: {exc}")
            results[name] = check.to_json()
    finally:
        conn.close()
    report: dict[str, Any] = {"ok": all(r["ok"] for r in results.values()), "checks": results}
    if kind == "empty":
        report["note"] = "an empty database: serve creates the schema when it starts"
    return report


def _migrations(count: int) -> str:
    return "1 migration is" if count == 1 else f"{count} migrations are"
