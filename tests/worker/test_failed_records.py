"""A real ``python -m lane_pg worker`` process on PostgreSQL records its terminal failures
in ``lane.failed_jobs`` (FAIL-2, FAIL-8, A14): the app binds no store, so the postgres
driver's database store is used, written by ``lane.fail_jobs`` in the transaction that
fails the job (the record's ``failed_at`` is the job's ``finished_at``)."""

from __future__ import annotations

import asyncpg

from lane_pg.backend.failed import FailedJobFilter
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.failed import DatabaseFailedJobStore
from lane_pg.types import Backoff, JobOptions
from tests.worker.conftest import Workers, queue_args


async def test_a_worker_process_records_every_terminal_failure_FAIL_2_FAIL_8_A14(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    failing = await backend.add_job(
        queue_name, "fail", None, JobOptions(attempts=2, backoff=Backoff.fixed(0))
    )
    unknown = await backend.add_job(
        queue_name, "no_such_processor", {"k": 1}, JobOptions(attempts=3)
    )
    fine = await backend.add_job(queue_name, "record", {"n": 1})

    worker = await workers.run(*queue_args(queue_name), "--burst", timeout=30.0)
    assert worker.returncode == 0, worker.describe()

    store = DatabaseFailedJobStore(backend)
    records = {r.job_id: r for r in await store.page(FailedJobFilter(queue=queue_name))}
    assert set(records) == {failing.id, unknown.id}  # one each; none for the completed job
    for job_id, record in records.items():
        job = await backend.get_job(queue_name, job_id)
        assert job is not None and job.state == "failed"
        assert record.failed_at == job.finished_at  # the transition's own transaction
        assert record.connection == "postgres"  # the app's connection label: the driver's name
    assert "RuntimeError" in records[failing.id].exception
    assert records[failing.id].envelope["attempts_made"] == 2
    assert "UnknownJobName" in records[unknown.id].exception
    assert records[unknown.id].envelope["data"] == {"k": 1}
    done = await backend.get_job(queue_name, fine.id)
    assert done is not None and done.state == "completed"
    for record in records.values():
        await store.forget(record.id)
