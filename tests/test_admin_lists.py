"""Token housekeeping from the command line (service contract 14): the
token_id of `principal create`, `principal list` and `token list`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli import call, ok, run


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "admin.db")


def listed(*args: str) -> list[dict[str, Any]]:
    result = run(*args)
    assert result.exit_code == 0, result.output
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data


async def test_the_token_of_principal_create_can_be_revoked_by_its_id(db: str) -> None:
    made = ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", db)
    assert (await call(db, made["token"], "/api/v1/me")).status_code == 200
    ok("admin", "token", "revoke", "--token-id", made["token_id"], "--db", db)
    assert (await call(db, made["token"], "/api/v1/me")).status_code == 401


def test_revoking_a_revoked_token_answers_as_before_and_keeps_its_first_revoked_at(
    db: str,
) -> None:
    """docs/operations.md: "Revoking a token that is already revoked answers
    `{"token_id", "revoked": true}` and keeps its first `revoked_at`"; no
    test revoked a token twice (opsdocaudit). The first instant is set far
    back by hand, so that a second revocation that wrote its own instant
    shows, however close the two commands ran."""
    made = ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", db)
    answer = {"token_id": made["token_id"], "revoked": True}
    assert ok("admin", "token", "revoke", "--token-id", made["token_id"], "--db", db) == answer
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE tokens SET revoked_at = '2020-01-01T00:00:00.000Z' WHERE id = ?",
                     (made["token_id"],))  # fmt: skip
    conn.close()
    assert ok("admin", "token", "revoke", "--token-id", made["token_id"], "--db", db) == answer
    [token] = listed("admin", "token", "list", "--db", db)
    assert token["revoked_at"] == "2020-01-01T00:00:00.000Z"


def test_principal_list_shows_every_principal_oldest_first(db: str) -> None:
    ok("admin", "migrate", "--db", db)
    assert listed("admin", "principal", "list", "--db", db) == []
    a = ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", db)
    b = ok("admin", "principal", "create", "--kind", "agent", "--name", "bot", "--db", db)
    items = listed("admin", "principal", "list", "--db", db)
    assert [{k: i[k] for k in ("id", "kind", "name")} for i in items] == [
        {"id": a["principal_id"], "kind": "human", "name": "ann"},
        {"id": b["principal_id"], "kind": "agent", "name": "bot"},
    ]
    assert all(set(i) == {"id", "kind", "name", "created_at"} for i in items)
    assert all(i["created_at"].endswith("Z") for i in items)


def test_token_list_shows_metadata_never_a_token_or_hash(db: str) -> None:
    a = ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", db)
    b = ok("admin", "principal", "create", "--kind", "agent", "--name", "bot", "--db", db)
    extra = ok("admin", "token", "issue", "--principal", a["principal_id"],
               "--audience", "lifecycle", "--db", db)  # fmt: skip
    ok("admin", "token", "revoke", "--token-id", a["token_id"], "--db", db)
    result = run("admin", "token", "list", "--db", db)
    items = json.loads(result.stdout)
    assert [i["token_id"] for i in items] == [a["token_id"], b["token_id"], extra["token_id"]]
    assert all(
        set(i) == {"token_id", "principal_id", "audience", "created_at", "revoked_at"}
        for i in items
    )
    assert items[0]["revoked_at"] is not None and items[1]["revoked_at"] is None
    assert items[2]["audience"] == "lifecycle"
    for secret in (a["token"], b["token"], extra["token"]):
        assert secret not in result.stdout
        assert hashlib.sha256(secret.encode()).hexdigest() not in result.stdout
    mine = listed("admin", "token", "list", "--principal", a["principal_id"], "--db", db)
    assert [i["token_id"] for i in mine] == [a["token_id"], extra["token_id"]]


def test_token_list_of_an_unknown_principal_is_not_found(db: str) -> None:
    ok("admin", "migrate", "--db", db)
    result = run("admin", "token", "list", "--principal", "prn_nope", "--db", db)
    assert result.exit_code == 1 and "not_found" in result.stderr
    assert "no such principal" in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("principal", "list"),
        ("token", "list"),
        ("lifecycle", "deliveries"),
    ],
)
def test_a_list_of_a_missing_database_is_refused_and_creates_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    mistyped = tmp_path / "wayposst.db"
    result = run("admin", *command, "--db", str(mistyped))
    assert result.exit_code == 1
    assert f"not_found: no database at {mistyped}" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_lists_read_while_another_process_holds_the_write_lock(db: str) -> None:
    """They only read: a writer holding the lock (a stuck import, another
    service) must not make them wait out the busy timeout and fail."""
    made = ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", db)
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("UPDATE principals SET name = name")
        assert [p["id"] for p in listed("admin", "principal", "list", "--db", db)] == [
            made["principal_id"]
        ]
        assert [t["token_id"] for t in listed("admin", "token", "list", "--db", db)] == [
            made["token_id"]
        ]
        assert listed("admin", "lifecycle", "deliveries", "--db", db) == []
        # a write still waits for the lock, and says so
        refused = run("admin", "principal", "create", "--kind", "agent", "--name", "b", "--db", db)
        assert refused.exit_code == 1 and "unavailable" in refused.stderr
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize(
    "command",
    [["principal", "list"], ["token", "list"], ["lifecycle", "deliveries"]],
)
def test_a_list_leaves_a_backup_as_it_was(tmp_path: Path, command: list[str]) -> None:
    """Listing tokens in a backup (as the restore steps say to) migrated it and
    switched it to WAL: the file changed and `-wal`/`-shm` appeared beside
    it, and a backup this user may not write could not be listed at all."""
    live = str(tmp_path / "live.db")
    ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", live)
    backup = tmp_path / "backup.db"
    ok("admin", "backup", "--db", live, "--to", str(backup))
    before = hashlib.sha256(backup.read_bytes()).hexdigest()
    result = run("admin", *command, "--db", str(backup))
    assert result.exit_code == 0, result.output
    assert hashlib.sha256(backup.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("backup")) == [
        "backup.db"
    ]


@pytest.mark.parametrize("command", [["principal", "list"], ["token", "list"], ["verify"]])
def test_reading_a_live_file_at_rest_leaves_nothing_beside_it(
    tmp_path: Path, command: list[str]
) -> None:
    """A WAL database at rest that this user may write: read-only, SQLite
    made a `-wal` and a `-shm` it could not remove, and left them (cliaudit).
    A backup's copy still takes the locks (one snapshot, whatever starts
    beside it), and leaves them."""
    db = tmp_path / "w.db"
    ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", str(db))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.db"]  # WAL mode, at rest
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    args = [a.replace("{out}", str(tmp_path / "b.db")) for a in command]
    result = run("admin", *args, "--db", str(db))
    assert result.exit_code == 0, result.output
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("w.db-")]
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_a_list_of_a_file_that_needs_migrating_still_migrates_it(tmp_path: Path) -> None:
    """Only a file with every migration is read as it is; an older one is
    migrated first, as before (the lists read this build's schema)."""
    db = str(tmp_path / "old.db")
    ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", db)
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM schema_migrations WHERE name = '0019_decisions_reversible_index.sql'")
    conn.commit()
    conn.close()
    assert [p["name"] for p in listed("admin", "principal", "list", "--db", db)] == ["ann"]
    conn = sqlite3.connect(db)
    names = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    conn.close()
    assert "0019_decisions_reversible_index.sql" in names


def test_reading_a_live_file_this_user_may_not_write_leaves_nothing_beside_it() -> None:
    """A WAL database at rest (the service stopped) that this user may read but
    not write: a list, `verify` or `backup` of it left a `-wal` and `-shm` with
    the file's read-only mode, and once the file's mode was mended `serve`
    was still refused ("this user may not write its -wal file")."""
    as_reader = _as_a_user_who_may_not_write()
    home = Path(tempfile.mkdtemp(prefix="waypost-reader-"))  # /tmp: reachable by that user
    try:
        db = home / "w.db"
        ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", str(db))
        assert sorted(p.name for p in home.iterdir()) == ["w.db"]  # WAL mode, at rest
        os.chmod(home, 0o777)
        os.chmod(db, 0o444)
        for command in (["token", "list"], ["verify"], ["backup", "--to", str(home / "b.db")]):
            done = subprocess.run(
                [*as_reader, sys.executable, "-m", "waypost.cli", "admin", *command,
                 "--db", str(db)],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, (command, done.stderr)
            assert not [p.name for p in home.iterdir() if p.name.startswith("w.db-")], command
        assert [p["name"] for p in listed("admin", "principal", "list", "--db", str(db))] == ["ann"]
    finally:
        shutil.rmtree(home)


def _as_a_user_who_may_not_write() -> list[str]:
    """The command prefix that runs a process refused a write to a 0444 file:
    none, or, when the tests run as root (who may write anything), root
    without the capabilities that override file modes (`setpriv`). Root
    stays root: the checkout and its environment stay readable, wherever a
    fresh clone put them (as `nobody` they were not, under a 0700 temp dir)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no process here is refused a write")
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("setpriv may not drop capabilities here (no CAP_SETPCAP)")
    return prefix


def test_a_live_file_reached_through_a_symlink_is_read_with_its_wal() -> None:
    """Whether a file is at rest was looked up beside the name given, while
    SQLite names the `-wal` after the symlink's target: a live file reached
    through a symlink was read as immutable, without the commits still in its
    WAL (a backup of it said `integrity: ok` and held none of them)."""
    as_reader = _as_a_user_who_may_not_write()
    home = Path(tempfile.mkdtemp(prefix="waypost-reader-"))
    try:
        db = home / "w.db"
        ok("admin", "principal", "create", "--kind", "human", "--name", "ann", "--db", str(db))
        live = sqlite3.connect(db)  # as a running service: its WAL stays
        try:
            live.execute("PRAGMA wal_autocheckpoint = 0")
            live.execute("SELECT count(*) FROM principals").fetchone()  # holds the -shm open
            ok("admin", "principal", "create", "--kind", "human", "--name", "bob", "--db", str(db))
            assert (home / "w.db-wal").stat().st_size > 0
            (home / "link.db").symlink_to(db)
            os.chmod(home, 0o777)
            for name in ("w.db", "w.db-wal", "w.db-shm"):
                os.chmod(home / name, 0o444)
            done = subprocess.run(
                [*as_reader, sys.executable, "-m", "waypost.cli", "admin", "principal", "list",
                 "--db", str(home / "link.db")],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        finally:
            live.close()
        assert done.returncode == 0, done.stderr
        assert [p["name"] for p in json.loads(done.stdout)] == ["ann", "bob"]
    finally:
        shutil.rmtree(home)
