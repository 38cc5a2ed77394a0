"""The proxy and certificate variables httpx reads from the environment,
checked before a client that honours them is made.

`serve`'s lifecycle webhook and TokenReview clients and `waypost mcp` honour
them (docs/operations.md, "Environment"). A value httpx cannot use raised
from inside the client's constructor, a traceback at start: a SOCKS proxy
(httpx needs the `socksio` package, which Waypost does not install, even
when `NO_PROXY` covers every host called), a proxy of another scheme
(`ftp://`), or an `SSL_CERT_FILE` that is missing or holds no certificate.
"""

from __future__ import annotations

import os
import ssl

import httpx

VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR")


def environment_refusal() -> str | None:
    """Why the environment's proxy and certificate variables cannot be used
    (the variables that are set named, never their values: a proxy URL may
    hold a password); None when a client can be made with them."""
    try:
        httpx.Client().close()
    except (ImportError, OSError, ssl.SSLError, ValueError, httpx.InvalidURL) as exc:
        named = [v for v in VARIABLES if os.environ.get(v) or os.environ.get(v.lower())]
        reason = "a SOCKS proxy needs the socksio package" if isinstance(exc, ImportError) else exc
        return (
            f"the proxy and certificate variables set ({', '.join(named)}) cannot be used: {reason}"
        )
    return None
