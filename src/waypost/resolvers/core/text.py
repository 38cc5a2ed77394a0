"""Text a record must hold: a title, a question, a summary is not blank."""

from __future__ import annotations

from waypost.errors import InvalidRequest


def require_text(value: str, field: str) -> None:
    """Refuse `value` when it is empty or only whitespace, naming `field`
    (the models bound lengths; `"   "` passes any minimum length)."""
    if not value.strip():
        raise InvalidRequest.field(field, f"{field} must not be blank")
