"""`waypost admin ...`: commands that work on the database file itself, each
in a transaction of its own, with or without a running service (the file's
locks keep them and `serve` apart)."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from waypost.cli_text import TEXT
from waypost.clock import SystemClock, format_time
from waypost.errors import WaypostError
from waypost.resolvers.access import principals
from waypost.resolvers.lifecycle import authz
from waypost.resolvers.projects import operations as projects
from waypost.runtime import CONNECTION_HOOKS
from waypost.settings import default_db_path
from waypost.storage.connection import is_busy
from waypost.storage.db import connect_sync, run_read, run_write
from waypost.storage.migrate import MigrationError, migrate
from waypost.storage.writer import BUSY_MESSAGE

T = TypeVar("T")


def _a_file_name(_ctx: click.Context, _param: click.Parameter, value: str) -> Path:
    """A blank `--db ""` (a Makefile's empty variable) opened "." and was
    refused as `database_unusable: .`, naming no option."""
    if not value.strip():
        raise click.BadParameter(
            "names no file (it is blank); leave it out for env WAYPOST_DB, else ./waypost.db"
        )
    return Path(value)


# The file every command opens (`serve` takes it too).
db_option = click.option(
    "--db",
    "db_path",
    # readable=False: a file it cannot open is `database_unusable` (exit 1), as
    # docs/operations.md says, not click's usage error (exit 2)
    type=click.Path(readable=False),
    callback=_a_file_name,
    default=default_db_path,
    show_default="env WAYPOST_DB, else ./waypost.db",
    help="SQLite database file.",
)


@click.group()
def admin() -> None:
    """Administrative commands; they never read TYPESAFE_API_KEY."""


def _write(
    db_path: Path, fn: Callable[[sqlite3.Connection, str], T], *, creates: bool = False
) -> T:
    """A unit of work in one BEGIN IMMEDIATE transaction, after migrating.
    Only a command that can start a database (`creates`: a principal's
    creation) makes the file: the others need records a new file has not,
    and `token revoke` on a mistyped `--db` made one and said "no such
    token" of a token that still worked (cliaudit)."""
    _require_file(db_path, created=creates)
    return _unit(db_path, lambda conn: run_write(conn, lambda c: fn(c, _now())))


def _require_file(db_path: Path, *, created: bool = False) -> None:
    """`not_found` for a `--db` naming no file (unless the command may
    create one), `database_unusable` for one that cannot be looked at or is
    no regular file."""
    from waypost.maintenance import BackupError, present

    try:
        found = present(db_path)
    except BackupError as error:
        raise click.ClickException(str(error)) from error
    if not found and not created:
        raise click.ClickException(f"not_found: no database at {db_path}")
    if found and not created and _empty(db_path):
        # SQLite takes an empty file for a new database: `token issue` on one
        # (a `touch`ed or truncated path) migrated it, then said "no such
        # principal" (sessionsjourney), as for a mistyped path
        raise click.ClickException(f"not_found: no database at {db_path} (the file is empty)")


def _empty(db_path: Path) -> bool:
    """An empty file with nothing in a `-wal` beside it (a new database's
    first writes may be in its `-wal` alone while `serve` runs)."""
    from waypost.storage.connection import wal_frame_bytes

    try:
        return db_path.is_file() and db_path.stat().st_size == 0 and not wal_frame_bytes(db_path)
    except OSError:
        return False  # refused as it opens, in the file's own words


def _now() -> str:
    return format_time(SystemClock().now())


@contextlib.contextmanager
def _in_one_line(db_path: Path) -> Iterator[None]:
    """Every failure inside as `Error: code: message`: a refusal by its code,
    anything the file or SQLite says as `database_unusable`."""
    try:
        yield
    except WaypostError as error:
        option = _option_of(error)
        said = f"{option}: {error.message}" if option else error.message
        raise click.ClickException(f"{error.code}: {said}") from error
    except sqlite3.OperationalError as error:
        if is_busy(error):
            # a migration (or opening) that waited out the busy timeout: the
            # file is fine, another process holds its lock, as for any write
            raise click.ClickException(f"unavailable: {BUSY_MESSAGE}") from error
        raise click.ClickException(f"database_unusable: {db_path}: {error}") from error
    except (MigrationError, sqlite3.Error, OSError) as error:
        raise click.ClickException(f"database_unusable: {db_path}: {error}") from error


def _option_of(error: WaypostError) -> str | None:
    """The command's option that the refused field came from (`--name` for
    `name`), so that the operator knows what to change; None when the field
    is no option of the running command."""
    field = error.details.get("field")
    context = click.get_current_context(silent=True)
    if not isinstance(field, str) or context is None:
        return None
    flag = "--" + field.replace("_", "-")
    return flag if any(flag in param.opts for param in context.command.params) else None


def _unit(db_path: Path, run: Callable[[sqlite3.Connection], T]) -> T:
    """Open, migrate, run; every failure becomes `Error: code: message`."""
    with _in_one_line(db_path):
        conn = connect_sync(db_path, hooks=CONNECTION_HOOKS)
    with _in_one_line(db_path):
        try:
            migrate(conn)
            return run(conn)
        finally:
            conn.close()


def _read(db_path: Path, fn: Callable[[sqlite3.Connection], T]) -> T:
    """A read-only unit of work: on the file as it is when its schema is
    current (`_current_read_only`), else after migrating it, like every
    admin command. A list of a database that does not exist is refused, as
    `verify` and `backup` refuse it: opening it would create an empty one,
    and a mistyped `--db` would answer `[]` instead of saying so. It reads in a
    read transaction, so another process holding the write lock (a stuck
    writer, a long import) does not stop an operator from listing tokens."""
    _require_file(db_path)
    conn = _current_read_only(db_path)
    if conn is None:
        return _unit(db_path, lambda conn: run_read(conn, fn))
    with _in_one_line(db_path):
        try:
            return run_read(conn, fn)
        finally:
            conn.close()


def _current_read_only(db_path: Path) -> sqlite3.Connection | None:
    """The file opened read-only, when it has every migration of this build
    and nothing this build refuses: a list then changes nothing (listing a
    backup turned it into a WAL database, and failed on one this user may
    not write). None when it needs migrating or cannot be opened so: the
    list then opens it as every admin command does."""
    from waypost.maintenance import open_read_only
    from waypost.storage.migrate import available, recorded, refusals

    try:
        conn = open_read_only(db_path)
    except sqlite3.Error:
        return None
    try:
        conn.isolation_level = None  # run_read's BEGIN and ROLLBACK are explicit
        conn.row_factory = sqlite3.Row
        applied, known = recorded(conn), available()
        if refusals(applied, known) or {m.name for m in known} - applied.keys():
            conn.close()
            return None
        for hook in CONNECTION_HOOKS:
            hook(conn)
    except sqlite3.Error:
        conn.close()
        return None
    return conn


def _print(data: dict[str, Any] | list[dict[str, Any]]) -> None:
    click.echo(json.dumps(data))


@admin.command("migrate")
@db_option
def admin_migrate(db_path: Path) -> None:
    """Create or upgrade the database."""
    _require_file(db_path, created=True)
    with _in_one_line(db_path):
        conn = connect_sync(db_path)
    with _in_one_line(db_path), _migrations_said():
        try:
            applied = migrate(conn)
        finally:
            conn.close()
    _print({"applied": applied})


@contextlib.contextmanager
def _migrations_said() -> Iterator[None]:
    """What is applied, and how long it took, on standard error while the
    command runs (standard output stays its one JSON line): 0037 ran 53 s
    at a million records with nothing said (upgradeaudit3). A handler of
    this logger's own, taken off again: the root's are the caller's."""
    from waypost.observe.logs import TextFormatter

    storage = logging.getLogger("waypost.storage")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter())
    level = storage.level
    storage.addHandler(handler)
    storage.setLevel(logging.INFO)
    try:
        yield
    finally:
        storage.removeHandler(handler)
        storage.setLevel(level)


@admin.group("principal")
def principal_group() -> None:
    """Principals."""


@principal_group.command("create")
@db_option
@click.option("--kind", type=click.Choice(principals.KINDS), required=True)
@click.option("--name", required=True, type=TEXT)
def principal_create(db_path: Path, kind: str, name: str) -> None:
    """Create a principal; prints its api token (once) and the token's id."""
    _print(
        _write(db_path, lambda c, at: principals.create_principal(c, kind, name, at), creates=True)
    )


@principal_group.command("list")
@db_option
def principal_list(db_path: Path) -> None:
    """Every principal as a JSON array of {id, kind, name, created_at}, oldest first."""
    _print(_read(db_path, principals.list_principals))


@admin.group("token")
def token_group() -> None:
    """Tokens."""


@token_group.command("issue")
@db_option
@click.option("--principal", "principal_id", required=True, type=TEXT)
@click.option("--audience", type=click.Choice(principals.AUDIENCES), default="api",
              show_default=True)  # fmt: skip
def token_issue(db_path: Path, principal_id: str, audience: str) -> None:
    """Issue a token; it is printed once and only its SHA-256 is kept."""
    _print(_write(db_path, lambda c, at: principals.issue_token(c, principal_id, audience, at)))


@token_group.command("revoke")
@db_option
@click.option("--token-id", required=True, type=TEXT)
def token_revoke(db_path: Path, token_id: str) -> None:
    """Revoke a token at once."""
    _write(db_path, lambda c, at: principals.revoke_token(c, token_id, at))
    _print({"token_id": token_id, "revoked": True})


@token_group.command("list")
@db_option
@click.option("--principal", "principal_id", default=None, type=TEXT,
              help="Only this principal's tokens.")  # fmt: skip
def token_list(db_path: Path, principal_id: str | None) -> None:
    """Tokens as a JSON array of {token_id, principal_id, audience, created_at,
    revoked_at}, oldest first; never a token or its hash."""
    _print(_read(db_path, lambda c: principals.list_tokens(c, principal_id)))


@admin.command("backup")
@db_option
@click.option("--to", "target", required=True, type=click.Path(),
              help="The new backup file (refused if it exists).")  # fmt: skip
def admin_backup(db_path: Path, target: str) -> None:
    """Copy the database through SQLite's online backup API; safe while serve runs."""
    from waypost.maintenance import BackupError, backup

    def terminated(signum: int, frame: object) -> None:
        # SIGTERM (a stopped cron job, a container shutting down) ends the copy
        # as Ctrl-C does, through its cleanup: it used to leave the partial
        # copy and its journal behind
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        # the name as typed: a Path drops the trailing "/" that says "directory"
        _print(backup(db_path, target))
    except BackupError as error:
        raise click.ClickException(str(error)) from error
    except (sqlite3.Error, OSError) as error:
        raise click.ClickException(f"backup_failed: {error}") from error
    finally:
        signal.signal(signal.SIGTERM, previous)


@admin.command("verify")
@db_option
def admin_verify(db_path: Path) -> None:
    """Check integrity, indexes, histories, receipts and gate state; exit 1 on a problem."""
    from waypost.maintenance import BackupError, verify

    try:
        report = verify(db_path)
    except BackupError as error:
        raise click.ClickException(str(error)) from error
    except sqlite3.Error as error:
        raise click.ClickException(f"verify_failed: {db_path}: {error}") from error
    _print(report)
    if not report["ok"]:
        sys.exit(1)


@admin.group("project")
def project_group() -> None:
    """Projects."""


@project_group.command("create")
@db_option
@click.option("--id", "project_id", required=True, type=TEXT)
@click.option("--name", required=True, type=TEXT)
def project_create(db_path: Path, project_id: str, name: str) -> None:
    """Create a project, as the first human principal (the admin)."""
    from waypost.decoding import convert

    def create(conn: sqlite3.Connection, at: str) -> dict[str, Any]:
        body = convert({"id": project_id, "name": name}, projects.ProjectCreate)
        owner_id = principals.first_human_id(conn)
        if owner_id is None:
            raise click.ClickException(
                "no_human: create a human principal first"
                " (`waypost admin principal create --kind human --name NAME`)"
            )
        return projects.create_as_admin(conn, body, owner_id, at)

    _print(_write(db_path, create))


@admin.group("lifecycle")
def lifecycle_group() -> None:
    """The private lifecycle adapter: tenant grants and event deliveries."""


@lifecycle_group.command("grant")
@db_option
@click.option("--principal", "principal_id", required=True, type=TEXT,
              help="A principal id, or the username a Kubernetes TokenReview returns.")  # fmt: skip
@click.option("--tenant", required=True, type=TEXT)
@click.option("--role", type=click.Choice(authz.ROLES), required=True)
def lifecycle_grant(db_path: Path, principal_id: str, tenant: str, role: str) -> None:
    """Grant a principal its one lifecycle tenant role (replacing any earlier one)."""
    if not 1 <= len(principal_id) <= 256 or not 1 <= len(tenant) <= 256:
        raise click.UsageError("--principal and --tenant are 1-256 characters")

    def grant(conn: sqlite3.Connection, at: str) -> dict[str, Any]:
        return authz.grant(conn, principal_id, tenant, role, at)

    _print(_write(db_path, grant))


@lifecycle_group.command("grants")
@db_option
@click.option("--tenant", default=None, type=TEXT, help="Only this tenant's grants.")
def lifecycle_grants(db_path: Path, tenant: str | None) -> None:
    """Lifecycle grants as a JSON array of {principal_id, tenant, role,
    granted_at}, by tenant then principal."""
    _print(_read(db_path, lambda c: authz.grants(c, tenant)))


@lifecycle_group.command("revoke")
@db_option
@click.option("--principal", "principal_id", required=True, type=TEXT,
              help="A principal id, or the username a Kubernetes TokenReview returns.")  # fmt: skip
def lifecycle_revoke(db_path: Path, principal_id: str) -> None:
    """Take a principal's lifecycle grant away; its next request is refused."""
    _print(_write(db_path, lambda c, at: authz.revoke(c, principal_id)))


@lifecycle_group.command("deliveries")
@db_option
@click.option("--state", type=click.Choice(["pending", "delivered", "skipped", "all"]),
              default="pending", show_default=True)  # fmt: skip
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
def lifecycle_deliveries(db_path: Path, state: str, limit: int) -> None:
    """List lifecycle event deliveries (oldest first) as a JSON array."""
    from waypost.resolvers.lifecycle import delivery

    chosen = None if state == "all" else state
    rows = _read(db_path, lambda c: delivery.list_deliveries(c, chosen, limit))
    click.echo(json.dumps(rows))


@lifecycle_group.command("skip")
@db_option
@click.option("--sequence", required=True, type=click.IntRange(1, 2**63 - 1),  # SQLite's integers
              help="The event's sequence (`event.sequence` in its listing).")  # fmt: skip
@click.option("--reason", required=True, type=TEXT,
              help="Why, for whoever looks next (kept with the delivery).")  # fmt: skip
def lifecycle_skip(db_path: Path, sequence: int, reason: str) -> None:
    """Never send a pending delivery (one its receiver refuses for good);
    the webhook worker goes on with the next event. Prints the delivery."""
    from waypost.resolvers.core.text import blank
    from waypost.resolvers.lifecycle import delivery

    # blank as a title is: U+200B alone, which shows nothing, passed
    if blank(reason) or len(reason) > 500:
        raise click.UsageError("--reason is 1-500 characters, not blank")
    _print(_write(db_path, lambda c, at: delivery.skip(c, sequence, reason, at)))
