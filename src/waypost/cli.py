"""The command line: `waypost serve` (the default), `waypost mcp`, and the
`waypost admin ...` group of admin_cli.py."""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import ssl
import sys
from pathlib import Path
from typing import get_args

import click

from waypost.admin_cli import admin, db_option
from waypost.cli_text import TEXT
from waypost.clock import FileClock
from waypost.errors import Unavailable, WaypostError
from waypost.ids import visible_ascii
from waypost.settings import (
    LifecycleAuth,
    LifecycleSettings,
    RerankSettings,
    SettingError,
    Settings,
    default_db_path,
)
from waypost.storage.connection import is_busy
from waypost.storage.migrate import MigrationError
from waypost.storage.writer import BUSY_MESSAGE

log = logging.getLogger("waypost")


@click.group(invoke_without_command=True)
@click.pass_context
def main(ctx: click.Context) -> None:
    """Waypost: coordination for teams of AI agents and humans."""
    if ctx.invoked_subcommand is None:
        # parsed as `waypost serve` with no arguments: ctx.invoke(serve) ran
        # none of its options' callbacks, so `--db`'s default reached the
        # start as a str and a bare `waypost` died with a traceback
        # (opsdocaudit)
        with serve.make_context("serve", [], parent=ctx) as serving:
            serve.invoke(serving)


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
@click.option("--host", default="127.0.0.1", show_default=True, type=TEXT)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="0 picks a free port.")  # fmt: skip
@click.option("--lifecycle-host", default="127.0.0.1", show_default=True, type=TEXT)
@click.option("--lifecycle-port", default=8081, show_default=True, type=click.IntRange(0, 65535),
              help="0 disables the lifecycle listener.")  # fmt: skip
@click.option("--sweep-interval", default=300.0, show_default=True, type=float,
              callback=_sweep_seconds,
              help="Seconds between sweeps (decision timeouts, receipt cleanup); at least "
                   f"{MIN_SWEEP_SECONDS}.")  # fmt: skip
@click.option("--graphiql/--no-graphiql", default=False, show_default=True)
@click.option("--lifecycle-auth", type=click.Choice(get_args(LifecycleAuth)),
              default="waypost", show_default=True,
              help="Lifecycle bearer tokens: Waypost tokens of audience lifecycle, or "
                   "Kubernetes TokenReview.")  # fmt: skip
@click.option(
    "--k8s-api",
    default=None,
    type=TEXT,
    help="Kubernetes API server URL (https://), for tokenreview.",
)
# not `exists=True`: the file is read (and so checked) under tokenreview only
@click.option("--k8s-ca", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="PEM CA bundle of the Kubernetes API server.")  # fmt: skip
@click.option("--k8s-token-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Waypost's own credential for TokenReview calls "
                   "(default: the in-cluster service-account token).")  # fmt: skip
@click.option("--lifecycle-webhook", default=None, type=TEXT,
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
                   " limit at start) less 384 and at least 16, at most 10,000; more"
                   " than the limit less 384 (at least 16) is refused. Under a limit"
                   " below 896 the lifecycle listener holds a third of the limit less"
                   " 128 (at least 8) instead of 256, and the public one the rest.")  # fmt: skip
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
              help="One log line per request (waypost.access; the lifecycle"
                   " listener's, waypost.lifecycle.access).")  # fmt: skip
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
    lifecycle_auth: LifecycleAuth = "waypost",
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

    logs.configure(log_format, access_log=access_log)
    # the log's last lines before click prints any refusal (those raised
    # here too, before `_run`) and before the process leaves (its daemon
    # thread would take them along)
    click.get_current_context().call_on_close(logs.settle)
    clock_file = _clock_file()
    rerank = _rerank_settings()
    if lifecycle_port and (lifecycle_host, lifecycle_port) == (host, port):
        raise click.UsageError("--port and --lifecycle-port must differ on one host")
    if max_connections is not None:
        from waypost.serving import max_connections_refusal

        if (refusal := max_connections_refusal(max_connections)) is not None:
            raise click.UsageError(refusal)
    lifecycle = _lifecycle_settings(
        lifecycle_auth, k8s_api, k8s_ca, k8s_token_file, lifecycle_webhook
    )
    # the warnings after every refusal: they are for a service that starts
    if clock_file is not None:
        log.warning("WAYPOST_CLOCK_FILE is set: the service's clock reads %s", clock_file)
    _warn_of_blank_hosts(host, lifecycle_host if lifecycle_port else "127.0.0.1")
    if not rerank.enabled:
        log.warning("TYPESAFE_API_KEY is not set: context results keep their search order")
    _run(
        Settings(
            db_path=db_path or Path(default_db_path()),
            host=host,
            port=port,
            lifecycle_host=lifecycle_host,
            lifecycle_port=lifecycle_port,
            sweep_interval=sweep_interval,
            graphiql=graphiql,
            clock_file=clock_file,
            rerank=rerank,
            lifecycle=lifecycle,
            request_read_timeout=request_read_timeout,
            max_connections=max_connections,
            search_time_limit_ms=search_time_limit_ms,
            graphql_max_objects=graphql_max_objects,
            access_log=access_log,
            metrics=metrics,
        )
    )


def _warn_of_blank_hosts(host: str, lifecycle_host: str) -> None:
    """A blank host listens on every interface, as uvicorn's does; from an
    unset variable in a unit file it put the private lifecycle API there with
    nothing but the "listening on" lines to say so."""
    for option, value in (("--host", host), ("--lifecycle-host", lifecycle_host)):
        if not value:
            log.warning(
                "%s is blank: its listener listens on every interface, IPv4 and IPv6"
                " (name an address; 0.0.0.0 if every interface is meant)", option
            )  # fmt: skip


def _clock_file() -> Path | None:
    """`WAYPOST_CLOCK_FILE`, checked readable now: start-up needs "now" (the
    admin's created_at)."""
    clock_file = os.environ.get("WAYPOST_CLOCK_FILE")
    if not clock_file:
        return None
    try:
        FileClock(Path(clock_file)).now()
    except WaypostError as error:
        raise click.ClickException(f"clock_unavailable: {clock_file}: {error.message}") from error
    return Path(clock_file)


def _rerank_settings() -> RerankSettings:
    """The reranker's settings from the environment (only `serve` reads
    `TYPESAFE_API_KEY`), checked before anything starts."""
    from waypost.reranker.client import check_settings

    try:
        rerank = RerankSettings.from_environ()
        if rerank.enabled:
            check_settings(rerank)
    except SettingError as error:
        raise click.UsageError(str(error)) from error
    return rerank


def _lifecycle_settings(
    auth: LifecycleAuth,
    k8s_api: str | None,
    k8s_ca: Path | None,
    k8s_token_file: Path | None,
    webhook: str | None,
) -> LifecycleSettings:
    """The lifecycle listener's options, checked as its verifier and webhook
    will use them, before anything is created."""
    if auth == "tokenreview" and not (k8s_api and k8s_ca):
        raise click.UsageError("--lifecycle-auth tokenreview needs --k8s-api and --k8s-ca")
    if k8s_api is not None:
        from waypost.http.urls import endpoint_url_refusal

        refused = endpoint_url_refusal(k8s_api, ("https",), bearer=True)
        if refused is not None:
            raise click.UsageError(f"--k8s-api {refused}")
    if auth == "tokenreview" and k8s_ca is not None:
        try:
            ssl.create_default_context(cafile=str(k8s_ca))
        except ssl.SSLError as error:
            raise click.UsageError(f"--k8s-ca {k8s_ca}: not a PEM CA bundle ({error})") from None
        except OSError as error:
            raise click.UsageError(f"--k8s-ca {k8s_ca}: cannot be read ({error})") from None
    if webhook is not None:
        from waypost.resolvers.lifecycle.delivery import webhook_refusal

        refused = webhook_refusal(webhook)
        if refused is not None:
            raise click.UsageError(f"--lifecycle-webhook {refused}")
    # both clients honour the proxy variables; TokenReview's has its own SSL
    # context (--k8s-ca), so the certificate variables are not read for it
    if webhook is not None:
        _environment_usable()
    elif auth == "tokenreview":
        _environment_usable(ssl.create_default_context())
    return LifecycleSettings(
        auth=auth, k8s_api=k8s_api, k8s_ca=k8s_ca, k8s_token_file=k8s_token_file, webhook=webhook
    )


def _environment_usable(verify: ssl.SSLContext | None = None) -> None:
    """A usage error when httpx cannot make a client with the environment's
    proxy and certificate variables (it raised a traceback at start)."""
    from waypost.http.environment import environment_refusal

    refused = environment_refusal(verify)
    if refused is not None:
        raise click.UsageError(refused)


def _run(settings: Settings) -> None:
    """Serve until stopped; a file or address that cannot be used is a
    one-line refusal, not a traceback (docs/operations.md); `serve` waits
    for the log's last lines as its context closes."""
    from waypost import serving
    from waypost.observe import logs
    from waypost.runtime import CannotShowToken
    from waypost.storage.db import DatabaseUnusable, connections_left_open

    _fill_closed_standard_fds()
    try:
        serving.run(settings)
        if connections_left_open():
            log.error(
                "the database's -shm file was replaced, or another file copied over the"
                " database, while serving: exiting without closing the database, so that no"
                " checkpoint through this process's stale index drops another process's writes"
                " or writes its pages over the file put there (docs/operations.md, 'The"
                " database's files')"
            )
            logs.settle()
            logging.shutdown()
            os._exit(1)
    except DatabaseUnusable as error:
        if _held_elsewhere(error.__cause__):
            raise click.ClickException(_busy(settings.db_path)) from error
        # it names the file itself
        raise click.ClickException(
            f"database_unusable: {error}{_full_disk(settings.db_path, str(error.__cause__))}"
        ) from error
    except MigrationError as error:
        raise click.ClickException(f"database_unusable: {settings.db_path}: {error}") from error
    except sqlite3.DatabaseError as error:
        if _held_elsewhere(error):
            raise click.ClickException(_busy(settings.db_path)) from error
        # a file that opened and migrated but fails on its first write (damaged
        # pages past the header): the same refusal
        raise click.ClickException(
            f"database_unusable: {settings.db_path}: {error}"
            f"{_full_disk(settings.db_path, str(error))}"
        ) from error
    except serving.CannotListen as error:
        raise click.ClickException(f"cannot_listen: {error}") from error
    except CannotShowToken as error:
        raise click.ClickException(f"cannot_show_token: {error}") from error
    except Unavailable as error:
        if _held_elsewhere(error.__cause__):
            raise click.ClickException(_busy(settings.db_path)) from error
        # the start-up's own first write (the admin's bootstrap) found the
        # file damaged: SQLite's words, as for a file that fails to open
        cause = error.__cause__ or error.message
        raise click.ClickException(f"database_unusable: {settings.db_path}: {cause}") from error


def _full_disk(path: Path, said: str) -> str:
    """What to add when the disk holding the database has no free byte and
    SQLite did not say so: the -shm it could not make on a full disk it
    called "disk I/O error", which reads as a failing device or a damaged
    file (diskfulljourney)."""
    if "full" in said:
        return ""
    where = os.path.dirname(os.path.realpath(path)) or "."
    try:
        free = os.statvfs(where).f_bavail
    except OSError:
        return ""
    return (
        f" (the disk holding {where} is full: free some space, then start again)"
        if free == 0
        else ""
    )


def _fill_closed_standard_fds() -> None:
    """A closed standard descriptor (`serve 2>&-`) is /dev/null from here on:
    the next file, socket or event loop opened took its number, and uvloop
    aborted the process as it closed its loop on descriptor 2 (exit 134 at
    every stop; opsdocs2). Python's `sys.stderr` stays None, so the first
    admin is still not made (runtime.py)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            # the lowest free descriptor, this one: those below it are open
            # or were filled in their turn, and no other thread opens one
            # meanwhile (the log's thread, running already, opens none)
            os.open(os.devnull, os.O_RDWR)


def _held_elsewhere(error: BaseException | None) -> bool:
    """Whether opening, migrating or the first write waited out the busy
    timeout on another process's lock: the file is fine (it said
    `database_unusable: ...: database is locked`, which reads as damage)."""
    return isinstance(error, sqlite3.OperationalError) and is_busy(error)


def _busy(db_path: Path) -> str:
    return f"unavailable: {db_path}: {BUSY_MESSAGE}"


@main.command("mcp")
@click.option(
    "--url",
    type=TEXT,
    default="http://127.0.0.1:8080",
    show_default=True,
    help="Base URL of the running Waypost the tools call.",
)
def mcp_command(url: str) -> None:
    """MCP server over stdio (for clients that launch a process); token from WAYPOST_TOKEN."""
    from waypost.http.urls import endpoint_url_refusal
    from waypost.mcp_server.stdio import TokenRefused
    from waypost.mcp_server.stdio import main as serve_mcp
    from waypost.observe import logs

    refused = endpoint_url_refusal(url, ("http", "https"), bearer=True)
    if refused is not None:
        # no call could ever reach it: it said "cannot reach ... yet" and ran
        # on, each tool failing, as for a service not started (cliaudit)
        raise click.BadParameter(refused, param_hint="'--url'")
    token = os.environ.get("WAYPOST_TOKEN", "").strip()
    if not token:
        raise click.UsageError("set WAYPOST_TOKEN to a Waypost API token")
    if not visible_ascii(token):
        # a token is visible ASCII: a non-ASCII letter ended in a traceback
        # (no header can carry it), a line break in "cannot reach" and a start
        raise click.ClickException(
            "WAYPOST_TOKEN holds characters no Waypost token has (tokens are visible"
            " ASCII, without spaces): set it to the token as printed"
        )
    _environment_usable()  # its calls to --url honour the proxy variables
    # standard error, as `serve` writes it (lines cut at 2,000 characters);
    # standard output is the protocol's
    logs.configure("text", logging.WARNING)
    try:
        serve_mcp(url.rstrip("/"), token)
    except TokenRefused as error:
        raise click.ClickException(str(error)) from None
    finally:
        logs.settle()


main.add_command(admin)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
