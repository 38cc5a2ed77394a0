"""The writer looks for the key's receipt again before it runs a mutation
(resolvers/core/receipts.py `_run`; docs/architecture.md, "The path of one
write"): a receipt committed after a retry's point read found none, and
before the retry's unit reached the writer, is replayed, never run a second
time. That happens when the first attempt's unit ran on in the writer after
its caller was cancelled (an MCP `notifications/cancelled`, a stop) and so
freed the key's in-flight slot. Docs/api.md, Idempotency, and service
contract section 10: "nothing runs again and no event is written"; the
first attempt's answer, not a 500 from the receipt's primary key."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from tests.conftest import Caller, Service
from tests.rechecks_support import Meanwhiles
from tests.test_receipts import count
from waypost.resolvers.core import store
from waypost.resolvers.core.receipts import Idempotency

TASKS = "/api/v1/projects/demo/tasks"
GQL_CREATE = """
mutation ($i: TaskCreateInput!) {
  taskCreate(input: $i) { task { title } userErrors { code } replayed }
}
"""


@pytest.fixture
def meanwhile(service: Service, monkeypatch: pytest.MonkeyPatch) -> Meanwhiles:
    return Meanwhiles(service, monkeypatch)


def first_attempt_commits(
    service: Service, caller: Caller, key: str, idem: Idempotency, answer: dict[str, Any]
) -> Any:
    """The first attempt's commit, as its unit ran on for no caller."""

    async def commit() -> None:
        def unit(conn: sqlite3.Connection) -> None:
            store.insert_receipt(
                conn, (caller.principal_id, key), idem.fingerprint, (201, answer),
                "2026-11-29T18:00:00.000Z",
            )  # fmt: skip

        await service.rt.db.write(unit)

    return commit


async def test_a_rest_retry_whose_first_attempt_committed_meanwhile_replays_it(
    service: Service, human: Caller, project: str, meanwhile: Meanwhiles
) -> None:
    body = {"title": "Only once"}
    stored = {"id": "task_first_attempt", "title": "Only once"}
    idem = Idempotency.for_request("retry-1", operation=f"POST {TASKS}", body=body)
    tasks, events = (
        count(service, "SELECT count(*) FROM tasks"),
        count(service, "SELECT count(*) FROM events"),
    )
    meanwhile.before_next_write(first_attempt_commits(service, human, "retry-1", idem, stored))
    answer = await human.post(TASKS, body, key="retry-1")
    assert meanwhile.ran
    assert answer.status_code == 201, answer.text
    assert answer.headers["idempotent-replayed"] == "true"
    assert answer.json() == stored
    assert count(service, "SELECT count(*) FROM tasks") == tasks
    assert count(service, "SELECT count(*) FROM events") == events


async def test_a_rest_retry_with_another_body_is_refused_by_the_writers_look_too(
    service: Service, human: Caller, project: str, meanwhile: Meanwhiles
) -> None:
    idem = Idempotency.for_request("retry-2", operation=f"POST {TASKS}", body={"title": "A"})
    tasks = count(service, "SELECT count(*) FROM tasks")
    meanwhile.before_next_write(
        first_attempt_commits(service, human, "retry-2", idem, {"id": "task_a", "title": "A"})
    )
    answer = await human.post(TASKS, {"title": "B"}, key="retry-2")
    assert meanwhile.ran
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "idempotency_key_reused"
    assert count(service, "SELECT count(*) FROM tasks") == tasks


async def test_a_graphql_retry_whose_first_attempt_committed_meanwhile_replays_it(
    service: Service, human: Caller, project: str, meanwhile: Meanwhiles
) -> None:
    first = await human.gql(
        GQL_CREATE, {"i": {"idempotencyKey": "g-probe", "projectId": "demo", "title": "G"}}
    )
    assert first["data"]["taskCreate"]["replayed"] is False
    conn = sqlite3.connect(service.db_path)
    fingerprint, stored = conn.execute(
        "SELECT fingerprint, body FROM receipts WHERE principal_id = ? AND key = ?",
        (human.principal_id, "g-probe"),
    ).fetchone()
    conn.close()
    idem = Idempotency("g-retry", fingerprint)
    tasks = count(service, "SELECT count(*) FROM tasks")
    meanwhile.before_next_write(
        first_attempt_commits(service, human, "g-retry", idem, json.loads(stored))
    )
    retry = await human.gql(
        GQL_CREATE, {"i": {"idempotencyKey": "g-retry", "projectId": "demo", "title": "G"}}
    )
    assert meanwhile.ran
    assert retry["data"]["taskCreate"] == {
        "task": {"title": "G"}, "userErrors": [], "replayed": True
    }  # fmt: skip
    assert count(service, "SELECT count(*) FROM tasks") == tasks
