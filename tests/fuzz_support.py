"""Shared pieces of the REST fuzz tests: an edit of a valid body, and its bytes."""

from __future__ import annotations

import json
from typing import Any

# (fields to set, fields to drop, a whole other document) applied to a valid base body
Edit = tuple[dict[str, Any], list[str], Any]


def encode(base: dict[str, Any], edit: Edit) -> bytes:
    """The request body an edit makes of `base`: raw bytes and whole documents as they
    are, otherwise `base` with fields replaced and dropped."""
    changed, dropped, whole = edit
    if isinstance(whole, bytes):
        return whole
    body = whole if whole is not None else {**base, **changed}
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in dropped}
    return json.dumps(body).encode()
