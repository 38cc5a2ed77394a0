"""The command line: `waypost serve` (the default) and `waypost admin ...`."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import sqlite3
import ssl
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from waypost.clock import FileClock, SystemClock, format_time
from waypost.errors import WaypostError
from waypost.resolvers.access import principals
from waypost.resolvers.lifecycle import authz
from waypost.resolvers.projects import operations as projects
from waypost.runtime import CONNECTION_HOOKS
from waypost.settings import (
    LifecycleSettings,
    RerankSettings,
    SettingError,
    Settings,
    default_db_path,
)
from waypost.storage.db import connect_sync, run_read, run_write
from waypost.storage.migrate import MigrationError, migrate

T = TypeVar("T")
log = logging.getLogger("waypost")

db_option = click.option(
    "--db",
    "db_path",
    # readable=False: a file it cannot open is `database_unusable` (exit 1), as
    # docs/operations.md says, not click's usage error (exit 2)
    type=click.Path(dir_okay=False, readable=False, path_type=Path),
    default=default_db_path,
    show_default="env WAYPOST_DB, else ./waypost.db",
    help="SQLite database file.",
)


@click.group(invoke_without_command=True)
@click.pass_context
def main(ctx: click.Context) -> None:
    """Waypost: coordination for teams of AI agents and humans."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(serve)


MIN_SWEEP_SECONDS = 0.1


def _sweep_seconds(ctx: click.Context, param: click.Parameter, value: float) -> float:
    # less would sweep in a busy loop (0.000001: 3,000 write transactions a
    # second, a core busy); nan or inf would never sweep
    if not (math.isfinite(value) and value >= MIN_SWEEP_SECONDS):
        raise click.BadParameter(
            f"{value} is not a finite number of seconds of at least {MIN_SWEEP_SECONDS}"
        )
    return value


MIN_READ_TIMEOUT, MAX_READ_TIMEOUT = 0.1, 3600.0


def _read_timeout_seconds(ctx: click.Context, param: click.Parameter, value: float) -> float:
    # nan passes click's FloatRange, and would never close anything
    if not (math.isfinite(value) and MIN_READ_TIMEOUT <= value <= MAX_READ_TIMEOUT):
        raise click.BadParameter(
            f"{value} is not a number of seconds from {MIN_READ_TIMEOUT} to {MAX_READ_TIMEOUT:g}"
        )
    return value


@main.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="0 picks a free port.")  # fmt: skip
@click.option("--lifecycle-host", default="127.0.0.1", show_default=True)
@click.option("--lifecycle-port", default=8081, show_default=True, type=click.IntRange(0, 65535),
              help="0 disables the lifecycle listener.")  # fmt: skip
@click.option("--sweep-interval", default=300.0, show_default=True, type=float,
              callback=_sweep_seconds,
              help="Seconds between sweeps (decision timeouts, receipt cleanup).")  # fmt: skip
@click.option("--graphiql/--no-graphiql", default=False, show_default=True)
@click.option("--lifecycle-auth", type=click.Choice(["waypost", "tokenreview"]),
              default="waypost", show_default=True,
              help="Lifecycle bearer tokens: Waypost tokens of audience lifecycle, or "
                   "Kubernetes TokenReview.")  # fmt: skip
@click.option(
    "--k8s-api", default=None, help="Kubernetes API server URL (https://), for tokenreview."
)
@click.option("--k8s-ca", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="PEM CA bundle of the Kubernetes API server.")  # fmt: skip
@click.option("--k8s-token-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Waypost's own credential for TokenReview calls "
                   "(default: the in-cluster service-account token).")  # fmt: skip
@click.option("--lifecycle-webhook", default=None,
              help="POST each lifecycle event here, in order, with retries.")  # fmt: skip
@click.option("--request-read-timeout", default=30.0, show_default=True, type=float,
              callback=_read_timeout_seconds,
              help="Seconds a client has to send a whole request (line, headers, body)"
                   " once its connection opens or its last response ends; else it is"
                   " closed.")  # fmt: skip
@click.option("--max-connections", default=None, type=click.IntRange(1, None),
              help="Connections the public listener holds open at once; past it a"
                   " new connection is closed at once (the lifecycle listener holds 256"
                   " of its own). Default: the open-file limit (raised to its hard"
                   " limit at start) less 384, at most 10,000.")  # fmt: skip
@click.option("--search-time-limit-ms", default=1000, show_default=True,
              type=click.IntRange(1, 60_000),
              help="Time limit of a full-text search (a context packet's, a list's q"
                   " filter, a lifecycle search).")  # fmt: skip
@click.option("--graphql-max-objects", default=50_000, show_default=True,
              type=click.IntRange(1, 10_000_000),
              help="Objects and object fields one GraphQL result may count.")  # fmt: skip
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Log lines as text or one JSON object each.")  # fmt: skip
@click.option("--access-log/--no-access-log", default=True, show_default=True,
              help="One log line per request (waypost.access).")  # fmt: skip
@click.option("--metrics/--no-metrics", default=False, show_default=True,
              help="Serve GET /metrics (Prometheus) to tokens of audience 'metrics'.")  # fmt: skip
def serve(
    db_path: Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    lifecycle_host: str = "127.0.0.1",
    lifecycle_port: int = 8081,
    sweep_interval: float = 300.0,
    graphiql: bool = False,
    lifecycle_auth: str = "waypost",
    k8s_api: str | None = None,
    k8s_ca: Path | None = None,
    k8s_token_file: Path | None = None,
    lifecycle_webhook: str | None = None,
    request_read_timeout: float = 30.0,
    max_connections: int | None = None,
    search_time_limit_ms: int = 1000,
    graphql_max_objects: int = 50_000,
    log_format: str = "text",
    access_log: bool = True,
    metrics: bool = False,
) -> None:
    """Run the service (the default command)."""
    from waypost.observe import logs

    logs.configure(log_format)
    clock_file = os.environ.get("WAYPOST_CLOCK_FILE")
    if clock_file:
        log.warning("WAYPOST_CLOCK_FILE is set: the service's clock reads %s", clock_file)
        try:
            FileClock(Path(clock_file)).now()  # start-up needs "now" (the admin's created_at)
        except WaypostError as error:
            raise click.ClickException(
                f"clock_unavailable: {clock_file}: {error.message}"
            ) from error
    from waypost.reranker.client import check_settings

    try:
        rerank = RerankSettings.from_environ()
        if rerank.enabled:
            check_settings(rerank)
    except SettingError as error:
        raise click.UsageError(str(error)) from error
    if lifecycle_port and (lifecycle_host, lifecycle_port) == (host, port):
        raise click.UsageError("--port and --lifecycle-port must differ on one host")
    if not rerank.enabled:
        log.warning("TYPESAFE_API_KEY is not set: context results keep their search order")
    if lifecycle_auth == "tokenreview" and not (k8s_api and k8s_ca):
        raise click.UsageError("--lifecycle-auth tokenreview needs --k8s-api and --k8s-ca")
    if k8s_api is not None and not k8s_api.startswith("https://"):
        raise click.UsageError("--k8s-api must be an https:// URL")
    if lifecycle_auth == "tokenreview" and k8s_ca is not None:
        try:  # as the verifier will load it, before anything is created
            ssl.create_default_context(cafile=str(k8s_ca))
        except (ssl.SSLError, OSError) as error:
            raise click.UsageError(f"--k8s-ca {k8s_ca}: not a PEM CA bundle ({error})") from None
    if lifecycle_webhook is not None:
        from waypost.resolvers.lifecycle.delivery import webhook_refusal

        refused = webhook_refusal(lifecycle_webhook)
        if refused is not None:
            raise click.UsageError(f"--lifecycle-webhook {refused}")
    settings = Settings(
        db_path=db_path or Path(default_db_path()),
        host=host,
        port=port,
        lifecycle_host=lifecycle_host,
        lifecycle_port=lifecycle_port,
        sweep_interval=sweep_interval,
        graphiql=graphiql,
        clock_file=Path(clock_file) if clock_file else None,
        rerank=rerank,
        lifecycle=LifecycleSettings(
            auth=lifecycle_auth,
            k8s_api=k8s_api,
            k8s_ca=k8s_ca,
            k8s_token_file=k8s_token_file,
            webhook=lifecycle_webhook,
        ),
        request_read_timeout=request_read_timeout,
        max_connections=max_connections,
        search_time_limit_ms=search_time_limit_ms,
        graphql_max_objects=graphql_max_objects,
        access_log=access_log,
        metrics=metrics,
    )
    from waypost import serving
    from waypost.storage.db import DatabaseUnusable
    from waypost.storage.migrate import MigrationError

    try:
        serving.run(settings)
    except DatabaseUnusable as error:
        # a clear refusal to start, not a traceback (docs/operations.md); it
        # names the file itself
        raise click.ClickException(f"database_unusable: {error}") from error
    except MigrationError as error:
        raise click.ClickException(f"database_unusable: {settings.db_path}: {error}") from error
    except sqlite3.DatabaseError as error:
        # a file that opened and migrated but fails on its first write (damaged
        # pages past the header): the same refusal
        raise click.ClickException(f"database_unusable: {settings.db_path}: {error}") from error
    except serving.CannotListen as error:
        raise click.ClickException(f"cannot_listen: {error}") from error


@main.command("mcp")
@click.option(
    "--url",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="Base URL of the running Waypost the tools call.",
)
def mcp_command(url: str) -> None:
    """MCP server over stdio (for clients that launch a process); token from WAYPOST_TOKEN."""
    from waypost.mcp_server.stdio import TokenRefused
    from waypost.mcp_server.stdio import main as serve_mcp
    from waypost.observe import logs

    token = os.environ.get("WAYPOST_TOKEN", "").strip()
    if not token:
        raise click.UsageError("set WAYPOST_TOKEN to a Waypost API token")
    # standard error, as `serve` writes it (lines cut at 2,000 characters);
    # standard output is the protocol's
    logs.configure("text", logging.WARNING)
    try:
        serve_mcp(url.rstrip("/"), token)
    except TokenRefused as error:
        raise click.ClickException(str(error)) from None


@main.group()
def admin() -> None:
    """Administrative commands; they never read TYPESAFE_API_KEY."""


def _write(db_path: Path, fn: Callable[[sqlite3.Connection, str], T]) -> T:
    """A unit of work in one BEGIN IMMEDIATE transaction, after migrating."""
    return _unit(db_path, lambda conn: run_write(conn, lambda c: fn(c, _now())))


def _now() -> str:
    return format_time(SystemClock().now())


@contextlib.contextmanager
def _in_one_line(db_path: Path) -> Iterator[None]:
    """Every failure inside as `Error: code: message`: a refusal by its code,
    anything the file or SQLite says as `database_unusable`."""
    try:
        yield
    except WaypostError as error:
        raise click.ClickException(f"{error.code}: {error.message}") from error
    except (MigrationError, sqlite3.Error, OSError) as error:
        raise click.ClickException(f"database_unusable: {db_path}: {error}") from error


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
    from waypost.maintenance import BackupError, present

    try:
        found = present(db_path)
    except BackupError as error:
        raise click.ClickException(str(error)) from error
    if not found:
        raise click.ClickException(f"not_found: no database at {db_path}")
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
    with _in_one_line(db_path):
        conn = connect_sync(db_path)
    with _in_one_line(db_path):
        try:
            applied = migrate(conn)
        finally:
            conn.close()
    _print({"applied": applied})


@admin.group("principal")
def principal_group() -> None:
    """Principals."""


@principal_group.command("create")
@db_option
@click.option("--kind", type=click.Choice(principals.KINDS), required=True)
@click.option("--name", required=True)
def principal_create(db_path: Path, kind: str, name: str) -> None:
    """Create a principal; prints its api token (once) and the token's id."""
    _print(_write(db_path, lambda c, at: principals.create_principal(c, kind, name, at)))


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
@click.option("--principal", "principal_id", required=True)
@click.option("--audience", type=click.Choice(principals.AUDIENCES), default="api",
              show_default=True)  # fmt: skip
def token_issue(db_path: Path, principal_id: str, audience: str) -> None:
    """Issue a token; it is printed once and only its SHA-256 is kept."""
    _print(_write(db_path, lambda c, at: principals.issue_token(c, principal_id, audience, at)))


@token_group.command("revoke")
@db_option
@click.option("--token-id", required=True)
def token_revoke(db_path: Path, token_id: str) -> None:
    """Revoke a token at once."""
    _write(db_path, lambda c, at: principals.revoke_token(c, token_id, at))
    _print({"token_id": token_id, "revoked": True})


@token_group.command("list")
@db_option
@click.option("--principal", "principal_id", default=None, help="Only this principal's tokens.")
def token_list(db_path: Path, principal_id: str | None) -> None:
    """Tokens as a JSON array of {token_id, principal_id, audience, created_at,
    revoked_at}, oldest first; never a token or its hash."""
    _print(_read(db_path, lambda c: principals.list_tokens(c, principal_id)))


@admin.command("backup")
@db_option
@click.option("--to", "target", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The new backup file (refused if it exists).")  # fmt: skip
def admin_backup(db_path: Path, target: Path) -> None:
    """Copy the database through SQLite's online backup API; safe while serve runs."""
    from waypost.maintenance import BackupError, backup

    def terminated(signum: int, frame: object) -> None:
        # SIGTERM (a stopped cron job, a container shutting down) ends the copy
        # as Ctrl-C does, through its cleanup: it used to leave the partial
        # copy and its journal behind
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
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
@click.option("--id", "project_id", required=True)
@click.option("--name", required=True)
def project_create(db_path: Path, project_id: str, name: str) -> None:
    """Create a project, as the first human principal (the admin)."""
    from waypost.http.decoding import convert

    def create(conn: sqlite3.Connection, at: str) -> dict[str, Any]:
        body = convert({"id": project_id, "name": name}, projects.ProjectCreate)
        owner_id = principals.first_human_id(conn)
        if owner_id is None:
            raise click.ClickException("no_human: create a human principal first")
        return projects.create_as_admin(conn, body, owner_id, at)

    _print(_write(db_path, create))


@admin.group("lifecycle")
def lifecycle_group() -> None:
    """The private lifecycle adapter: tenant grants and event deliveries."""


@lifecycle_group.command("grant")
@db_option
@click.option("--principal", "principal_id", required=True,
              help="A principal id, or the username a Kubernetes TokenReview returns.")  # fmt: skip
@click.option("--tenant", required=True)
@click.option("--role", type=click.Choice(authz.ROLES), required=True)
def lifecycle_grant(db_path: Path, principal_id: str, tenant: str, role: str) -> None:
    """Grant a principal its one lifecycle tenant role (replacing any earlier one)."""
    if not 1 <= len(principal_id) <= 256 or not 1 <= len(tenant) <= 256:
        raise click.UsageError("--principal and --tenant are 1-256 characters")

    def grant(conn: sqlite3.Connection, at: str) -> dict[str, Any]:
        return authz.grant(conn, principal_id, tenant, role, at)

    _print(_write(db_path, grant))


@lifecycle_group.command("deliveries")
@db_option
@click.option("--state", type=click.Choice(["pending", "delivered", "all"]), default="pending",
              show_default=True)  # fmt: skip
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
def lifecycle_deliveries(db_path: Path, state: str, limit: int) -> None:
    """List lifecycle event deliveries (oldest first) as a JSON array."""
    from waypost.resolvers.lifecycle import delivery

    chosen = None if state == "all" else state
    rows = _read(db_path, lambda c: delivery.list_deliveries(c, chosen, limit))
    click.echo(json.dumps(rows))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
