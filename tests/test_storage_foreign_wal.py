"""A backup put in place beside another database's `-wal` is refused.

opsjourney: a backup restored while `serve` still ran (`mv waypost.db
aside; cp backup waypost.db`) was noticed (503, `database_files_changed`,
"until serve is restarted"), but the stop that followed left the old
database's `-wal`, its latest acknowledged writes, beside the restored
file: SQLite does not checkpoint a moved file on close. The restart then
opened that `-wal` on top of the backup (SQLite replays any `-wal` it finds
beside a file, whatever wrote it): `admin verify` found the restored file
malformed, and the writes of the `-wal` were merged into the wrong file,
gone from the one moved aside. A file in rollback-journal mode (a backup,
bytes 18 and 19 of its header 1) beside a `-wal` holding frames is never a
state SQLite leaves itself (a file enters WAL mode, header 2, before its
first frame), so both `serve` and the admin commands now refuse it,
changing nothing, and say what to do.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.test_cli import run
from waypost.storage.db import Database, DatabaseUnusable


def _backup_and_newer_wal(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    """`w.db` as a restore leaves it by mistake: a backup (rollback journal)
    with the -wal of the live database it was taken from, which went on
    writing, beside it. Returns the path, the backup's bytes and the -wal's."""
    live = tmp_path / "live.db"
    assert run("admin", "migrate", "--db", str(live)).exit_code == 0
    conn = sqlite3.connect(live, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    rows = "INSERT INTO principals VALUES (?, 'agent', ?, '2026-12-06T00:00:00.000Z')"
    conn.executemany(rows, [(f"prn_a{i}", f"a{i}" + "a" * 150) for i in range(300)])
    backup = tmp_path / "backup.db"
    copy = sqlite3.connect(backup)
    conn.backup(copy)
    copy.execute("PRAGMA journal_mode = DELETE")  # as `admin backup` writes it
    copy.close()
    # the live file went on: writes checkpointed into it, then more in its -wal
    conn.executemany(rows, [(f"prn_c{i}", f"c{i}" + "c" * 150) for i in range(300)])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("DELETE FROM principals WHERE id LIKE 'prn_a%'")
    conn.executemany(rows, [(f"prn_b{i}", f"b{i}" + "b" * 150) for i in range(300)])
    wal = Path(f"{live}-wal").read_bytes()
    conn.close()
    assert len(wal) > 32  # frames: the writes since the backup
    path = tmp_path / "w.db"
    backup.rename(path)
    Path(f"{path}-wal").write_bytes(wal)
    return path, path.read_bytes(), wal


async def test_serve_refuses_a_backup_beside_another_files_wal(tmp_path: Path) -> None:
    path, file_bytes, wal = _backup_and_newer_wal(tmp_path)
    with pytest.raises(DatabaseUnusable, match=r"w\.db-wal beside it holds"):
        await Database(path).open()
    # nothing changed: the -wal still holds the writes it held
    assert path.read_bytes() == file_bytes
    assert Path(f"{path}-wal").read_bytes() == wal


@pytest.mark.parametrize(
    "args",
    [
        ("admin", "principal", "list"),
        ("admin", "token", "list"),
        ("admin", "migrate"),
        ("admin", "verify"),
    ],
)
def test_admin_commands_refuse_a_backup_beside_another_files_wal(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    path, file_bytes, wal = _backup_and_newer_wal(tmp_path)
    result = run(*args, "--db", str(path))
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: database_unusable:"), result.stderr
    assert "w.db-wal beside it holds" in result.stderr
    assert path.read_bytes() == file_bytes
    assert Path(f"{path}-wal").read_bytes() == wal


def test_a_backup_of_a_backup_beside_another_files_wal_is_refused(tmp_path: Path) -> None:
    path, file_bytes, wal = _backup_and_newer_wal(tmp_path)
    result = run("admin", "backup", "--db", str(path), "--to", str(tmp_path / "b2.db"))
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: database_unusable:"), result.stderr
    assert not (tmp_path / "b2.db").exists()
    assert path.read_bytes() == file_bytes
    assert Path(f"{path}-wal").read_bytes() == wal


async def test_a_wal_mode_file_and_an_empty_or_header_only_wal_still_open(
    tmp_path: Path,
) -> None:
    """What SQLite itself leaves is no finding: a backup beside an empty -wal
    (a TRUNCATE checkpoint's), and a live file with its own -wal."""
    path, _, _ = _backup_and_newer_wal(tmp_path)
    Path(f"{path}-wal").write_bytes(b"")
    db = Database(path)
    await db.open()
    try:
        await db.write(lambda c: c.execute("DELETE FROM principals WHERE id = 'prn_a1'"))
    finally:
        await db.close()
    assert run("admin", "verify", "--db", str(path)).exit_code == 0
    result = run("admin", "principal", "list", "--db", str(path))
    assert result.exit_code == 0, result.output


async def test_a_backup_beside_a_header_only_wal_still_opens(tmp_path: Path) -> None:
    """A -wal of its 32-byte header alone holds no frame: nothing to replay
    over the file, so it is no finding (review72: the test above writes an
    empty -wal only, and refusing any -wal at all passed it)."""
    path, _, wal = _backup_and_newer_wal(tmp_path)
    Path(f"{path}-wal").write_bytes(wal[:32])
    db = Database(path)
    await db.open()
    try:
        count = "SELECT count(*) FROM principals WHERE id LIKE 'prn_a%'"
        assert await db.read(lambda c: c.execute(count).fetchone()[0]) == 300
    finally:
        await db.close()
    assert run("admin", "principal", "list", "--db", str(path)).exit_code == 0
