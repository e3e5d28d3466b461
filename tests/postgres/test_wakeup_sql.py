"""Which changes wake the LISTENing workers for a job that becomes due later (CLAIM-7,
ADD-10): the stored functions called as plain SQL, notifications read on a LISTEN
connection.

A job that becomes due at ``t`` sends a NOTIFY only when no other delayed job of its queue
is due after now and no later than ``t`` (``lane._wake_for_due``): an idle worker sleeps
until the earliest delayed job it knows of, so only an earlier one can be missed. That
covers a delayed add (single, custom id and bulk), a retry with backoff, ``reschedule_job``
and ``delay_job``. Plain adds keep their NOTIFY.

"Not woken" is proven with a sentinel NOTIFY sent after the change: PostgreSQL delivers
notifications in commit order, so once the sentinel arrived, nothing from the change can.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable

import asyncpg
import pytest

CHANNEL = "lane.jobs"
WAIT = 10.0
MINUTE_MS = 60_000


class Wakeups:
    """A LISTEN connection on the lane channel and a writer connection (autocommit)."""

    def __init__(self, listening: asyncpg.Connection, writer: asyncpg.Connection) -> None:
        self.listening = listening
        self.writer = writer
        self.payloads: list[str] = []
        self._arrived = asyncio.Event()

    def on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self.payloads.append(payload)
        self._arrived.set()

    async def _sentinel(self) -> None:
        sentinel = f"sentinel-{uuid.uuid4().hex}"
        await self.writer.execute("SELECT pg_notify($1, $2)", CHANNEL, sentinel)
        async with asyncio.timeout(WAIT):
            while sentinel not in self.payloads:
                self._arrived.clear()
                await self._arrived.wait()

    async def woke(self, queue: str, change: Awaitable[object]) -> int:
        """How many wake-ups for ``queue`` the committed ``change`` sent (0 or 1: NOTIFY
        collapses equal payloads of one transaction)."""
        await self._sentinel()
        start = len(self.payloads)
        await change
        await self._sentinel()
        return self.payloads[start:].count(queue)


@pytest.fixture
async def wakeups(pg_dsn: str) -> AsyncIterator[Wakeups]:
    listening = await asyncpg.connect(pg_dsn)
    writer = await asyncpg.connect(pg_dsn)
    watcher = Wakeups(listening, writer)
    await listening.add_listener(CHANNEL, watcher.on_notify)
    try:
        yield watcher
    finally:
        await listening.close()
        await writer.close()


def _delayed(ms: int, **more: object) -> str:
    return json.dumps({"delay_ms": ms, **more})


async def _add_delayed(w: Wakeups, queue: str, ms: int, **more: object) -> int:
    return await w.woke(
        queue,
        w.writer.fetchval(
            "SELECT (lane.add_job($1, 'n', 'null', $2::jsonb)).id", queue, _delayed(ms, **more)
        ),
    )


async def test_a_delayed_add_wakes_only_when_it_is_the_earliest_CLAIM_7(
    wakeups: Wakeups, queue_name: str
) -> None:
    assert await _add_delayed(wakeups, queue_name, 10 * MINUTE_MS) == 1  # no timer yet
    assert await _add_delayed(wakeups, queue_name, 20 * MINUTE_MS) == 0  # later: the timer holds
    assert await _add_delayed(wakeups, queue_name, 10 * MINUTE_MS) == 0  # due with another one
    assert await _add_delayed(wakeups, queue_name, 5 * MINUTE_MS) == 1  # earlier than every timer
    # A custom id goes through lane._store_jobs: same rule.
    assert await _add_delayed(wakeups, queue_name, 1 * MINUTE_MS, job_id="c-1") == 1
    assert await _add_delayed(wakeups, queue_name, 30 * MINUTE_MS, job_id="c-2") == 0
    # Other queues' delayed jobs do not count.
    assert await _add_delayed(wakeups, f"{queue_name}_b", 40 * MINUTE_MS) == 1
    # A plain add always wakes (ADD-10).
    assert (
        await wakeups.woke(
            queue_name, wakeups.writer.execute("SELECT lane.add_job($1, 'n')", queue_name)
        )
        == 1
    )


async def test_an_overdue_delayed_job_does_not_stand_for_a_timer_CLAIM_7(
    wakeups: Wakeups, queue_name: str
) -> None:
    """A delayed job already due (not promoted yet) may already have woken its sleepers:
    a later one must still wake them."""
    await wakeups.writer.execute(
        "SELECT lane.add_job($1, 'n', 'null', $2::jsonb, clock_timestamp() - interval '1 hour')",
        queue_name,
        _delayed(1000),
    )
    assert await _add_delayed(wakeups, queue_name, 10 * MINUTE_MS) == 1


async def test_a_bulk_add_wakes_once_for_its_earliest_delayed_job_CLAIM_7(
    wakeups: Wakeups, queue_name: str
) -> None:
    async def bulk(*delays: int) -> int:
        options = [_delayed(ms) if ms else "{}" for ms in delays]
        return await wakeups.woke(
            queue_name,
            wakeups.writer.fetch(
                "SELECT id FROM lane.add_jobs($1, $2::text[], $3::jsonb[], $4::jsonb[])",
                queue_name,
                ["n"] * len(delays),
                ["null"] * len(delays),
                options,
            ),
        )

    assert await bulk(30 * MINUTE_MS, 20 * MINUTE_MS, 25 * MINUTE_MS) == 1
    assert await bulk(40 * MINUTE_MS, 50 * MINUTE_MS) == 0  # all after the 20-minute job
    assert await bulk(40 * MINUTE_MS, 10 * MINUTE_MS) == 1
    assert await bulk(0, 60 * MINUTE_MS) == 1  # a job due now wakes anyway
    rows = await wakeups.writer.fetch(
        "SELECT state, count(*) AS n FROM lane.jobs WHERE queue = $1 GROUP BY 1 ORDER BY 1",
        queue_name,
    )
    assert [(row["state"], row["n"]) for row in rows] == [("delayed", 8), ("waiting", 1)]


async def test_reschedule_wakes_when_moved_earlier_MGMT_5_CLAIM_7(
    wakeups: Wakeups, queue_name: str
) -> None:
    job_id = await wakeups.writer.fetchval(
        "SELECT (lane.add_job($1, 'n', 'null', $2::jsonb)).id", queue_name, _delayed(MINUTE_MS * 60)
    )

    async def reschedule(ms: int) -> int:
        return await wakeups.woke(
            queue_name,
            wakeups.writer.execute(
                "SELECT lane.reschedule_job($1, $2, $3)", queue_name, job_id, ms
            ),
        )

    assert await reschedule(10 * MINUTE_MS) == 1  # earlier than the timer it was
    assert await reschedule(30 * MINUTE_MS) == 0  # later: the sleepers wake at 10 and look again
    await wakeups.writer.execute(
        "SELECT lane.add_job($1, 'n', 'null', $2::jsonb)", queue_name, _delayed(5 * MINUTE_MS)
    )
    assert await reschedule(20 * MINUTE_MS) == 0  # the 5-minute job comes first
    assert await reschedule(MINUTE_MS) == 1


async def _claimed(writer: asyncpg.Connection, queue: str, options: str = "{}") -> asyncpg.Record:
    await writer.execute("SELECT lane.add_job($1, 'n', 'null', $2::jsonb)", queue, options)
    row: asyncpg.Record = await writer.fetchrow(
        "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 600000)", queue
    )
    return row


async def test_a_retry_with_backoff_wakes_when_it_is_the_earliest_RETRY_1_CLAIM_7(
    wakeups: Wakeups, queue_name: str
) -> None:
    backoff = json.dumps({"attempts": 3, "backoff": {"type": "fixed", "delay_ms": 10 * MINUTE_MS}})
    first = await _claimed(wakeups.writer, queue_name, backoff)

    async def fail(row: asyncpg.Record) -> int:
        return await wakeups.woke(
            queue_name,
            wakeups.writer.execute(
                "SELECT lane.fail_job($1, $2, $3, 'boom')", queue_name, row["id"], row["lock_token"]
            ),
        )

    assert await fail(first) == 1
    assert (
        await wakeups.writer.fetchval(
            "SELECT state FROM lane.jobs WHERE queue = $1 AND id = $2", queue_name, first["id"]
        )
        == "delayed"
    )
    second = await _claimed(wakeups.writer, queue_name, backoff)
    assert await fail(second) == 0  # due with the first retry, not before it
    # The batched path (what the worker calls) follows the same rule.
    third = await _claimed(wakeups.writer, f"{queue_name}_c", backoff)
    woke = await wakeups.woke(
        f"{queue_name}_c",
        wakeups.writer.execute(
            "SELECT * FROM lane.fail_jobs(ARRAY[$1], ARRAY[$2], ARRAY[$3::uuid], ARRAY['boom'],"
            " ARRAY[NULL::text], ARRAY[false])",
            f"{queue_name}_c",
            third["id"],
            third["lock_token"],
        ),
    )
    assert woke == 1


async def test_delay_job_wakes_when_it_is_the_earliest_MGMT_6_CLAIM_7(
    wakeups: Wakeups, queue_name: str
) -> None:
    async def delay(row: asyncpg.Record, ms: int) -> int:
        return await wakeups.woke(
            queue_name,
            wakeups.writer.execute(
                "SELECT lane.delay_job($1, $2, $3, $4)",
                queue_name,
                row["id"],
                row["lock_token"],
                ms,
            ),
        )

    assert await delay(await _claimed(wakeups.writer, queue_name), 10 * MINUTE_MS) == 1
    assert await delay(await _claimed(wakeups.writer, queue_name), 20 * MINUTE_MS) == 0
    assert await delay(await _claimed(wakeups.writer, queue_name), 0) == 1  # due at once
