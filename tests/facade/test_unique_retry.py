"""A9: a failed unique job retried from the failed-job store while its row is retained
(``Q.retry_failed``, ``Q.retry_all_failed``, ``python -m lane_pg retry``) neither takes
back nor checks its unique lock, and the retried job carries no owner token, so nothing
it does frees a lock a later push owns (Laravel PR #59567). Real workers, both backends;
the CLI against the test database."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.backend.failed import (
    FailedJobFilter,
    FailedJobRecord,
    FailedJobStore,
    MemoryFailedJobStore,
)
from lane_pg.facade import Job, QueueFacade, UniqueJobSkipped, typed_processors
from lane_pg.types import JobRow, Lane
from lane_pg.worker import Worker, WorkerConfig
from tests.helpers import eventually
from tests.test_cli_queue_commands import cli

SCOPE = {"queue": ""}
SHORT = timedelta(milliseconds=300)


@pytest.fixture(autouse=True)
def _scope(queue_name: str) -> None:
    SCOPE["queue"] = queue_name
    Flaky.broken, Flaky.runs = True, []
    FlakyShort.unique_for = SHORT


@dataclass
class Flaky(Job):
    """Fails while ``broken``; one try, so a failure is terminal and recorded."""

    job_name = "UniqueFlaky"
    max_tries = 1
    backoff = None
    broken: ClassVar[bool] = True
    runs: ClassVar[list[int]] = []
    n: int = 0

    def unique_id(self) -> str | None:
        return f"{SCOPE['queue']}:report"  # one lock per connection: the test's own

    async def handle(self) -> None:
        Flaky.runs.append(self.n)
        if Flaky.broken:
            raise RuntimeError("broken")


@dataclass
class FlakyBeforeHandle(Flaky):
    """The same, releasing its lock right before ``handle()`` (UNIQ-6)."""

    job_name = "UniqueFlakyBeforeHandle"
    unique_until_processing = True


@dataclass
class FlakyShort(Flaky):
    """The same with a lock that expires within the test."""

    job_name = "UniqueFlakyShort"
    unique_for = SHORT


def key_of(cls: type[Flaky]) -> str:
    return f"{cls.job_name}:{SCOPE['queue']}:report"


@pytest.fixture
def store(facade: QueueFacade) -> FailedJobStore:
    failed = MemoryFailedJobStore()
    facade.set_failed_store(failed)
    for cls in (Flaky, FlakyBeforeHandle, FlakyShort):
        facade.registry.register(cls)
    return failed


async def work(backend: JobQueueBackend, facade: QueueFacade, queue: str) -> None:
    processors = typed_processors(facade.registry, facade.events, facade.connection_name())
    config = WorkerConfig(lanes=(Lane(queue),), poll_interval=0.05, burst=True)
    worker = Worker(
        backend,
        dict(processors),
        config,
        failed_store=facade.failed_store(),
        connection=facade.connection_name(),
    )
    await asyncio.wait_for(worker.run(), 30)


async def fail_one(
    backend: JobQueueBackend,
    facade: QueueFacade,
    store: FailedJobStore,
    queue: str,
    cls: type[Flaky],
) -> tuple[JobRow, FailedJobRecord]:
    facade.route(cls, queue=queue)
    assert await facade.push_unique(cls(1)) is True
    await work(backend, facade, queue)
    [record] = await store.page(FailedJobFilter(queue=queue))
    assert record.job_id is not None
    job = await backend.get_job(queue, record.job_id)
    assert job is not None and job.state == "failed"  # retained: the retry is retry_job
    return job, record


def skipped(facade: QueueFacade) -> list[Any]:
    seen: list[Any] = []
    facade.events.listen(UniqueJobSkipped, seen.append)
    return seen


async def test_retry_failed_keeps_the_lock_as_it_is_A9_FAIL_4(
    facade: QueueFacade, backend: JobQueueBackend, store: FailedJobStore, queue_name: str
) -> None:
    job, record = await fail_one(backend, facade, store, queue_name, Flaky)
    suppressed = skipped(facade)
    assert await facade.push_unique(Flaky(2)) is False  # UNIQ-3: the lock lives on
    assert await facade.retry_failed(record.id) is True
    retried = await backend.get_job(queue_name, job.id)
    assert retried is not None and retried.state == "waiting"
    assert "token" not in retried.options["deduplication"]  # no owner token (A9)
    key = key_of(Flaky)
    assert await backend.get_deduplication_job_id(queue_name, key) == job.id  # unchanged
    assert await facade.push_unique(Flaky(3)) is False  # still suppressing
    Flaky.broken = False
    await work(backend, facade, queue_name)
    assert Flaky.runs == [1, 1]  # the retried job ran
    done = await backend.get_job(queue_name, job.id)
    assert done is not None and done.state == "completed"
    assert await backend.get_deduplication_job_id(queue_name, key) == job.id
    assert await facade.push_unique(Flaky(4)) is False  # the lock's TTL, not the job, ends it
    assert len(suppressed) == 3


async def test_a_retried_job_never_frees_a_later_owners_lock_A9_UNIQ_7(
    facade: QueueFacade, backend: JobQueueBackend, store: FailedJobStore, queue_name: str
) -> None:
    """``unique_until_processing``: the first attempt freed the lock before it failed; the
    retry takes nothing back, a later push owns the lock, and the retried job, starting,
    has no token to free it with (Laravel PR #59567)."""
    _, record = await fail_one(backend, facade, store, queue_name, FlakyBeforeHandle)
    assert await facade.retry_failed(record.id) is True
    key = key_of(FlakyBeforeHandle)
    assert await backend.get_deduplication_job_id(queue_name, key) is None  # not reclaimed
    facade.route(FlakyBeforeHandle, queue=queue_name)
    assert await facade.later_unique(timedelta(hours=1), FlakyBeforeHandle(2)) is True
    [later] = [
        row
        for row in (await backend.list_jobs(queue_name, ["delayed"])).items
        if row.data == {"n": 2}
    ]
    Flaky.broken = False
    await work(backend, facade, queue_name)
    assert Flaky.runs == [1, 1]  # the retried one ran; the later push is still delayed
    assert await backend.get_deduplication_job_id(queue_name, key) == later.id
    assert await facade.push_unique(FlakyBeforeHandle(3)) is False


async def test_after_expiry_the_retried_job_leaves_the_next_owner_alone_A9(
    facade: QueueFacade, backend: JobQueueBackend, store: FailedJobStore, queue_name: str
) -> None:
    job, _ = await fail_one(backend, facade, store, queue_name, FlakyShort)
    facade.route(FlakyShort, queue=queue_name)
    FlakyShort.unique_for = timedelta(hours=1)  # the next owner's lock outlives the test

    async def next_owner_pushed() -> bool:  # the first, 300 ms lock runs out on its own
        return await facade.later_unique(timedelta(hours=1), FlakyShort(2))

    await eventually(next_owner_pushed)
    key = key_of(FlakyShort)
    owner = await backend.get_deduplication_job_id(queue_name, key)
    assert owner is not None and owner != job.id
    # No DEDUP-13 conflict with the later owner: the retry does not check the lock.
    assert await facade.retry_all_failed() == 1
    Flaky.broken = False
    await work(backend, facade, queue_name)
    retried = await backend.get_job(queue_name, job.id)
    assert retried is not None and retried.state == "completed"
    assert await backend.get_deduplication_job_id(queue_name, key) == owner


async def test_cli_retry_of_a_unique_job_leaves_its_lock_alone_A9_CLI_9(
    pg_dsn: str, backend: JobQueueBackend, facade: QueueFacade, queue_name: str
) -> None:
    """``python -m lane_pg retry`` against the database: the same rule, in SQL."""
    if backend.failed_records is None:
        pytest.skip("the command retries records of a backend that records failures")
    from lane_pg.postgres.backend import PostgresBackend
    from lane_pg.postgres.failed import DatabaseFailedJobStore

    assert isinstance(backend, PostgresBackend)
    database = DatabaseFailedJobStore(backend)
    facade.set_failed_store(database)
    facade.set_connection_name("postgres")  # the name the command gives --dsn's database
    facade.registry.register(Flaky)
    job, record = await fail_one(backend, facade, database, queue_name, Flaky)
    result = await cli("retry", record.id, dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    retried = await backend.get_job(queue_name, job.id)
    assert retried is not None and retried.state == "waiting"
    assert "token" not in retried.options["deduplication"]
    assert await backend.get_deduplication_job_id(queue_name, key_of(Flaky)) == job.id
    assert await facade.push_unique(Flaky(2)) is False
