"""The one decoder of lifecycle bodies: bytes to the closed model, or a 400.

Order matters only for which refusal a body with several faults gets:
strict JSON (duplicate keys, non-finite numbers, truncation), NUL in text,
nesting depth, approval pins and seals by name, the typed model (unknown
fields at any depth, wrong types, booleans as versions), then the memo's
own rules.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from waypost import json_text
from waypost.decoding import convert, parse_json, refuse_nul
from waypost.resolvers.lifecycle import checks
from waypost.resolvers.lifecycle.model import Memo

T = TypeVar("T")


def decode(raw: bytes, model: type[T]) -> tuple[T, Any]:
    """(the body as `model`, the parsed JSON value, for the fingerprint)."""
    value = parse_json(raw)
    # as the public API refuses it (docs/api.md): no text a person writes
    # needs it, and a client, tool or PostgreSQL `text` that met it in a memo,
    # an event or a webhook delivery could not hold it (documents travel as
    # base64, so their bytes are not text here)
    refuse_nul(value)
    checks.check_depth(value)
    checks.check_refused_names(value)
    body = convert(value, model)
    memo = getattr(body, "memo", None)
    if isinstance(memo, Memo):
        checks.check_memo(memo, msgspec.to_builtins(memo))
    return body, value


def canonical(value: Any) -> str:
    """Canonical JSON: keys sorted, no insignificant whitespace, UTF-8 (no \\u escapes)."""
    return json_text.canonical(value)


def memo_json(memo: Memo) -> str:
    """The memo's canonical JSON text, with every default filled in."""
    return canonical(msgspec.to_builtins(memo))
