"""The exception tree. Each class knows its wire code and HTTP status.

WaypostError
├── InvalidRequest            400 invalid_request
├── Unauthenticated           401 unauthenticated
├── Forbidden                 403 forbidden
│   └── CallerSessionNotLive  (details.reason session_not_live)
├── NotFound                  404 not_found
├── MethodNotAllowed          405 method_not_allowed (with `Allow`)
├── Conflict                  409 (one subclass per code)
│   ├── RevisionConflict, GenerationConflict, IdempotencyInFlight,
│   └── DecisionRequired, PublicationInProgress, LeaseConflict, StateConflict
├── PayloadTooLarge           413 payload_too_large
├── UnsupportedMediaType      415 unsupported_media_type
├── IdempotencyKeyReused      422 idempotency_key_reused
└── Unavailable               503 unavailable (Retry-After)

Three leaves live beside the only code that raises them: live/hub.py's
TooManyStreams (429 too_many_streams) and SlowConsumer (409 slow_consumer),
and the lifecycle commands' IdempotencyKeyConflict (409; the private
listener's status table has no 422).
"""

from __future__ import annotations

from typing import Any, ClassVar

from waypost.ids import global_id_parts


class WaypostError(Exception):
    code: ClassVar[str] = "internal"
    status: ClassVar[int] = 500

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    def to_json(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class InvalidRequest(WaypostError):
    code = "invalid_request"
    status = 400

    @classmethod
    def field(cls, field: str, message: str) -> InvalidRequest:
        return cls(message, {"field": field})

    @classmethod
    def unknown(cls, field: str, message: str, given: str, type_name: str) -> InvalidRequest:
        """`field` names a `type_name` record that is not there (`message`),
        with what to give instead when `given` is a GraphQL global id."""
        return cls(message + global_id_hint(given, type_name), {"field": field})


class Unauthenticated(WaypostError):
    code = "unauthenticated"
    status = 401


class Forbidden(WaypostError):
    code = "forbidden"
    status = 403

    @classmethod
    def reason(cls, reason: str, message: str) -> Forbidden:
        return cls(message, {"reason": reason})


class CallerSessionNotLive(Forbidden):
    """The session the caller acts in (its `Waypost-Session`) is not live:
    a refusal of the caller, not of what it asked (GraphQL answers it 403
    at the top level, where a heartbeat of a session not its own is a
    userError)."""

    def __init__(self) -> None:
        # the way out in words: an agent restarted with its old header was
        # refused even its new session's creation, with nothing to say why
        super().__init__(
            "the session named by the Waypost-Session header is not live (ended, expired"
            " or another principal's): send the request without that header, or with a"
            " live session's id (a new session is started without it)",
            {"reason": "session_not_live"},
        )


class NotFound(WaypostError):
    code = "not_found"
    status = 404

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        given = details or {}
        hints = (global_id_hint(v, _ID_TYPES.get(k)) for k, v in given.items() if k.endswith("_id"))
        # an id named in a path is echoed, but not one of 10 KB: no record's
        # id is longer than 64 characters, nor its GraphQL global id than 128
        echoed = {k: _clipped(v) for k, v in details.items()} if details else details
        super().__init__(message + next((h for h in hints if h), ""), echoed)


_ECHO_MOST = 128


def _clipped(value: object) -> object:
    if isinstance(value, str) and len(value) > _ECHO_MOST:
        return value[:_ECHO_MOST] + "..."
    return value


# The record type a detail names (`decision_id`: a decision's REST id)
_ID_TYPES = {"project_id": "Project", "task_id": "Task", "decision_id": "Decision",
             "knowledge_id": "Knowledge"}  # fmt: skip


def global_id_hint(value: object, expected: str | None) -> str:
    """What to give instead, when an id looked up is a GraphQL global id: a
    dashboard that passed a record's `id` where its `restId` is taken was
    told only that there is no such record. "" for anything else."""
    parts = global_id_parts(value) if isinstance(value, str) else None
    if parts is None:
        return ""
    type_name, rest_id = parts
    if expected is not None and type_name != expected:
        return f' (that is the global id of {type_name} "{rest_id}", not a REST id)'
    return f' (that is the global id of {type_name} "{rest_id}": give its REST id, `restId`)'


class MethodNotAllowed(WaypostError):
    """A known path asked with a method it does not take; the answer's
    `Allow` header names those it does."""

    code = "method_not_allowed"
    status = 405


class Conflict(WaypostError):
    status = 409


class RevisionConflict(Conflict):
    code = "revision_conflict"

    @classmethod
    def behind(cls, what: str, expected: int, current: int) -> RevisionConflict:
        """`what` is at `current`, not at the `expected` revision the caller
        read: said with the way on, which re-sending blindly is not."""
        moved = (
            f"changed since revision {expected}"
            if expected < current
            else f"was never at revision {expected}"  # ahead of it: a number made up
        )
        return cls(
            f"the {what} {moved}: it is at revision {current}; read it again, and send"
            f" your change against revision {current} if it still applies",
            {"expected_revision": expected, "current_revision": current},
        )


class GenerationConflict(Conflict):
    code = "generation_conflict"

    @classmethod
    def behind(cls, expected: int, current: int) -> GenerationConflict:
        moved = (
            f"has moved from generation {expected} to {current}"
            if expected < current
            else f"is at generation {current}, not {expected}"
        )
        return cls(
            f"the decision {moved}: read it again, and send your answer or reopen against"
            f" generation {current} if it still applies",
            {"expected_generation": expected, "current_generation": current},
        )


class IdempotencyInFlight(Conflict):
    code = "idempotency_in_flight"


class DecisionRequired(Conflict):
    code = "decision_required"


class PublicationInProgress(Conflict):
    code = "publication_in_progress"


class LeaseConflict(Conflict):
    code = "lease_conflict"


class StateConflict(Conflict):
    code = "state_conflict"


class PayloadTooLarge(WaypostError):
    code = "payload_too_large"
    status = 413


class UnsupportedMediaType(WaypostError):
    code = "unsupported_media_type"
    status = 415


class IdempotencyKeyReused(WaypostError):
    code = "idempotency_key_reused"
    status = 422


class Unavailable(WaypostError):
    code = "unavailable"
    status = 503

    def __init__(
        self, message: str, details: dict[str, Any] | None = None, retry_after: int = 1
    ) -> None:
        super().__init__(message, details)
        self.retry_after = retry_after
