"""PAUSE-7 for a worker of every queue (``all_queues``, ``--all-queues``): one
``WorkerQueuePaused(connection, queue)`` / ``WorkerQueueResumed`` per transition of each
queue's own pause, and ``queue`` None only for the connection-wide pause.

Each run has a store of its own (a fresh memory backend, or a freshly migrated PostgreSQL
schema): a worker of every queue on the shared test schema would claim other tests' jobs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from lane_pg.facade import BackendDriver, JobRegistry, QueueFacade
from lane_pg.facade.events import WorkerQueuePaused, WorkerQueueResumed
from lane_pg.facade.pausing import FacadeWorkerHooks
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.worker import Worker, WorkerConfig
from tests.helpers import eventually


@pytest_asyncio.fixture
async def own_store(
    backend_kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[JobQueueBackend]:
    if backend_kind == "memory":
        memory = MemoryBackend()
        yield memory
        await memory.close()
        return
    schema = await request.getfixturevalue("fresh_schema")()
    postgres = await PostgresBackend.connect(request.getfixturevalue("pg_dsn"), schema=schema)
    try:
        yield postgres
    finally:
        await postgres.close()


async def test_unfiltered_worker_reports_each_queues_transitions_once_PAUSE_7(
    own_store: JobQueueBackend, backend_kind: str, queue_name: str
) -> None:
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(own_store, backend_kind))
    seen: list[object] = []
    for kind in (WorkerQueuePaused, WorkerQueueResumed):
        facade.events.listen(kind, seen.append)
    billing, other = f"{queue_name}.billing", f"{queue_name}.other"
    await own_store.add_job(other, "n")  # a queue that stays unpaused
    worker = Worker(
        own_store,
        {},
        WorkerConfig(all_queues=True, poll_interval=0.02),
        hooks=FacadeWorkerHooks(facade.events, "main"),
    )
    task = worker.start()
    try:
        await eventually(lambda: worker.signals.reads >= 1)
        await facade.pause(None, billing)
        await eventually(lambda: seen == [WorkerQueuePaused("main", billing)])
        reads = worker.signals.reads
        await eventually(lambda: worker.signals.reads >= reads + 10)  # 10 poll cycles
        assert seen == [WorkerQueuePaused("main", billing)]
        await facade.resume(None, billing)
        await eventually(lambda: len(seen) == 2)
        reads = worker.signals.reads
        await eventually(lambda: worker.signals.reads >= reads + 3)
        assert seen == [WorkerQueuePaused("main", billing), WorkerQueueResumed("main", billing)]

        # The connection-wide switch is None; a queue paused on its own stays reported.
        seen.clear()
        await facade.pause(None, billing)
        await eventually(lambda: seen == [WorkerQueuePaused("main", billing)])
        await facade.pause_all()
        await eventually(lambda: len(seen) == 2)
        await facade.resume_all()
        await eventually(lambda: len(seen) == 3)
        reads = worker.signals.reads
        await eventually(lambda: worker.signals.reads >= reads + 3)
        assert seen == [
            WorkerQueuePaused("main", billing),
            WorkerQueuePaused("main", None),
            WorkerQueueResumed("main", None),
        ]
        assert await facade.is_paused(None, billing)  # resume_all keeps it (PAUSE-4)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)


async def test_started_under_the_global_pause_reports_it_as_none_PAUSE_7(
    own_store: JobQueueBackend, backend_kind: str, queue_name: str
) -> None:
    """Started while one queue is paused and then the whole connection: the switch is
    reported as None, the queue by name; lifting the switch reports None only."""
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(own_store, backend_kind))
    seen: list[object] = []
    for kind in (WorkerQueuePaused, WorkerQueueResumed):
        facade.events.listen(kind, seen.append)
    await facade.pause(None, queue_name)
    await facade.pause_all()
    worker = Worker(
        own_store,
        {},
        WorkerConfig(all_queues=True, poll_interval=0.02),
        hooks=FacadeWorkerHooks(facade.events, "main"),
    )
    task = worker.start()
    try:
        expected: list[object] = [
            WorkerQueuePaused("main", None),
            WorkerQueuePaused("main", queue_name),
        ]
        await eventually(lambda: seen == expected)
        reads = worker.signals.reads
        await eventually(lambda: worker.signals.reads >= reads + 5)
        assert seen == expected
        await facade.resume_all()
        await eventually(lambda: len(seen) == 3)
        assert seen[2] == WorkerQueueResumed("main", None)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
