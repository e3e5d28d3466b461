"""The queues a worker serves when it is not told (issue 22): the App's lanes, its job
classes' queues (routes applied) and their forwards; refused when nothing names one;
``all_queues=True`` for every queue. ``App.create_worker`` and ``run_worker`` derive them
as ``python -m lane_pg worker`` does (tests/worker/test_lifecycle_cli.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import ClassVar

import pytest

import lane_pg
from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.facade import (
    BackendDriver,
    FailoverDriver,
    FailoverWorker,
    Job,
    JobRegistry,
    QueueFacade,
    run_worker,
)
from lane_pg.memory import MemoryBackend
from lane_pg.types import JSON, JobRow, Lane
from lane_pg.worker import JobContext, WorkerConfig


@dataclass
class Mail(Job):
    job_name: ClassVar[str] = "serving.mail"
    queue: ClassVar[str | None] = "mail"

    async def handle(self) -> str:
        return "mailed"


@dataclass
class Plain(Job):
    job_name: ClassVar[str] = "serving.plain"

    async def handle(self) -> str:
        return "plain"


@dataclass
class Routed(Job):
    job_name: ClassVar[str] = "serving.routed"
    queue: ClassVar[str | None] = "declared"

    async def handle(self) -> str:
        return "routed"


def _registry(*classes: type[Job]) -> JobRegistry:
    registry = JobRegistry()
    for cls in classes:
        registry.register(cls)
    return registry


def test_the_app_serves_its_lanes_its_classes_queues_and_their_forwards() -> None:
    facade = QueueFacade(registry=JobRegistry())
    facade.route(Routed, queue="routed")
    facade.forward("mail", "mail-v2")
    app = lane_pg.App(
        "memory://", lanes=[Lane("control", 1, 2)], jobs=_registry(Mail, Plain, Routed)
    )
    assert app.served_lanes(facade) == (
        Lane("control", 1, 2),
        Lane("default"),
        Lane("mail"),
        Lane("routed"),
        Lane("mail-v2", pause_as="mail"),
    )
    # A class whose queue is one of the App's lanes keeps the lane's settings.
    lanes_first = lane_pg.App("memory://", lanes=[Lane("mail", 3)], jobs=_registry(Mail))
    assert lanes_first.served_lanes(QueueFacade(registry=JobRegistry())) == (Lane("mail", 3),)


async def test_an_app_of_processor_functions_alone_is_refused() -> None:
    app = lane_pg.App("memory://", jobs=None)

    @app.processor("send")
    async def send(job: JobRow, ctx: JobContext) -> JSON:
        return None

    try:
        with pytest.raises(ConfigurationError, match=r"no queue to serve.*all_queues=True"):
            await app.create_worker(burst=True)
        with pytest.raises(ConfigurationError, match="no queue to serve"):
            await app.create_worker(WorkerConfig(burst=True))
        assert (await app.create_worker(all_queues=True)).lanes == ()
        named = await app.create_worker(lanes=(Lane("emails"),))
        assert [lane.name for lane in named.lanes] == ["emails"]
    finally:
        await app.close()


async def test_an_app_worker_claims_its_classes_queue_and_nothing_else() -> None:
    app = lane_pg.App("memory://", jobs=_registry(Mail))
    try:
        backend = await app.backend()
        mine = await backend.add_job("mail", Mail.job_name, {})
        theirs = await backend.add_job("billing", "someone_elses", {})
        worker = await app.run_worker(burst=True, poll_interval=0.05)
        assert [lane.name for lane in worker.lanes] == ["mail"]
        assert await backend.get_job_state("mail", mine.id) == "completed"
        left = await backend.get_job("billing", theirs.id)
        assert left is not None and (left.state, left.attempts_started) == ("waiting", 0)
    finally:
        await app.close()


async def test_run_worker_serves_the_facades_job_class_queues(
    backend: JobQueueBackend, backend_kind: str, queue_name: str
) -> None:
    facade = QueueFacade(registry=_registry(Plain))
    facade.set_driver(BackendDriver(backend, backend_kind))
    facade.route(Plain, queue=queue_name)
    try:
        mine = await facade.push(Plain())
        theirs = await backend.add_job(f"{queue_name}.other", "someone_elses", {})
        worker = await asyncio.wait_for(
            run_worker(config=WorkerConfig(burst=True, poll_interval=0.05), facade=facade), 30
        )
        assert [lane.name for lane in worker.lanes] == [queue_name]
        assert await backend.get_job_state(queue_name, mine) == "completed"
        left = await backend.get_job(theirs.queue, theirs.id)
        assert left is not None and (left.state, left.attempts_started) == ("waiting", 0)
    finally:
        facade.reset()


async def test_run_worker_with_no_job_class_is_refused(
    backend: JobQueueBackend, backend_kind: str
) -> None:
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(backend, backend_kind))
    try:
        with pytest.raises(ConfigurationError, match="no queue to serve"):
            await run_worker(config=WorkerConfig(burst=True), facade=facade)
    finally:
        facade.reset()


async def test_a_failover_worker_serves_the_same_queues_on_every_connection() -> None:
    """A failover connection's workers derive their queues as any other (FOV-8 then applies
    to them as to ``--queue``)."""
    first, second = MemoryBackend(), MemoryBackend()
    mine = [
        await first.add_job("mail", Mail.job_name, {}),
        await second.add_job("mail", Mail.job_name, {}),
    ]
    theirs = await second.add_job("billing", "someone_elses", {})
    driver = FailoverDriver(
        [("first", BackendDriver(first, "memory")), ("second", BackendDriver(second, "memory"))]
    )
    facade = QueueFacade(registry=_registry(Mail))
    workers = await asyncio.wait_for(
        run_worker(driver, WorkerConfig(burst=True, poll_interval=0.05), facade=facade), 30
    )
    assert isinstance(workers, FailoverWorker)
    assert [lane.name for lane in workers.lanes] == ["mail"]
    assert await first.get_job_state("mail", mine[0].id) == "completed"
    assert await second.get_job_state("mail", mine[1].id) == "completed"
    left = await second.get_job("billing", theirs.id)
    assert left is not None and (left.state, left.attempts_started) == ("waiting", 0)
