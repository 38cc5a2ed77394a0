"""What a backend call answers: the route's JSON, or the REST error it refused with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from waypost.errors import WaypostError


class ApiError(Exception):
    """A refused call: the REST error envelope's code, message and details."""

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any],
        status: int,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.status = status
        self.retry_after = retry_after  # seconds, REST's `Retry-After` when it sent one

    @classmethod
    def of(cls, error: WaypostError) -> ApiError:
        return cls(
            error.code,
            error.message,
            dict(error.details),
            error.status,
            getattr(error, "retry_after", None),
        )


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    replayed: bool = False
