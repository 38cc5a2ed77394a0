"""Signed search cursors: bound to caller, tenant and query, five minutes long.

The key is made when the lifecycle app is composed and lives only in that
process's memory, so a restart invalidates every cursor. A cursor that was
altered, belongs to another caller, tenant or query, or has expired is
`400 invalid_cursor`.

The cursor carries a digest of its binding, not the binding: a tenant name
of 256 characters and a query of 200, each non-ASCII character escaped in
the JSON, made a cursor of over 4,000 characters, past what the search
route takes back (its next page was out of reach), and the cursor showed
the caller's id and tenant to whoever held it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from datetime import datetime, timedelta
from typing import Any

from waypost.b64url import decode_b64url, encode_b64url
from waypost.resolvers.lifecycle import checks

LIFETIME = timedelta(minutes=5)
# longer than any cursor this module signs (a few hundred characters), so
# altered: refused before it is decoded
LONGEST = 4_000


def invalid() -> Exception:
    return checks.refuse("invalid_cursor", "the cursor is not valid here or has expired", "cursor")


class CursorSigner:
    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def _bound_to(self, binding: dict[str, str]) -> str:
        """A fixed-size digest of the binding (keyed: it tells nothing of it)."""
        text = json.dumps(binding, separators=(",", ":"), sort_keys=True).encode()
        return encode_b64url(self._mac(b"binding:" + text)[:16])

    def sign(self, binding: dict[str, str], position: list[str], now: datetime) -> str:
        expires = int((now + LIFETIME).timestamp() * 1000)
        payload = json.dumps(
            {"b": self._bound_to(binding), "p": position, "x": expires},
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
        return f"{encode_b64url(payload)}.{encode_b64url(self._mac(payload))}"

    def open(self, cursor: str, binding: dict[str, str], now: datetime) -> list[str]:
        """The position a cursor holds, if it is ours, for this binding, and live."""
        if len(cursor) > LONGEST:
            raise invalid()
        body, dot, mac = cursor.partition(".")
        try:
            payload, signature = decode_b64url(body), decode_b64url(mac)
        except (ValueError, UnicodeError):
            raise invalid() from None
        if not dot or not hmac.compare_digest(self._mac(payload), signature):
            raise invalid()
        data: Any = json.loads(payload)
        if data["b"] != self._bound_to(binding) or data["x"] <= int(now.timestamp() * 1000):
            raise invalid()
        position: list[str] = data["p"]
        return position
