"""Fixtures of the dashboard tests: the app over each backend, and an ASGI client."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from lane_pg.dashboard import Grant, create_app, full_access

# The backend fixtures of the conformance suite: each test runs on memory and PostgreSQL.
from tests.conformance.conftest import backend, backend_kind, shared_postgres  # noqa: F401


@dataclass
class Browser:
    """An ASGI client of one dashboard that keeps its cookies, like a browser tab."""

    client: httpx.AsyncClient
    app: Any

    async def page(self, path: str, status: int = 200) -> str:
        response = await self.client.get(path)
        assert response.status_code == status, response.text
        return response.text

    async def csrf(self) -> str:
        html = await self.page("/jobs")
        found = re.search(r'data-csrf="([0-9a-f]+)"', html)
        assert found is not None
        return found.group(1)

    async def post(self, action: str, status: int = 303, **fields: str) -> httpx.Response:
        token = fields.pop("csrf", None) or await self.csrf()
        response = await self.client.post(f"/actions/{action}", data={"csrf": token, **fields})
        assert response.status_code == status, response.text
        return response


MakeBrowser = Callable[..., Browser]


@pytest_asyncio.fixture
async def make_browser(backend: JobQueueBackend) -> AsyncIterator[MakeBrowser]:  # noqa: F811
    made: list[Browser] = []

    def make(access: Callable[..., Grant | None] | None = None, **options: Any) -> Browser:
        app = create_app(
            backend, access=access or (lambda connection: full_access("tester")), **options
        )
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://dashboard.test"
        )
        made.append(Browser(client, app))
        return made[-1]

    yield make
    for browser in made:
        await browser.client.aclose()
        await browser.app.state.dashboard.close()


@pytest.fixture
def browser(make_browser: MakeBrowser) -> Browser:
    return make_browser()
