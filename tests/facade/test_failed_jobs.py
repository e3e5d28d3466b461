"""Failed-job records written by real workers, and retries of them (FAIL-2..5, FAIL-7,
FAIL-8, A4, A9, A14), on every backend-backed driver.

A worker whose store is the database store of its own PostgreSQL database records in the
transaction of the terminal transition; any other store (memory) is written before the
job is settled, and a store that raises leaves the job to its lease (FAIL-3).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.backend.failed import (
    FailedJobFilter,
    FailedJobRecord,
    FailedJobStore,
    MemoryFailedJobStore,
    NullFailedJobStore,
    UndecodableFailedJob,
)
from lane_pg.errors import ConfigurationError, InvalidOptions, UnknownJobName
from lane_pg.facade import (
    EnvelopeOverrides,
    Job,
    JobQueued,
    JobRegistry,
    QueueFacade,
    typed_processors,
)
from lane_pg.facade import failed as facade_failed
from lane_pg.facade.app import App
from lane_pg.types import JSON, Lane
from lane_pg.worker import Worker, WorkerConfig

SECRET = "s3cr3t-hidden-value"


@dataclass
class Poison(Job):
    job_name = "Poison"
    max_tries = 2
    backoff = None
    heal: ClassVar[bool] = False
    runs: ClassVar[list[int]] = []
    n: int

    async def handle(self) -> JSON:
        Poison.runs.append(self.n)
        if not Poison.heal:
            raise ValueError(f"boom {self.n}")
        return {"healed": self.n}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    Poison.heal = False
    Poison.runs = []


@pytest.fixture(params=["memory", "database"])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def store(store_kind: str, backend: JobQueueBackend) -> FailedJobStore:
    if store_kind == "memory":
        return MemoryFailedJobStore()
    if backend.failed_records is None:
        pytest.skip("the database store reads the table of a backend that records failures")
    from lane_pg.postgres.backend import PostgresBackend
    from lane_pg.postgres.failed import DatabaseFailedJobStore

    assert isinstance(backend, PostgresBackend)
    return DatabaseFailedJobStore(backend)


async def work(
    backend: JobQueueBackend,
    facade: QueueFacade,
    store: FailedJobStore | None,
    *queues: str,
    processors: dict[str, Any] | None = None,
    **settings: Any,
) -> Worker:
    """A burst worker over the facade's job classes, recording into ``store``."""
    if processors is None:
        processors = dict(
            typed_processors(facade.registry, facade.events, facade.connection_name())
        )
    config = WorkerConfig(
        lanes=tuple(Lane(queue) for queue in queues), poll_interval=0.05, burst=True, **settings
    )
    worker = Worker(
        backend, processors, config, failed_store=store, connection=facade.connection_name()
    )
    await asyncio.wait_for(worker.run(), 30)
    return worker


async def push_poison(facade: QueueFacade, queue: str, n: int = 1) -> str:
    envelope = facade.envelope(Poison(n=n))
    envelope.queue = queue
    envelope.meta["hidden"] = {"token": SECRET}  # what CTX's hidden values will ride in
    return await facade.dispatch(envelope)


async def records_of(store: FailedJobStore, queue: str) -> list[FailedJobRecord]:
    return await store.page(FailedJobFilter(queue=queue))


async def test_a_poison_job_leaves_one_record_with_every_field_FAIL_2_FAIL_7(
    backend: JobQueueBackend,
    facade: QueueFacade,
    store: FailedJobStore,
    store_kind: str,
    queue_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    facade.registry.register(Poison)
    job_id = await push_poison(facade, queue_name)
    caplog.set_level(logging.DEBUG)
    await work(backend, facade, store, queue_name)

    assert Poison.runs == [1, 1]  # both tries ran; one record, at the end
    [record] = await records_of(store, queue_name)
    assert record.connection == facade.connection_name()
    assert (record.queue, record.job_name, record.job_id) == (queue_name, "Poison", job_id)
    assert "ValueError: boom 1" in record.exception
    assert record.exception_summary == "ValueError: boom 1"
    envelope = record.envelope
    assert envelope["data"] == {"n": 1}
    assert envelope["attempts_made"] == 2
    assert envelope["failed_reason"] == "boom 1"
    options = envelope["options"]
    assert isinstance(options, dict)
    assert options["meta"] == {"hidden": {"token": SECRET}, "connection": record.connection}
    assert SECRET not in caplog.text  # FAIL-7: in the record, never in a log line
    job = await backend.get_job(queue_name, job_id)
    assert job is not None and job.state == "failed"
    if store_kind == "database":
        # Written by lane.fail_jobs in the transition's transaction: the same timestamp.
        assert record.failed_at == job.finished_at


async def test_a_store_that_raises_leaves_the_job_to_its_lease_FAIL_3(
    backend: JobQueueBackend,
    facade: QueueFacade,
    queue_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    class RefusingStore(MemoryFailedJobStore):
        async def log(self, record: FailedJobRecord) -> None:
            raise RuntimeError("failed_jobs is not migrated")

    store = RefusingStore()
    facade.registry.register(Poison)
    job_id = await backend.add_job(
        queue_name, "Poison", {"n": 7}, {"attempts": 1, "meta": {"connection": "x"}}
    )
    caplog.set_level(logging.ERROR, logger="lane_pg.worker")
    worker = await work(backend, facade, store, queue_name, lease=5.0)

    assert Poison.runs == [7]
    assert worker.settlement_failures == 1
    assert "refused its record" in caplog.text and "not migrated" in caplog.text
    held = await backend.get_job(queue_name, job_id.id)
    assert held is not None and held.state == "active" and held.attempts_made == 0
    assert await store.count() == 0

    after_lease = datetime.now(UTC) + timedelta(seconds=6)
    recovered = await backend.recover_stalled([queue_name], now=after_lease)
    assert [(o.id, o.state) for o in recovered] == [(job_id.id, "waiting")]
    back = await backend.get_job(queue_name, job_id.id)
    assert back is not None and back.state == "waiting" and back.finished_at is None


async def test_the_null_store_finalises_and_keeps_nothing_FAIL_3(
    backend: JobQueueBackend, facade: QueueFacade, queue_name: str
) -> None:
    store = NullFailedJobStore()
    facade.registry.register(Poison)
    job_id = await push_poison(facade, queue_name)
    await work(backend, facade, store, queue_name)
    job = await backend.get_job(queue_name, job_id)
    assert job is not None and job.state == "failed"
    assert await store.count() == 0


async def test_without_a_store_the_failure_is_logged_without_meta_FAIL_7_FAIL_8(
    backend: JobQueueBackend,
    facade: QueueFacade,
    queue_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    facade.registry.register(Poison)
    job_id = await push_poison(facade, queue_name)
    caplog.set_level(logging.DEBUG)
    await work(backend, facade, None, queue_name)
    job = await backend.get_job(queue_name, job_id)
    assert job is not None and job.state == "failed"
    assert (
        f"job {queue_name}/{job_id} (Poison) failed for good (no attempts left), attempt 2 of 2:"
        " ValueError: boom 1"
    ) in caplog.text
    assert SECRET not in caplog.text


async def test_an_unknown_job_name_is_recorded_A14(
    backend: JobQueueBackend, facade: QueueFacade, store: FailedJobStore, queue_name: str
) -> None:
    job = await backend.add_job(queue_name, "Renamed", {"x": 1}, {"attempts": 3})
    await work(backend, facade, store, queue_name, processors={})
    [record] = await records_of(store, queue_name)
    assert record.job_name == "Renamed"
    assert record.connection == facade.connection_name()  # no label stored: the worker's
    assert UnknownJobName.__name__ in record.exception
    failed = await backend.get_job(queue_name, job.id)
    assert failed is not None and failed.state == "failed" and failed.attempts_made == 1


@dataclass
class Slow(Job):
    job_name = "Slow"
    max_tries = 3
    timeout = 0.05
    fail_on_timeout = True

    async def handle(self) -> None:
        await asyncio.sleep(30)


async def test_a_timeout_with_fail_on_timeout_is_recorded_FAIL_2(
    backend: JobQueueBackend, facade: QueueFacade, store: FailedJobStore, queue_name: str
) -> None:
    facade.registry.register(Slow)
    job_id = await facade.push_with(Slow(), EnvelopeOverrides(queue=queue_name))
    await work(backend, facade, store, queue_name)
    [record] = await records_of(store, queue_name)
    assert (record.job_name, record.job_id) == ("Slow", job_id)
    assert "TimeoutExceeded" in record.exception
    job = await backend.get_job(queue_name, job_id)
    assert job is not None and job.state == "failed" and job.attempts_made == 1


async def test_retry_of_a_retained_row_runs_the_same_job_again_FAIL_4(
    backend: JobQueueBackend, facade: QueueFacade, store: FailedJobStore, queue_name: str
) -> None:
    facade.registry.register(Poison)
    facade.set_failed_store(store)
    job_id = await push_poison(facade, queue_name)
    await work(backend, facade, store, queue_name)
    [record] = await records_of(store, queue_name)
    queued: list[JobQueued] = []
    facade.events.listen(JobQueued, queued.append)

    assert await facade.retry_failed(record.id) is True
    assert await store.find(record.id) is None
    again = await backend.get_job(queue_name, job_id)
    assert again is not None and again.state == "waiting"
    assert (again.attempts_made, again.attempts_started) == (0, 0)
    assert [(e.queue, e.job_id) for e in queued] == [(queue_name, job_id)]

    Poison.heal = True
    await work(backend, facade, store, queue_name)
    done = await backend.get_job(queue_name, job_id)
    assert done is not None and done.state == "completed"
    assert done.return_value == {"healed": 1}
    assert await store.find(record.id) is None
    assert await facade.retry_failed(record.id) is False  # FAIL-4: unknown id


async def test_retry_after_retention_removed_the_row_pushes_the_record_FAIL_4_RET_7(
    backend: JobQueueBackend, facade: QueueFacade, store: FailedJobStore, queue_name: str
) -> None:
    facade.registry.register(Poison)
    facade.set_failed_store(store)
    label = facade.connection_name()
    options: dict[str, JSON] = {
        "attempts": 1,
        "remove_on_fail": True,
        "deduplication": {"id": f"d-{queue_name}"},
        "meta": {"connection": label, "unique_token": "t1", "kept": 1},
    }
    custom = await backend.add_job(queue_name, "Poison", {"n": 3}, {**options, "job_id": "c-3"})
    generated = await backend.add_job(
        queue_name, "Poison", {"n": 4}, {"attempts": 1, "remove_on_fail": True}
    )
    await work(backend, facade, store, queue_name)
    assert await backend.get_job(queue_name, custom.id) is None  # removed on fail ...
    records = await records_of(store, queue_name)  # ... the record stays (RET-7)
    [record] = [r for r in records if r.job_id == "c-3"]

    assert await facade.retry_failed(record.id) is True
    again = await backend.get_job(queue_name, custom.id)
    assert again is not None and again.state == "waiting" and again.attempts_made == 0
    assert again.data == {"n": 3}
    # A9: no owner token, no deduplication id; the rest of the options as pushed.
    assert again.options["meta"] == {"connection": label, "kept": 1}
    assert "deduplication" not in again.options and again.deduplication_id is None
    assert again.options["remove_on_fail"] is True
    assert again.options["job_id"] == "c-3"

    # A generated id is the queue sequence's (A5): the pushed record gets a new one.
    [other] = [r for r in await records_of(store, queue_name) if r.job_id == generated.id]
    assert await facade.retry_failed(other.id) is True
    assert await store.count(FailedJobFilter(queue=queue_name)) == 0
    waiting = (await backend.list_jobs(queue_name, ["waiting"])).items
    assert sorted((job.id == custom.id, job.data) for job in waiting) == [
        (False, {"n": 4}),
        (True, {"n": 3}),
    ]
    assert generated.id not in [job.id for job in waiting]

    Poison.heal = True
    await work(backend, facade, store, queue_name)
    assert sorted(Poison.runs) == [3, 3, 4, 4]


async def test_a_label_only_push_is_recorded_under_the_workers_connection_CONN_13_FAIL_4(
    backend: JobQueueBackend, facade: QueueFacade, store: FailedJobStore, queue_name: str
) -> None:
    """CONN-6: with no connection registered, a push's connection name is a label; the
    record names the worker's connection (CONN-13), the one a retry goes through."""
    facade.registry.register(Poison)
    facade.set_failed_store(store)
    job_id = await facade.push_with(
        Poison(n=1), EnvelopeOverrides(queue=queue_name, connection="label-only")
    )
    await work(backend, facade, store, queue_name)
    [record] = await records_of(store, queue_name)
    assert record.connection == facade.connection_name() != "label-only"
    assert await facade.retry_failed(record.id) is True
    again = await backend.get_job(queue_name, job_id)
    assert again is not None and again.state == "waiting"


async def test_retry_refuses_unknown_connections_and_undecodable_records_FAIL_4(
    facade: QueueFacade, store: FailedJobStore, queue_name: str
) -> None:
    facade.set_failed_store(store)
    nowhere = FailedJobRecord(
        id="0b6c55ad-3f0c-4a53-9b2a-2a7a3cfa0001",
        connection="nope",
        queue=queue_name,
        job_name="Poison",
        envelope={"queue": queue_name, "id": "9", "name": "Poison", "data": {}, "options": {}},
        exception="x",
        failed_at=datetime.now(UTC),
    )
    garbage = FailedJobRecord(
        id="0b6c55ad-3f0c-4a53-9b2a-2a7a3cfa0002",
        connection=facade.connection_name(),
        queue=queue_name,
        job_name="Poison",
        envelope={"unparseable": True},
        exception="x",
        failed_at=datetime.now(UTC),
    )
    await store.log(nowhere)
    await store.log(garbage)
    with pytest.raises(ConfigurationError, match="'nope', which is not registered"):
        await facade.retry_failed(nowhere.id)
    with pytest.raises(UndecodableFailedJob):
        await facade.retry_failed(garbage.id)
    assert {r.id for r in await records_of(store, queue_name)} == {nowhere.id, garbage.id}
    assert await facade.retry_failed("5f1d1c0e-0000-4000-8000-000000000000") is False
    await store.forget(nowhere.id)
    await store.forget(garbage.id)


async def test_concurrent_retries_of_one_record_push_it_once_FAIL_4(
    backend: JobQueueBackend, facade: QueueFacade, store: FailedJobStore, queue_name: str
) -> None:
    facade.registry.register(Poison)
    facade.set_failed_store(store)
    options: dict[str, JSON] = {"attempts": 1, "remove_on_fail": True}
    await backend.add_job(queue_name, "Poison", {"n": 5}, options)
    await work(backend, facade, store, queue_name)
    [record] = await records_of(store, queue_name)
    outcomes = await asyncio.gather(*(facade.retry_failed(record.id) for _ in range(4)))
    assert sorted(outcomes) == [False, False, False, True]
    assert await backend.get_job_count(queue_name, ["waiting"]) == 1  # a new id, once


async def test_a_push_the_backend_refuses_keeps_the_record_FAIL_4_FAIL_5(
    backend: JobQueueBackend, facade: QueueFacade, store: FailedJobStore, queue_name: str
) -> None:
    facade.set_failed_store(store)
    refused = FailedJobRecord(
        id="0b6c55ad-3f0c-4a53-9b2a-2a7a3cfa0004",
        connection=facade.connection_name(),
        queue=queue_name,
        job_name="Poison",
        envelope={
            "queue": queue_name,
            "id": "c-1",
            "name": "Poison",
            "data": {},
            "options": {"attempts": 0},
        },
        exception="x",
        failed_at=datetime.now(UTC),
    )
    await store.log(refused)
    with pytest.raises(InvalidOptions, match="attempts"):
        await facade.retry_failed(refused.id)
    assert await store.find(refused.id) == refused
    assert await facade.retry_all_failed(where=FailedJobFilter(queue=queue_name)) == 0
    assert await store.find(refused.id) == refused
    assert await backend.get_job(queue_name, "c-1") is None
    await store.forget(refused.id)


async def test_retry_all_keeps_what_it_cannot_push_and_pages_FAIL_5(
    backend: JobQueueBackend,
    facade: QueueFacade,
    store: FailedJobStore,
    queue_name: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(facade_failed, "RETRY_PAGE", 2)  # five records: three pages
    facade.registry.register(Poison)
    facade.set_failed_store(store)
    for n in range(4):
        await push_poison(facade, queue_name, n)
    await work(backend, facade, store, queue_name)
    stranger = FailedJobRecord(
        id="0b6c55ad-3f0c-4a53-9b2a-2a7a3cfa0003",
        connection="gone",
        queue=queue_name,
        job_name="Poison",
        envelope={"queue": queue_name, "id": "77", "name": "Poison", "data": {}, "options": {}},
        exception="x",
        failed_at=datetime.now(UTC) - timedelta(minutes=1),  # first in the walk
    )
    await store.log(stranger)
    assert await store.count(FailedJobFilter(queue=queue_name)) == 5

    retried = await facade.retry_all_failed(where=FailedJobFilter(queue=queue_name))
    assert retried == 4
    assert [r.id for r in await records_of(store, queue_name)] == [stranger.id]
    assert f"failed job {stranger.id} kept" in caplog.text
    assert await backend.get_job_count(queue_name, ["waiting"]) == 4
    await store.forget(stranger.id)


async def test_retry_all_before_a_cutoff_FAIL_5(
    backend: JobQueueBackend, facade: QueueFacade, store: FailedJobStore, queue_name: str
) -> None:
    facade.registry.register(Poison)
    facade.set_failed_store(store)
    await push_poison(facade, queue_name, 1)
    await work(backend, facade, store, queue_name)
    assert await facade.retry_all_failed(before=datetime(2001, 1, 1, tzinfo=UTC)) == 0
    assert await store.count(FailedJobFilter(queue=queue_name)) == 1
    cutoff = datetime.now(UTC) + timedelta(seconds=1)
    assert await facade.retry_all_failed(cutoff, where=FailedJobFilter(queue=queue_name)) == 1


async def test_no_store_bound_is_a_configuration_error_FAIL_8(facade: QueueFacade) -> None:
    assert facade.failed_store() is None
    with pytest.raises(ConfigurationError, match="no failed-job store is bound"):
        await facade.retry_failed("5f1d1c0e-0000-4000-8000-000000000000")
    with pytest.raises(TypeError):
        facade.set_failed_store(object())  # type: ignore[arg-type]


async def test_binding_a_postgres_app_binds_the_database_store_FAIL_8(pg_dsn: str) -> None:
    from lane_pg.postgres.failed import DatabaseFailedJobStore

    app = App(pg_dsn, jobs=None)
    facade = QueueFacade()
    try:
        await app.bind(facade)
        assert isinstance(facade.failed_store(), DatabaseFailedJobStore)
    finally:
        await app.close()
    memory_app = App("memory://", jobs=None)
    memory = QueueFacade()
    try:
        await memory_app.bind(memory)
        assert memory.driver_name() == "memory"
        assert memory.failed_store() is None
    finally:
        await memory_app.close()


async def test_bootstrap_binds_the_database_store_and_run_worker_records_in_it_FAIL_8(
    pg_dsn: str, queue_name: str
) -> None:
    from lane_pg.facade import bootstrap_from_env, run_worker
    from lane_pg.postgres.failed import DatabaseFailedJobStore

    memory = bootstrap_from_env(QueueFacade(), env={"LANE_PG_DRIVER": "memory"})
    assert memory.failed_store() is None

    facade = bootstrap_from_env(QueueFacade(registry=JobRegistry()), env={"LANE_PG_DSN": pg_dsn})
    store = facade.failed_store()
    assert isinstance(store, DatabaseFailedJobStore)  # bound at boot, no I/O yet
    try:
        facade.registry.register(Poison)
        job_id = await push_poison(facade, queue_name)
        config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, burst=True)
        await asyncio.wait_for(run_worker(facade=facade, config=config), 30)
        [record] = await records_of(store, queue_name)
        backend = await facade.driver().backend()  # type: ignore[attr-defined]
        job = await backend.get_job(queue_name, job_id)
        assert record.job_id == job_id and record.connection == "postgres"
        assert record.failed_at == job.finished_at  # recorded by lane.fail_jobs itself
        assert await facade.retry_failed(record.id) is True
    finally:
        await facade.close()
