"""Document custody rules (lifecycle-http-contract.md, "Memo commands and packet custody")."""

from __future__ import annotations

import base64

import pytest

from tests.lifecycle.support import (
    TABLES,
    Lifecycle,
    Member,
    digest,
    document,
    memo,
    packet_entry,
    with_docs,
)
from tests.lifecycle.test_requests import refused

M = "/v1/decisions/adr.payments-retry"


async def test_documents_are_stored_and_served_with_their_media_type(author: Member) -> None:
    notes = b"# notes\n"
    m, docs = with_docs(memo(), notes, b"second")
    assert (await author.register(m, docs)).status_code == 200
    r = await author.get(f"{M}/documents/{digest(notes)}")
    assert r.status_code == 200 and r.content == notes
    assert r.headers["content-type"] == "text/markdown"  # as stored, no charset added
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_an_html_document_is_served_as_a_sandboxed_download(author: Member) -> None:
    """Served as its media type and nothing more, an author's text/html
    document ran its scripts on the listener's origin in a browser."""
    page = b"<script>alert(1)</script>"
    m = memo(packet=[packet_entry("p0", page, "text/html")])
    assert (await author.register(m, [document(page, "text/html")])).status_code == 200
    r = await author.get(f"{M}/documents/{digest(page)}")
    assert r.status_code == 200 and r.content == page
    assert r.headers["content-type"] == "text/html"
    assert r.headers["content-disposition"] == "attachment"
    assert r.headers["content-security-policy"] == "sandbox; default-src 'none'"


async def test_a_digest_that_does_not_match_the_bytes_is_400(author: Member) -> None:
    m, _ = with_docs(memo(), b"real")
    forged = {**document(b"other"), "digest": digest(b"real")}
    refused(await author.register(m, [forged]), 400, "document_digest_mismatch")


async def test_a_document_no_packet_entry_names_is_an_orphan(author: Member) -> None:
    m, docs = with_docs(memo(), b"real")
    refused(await author.register(m, [*docs, document(b"stray")]), 400, "document_orphan")


async def test_the_same_document_twice_is_400(author: Member) -> None:
    m, docs = with_docs(memo(), b"real")
    refused(await author.register(m, docs * 2), 400, "document_duplicate")


async def test_registration_must_bring_all_packet_content(author: Member) -> None:
    m, _ = with_docs(memo(), b"real")
    refused(await author.register(m, []), 400, "document_missing")


async def test_media_type_must_match_its_packet_entry(author: Member) -> None:
    m, _ = with_docs(memo(), b"real")
    refused(
        await author.register(m, [document(b"real", "text/plain")]),
        400,
        "document_media_type_mismatch",
    )


async def test_content_must_be_strict_base64(author: Member) -> None:
    m, docs = with_docs(memo(), b"real")
    bad = {**docs[0], "content_base64": "cmVhbA=\n="}
    refused(await author.register(m, [bad]), 400, "invalid_request")


async def test_documents_need_exactly_their_three_fields(author: Member) -> None:
    m, docs = with_docs(memo(), b"real")
    refused(await author.register(m, [{**docs[0], "name": "x"}]), 400, "invalid_request")
    partial = {k: v for k, v in docs[0].items() if k != "media_type"}
    refused(await author.register(m, [partial]), 400, "invalid_request")


async def test_at_most_100_documents(author: Member) -> None:
    blobs = [str(i).encode() for i in range(101)]
    m = memo(packet=[packet_entry(f"p{i}", b) for i, b in enumerate(blobs)])
    refused(await author.register(m, [document(b) for b in blobs]), 400, "invalid_request")
    # and 100 are taken (lifecycle-http-contract.md: "At most 100 documents")
    m = memo(packet=[packet_entry(f"p{i}", b) for i, b in enumerate(blobs[:100])])
    r = await author.register(m, [document(b) for b in blobs[:100]])
    assert r.status_code == 200, r.text


async def test_a_document_over_192_kib_is_413(author: Member) -> None:
    # within the body limit as declared length only once base64 is counted: the
    # per-document limit is checked on the encoded size before decoding
    data = b"a" * (192 * 1024 + 1)
    m = memo(packet=[packet_entry("p", data)])
    r = await author.register(m, [document(data)])
    refused(r, 413, "payload_too_large")


async def test_secret_markers_in_utf8_documents_are_400(author: Member) -> None:
    m, docs = with_docs(memo(), b"config: password=hunter2hunter2\n")
    refused(await author.register(m, docs), 400, "secret_marker_detected")


@pytest.mark.parametrize(
    "media_type", ["text/plain", "application/json", "application/ld+json", "image/svg+xml"]
)
async def test_a_text_document_with_a_stray_byte_is_scanned_all_the_same(
    author: Member, media_type: str
) -> None:
    """One byte that is not UTF-8 made the whole document pass unscanned."""
    data = b"db password=hunter2hunter2\n\xff"
    m = memo(packet=[packet_entry("p", data, media_type)])
    refused(await author.register(m, [document(data, media_type)]), 400, "secret_marker_detected")


async def test_binary_documents_are_not_scanned_as_text(author: Member) -> None:
    data = b"\xff\xfepassword=hunter2hunter2"
    m = memo(packet=[packet_entry("p", data, "application/octet-stream")])
    r = await author.register(m, [document(data, "application/octet-stream")])
    assert r.status_code == 200


async def test_a_revision_keeps_current_packet_content_without_bytes(author: Member) -> None:
    m, docs = with_docs(memo(), b"kept")
    await author.register(m, docs)
    r = await author.revise({**m, "version": 2, "title": "v2"}, expected=1)
    assert r.status_code == 200, r.text
    got = await author.get(f"{M}/documents/{digest(b'kept')}", version=2)
    assert got.content == b"kept"


async def test_a_revision_must_bring_bytes_for_a_new_digest(author: Member) -> None:
    m, docs = with_docs(memo(), b"kept")
    await author.register(m, docs)
    m2, _ = with_docs(memo(version=2), b"kept", b"new")
    refused(await author.revise(m2, expected=1), 400, "document_missing")
    m2, docs2 = with_docs(memo(version=2), b"kept", b"new")
    assert (await author.revise(m2, expected=1, docs=docs2[1:])).status_code == 200


async def test_a_dropped_digest_is_not_current_and_needs_bytes_again(author: Member) -> None:
    m, docs = with_docs(memo(), b"old")
    await author.register(m, docs)
    await author.revise({**memo(version=2), "packet": []}, expected=1)
    back, again = with_docs(memo(version=3), b"old")
    refused(await author.revise(back, expected=2), 400, "document_missing")
    assert (await author.revise(back, expected=2, docs=again)).status_code == 200


async def test_a_digest_stored_under_another_memo_grants_nothing(author: Member) -> None:
    m, docs = with_docs(memo("first"), b"shared")
    await author.register(m, docs)
    other, _ = with_docs(memo("second"), b"shared")
    refused(await author.register(other, []), 400, "document_missing")
    r = await author.get(f"/v1/decisions/second/documents/{digest(b'shared')}")
    refused(r, 403, "policy_denied")


async def test_the_media_type_of_a_stored_digest_cannot_be_replaced(
    author: Member, lifecycle: Lifecycle
) -> None:
    m, docs = with_docs(memo(), b"kept")
    await author.register(m, docs)
    counts = [await lifecycle.count(t) for t in TABLES]
    m2 = memo(version=2, packet=[packet_entry("p0", b"kept", "text/plain")])
    r = await author.revise(m2, expected=1, docs=[document(b"kept", "text/plain")])
    refused(r, 409, "media_type_conflict")
    refused(await author.revise(m2, expected=1), 409, "media_type_conflict")
    assert [await lifecycle.count(t) for t in TABLES] == counts


async def test_a_document_outside_the_version_packet_is_404(author: Member) -> None:
    m, docs = with_docs(memo(), b"v1 only")
    await author.register(m, docs)
    await author.revise({**memo(version=2), "packet": []}, expected=1)
    path = f"{M}/documents/{digest(b'v1 only')}"
    assert (await author.get(path, version=1)).status_code == 200
    refused(await author.get(path), 404, "not_found")
    refused(await author.get(f"{M}/documents/sha256:{'0' * 64}"), 404, "not_found")
    refused(await author.get(f"{M}/documents/md5:abc"), 400, "invalid_request")


async def test_base64_of_the_wrong_bytes_never_stores(author: Member, lifecycle: Lifecycle) -> None:
    m, _ = with_docs(memo(), b"truth")
    lie = {
        "digest": digest(b"truth"),
        "media_type": "text/markdown",
        "content_base64": base64.b64encode(b"lie").decode(),
    }
    await author.register(m, [lie])
    assert await lifecycle.count("lifecycle_documents") == 0
