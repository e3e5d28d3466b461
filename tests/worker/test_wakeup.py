"""Wake-ups of an idle worker: NOTIFY at commit, nothing on rollback, a killed LISTEN
connection, and a lost notification covered by the slow poll (ADD-10, TX-1, TX-2,
CLAIM-7, CLAIM-12).

Latencies are measured on the database clock: ``processed_at`` (set by the claim) minus the
job's ``created_at`` (set inside the enqueue, so before its commit: the measured value can
only be larger than the true commit-to-claim latency).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import asyncpg
import pytest

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.enqueue import add_job
from lane_pg.types import Backoff, JobOptions, JobSpec, QueueDemand
from tests.worker.conftest import (
    EFFECTS_TABLE,
    Workers,
    effects,
    job_row,
    queue_args,
    state_of,
    until,
    wait_for_state,
)

SLOW_POLL = "30000"  # ms: far beyond every deadline below, so only a wake-up can meet them


async def _started_after(db: asyncpg.Connection, queue: str, job_id: str) -> timedelta:
    """Wait until the job ran, then return processed_at - created_at."""
    await wait_for_state(db, queue, job_id, "completed", timeout=10)
    row = await job_row(db, queue, job_id)
    assert row is not None
    latency: timedelta = row["processed_at"] - row["created_at"]
    return latency


async def _recorded(db: asyncpg.Connection, queue: str, job_id: str) -> bool:
    return bool(
        await db.fetchval(
            f"SELECT count(*) FROM {EFFECTS_TABLE} WHERE queue = $1 AND job_id = $2",
            queue,
            job_id,
        )
    )


async def test_listen_connection_killed_worker_reconnects_and_wakes_promptly_CLAIM_12(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    worker = await workers.start(*queue_args(queue_name), "--poll-interval", SLOW_POLL)
    application_name = f"lane_pg listener {worker.worker_id}"

    async def listener_pid(exclude: int | None = None) -> int | None:
        # A listener that has run a statement (its LISTEN) and is idle, waiting.
        pid: int | None = await db.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1"
            " AND state = 'idle' AND query <> '' AND pid IS DISTINCT FROM $2",
            application_name,
            exclude,
        )
        return pid

    first = await until(listener_pid, timeout=10)
    assert await db.fetchval("SELECT pg_terminate_backend($1)", first)

    second = await until(lambda: listener_pid(exclude=first), timeout=15)
    assert second != first
    job = await backend.add_job(queue_name, "record", {"after": "reconnect"})
    latency = await _started_after(db, queue_name, job.id)
    print(
        f"\nafter the LISTEN reconnect: claimed {latency.total_seconds() * 1000:.1f} ms after add"
    )
    assert latency < timedelta(seconds=3)
    assert worker.alive(), worker.describe()


async def test_rolled_back_enqueue_is_never_seen_and_committed_one_wakes_at_once_TX_1_ADD_10(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    worker = await workers.start(*queue_args(queue_name), "--poll-interval", SLOW_POLL)
    # The queue's row exists before the transaction: a first add of a new queue inside an
    # open transaction would make every other first add of that queue wait for it.
    warm_up = await backend.add_job(queue_name, "record", {"warm_up": True})
    await until(lambda: _recorded(db, queue_name, warm_up.id), timeout=10)
    tx_conn = await asyncpg.connect(workers.dsn)
    try:
        # Rolled back: the worker claims a job committed later (a sentinel) while the
        # transaction is still open, and never the uncommitted one (TX-2).
        tx = tx_conn.transaction()
        await tx.start()
        hidden = await add_job(tx_conn, queue_name, "record", {"tx": "rolled back"})
        sentinel = await backend.add_job(queue_name, "record", {"sentinel": 1})
        await until(lambda: _recorded(db, queue_name, sentinel.id), timeout=10)
        assert await state_of(db, queue_name, hidden.id) is None  # invisible outside
        assert (
            await tx_conn.fetchval(
                "SELECT state FROM lane.jobs WHERE queue = $1 AND id = $2", queue_name, hidden.id
            )
            == "waiting"
        )
        await tx.rollback()
        after = await backend.add_job(queue_name, "record", {"sentinel": 2})
        await until(lambda: _recorded(db, queue_name, after.id), timeout=10)
        assert await job_row(db, queue_name, hidden.id) is None
        assert sorted(row["job_id"] for row in await effects(db, queue_name)) == sorted(
            [warm_up.id, sentinel.id, after.id]
        )

        # Committed: the idle worker is woken by the commit's NOTIFY, not by its poll.
        async with tx_conn.transaction():
            await tx_conn.execute(f"SELECT count(*) FROM {EFFECTS_TABLE} WHERE false")
            visible = await add_job(tx_conn, queue_name, "record", {"tx": "committed"})
        latency = await _started_after(db, queue_name, visible.id)
    finally:
        await tx_conn.close()
    print(f"\ncommitted enqueue to claim: {latency.total_seconds() * 1000:.1f} ms")
    assert latency < timedelta(seconds=1)
    assert await _recorded(db, queue_name, visible.id)
    assert worker.alive(), worker.describe()


async def test_lost_notification_is_covered_by_the_poll_interval_CLAIM_12(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """A job that becomes claimable without any NOTIFY (here: the queue's pause flag cleared
    behind the library's back) is found by the slow poll, within ``--poll-interval``."""
    await backend.pause_queue(queue_name)
    spawned_at: datetime = await db.fetchval("SELECT clock_timestamp()")
    worker = await workers.start(*queue_args(queue_name), "--poll-interval", "1000")
    job = await backend.add_job(queue_name, "record", {"paused": True})
    added_at: datetime = await db.fetchval("SELECT clock_timestamp()")

    async def add_notification_handled() -> bool:
        # The add's NOTIFY wakes the worker, whose first statement is a claim that finds
        # the queue paused. Wait until one of the worker's own sessions (opened after it
        # was spawned; its LISTEN session aside) has finished a statement after the add,
        # so the unpause below can only be found by the poll.
        last: datetime | None = await db.fetchval(
            "SELECT max(state_change) FROM pg_stat_activity WHERE state = 'idle'"
            " AND datname = current_database()"  # not the sessions of other test processes
            " AND backend_start > $1 AND application_name <> $2 AND pid <> pg_backend_pid()",
            spawned_at,
            f"lane_pg listener {worker.worker_id}",
        )
        return last is not None and last > added_at

    await until(add_notification_handled, timeout=10)
    assert await state_of(db, queue_name, job.id) == "waiting"
    unpaused: datetime = await db.fetchval(
        "UPDATE lane.queues SET paused = false WHERE name = $1 RETURNING clock_timestamp()",
        queue_name,
    )
    await wait_for_state(db, queue_name, job.id, "completed", timeout=10)
    row = await job_row(db, queue_name, job.id)
    assert row is not None
    waited: timedelta = row["processed_at"] - unpaused
    print(f"\nlost NOTIFY, poll interval 1 s: claimed {waited.total_seconds():.2f} s later")
    assert waited < timedelta(seconds=3)
    assert worker.alive(), worker.describe()


# ------------------------------------------------------------------ earlier due times
# CLAIM-7: "the worker sleeps exactly until the next delayed job is due" for every way a
# job gets an earlier due time. The worker polls every 5 s (the default) and the test holds
# the maintenance leadership, so no promotion pass wakes it either: only the wake-up of
# lane._wake_for_due can make it start the job well before its next poll.

DEFAULT_POLL = "5000"  # ms
DUE_IN = 1.0  # seconds from the change to the job's due time
BOUND = timedelta(seconds=1.5)  # started before due + 1.5 s; the next poll is >= 4 s away


async def _asleep_after_a_job(
    backend: PostgresBackend, db: asyncpg.Connection, queue: str
) -> datetime:
    """Run one plain job to the end: the worker's next sleep (5 s, no timer or a later
    one) begins right after its completion. Returns that completion time."""
    sentinel = await backend.add_job(queue, "record", {"sentinel": True})
    await wait_for_state(db, queue, sentinel.id, "completed", timeout=10)
    row = await job_row(db, queue, sentinel.id)
    assert row is not None
    finished: datetime = row["finished_at"]
    return finished


async def _start_delay(
    db: asyncpg.Connection, queue: str, job_id: str, slept_from: datetime, changed: datetime
) -> timedelta:
    """Wait until the job ran; return how long after its due time it started."""
    # Without a wake-up the worker looks again >= 5 s after slept_from; this bound needs
    # it to look within 1 + 1.5 s of the change, so the change must follow slept_from soon.
    assert changed - slept_from < timedelta(seconds=1), (slept_from, changed)
    await wait_for_state(db, queue, job_id, "completed", timeout=15)
    row = await job_row(db, queue, job_id)
    assert row is not None
    late: timedelta = row["processed_at"] - row["available_at"]
    assert row["available_at"] >= changed  # the change made it due later than now
    return late


ChangeMaker = Callable[[PostgresBackend, str, str], Awaitable[str]]


async def _delayed_add(backend: PostgresBackend, queue: str, prepared: str) -> str:
    return (await backend.add_job(queue, "record", {"delayed": 1}, JobOptions(delay=DUE_IN))).id


async def _delayed_bulk_add(backend: PostgresBackend, queue: str, prepared: str) -> str:
    added = await backend.add_jobs(
        queue,
        [
            JobSpec("record", {"bulk": 1}, JobOptions(delay=30)),
            JobSpec("record", {"bulk": 2}, JobOptions(delay=DUE_IN)),
        ],
    )
    return added[1].id


async def _retry_with_backoff(backend: PostgresBackend, queue: str, prepared: str) -> str:
    job_id, token = prepared.split(" ")
    await backend.fail_job(queue, job_id, token, "first attempt fails")
    return job_id


async def _delay_job(backend: PostgresBackend, queue: str, prepared: str) -> str:
    job_id, token = prepared.split(" ")
    await backend.delay_job(queue, job_id, token, DUE_IN)
    return job_id


async def _reschedule(backend: PostgresBackend, queue: str, prepared: str) -> str:
    await backend.reschedule_job(queue, prepared, DUE_IN)
    return prepared


async def _prepare(backend: PostgresBackend, queue: str, how: str) -> str:
    """What must exist before the worker starts: a job the test itself holds (a claim the
    worker cannot take from it), or a job due in a minute (a later timer)."""
    if how == "held":
        await backend.add_job(
            queue,
            "record",
            {"held": True},
            JobOptions(attempts=2, backoff=Backoff.fixed(DUE_IN)),
        )
        [held] = await backend.claim_jobs("test-holder", [QueueDemand(queue, 1)], 120)
        return f"{held.id} {held.lock_token}"
    if how == "later":
        return (await backend.add_job(queue, "record", None, JobOptions(delay=60))).id
    return ""


@pytest.mark.parametrize(
    ("prepare", "change"),
    [
        pytest.param("", _delayed_add, id="delayed_add"),
        pytest.param("", _delayed_bulk_add, id="delayed_bulk_add"),
        pytest.param("held", _retry_with_backoff, id="retry_with_backoff"),
        pytest.param("held", _delay_job, id="delay_job"),
        pytest.param("later", _reschedule, id="reschedule"),
    ],
)
async def test_a_job_that_becomes_due_earlier_wakes_the_sleeping_worker_CLAIM_7(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    maintenance_held: str,
    prepare: str,
    change: ChangeMaker,
) -> None:
    prepared = await _prepare(backend, queue_name, prepare)
    worker = await workers.start(*queue_args(queue_name), "--poll-interval", DEFAULT_POLL)
    slept_from = await _asleep_after_a_job(backend, db, queue_name)
    changed: datetime = await db.fetchval("SELECT clock_timestamp()")
    job_id = await change(backend, queue_name, prepared)
    late = await _start_delay(db, queue_name, job_id, slept_from, changed)
    print(f"\n{change.__name__}: started {late.total_seconds() * 1000:.1f} ms after due")
    assert late < BOUND
    assert await _recorded(db, queue_name, job_id)
    assert worker.alive(), worker.describe()
