"""The provider call: TypeSafe's wire format (service contract section 9).

`POST {url}` with the bearer key and `{"query", "documents": [{"id", "text"}]}`;
success is `200` with `{"scores": [{"id", "score"}]}`, exactly one score from
0 through 3 for each document. Anything else raises `ProviderFailure` with
the reason the context response reports. The response body is read in
chunks as sent (no content coding asked for, none decoded) and abandoned as
soon as it passes the size limit, so a huge or endless answer costs at most
that much memory.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import re
import ssl
from pathlib import Path
from typing import Any

import certifi
import httpx

from waypost.reranker.reasons import Reason
from waypost.settings import RerankSettings, SettingError

MAX_RESPONSE_BYTES = 256 * 1024
CONNECT_TIMEOUT = 1.0
TOTAL_TIMEOUT = 3.0
MAX_SCORE = 3


class ProviderFailure(Exception):
    """The provider call failed; `reason` is one of the section 9 reasons."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason: Reason = reason


def is_https(url: str) -> bool:
    return url[:8].lower() == "https://"


# letters, digits and inner hyphens, as DNS has them, and underscores too: a
# resolver takes them, and Docker and Compose name containers with them
_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*\.?\Z")


def _usable_host(host: str) -> bool:
    """A DNS name (in its ASCII form: IDNs arrive as punycode) or an IP address."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return len(host) <= 253 and _HOST_NAME.match(host) is not None
    return True


def check_settings(settings: RerankSettings) -> None:
    """`SettingError` for a provider setting no request could be sent with:
    `serve` refuses it at start instead of failing every context request."""
    try:
        url = httpx.URL(settings.url)
    except httpx.InvalidURL as error:
        raise SettingError(f"TYPESAFE_URL is not a valid URL ({error})") from error
    if url.scheme != "https" or not url.host:
        raise SettingError("TYPESAFE_URL must be an https:// URL when TYPESAFE_API_KEY is set")
    if url.userinfo:
        # httpx would send it as `Authorization: Basic`, in place of the key
        raise SettingError(
            "TYPESAFE_URL holds a user name or password, which would be sent in place of"
            " TYPESAFE_API_KEY"
        )
    # httpx parses a port past 65535 and a host with spaces (percent-encoded);
    # neither could ever be connected to
    if url.port is not None and not 1 <= url.port <= 65535:
        raise SettingError(f"TYPESAFE_URL has no usable port ({url.port}: 1 to 65535)")
    if not _usable_host(url.raw_host.decode("ascii", "replace")):
        raise SettingError(f"TYPESAFE_URL has no usable host name ({url.host!r})")
    key = settings.api_key or ""
    # the key travels in a header: visible ASCII only (no spaces, no line breaks)
    if not all("!" <= c <= "~" for c in key):
        raise SettingError("TYPESAFE_API_KEY may hold visible ASCII characters only")
    if settings.ca_bundle is not None:
        try:
            ssl.create_default_context().load_verify_locations(cafile=str(settings.ca_bundle))
        except (OSError, ssl.SSLError) as error:
            raise SettingError(
                f"TYPESAFE_CA_BUNDLE {settings.ca_bundle} is not a readable PEM file of"
                f" certificates ({error})"
            ) from error


def make_client(ca_bundle: Path | None, max_connections: int) -> httpx.AsyncClient:
    """The process's one client for the provider.

    Public CAs (certifi, as httpx uses by default) plus the optional bundle
    of extra CAs; no redirects (a 3xx is `bad_status`); no proxy or
    certificate settings taken from the environment, so only the TYPESAFE_*
    variables decide where the data goes.
    """
    context = ssl.create_default_context(cafile=certifi.where())
    if ca_bundle is not None:
        context.load_verify_locations(cafile=str(ca_bundle))
    return httpx.AsyncClient(
        verify=context,
        timeout=httpx.Timeout(TOTAL_TIMEOUT, connect=CONNECT_TIMEOUT),
        follow_redirects=False,
        trust_env=False,
        limits=httpx.Limits(max_connections=max_connections),
    )


async def score(
    client: httpx.AsyncClient,
    url: str,
    key: str,
    query: str,
    documents: list[dict[str, str]],
) -> dict[str, float]:
    """Scores by document id, or ProviderFailure."""
    if not is_https(url):
        # serve refuses such a URL at start; this keeps the rule where the data leaves
        raise ProviderFailure("connect_error")
    try:
        async with asyncio.timeout(TOTAL_TIMEOUT):
            body = await _post(client, url, key, {"query": query, "documents": documents})
    except TimeoutError as exc:
        raise ProviderFailure("timeout") from exc
    except httpx.TimeoutException as exc:
        raise ProviderFailure("timeout") from exc
    except httpx.RequestError as exc:
        # refused or reset connections, TLS failures, broken responses
        raise ProviderFailure("connect_error") from exc
    except (httpx.InvalidURL, ValueError) as exc:
        # a request httpx cannot build (a URL or key serve would refuse at
        # start): a failure like any other, never an error of the packet
        raise ProviderFailure("connect_error") from exc
    return parse_scores(body, [d["id"] for d in documents])


async def _post(client: httpx.AsyncClient, url: str, key: str, payload: dict[str, Any]) -> bytes:
    # no content coding: a compressed body could expand past the limit inside
    # one read, before any count saw it; a provider that compresses anyway
    # is read as sent (aiter_raw), so its bytes are what is counted
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json",
        "Accept-Encoding": "identity",
    }
    async with client.stream("POST", url, json=payload, headers=headers) as response:
        if response.status_code != 200:
            raise ProviderFailure("bad_status")
        declared = response.headers.get("content-length", "")
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses
        if declared.isascii() and declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
            raise ProviderFailure("too_large")
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > MAX_RESPONSE_BYTES:
                raise ProviderFailure("too_large")
            # a turn of the loop between chunks: the client parses the chunks
            # of one network read without suspending, so a body of one-byte
            # chunks (six bytes each on the wire) held every request of the
            # service for a second at a time, and the total limit with it
            await asyncio.sleep(0)
        return bytes(body)


def parse_scores(body: bytes, ids: list[str]) -> dict[str, float]:
    """Exactly one score in 0..3 for each id, nothing else; or `bad_scores`."""
    try:
        # UTF-8 only (RFC 8259 section 8.1): json.loads of bytes would guess
        # UTF-16 or UTF-32 and pass over a byte-order mark; a decoded str
        # with a byte-order mark is refused by json.loads itself
        document = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise ProviderFailure("bad_scores") from exc
    entries = document.get("scores") if isinstance(document, dict) else None
    if not isinstance(entries, list) or len(entries) != len(set(ids)):
        raise ProviderFailure("bad_scores")
    wanted = set(ids)
    scores: dict[str, float] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ProviderFailure("bad_scores")
        doc_id, value = entry.get("id"), entry.get("score")
        # an id that is no string (a list: unhashable) is a bad answer, not a fault
        if not isinstance(doc_id, str) or doc_id not in wanted or doc_id in scores:
            raise ProviderFailure("bad_scores")
        if not _valid_score(value):
            raise ProviderFailure("bad_scores")
        assert isinstance(doc_id, str) and isinstance(value, int | float)
        scores[doc_id] = float(value)
    return scores


def _valid_score(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    # a whole number is compared as it is: math.isfinite() of one past any
    # float (400 digits of JSON) raises OverflowError
    return (isinstance(value, int) or math.isfinite(value)) and 0 <= value <= MAX_SCORE
