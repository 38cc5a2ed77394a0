"""What an outbound call's transport failure was, in words an operator can
act on: the exception's name, and for a TLS handshake what went wrong.

A receiver (or identity service) whose certificate the service does not
trust failed as a bare `ConnectError`, the same words as one that is down,
so an operator could not tell "add its CA" from "start it" (deliveryjourney).
Never the URL, a header or the peer's host name: the URL may carry a
password, and the log and `last_error` say only what kind of failure it was.
"""

from __future__ import annotations

import ssl


def failure_kind(exc: BaseException) -> str:
    """`ConnectError`, `ReadTimeout`, ...; with `(TLS: ...)` when a TLS
    handshake failed beneath it (httpx chains the `ssl` error as a cause)."""
    name = type(exc).__name__
    seen: set[int] = set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"{name} (TLS: the peer's certificate is not trusted)"
        if isinstance(cause, ssl.SSLError):
            return f"{name} (TLS handshake failed)"
        cause = cause.__cause__ or cause.__context__
    return name
