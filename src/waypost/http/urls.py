"""Outbound URLs given on the command line (the lifecycle webhook, the
Kubernetes API): refused when `serve` starts if no request could ever reach
them, since each would otherwise fail every attempt for ever."""

from __future__ import annotations

import re

import httpx

# A host a connection can be made to: a name or IPv4 address (IDNA-encoded
# by httpx: ASCII), or an IPv6 literal (httpx has checked the brackets'
# contents). httpx takes `http://x y/` and escapes the host to `x%20y`.
_HOST = re.compile(rb"[A-Za-z0-9._-]+|[0-9A-Fa-f:.]+")


def endpoint_url_refusal(url: str, schemes: tuple[str, ...], *, bearer: bool = False) -> str | None:
    """Why `url` cannot be an endpoint of one of `schemes`; None if fine.
    `bearer`: the calls carry a bearer token of their own, which a user name
    or password in the URL would replace (httpx sends them as `Basic`)."""
    wanted = " or ".join(f"{scheme}://" for scheme in schemes)
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        if "@" in url:
            # a password's unescaped `/`, `?` or `#` ends the authority there
            # and httpx takes the password's first part for a port, which its
            # message quotes: named, never quoted (deliveryjourney)
            return (
                "is not a URL (a user name or password in it must percent-encode"
                " any `/`, `?`, `#` or `@` it holds)"
            )
        return f"is not a URL ({exc})"
    if parsed.scheme not in schemes or not parsed.raw_host:
        return f"must be an {wanted} URL with a host"
    try:
        # httpx decodes an `xn--` label only when the host is read, at every
        # request: one that is not valid punycode (`xn--zz`) raised there, an
        # ERROR with a traceback at every attempt (a 500 for TokenReview)
        host = parsed.host
    except UnicodeError as exc:  # idna's errors are UnicodeErrors
        return f"names no host a connection can be made to (not valid IDNA: {exc})"
    if _HOST.fullmatch(parsed.raw_host) is None:
        return f"names no host a connection can be made to ({host!r})"
    if parsed.port is not None and not 0 < parsed.port < 65536:
        return "has a port outside 1-65535"
    if bearer and parsed.userinfo:
        # every call went out as `Basic user:password`, the token dropped: the
        # valid token was blamed ("refused the token"), and the password
        # quoted on standard error and in each tool's answer (stdiocohabit).
        # Named, never quoted: the URL itself holds the password.
        return "holds a user name or password, which would be sent in place of the token"
    return None
