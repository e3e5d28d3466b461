"""Pausing through the facade (PAUSE-3..8, ROUTE-5, ROUTE-11) on every backend-backed
driver, and a worker's pause transitions as facade events.

On PostgreSQL ``pause_all`` is database-wide (the shared test schema): tests that use it
lift it in their teardown (``switch``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend, OperationCall
from lane_pg.errors import ConfigurationError, InvalidQueueName
from lane_pg.facade import BackendDriver, Job, QueueFacade
from lane_pg.facade.connection import DriverBase
from lane_pg.facade.events import (
    QueuePaused,
    QueueResumed,
    QueuesPaused,
    QueuesResumed,
    WorkerInterrupted,
    WorkerQueuePaused,
    WorkerQueueResumed,
)
from lane_pg.facade.pausing import FacadeWorkerHooks
from lane_pg.facade.runner import typed_processors
from lane_pg.memory import MemoryBackend
from lane_pg.types import Lane
from lane_pg.worker import Worker, WorkerConfig
from tests.facade.conftest import Drain
from tests.helpers import eventually

RUNS: list[str] = []


@pytest.fixture(autouse=True)
def _fresh_runs() -> None:
    RUNS.clear()


@dataclass
class Bill(Job):
    job_name: ClassVar[str] = "pausing.bill"
    n: int = 0

    async def handle(self) -> None:
        RUNS.append(f"bill-{self.n}")


@pytest_asyncio.fixture
async def switch(facade: QueueFacade) -> AsyncIterator[QueueFacade]:
    """The facade, with its default connection's global pause lifted afterwards."""
    try:
        yield facade
    finally:
        await facade.resume_all()


def recorded(facade: QueueFacade, *kinds: type[Any]) -> list[object]:
    seen: list[object] = []
    for kind in kinds:
        facade.events.listen(kind, seen.append)
    return seen


async def test_pause_and_resume_one_queue_emit_events_PAUSE_3(
    facade: QueueFacade, queue_name: str, queue_b: str
) -> None:
    seen = recorded(facade, QueuePaused, QueueResumed)
    name = facade.connection_name()
    await facade.pause(name, queue_name)
    assert await facade.is_paused(name, queue_name) is True
    assert await facade.is_paused(None, queue_b) is False
    await facade.resume(None, queue_name)
    assert await facade.is_paused(name, queue_name) is False
    assert seen == [QueuePaused(name, queue_name), QueueResumed(name, queue_name)]


async def test_pause_all_and_resume_all_keep_queue_pauses_PAUSE_4(
    switch: QueueFacade, queue_name: str, queue_b: str, registry: Any, drain: Drain
) -> None:
    facade = switch
    registry.register(Bill)
    seen = recorded(facade, QueuesPaused, QueuesResumed)
    name = facade.connection_name()
    await facade.pause(name, queue_name)
    await facade.pause_all()
    assert await facade.is_paused(name, queue_b) is True
    await facade.resume_all()
    assert seen == [QueuesPaused(name), QueuesResumed(name)]
    assert await facade.is_paused(name, queue_name) is True  # still paused
    assert await facade.is_paused(name, queue_b) is False

    await facade.push_with(Bill(1), _on(queue_name))
    await facade.push_with(Bill(2), _on(queue_b))
    await drain(queue_name, queue_b)
    assert RUNS == ["bill-2"]
    await facade.resume(name, queue_name)
    await drain(queue_name, queue_b)
    assert RUNS == ["bill-2", "bill-1"]


async def test_pause_reads_under_the_global_pause_PAUSE_5(
    switch: QueueFacade, queue_name: str, queue_b: str
) -> None:
    facade = switch
    await facade.pause(None, queue_name)
    assert await facade.paused_queues(None, [queue_b, queue_name]) == [queue_name]
    await facade.pause_all()
    assert await facade.is_paused(None, "x") is True  # any queue at all
    assert await facade.paused_queues(None, [queue_b, queue_name]) == [queue_b, queue_name]
    with pytest.raises(InvalidQueueName):
        await facade.is_paused(None, "bad name")


async def test_pause_is_per_connection_PAUSE_6(
    facade: QueueFacade, queue_name: str, registry: Any, drain: Drain
) -> None:
    registry.register(Bill)
    reports = MemoryBackend()
    facade.register_connection("reports", BackendDriver(reports, "memory"))
    await facade.pause("reports", queue_name)
    assert await reports.is_queue_paused(queue_name) is True
    assert await facade.is_paused(None, queue_name) is False
    await facade.push_with(Bill(7), _on(queue_name))  # the default connection
    await drain(queue_name)
    assert RUNS == ["bill-7"]
    with pytest.raises(ConfigurationError, match="unknown queue connection 'nope'"):
        await facade.pause("nope", queue_name)
    await reports.close()


class NoPauseDriver(DriverBase):
    """A driver with no pause: the facade says so instead of pausing something else."""

    driver_name = "sync"  # type: ignore[assignment]


async def test_a_driver_that_cannot_pause_raises_not_implemented_PAUSE_3() -> None:
    facade = QueueFacade()
    facade.set_driver(NoPauseDriver(), name="sync")
    seen = recorded(facade, QueuePaused)
    with pytest.raises(NotImplementedError, match="cannot pause"):
        await facade.pause(None, "billing")
    with pytest.raises(NotImplementedError):
        await facade.pause_all()
    assert seen == []


# ------------------------------------------------------------------ worker transitions


def _on(queue: str) -> Any:
    from lane_pg.facade import EnvelopeOverrides

    return EnvelopeOverrides(queue=queue)


async def _running_worker(
    backend: JobQueueBackend, facade: QueueFacade, lanes: Sequence[Lane]
) -> tuple[Worker, asyncio.Task[None]]:
    processors = typed_processors(facade.registry, facade.events, facade.connection_name())
    config = WorkerConfig(lanes=tuple(lanes), poll_interval=0.02)
    worker = Worker(backend, processors, config, hooks=FacadeWorkerHooks(facade.events, "main"))
    return worker, worker.start()


async def _stop(worker: Worker, task: asyncio.Task[None]) -> None:
    worker.stop()
    await asyncio.wait_for(task, 30)


async def test_worker_reports_each_pause_transition_once_PAUSE_7(
    backend: JobQueueBackend, facade: QueueFacade, queue_name: str
) -> None:
    seen = recorded(facade, WorkerQueuePaused, WorkerQueueResumed)
    worker, task = await _running_worker(backend, facade, [Lane(queue_name)])
    try:
        await eventually(lambda: worker.signals.reads >= 1)
        await facade.pause(None, queue_name)
        await eventually(lambda: seen == [WorkerQueuePaused("main", queue_name)])
        reads = worker.signals.reads
        await eventually(lambda: worker.signals.reads >= reads + 10)  # 10 looks while paused
        assert seen == [WorkerQueuePaused("main", queue_name)]
        await facade.resume(None, queue_name)
        await eventually(lambda: len(seen) == 2)
        reads = worker.signals.reads
        await eventually(lambda: worker.signals.reads >= reads + 3)
        assert seen == [
            WorkerQueuePaused("main", queue_name),
            WorkerQueueResumed("main", queue_name),
        ]
    finally:
        await _stop(worker, task)


async def test_forwarded_worker_pauses_on_its_started_names_PAUSE_8_ROUTE_5_ROUTE_11(
    backend: JobQueueBackend, facade: QueueFacade, queue_name: str, registry: Any
) -> None:
    """Started on ``default`` (here ``queue_name``) with default forwarded to ``high``: the
    push lands on high and the worker runs it; pausing high does not stop it, pausing
    default does (and the event names default)."""
    registry.register(Bill)
    default, high = queue_name, f"{queue_name}.high"
    facade.forward(default, high)
    seen = recorded(facade, WorkerQueuePaused)
    names = facade.routing.claim_queues([default], facade.connection_name())
    assert names == [default, high]
    lanes = [Lane(default), Lane(high, pause_as=default)]
    worker, task = await _running_worker(backend, facade, lanes)
    try:
        await facade.pause(None, high)
        job_id = await facade.push_with(Bill(1), _on(default))
        assert (await backend.get_job(high, job_id)) is not None  # forwarded
        await eventually(lambda: RUNS == ["bill-1"], timeout=10)
        assert seen == []

        await facade.pause(None, default)
        await eventually(lambda: seen == [WorkerQueuePaused("main", default)])
        await facade.push_with(Bill(2), _on(default))
        reads = worker.signals.reads
        await eventually(lambda: worker.signals.reads >= reads + 5)
        assert RUNS == ["bill-1"]  # held back by default's pause
        await facade.resume(None, default)
        await eventually(lambda: RUNS == ["bill-1", "bill-2"], timeout=10)
    finally:
        await _stop(worker, task)
        await facade.resume(None, high)


async def test_restart_signal_stops_a_running_worker_only_CLI_6(
    backend: JobQueueBackend, facade: QueueFacade, queue_name: str
) -> None:
    seen = recorded(facade, WorkerInterrupted)
    worker, task = await _running_worker(backend, facade, [Lane(queue_name)])
    await eventually(lambda: worker.signals.reads >= 1)
    await backend.signal_restart()
    await asyncio.wait_for(task, 30)
    assert seen == [WorkerInterrupted("main", 0)]

    later, later_task = await _running_worker(backend, facade, [Lane(queue_name)])
    try:
        await eventually(lambda: later.signals.reads >= 3)
        assert not later_task.done()
    finally:
        await _stop(later, later_task)
    assert seen == [WorkerInterrupted("main", 0)]


class UnreadableSignals(MemoryBackend):
    """A backend whose pause/restart read fails (an operation hook that raises in its
    place)."""

    def __init__(self) -> None:
        super().__init__()
        self.hooks.add(_signals_down)


async def _signals_down(call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
    if call.operation.name == "get_pause_status":
        raise ConnectionError("signals store down")
    return await proceed()


async def test_unreadable_signals_fail_open_PAUSE_11(
    queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = UnreadableSignals()
    done: list[str] = []

    async def record(job: Any, ctx: Any) -> None:
        done.append(job.id)

    worker = Worker(
        backend, {"n": record}, WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.02)
    )
    task = worker.start()
    try:
        job = await backend.add_job(queue_name, "n")
        await eventually(lambda: done == [job.id])
        later = await backend.add_job(queue_name, "n")
        await eventually(lambda: done == [job.id, later.id])
    finally:
        await _stop(worker, task)
    warnings = [r for r in caplog.records if "signals unreadable" in r.getMessage()]
    assert len(warnings) == 1  # once per outage, not per loop
