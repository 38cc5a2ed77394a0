"""Bearer-token verifiers of the lifecycle listener.

The composition must pass one explicitly: there is no default and no testing
fallback. Each turns a bearer token into an authenticated `Caller` or raises
`Unauthenticated` (401); a verifier that cannot reach its authority raises
`Unavailable` (503).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from pathlib import Path
from typing import Any, Protocol

import httpx

from waypost.errors import Unauthenticated, Unavailable
from waypost.http.failures import failure_kind
from waypost.ids import visible_ascii
from waypost.observe.conditions import ConditionLog
from waypost.resolvers.access import principals
from waypost.resolvers.lifecycle.authz import Caller
from waypost.runtime import Runtime

log = logging.getLogger("waypost.lifecycle")
# an identity service that is down refuses every request: a line per 10 s
_conditions = ConditionLog(log)
AUDIENCE = "lifecycle"
IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
TOKENREVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
# A TokenReview's answer is a few hundred bytes: past this the API server
# (or a proxy on the way) is not answering one.
REVIEW_READ_MAX = 64 * 1024


class TokenVerifier(Protocol):
    async def verify(self, token: str) -> Caller:
        """The caller `token` stands for (401 when it stands for none)."""
        ...

    async def reconfirm(self, token: str, caller: Caller) -> None:
        """Once a command's body has been read, just before its write
        transaction: 401 unless `token` still stands for `caller`. A body
        uploaded slowly gave a revocation the whole upload to go unseen."""
        ...


class WaypostTokenVerifier:
    """Waypost tokens issued with audience `lifecycle` (an `api` token is 401)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    async def verify(self, token: str) -> Caller:
        actor = await self.rt.db.read(lambda conn: principals.authenticate(conn, token, AUDIENCE))
        return Caller(actor.principal_id, actor.kind, actor.token_id)

    async def reconfirm(self, token: str, caller: Caller) -> None:
        """Nothing to ask here: the write transaction itself reads the token's
        row (`authz.recheck_identity`), which is later and exact."""


class TokenReviewVerifier:
    """Kubernetes TokenReview (authentication.k8s.io/v1) with audience `lifecycle`.

    The caller's id is the username the API server returns (for a service
    account `system:serviceaccount:NAMESPACE:NAME`); grants name that id.
    Waypost's own credential for the API server is read from `credential_file`
    at every call, since projected service-account tokens rotate.
    """

    def __init__(
        self,
        api_url: str,
        ca_file: Path,
        credential_file: Path | None = None,
        timeout: float = 5.0,
    ) -> None:
        if not api_url.startswith("https://"):
            raise ValueError("the Kubernetes API URL must be https://")
        self.url = api_url.rstrip("/") + TOKENREVIEW_PATH
        self.credential_file = credential_file
        self.timeout = timeout  # of a whole review, not only of each read
        context = ssl.create_default_context(cafile=str(ca_file))
        self.client = httpx.AsyncClient(verify=context, timeout=timeout)

    async def aclose(self) -> None:
        await self.client.aclose()

    def _credential(self) -> dict[str, str]:
        if self.credential_file is None:
            return {}
        try:
            credential = self.credential_file.read_text().strip()
        except OSError as exc:
            _conditions.warning("cannot read the TokenReview credential: %s", exc.strerror)
            raise Unavailable("identity service unavailable") from exc
        except UnicodeDecodeError as exc:
            _conditions.warning("the TokenReview credential file is not UTF-8 text")
            raise Unavailable("identity service unavailable") from exc
        if not visible_ascii(credential):
            # a header carries visible ASCII only: httpx raised UnicodeEncodeError
            # (a 500) for one with a non-ASCII letter; never the text in the log
            _conditions.warning("the TokenReview credential holds characters no header can carry")
            raise Unavailable("identity service unavailable")
        return {"Authorization": "Bearer " + credential}

    async def verify(self, token: str) -> Caller:
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [AUDIENCE]},
        }
        if self.client.is_closed:
            # `serve` closes it with the runtime, before the store: a request
            # still running then (a forced quit's) met httpx's RuntimeError,
            # a 500 and an ERROR (stopaudit)
            raise Unavailable("identity service unavailable")
        headers = {**self._credential(), "Accept-Encoding": "identity"}
        try:
            # the whole review: httpx's timeout bounds each read, so an API
            # server trickling a byte every 2 s held a request for 30 s
            async with asyncio.timeout(self.timeout):
                body = await self._answer(review, headers)
        except TimeoutError as exc:
            _conditions.warning("TokenReview took longer than %g s", self.timeout, key="timeout")
            raise Unavailable("identity service unavailable") from exc
        except httpx.HTTPError as exc:
            # the upstream's diagnostics go to the log, never to the client
            name = failure_kind(exc)
            _conditions.warning("TokenReview failed: %s", name, key=name)
            raise Unavailable("identity service unavailable") from exc
        try:
            status: Any = json.loads(body)["status"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            # RecursionError: JSON nested 2,000 deep was a 500 and a traceback
            _conditions.warning("TokenReview answered no status object: %s", type(exc).__name__)
            raise Unavailable("identity service unavailable") from exc
        if not isinstance(status, dict):
            # a null or a string is a broken identity service, not a bad
            # credential: 401 would tell the caller its token was refused
            name = type(status).__name__
            _conditions.warning("TokenReview answered no status object: %s", name)
            raise Unavailable("identity service unavailable")
        return _caller_of(status)

    async def _answer(self, review: dict[str, Any], headers: dict[str, str]) -> bytes:
        """The API server's answer body, at most REVIEW_READ_MAX bytes as sent
        (never inflated): an answer of 300 MB was read whole into the process
        both listeners share, and 1 MB of gzip inflated to 1 GB there,
        stalling the public listener for seconds."""
        async with self.client.stream("POST", self.url, json=review, headers=headers) as response:
            if response.status_code not in (200, 201):
                code = response.status_code
                _conditions.warning("TokenReview answered HTTP %s", code, key=f"{code}")
                raise Unavailable("identity service unavailable")
            if response.headers.get("content-encoding", "identity").lower() != "identity":
                _conditions.warning("TokenReview answered a compressed body", key="encoded")
                raise Unavailable("identity service unavailable")
            body = bytearray()
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > REVIEW_READ_MAX:
                    _conditions.warning(
                        "TokenReview answered more than %d bytes", REVIEW_READ_MAX, key="large"
                    )
                    raise Unavailable("identity service unavailable")
            return bytes(body)

    async def reconfirm(self, token: str, caller: Caller) -> None:
        """Review the token again. Not inside the write transaction, as the
        contract would have it: a call to the API server there would hold
        the one writer (every write of the process) for up to its timeout.
        Asked after the upload, the review leaves a revocation only the
        moments of the write itself to go unseen."""
        if (await self.verify(token)).id != caller.id:
            raise Unauthenticated("unauthenticated")


def _caller_of(status: dict[str, Any]) -> Caller:
    if status.get("authenticated") is not True:
        raise Unauthenticated("unauthenticated")
    audiences = status.get("audiences")
    user = status.get("user")
    username = user.get("username") if isinstance(user, dict) else None
    if (
        not isinstance(audiences, list)
        or AUDIENCE not in audiences
        or not isinstance(username, str)
        or not 1 <= len(username) <= 256
    ):
        raise Unauthenticated("unauthenticated")
    return Caller(username, "service")
