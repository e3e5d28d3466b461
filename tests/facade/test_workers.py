"""Facade worker entry points (WORK-17): ``run_worker`` / ``run_worker_on`` run typed jobs
like the CLI does and stop at the next claim boundary once the shutdown event is set."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.facade import BackendDriver, Job, JobProcessed, QueueFacade, run_worker, run_worker_on
from lane_pg.memory import MemoryBackend
from lane_pg.types import Lane
from lane_pg.worker import WorkerConfig
from tests.helpers import eventually

DONE: list[int] = []


@dataclass
class Tick(Job):
    job_name = "Tick"
    n: int

    async def handle(self) -> int:
        DONE.append(self.n)
        return self.n


async def test_run_worker_runs_until_the_event_is_set_WORK_17(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    DONE.clear()
    facade.registry.register(Tick)
    facade.route(Tick, queue=queue_name)
    processed: list[JobProcessed] = []
    facade.events.listen(JobProcessed, processed.append)
    ids = [await facade.push(Tick(n=n)) for n in range(3)]
    stop = asyncio.Event()
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05)
    running = asyncio.create_task(run_worker(config=config, shutdown=stop, facade=facade))
    await eventually(lambda: len(DONE) == 3, timeout=20)
    later = await facade.push(Tick(n=3))  # the worker is still serving after its backlog
    await eventually(lambda: len(DONE) == 4, timeout=20)
    stop.set()
    worker = await asyncio.wait_for(running, 20)
    assert sorted(DONE) == [0, 1, 2, 3]
    assert worker.counts["completed"] == 4
    assert {event.job_id for event in processed} == {*ids, later}
    assert {event.connection for event in processed} == {facade.connection_name()}
    for job_id in [*ids, later]:
        row = await backend.get_job(queue_name, job_id)
        assert row is not None and row.state == "completed"


async def test_run_worker_on_a_named_connection_WORK_17(
    facade: QueueFacade, queue_name: str
) -> None:
    DONE.clear()
    facade.registry.register(Tick)
    reports = BackendDriver(MemoryBackend(), "memory")
    facade.register_connection("reports", reports)
    with pytest.raises(ConfigurationError, match="unknown queue connection 'nope'"):
        await run_worker_on("nope", facade=facade)
    facade.route(Tick, queue=queue_name, connection="reports")
    await facade.push(Tick(n=7))
    assert await reports.size(queue_name) == 1
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, burst=True)
    worker = await asyncio.wait_for(run_worker_on("reports", config, facade=facade), 20)
    assert (DONE, worker.counts["completed"]) == ([7], 1)
    assert await reports.size(queue_name) == 0
