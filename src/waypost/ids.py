"""Opaque server-made identifiers and secrets."""

from __future__ import annotations

import hashlib
import re
import secrets

# \Z, not $: in Python `$` also matches before a final newline.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
PROJECT_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}\Z")


def new_id(prefix: str) -> str:
    """A random id such as `task_3fQ9...`; 1-64 of A-Za-z0-9_- as the contract demands."""
    return f"{prefix}_{secrets.token_urlsafe(12)}"


def new_token() -> str:
    return "wp_" + secrets.token_urlsafe(32)


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()
