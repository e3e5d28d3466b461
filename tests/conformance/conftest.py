"""Fixtures of the conformance suite: every test runs once per backend.

Time never comes from the wall clock inside a test: ``clock`` gives one base instant
(the current UTC time truncated to milliseconds, so PostgreSQL's microsecond timestamps
compare exactly) and every time-dependent call passes ``now=clock.at(offset)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from tests.helpers import Clock

BACKENDS = ["memory", "postgres"]


@pytest.fixture
def clock() -> Clock:
    now = datetime.now(UTC)
    return Clock(now.replace(microsecond=now.microsecond // 1000 * 1000))


@pytest.fixture
def queue_b(queue_name: str) -> str:
    """A second fresh queue for multi-queue tests."""
    return f"{queue_name}_b"


@pytest.fixture(params=BACKENDS, ids=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    if kind == "postgres":
        request.getfixturevalue("pg_dsn")
    return kind


@pytest_asyncio.fixture
async def backend(
    backend_kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[JobQueueBackend]:
    """A connected backend of each kind; closed after the test."""
    instance: JobQueueBackend
    if backend_kind == "memory":
        from lane_pg.memory import MemoryBackend

        instance = MemoryBackend()
    else:
        from lane_pg.postgres.backend import PostgresBackend

        dsn: str = request.getfixturevalue("pg_dsn")
        instance = await PostgresBackend.connect(dsn, schema="lane")
    try:
        yield instance
    finally:
        await instance.close()
