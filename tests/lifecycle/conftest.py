"""Fixtures of the lifecycle tests: the lifecycle app over the public app's Runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import Service
from tests.lifecycle.support import Lifecycle, Member, memo, with_docs
from waypost.lifecycle_http import create_lifecycle_app
from waypost.lifecycle_http.verifiers import WaypostTokenVerifier


@pytest.fixture
async def lifecycle(service: Service) -> AsyncIterator[Lifecycle]:
    rt = service.rt
    app = create_lifecycle_app(rt, WaypostTokenVerifier(rt))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://lifecycle.test") as client:
        yield Lifecycle(service, client)


@pytest.fixture
async def author(lifecycle: Lifecycle) -> Member:
    return await lifecycle.member("author")


@pytest.fixture
async def reviewer(lifecycle: Lifecycle) -> Member:
    return await lifecycle.member("reviewer")


@pytest.fixture
async def registered(author: Member) -> Member:
    """The author, once it has registered the default memo with one document."""
    m, docs = with_docs(memo(), b"notes")
    assert (await author.register(m, docs)).status_code == 200
    return author
