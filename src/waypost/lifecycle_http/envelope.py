"""The lifecycle listener's one error shape: `{"error": "code"}`, nothing more.

Codes are a closed set (see docs/lifecycle.md). A domain refusal names its
code in `details.reason`; a reason outside the set falls back to the status's
general code, so no free text, path or exception message can reach a client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from starlette.responses import Response

from waypost.errors import WaypostError
from waypost.http.responses import SECURITY_HEADERS, error_headers

log = logging.getLogger("waypost.lifecycle")

GENERAL = {
    400: "invalid_request",
    401: "unauthenticated",
    403: "policy_denied",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    503: "unavailable",
}
SPECIFIC = {
    400: {
        "invalid_id",
        "invalid_cursor",
        "invalid_idempotency_key",
        "invalid_reviewer",
        "approval_not_accepted",
        "question_check_failed",
        "secret_marker_detected",
        "duplicate_id",
        "document_digest_mismatch",
        "document_duplicate",
        "document_orphan",
        "document_missing",
        "document_media_type_mismatch",
        "length_required",
        "truncated_body",
    },
    409: {
        "version_conflict",
        "memo_exists",
        "media_type_conflict",
        "idempotency_key_reused",
        "idempotency_in_flight",
        "review_request_limit",
    },
}
CODES = frozenset(GENERAL.values()) | SPECIFIC[400] | SPECIFIC[409] | {"internal"}


def json_bytes(
    text: str | bytes, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        text, status, headers={**SECURITY_HEADERS, **(headers or {})}, media_type="application/json"
    )


def status_and_code(error: WaypostError) -> tuple[int, str]:
    # the private listener's status table has no 422: its commands raise a
    # reused key as a conflict (commands.IdempotencyKeyConflict), and a
    # status outside the table is a bug, answered `internal`
    status = error.status
    if status not in GENERAL:
        return 500, "internal"
    reason = error.details.get("reason")
    if reason is None and status == 409:
        reason = error.code
    if isinstance(reason, str) and reason in SPECIFIC.get(status, set()):
        return status, reason
    return status, GENERAL[status]


def error_response(error: WaypostError) -> Response:
    status, code = status_and_code(error)
    # status_and_code keeps 401 and 503 as they are: the same headers as
    # the public listener's
    return json_bytes(json.dumps({"error": code}), status, error_headers(error))


def status_response(status: int, headers: Mapping[str, str] | None = None) -> Response:
    """A routing refusal (404, 405 with its `Allow` header) in the envelope."""
    body = json.dumps({"error": GENERAL.get(status, "internal")})
    return json_bytes(body, status, dict(headers or {}))


def internal_error(exc: BaseException) -> Response:
    # Raw exception text never reaches a client; it goes to the log only.
    log.error("unhandled lifecycle error", exc_info=exc)
    return json_bytes(json.dumps({"error": "internal"}), 500)
