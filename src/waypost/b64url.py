"""Unpadded URL-safe base64, the alphabet of cursors and global ids (section 2).

Decoding is strict: Python's decoder skips characters outside the alphabet
and ignores the unused bits of the last one, so a cursor with `$$$$` inserted
(or its last character changed) read as the untouched cursor; section 2 makes
a malformed cursor a 400. Only text an encoder writes is accepted.
"""

from __future__ import annotations

import base64


def encode_b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_b64url(text: str, padded: bool = False) -> bytes:
    """The bytes `text` encodes, unpadded as `encode_b64url` writes it (or
    also padded as an encoder pads, with `padded`: global ids, once served
    padded); else ValueError. A cursor is never served padded, and one with
    `=` appended read as the cursor itself (docs/api.md: malformed)."""
    unpadded = text.rstrip("=")
    raw = base64.urlsafe_b64decode(unpadded + "=" * (-len(unpadded) % 4))
    written = base64.urlsafe_b64encode(raw).decode()
    if text != written.rstrip("=") and not (padded and text == written):
        raise ValueError("not base64url as an encoder writes it")
    return raw
