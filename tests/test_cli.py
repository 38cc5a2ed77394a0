"""The command line (service contract section 1): admin commands print the
documented JSON shapes; every command takes --db (env WAYPOST_DB)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import resource
import socket
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from tests.conftest import MovableClock
from waypost.app import create_app
from waypost.cli import main
from waypost.clock import parse_time
from waypost.settings import Settings
from waypost.storage.migrate import available

ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def ok(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = run(*args, env=env)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "cli.db")


async def call(db: str, token: str, path: str) -> httpx.Response:
    """A request to the app on the same database file."""
    app = create_app(Settings(db_path=Path(db), sweep_interval=3600), clock=MovableClock())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.get(path, headers={"Authorization": f"Bearer {token}"})


def test_migrate_applies_every_migration_once(db: str) -> None:
    assert ok("admin", "migrate", "--db", db) == {"applied": [m.name for m in available()]}
    assert ok("admin", "migrate", "--db", db) == {"applied": []}


def test_migrate_says_what_it_applies_on_standard_error(db: str) -> None:
    """A long migration (0037: 53 s at a million records) ran with nothing
    said (upgradeaudit3): the lines go to standard error, the JSON alone to
    standard output, and the logger is left as it was."""
    storage = logging.getLogger("waypost.storage")
    handlers, level = list(storage.handlers), storage.level
    first = run("admin", "migrate", "--db", db)
    names = [m.name for m in available()]
    assert json.loads(first.stdout) == {"applied": names}
    said = first.stderr.splitlines()
    assert len(said) == 2, said
    assert f"applying {len(names)} migrations, {names[0]} to {names[-1]}" in said[0]
    assert " in " in said[1] and said[1].endswith(" s")
    again = run("admin", "migrate", "--db", db)
    assert json.loads(again.stdout) == {"applied": []} and again.stderr == ""
    assert storage.handlers == handlers and storage.level == level


def test_migrate_refuses_a_changed_migration(db: str) -> None:
    ok("admin", "migrate", "--db", db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE schema_migrations SET checksum = 'x' WHERE name = '0001_core.sql'")
    conn.commit()
    conn.close()
    result = run("admin", "migrate", "--db", db)
    assert result.exit_code == 1
    said = f"Error: database_unusable: {db}: migration 0001_core.sql changed after it was applied"
    assert said in result.stderr
    # every command that opens the database refuses it the same way, naming the file
    for command in (["principal", "create", "--kind", "human", "--name", "x"],
                    ["principal", "list"], ["token", "list"]):  # fmt: skip
        other = run("admin", *command, "--db", db)
        assert other.exit_code == 1 and said in other.stderr, other.stderr


async def test_principal_create_prints_the_principal_and_a_working_api_token(db: str) -> None:
    data = ok("admin", "principal", "create", "--kind", "agent", "--name", "robo", "--db", db)
    assert set(data) == {"principal_id", "kind", "name", "token_id", "token"}
    assert ID.match(data["principal_id"]) and data["kind"] == "agent" and data["name"] == "robo"
    r = await call(db, data["token"], "/api/v1/me")
    assert r.status_code == 200
    assert r.json()["principal"] == {"id": data["principal_id"], "kind": "agent", "name": "robo"}


@pytest.mark.parametrize(
    "args",
    [
        ["--kind", "robot", "--name", "x"],
        ["--kind", "human"],
        ["--name", "x"],
    ],
)
def test_principal_create_refuses_bad_arguments(db: str, args: list[str]) -> None:
    result = run("admin", "principal", "create", *args, "--db", db)
    assert result.exit_code == 2


def test_principal_create_refuses_an_empty_name(db: str) -> None:
    result = run("admin", "principal", "create", "--kind", "human", "--name", "", "--db", db)
    assert result.exit_code == 1 and "invalid_request" in result.stderr


def test_a_principal_name_is_1_to_200_characters(db: str) -> None:
    """docs/operations.md: a principal's `--name` is 1-200 characters, and
    a longer one is refused `name must be 1-200 characters`; only the empty
    name was tried (opsdocaudit)."""
    made = ok("admin", "principal", "create", "--kind", "human", "--name", "a" * 200, "--db", db)
    assert made["name"] == "a" * 200
    result = run("admin", "principal", "create", "--kind", "agent", "--name", "b" * 201, "--db", db)
    assert result.exit_code == 1
    assert result.stderr == "Error: invalid_request: --name: name must be 1-200 characters\n"
    assert [p["name"] for p in ok_list("admin", "principal", "list", "--db", db)] == ["a" * 200]


def ok_list(*args: str) -> list[dict[str, Any]]:
    result = run(*args)
    assert result.exit_code == 0, result.output
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data


@pytest.mark.parametrize("name", ["   ", "ann\nbob", "\x1b[2Jann", "ann\x7f"])
def test_principal_create_refuses_a_name_that_is_not_one_visible_line(db: str, name: str) -> None:
    ok("admin", "migrate", "--db", db)
    result = run("admin", "principal", "create", "--kind", "human", "--name", name, "--db", db)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: invalid_request: --name: name must")
    result = run("admin", "principal", "list", "--db", db)
    assert json.loads(result.stdout) == []


async def test_token_issue_prints_its_shape_with_audience_api_by_default(db: str) -> None:
    p = ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", db)
    data = ok("admin", "token", "issue", "--principal", p["principal_id"], "--db", db)
    assert set(data) == {"principal_id", "audience", "token_id", "token"}
    assert data["principal_id"] == p["principal_id"] and data["audience"] == "api"
    assert ID.match(data["token_id"]) and data["token"] != p["token"]
    assert (await call(db, data["token"], "/api/v1/me")).status_code == 200


async def test_lifecycle_token_is_not_an_api_token(db: str) -> None:
    p = ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", db)
    data = ok("admin", "token", "issue", "--principal", p["principal_id"],
              "--audience", "lifecycle", "--db", db)  # fmt: skip
    assert data["audience"] == "lifecycle"
    assert (await call(db, data["token"], "/api/v1/me")).status_code == 401


def test_token_issue_for_an_unknown_principal_fails(db: str) -> None:
    result = run("admin", "token", "issue", "--principal", "prn_nobody", "--db", db)
    assert result.exit_code == 1 and "not_found" in result.stderr


async def test_token_revoke_takes_effect_at_once(db: str) -> None:
    p = ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", db)
    t = ok("admin", "token", "issue", "--principal", p["principal_id"], "--db", db)
    assert (await call(db, t["token"], "/api/v1/me")).status_code == 200
    assert ok("admin", "token", "revoke", "--token-id", t["token_id"], "--db", db) == {
        "token_id": t["token_id"],
        "revoked": True,
    }
    assert (await call(db, t["token"], "/api/v1/me")).status_code == 401
    assert (await call(db, p["token"], "/api/v1/me")).status_code == 200


def test_token_revoke_of_an_unknown_token_fails(db: str) -> None:
    ok("admin", "migrate", "--db", db)
    result = run("admin", "token", "revoke", "--token-id", "tok_nothing", "--db", db)
    assert result.exit_code == 1 and "not_found" in result.stderr


async def test_project_create_prints_the_project_with_policy_revision_1(db: str) -> None:
    p = ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", db)
    data = ok("admin", "project", "create", "--id", "ops", "--name", "Operations", "--db", db)
    assert set(data) == {"id", "name", "created_at", "created_by"}
    assert (data["id"], data["name"], data["created_by"]) == (
        "ops",
        "Operations",
        p["principal_id"],
    )
    policy = (await call(db, p["token"], "/api/v1/projects/ops/policy")).json()
    assert policy["revision"] == 1 and policy["review_mode"] == "human"
    events = (await call(db, p["token"], "/api/v1/projects/ops/events")).json()["items"]
    assert [e["type"] for e in events] == ["project.created"]
    # docs/operations.md: "writes a `project.created` event whose data says
    # `"via": "admin"`" (no test read it; opsdocaudit)
    assert events[0]["data"]["via"] == "admin"


def test_project_create_is_by_the_first_human_whatever_the_clocks_said(db: str) -> None:
    """`serve` under a simulated clock stamped the admin later than a human
    the admin command made on the machine's clock: the later one became the
    creator."""
    first = ok("admin", "principal", "create", "--kind", "human", "--name", "a", "--db", db)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE principals SET created_at = '2099-01-01T00:00:00.000Z'")
    conn.close()
    ok("admin", "principal", "create", "--kind", "human", "--name", "b", "--db", db)
    data = ok("admin", "project", "create", "--id", "ops", "--name", "Ops", "--db", db)
    assert data["created_by"] == first["principal_id"]


def test_project_create_duplicate_fails_with_state_conflict(db: str) -> None:
    ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", db)
    ok("admin", "project", "create", "--id", "ops", "--name", "Ops", "--db", db)
    result = run("admin", "project", "create", "--id", "ops", "--name", "Ops", "--db", db)
    assert result.exit_code == 1 and "state_conflict" in result.stderr


@pytest.mark.parametrize(
    "args",
    [["token", "issue", "--principal", "prn_x"], ["token", "revoke", "--token-id", "tok_x"],
     ["project", "create", "--id", "ops", "--name", "Ops"], ["token", "list"]],
)  # fmt: skip
def test_an_empty_file_is_no_database_and_is_left_empty(db: str, args: list[str]) -> None:
    """SQLite takes an empty file for a new database: `token issue` migrated
    a `touch`ed path and said "no such principal" (sessionsjourney)."""
    Path(db).touch()
    result = run("admin", *args, "--db", db)
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: not_found: no database at {db} (the file is empty)"
    assert Path(db).stat().st_size == 0


def test_principal_create_and_migrate_make_a_database_of_an_empty_file(db: str) -> None:
    Path(db).touch()
    ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", db)
    assert Path(db).stat().st_size > 0 or Path(f"{db}-wal").stat().st_size > 0


def test_project_create_without_a_human_says_how_to_make_one(db: str) -> None:
    """With an agent made first, `serve` makes no `admin` (it does so only on
    a database with no principals): the refusal names the one command that
    helps (sessionsjourney)."""
    ok("admin", "principal", "create", "--kind", "agent", "--name", "a", "--db", db)
    result = run("admin", "project", "create", "--id", "ops", "--name", "Ops", "--db", db)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: no_human: create a human principal first"
        " (`waypost admin principal create --kind human --name NAME`)"
    )


def test_project_create_bad_slug_fails_with_invalid_request(db: str) -> None:
    ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", db)
    result = run("admin", "project", "create", "--id", "Ops!", "--name", "Ops", "--db", db)
    assert result.exit_code == 1 and "invalid_request" in result.stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [(["--id", "ops", "--name", ""], "--name"), (["--id", "ops", "--name", "a\nb"], "--name"),
     (["--id", "Ops!", "--name", "Ops"], "--id")],
)  # fmt: skip
def test_project_create_refusals_name_the_option_to_change(
    db: str, args: list[str], option: str
) -> None:
    ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", db)
    result = run("admin", "project", "create", *args, "--db", db)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: invalid_request: {option}: ")


@pytest.mark.parametrize(
    "name", ["admin", "admin\u200b", " admin", "\u202eadmin", "\u2067in\u200f\u200fadm\u2069"]
)
def test_a_principal_shown_by_anothers_name_is_refused(db: str, name: str) -> None:
    """Answers show their principal by name: a second "admin" (or one
    differing by an invisible character) made every answer of the first
    read as its (spoofaudit). An override is refused in any name."""
    ok("admin", "principal", "create", "--kind", "human", "--name", "admin", "--db", db)
    result = run("admin", "principal", "create", "--kind", "agent", "--name", name, "--db", db)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: invalid_request: --name: "), result.stderr
    listed = ok("admin", "principal", "list", "--db", db)
    assert [p["name"] for p in listed] == ["admin"]


def test_project_create_needs_a_human_principal(db: str) -> None:
    ok("admin", "migrate", "--db", db)
    result = run("admin", "project", "create", "--id", "ops", "--name", "Ops", "--db", db)
    assert result.exit_code == 1 and "human principal" in result.stderr


@pytest.mark.parametrize(
    "command",
    [["token", "revoke", "--token-id", "tok_x"], ["token", "issue", "--principal", "prn_x"],
     ["project", "create", "--id", "ops", "--name", "Ops"],
     ["lifecycle", "grant", "--principal", "prn_x", "--tenant", "t", "--role", "reader"],
     ["lifecycle", "revoke", "--principal", "prn_x"]],
)  # fmt: skip
def test_a_write_on_a_database_that_is_not_there_makes_none(
    tmp_path: Path, command: list[str]
) -> None:
    """A mistyped `--db` made a new database, then `token revoke` said "no
    such token" of a token that still worked elsewhere (cliaudit); only
    `migrate` and `principal create` start a database."""
    missing = tmp_path / "typo.db"
    result = run("admin", *command, "--db", str(missing))
    assert result.exit_code == 1
    assert result.stderr == f"Error: not_found: no database at {missing}\n"
    assert list(tmp_path.iterdir()) == []
    ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", str(missing))
    assert missing.exists()


@pytest.mark.parametrize(
    "command",
    [["principal", "list"], ["token", "list"], ["lifecycle", "grants"], ["verify"],
     ["backup", "--to", "{out}"], ["token", "revoke", "--token-id", "tok_x"], ["migrate"],
     ["principal", "create", "--kind", "human", "--name", "h"]],
)  # fmt: skip
def test_a_fifo_as_the_database_is_refused_not_waited_on(
    tmp_path: Path, command: list[str]
) -> None:
    """Opening a FIFO read-only waits for a writer: the read-only commands
    hung for good (cliaudit). A writer opened after 10 s frees a command
    that waits, so that this test fails rather than hangs."""
    fifo = tmp_path / "f.db"
    os.mkfifo(fifo)
    done = threading.Event()

    def unblock() -> None:
        if not done.wait(10):
            with contextlib.suppress(OSError), open(fifo, "wb"):
                pass

    threading.Thread(target=unblock, daemon=True).start()
    args = [a.replace("{out}", str(tmp_path / "copy.db")) for a in command]
    try:
        result = run("admin", *args, "--db", str(fifo))
    finally:
        done.set()
    assert result.exit_code == 1, result.output
    assert result.stderr == f"Error: database_unusable: {fifo}: not a regular file\n"


@pytest.mark.parametrize("token", ["wp_secretmark\u00e9", "wp_secretmark\ninjected: 1", "wp_a b"])
def test_mcp_refuses_a_token_no_header_can_carry_without_quoting_it(token: str) -> None:
    """A non-ASCII letter in WAYPOST_TOKEN ended in a traceback; a line break
    in "cannot reach ... (LocalProtocolError)", and the server started."""
    result = CliRunner().invoke(main, ["mcp"], env={"WAYPOST_TOKEN": token}, input="")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: WAYPOST_TOKEN holds characters no Waypost token has")
    assert "secretmark" not in result.output and result.exception is not None
    assert isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("url", ["notaurl", "ftp://x y", "", "http://", "https://h:99999"])
def test_mcp_refuses_a_url_no_call_could_reach(url: str) -> None:
    """It said "cannot reach notaurl/ yet" and ran on, every tool failing, as
    for a service not started yet (cliaudit); `serve` refuses such a webhook."""
    env = {"WAYPOST_TOKEN": "wp_x"}
    result = CliRunner().invoke(main, ["mcp", "--url", url], env=env, input="")
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--url'" in result.stderr, result.stderr


@pytest.mark.parametrize("url", ["http://agent:s3cretpw@127.0.0.1:9", "https://s3cretpw@h.example"])
def test_mcp_refuses_a_url_holding_a_password_without_quoting_it(url: str) -> None:
    """httpx sends a URL's user and password as `Basic`, in place of the
    token: every call failed, the valid token was blamed ("refused the
    token"), and the password went to standard error and into every tool's
    answer (stdiocohabit)."""
    result = CliRunner().invoke(main, ["mcp", "--url", url], env={"WAYPOST_TOKEN": "wp_x"})
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--url': holds a user name or password" in result.stderr
    assert "s3cretpw" not in result.output


def test_db_defaults_to_env_waypost_db(tmp_path: Path) -> None:
    path = tmp_path / "from-env.db"
    ok("admin", "migrate", env={"WAYPOST_DB": str(path)})
    assert path.exists()


def test_db_defaults_to_waypost_db_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WAYPOST_DB", raising=False)
    ok("admin", "migrate")
    assert (tmp_path / "waypost.db").exists()


@pytest.mark.parametrize("blank", ["", " "])
def test_a_blank_db_is_a_usage_error_naming_the_option(
    blank: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for args in (["admin", "migrate"], ["serve", "--port", "0"]):
        result = run(*args, "--db", blank)
        assert result.exit_code == 2, result.output
        assert "'--db': names no file (it is blank)" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_blank_waypost_db_is_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`WAYPOST_DB=' '` made a database file named by a space."""
    monkeypatch.chdir(tmp_path)
    ok("admin", "migrate", env={"WAYPOST_DB": " "})
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["waypost.db"]


@pytest.mark.parametrize(
    "variables",
    [{"PORT": "", "LIFECYCLE_PORT": " ", "WAYPOST_DB": ""}, {"WAYPOST_DB": "  "}],
)
def test_make_run_takes_blank_variables_as_unset(variables: dict[str, str]) -> None:
    """`PORT= make run` ran `serve --port --lifecycle-port 8081` (a usage
    error about the wrong option) and `WAYPOST_DB= make run` `--db ""`."""
    root = Path(__file__).resolve().parent.parent
    # as from a shell, not from the `make test` that runs these tests
    outside = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}

    def make_run(*assigned: str, env: dict[str, str] = outside) -> str:
        shown = subprocess.run(["make", "--no-print-directory", "-n", "run", *assigned], cwd=root,
                               env=env, capture_output=True, text=True, timeout=30)  # fmt: skip
        return shown.stdout.strip().splitlines()[-1]

    expected = '--port 8080 --lifecycle-port 8081 --db "./waypost.db"'
    assert make_run(env={**outside, **variables}).endswith(expected)
    assert make_run(*(f"{k}={v}" for k, v in variables.items())).endswith(expected)
    named = make_run("PORT=9", "WAYPOST_DB=/a  b.db")
    assert named.endswith('--port 9 --lifecycle-port 8081 --db "/a  b.db"')


def test_admin_commands_never_read_typesafe_settings(db: str) -> None:
    env = {"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": "http://not-https.example"}
    data = ok("admin", "principal", "create", "--kind", "human", "--name", "h", "--db", db, env=env)
    assert data["kind"] == "human"


def test_admin_commands_never_read_the_clock_file(db: str, tmp_path: Path) -> None:
    """Section 1: `WAYPOST_CLOCK_FILE` is among the "environment read by
    `serve` only": an admin command stamps its records with the machine's
    clock, and a clock file it could not even read stops none of them."""
    clock = tmp_path / "clock"
    clock.write_text("2030-01-01T00:00:00.000Z")
    before = datetime.now(UTC)
    for name, path in (("h1", clock), ("h2", tmp_path / "missing")):
        env = {"WAYPOST_CLOCK_FILE": str(path)}
        ok("admin", "principal", "create", "--kind", "human", "--name", name, "--db", db, env=env)
    created = ok("admin", "project", "create", "--id", "ops", "--name", "Ops", "--db", db,
                 env={"WAYPOST_CLOCK_FILE": str(clock)})  # fmt: skip
    listed = json.loads(run("admin", "principal", "list", "--db", db).stdout)
    for at in [created["created_at"], *(p["created_at"] for p in listed)]:
        assert before - timedelta(seconds=1) <= parse_time(at) <= datetime.now(UTC)


def test_serve_refuses_a_non_https_typesafe_url_when_a_key_is_set(db: str) -> None:
    env = {"TYPESAFE_API_KEY": "  k  ", "TYPESAFE_URL": "http://plain.example"}
    result = run("serve", "--db", db, env=env)
    assert result.exit_code == 2 and "https://" in result.output


HOST_253 = f"{'a' * 63}.{'b' * 63}.{'c' * 63}.{'d' * 61}"


# Settings `serve` cannot run with: refused at start with one line naming
# them, not a traceback, and never a server that fails each request later.
@pytest.mark.parametrize(
    ("env", "args", "says"),
    [
        ({"TYPESAFE_MAX_CONCURRENCY": "abc"}, [], "TYPESAFE_MAX_CONCURRENCY must be a whole"),
        ({"TYPESAFE_MAX_CONCURRENCY": "0"}, [], "TYPESAFE_MAX_CONCURRENCY must be a whole"),
        ({"TYPESAFE_CIRCUIT_OPEN_SECONDS": "inf"}, [], "TYPESAFE_CIRCUIT_OPEN_SECONDS must be"),
        ({"TYPESAFE_CIRCUIT_OPEN_SECONDS": "nan"}, [], "TYPESAFE_CIRCUIT_OPEN_SECONDS must be"),
        ({"TYPESAFE_API_KEY": "cl\u00e9"}, [], "visible ASCII"),
        ({"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": "https://[::1"}, [], "not a valid URL"),
        ({"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": "HTTP://x.example"}, [], "https://"),
        ({"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": "https://x.example:99999/r"}, [], "port"),
        ({"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": "https://x.example:0/r"}, [], "port"),
        # httpx sends a login in the URL as `Basic`, in place of the key (operatorjourney)
        ({"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": "https://user:pw@rerank.example/v1"}, [],
         "TYPESAFE_URL holds a user name or password"),
        # 254 characters: past DNS's 253 (mutantaudit9)
        ({"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": f"https://{HOST_253}b/r"}, [], "host name"),
        ({"TYPESAFE_API_KEY": "sk two"}, [], "visible ASCII"),
        ({"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": "https:// x.example/r"}, [], "host name"),
        ({"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": "https://-x.example/r"}, [], "host name"),
        ({"TYPESAFE_API_KEY": "k", "TYPESAFE_CA_BUNDLE": "/nonexistent.pem"}, [], "PEM"),
        ({}, ["--sweep-interval", "0"], "seconds of at least 0.1"),
        ({}, ["--sweep-interval", "0.000001"], "seconds of at least 0.1"),
        ({}, ["--sweep-interval", "nan"], "seconds of at least 0.1"),
        ({}, ["--request-read-timeout", "nan"], "seconds from 0.1 to 3600"),
        ({}, ["--request-read-timeout", "0.01"], "seconds from 0.1 to 3600"),
        ({}, ["--request-read-timeout", "inf"], "seconds from 0.1 to 3600"),
        ({}, ["--port", "70000"], "--port"),
        ({}, ["--port", "9000", "--lifecycle-port", "9000"], "must differ"),
        ({}, ["--lifecycle-auth", "tokenreview", "--k8s-api", "https://k8s.example",
              "--k8s-ca", __file__], "not a PEM CA bundle"),  # a file, but Python
        ({}, ["--lifecycle-auth", "tokenreview", "--k8s-api", "https://k8s.example",
              "--k8s-ca", "/nonexistent/ca.pem"], "--k8s-ca /nonexistent/ca.pem: cannot be read"),
        # its TokenReview calls carry the service account's token
        ({}, ["--lifecycle-auth", "tokenreview", "--k8s-api", "https://sa:pw@k8s.example",
              "--k8s-ca", __file__], "--k8s-api holds a user name or password"),
    ],
)  # fmt: skip
def test_serve_refuses_settings_it_cannot_run_with(
    db: str, env: dict[str, str], args: list[str], says: str
) -> None:
    with socket.socket() as taken:
        # Should a refusal go, the start ends on this busy port (a failure)
        # instead of serving on 8080 until CI's time runs out (mutantaudit8).
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = [] if "--port" in args else ["--port", str(taken.getsockname()[1])]
        result = run("serve", "--db", db, *port, *args, env=env)
    assert result.exit_code == 2 and says in result.output, result.output
    assert not Path(db).exists()
    # the reranker's warning is for a service that starts, not one refused
    assert "TYPESAFE_API_KEY is not set" not in result.output
    assert "WARNING" not in result.output, result.output


def test_a_refused_start_says_no_warning_first(db: str, tmp_path: Path) -> None:
    """A blank --host and WAYPOST_CLOCK_FILE were warned of before a later
    setting refused the start (review37): warnings are for a service that
    starts."""
    clock = tmp_path / "clock"
    clock.write_text("2026-12-05T00:00:00Z")
    env = {"WAYPOST_CLOCK_FILE": str(clock), "TYPESAFE_API_KEY": ""}
    result = run("serve", "--db", db, "--host", "", "--lifecycle-auth", "tokenreview", env=env)
    assert result.exit_code == 2 and "needs --k8s-api and --k8s-ca" in result.output
    assert "WARNING" not in result.output, result.output


def test_serve_ignores_the_k8s_ca_without_tokenreview(db: str) -> None:
    """docs/lifecycle.md: `--k8s-ca` is read and checked only under
    `tokenreview`, ignored otherwise; a missing file was refused at start
    whatever `--lifecycle-auth` said (lifespecaudit). The settings pass:
    only the busy port, looked at after them, stops this start."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run(
            "serve", "--db", db, "--port", port, "--k8s-ca", "/nonexistent/ca.pem",
            env={"TYPESAFE_API_KEY": ""},
        )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "Error: cannot_listen:" in result.output and not Path(db).exists()
    # settings that pass: the start says that results keep their search order
    assert "TYPESAFE_API_KEY is not set" in result.output


@pytest.mark.parametrize(
    "url",
    ["HTTPS://x.example/v1/rerank", "https://type_safe:8443/v1/rerank", f"https://{HOST_253}/r"],
)
def test_serve_takes_an_upper_case_scheme_and_a_container_name(db: str, url: str) -> None:
    """URL schemes are case-insensitive, and a container's name may hold an
    underscore (it was refused as no host name); a host name may be DNS's
    253 characters long. The settings pass: only the busy port, looked at
    after them, stops this start."""
    env = {"TYPESAFE_API_KEY": "k", "TYPESAFE_URL": url}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run("serve", "--db", db, "--port", port, env=env)
    assert result.exit_code == 1, result.output
    assert "Error: cannot_listen:" in result.output and not Path(db).exists()
    assert "TYPESAFE_API_KEY is not set" not in result.output


def test_serve_refuses_a_busy_port_before_opening_the_database(db: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for args in (["--port", port], ["--port", "0", "--lifecycle-port", port]):
            result = run("serve", "--db", db, *args)
            assert result.exit_code == 1, result.output
            assert f"Error: cannot_listen: 127.0.0.1:{port}:" in result.output
            assert not Path(db).exists()  # nor any admin token printed


def test_serve_refuses_more_connections_than_its_open_file_limit_allows(db: str) -> None:
    """Accepted silently, 400 idle connections to the public port took every
    descriptor (limit 300) and `/healthz` and the lifecycle listener failed."""

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1000, 1000))

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])

        def serve(connections: int) -> subprocess.CompletedProcess[str]:
            argv = [sys.executable, "-c", "from waypost.cli import main; main()", "serve",
                    "--db", db, "--port", port, "--max-connections", str(connections)]  # fmt: skip
            return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                                  preexec_fn=limit_files)  # fmt: skip

        refused = serve(1000 - 384 + 1)
        kept = serve(1000 - 384)  # passes that check: the busy port stops it next
    assert refused.returncode == 2, refused.stderr
    assert "--max-connections 617: the open-file limit of 1,000" in refused.stderr
    assert "at most 616 public connections" in refused.stderr
    assert kept.returncode == 1 and "cannot_listen" in kept.stderr, kept.stderr
    assert not Path(db).exists()


def test_serve_help_lists_every_option() -> None:
    text = run("serve", "--help").output
    for option in ("--db", "--host", "--port", "--lifecycle-host", "--lifecycle-port",
                   "--sweep-interval", "--request-read-timeout",
                   "--graphiql / --no-graphiql"):  # fmt: skip
        assert option in text


def test_serve_sweeps_every_five_minutes_by_default(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The knowledge-and-decision contract: the timeout sweep "runs inside
    serve every five minutes"; no test read the default."""
    started: list[Settings] = []
    monkeypatch.setattr("waypost.cli._run", started.append)
    result = run("serve", "--db", db, env={"TYPESAFE_API_KEY": ""})
    assert result.exit_code == 0, result.output
    assert [s.sweep_interval for s in started] == [300.0]
    assert Settings(db_path=Path(db)).sweep_interval == 300.0


def test_serve_listens_where_the_contract_says_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Section 1: `--host` 127.0.0.1, `--port` 8080, `--lifecycle-host`
    127.0.0.1, `--lifecycle-port` 8081, `--graphiql/--no-graphiql` off and
    `--db` ./waypost.db; section 14: `--search-time-limit-ms` 1,000. Every
    test names its ports and sets its own search limit, so a changed default
    port or limit, or GraphiQL switched on by default, passed them all."""
    started: list[Settings] = []
    monkeypatch.setattr("waypost.cli._run", started.append)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WAYPOST_DB", raising=False)
    result = run("serve", env={"TYPESAFE_API_KEY": ""})
    assert result.exit_code == 0, result.output
    [settings] = started
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)
    assert (settings.lifecycle_host, settings.lifecycle_port) == ("127.0.0.1", 8081)
    assert settings.graphiql is False
    assert settings.db_path == Path("./waypost.db")
    assert settings.search_time_limit_ms == 1000
    named = run("serve", "--graphiql", "--search-time-limit-ms", "250",
                env={"TYPESAFE_API_KEY": ""})  # fmt: skip
    assert named.exit_code == 0, named.output
    assert (started[-1].graphiql, started[-1].search_time_limit_ms) == (True, 250)


def test_a_bare_waypost_serves_with_the_documented_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/operations.md: "a bare `waypost` with no arguments also serves,
    with every default", and the `serve` options table's defaults no test
    read: `--request-read-timeout` 30, `--graphql-max-objects` 50000,
    `--log-format` text, access log on, `--metrics` off, `--sweep-interval`
    300, no `--max-connections` (the open-file room) (opsdocaudit)."""
    started: list[Settings] = []
    configured: list[tuple[str, bool]] = []
    monkeypatch.setattr("waypost.cli._run", started.append)
    monkeypatch.setattr("waypost.observe.logs.configure",
                        lambda fmt, access_log: configured.append((fmt, access_log)))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WAYPOST_DB", raising=False)
    result = run(env={"TYPESAFE_API_KEY": ""})
    assert result.exit_code == 0, result.output
    [settings] = started
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)
    assert (settings.lifecycle_host, settings.lifecycle_port) == ("127.0.0.1", 8081)
    # a str here (click skips `--db`'s callback when `main` invokes serve)
    # met `path.exists()` as the start opened the file: a traceback
    assert isinstance(settings.db_path, Path) and settings.db_path == Path("./waypost.db")
    assert settings.request_read_timeout == 30.0
    assert settings.graphql_max_objects == 50_000
    assert settings.sweep_interval == 300.0 and settings.max_connections is None
    assert (settings.access_log, settings.metrics, settings.graphiql) == (True, False, False)
    assert configured == [("text", True)]


@pytest.mark.parametrize(
    ("option", "most"), [("--search-time-limit-ms", 60_000), ("--graphql-max-objects", 10_000_000)]
)
def test_serve_takes_the_documented_range_of_its_limits(
    db: str, option: str, most: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/operations.md: `--search-time-limit-ms` is 1-60,000 and
    `--graphql-max-objects` 1-10,000,000; neither bound was tried
    (opsdocaudit)."""
    started: list[Settings] = []
    monkeypatch.setattr("waypost.cli._run", started.append)
    for value in (1, most):
        result = run("serve", "--db", db, option, str(value), env={"TYPESAFE_API_KEY": ""})
        assert result.exit_code == 0, result.output
    field = option.removeprefix("--").replace("-", "_")
    assert [getattr(s, field) for s in started] == [1, most]
    for value in (0, most + 1):
        refused = run("serve", "--db", db, option, str(value), env={"TYPESAFE_API_KEY": ""})
        assert refused.exit_code == 2 and option in refused.output, refused.output
    assert len(started) == 2


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "the clock file cannot be read: No such file or directory"),
     ("not an instant", "holds no valid instant"),
     ("9999-01-01T00:00:00.000Z", "outside the years 0002 to 9998"),
     ("0001-06-01T00:00:00.000Z", "outside the years 0002 to 9998")],
)  # fmt: skip
def test_serve_refuses_a_clock_file_it_cannot_read_now(
    db: str, tmp_path: Path, content: str | None, says: str
) -> None:
    """docs/operations.md: a missing or invalid `WAYPOST_CLOCK_FILE` stops
    `serve` at start with `Error: clock_unavailable:`, exit 1, nothing
    created; no test started `serve` on one (opsdocaudit)."""
    clock = tmp_path / "clock"
    if content is not None:
        clock.write_text(content)
    with socket.socket() as taken:
        # should the refusal go, the start ends on this busy port instead
        # of serving on 8080
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run("serve", "--db", db, "--port", port, "--lifecycle-port", "0",
                     env={"WAYPOST_CLOCK_FILE": str(clock), "TYPESAFE_API_KEY": ""})  # fmt: skip
    assert result.exit_code == 1, result.output
    assert f"Error: clock_unavailable: {clock}: " in result.output and says in result.output
    assert not Path(db).exists()


def test_serve_warns_of_a_blank_host(db: str) -> None:
    """Blank (an unset variable in a unit file), the private lifecycle
    listener listened on every interface with no warning."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])  # busy: the start ends after the warning
        argv = [sys.executable, "-c", "from waypost.cli import main; main()", "serve",
                "--db", db, "--port", port, "--lifecycle-host", ""]  # fmt: skip
        blank = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        argv[-1] = "127.0.0.1"
        named = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    warning = "WARNING waypost --lifecycle-host is blank: its listener listens on every interface"
    assert warning in blank.stderr, blank.stderr
    assert "is blank" not in named.stderr and "cannot_listen" in named.stderr


def test_an_empty_host_binds_every_interface_as_uvicorn_did() -> None:
    from waypost.serving import CannotListen, bind

    try:
        sockets = bind("", 0)
    except CannotListen as error:  # a machine whose :: cannot be bound
        pytest.skip(f"every interface cannot be listened on here: {error}")
    try:
        assert {s.getsockname()[0] for s in sockets} & {"0.0.0.0", "::"}
    finally:
        for sock in sockets:
            sock.close()


def test_serve_on_a_damaged_database_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Pages past the header overwritten: the file opens and migrates, and
    the first write (the admin's bootstrap) finds the damage."""
    db = tmp_path / "damaged.db"
    ok("admin", "migrate", "--db", str(db))
    ok("admin", "principal", "create", "--db", str(db), "--kind", "human", "--name", "admin")
    with db.open("r+b") as f:
        f.seek(3 * 4096)
        f.write(bytes(range(256)) * 64)  # four pages of garbage
    result = CliRunner().invoke(main, ["serve", "--db", str(db), "--port", "0",
                                       "--lifecycle-port", "0"])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "database_unusable" in result.output and "malformed" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_database_file_it_may_not_read_is_database_unusable_not_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """click's own readability check answered exit 2 and a usage message;
    docs/operations.md promises `Error: database_unusable: <file>: <reason>`,
    exit 1. (Root reads any file, so the denial is simulated where click asks.)"""
    db = tmp_path / "locked-away.db"
    ok("admin", "migrate", "--db", str(db))
    real_access = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **kw: False if str(p) == str(db) else real_access(p, mode, **kw),
    )
    result = run("admin", "token", "list", "--db", str(db))
    assert result.exit_code != 2 and "is not readable" not in result.output, result.output


@pytest.mark.parametrize(
    "command",
    [["admin", "migrate"], ["admin", "verify"], ["admin", "principal", "list"],
     ["admin", "backup", "--to", "{out}"], ["serve", "--port", "0", "--lifecycle-port", "0"]],
)  # fmt: skip
def test_a_directory_as_the_database_is_refused_in_one_line(
    tmp_path: Path, command: list[str]
) -> None:
    """docs/operations.md: a path the commands cannot use is `Error: CODE:
    PATH: reason`, exit 1, never a usage error; a directory was click's
    usage error (exit 2), and as `backup --db` SQLite's "disk I/O error"."""
    folder = tmp_path / "a-folder"
    folder.mkdir()
    args = [a.replace("{out}", str(tmp_path / "copy.db")) for a in command]
    result = run(*args, "--db", str(folder))
    assert result.exit_code == 1, result.output
    assert f": {folder}: " in result.output and "Usage:" not in result.output, result.output
    assert "disk I/O" not in result.output
    assert list(folder.iterdir()) == []  # nothing made inside it


def test_a_directory_as_the_backup_target_exists(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    ok("admin", "migrate", "--db", str(db))
    result = run("admin", "backup", "--db", str(db), "--to", str(tmp_path))
    assert result.exit_code == 1 and f"target_exists: {tmp_path} exists" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["admin", "principal", "create", "--kind", "human", "--name", "a\udcff"],
        ["admin", "token", "issue", "--principal", "p\udcff"],
        ["admin", "token", "revoke", "--token-id", "t\udcff"],
        ["admin", "token", "list", "--principal", "p\udcff"],
        ["admin", "project", "create", "--id", "demo", "--name", "n\udcff"],
        ["admin", "lifecycle", "grant", "--principal", "p", "--tenant", "t\udcff",
         "--role", "reader"],
        ["serve", "--lifecycle-webhook", "http://h/x\udcff", "--port", "0"],
    ],
)  # fmt: skip
def test_an_argument_that_is_not_utf8_is_a_usage_error(db: str, args: list[str]) -> None:
    """Bytes that are not UTF-8 reach Python as surrogate escapes (PEP 383):
    stored or sent, they failed with a UnicodeEncodeError traceback. A path
    may hold any bytes; text may not."""
    command = args if args[0] == "serve" else [*args, "--db", db]
    result = run(*command)
    assert result.exit_code == 2, result.output
    assert "is not UTF-8 text" in result.output
    assert not Path(db).exists()  # refused before the database was opened


def test_a_migration_behind_another_process_lock_is_unavailable(tmp_path: Path) -> None:
    """A file that still needs a migration, locked by another process: the
    wait ended in `database_unusable: ...: database is locked`, which reads
    as a damaged file; docs/operations.md says a write that waits out the
    lock is `Error: unavailable: ...`."""
    from tests.conftest import earlier_builds_file

    db = tmp_path / "older.db"
    earlier_builds_file(db)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = run("admin", "migrate", "--db", str(db))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: unavailable: the database is busy"), result.output
    assert ok("admin", "migrate", "--db", str(db))["applied"]  # the lock gone, it migrates


@pytest.mark.parametrize("denied", ["", "-shm"])
@pytest.mark.parametrize(
    "command",
    # (`serve` opens its file through the same `connect`; were the check gone,
    # it would start and this test would never end)
    [["admin", "principal", "create", "--kind", "human", "--name", "a"], ["admin", "migrate"]],
)  # fmt: skip
def test_a_file_this_user_may_not_write_is_refused_before_sqlite_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, denied: str, command: list[str]
) -> None:
    """SQLite opened a read-only file read-only and created its -wal and -shm
    with the file's mode: the refusal that followed outlived a mended mode,
    and named the database file, not the -shm that blocked. (Root writes any
    file, so the denial is simulated where the check asks.)"""
    db = tmp_path / "w.db"
    ok("admin", "migrate", "--db", str(db))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.db"]
    blocked = f"{db}{denied}"
    if denied:
        Path(blocked).touch()
    real_access = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **kw: False if str(p) == blocked else real_access(p, mode, **kw),
    )
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run(*command, "--db", str(db))
    assert result.exit_code == 1, result.output
    what = "its -shm file" if denied else "the file"
    assert f"database_unusable: {db}: this user may not write {what}" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created beside it


@pytest.mark.parametrize("made", [False, True])
def test_a_directory_this_user_may_not_write_in_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: bool
) -> None:
    """A directory in which the database file (new) or its -wal and -shm
    (stopped cleanly, so gone) cannot be created: SQLite said "unable to
    open database file", a new file "[Errno 1] Operation not permitted",
    neither naming the directory (diskfulljourney). (Root writes in any
    directory, so the denial is simulated where the check asks.)"""
    place = tmp_path / "ro"
    place.mkdir()
    db = place / "w.db"
    if made:
        ok("admin", "migrate", "--db", str(db))
        assert sorted(p.name for p in place.iterdir()) == ["w.db"]
    real_access = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **kw: False if str(p) == str(place) else real_access(p, mode, **kw),
    )
    before = sorted(p.name for p in place.iterdir())
    result = run("admin", "migrate", "--db", str(db))
    assert result.exit_code == 1, result.output
    assert f"database_unusable: {db}: this user may not create files in {place}" in result.output
    assert sorted(p.name for p in place.iterdir()) == before  # nothing created in it


def test_serve_behind_another_process_lock_is_unavailable(tmp_path: Path) -> None:
    """A start whose migration waited out another process's lock said
    `database_unusable: ...: database is locked`, which reads as a damaged
    file; like the admin commands, it is `unavailable`."""
    from tests.conftest import earlier_builds_file

    db = tmp_path / "older.db"
    earlier_builds_file(db)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = run("serve", "--db", str(db), "--port", "0", "--lifecycle-port", "0")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 1, result.output
    assert f"Error: unavailable: {db}: the database is busy" in result.output, result.output


def test_python_m_waypost_is_the_same_command_line(tmp_path: Path) -> None:
    """`python -m waypost` found no `__main__` ("is a package and cannot be
    directly executed"); it runs the same commands, under the same name."""
    db = str(tmp_path / "m.db")
    run = subprocess.run(
        [sys.executable, "-m", "waypost", "admin", "migrate", "--db", db],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"applied": [m.name for m in available()]}
    usage = subprocess.run(
        [sys.executable, "-m", "waypost", "--help"], capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: waypost "), usage.stdout


# a Ctrl-C at the moment `waypost.cli` is imported, as one that comes while
# the script's modules load (a quarter of a second at start)
_INTERRUPTED_IMPORT = """
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "waypost.cli":
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
from waypost.launch import main
main()
"""


def test_a_ctrl_c_while_the_modules_import_ends_quietly() -> None:
    """It printed a KeyboardInterrupt traceback through the import frames
    (triage27); it ends as a Ctrl-C does: 130, nothing said."""
    run = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT, "serve"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (run.returncode, run.stderr, run.stdout) == (130, "", "")


def test_the_waypost_script_starts_the_command_line() -> None:
    script = Path(sys.executable).parent / "waypost"
    usage = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: waypost "), usage.stdout


def test_port_0_on_every_interface_is_one_port_for_all() -> None:
    """A blank --host with --port 0 listens on 0.0.0.0 and :: (where the
    machine has IPv6): each address was given a free port of its own, and
    the second `listening on` line named a port the first address did not
    answer on (opsdocs2)."""
    from waypost.serving import bind

    sockets = bind("", 0)
    try:
        ports = {sock.getsockname()[1] for sock in sockets}
        families = {sock.family for sock in sockets}
        assert len(ports) == 1 and 0 not in ports
        if socket.has_ipv6:
            assert families == {socket.AF_INET, socket.AF_INET6}
    finally:
        for sock in sockets:
            sock.close()


# -- bounds no test pinned (mutantaudit8) --------------------------------------


def test_lifecycle_grant_takes_256_characters_and_refuses_257(db: str) -> None:
    """`--principal` and `--tenant` are 1-256 characters."""
    ok("admin", "migrate", "--db", db)
    granted = ok("admin", "lifecycle", "grant", "--db", db, "--principal", "p" * 256,
                 "--tenant", "t" * 256, "--role", "reader")  # fmt: skip
    assert granted["principal_id"] == "p" * 256 and granted["tenant"] == "t" * 256
    for principal, tenant in (("p" * 257, "t"), ("p", "t" * 257)):
        refused = run("admin", "lifecycle", "grant", "--db", db, "--principal", principal,
                      "--tenant", tenant, "--role", "reader")  # fmt: skip
        assert refused.exit_code == 2 and "1-256 characters" in refused.output


def test_serve_refuses_a_read_timeout_past_an_hour(db: str) -> None:
    result = run("serve", "--db", db, "--request-read-timeout", "3601")
    assert result.exit_code == 2 and "seconds from 0.1 to 3600" in result.output, result.output


def test_a_refusal_names_the_option_to_change(db: str) -> None:
    """The refused field is named as the command's option (`--token-id` for
    `token_id`), so the operator knows what to type differently."""
    ok("admin", "migrate", "--db", db)
    result = run("admin", "token", "revoke", "--db", db, "--token-id", "tok_nope")
    assert result.exit_code == 1
    assert "Error: not_found: --token-id: no such token" in result.output, result.output


def test_deliveries_limit_is_1_to_10000(db: str) -> None:
    ok("admin", "migrate", "--db", db)
    listed: Any = ok("admin", "lifecycle", "deliveries", "--db", db, "--limit", "10000")
    assert listed == []
    refused = run("admin", "lifecycle", "deliveries", "--db", db, "--limit", "10001")
    assert refused.exit_code == 2 and "--limit" in refused.output, refused.output


def test_deliveries_lists_at_most_100_pending_by_default(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/operations.md: `lifecycle deliveries` defaults to `--state
    pending` and `--limit 100`; the default limit was never read (no test
    makes 101 deliveries; opsdocaudit)."""
    from waypost.resolvers.lifecycle import delivery

    ok("admin", "migrate", "--db", db)
    asked: list[tuple[str | None, int]] = []

    def listed(conn: sqlite3.Connection, state: str | None, limit: int) -> list[Any]:
        asked.append((state, limit))
        return []

    monkeypatch.setattr(delivery, "list_deliveries", listed)
    assert ok_list("admin", "lifecycle", "deliveries", "--db", db) == []
    assert asked == [("pending", 100)]
