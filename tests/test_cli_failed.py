"""``python -m lane_pg failed | retry | forget | flush`` in a subprocess, as a user runs them
(CLI-8..11), against the test database's ``lane.failed_jobs``.

Records come from real workers (a processor that fails, settled by ``lane.fail_jobs`` with
the database store) or are logged through ``DatabaseFailedJobStore``; other tests write the
same table, so listings filter by the test's own queue.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from lane_pg.backend.failed import FailedJobFilter, FailedJobRecord
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.failed import DatabaseFailedJobStore
from lane_pg.postgres.schema import migrate
from lane_pg.types import JSON, JobRow, Lane
from lane_pg.worker import JobContext, Worker, WorkerConfig
from tests.test_cli_queue_commands import cli, unique_queue

CONNECTION = "postgres"  # the name the commands give the --dsn database by default
HEALED: set[str] = set()


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


@pytest.fixture
def store(backend: PostgresBackend) -> DatabaseFailedJobStore:
    return DatabaseFailedJobStore(backend)


async def flaky(job: JobRow, ctx: JobContext) -> JSON:
    if job.queue not in HEALED:
        raise RuntimeError(f"flaky {job.id} is broken")
    return "fixed"


async def work(backend: PostgresBackend, store: DatabaseFailedJobStore, queue: str) -> Worker:
    config = WorkerConfig(lanes=(Lane(queue),), poll_interval=0.05, burst=True)
    worker = Worker(backend, {"flaky": flaky}, config, failed_store=store, connection=CONNECTION)
    await asyncio.wait_for(worker.run(), 30)
    return worker


async def failed_jobs(
    backend: PostgresBackend, store: DatabaseFailedJobStore, queue: str, count: int
) -> list[FailedJobRecord]:
    """``count`` jobs failed for good by a real worker, and their records."""
    for _ in range(count):
        await backend.add_job(queue, "flaky", None, {"attempts": 1})
    await work(backend, store, queue)
    records = await store.page(FailedJobFilter(queue=queue))
    assert len(records) == count
    return records


def logged(queue: str, age: timedelta) -> FailedJobRecord:
    return FailedJobRecord(
        id=str(uuid.uuid4()),
        connection=CONNECTION,
        queue=queue,
        job_name="flaky",
        envelope={
            "queue": queue,
            "id": f"x-{uuid.uuid4().hex[:6]}",
            "name": "flaky",
            "data": None,
            "options": {},
        },
        exception="Traceback (most recent call last):\n  ...\nRuntimeError: old",
        failed_at=datetime.now(UTC) - age,
    )


async def test_failed_lists_records_page_by_page_CLI_8(
    pg_dsn: str, backend: PostgresBackend, store: DatabaseFailedJobStore
) -> None:
    queue = unique_queue("failed")
    records = await failed_jobs(backend, store, queue, 5)

    seen: list[str] = []
    jobs: list[str] = []
    after: list[str] = []
    for _ in range(4):
        result = await cli("failed", "--queue", queue, "--limit", "2", *after, dsn=pg_dsn)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == "id\tjob_id\tconnection\tqueue\tjob_name\tfailed_at\texception"
        rows = [line.split("\t") for line in lines[1:] if not line.startswith("lane_pg:")]
        for row in rows:
            assert row[2:5] == [CONNECTION, queue, "flaky"]
            assert row[6].startswith("RuntimeError: flaky ")
        seen += [row[0] for row in rows]
        jobs += [row[1] for row in rows]
        more = [line for line in lines if line.startswith("lane_pg: more")]
        if not more:
            break
        assert "(5 match in all)" in more[0]
        after = ["--after", more[0].rsplit(" ", 1)[1]]
    assert seen == [record.id for record in records]  # oldest first, each once
    assert jobs == [record.job_id for record in records]

    nothing = await cli("failed", "--queue", queue, "--job", "other", dsn=pg_dsn)
    assert nothing.returncode == 0 and nothing.stdout.count("\n") == 1


async def test_commands_exit_non_zero_without_a_store_CLI_8_CLI_11() -> None:
    for args in (["failed"], ["retry", "all"], ["forget", str(uuid.uuid4())], ["flush"]):
        result = await cli(*args, "--dsn", "memory://")
        assert result.returncode == 1, (args, result.stdout)
        assert "no failed-job store is bound" in result.stderr


async def test_retry_good_and_bad_ids_retries_the_good_one_and_exits_1_CLI_9(
    pg_dsn: str, backend: PostgresBackend, store: DatabaseFailedJobStore
) -> None:
    queue = unique_queue("retry")
    [record] = await failed_jobs(backend, store, queue, 1)
    unknown = str(uuid.uuid4())

    result = await cli("retry", record.id, "bad-uuid", unknown, dsn=pg_dsn)
    assert result.returncode == 1
    assert result.stdout == f"lane_pg: retried failed job {record.id} (job {record.job_id})\n"
    for bad in ("bad-uuid", unknown):
        assert f"{bad}: no failed job has id '{bad}'" in result.stderr
    assert result.stderr.count("list them with: python -m lane_pg failed") == 2
    assert await store.find(record.id) is None
    job_id = record.job_id
    assert job_id is not None
    again = await backend.get_job(queue, job_id)
    assert again is not None and again.state == "waiting" and again.attempts_made == 0

    HEALED.add(queue)  # the job runs again on its queue, and succeeds
    await work(backend, store, queue)
    done = await backend.get_job(queue, job_id)
    assert done is not None and done.state == "completed" and done.return_value == "fixed"


async def test_retry_all_of_a_queue_and_a_record_of_another_connection_CLI_9(
    pg_dsn: str, backend: PostgresBackend, store: DatabaseFailedJobStore
) -> None:
    queue = unique_queue("retryall")
    await failed_jobs(backend, store, queue, 2)
    stranger = dataclasses.replace(logged(queue, timedelta(0)), connection="elsewhere")
    await store.log(stranger)

    result = await cli("retry", "all", "--queue", queue, dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "lane_pg: retried 2 failed job(s)\n"
    assert "kept" in result.stderr and "'elsewhere'" in result.stderr
    assert [r.id for r in await store.page(FailedJobFilter(queue=queue))] == [stranger.id]
    assert await backend.get_job_count(queue, ["waiting"]) == 2

    alone = await cli("retry", stranger.id, dsn=pg_dsn)
    assert alone.returncode == 1 and "not registered" in alone.stderr
    assert "no known store holds its job" in alone.stderr
    usage = await cli("retry", "all", stranger.id, dsn=pg_dsn)
    assert usage.returncode == 1 and "not both" in usage.stderr
    # --connection no longer relabels the --dsn database as the record's connection: its
    # job failed on a store this configuration does not know, and is pushed nowhere.
    named = await cli("retry", stranger.id, "--connection", "elsewhere", dsn=pg_dsn)
    assert named.returncode != 0 and "'elsewhere'" in named.stderr
    assert await store.find(stranger.id) is not None
    assert await backend.get_job_count(queue, ["waiting"]) == 2


async def test_retry_of_a_record_named_by_a_label_whose_job_is_here_CLI_9_CONN_6(
    pg_dsn: str, backend: PostgresBackend, store: DatabaseFailedJobStore
) -> None:
    """A record naming a connection that was only a push's label (written so before
    records named the worker's connection, or by stalled recovery) is retried into the
    one store that holds its failed job."""
    queue = unique_queue("label")
    [record] = await failed_jobs(backend, store, queue, 1)
    await store.forget(record.id)
    labelled = dataclasses.replace(record, connection="nope")
    await store.log(labelled)
    result = await cli("retry", labelled.id, dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert record.job_id is not None
    again = await backend.get_job(queue, record.job_id)
    assert again is not None and again.state == "waiting"


async def test_forget_one_record_CLI_10(
    pg_dsn: str, backend: PostgresBackend, store: DatabaseFailedJobStore
) -> None:
    queue = unique_queue("forget")
    record = logged(queue, timedelta(0))
    await store.log(record)
    result = await cli("forget", record.id, dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: forgot failed job {record.id} (job {record.job_id})\n"
    assert await store.find(record.id) is None
    again = await cli("forget", record.id, dsn=pg_dsn)
    assert again.returncode == 1 and "no failed job has id" in again.stderr
    bad = await cli("forget", "nope", dsn=pg_dsn)
    assert bad.returncode == 1 and "python -m lane_pg failed" in bad.stderr


async def test_flush_hours_keeps_newer_records_CLI_10(
    pg_dsn: str, backend: PostgresBackend, store: DatabaseFailedJobStore
) -> None:
    queue = unique_queue("flush")
    old = logged(queue, timedelta(hours=200))
    new = logged(queue, timedelta(hours=1))
    await store.log(old)
    await store.log(new)
    result = await cli("flush", "--hours", "168", dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("lane_pg: flushed ")
    assert result.stdout.endswith(" failed job(s) older than 7d\n")
    assert [r.id for r in await store.page(FailedJobFilter(queue=queue))] == [new.id]
    bad = await cli("flush", "--hours", "soon", dsn=pg_dsn)
    assert bad.returncode == 1 and "--hours" in bad.stderr
    await store.forget(new.id)


async def test_retry_and_forget_take_a_job_id_and_refuse_an_ambiguous_one_CLI_9(
    pg_dsn: str, backend: PostgresBackend, store: DatabaseFailedJobStore
) -> None:
    """What a user has is the job's id (``retry 16``): one record carries it, so it is
    retried; an id two queues share is refused with the candidates, and ``--queue``
    picks one. Nothing changes on a refusal."""
    queue = unique_queue("byjob")
    [record] = await failed_jobs(backend, store, queue, 1)
    assert record.job_id is not None and record.job_id.isdigit()  # a generated id: "16"
    result = await cli("retry", record.job_id, "--queue", queue, dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert await store.find(record.id) is None
    again = await backend.get_job(queue, record.job_id)
    assert again is not None and again.state == "waiting"

    shared = f"job-{uuid.uuid4().hex[:8]}"
    first, second = unique_queue("amb1"), unique_queue("amb2")
    records = []
    for name in (first, second):
        one = logged(name, timedelta(0))
        one = dataclasses.replace(one, envelope={**one.envelope, "id": shared})
        await store.log(one)
        records.append(one)
    ambiguous = await cli("retry", shared, dsn=pg_dsn)
    assert ambiguous.returncode == 1
    assert "names 2 failed-job records: give --queue, or use a record id" in ambiguous.stderr
    assert all(f"record {one.id} (queue {one.queue}" in ambiguous.stderr for one in records)
    forget_both = await cli("forget", shared, dsn=pg_dsn)
    assert forget_both.returncode == 1 and "names 2 failed-job records" in forget_both.stderr
    assert [await store.find(one.id) is not None for one in records] == [True, True]

    forgot = await cli("forget", shared, "--queue", second, dsn=pg_dsn)
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout == f"lane_pg: forgot failed job {records[1].id} (job {shared})\n"
    assert await store.find(records[0].id) is not None
    assert await store.find(records[1].id) is None
    await store.forget(records[0].id)


OTHER_SCHEMA = "lane_cli_other"


@pytest.fixture
async def other(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    """A second store: another schema of the test database (a store is a DSN and schema)."""
    await migrate(pg_dsn, schema=OTHER_SCHEMA)
    be = await PostgresBackend.connect(pg_dsn, schema=OTHER_SCHEMA, max_size=2)
    yield be
    await be.close()


def two_stores(pg_dsn: str) -> dict[str, str]:
    """The app's boot configuration: a failover list over the two stores."""
    return {
        "LANE_PG_DRIVER": "failover",
        "LANE_PG_FAILOVER_CONNECTIONS": "main:postgres,other:postgres",
        "LANE_PG_FAILOVER_MAIN_DSN": pg_dsn,
        "LANE_PG_FAILOVER_OTHER_DSN": pg_dsn,
        "LANE_PG_FAILOVER_OTHER_SCHEMA": OTHER_SCHEMA,
    }


async def test_retry_pushes_into_the_store_the_record_names_never_the_dsn_one_CLI_11(
    pg_dsn: str, backend: PostgresBackend, store: DatabaseFailedJobStore, other: PostgresBackend
) -> None:
    """The commands read the boot configuration (LANE_PG_DRIVER, the failover list): a
    record kept in main's store that failed on "other" goes back into other's store."""
    queue = unique_queue("stores")
    record = dataclasses.replace(logged(queue, timedelta(0)), connection="other")
    await store.log(record)
    env = two_stores(pg_dsn)
    listing = await cli("failed", "--queue", queue, "--connection", "main", extra_env=env)
    assert listing.returncode == 0, listing.stderr
    assert record.id in listing.stdout
    whole = await cli("failed", extra_env=env)
    assert whole.returncode == 1 and "give --connection main or other" in whole.stderr

    result = await cli("retry", record.id, "--connection", "main", extra_env=env)
    assert result.returncode == 0, result.stderr
    assert record.job_id is not None
    assert await backend.get_job(queue, record.job_id) is None  # not main's database
    pushed = await other.get_job(queue, record.job_id)
    assert pushed is not None and pushed.state == "waiting"
    assert await store.find(record.id) is None


async def test_a_record_of_a_memory_connection_is_not_retried_into_the_cli_process_CLI_11(
    pg_dsn: str, backend: PostgresBackend, store: DatabaseFailedJobStore
) -> None:
    queue = unique_queue("memory")
    record = dataclasses.replace(logged(queue, timedelta(0)), connection="memory")
    await store.log(record)
    env = {"LANE_PG_CONNECTIONS": "memory"}
    result = await cli("retry", record.id, dsn=pg_dsn, extra_env=env)
    assert result.returncode == 1
    assert "a memory store that lives in the app's process" in result.stderr
    assert await store.find(record.id) is not None  # kept
    await store.forget(record.id)
