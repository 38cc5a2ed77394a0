"""Schemathesis over GET /api/v1/openapi.json against a real `waypost serve`:
a bounded number of generated requests per operation; every answer has a
documented status in the documented shape, and none is a 5xx."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import load_all_checks
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.serve_support import Server, serve
from waypost import rest
from waypost.rest import openapi

# one module-scoped server whose log the last test reads: under `pytest -n 2`
# the whole file runs on one worker (`--dist loadfile`, Makefile)
pytestmark = pytest.mark.slow
# generated requests per operation: 40 operations, about 30 s in all
EXAMPLES = 6
load_all_checks()
CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    with serve(tmp_path_factory.mktemp("schemathesis")) as server:
        token = server.admin_token
        # a project to act on, so that project routes also reach their handlers
        r = httpx.post(
            f"{server.url}/api/v1/projects",
            json={"id": "demo", "name": "Demo"},
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "setup"},
        )
        assert r.status_code == 201, r.text
        yield server, token


# The document as the server builds it (the test below also checks it is the
# one the server serves), one pytest case per operation.
SCHEMA = schemathesis.openapi.from_dict(openapi.build(rest.TABLES))
OPERATIONS = {op.label: op for op in (r.ok() for r in SCHEMA.get_all_operations())}


def test_the_served_document_is_the_one_tested(served: tuple[Server, str]) -> None:
    server, token = served
    r = httpx.get(f"{server.url}/api/v1/openapi.json", headers={"Authorization": f"Bearer {token}"})
    assert r.json() == openapi.build(rest.TABLES)


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_every_operation_answers_as_documented(label: str, served: tuple[Server, str]) -> None:
    server, token = served
    auth = {"Authorization": f"Bearer {token}"}

    @given(case=OPERATIONS[label].as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        case.call_and_validate(base_url=server.url, headers=auth, checks=CHECKS, timeout=10)

    check()


def test_the_log_holds_no_error(served: tuple[Server, str]) -> None:
    server, _ = served
    # stopped first, so that every line it wrote has been read: read while it
    # ran, the last request's line could still be on its way to the reader
    assert server.stop() == 0
    logged = server.logged()
    assert not [x for x in logged if " ERROR " in x or "Traceback" in x]
    statuses = [int(m) for x in logged for m in re.findall(r" status=(\d+) ", x)]
    # the requests really went out: several per operation, none a 5xx
    assert len(statuses) >= 2 * len(OPERATIONS), len(statuses)
    assert max(statuses) < 500
    print(f"{len(statuses)} requests, statuses {sorted(set(statuses))}")
