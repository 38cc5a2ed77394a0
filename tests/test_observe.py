"""Operators' view: one structured line per request, X-Request-Id, JSON log
lines, and GET /metrics behind a token of audience `metrics`."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.conftest import Caller, MovableClock, Service, serving
from tests.live_support import graphql_ws, running
from waypost.observe import logs
from waypost.observe.logs import FIELDS, JsonFormatter, TextFormatter
from waypost.observe.metrics import Metrics
from waypost.resolvers.access import principals
from waypost.settings import Settings


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [getattr(r, FIELDS) for r in caplog.records if r.name == "waypost.access"]


async def test_each_request_gets_an_id_and_one_line(
    human: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="waypost.access")
    r1 = await human.post("/api/v1/projects", {"id": "demo", "name": "Secret body text"})
    r2 = await human.get("/api/v1/projects/demo")
    assert r1.status_code == 201 and r2.status_code == 200
    ids = [r1.headers["x-request-id"], r2.headers["x-request-id"]]
    assert ids[0] != ids[1] and all(i.startswith("req_") for i in ids)
    lines = access_lines(caplog)
    assert [(x["request_id"], x["method"], x["route"], x["status"]) for x in lines] == [
        (ids[0], "POST", "/api/v1/projects", 201),
        (ids[1], "GET", "/api/v1/projects/{project}", 200),
    ]
    assert all(x["principal_id"] == human.principal_id for x in lines)
    assert all(isinstance(x["duration_ms"], float) and x["duration_ms"] >= 0 for x in lines)
    text = "\n".join(JsonFormatter().format(r) for r in caplog.records)
    assert human.token not in text and "Secret body text" not in text
    assert "Bearer" not in text


async def test_graphql_lines_name_the_operation(
    human: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="waypost.access")
    await human.gql("query Dashboard { me { name } }")
    await human.gql("{ me { name } }")
    bad = "query Bad\u00e9 { me { name } }"
    await human.client.post("/graphql", json={"query": bad}, headers=human.headers())
    # a valid name of any length (it was "(invalid name)", whose space split a
    # text line's fields: obsaudit); text that is no name
    long = "N" * 120
    await human.gql(f"query {long} {{ me {{ name }} }}")
    query = {"query": "{ me { name } }", "operationName": "no name"}
    await human.client.post("/graphql", json=query, headers=human.headers())
    lines = access_lines(caplog)
    assert [(x["route"], x["operation"]) for x in lines][:2] == [
        ("/graphql", "Dashboard"),
        ("/graphql", None),
    ]
    assert lines[2]["status"] == 200  # a syntax error, still one line
    assert (lines[3]["status"], lines[3]["operation"]) == (200, "N" * 100 + "...")
    assert lines[4]["operation"] == "(invalid)"


async def test_refusals_are_logged_without_a_principal(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="waypost.access")
    r = await service.client.get("/api/v1/me", headers={"Authorization": "Bearer wp_nope"})
    assert r.status_code == 401 and r.headers["x-request-id"]
    r = await service.client.get("/no/such/route/wp_secret")
    [first, second] = access_lines(caplog)
    assert first["status"] == 401 and first["principal_id"] is None
    # refused before routing, still named by the route it would have reached
    # (it was null, and "unmatched" in the metrics, like an unknown path)
    assert first["route"] == "/api/v1/me"
    assert second["status"] == 401 and second["route"] is None
    assert "wp_secret" not in json.dumps(access_lines(caplog))


async def test_a_refused_session_is_logged_with_its_tokens_principal(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    """The token was accepted, the session it names was not: the line names
    who asked (it said `principal_id=-`, as for a refused token)."""
    agent = await service.agent("ender")
    ended = await agent.post(f"/api/v1/sessions/{agent.session_id}/end")
    assert ended.status_code == 200, ended.text
    caplog.set_level(logging.INFO, logger="waypost.access")
    caplog.clear()  # other tests may have left the logger at INFO already
    r = await agent.get("/api/v1/me")
    assert r.status_code == 403, r.text
    [line] = access_lines(caplog)
    assert line["status"] == 403 and line["principal_id"] == agent.principal_id


async def test_a_websocket_gets_one_access_line_when_it_closes(
    service: Service, human: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    """Accepted: 101, its caller, its X-Request-Id; refused before it was
    accepted (no such route): 403. The sockets wrote no line before."""
    caplog.set_level(logging.INFO, logger="waypost.access")
    async with running(service) as base:
        caplog.clear()
        async with graphql_ws(base, human.token) as client:
            request_id = client.ws.response.headers["x-request-id"]
        with pytest.raises(InvalidStatus) as refused:
            async with connect(base.replace("http://", "ws://") + "/nowhere"):
                pass
        assert refused.value.response.status_code == 403
        for _ in range(100):  # each line is written once the server has closed its side
            sockets = [x for x in access_lines(caplog) if x["status"] in (101, 403)]
            if len(sockets) == 2:
                break
            await asyncio.sleep(0.05)
    accepted, denied = sorted(sockets, key=lambda x: x["status"])
    assert accepted["request_id"] == request_id
    assert (accepted["method"], accepted["route"]) == ("GET", "/graphql")
    assert accepted["principal_id"] == human.principal_id
    assert (denied["route"], denied["principal_id"]) == (None, None)


def test_formatters_write_one_line_per_record() -> None:
    record = logging.LogRecord("waypost.access", logging.INFO, __file__, 1, "request", (), None)
    setattr(record, FIELDS, {"request_id": "req_x", "status": 200, "principal_id": None})
    data = json.loads(JsonFormatter().format(record))
    assert data["message"] == "request" and data["status"] == 200
    assert data["time"].endswith("Z") and data["level"] == "INFO"
    text = TextFormatter().format(record)
    assert "\n" not in text and "request_id=req_x status=200 principal_id=-" in text


def test_a_message_a_library_logs_whole_is_cut() -> None:
    """The MCP SDK logged a tool name of 260,000 characters whole, in one line."""
    name = "N" * 260_000
    record = logging.LogRecord(
        "mcp", logging.WARNING, __file__, 1, "Tool %r not listed", (name,), None
    )
    for line in (
        TextFormatter().format(record),
        json.loads(JsonFormatter().format(record))["message"],
    ):
        assert len(line) < 2_200 and line.endswith("(260018 characters, cut)"), line[-80:]


def test_a_line_break_or_escape_a_client_sent_cannot_forge_a_text_line() -> None:
    """The MCP SDK logs an unknown tool's name as sent: a line break in it
    started a line of the client's choosing, and ANSI escapes reached the
    operator's terminal raw."""
    name = "nope\n2026-12-01T17:00:00.000Z ERROR waypost FORGED \x1b[31mred\x1b[0m\r\u2028x"
    record = logging.LogRecord(
        "mcp", logging.WARNING, __file__, 1, "Tool '%s' not listed", (name,), None
    )
    text = TextFormatter().format(record)
    assert "\n" not in text and "\x1b" not in text and "\r" not in text and "\u2028" not in text
    assert text.endswith("Tool 'nope\\n2026-12-01T17:00:00.000Z ERROR waypost FORGED"
                         " \\x1b[31mred\\x1b[0m\\r\\u2028x' not listed")  # fmt: skip
    # a JSON line escapes them (json.dumps left DEL, C1 and U+2028 raw) and
    # its message reads back as sent
    name += "\x7f\x9b[2J"
    record = logging.LogRecord(
        "mcp", logging.WARNING, __file__, 1, "Tool '%s' not listed", (name,), None
    )
    line = JsonFormatter().format(record)
    assert line.isprintable() and "\\u009b" in line and "\\u2028" in line
    assert json.loads(line)["message"] == f"Tool '{name}' not listed"


def test_a_backslash_a_client_typed_never_reads_as_an_escape() -> None:
    """A text line wrote a backslash as it was, so a tool name holding the
    two characters `\\n` read exactly like an escaped line break."""

    def text_of(name: str) -> str:
        record = logging.LogRecord("mcp", logging.WARNING, __file__, 1, "Tool '%s'", (name,), None)
        return TextFormatter().format(record)

    typed, broken = text_of("a\\nb"), text_of("a\nb")
    assert typed != broken
    assert typed.endswith("Tool 'a\\\\nb'") and broken.endswith("Tool 'a\\nb'")
    # and an escaped line reads back as sent
    assert typed.rpartition(" ")[2].encode().decode("unicode_escape") == "'a\\nb'"


def _handle_as_configured(record: Callable[[], logging.LogRecord], *levels: int) -> None:
    """A new `record()` through the handler `logs.configure("text", level)`
    installs, once per level (the filters may change a record), the root
    logger restored after. The handler itself: other
    tests leave uvicorn's loggers configured their own way (uvicorn's own
    config stops their propagation)."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        for level in levels:
            logs.configure("text", level)
            root.handlers[0].handle(record())
            logs.settle()  # written by a thread of their own
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def test_a_websocket_handshake_line_never_holds_its_query_string(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """uvicorn's own line for a WebSocket handshake names the path with its
    query string, where a client may have put a token."""

    def record() -> logging.LogRecord:
        return logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1,
                                 '%s - "WebSocket %s" [accepted]',
                                 ("127.0.0.1:5000", "/graphql?token=wp_secret"), None)  # fmt: skip

    _handle_as_configured(record, logging.INFO)
    line = capsys.readouterr().err
    assert '"WebSocket /graphql" [accepted]' in line and "wp_secret" not in line


def test_a_websocket_frame_that_is_no_utf8_is_no_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """uvicorn logs such a frame (from any client, before any token) as an
    ERROR with a traceback, the line operators alert on."""
    try:
        b"\xff".decode()
    except UnicodeDecodeError:
        fault = sys.exc_info()
    said = "Invalid UTF-8 sequence received from client."
    _handle_as_configured(
        lambda: logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, said, (), fault),
        logging.INFO,
        logging.WARNING,
    )
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines  # and none at level WARNING
    assert " INFO uvicorn.error Invalid UTF-8 sequence received from client." in lines[0]


def test_an_error_whose_message_is_no_string_is_logged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The client-fault filter looked a record's message up in a set: an
    ERROR logged with a dict raised TypeError out of the logging call."""
    _handle_as_configured(
        lambda: logging.LogRecord("x", logging.ERROR, __file__, 1, {"a": 1}, (), None),
        logging.INFO,
    )
    assert " ERROR x {'a': 1}" in capsys.readouterr().err


async def test_a_fault_logged_while_a_request_is_served_names_its_request_id(
    human: Caller, project: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The id a client got in `X-Request-Id`, the one the operator is told to
    quote, was only on the access line written after the ERROR and its
    traceback, and with `--no-access-log` nowhere (logaudit)."""
    from waypost.resolvers.projects import operations as projects

    async def broken(*_: Any) -> Any:
        raise RuntimeError("a fault of the service")

    monkeypatch.setattr(projects, "get", broken)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logs.configure("text")
        answered = await human.get(f"/api/v1/projects/{project}")
        logging.getLogger("elsewhere").error("outside any request")
        logs.settle()  # written by a thread of their own
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    assert answered.status_code == 500
    lines = [line for line in capsys.readouterr().err.splitlines() if " ERROR " in line]
    request_id = answered.headers["x-request-id"]
    assert lines[0].endswith(f" ERROR waypost.rest unhandled error request_id={request_id}")
    assert lines[1].endswith(" ERROR elsewhere outside any request")


async def test_a_task_that_outlives_its_request_names_it_no_more() -> None:
    """A task a request started and later requests share (the live hub's
    follower) logged the first request's id for the life of the process
    (review62): it names it only while that request lasts."""
    from waypost.observe.requests import RequestIdOnRecords, RequestLine, _run_observed

    said: list[dict[str, Any] | None] = []
    go = asyncio.Event()
    logged = asyncio.Event()
    records = RequestIdOnRecords()

    def log_one() -> None:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "fault", (), None)
        records.filter(record)
        said.append(getattr(record, FIELDS, None))

    async def outliving() -> None:
        log_one()  # while its request lasts
        await go.wait()
        log_one()  # after it was answered
        logged.set()

    async def request() -> None:
        asyncio.get_running_loop().create_task(outliving())
        await asyncio.sleep(0)

    line = RequestLine(request_id="req_first", method="GET")
    await _run_observed(line, request())
    go.set()
    await asyncio.wait_for(logged.wait(), 5)
    assert said == [{"request_id": "req_first"}, None]


def test_outbound_requests_log_no_line_of_their_own() -> None:
    """A reranker attempt logs one line (waypost.reranker); httpx added a
    second, at INFO, for the request it sent."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    loggers = [logging.getLogger(n) for n in ("httpx", "httpcore")]
    levels = [logger.level for logger in loggers]
    try:
        logs.configure("text")
        assert root.isEnabledFor(logging.INFO)
        assert not any(logger.isEnabledFor(logging.INFO) for logger in loggers)
        assert all(logger.isEnabledFor(logging.WARNING) for logger in loggers)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        for logger, was in zip(loggers, levels, strict=True):
            logger.setLevel(was)


# -- metrics ---------------------------------------------------------------------------------


@pytest.fixture
async def metered(tmp_path: Path) -> AsyncIterator[Service]:
    settings = Settings(db_path=tmp_path / "m.db", sweep_interval=3600, metrics=True)
    async with serving(settings, MovableClock()) as made:
        yield made


async def metrics_token(service: Service, principal_id: str) -> str:
    at = service.clock.iso()
    issued = await service.rt.db.write(
        lambda c: principals.issue_token(c, principal_id, "metrics", at)
    )
    token: str = issued["token"]
    return token


async def test_metrics_need_a_token_of_audience_metrics(metered: Service) -> None:
    human = await metered.principal("human", "ops")
    assert (await metered.client.get("/metrics")).status_code == 401
    assert (await metered.client.get("/metrics", headers=human.headers())).status_code == 401
    token = await metrics_token(metered, human.principal_id)
    r = await metered.client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    # ...and the metrics token opens nothing else
    other = await metered.client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert other.status_code == 401


async def test_metrics_count_requests_by_route_template_and_graphql_operations(
    metered: Service,
) -> None:
    human = await metered.principal("human", "ops")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    for _ in range(3):
        assert (await human.get("/api/v1/projects/demo")).status_code == 200
    await human.gql("query Q { me { name } }")
    await human.client.post("/graphql", json={"query": "{ nope }"}, headers=human.headers())
    stale = {"Authorization": "Bearer wp_stale"}
    assert (await metered.client.get("/api/v1/projects/demo", headers=stale)).status_code == 401
    assert (await metered.client.get("/api/v1/nowhere", headers=stale)).status_code == 401
    token = await metrics_token(metered, human.principal_id)
    text = (await metered.client.get("/metrics", headers={"Authorization": f"Bearer {token}"})).text
    assert (
        'waypost_http_requests_total{method="GET",route="/api/v1/projects/{project}",'
        'status="200"} 3.0' in text
    )
    assert (
        'waypost_http_request_duration_seconds_count{method="GET",'
        'route="/api/v1/projects/{project}",status="200"} 3.0' in text
    )
    # refused before routing: counted by the route asked for; no route, "unmatched"
    assert (
        'waypost_http_requests_total{method="GET",route="/api/v1/projects/{project}",'
        'status="401"} 1.0' in text
    )
    assert 'waypost_http_requests_total{method="GET",route="unmatched",status="401"} 1.0' in text
    assert 'waypost_graphql_operations_total{outcome="ok",type="query"} 1.0' in text
    # not valid: nothing ran
    assert 'waypost_graphql_operations_total{outcome="refused",type="query"} 1.0' in text
    for name in (
        "waypost_writer_queue_depth",
        "waypost_writes_unanswered",
        "waypost_database_wal_bytes",
        "waypost_commit_batch_size",
        "waypost_commit_seconds",
        "waypost_sweep_runs",
        "waypost_reranker_calls",
        "waypost_reranker_circuit_state",
    ):
        assert f"# TYPE {name}" in text


async def test_metrics_are_off_by_default(service: Service, human: Caller) -> None:
    token = await metrics_token(service, human.principal_id)
    r = await service.client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 404
    # the route does not exist for an api token either (it got 401, as if the
    # route were there and the token of the wrong kind)
    r = await service.client.get("/metrics", headers=human.headers())
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = await service.client.get("/metrics")
    assert r.status_code == 401


# -- a real `waypost serve --log-format json` ------------------------------------------------


@pytest.mark.slow
def test_serve_writes_json_lines_and_the_first_token_outside_the_log(tmp_path: Path) -> None:
    from tests.serve_support import START, start

    clock = tmp_path / "clock"
    clock.write_text(START)
    server = start(tmp_path / "w.db", clock, 0, "--log-format", "json")
    try:
        token = server.wait_for(r"^\s+(wp_\S+)$").group(1)
        server.wait_for(r"listening on http://")
        r = httpx.get(f"{server.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200
        line = server.wait_for(r'"logger": "waypost.access"')
    finally:
        assert server.stop() == 0
    printed = [x for x in server.logged() if x.startswith(("waypost: ", "  wp_"))]
    logged = [json.loads(x) for x in server.seen if x not in printed]
    assert len(printed) == 3 and token in printed[1]  # the terminal, not the log handler
    assert logged and all({"time", "level", "logger", "message"} <= set(x) for x in logged)
    assert not any(token in json.dumps(x) for x in logged)
    access = json.loads(line.string)
    assert access["request_id"] == r.headers["x-request-id"]
    assert (access["method"], access["route"], access["status"]) == ("GET", "/api/v1/me", 200)


async def test_writer_metrics_count_group_commits(metered: Service) -> None:
    human = await metered.principal("human", "ops")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    await asyncio.gather(
        *[human.post("/api/v1/projects/demo/tasks", {"title": f"t{i}"}) for i in range(20)]
    )
    token = await metrics_token(metered, human.principal_id)
    text = (await metered.client.get("/metrics", headers={"Authorization": f"Bearer {token}"})).text
    found = dict(
        re.findall(r"^(waypost_commit_batch_size_(?:sum|count)|waypost_commit_seconds_count)"
                   r" ([0-9.e+]+)$", text, re.M)
    )  # fmt: skip
    # every unit of work went through a COMMIT: at least the 21 writes and the
    # principal and token made for this test; batches may hold several
    assert float(found["waypost_commit_batch_size_sum"]) >= 23
    assert 1 <= float(found["waypost_commit_batch_size_count"]) <= 23
    assert found["waypost_commit_seconds_count"] == found["waypost_commit_batch_size_count"]
    assert "waypost_writer_queue_depth 0.0" in text
    wal = re.search(r"^waypost_database_wal_bytes ([0-9.e+]+)$", text, re.M)
    assert (
        wal is not None
        and float(wal.group(1))
        == metered.db_path.with_name(metered.db_path.name + "-wal").stat().st_size
        > 0
    )


async def test_every_refusal_before_the_operation_is_known_is_counted(metered: Service) -> None:
    """A body that was no JSON, held a duplicate key or came as text/plain,
    and a subscribe frame with a syntax error or a duplicate key, were
    answered without moving `unknown`/`refused` (over HTTP only the request
    rules' refusals counted)."""
    from tests.live_support import graphql_ws, running

    human = await metered.principal("human", "refusals")

    def refused() -> float:
        found = metered.rt.metrics.registry.get_sample_value(
            "waypost_graphql_operations_total", {"type": "unknown", "outcome": "refused"}
        )
        return found or 0.0

    headers = {**human.headers(), "Content-Type": "application/json"}
    for body, kind in ((b"{bad", "application/json"), (b'{"query": "{ me { name } }", '
                       b'"query": "x"}', "application/json"), (b"{}", "text/plain")):  # fmt: skip
        r = await human.client.post("/graphql", content=body,
                                    headers={**headers, "Content-Type": kind})  # fmt: skip
        assert r.status_code in (400, 415), r.text
    assert refused() == 3
    # a body over the 64 KiB limit, and two Content-Type headers (not counted before)
    big = b'{"query": "{ me { name } }", "x": "' + b"a" * 70_000 + b'"}'
    r = await human.client.post("/graphql", content=big, headers=headers)
    assert r.status_code == 413, r.text
    twice = [*human.headers().items(), ("Content-Type", "application/json"),
             ("Content-Type", "application/json")]  # fmt: skip
    r = await human.client.post("/graphql", content=b"{}", headers=twice)
    assert r.status_code == 400, r.text
    assert refused() == 5
    async with running(metered) as base, graphql_ws(base, human.token) as client:
        await client.subscribe("subscription { projectEvents(")
        assert (await client.receive())["type"] == "error"
        await client.ws.send('{"id": "dup", "type": "subscribe", "payload": '
                             '{"query": "{ me { name } }", "query": "x"}}')  # fmt: skip
        assert (await client.receive())["type"] == "error"
    assert refused() == 7


async def test_early_refusals_and_closed_operations_are_counted(metered: Service) -> None:
    """docs/operations.md lists `type="subscription"` and `outcome="refused"`.
    A request refused before Strawberry's pipeline ran was never counted, nor
    an operation that ends by being closed, as a subscription's does (the
    client's `complete`, a closed socket): nothing came back past the yield."""
    from tests.live_support import graphql_ws, running

    human = await metered.principal("human", "ops")
    two = {"query": "query A { me { name } } query B { me { name } }"}
    r = await human.client.post("/graphql", json=two, headers=human.headers())
    assert r.status_code == 400

    def count(kind: str, outcome: str) -> float:
        found = metered.rt.metrics.registry.get_sample_value(
            "waypost_graphql_operations_total", {"type": kind, "outcome": outcome}
        )
        return found or 0.0

    assert count("unknown", "refused") == 1
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    events = 'subscription { projectEvents(projectId: "demo", after: 0) { sequence } }'
    async with running(metered) as base, graphql_ws(base, human.token) as client:
        op = await client.subscribe(events)
        first = json.loads(await asyncio.wait_for(client.ws.recv(), 10))
        assert first["id"] == op and first["type"] == "next", first
        await client.ws.send(json.dumps({"id": op, "type": "complete"}))
        for _ in range(100):  # the stream's end reaches the observer soon after
            if count("subscription", "ok"):
                break
            await asyncio.sleep(0.02)
    assert count("subscription", "ok") == 1


async def test_a_method_a_client_makes_up_is_counted_as_other(metered: Service) -> None:
    """The method label was whatever the client sent: the parser takes some
    35 methods, and one client without a token multiplied the page 40-fold,
    each scrape then holding the event loop 0.2-0.4 s (obsaudit)."""
    human = await metered.principal("human", "ops")
    for method in ("PROPFIND", "MKCOL", "BREW"):
        for path in ("/api/v1/projects/demo", "/api/v1/nowhere"):
            r = await metered.client.request(method, path)
            assert r.status_code == 401
    assert (await human.get("/api/v1/projects")).status_code == 200
    token = await metrics_token(metered, human.principal_id)
    text = (await metered.client.get("/metrics", headers={"Authorization": f"Bearer {token}"})).text
    methods = set(re.findall(r'^waypost_http_requests_total\{method="([^"]*)"', text, re.M))
    assert methods == {"GET", "other"}, methods
    assert (
        'waypost_http_requests_total{method="other",route="/api/v1/projects/{project}",'
        'status="401"} 3.0' in text
    )


async def test_a_batch_of_refused_writes_counts_its_units(metered: Service) -> None:
    """A batch whose units were all refused was recorded as 0 units of work
    per group commit (obsaudit)."""
    human = await metered.principal("human", "ops")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    token = await metrics_token(metered, human.principal_id)
    auth = {"Authorization": f"Bearer {token}"}

    def batch_sum(text: str) -> float:
        found = re.search(r"^waypost_commit_batch_size_sum ([0-9.e+]+)$", text, re.M)
        assert found is not None
        return float(found.group(1))

    before = batch_sum((await metered.client.get("/metrics", headers=auth)).text)
    for _ in range(3):
        r = await human.patch(
            "/api/v1/projects/demo/policy", {"expected_revision": 77, "rules": "x"}
        )
        assert r.status_code == 409
    after = batch_sum((await metered.client.get("/metrics", headers=auth)).text)
    assert after - before == 3


def test_warnings_any_client_can_make_are_one_per_window(caplog: pytest.LogCaptureFixture) -> None:
    """uvicorn's WARNING for each request its parser cannot read came once per
    request: anyone could write them at will (960 from one sweep of made-up
    methods, obsaudit). One line per window says how many there were."""
    from waypost.observe.conditions import flush_all
    from waypost.observe.logs import ClientMadeWarningsHeldBack

    caplog.set_level(logging.WARNING)
    held_back = ClientMadeWarningsHeldBack()
    parser = logging.getLogger("uvicorn.error")
    unreadable = "Invalid HTTP request received."
    records = [
        parser.makeRecord("uvicorn.error", logging.WARNING, __file__, 1, unreadable, (), None)
        for _ in range(50)
    ]
    assert [held_back.filter(r) for r in records] == [False] * 50
    other = parser.makeRecord("uvicorn.error", logging.WARNING, __file__, 1, "Other.", (), None)
    assert held_back.filter(other)  # any other line goes through as it was
    # an upgrade to anything but a WebSocket (h2c): its own line (review33)
    upgrade = "Unsupported upgrade request."
    asked = [
        parser.makeRecord("uvicorn.error", logging.WARNING, __file__, 1, upgrade, (), None)
        for _ in range(5)
    ]
    assert not any(held_back.filter(r) for r in asked)
    flush_all()
    said = [r.getMessage() for r in caplog.records if r.name == "waypost.http"]
    # the first of each at once, then the last of those held back, with their number
    assert len(said) == 4, said
    assert "could not read" in said[0] and "upgrade other than" in said[1]
    assert any("could not read" in s and "and 48 more like it" in s for s in said[2:]), said
    assert any("upgrade other than" in s and "and 3 more like it" in s for s in said[2:]), said


def test_foreign_origin_handshakes_are_one_line_per_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Strawberry logs a WARNING, with the Origin as sent, for each WebSocket
    handshake whose Origin is not its Host: 50 tokenless handshakes with a
    6 KB Origin wrote 50 lines of 2 KB (proxyaudit)."""
    from waypost.observe.conditions import flush_all
    from waypost.observe.logs import ClientMadeWarningsHeldBack

    caplog.set_level(logging.WARNING)
    held_back = ClientMadeWarningsHeldBack()
    ws = logging.getLogger("strawberry.http.async_base_view")
    template = (
        "Rejected WebSocket connection from origin %r to host %r. If pages "
        "on this origin should be able to connect, add it to `allowed_origins`."
    )
    origin = "https://" + "a" * 6000 + ".example"
    records = [
        ws.makeRecord(ws.name, logging.WARNING, __file__, 1, template, (origin, "h:8080"), None)
        for _ in range(50)
    ]
    assert not any(held_back.filter(r) for r in records)
    flush_all()
    said = [r.getMessage() for r in caplog.records if r.name == "waypost.http"]
    assert len(said) == 2, said
    assert all("Origin is not its Host" in s and "'h:8080'" in s for s in said), said
    assert all(len(s) < 400 and "(6018 characters)" in s for s in said), said
    assert "and 48 more like it" in said[1]


def sample(service: Service, name: str, **labels: str) -> float:
    found = service.rt.metrics.registry.get_sample_value(name, labels)
    return found or 0.0


async def test_the_lifecycle_listener_is_counted_and_logged_apart(
    metered: Service, caplog: pytest.LogCaptureFixture
) -> None:
    """The lifecycle listener's requests were counted nowhere and logged
    nowhere, and its answers had no X-Request-Id (metricsaudit): a flood of
    401s there was invisible. Its own families and logger, so that the public
    ones keep meaning the public API."""
    from tests.lifecycle.support import Lifecycle
    from waypost.lifecycle_http import create_lifecycle_app
    from waypost.lifecycle_http.verifiers import WaypostTokenVerifier

    caplog.set_level(logging.INFO, logger="waypost")
    app = create_lifecycle_app(metered.rt, WaypostTokenVerifier(metered.rt))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://l.test") as client:
        member = await Lifecycle(metered, client).member("author")
        mine = {"Authorization": f"Bearer {member.token}"}
        for _ in range(2):
            r = await client.get("/v1/decisions/nope", headers=mine)
            assert r.status_code == 403 and r.headers["x-request-id"].startswith("req_")
        assert (await client.get("/v1/decisions/nope")).status_code == 401
        assert (await client.get("/nowhere", headers=mine)).status_code == 404
    lifecycle = "waypost_lifecycle_http_requests_total"
    by_id = {"method": "GET", "route": "/v1/decisions/{id}"}
    assert sample(metered, lifecycle, **by_id, status="403") == 2
    assert sample(metered, lifecycle, **by_id, status="401") == 1
    assert sample(metered, lifecycle, method="GET", route="unmatched", status="404") == 1
    timed = "waypost_lifecycle_http_request_duration_seconds_count"
    assert sample(metered, timed, **by_id, status="403") == 2
    assert sample(metered, "waypost_http_requests_total", **by_id, status="403") == 0
    lines = [getattr(r, FIELDS) for r in caplog.records if r.name == "waypost.lifecycle.access"]
    assert [(x["route"], x["status"]) for x in lines] == [
        ("/v1/decisions/{id}", 403), ("/v1/decisions/{id}", 403),
        ("/v1/decisions/{id}", 401), (None, 404),
    ]  # fmt: skip
    callers = [x["principal_id"] for x in lines]
    assert callers == [member.id, member.id, None, member.id]
    assert not [r for r in caplog.records if r.name == "waypost.access"]


async def test_an_event_stream_is_counted_but_not_timed(metered: Service) -> None:
    """An SSE stream held for an hour added an hour to the latency
    histogram's sum and landed in `+Inf` (metricsaudit): how long a stream
    stays open is no request's latency, as a WebSocket's is not."""
    human = await metered.principal("human", "ops")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})
    labels = {"method": "GET", "route": "/api/v1/projects/{project}/events/stream"}
    async with running(metered) as base, httpx.AsyncClient(base_url=base) as client:
        path = "/api/v1/projects/demo/events/stream"
        async with client.stream("GET", path, headers=human.headers()) as r:
            assert r.status_code == 200
            await asyncio.sleep(0.3)
        for _ in range(100):  # counted once the server saw the client go
            if sample(metered, "waypost_http_requests_total", **labels, status="200"):
                break
            await asyncio.sleep(0.05)
        assert sample(metered, "waypost_http_requests_total", **labels, status="200") == 1
        timed = "waypost_http_request_duration_seconds_count"
        assert sample(metered, timed, **labels, status="200") == 0
        # no series of zeros either
        page = metered.rt.metrics.render().decode()
        assert (
            'duration_seconds_count{method="GET",route="/api/v1/projects/{project}/events'
            not in page
        )
        # an ordinary GET is still timed
        assert (
            await client.get("/api/v1/projects/demo", headers=human.headers())
        ).status_code == 200
    project = {"method": "GET", "route": "/api/v1/projects/{project}", "status": "200"}
    assert sample(metered, timed, **project) == 1


def test_the_method_label_is_one_of_the_seven_or_other() -> None:
    """docs/operations.md, waypost_http_requests_total: "`method` is `GET`,
    `HEAD`, `POST`, `PUT`, `PATCH`, `DELETE`, `OPTIONS` or `other`"
    (mutantaudit10: dropping one of the seven went unseen)."""
    metrics = Metrics()
    seven = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
    for method in (*seven, "PROPFIND", "get"):
        metrics.observe_request(method, "/api/v1/projects", 200, 0.01)
    for method, count in [*((m, 1.0) for m in seven), ("other", 2.0)]:
        labels = {"method": method, "route": "/api/v1/projects", "status": "200"}
        assert metrics.registry.get_sample_value("waypost_http_requests_total", labels) == count


def test_a_request_answered_in_no_measurable_time_is_still_timed() -> None:
    """Only an event stream (seconds None) goes untimed: 0.0 is a latency."""
    metrics = Metrics()
    metrics.observe_request("GET", "/api/v1/projects", 200, 0.0)
    labels = {"method": "GET", "route": "/api/v1/projects", "status": "200"}
    timed = "waypost_http_request_duration_seconds_count"
    assert metrics.registry.get_sample_value(timed, labels) == 1.0


def test_every_c1_control_and_both_unicode_separators_are_escaped() -> None:
    """docs/operations.md, Logs: text lines write "C1 controls, `\\u2028`"
    escaped and JSON lines "DEL, C1 and the separators too" (a NEL, U+0085,
    or U+2029 ends a line for a line-oriented reader; 0x9B is an 8-bit CSI).
    The forging test sent only `\\x1b`, `\\r`, `\\n`, U+2028 (and, to JSON,
    DEL and 0x9B): dropping the rest of C1 or U+2029 from either table went
    unseen (metricsaudit)."""
    sent = "".join(chr(c) for c in range(0x7F, 0xA0)) + "\u2028\u2029"
    record = logging.LogRecord(
        "mcp", logging.WARNING, __file__, 1, "Tool '%s' not listed", (sent,), None
    )
    text = TextFormatter().format(record)
    assert text.isprintable() and len(text.splitlines()) == 1, ascii(text)
    assert "\\x85" in text and "\\x9b" in text and "\\u2029" in text
    line = JsonFormatter().format(record)
    assert line.isprintable() and len(line.splitlines()) == 1, ascii(line)
    assert all(f"\\u{c:04x}" in line for c in [*range(0x7F, 0xA0), 0x2028, 0x2029])
    assert json.loads(line)["message"] == f"Tool '{sent}' not listed"


async def test_an_operation_that_ran_with_errors_is_counted_as_errors(metered: Service) -> None:
    """docs/operations.md, waypost_graphql_operations_total: `errors` is an
    operation that ran with errors, and "a variable whose value does not fit
    its type counts as `errors`" (graphql-core checks variables as execution
    begins). Counting them `ok` went unseen by every test (metricsaudit)."""
    human = await metered.principal("human", "ops")
    await human.post("/api/v1/projects", {"id": "demo", "name": "Demo"})

    def count(outcome: str) -> float:
        return sample(metered, "waypost_graphql_operations_total", type="query", outcome=outcome)

    query = "query Q($id: String!) { project(id: $id) { name } }"
    answer = await human.gql(query, {"id": 5})
    assert answer["data"] is None and answer["errors"], answer
    assert (count("errors"), count("ok"), count("refused")) == (1, 0, 0)
    assert (await human.gql(query, {"id": "demo"}))["data"]["project"]["name"] == "Demo"
    assert (count("errors"), count("ok"), count("refused")) == (1, 1, 0)


async def test_the_page_holds_no_created_series(metered: Service) -> None:
    """Each counter and histogram would carry a `_created` series beside it
    (prometheus-client's default), doubling the page for nothing the
    documented table names; observe/metrics.py turns them off (metricsaudit:
    dropping that call went unseen)."""
    human = await metered.principal("human", "ops")
    assert (await human.get("/api/v1/projects")).status_code == 200
    token = await metrics_token(metered, human.principal_id)
    text = (await metered.client.get("/metrics", headers={"Authorization": f"Bearer {token}"})).text
    assert "waypost_http_requests_total{" in text
    assert not re.findall(r"^\w+_created\b", text, re.M)
