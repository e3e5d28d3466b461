"""A worker on a failover connection (FOV-5, FOV-6, FOV-8, CLI-5, CLI-6): ``run_worker``
runs one worker per connection of the list, under one supervisor.

The stores are real: the session's PostgreSQL schema (each test on queues of its own) and
memory backends; a connection that is down is a PostgreSQL DSN on a port nobody listens
on, so its connects are refused by the kernel."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import ClassVar

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.facade import (
    BackendDriver,
    DriverBase,
    FailoverDriver,
    FailoverWorker,
    Job,
    JobProcessed,
    JobRegistry,
    NullDriver,
    QueueFacade,
    Reservation,
    WorkerInterrupted,
    run_worker,
)
from lane_pg.facade.workers import failover_worker
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import Lane
from lane_pg.worker import WorkerConfig
from tests.helpers import eventually

CLOSED_PORT_DSN = "postgresql://postgres@127.0.0.1:1/nowhere"
RUNS: list[tuple[str, int]] = []


@dataclass
class Work(Job):
    job_name: ClassVar[str] = "fov.work"
    n: int = 0
    seconds: float = 0.0

    async def handle(self) -> int:
        if self.seconds:
            await asyncio.sleep(self.seconds)
        RUNS.append(("ran", self.n))
        return self.n


@pytest.fixture(autouse=True)
def _fresh_runs() -> None:
    RUNS.clear()


def _facade() -> QueueFacade:
    facade = QueueFacade(registry=JobRegistry())
    facade.registry.register(Work)
    return facade


def _memory() -> BackendDriver:
    return BackendDriver(MemoryBackend(), "memory")


def _config(queue: str, **settings: object) -> WorkerConfig:
    return WorkerConfig(lanes=(Lane(queue),), poll_interval=0.05, **settings)  # type: ignore[arg-type]


async def _add(driver: BackendDriver, queue: str, *numbers: int, seconds: float = 0) -> list[str]:
    backend = await driver.backend()
    return [
        (await backend.add_job(queue, Work.job_name, {"n": n, "seconds": seconds})).id
        for n in numbers
    ]


async def _states(driver: BackendDriver, queue: str, ids: list[str]) -> list[str | None]:
    backend = await driver.backend()
    return [await backend.get_job_state(queue, job_id) for job_id in ids]


async def _all_completed(driver: BackendDriver, queue: str, ids: list[str]) -> bool:
    return set(await _states(driver, queue, ids)) == {"completed"}


async def test_one_run_worker_serves_every_connection_FOV_5_FOV_6(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    """Jobs on a PostgreSQL and a memory connection all complete through one run_worker,
    each settled on the store that issued it, its events labelled with that connection."""
    pg, memory = BackendDriver(pg_backend, "postgres"), _memory()
    on_pg = await _add(pg, queue_name, 1, 2, 3)
    on_memory = await _add(memory, queue_name, 11, 12)  # ids "1", "2": the same as on pg
    facade = _facade()
    processed: list[JobProcessed] = []
    facade.events.listen(JobProcessed, processed.append)
    stop = asyncio.Event()
    running = asyncio.create_task(
        run_worker(
            FailoverDriver([("pg", pg), ("mem", memory)]), _config(queue_name), stop, facade=facade
        )
    )
    await eventually(lambda: _all_completed(pg, queue_name, on_pg), timeout=20)
    await eventually(lambda: _all_completed(memory, queue_name, on_memory), timeout=20)
    stop.set()
    workers = await asyncio.wait_for(running, 30)
    assert isinstance(workers, FailoverWorker)
    assert sorted(n for _, n in RUNS) == [1, 2, 3, 11, 12]
    assert workers.counts["completed"] == 5
    assert {label: w.counts["completed"] for label, w in workers.workers.items()} == {
        "pg": 3,
        "mem": 2,
    }
    assert sorted((event.connection, event.job_id) for event in processed) == sorted(
        [("pg", job_id) for job_id in on_pg] + [("mem", job_id) for job_id in on_memory]
    )
    memory_backend = await memory.backend()
    for job_id, n in zip(on_memory, (11, 12), strict=True):
        stored = await memory_backend.get_job(queue_name, job_id)
        assert stored is not None and stored.return_value == n  # not pg's job of that id
    assert {w.worker_id for w in workers.workers.values()} == {
        f"{workers.worker_id}@pg",
        f"{workers.worker_id}@mem",
    }


async def test_a_backlog_on_one_connection_does_not_starve_another_FOV_5(
    queue_name: str,
) -> None:
    """A recovered primary with a long backlog, a fallback with a few jobs left: the
    fallback's jobs are done while the primary's backlog is still mostly waiting."""
    primary, fallback = _memory(), _memory()
    backlog = await _add(primary, queue_name, *range(40), seconds=0.05)
    left = await _add(fallback, queue_name, 100, 101, 102)
    stop = asyncio.Event()
    config = _config(queue_name, concurrency=1)
    running = asyncio.create_task(
        run_worker(
            FailoverDriver([("primary", primary), ("fallback", fallback)]),
            config,
            stop,
            facade=_facade(),
        )
    )
    try:
        await eventually(lambda: _all_completed(fallback, queue_name, left), timeout=20)
        assert (await _states(primary, queue_name, backlog)).count("waiting") >= 20
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)


async def test_a_down_connection_does_not_stop_the_others_FOV_5(
    queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The primary's connects are refused: the fallback's jobs complete meanwhile, and the
    primary is retried with backoff, with one warning for the outage, not one per try."""
    caplog.set_level(logging.DEBUG, logger="lane_pg.facade.failover")
    fallback = _memory()
    ids = await _add(fallback, queue_name, 1, 2, 3)
    driver = FailoverDriver([("primary", BackendDriver.lazy(CLOSED_PORT_DSN, "postgres")),
                             ("fallback", fallback)])  # fmt: skip
    stop = asyncio.Event()
    running = asyncio.create_task(run_worker(driver, _config(queue_name), stop, facade=_facade()))

    def attempts() -> int:
        return sum("failover connection 'primary'" in r.getMessage() for r in caplog.records)

    try:
        await eventually(lambda: _all_completed(fallback, queue_name, ids), timeout=20)
        await eventually(lambda: attempts() >= 3, timeout=20)  # retried: 0.05 s, 0.1 s, ...
    finally:
        stop.set()
        workers = await asyncio.wait_for(running, 30)
    warnings = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and "failover connection 'primary'" in r.getMessage()
    ]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert "ConnectionRefusedError" in warnings[0].getMessage()
    assert isinstance(workers, FailoverWorker)
    assert list(workers.workers) == ["fallback"]  # the primary never had a worker
    assert workers.counts["completed"] == 3


async def test_a_connection_back_from_an_outage_is_served_FOV_5(
    pg_dsn: str, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A primary refused at first (a closed port) and reachable later: its worker starts
    once a retry connects, and the outage ends with one line."""
    caplog.set_level(logging.INFO, logger="lane_pg.facade.failover")
    target = [CLOSED_PORT_DSN]
    opened: list[JobQueueBackend] = []

    async def open_primary() -> JobQueueBackend:
        backend = await PostgresBackend.connect(target[0], min_size=1, max_size=4)
        opened.append(backend)
        return backend

    primary = BackendDriver.opened_by(open_primary, "postgres")
    fallback = _memory()
    stop = asyncio.Event()
    driver = FailoverDriver([("primary", primary), ("fallback", fallback)])
    running = asyncio.create_task(run_worker(driver, _config(queue_name), stop, facade=_facade()))
    try:
        await eventually(
            lambda: any("failover connection 'primary' failing" in r.getMessage()
                        for r in caplog.records),
            timeout=20,
        )  # fmt: skip
        async with _pg(pg_dsn) as direct:
            job = await direct.add_job(queue_name, Work.job_name, {"n": 7})
            target[0] = pg_dsn  # the server is reachable now
            await eventually(lambda: _state_is(direct, queue_name, job.id, "completed"), timeout=20)
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
        for backend in opened:
            await backend.close()
    assert ("ran", 7) in RUNS
    back = [r for r in caplog.records if "'primary' working again" in r.getMessage()]
    assert len(back) == 1


def _pg(dsn: str) -> _OpenPostgres:
    return _OpenPostgres(dsn)


class _OpenPostgres:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._backend: PostgresBackend | None = None

    async def __aenter__(self) -> PostgresBackend:
        self._backend = await PostgresBackend.connect(self._dsn, min_size=1, max_size=2)
        return self._backend

    async def __aexit__(self, *exc: object) -> None:
        assert self._backend is not None
        await self._backend.close()


async def _state_is(backend: JobQueueBackend, queue: str, job_id: str, state: str) -> bool:
    return await backend.get_job_state(queue, job_id) == state


class NoFilter(DriverBase):
    """A third-party connection that can only pop from every queue at once."""

    def __init__(self) -> None:
        self.pops = 0

    async def pop(self) -> Reservation | None:
        self.pops += 1
        return None


async def test_queue_filtering_is_required_of_every_connection_FOV_8(queue_name: str) -> None:
    """With lanes (``--queue``), a connection that cannot filter by queue is named in the
    error, raised before anything is claimed from any connection."""
    served, legacy = _memory(), NoFilter()
    [job_id] = await _add(served, queue_name, 1)
    driver = FailoverDriver([("a", served), ("legacy", legacy)])
    with pytest.raises(ConfigurationError, match=r"'legacy'.*queue filtering"):
        await run_worker(driver, _config(queue_name, burst=True), facade=_facade())
    stored = await (await served.backend()).get_job(queue_name, job_id)
    assert stored is not None and (stored.state, stored.attempts_started) == ("waiting", 0)
    assert legacy.pops == 0 and RUNS == []
    # Without lanes it would not filter, but it has no backend a worker claims from either.
    with pytest.raises(ConfigurationError, match=r"'legacy'.*no backend a worker"):
        await run_worker(driver, WorkerConfig(burst=True, all_queues=True), facade=_facade())


async def test_connections_that_keep_no_jobs_are_skipped_FOV_8(queue_name: str) -> None:
    memory = _memory()
    ids = await _add(memory, queue_name, 1, 2)
    driver = FailoverDriver([("nothing", NullDriver()), ("mem", memory)])
    workers = await asyncio.wait_for(
        run_worker(driver, _config(queue_name, burst=True), facade=_facade()), 30
    )
    assert isinstance(workers, FailoverWorker)
    assert workers.labels == ["mem"]
    assert await _all_completed(memory, queue_name, ids)


async def test_max_jobs_is_a_total_over_every_connection_CLI_5(queue_name: str) -> None:
    first, second = _memory(), _memory()
    await _add(first, queue_name, *range(5))
    await _add(second, queue_name, *range(10, 15))
    driver = FailoverDriver([("first", first), ("second", second)])
    workers = await asyncio.wait_for(
        run_worker(driver, _config(queue_name, max_jobs=4), facade=_facade()), 30
    )  # returns by itself: no shutdown event
    assert isinstance(workers, FailoverWorker)
    assert (workers.counts["claimed"], workers.counts["completed"], len(RUNS)) == (4, 4, 4)
    left = 0
    for target in (first, second):
        backend = await target.backend()
        left += (await backend.get_job_counts(queue_name, ["waiting"]))["waiting"]
    assert left == 6


async def test_a_restart_signal_on_one_store_stops_them_all_CLI_6(queue_name: str) -> None:
    first, second = _memory(), _memory()
    facade = _facade()
    interrupted: list[WorkerInterrupted] = []
    facade.events.listen(WorkerInterrupted, interrupted.append)
    workers = failover_worker(
        FailoverDriver([("first", first), ("second", second)]), _config(queue_name), facade
    )
    running = asyncio.create_task(workers.run())
    # Both have read their restart baseline (before any claim), so a later signal counts.
    await eventually(
        lambda: (
            len(workers.workers) == 2
            and all(worker.signals.reads >= 1 for worker in workers.workers.values())
        )
    )
    await (await second.backend()).signal_restart()
    await asyncio.wait_for(running, 30)
    assert interrupted == [WorkerInterrupted("second", 0)]
