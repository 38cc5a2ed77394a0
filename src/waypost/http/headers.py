"""Reading a request's headers straight from its ASGI scope (authentication and the
REST shim run before, or without, a Starlette `Request`)."""

from __future__ import annotations

from starlette.types import Scope

from waypost.errors import InvalidRequest


def header(scope: Scope, name: bytes, spelled: str | None = None) -> str | None:
    """The value of header `name` (lower-case bytes, as ASGI gives them).

    Every header read this way takes one value (a token, a session, a key,
    a media type, a length): sent twice it is ambiguous, and taking the
    first would, for example, store a receipt under one idempotency key
    while a proxy that merged the two sent another. So it is refused as
    `400 invalid_request` naming the header, as the lifecycle listener does.

    Spaces and tabs around the value are not part of it (RFC 9110, 5.5).
    h11 drops them; httptools, which `serve` uses, hands them over.
    A refusal names the header as `spelled`, else in title case.
    """
    found: str | None = None
    for key, value in scope["headers"]:
        if key == name:
            if found is not None:
                title = spelled or name.decode("latin-1").title()
                raise InvalidRequest.field(title, f"send one {title} header, not several")
            found = str(value.decode("latin-1")).strip(" \t")
    return found


def content_coding_refusal(scope: Scope) -> str | None:
    """What to say of a body sent with a content coding (`Content-Encoding`
    other than `identity`), or None. No coding is decoded here, so the body
    was taken as it came: a JSON body labelled gzip was stored, a real gzip
    body refused as "not valid UTF-8". RFC 9110 (15.5.16) says 415."""
    for key, value in scope["headers"]:
        if key == b"content-encoding":
            codings = [c.strip(b" \t").lower() for c in value.split(b",")]
            if any(c not in (b"", b"identity") for c in codings):
                return "send the body without a content coding (no Content-Encoding)"
    return None


def bearer_token(authorization: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>` (the scheme in any case),
    or None when the value holds none.

    Only spaces and tabs around the token are trimmed (RFC 6750 puts spaces
    after the scheme; RFC 9110 trims spaces and tabs around a value).
    `str.strip()` also took NBSP, NEL and U+2003 for space, so a token with
    one of them attached was accepted; now it is no token of ours (401)."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip(" \t")
    if scheme.lower() != "bearer" or not token:
        return None
    return token
