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


def environment_refusal(verify: ssl.SSLContext | None = None) -> str | None:
    """Why the environment's proxy and certificate variables cannot be used
    by a client made as the caller makes it (`verify`: its own SSL context,
    with which httpx reads no certificate variable, as TokenReview's); None
    when they can. The variables that are set are named, never their values,
    nor httpx's words about them (they quote a proxy's user and host)."""
    reason = _unreadable_directory() if verify is None else None
    if reason is None:
        reason = _client_refusal(verify)
    if reason is None:
        return None
    named = [v for v in VARIABLES if os.environ.get(v) or os.environ.get(v.lower())]
    return f"the proxy and certificate variables set ({', '.join(named)}) cannot be used: {reason}"


def _unreadable_directory() -> str | None:
    """httpx hands `SSL_CERT_DIR` (when no `SSL_CERT_FILE` is set) to OpenSSL,
    which reads it only at the first TLS handshake: a directory that is not
    there failed every call then, not at start."""
    directory = os.environ.get("SSL_CERT_DIR")
    if os.environ.get("SSL_CERT_FILE") or not directory:
        return None
    if os.path.isdir(directory) and os.access(directory, os.R_OK | os.X_OK):
        return None
    return "the certificate directory is not a directory that can be read"


def _client_refusal(verify: ssl.SSLContext | None) -> str | None:
    """Why httpx cannot make a client with the environment; None if it can."""
    try:
        httpx.Client(verify=True if verify is None else verify).close()
    except ImportError:
        reason = "a SOCKS proxy needs the socksio package, which is not installed"
    except (ValueError, httpx.InvalidURL):
        reason = "a proxy must be an http:// or https:// URL with a host"
    except ssl.SSLError:
        reason = "the certificate file holds no certificate"
    except OSError as exc:
        reason = f"the certificate file cannot be read ({exc.strerror})"
    else:
        return None
    return reason
