"""What `serve` composes for the lifecycle listener: the verifier its flags
select, and the webhook delivery worker. Both close with the Runtime."""

from __future__ import annotations

import asyncio
import logging

import httpx

from waypost.cancelling import cancel_and_wait
from waypost.lifecycle_http.verifiers import (
    IN_CLUSTER_TOKEN,
    TokenReviewVerifier,
    TokenVerifier,
    WaypostTokenVerifier,
)
from waypost.resolvers.lifecycle.delivery import deliver_forever
from waypost.runtime import Runtime
from waypost.settings import LifecycleSettings

log = logging.getLogger("waypost.lifecycle")


async def lifecycle_verifier(rt: Runtime, cfg: LifecycleSettings) -> TokenVerifier:
    if cfg.auth == "waypost":
        return WaypostTokenVerifier(rt)
    if cfg.auth != "tokenreview" or cfg.k8s_api is None or cfg.k8s_ca is None:
        raise ValueError("--lifecycle-auth tokenreview needs --k8s-api and --k8s-ca")
    credential = cfg.k8s_token_file
    if credential is None and IN_CLUSTER_TOKEN.exists():
        credential = IN_CLUSTER_TOKEN
    verifier = TokenReviewVerifier(cfg.k8s_api, cfg.k8s_ca, credential)
    rt.resources.push_async_callback(verifier.aclose)
    return verifier


async def start_delivery(rt: Runtime, cfg: LifecycleSettings, listening: bool) -> None:
    """Run the delivery worker until the Runtime closes (when a webhook is set:
    with the lifecycle listener off it still delivers what an earlier run
    left pending). `listening`: whether the lifecycle listener is on."""
    if cfg.webhook is None:
        if listening:  # without the listener nothing is made to deliver
            log.info("no --lifecycle-webhook: lifecycle deliveries stay pending")
        return
    client = httpx.AsyncClient(timeout=10.0)
    task = asyncio.create_task(deliver_forever(rt, client, cfg.webhook))

    async def stop() -> None:
        try:
            await cancel_and_wait(task)
        finally:
            await client.aclose()

    rt.resources.push_async_callback(stop)
