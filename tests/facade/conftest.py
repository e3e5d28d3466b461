"""Fixtures of the facade suite: every facade test runs once per backend-backed driver
(memory and PostgreSQL), as the conformance suite does for the backend protocol.

``facade`` is a fresh ``QueueFacade`` with its own registry, routes and listeners over the
test's backend, so tests never share the process-wide ``lane_pg.Q``. ``drain`` runs a burst
worker over the facade's registered job classes until nothing is left to do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from lane_pg.facade import BackendDriver, JobRegistry, QueueFacade, typed_processors
from lane_pg.types import Lane
from lane_pg.worker import Worker, WorkerConfig
from tests.conformance import conftest as conformance

# The conformance suite's fixtures, so each facade test runs once per backend.
backend_kind = conformance.backend_kind
shared_postgres = conformance.shared_postgres
backend = conformance.backend
clock = conformance.clock
queue_b = conformance.queue_b

Drain = Callable[..., Awaitable[Worker]]


@pytest.fixture
def registry() -> JobRegistry:
    return JobRegistry()


@pytest_asyncio.fixture
async def facade(
    backend: JobQueueBackend, backend_kind: str, registry: JobRegistry
) -> AsyncIterator[QueueFacade]:
    queue_facade = QueueFacade(registry=registry)
    queue_facade.set_driver(BackendDriver(backend, backend_kind))
    yield queue_facade
    queue_facade.reset()  # the backend is the fixture's to close


@pytest.fixture
def drain(backend: JobQueueBackend, facade: QueueFacade) -> Drain:
    async def run(*queues: str, **settings: object) -> Worker:
        processors = typed_processors(facade.registry, facade.events, facade.connection_name())
        config = WorkerConfig(
            lanes=tuple(Lane(queue) for queue in queues),
            poll_interval=0.05,
            burst=True,
            **settings,  # type: ignore[arg-type]
        )
        worker = Worker(backend, processors, config)
        await asyncio.wait_for(worker.run(), 30)
        return worker

    return run
