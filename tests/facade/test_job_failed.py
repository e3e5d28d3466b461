"""The terminal ``JobFailed`` event and its typed cause (RETRY-9), on every backend-backed
driver, through a real worker: the cause is ``MaxAttemptsExceeded`` for a job whose last
try raised (that error its ``__cause__``), ``ManuallyFailed`` for ``Job.fail()``,
``TimeoutExceeded`` for a terminal timeout, and the error itself for a job that ended
without spending its tries; a failure that is retried tells nothing, and a listener that
raises changes no outcome (LIFE-3)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import (
    ManuallyFailed,
    MaxAttemptsExceeded,
    TimeoutExceeded,
    UnknownJobName,
)
from lane_pg.facade import Job, JobExceptionOccurred, JobFailed, QueueFacade
from lane_pg.facade.pausing import FacadeWorkerHooks
from lane_pg.facade.runner import typed_processors
from lane_pg.types import JobOptions, Lane
from lane_pg.worker import Worker, WorkerConfig

TRIES: dict[str, int] = {}


@pytest.fixture(autouse=True)
def _fresh_tries() -> None:
    TRIES.clear()


@dataclass
class AlwaysBroken(Job):
    job_name = "AlwaysBroken"
    max_tries = 2
    backoff = None

    async def handle(self) -> None:
        raise ValueError("still broken")


@dataclass
class GivesUp(Job):
    job_name = "GivesUp"
    max_tries = 5
    backoff = None
    why: str = "bad input"

    async def handle(self) -> None:
        TRIES["GivesUp"] = TRIES.get("GivesUp", 0) + 1
        try:
            int(self.why)
        except ValueError as exc:
            self.fail(exc)


@dataclass
class Slow(Job):
    job_name = "Slow"
    max_tries = 3
    backoff = None
    timeout = timedelta(milliseconds=50)
    fail_on_timeout = True

    async def handle(self) -> None:
        await asyncio.sleep(5)


@dataclass
class FlakyOnce(Job):
    job_name = "FlakyOnce"
    max_tries = 2
    backoff = None

    async def handle(self) -> str:
        TRIES["FlakyOnce"] = TRIES.get("FlakyOnce", 0) + 1
        if TRIES["FlakyOnce"] == 1:
            raise RuntimeError("first try fails")
        return "ok"


async def _drain(facade: QueueFacade, backend: JobQueueBackend, queue: str) -> Worker:
    """A burst worker with the facade's hooks, as ``run_worker`` makes one."""
    label = facade.connection_name()
    worker = Worker(
        backend,
        typed_processors(facade.registry, facade.events, label),
        WorkerConfig(lanes=(Lane(queue),), poll_interval=0.05, burst=True),
        hooks=FacadeWorkerHooks(facade.events, label),
        connection=label,
    )
    await asyncio.wait_for(worker.run(), 30)
    return worker


def _listen(facade: QueueFacade) -> list[object]:
    seen: list[object] = []
    for kind in (JobExceptionOccurred, JobFailed):
        facade.events.listen(kind, seen.append)
    return seen


def _the_failure(seen: list[object]) -> JobFailed:
    """The one JobFailed among ``seen`` (there must be exactly one)."""
    failures = [event for event in seen if isinstance(event, JobFailed)]
    assert len(failures) == 1
    return failures[0]


def _register(facade: QueueFacade, queue: str, *classes: type[Job]) -> None:
    for cls in classes:
        facade.registry.register(cls)
        facade.route(cls, queue=queue)


async def test_last_try_raising_is_max_attempts_exceeded_RETRY_9(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, AlwaysBroken)
    seen = _listen(facade)
    job_id = await facade.push(AlwaysBroken())
    await _drain(facade, backend, queue_name)

    # LIFE-5's order: each try's exception, then one JobFailed after the last.
    assert [type(event) for event in seen] == [
        JobExceptionOccurred,
        JobExceptionOccurred,
        JobFailed,
    ]
    failed = seen[-1]
    assert isinstance(failed, JobFailed)
    assert (failed.queue, failed.job_name, failed.job_id, failed.attempts) == (
        queue_name,
        "AlwaysBroken",
        job_id,
        2,
    )
    assert failed.connection == facade.connection_name()
    assert isinstance(failed.exception, MaxAttemptsExceeded)
    assert failed.exception.attempts == 2
    assert isinstance(failed.exception.__cause__, ValueError)
    assert str(failed.exception.__cause__) == "still broken"


async def test_job_fail_is_manually_failed_after_one_try_RETRY_9(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, GivesUp)
    seen = _listen(facade)
    job_id = await facade.push(GivesUp())
    await _drain(facade, backend, queue_name)

    assert TRIES["GivesUp"] == 1  # 5 tries allowed, the first gave up
    cause = _the_failure(seen).exception
    assert isinstance(cause, ManuallyFailed)
    assert cause.job_name == "GivesUp"
    assert isinstance(cause.__cause__, ValueError)
    row = await backend.get_job(queue_name, job_id)
    assert row is not None
    assert (row.state, row.attempts_made) == ("failed", 1)
    assert "ManuallyFailed" in (row.failed_reason or "")


async def test_terminal_timeout_is_timeout_exceeded_RETRY_9(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, Slow)
    seen = _listen(facade)
    await facade.push(Slow())
    await _drain(facade, backend, queue_name)

    failed = _the_failure(seen)
    assert isinstance(failed.exception, TimeoutExceeded)
    assert failed.attempts == 1


async def test_a_retried_failure_tells_no_job_failed_RETRY_9(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, FlakyOnce)
    seen = _listen(facade)
    job_id = await facade.push(FlakyOnce())
    await _drain(facade, backend, queue_name)

    assert [type(event) for event in seen] == [JobExceptionOccurred]
    row = await backend.get_job(queue_name, job_id)
    assert row is not None
    assert row.state == "completed"


async def test_an_unknown_job_name_is_its_own_cause_RETRY_9(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    seen = _listen(facade)
    await backend.add_job(queue_name, "NoSuchJob", {}, JobOptions(attempts=3))
    await _drain(facade, backend, queue_name)

    failed = _the_failure(seen)
    assert isinstance(failed.exception, UnknownJobName)
    assert failed.attempts == 1


async def test_a_raising_listener_changes_no_outcome_RETRY_9(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    _register(facade, queue_name, AlwaysBroken)
    told: list[JobFailed] = []

    def broken_listener(event: JobFailed) -> None:
        told.append(event)
        raise RuntimeError("listener broke")

    facade.events.listen(JobFailed, broken_listener)
    first = await facade.push(AlwaysBroken())
    second = await facade.push(AlwaysBroken())
    worker = await _drain(facade, backend, queue_name)

    assert sorted(event.job_id for event in told) == sorted([first, second])
    assert worker.counts["failed"] == 4  # two tries each, both written
    for job_id in (first, second):
        row = await backend.get_job(queue_name, job_id)
        assert row is not None
        assert (row.state, row.attempts_made) == ("failed", 2)
