"""The lifecycle events (LIFE-1..5) through a real worker made as ``run_worker`` makes it,
on memory and PostgreSQL: the order for a failing job, the identity every job event
carries, and one scenario that observes each event of the catalogue."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from lane_pg import context
from lane_pg.backend import JobQueueBackend
from lane_pg.facade import (
    BackendDriver,
    DebounceOptions,
    FailoverDriver,
    Job,
    JobAttempted,
    JobDebounced,
    JobExceptionOccurred,
    JobFailed,
    JobIdentity,
    JobProcessed,
    JobProcessing,
    JobQueued,
    JobQueueing,
    JobRegistry,
    JobReleasedAfterException,
    JobTimedOut,
    Looping,
    QueueFacade,
    QueueFailedOver,
    QueuePaused,
    QueueResumed,
    QueuesPaused,
    QueuesResumed,
    UniqueJobSkipped,
    WorkerInterrupted,
    WorkerQueuePaused,
    WorkerQueueResumed,
    WorkerStarting,
    WorkerStopping,
    run_worker,
)
from lane_pg.facade.envelope import Envelope
from lane_pg.memory import MemoryBackend
from lane_pg.types import Lane
from lane_pg.worker import WorkerConfig
from tests.helpers import eventually

CATALOGUE = {
    JobQueueing,
    JobQueued,
    JobProcessing,
    JobProcessed,
    JobAttempted,
    JobExceptionOccurred,
    JobReleasedAfterException,
    JobFailed,
    JobTimedOut,
    JobDebounced,
    Looping,
    WorkerStarting,
    WorkerStopping,
    WorkerInterrupted,
    UniqueJobSkipped,
    QueuePaused,
    QueueResumed,
    QueuesPaused,
    QueuesResumed,
    WorkerQueuePaused,
    WorkerQueueResumed,
    QueueFailedOver,
}
"""LIFE-1's table but ``JobReleased`` (a middleware's release: the middleware's tests)."""


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    Flaky.tries = 0
    yield


@dataclass
class Fine(Job):
    job_name = "LifeFine"

    async def handle(self) -> str:
        return "done"


@dataclass
class AlwaysBroken(Job):
    job_name = "LifeBroken"
    max_tries = 2
    backoff = None

    async def handle(self) -> None:
        raise ValueError("still broken")


@dataclass
class Flaky(Job):
    job_name = "LifeFlaky"
    max_tries = 3
    backoff = None
    tries: ClassVar[int] = 0

    async def handle(self) -> None:
        Flaky.tries += 1
        if Flaky.tries == 1:
            raise RuntimeError("first try fails")


@dataclass
class Slow(Job):
    job_name = "LifeSlow"
    max_tries = 1
    backoff = None
    timeout = timedelta(milliseconds=50)

    async def handle(self) -> None:
        await asyncio.Event().wait()  # never set: only the timeout ends it


@dataclass
class Once(Job):
    job_name = "LifeOnce"
    key: str = "k"

    def unique_id(self) -> str | None:
        return self.key

    async def handle(self) -> None:
        return None


def _register(facade: QueueFacade, queue: str, *classes: type[Job]) -> None:
    for cls in classes:
        facade.registry.register(cls)
        facade.route(cls, queue=queue)


def vars_of(event: object) -> list[object]:
    return [getattr(event, field.name) for field in dataclasses.fields(event)]  # type: ignore[arg-type]


def _record(facade: QueueFacade) -> list[Any]:
    seen: list[Any] = []
    facade.events.listen(object, seen.append)
    return seen


async def _burst(facade: QueueFacade, queue: str) -> None:
    config = WorkerConfig(lanes=(Lane(queue),), poll_interval=0.05, burst=True)
    await asyncio.wait_for(run_worker(config=config, facade=facade), 30)


async def test_a_failing_job_with_two_tries_tells_events_in_order_LIFE_5(
    facade: QueueFacade, queue_name: str
) -> None:
    _register(facade, queue_name, AlwaysBroken)
    job_id = await facade.push(AlwaysBroken())
    seen = _record(facade)
    await _burst(facade, queue_name)

    order = [type(event) for event in seen if not isinstance(event, Looping)]
    assert order == [
        WorkerStarting,
        JobProcessing,
        JobExceptionOccurred,
        JobReleasedAfterException,
        JobAttempted,
        JobProcessing,
        JobExceptionOccurred,
        JobFailed,
        JobAttempted,
        WorkerStopping,
    ]
    released = next(e for e in seen if isinstance(e, JobReleasedAfterException))
    assert (released.attempt, str(released.exception), released.delay) == (1, "still broken", 0)
    attempted = [e for e in seen if isinstance(e, JobAttempted)]
    assert [(e.attempt, e.state, e.exception_occurred) for e in attempted] == [
        (1, "waiting", True),
        (2, "failed", True),
    ]
    # LIFE-2: the identity of the job, never the job object.
    for event in seen:
        if isinstance(event, JobProcessing | JobAttempted | JobFailed):
            assert event.identity.id == job_id
    label = facade.connection_name()
    assert attempted[-1].identity == JobIdentity(job_id, "LifeBroken", 2, 2, label)
    assert not any(isinstance(value, Job) for e in seen for value in vars_of(e))
    stopping = seen[-1]
    assert isinstance(stopping, WorkerStopping) and stopping.processed == 2


async def test_a_retry_waits_until_its_last_attempt_was_told_LIFE_5(
    facade: QueueFacade, queue_name: str
) -> None:
    """A retry without delay is claimable as soon as its failure is written; a slow
    listener of that failure's events still hears them before the next attempt starts."""
    _register(facade, queue_name, AlwaysBroken)
    await facade.push(AlwaysBroken())
    seen = _record(facade)

    async def slow(event: object) -> None:
        await asyncio.sleep(0.3)  # the next attempt is claimable meanwhile

    facade.events.listen(JobReleasedAfterException, slow)
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, burst=True, concurrency=2)
    await asyncio.wait_for(run_worker(config=config, facade=facade), 30)

    told = [
        (type(event).__name__, event.identity.attempts)
        for event in seen
        if isinstance(event, JobProcessing | JobReleasedAfterException | JobAttempted)
    ]
    assert told == [
        ("JobProcessing", 1),
        ("JobReleasedAfterException", 1),
        ("JobAttempted", 1),
        ("JobProcessing", 2),
        ("JobAttempted", 2),
    ]


async def test_a_raising_listener_changes_no_outcome_LIFE_3(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, Fine)

    def broken(event: object) -> None:
        raise RuntimeError("listener broke")

    facade.events.listen(object, broken)
    job_id = await facade.push(Fine())
    await _burst(facade, queue_name)
    assert await backend.get_job_state(queue_name, job_id) == "completed"


async def test_settlement_events_run_in_the_pushed_context_CTX_2_LIFE_1(
    facade: QueueFacade, queue_name: str
) -> None:
    _register(facade, queue_name, Flaky)
    heard: list[tuple[str, object]] = []
    for kind in (JobReleasedAfterException, JobAttempted):
        facade.events.listen(
            kind, lambda event: heard.append((type(event).__name__, context.get("tenant")))
        )
    with context.scope(tenant="acme"):
        await facade.push(Flaky())
    await _burst(facade, queue_name)
    assert heard == [
        ("JobReleasedAfterException", "acme"),
        ("JobAttempted", "acme"),
        ("JobAttempted", "acme"),
    ]


async def test_a_scenario_observes_each_event_of_the_catalogue_LIFE_1_LIFE_4(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, queue_b: str
) -> None:
    _register(facade, queue_name, Fine, AlwaysBroken, Slow, Once)
    seen = _record(facade)

    # Push side (LIFE-4): no worker runs yet.
    await facade.push(Fine())
    assert await facade.push_unique(Once(key=queue_name)) is True
    assert await facade.push_unique(Once(key=queue_name)) is False  # UniqueJobSkipped
    window = DebounceOptions(timedelta(hours=1), id=queue_name)
    await facade.push_debounced(Fine(), window)
    await facade.push_debounced(Fine(), window)  # the first is replaced: JobDebounced
    await facade.pause(None, queue_name)
    await facade.resume(None, queue_name)
    await facade.pause_all()
    await facade.resume_all()
    await facade.push(AlwaysBroken())
    await facade.push(Slow())
    await facade.pause(None, queue_b)  # the worker sees it paused at start
    assert {type(event) for event in seen} >= {
        JobQueueing,
        JobQueued,
        UniqueJobSkipped,
        JobDebounced,
        QueuePaused,
        QueueResumed,
        QueuesPaused,
        QueuesResumed,
    }

    # Worker side: a worker of both queues until a restart signal stops it.
    config = WorkerConfig(lanes=(Lane(queue_name), Lane(queue_b)), poll_interval=0.05)
    worker = asyncio.create_task(run_worker(config=config, facade=facade))
    try:
        await eventually(lambda: sum(isinstance(e, JobFailed) for e in seen) == 2, timeout=20)
        await eventually(lambda: any(isinstance(e, WorkerQueuePaused) for e in seen))
        await facade.resume(None, queue_b)
        await eventually(lambda: any(isinstance(e, WorkerQueueResumed) for e in seen))
        await backend.queues.signal_restart()
        await asyncio.wait_for(worker, 20)
    finally:
        worker.cancel()

    # Failover (FOV-4): a member that refuses a push.
    class Down(BackendDriver):
        async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
            raise ConnectionRefusedError(111, "connection refused (outage)")

    failover = QueueFacade(registry=JobRegistry())
    failover.set_driver(
        FailoverDriver(
            [
                ("primary", Down(MemoryBackend(), "memory")),
                ("spare", BackendDriver(MemoryBackend(), "memory")),
            ]
        )
    )
    failover.events.listen(object, seen.append)
    await failover.push(Fine())

    missing = {kind.__name__ for kind in CATALOGUE - {type(event) for event in seen}}
    assert missing == set()
    timed_out = next(e for e in seen if isinstance(e, JobTimedOut))
    assert (timed_out.job_name, timed_out.timeout) == ("LifeSlow", 0.05)
    assert dataclasses.is_dataclass(timed_out)
