"""A knowledge record's source link may not carry a login or a token.

The knowledge contract ("the service stores no credentials ... in these
records or events"); revisions are kept for good and travel to context
packets, events and, when shared, to every project.
"""

from __future__ import annotations

import pytest

from tests.conftest import Caller, Service
from tests.knowledge_support import correction, create, error_of, kpath, new_body, raw

LINKS_WITH_CREDENTIALS = [
    "https://ci:hunter2@git.example.org/team/repo/-/jobs/42",
    "https://x-access-token:ghs_" + "a" * 36 + "@github.com/o/r",
    "https://github.com/o/r?token=" + "b" * 12,
    "https://:hunter2@git.example.org/team/repo/-/jobs/42",  # a password, no user name
]


def stored_counts(service: Service) -> tuple[int, int, int]:
    with raw(service.db_path) as conn:
        return tuple(
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("knowledge_revisions", "events", "receipts")
        )  # type: ignore[return-value]


@pytest.mark.parametrize("uri", LINKS_WITH_CREDENTIALS)
async def test_a_new_record_linking_with_credentials_is_refused_and_nothing_is_kept(
    service: Service, human: Caller, project: str, uri: str
) -> None:
    before = stored_counts(service)
    r = await human.post(kpath(project), new_body(provenance={"source_uri": uri}))
    assert error_of(r) == (400, "invalid_request", "provenance.source_uri")
    assert uri not in r.text  # the refusal names the kind, never the secret
    assert stored_counts(service) == before


async def test_a_correction_cannot_add_a_password_to_the_link(human: Caller, project: str) -> None:
    record = await create(human, project, provenance={"source_uri": "https://ci.example.org/42"})
    body = correction(record)
    body["provenance"]["source_uri"] = LINKS_WITH_CREDENTIALS[0]
    r = await human.patch(kpath(project, record["id"]), body)
    assert error_of(r) == (400, "invalid_request", "provenance.source_uri")
    now = await human.get(kpath(project, record["id"]))
    assert now.json()["revision"] == 1


async def test_links_without_a_secret_are_kept_as_written(human: Caller, project: str) -> None:
    for uri in ["https://reader@example.org/x", "https://example.org:8443/a@b", "docs/ci.md#flaky"]:
        record = await create(human, project, provenance={"source_uri": uri})
        assert record["provenance"]["source_uri"] == uri


@pytest.mark.parametrize(
    "uri", [" ", "\u200b", "a\x01b", "\u2028", "\u202ehttps://example.org/x",
            "https://example.org/a b", "https://example.org/x\u00a0", "https://example.org/\ufeff",
            "https://example.org/x\n"],
)  # fmt: skip
async def test_a_link_with_a_space_control_or_format_character_is_refused(
    service: Service, human: Caller, project: str, uri: str
) -> None:
    before = stored_counts(service)
    r = await human.post(kpath(project), new_body(provenance={"source_uri": uri}))
    assert error_of(r) == (400, "invalid_request", "provenance.source_uri")
    assert "percent-encode" in r.json()["error"]["message"]
    assert stored_counts(service) == before


async def test_a_link_of_letters_beyond_ascii_is_kept(human: Caller, project: str) -> None:
    uri = "https://例え.jp/ページ?q=café%20au%20lait#ß"
    record = await create(human, project, provenance={"source_uri": uri})
    assert record["provenance"]["source_uri"] == uri
