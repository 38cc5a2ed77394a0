"""Document custody: the bytes behind a memo's packet.

A supplied digest proves nothing: the SHA-256 of the decoded bytes must equal
it and name a packet entry with the same media type. Documents are kept per
memo, so a digest stored under another memo grants nothing. A revision may
keep a digest that the current revision's packet holds; any other digest must
come with its bytes. A stored digest keeps its media type for good (409).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import sqlite3
from dataclasses import dataclass

from waypost.errors import PayloadTooLarge, StateConflict
from waypost.resolvers.core.secret_markers import has_secret
from waypost.resolvers.lifecycle import checks, store
from waypost.resolvers.lifecycle.model import Document, Memo

MAX_DOCUMENT_BYTES = 192 * 1024
MAX_DOCUMENTS = 100


@dataclass(frozen=True)
class Content:
    digest: str
    media_type: str
    data: bytes


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _refuse(reason: str, message: str, index: int | None = None) -> Exception:
    field = "documents" if index is None else f"documents[{index}]"
    return checks.refuse(reason, message, field)


# Media types that are text whatever a stray byte says: `text/*`, JSON, XML
# and YAML, with their structured-syntax suffixes (`application/ld+json`,
# `image/svg+xml`).
_TEXTUAL = re.compile(r"^(text/.+|[a-z]+/([\w.-]+\+)?(json|xml|yaml)|application/x-yaml)$")


def _scanned_text(data: bytes, media_type: str) -> str | None:
    """The text the secret scan reads: UTF-8 content, and a textual document
    whatever its bytes (one stray byte past a password made a text file pass
    unread: its invalid bytes read as U+FFFD here); None for other binaries."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if _TEXTUAL.match(media_type.split(";", 1)[0].strip().lower()):
            return data.decode("utf-8", errors="replace")
        return None


def check_documents(memo: Memo, documents: list[Document]) -> list[Content]:
    """Decode and verify supplied documents against the memo's packet (no store needed)."""
    if len(documents) > MAX_DOCUMENTS:
        raise _refuse("invalid_request", f"at most {MAX_DOCUMENTS} documents")
    packet = {entry.digest: entry for entry in memo.packet}
    seen: set[str] = set()
    result: list[Content] = []
    for i, doc in enumerate(documents):
        if doc.digest in seen:
            raise _refuse("document_duplicate", "a document appears twice", i)
        seen.add(doc.digest)
        # 4 base64 characters carry 3 bytes: refuse before decoding an oversized one
        if len(doc.content_base64) > (MAX_DOCUMENT_BYTES + 2) // 3 * 4:
            raise PayloadTooLarge("a document is limited to 192 KiB", {"field": f"documents[{i}]"})
        try:
            data = base64.b64decode(doc.content_base64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _refuse("invalid_request", "content_base64 is not base64", i) from exc
        if len(data) > MAX_DOCUMENT_BYTES:
            raise PayloadTooLarge("a document is limited to 192 KiB", {"field": f"documents[{i}]"})
        if digest_of(data) != doc.digest:
            raise _refuse("document_digest_mismatch", "the bytes do not have this digest", i)
        entry = packet.get(doc.digest)
        if entry is None:
            raise _refuse("document_orphan", "no packet entry names this document", i)
        if entry.media_type != doc.media_type:
            raise _refuse("document_media_type_mismatch", "media type differs from the packet", i)
        text = _scanned_text(data, doc.media_type)
        if text is not None and has_secret(text):
            raise checks.refuse(
                "secret_marker_detected", "a secret marker was found", f"documents[{i}]"
            )
        result.append(Content(doc.digest, doc.media_type, data))
    return result


def store_documents(
    conn: sqlite3.Connection,
    tenant: str,
    memo_id: str,
    memo: Memo,
    supplied: list[Content],
    retained: set[str],
    at: str,
) -> list[str]:
    """Store what the packet needs, inside the command's transaction.

    `retained` is the current revision's packet (empty on registration).
    Returns the digests newly stored.
    """
    given = {c.digest: c for c in supplied}
    for i, entry in enumerate(memo.packet):
        if entry.digest not in given and entry.digest not in retained:
            raise checks.refuse(
                "document_missing",
                "the packet names a digest without its bytes",
                f"memo.packet[{i}].digest",
            )
    stored: list[str] = []
    for entry in memo.packet:
        existing = store.document(conn, tenant, memo_id, entry.digest)
        if existing is not None:
            if existing["media_type"] != entry.media_type:
                raise StateConflict(
                    "a stored digest keeps its media type",
                    {"reason": "media_type_conflict", "field": "memo.packet"},
                )
            continue
        content = given.get(entry.digest)
        if content is None:  # retained, yet not stored: only a damaged store gets here
            raise checks.refuse("document_missing", "the packet names a digest without its bytes")
        store.insert_document(
            conn, tenant, memo_id, content.digest, content.media_type, content.data, at
        )
        stored.append(content.digest)
    return stored
