"""Batches and chains through the facade, run by a real worker on memory and PostgreSQL
(BATCH-1..3, -8, -11, CHAIN-1, -3, -7): callbacks are jobs found by name."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

import lane_pg.context
from lane_pg.backend import JobQueueBackend, OperationCall
from lane_pg.errors import ConfigurationError
from lane_pg.facade import BackendDriver, Job, QueueFacade
from lane_pg.facade.batches import Callbacks, ChainFailure
from lane_pg.facade.job import DEFAULT_BACKOFF, DEFAULT_MAX_TRIES
from lane_pg.facade.middleware import SkipIfBatchCancelled
from lane_pg.facade.workers import WorkerSpec
from lane_pg.memory import MemoryBackend
from lane_pg.types import CHAIN_CATCH_RETRY, Batch, JobOptions, Lane, QueueDemand
from lane_pg.worker import Worker, WorkerConfig

RAN: list[str] = []


@dataclass
class Part(Job):
    job_name = "Part"
    max_tries = 1
    n: int
    fail: bool = False

    async def handle(self) -> int:
        RAN.append(f"part {self.n}")
        if self.fail:
            raise RuntimeError(f"part {self.n} broke")
        return self.n


@dataclass
class Slow(Job):
    job_name = "Slow"
    delay: ClassVar[timedelta] = timedelta(minutes=1)
    n: int

    async def handle(self) -> None:
        RAN.append(f"slow {self.n}")


@dataclass
class Step(Job):
    job_name = "Step"
    max_tries = 1
    name: str
    fail: bool = False

    async def handle(self) -> str:
        RAN.append(self.name)
        if self.fail:
            raise RuntimeError(f"{self.name} broke")
        return self.name


@dataclass
class Debounced(Job):
    job_name = "Debounced"
    debounce_for = timedelta(seconds=5)


@dataclass
class Recorder:
    name: str
    calls: list[tuple[object, str | None]] = field(default_factory=list)

    async def handle(self, subject: object, error: str | None) -> None:
        self.calls.append((subject, error))


@pytest.fixture
def callbacks() -> Callbacks:
    return Callbacks()


@pytest.fixture
def batch_facade(facade: QueueFacade, callbacks: Callbacks, queue_name: str) -> QueueFacade:
    RAN.clear()
    facade.callbacks = callbacks
    for cls in (Part, Slow, Step):
        facade.registry.register(cls)
        facade.route(cls, queue=queue_name)
    return facade


async def drain(backend: JobQueueBackend, facade: QueueFacade, queue: str) -> Worker:
    """A burst worker with the facade's job classes and callbacks, until nothing is left."""
    processors = WorkerSpec(facade, facade.registry).processors(facade.connection_name())
    config = WorkerConfig(lanes=(Lane(queue),), poll_interval=0.05, burst=True, concurrency=1)
    worker = Worker(backend, processors, config)
    await asyncio.wait_for(worker.run(), 30)
    return worker


async def test_then_and_finally_run_once_with_the_batch_BATCH_1_BATCH_3(
    batch_facade: QueueFacade, callbacks: Callbacks, backend: JobQueueBackend, queue_name: str
) -> None:
    notify, cleanup, alert = Recorder("notify"), Recorder("cleanup"), Recorder("alert")
    for callback in (notify, cleanup, alert):
        callbacks.register(callback)
    batch_id = await (
        batch_facade.batch()
        .name("import")
        .add([Part(1), Part(2)])
        .add(Part(3))
        .then("notify")
        .catch(alert)
        .finally_("cleanup")
        .dispatch()
    )
    found = await batch_facade.find_batch(batch_id)
    assert found is not None and (found.name, found.total_jobs, found.pending_jobs) == (
        "import",
        3,
        3,
    )

    await drain(backend, batch_facade, queue_name)

    assert sorted(RAN) == ["part 1", "part 2", "part 3"]
    [(batch, error)] = notify.calls
    assert isinstance(batch, Batch) and batch.id == batch_id and error is None
    assert (batch.pending_jobs, batch.progress(), batch.finished) == (0, 100, True)
    assert len(cleanup.calls) == 1 and alert.calls == []


async def test_a_failure_runs_catch_then_finally_never_then_BATCH_3(
    batch_facade: QueueFacade, callbacks: Callbacks, backend: JobQueueBackend, queue_name: str
) -> None:
    notify, cleanup, alert = Recorder("notify"), Recorder("cleanup"), Recorder("alert")
    batch_id = await (
        batch_facade.batch([Part(1), Part(2, fail=True), Part(3)])
        .then(notify)
        .catch(alert)
        .finally_(cleanup)
        .dispatch()
    )
    await drain(backend, batch_facade, queue_name)

    assert notify.calls == []
    [(batch, error)] = alert.calls
    assert error == "part 2 broke" and isinstance(batch, Batch) and batch.cancelled
    [(final, final_error)] = cleanup.calls
    assert isinstance(final, Batch) and final.failed_jobs == 1 and final_error == "part 2 broke"
    after = await batch_facade.find_batch(batch_id)
    assert after is not None and after.finished and len(after.failed_job_ids) == 1


async def test_batch_jobs_ignore_the_declared_delay_BATCH_8(
    batch_facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    await batch_facade.batch([Slow(1), Slow(2)]).dispatch()
    await drain(backend, batch_facade, queue_name)
    assert sorted(RAN) == ["slow 1", "slow 2"]


async def test_batches_and_chains_refuse_debounced_jobs_BATCH_11_CHAIN_7(
    batch_facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    with pytest.raises(ConfigurationError, match="debounced"):
        batch_facade.batch().add(Debounced())
    with pytest.raises(ConfigurationError, match="debounced"):
        batch_facade.chain().add(Debounced())


async def test_a_callback_whose_worker_died_runs_on_the_next_worker(
    batch_facade: QueueFacade, callbacks: Callbacks, backend: JobQueueBackend, queue_name: str
) -> None:
    """A worker that dies while running a batch's callback job has spent a delivery; the
    callback still runs once, on the worker that takes it next (the soak lost a ``then``
    when its callback job had one attempt)."""
    notify = Recorder("notify")
    callbacks.register(notify)
    batch_id = await batch_facade.batch([Part(1)]).then("notify").dispatch()
    [part] = await backend.runs.claim_jobs("w", [QueueDemand(queue_name, limit=1)], lease=30)
    await backend.runs.complete_job(queue_name, part.id, part.lock_token, 1)
    [lost] = await backend.runs.claim_jobs("dies", [QueueDemand(queue_name, limit=1)], lease=1)
    assert lost.id == f"batch-{batch_id}-then"
    later = datetime.now(UTC) + timedelta(seconds=60)
    await backend.maintenance.recover_stalled([queue_name], now=later)

    await drain(backend, batch_facade, queue_name)

    callback = await backend.jobs.get_job(queue_name, lost.id)
    assert callback is not None and callback.state == "completed", callback
    assert [error for _, error in notify.calls] == [None]


def test_callback_jobs_retry_as_a_job_class_does_by_default() -> None:
    """The backends' retries of callback and catch jobs are a job class's defaults."""
    defaults = JobOptions(attempts=DEFAULT_MAX_TRIES, backoff=DEFAULT_BACKOFF)
    assert defaults.to_json() == CHAIN_CATCH_RETRY


async def test_an_unregistered_callback_fails_for_good_and_says_why(
    batch_facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    batch_id = await batch_facade.batch([Part(1)]).then("nobody").dispatch()
    worker = await drain(backend, batch_facade, queue_name)
    callback = await backend.jobs.get_job(queue_name, f"batch-{batch_id}-then")
    assert callback is not None and callback.state == "failed"
    assert "no batch callback named 'nobody' is registered" in (callback.failed_reason or "")
    assert worker.counts["failed"] == 1


async def test_a_chain_runs_in_order_and_a_failure_stops_it_CHAIN_1(
    batch_facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    head = await batch_facade.chain().add(Step("a")).add(Step("b")).add(Step("c")).dispatch()
    await drain(backend, batch_facade, queue_name)
    assert RAN == ["a", "b", "c"]
    first = await backend.jobs.get_job(queue_name, head)
    assert first is not None and first.state == "completed"

    RAN.clear()
    alert = Recorder("alert")
    await batch_facade.chain([Step("x"), Step("y", fail=True), Step("z")]).catch(alert).dispatch()
    await drain(backend, batch_facade, queue_name)
    assert RAN == ["x", "y"]
    [(failure, error)] = alert.calls
    assert isinstance(failure, ChainFailure) and failure.job_name == "Step"
    assert error == "y broke"


async def test_a_chain_across_connections_is_refused_CHAIN_3(
    batch_facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    other = MemoryBackend()
    batch_facade.register_connection("main", batch_facade.driver())
    batch_facade.register_connection("elsewhere", BackendDriver(other, "elsewhere"))
    batch_facade.route(Step, connection="elsewhere")
    with pytest.raises(ConfigurationError, match="different connections"):
        await batch_facade.chain().add(Part(1)).add(Step("b")).on_connection("main").dispatch()
    assert await backend.reads.get_job_count(queue_name) == 0
    assert await other.reads.get_job_count(queue_name) == 0


@dataclass
class Guarded(Job):
    job_name = "Guarded"
    max_tries = 1
    n: int
    fail: bool = False

    def middleware(self) -> list[object]:
        return [SkipIfBatchCancelled()]

    async def handle(self) -> None:
        RAN.append(f"guarded {self.n}")
        if self.fail:
            raise RuntimeError("first one broke")


async def test_a_cancelled_batch_skips_its_remaining_jobs_BATCH_3_MW_9(
    batch_facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    batch_facade.registry.register(Guarded)
    batch_facade.route(Guarded, queue=queue_name)
    notify, cleanup = Recorder("notify"), Recorder("cleanup")
    batch_id = await (
        batch_facade.batch([Guarded(1), Guarded(2), Guarded(3)])
        .then(notify)
        .finally_(cleanup)
        .dispatch()
    )
    # An operator cancels before any job ran (a first failure cancels the same way; a
    # worker may already hold the next job by then, so that race is not asserted here).
    await batch_facade.cancel_batch(batch_id)
    await drain(backend, batch_facade, queue_name)

    assert RAN == []  # every job was dropped by the middleware without running
    assert (len(notify.calls), len(cleanup.calls)) == (0, 1)
    batch = await batch_facade.find_batch(batch_id)
    assert batch is not None and batch.cancelled and batch.finished
    assert (batch.failed_jobs, batch.pending_jobs) == (0, 0)


async def test_a_first_failure_cancels_and_the_rest_are_skipped_BATCH_3(
    batch_facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    """One worker at concurrency 1: the failing first job's failure is written before the
    worker claims the next job, which then sees its batch cancelled and drops itself."""
    batch_facade.registry.register(Guarded)
    batch_facade.route(Guarded, queue=queue_name)
    alert, cleanup = Recorder("alert"), Recorder("cleanup")
    batch_id = await (
        batch_facade.batch([Guarded(1, fail=True), Guarded(2), Guarded(3)])
        .catch(alert)
        .finally_(cleanup)
        .dispatch()
    )
    await drain(backend, batch_facade, queue_name)

    assert RAN == ["guarded 1"]
    assert (len(alert.calls), len(cleanup.calls)) == (1, 1)
    batch = await batch_facade.find_batch(batch_id)
    assert batch is not None and batch.cancelled and batch.finished
    assert (batch.failed_jobs, batch.pending_jobs) == (1, 0)


async def test_skip_if_batch_cancelled_reads_nothing_for_a_job_of_no_batch_MW_9(
    batch_facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    batch_facade.registry.register(Guarded)
    batch_facade.route(Guarded, queue=queue_name)
    reads: list[str] = []

    async def count(call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        if call.operation.name == "find_batch":
            reads.append(call.operation.name)
        return await proceed()

    backend.hooks.add(count)
    try:
        await batch_facade.push(Guarded(1))
        await drain(backend, batch_facade, queue_name)
        assert RAN == ["guarded 1"] and reads == []
        await batch_facade.batch([Guarded(2)]).dispatch()
        await drain(backend, batch_facade, queue_name)
        assert RAN == ["guarded 1", "guarded 2"] and reads == ["find_batch"]
    finally:
        backend.hooks.remove(count)


@dataclass
class Tenant(Job):
    job_name = "Tenant"
    n: int

    async def handle(self) -> None:
        RAN.append(f"{self.n}:{lane_pg.context.get('tenant')}")


async def test_batch_and_chain_jobs_carry_the_builders_context_CTX_4(
    batch_facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    batch_facade.registry.register(Tenant)
    batch_facade.route(Tenant, queue=queue_name)
    with lane_pg.context.scope(tenant="acme"):
        batch = batch_facade.batch([Tenant(1)])
        chain = batch_facade.chain([Tenant(2), Tenant(3)])
    with lane_pg.context.scope(tenant="other"):
        await batch.dispatch()
        await chain.dispatch()
    await drain(backend, batch_facade, queue_name)
    assert sorted(RAN) == ["1:acme", "2:acme", "3:acme"]
