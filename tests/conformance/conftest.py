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
    return kind


@pytest.fixture
def shared_postgres(backend_kind: str, request: pytest.FixtureRequest) -> JobQueueBackend | None:
    """The session's PostgresBackend for a postgres test, else None (a memory test does
    not need PostgreSQL). A sync fixture: an async one cannot set up another on demand."""
    if backend_kind != "postgres":
        return None
    shared: JobQueueBackend = request.getfixturevalue("pg_backend")
    return shared


@pytest_asyncio.fixture
async def backend(shared_postgres: JobQueueBackend | None) -> AsyncIterator[JobQueueBackend]:
    """A connected backend of each kind: a fresh MemoryBackend per test, and the session's
    shared PostgresBackend (``pg_backend``; tests isolate by queue name and never close
    it)."""
    if shared_postgres is not None:
        yield shared_postgres
        return
    from lane_pg.memory import MemoryBackend

    memory = MemoryBackend()
    try:
        yield memory
    finally:
        await memory.close()
