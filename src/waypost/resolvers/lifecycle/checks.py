"""The rules on a memo beyond its types: the one-question check, the secret
markers, unique and resolvable ids.

Each refusal carries `details.reason`, the bounded code the lifecycle listener
answers with (`{"error": reason}`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from waypost.errors import InvalidRequest
from waypost.resolvers.core.secret_markers import has_secret
from waypost.resolvers.lifecycle.model import DIGEST_PATTERN, ID_PATTERN, Memo

ID = re.compile(ID_PATTERN)
DIGEST = re.compile(DIGEST_PATTERN)


def refuse(reason: str, message: str, field: str = "") -> InvalidRequest:
    return InvalidRequest(message, {"reason": reason, "field": field})


def check_id(value: str, field: str = "id") -> str:
    if not ID.fullmatch(value):
        raise refuse("invalid_id", "ids are 1-256 of A-Z a-z 0-9 . _ : -", field)
    return value


def check_digest(value: str, field: str = "digest") -> str:
    if not DIGEST.fullmatch(value):
        raise refuse("invalid_request", "a digest is sha256: and 64 lowercase hex digits", field)
    return value


def check_question(question: str) -> None:
    """One question: 1-500 characters, exactly one `?`, the last non-space character."""
    stripped = question.rstrip()
    if not (1 <= len(question) <= 500 and question.count("?") == 1 and stripped.endswith("?")):
        raise refuse(
            "question_check_failed",
            "the question must be 1-500 characters with exactly one ?, at its end",
            "memo.question",
        )


def strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value, keys included (iterative: no recursion limit)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def check_no_secrets(texts: Iterable[str], field: str) -> None:
    if any(has_secret(t) for t in texts):
        raise refuse("secret_marker_detected", "a secret marker was found", field)


def _unique(ids: list[str], field: str) -> None:
    if len(set(ids)) != len(ids):
        raise refuse("duplicate_id", f"{field} ids must be unique", field)


def check_memo(memo: Memo, builtins: Any) -> None:
    """Cross-field rules of the closed model (types were checked by the decoder)."""
    check_question(memo.question)
    _unique([o.id for o in memo.options], "memo.options")
    _unique([p.id for p in memo.packet], "memo.packet")
    _unique([h.id for h in memo.highlights], "memo.highlights")
    # one digest, one document: two entries may cite the same bytes (the
    # model asks only their ids to differ), but not as two media types
    media_types: dict[str, str] = {}
    for i, entry in enumerate(memo.packet):
        if media_types.setdefault(entry.digest, entry.media_type) != entry.media_type:
            raise refuse(
                "invalid_request",
                "entries citing one digest name one media type",
                f"memo.packet[{i}].media_type",
            )
    if memo.recommendation is not None and memo.recommendation.option_id not in {
        o.id for o in memo.options
    }:
        raise refuse(
            "invalid_request",
            "recommendation.option_id must name an option",
            "memo.recommendation.option_id",
        )
    packet_ids = {p.id for p in memo.packet}
    for i, highlight in enumerate(memo.highlights):
        if highlight.packet_id not in packet_ids:
            raise refuse(
                "invalid_request",
                "a highlight must name a packet entry",
                f"memo.highlights[{i}].packet_id",
            )
    check_no_secrets(strings(builtins), "memo")


REFUSED_NAMES = ("approval", "approval_pin", "seal")


def check_refused_names(value: Any) -> None:
    """Approval pins and seals cannot be submitted, at any depth of the memo."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if any(name in item for name in REFUSED_NAMES):
                raise refuse(
                    "approval_not_accepted", "approvals, approval pins and seals are refused"
                )
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


MAX_DEPTH = 16


def check_depth(value: Any) -> None:
    """Excessive nesting is refused before the model sees it."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise refuse("invalid_request", "the body nests too deeply")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
