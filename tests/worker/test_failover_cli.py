"""``python -m lane_pg worker --connection <failover connection>`` as a real process
(FOV-5, FOV-6, FOV-8, CLI-1, CLI-2): one worker process serves every connection of the
list, a connection that is down (a PostgreSQL DSN on a closed port) is retried with
backoff and logged once, and ``--queue`` needs every connection to filter by queue.

The failover connection is configured from the environment (``LANE_PG_DRIVER=failover``,
FOV-2): two PostgreSQL stores are the test database's ``lane`` schema and a freshly
migrated schema of the test's own."""

from __future__ import annotations

import signal

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from tests.conftest import FreshSchema
from tests.worker.conftest import Workers, effects, queue_args, until, wait_for_state
from tests.worker.failover_app import DEBUG_LOGGERS_ENV, LEGACY_FAILOVER_ENV

FAILOVER_APP = "tests.worker.failover_app:app"
CLOSED_PORT_DSN = "postgresql://postgres@127.0.0.1:1/nowhere"


def failover_env(primary_dsn: str, fallback_dsn: str, fallback_schema: str) -> dict[str, str]:
    return {
        "LANE_PG_DRIVER": "failover",
        "LANE_PG_FAILOVER_CONNECTIONS": "primary:postgres,fallback:postgres",
        "LANE_PG_FAILOVER_PRIMARY_DSN": primary_dsn,
        "LANE_PG_FAILOVER_PRIMARY_SCHEMA": "lane",
        "LANE_PG_FAILOVER_FALLBACK_DSN": fallback_dsn,
        "LANE_PG_FAILOVER_FALLBACK_SCHEMA": fallback_schema,
        DEBUG_LOGGERS_ENV: "lane_pg.facade.failover",
    }


async def _completed(store: PostgresBackend, queue: str, job_id: str) -> bool:
    return await store.get_job_state(queue, job_id) == "completed"


async def test_one_worker_process_serves_both_connections_FOV_5_FOV_6(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    fresh_schema: FreshSchema,
    pg_dsn: str,
    queue_name: str,
) -> None:
    schema = await fresh_schema()
    fallback = await PostgresBackend.connect(pg_dsn, schema=schema, min_size=1, max_size=2)
    try:
        on_primary = [(await backend.add_job(queue_name, "record")).id for _ in range(3)]
        on_fallback = [(await fallback.add_job(queue_name, "record")).id for _ in range(2)]
        worker = await workers.start(
            *queue_args(queue_name),
            "--connection",
            "failover",
            "--poll-interval",
            "50",
            app=FAILOVER_APP,
            env=failover_env(pg_dsn, pg_dsn, schema),
        )
        assert "connection failover (failover: primary, fallback;" in worker.stdout()
        for job_id in on_primary:
            await wait_for_state(db, queue_name, job_id, "completed")
        for job_id in on_fallback:
            await until(lambda job_id=job_id: _completed(fallback, queue_name, job_id))
        # Each ran once, in this one process, and was completed on the store it came from.
        ran = {row["job_id"] for row in await effects(db, queue_name)}
        assert ran == {*on_primary, *on_fallback} and len(await effects(db, queue_name)) == 5
        assert {row["pid"] for row in await effects(db, queue_name)} == {worker.pid}
        worker.send(signal.SIGTERM)
        assert await worker.wait_exit() == 0, worker.describe()
        assert ": 5 completed" in worker.stdout(), worker.describe()
    finally:
        await fallback.close()


async def test_a_down_primary_does_not_stop_the_fallback_FOV_5(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, pg_dsn: str, queue_name: str
) -> None:
    """The primary is a closed port: the fallback (the ``lane`` schema) is served at once,
    the primary retried with backoff: one warning for the outage, the retries at DEBUG."""
    jobs = [(await backend.add_job(queue_name, "record")).id for _ in range(3)]
    worker = await workers.start(
        *queue_args(queue_name),
        "--connection",
        "failover",
        "--poll-interval",
        "50",
        app=FAILOVER_APP,
        env=failover_env(CLOSED_PORT_DSN, pg_dsn, "lane"),
    )
    for job_id in jobs:
        await wait_for_state(db, queue_name, job_id, "completed")

    def retries() -> int:
        return worker.stderr().count("failover connection 'primary' still failing")

    await until(lambda: _async(retries() >= 3), timeout=20)
    later = await backend.add_job(queue_name, "record")
    await wait_for_state(db, queue_name, later.id, "completed")
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()
    warnings = [
        line
        for line in worker.stderr().splitlines()
        if line.startswith("WARNING") and "'primary'" in line
    ]
    assert len(warnings) == 1, worker.describe()
    assert "ConnectionRefusedError" in warnings[0]


async def _async(value: bool) -> bool:
    return value


async def test_queue_needs_every_connection_to_filter_FOV_8(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    job = await backend.add_job(queue_name, "record")
    worker = await workers.refused(
        *queue_args(queue_name),
        "--connection",
        "legacy-failover",
        app=FAILOVER_APP,
        env={LEGACY_FAILOVER_ENV: "1"},
    )
    assert worker.returncode == 2, worker.describe()  # a configuration error
    assert "failover connection 'legacy'" in worker.stderr()
    assert "queue filtering" in worker.stderr()
    stored = await backend.get_job(queue_name, job.id)
    assert stored is not None and (stored.state, stored.attempts_started) == ("waiting", 0)
