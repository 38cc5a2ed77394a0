"""A newer build's migration applied under a running service (storage/upgrades.py).

An older `serve` went on reading and writing a file that a newer build's
`admin migrate` had migrated under it, past rules and columns it does not
know. Now its writer finds the migration at its next batch: every read and
write answers 503, and /healthz says why, until it is started again with the
newer build (which the older build refuses to start on)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import kpath, new_body
from waypost.errors import Unavailable
from waypost.mcp_server.advice import explain
from waypost.mcp_server.calls import ApiError
from waypost.storage.connection import STORAGE_RETRY_AFTER
from waypost.storage.files import files_changed_refusal
from waypost.storage.upgrades import upgraded_refusal

NEWER = "9999_from_a_newer_build.sql"


def _from_another_process(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for statement in statements:
            conn.execute(statement)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _records(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM knowledge").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE newer_rules (rule TEXT)",
        # a backfill: the schema's version stays as it was (upgradeaudit4)
        "UPDATE knowledge SET title = title || ' (backfilled)'",
    ],
    ids=["schema", "rows only"],
)
async def test_a_newer_builds_migration_stops_reads_and_writes(
    service: Service, human: Caller, project: str, caplog: pytest.LogCaptureFixture, change: str
) -> None:
    assert (await human.post(kpath(project), new_body())).status_code == 201
    _from_another_process(
        service.db_path,
        "INSERT INTO schema_migrations (name, checksum, applied_at)"
        f" VALUES ('{NEWER}', '{'0' * 64}', '2026-12-05T00:00:00Z')",
        change,
    )
    with caplog.at_level(logging.ERROR, logger="waypost.storage"):
        for _ in range(2):
            refused = await human.post(kpath(project), new_body(title="after the upgrade"))
            assert refused.status_code == 503, refused.text
            error = refused.json()["error"]
            assert error["code"] == "unavailable"
            assert error["details"] == {"reason": "database_upgraded"}
            assert "migrated by another Waypost build" in error["message"]
            assert refused.headers["retry-after"] == str(STORAGE_RETRY_AFTER)
        read = await human.get(kpath(project))
        assert read.status_code == 503, read.text
        health = await service.client.get("/healthz")
    assert health.status_code == 503
    assert health.json() == {"status": "unavailable", "reason": "database_upgraded"}
    assert _records(service.db_path) == 1  # the refused batch wrote nothing
    said = [r.getMessage() for r in caplog.records if NEWER in r.getMessage()]
    assert len(said) == 1 and "newer Waypost" in said[0], said


async def test_a_schema_change_that_is_no_migration_changes_nothing(
    service: Service, human: Caller, project: str
) -> None:
    """An index made by hand, or ANALYZE, moves the schema's version too."""
    assert (await human.post(kpath(project), new_body())).status_code == 201
    _from_another_process(service.db_path, "CREATE INDEX by_hand ON knowledge (title)", "ANALYZE")
    for title in ("one", "two"):
        assert (await human.post(kpath(project), new_body(title=title))).status_code == 201
    assert (await human.get(kpath(project))).status_code == 200
    assert (await service.client.get("/healthz")).json() == {"status": "ok"}
    assert _records(service.db_path) == 3


@pytest.mark.parametrize(
    "refusal", [upgraded_refusal, files_changed_refusal], ids=["upgraded", "files changed"]
)
def test_an_agent_is_told_to_ask_for_an_operator_not_to_retry(
    refusal: Callable[[], Unavailable],
) -> None:
    """MCP's advice for `unavailable` alone said "retry in a few seconds",
    against the message and its Retry-After of 30 (upgradeaudit4)."""
    said = explain(ApiError.of(refusal()))
    assert "tell your user" in said and "retry in a few seconds" not in said
    assert "busy or unreachable" in explain(ApiError.of(Unavailable("the database is busy")))
