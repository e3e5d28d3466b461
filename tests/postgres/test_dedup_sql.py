"""Deduplication owners on PostgreSQL: real concurrent adders in transactions that commit
or roll back (the issue's concurrency check), rows as the table holds them (DEDUP-5,
-15), and the SQL interface a psql user has."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio

from tests.postgres.conftest import refused

ADDERS = 8


@pytest_asyncio.fixture
async def connections(pg_dsn: str) -> AsyncIterator[list[asyncpg.Connection]]:
    opened = [await asyncpg.connect(pg_dsn) for _ in range(ADDERS + 2)]
    try:
        yield opened
    finally:
        for connection in opened:
            await connection.close()


def _options(dedup_id: str) -> str:
    return json.dumps({"deduplication": {"id": dedup_id}})


async def _add_in_transaction(
    conn: asyncpg.Connection, queue: str, dedup_id: str, rng: random.Random, start: asyncio.Event
) -> str | None:
    """One adder: BEGIN, add, hold the transaction a moment, then COMMIT or ROLLBACK.
    Gives the job id the add returned when it committed, None when it rolled back."""
    await start.wait()
    transaction = conn.transaction()
    await transaction.start()
    job_id = await conn.fetchval(
        "SELECT id FROM lane.add_job($1, 'n', $2::jsonb, $3::jsonb)",
        queue,
        json.dumps(rng.random()),
        _options(dedup_id),
    )
    # Overlap with the other adders: they now wait on this transaction's owner row.
    await asyncio.sleep(rng.random() * 0.003)
    if rng.random() < 0.4:
        await transaction.rollback()
        return None
    await transaction.commit()
    return str(job_id)


async def _live_owner_jobs(conn: asyncpg.Connection, queue: str, dedup_id: str) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND dedup_id = $2"
            " AND state NOT IN ('completed', 'failed')",
            queue,
            dedup_id,
        )
    )


async def test_concurrent_adders_with_rollbacks_never_make_two_owners_DEDUP_1(
    connections: list[asyncpg.Connection], queue_name: str
) -> None:
    """8 connections add the same deduplication id at once, 40 % of them rolling back,
    over 40 rounds. While they run, an observer never sees two unfinished jobs carrying
    the id; after each round there is exactly one owner (and one job) when some add
    committed, every committed add returned that job, and nothing when all rolled back."""
    rng = random.Random(20261201)
    adders, observer = connections[:ADDERS], connections[ADDERS]
    all_rolled_back = 0
    for round_no in range(40):
        dedup_id = f"acct:{round_no}"
        start = asyncio.Event()
        tasks = [
            asyncio.ensure_future(_add_in_transaction(conn, queue_name, dedup_id, rng, start))
            for conn in adders
        ]
        start.set()
        while not all(task.done() for task in tasks):
            assert await _live_owner_jobs(observer, queue_name, dedup_id) <= 1
            await asyncio.sleep(0)
        committed = {job_id for job_id in await asyncio.gather(*tasks) if job_id is not None}
        owner = await observer.fetchrow(
            "SELECT job_id, job_key FROM lane.dedup_owners WHERE queue = $1 AND dedup_id = $2",
            queue_name,
            dedup_id,
        )
        stored = await observer.fetch(
            "SELECT id, key FROM lane.jobs WHERE queue = $1 AND dedup_id = $2",
            queue_name,
            dedup_id,
        )
        if not committed:
            all_rolled_back += 1
            assert owner is None and stored == [], round_no
            continue
        assert len(committed) == 1, (round_no, committed)
        assert owner is not None
        assert [(row["id"], row["key"]) for row in stored] == [(owner["job_id"], owner["job_key"])]
        assert committed == {owner["job_id"]}
    assert all_rolled_back < 40  # the seed gives both kinds of round


async def test_owners_turn_over_under_concurrent_adds_and_completions_DEDUP_3(
    connections: list[asyncpg.Connection], queue_name: str
) -> None:
    """Adders keep adding one id while a worker claims and completes whatever owns it:
    ownership passes from job to job, and an observer never sees two unfinished jobs
    with the id at once (a completion releases the id in its own transaction)."""
    rng = random.Random(7)
    adders, observer, worker = connections[:ADDERS], connections[ADDERS], connections[-1]
    dedup_id = "acct:turnover"
    stop = asyncio.Event()
    completed = 0

    async def adder(conn: asyncpg.Connection) -> list[str]:
        returned: list[str] = []
        while not stop.is_set():
            start = asyncio.Event()
            start.set()
            job_id = await _add_in_transaction(conn, queue_name, dedup_id, rng, start)
            if job_id is not None:
                returned.append(job_id)
        return returned

    async def completer() -> None:
        nonlocal completed
        while completed < 25:
            rows = await worker.fetch(
                "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)",
                queue_name,
            )
            for row in rows:
                await worker.fetchval(
                    "SELECT id FROM lane.complete_job($1, $2, $3, 'null')",
                    queue_name,
                    row["id"],
                    row["lock_token"],
                )
                completed += 1
            await asyncio.sleep(0)
        stop.set()

    tasks = [asyncio.ensure_future(adder(conn)) for conn in adders]
    finishing = asyncio.ensure_future(completer())
    while not finishing.done():
        assert await _live_owner_jobs(observer, queue_name, dedup_id) <= 1
        await asyncio.sleep(0)
    await finishing
    returned = [job_id for ids in await asyncio.gather(*tasks) for job_id in ids]
    stored = {
        row["id"]: row["state"]
        for row in await observer.fetch(
            "SELECT id, state FROM lane.jobs WHERE queue = $1", queue_name
        )
    }
    assert set(returned) <= set(stored)  # every committed add names a stored job
    assert sum(state == "completed" for state in stored.values()) == completed
    owner = await observer.fetchval(
        "SELECT job_id FROM lane.dedup_owners WHERE queue = $1 AND dedup_id = $2",
        queue_name,
        dedup_id,
    )
    unfinished = [job_id for job_id, state in stored.items() if state != "completed"]
    assert unfinished == ([] if owner is None else [owner])


async def test_rolled_back_add_leaves_no_owner_DEDUP_1(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    async with conn.transaction():
        savepoint = conn.transaction()
        await savepoint.start()
        await conn.fetchval(
            "SELECT id FROM lane.add_job($1, 'n', '1', $2::jsonb)", queue_name, _options("x")
        )
        await savepoint.rollback()
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM lane.dedup_owners WHERE queue = $1", queue_name
            )
            == 0
        )
        second = await conn.fetchrow(
            "SELECT id, data FROM lane.add_job($1, 'n', '2', $2::jsonb)",
            queue_name,
            _options("x"),
        )
        assert json.loads(second["data"]) == 2


async def test_psql_add_twice_then_after_completion_DEDUP_1_DEDUP_3(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    """The issue's psql check, as plain SQL."""
    add = "SELECT id, lock_token FROM lane.add_job($1, 'n', 'null', $2::jsonb)"
    first = await conn.fetchrow(add, queue_name, '{"deduplication": {"id": "acct:42"}}')
    again = await conn.fetchrow(add, queue_name, '{"deduplication": {"id": "acct:42"}}')
    assert again["id"] == first["id"]
    assert await conn.fetchval("SELECT count(*) FROM lane.jobs WHERE queue = $1", queue_name) == 1
    [claimed] = await conn.fetch(
        "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)", queue_name
    )
    await conn.execute(
        "SELECT lane.complete_job($1, $2, $3)", queue_name, claimed["id"], claimed["lock_token"]
    )
    third = await conn.fetchrow(add, queue_name, '{"deduplication": {"id": "acct:42"}}')
    assert third["id"] != first["id"]
    assert (
        await conn.fetchval("SELECT lane.get_deduplication_job_id($1, 'acct:42')", queue_name)
        == third["id"]
    )


async def test_owner_row_outlives_its_deleted_job_until_met_DEDUP_5(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    options = '{"deduplication": {"id": "t", "ttl_ms": 10000}, "remove_on_complete": true}'
    job = await conn.fetchrow(
        "SELECT id FROM lane.add_job($1, 'n', 'null', $2::jsonb)", queue_name, options
    )
    [claimed] = await conn.fetch(
        "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)", queue_name
    )
    await conn.execute(
        "SELECT lane.complete_job($1, $2, $3)", queue_name, claimed["id"], claimed["lock_token"]
    )
    assert await conn.fetchval("SELECT count(*) FROM lane.jobs WHERE queue = $1", queue_name) == 0
    row = await conn.fetchrow(
        "SELECT job_id, expires_at > now() AS running FROM lane.dedup_owners WHERE queue = $1",
        queue_name,
    )
    assert (row["job_id"], row["running"]) == (job["id"], True)  # RET-6: retention kept it
    # A10: the lookup finds the job gone, deletes the row and says there is no owner.
    assert await conn.fetchval("SELECT lane.get_deduplication_job_id($1, 't')", queue_name) is None
    assert (
        await conn.fetchval("SELECT count(*) FROM lane.dedup_owners WHERE queue = $1", queue_name)
        == 0
    )


async def test_stale_owner_rows_are_deleted_where_met_DEDUP_15(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    """BullMQ #4311: a row naming a missing job, or a job that is not its own, blocked
    every later add. Here a lookup deletes it, and an add takes it over."""
    job = await conn.fetchrow(
        "SELECT id, key FROM lane.add_job($1, 'n', 'null', $2::jsonb)", queue_name, _options("m")
    )
    await conn.execute(
        "UPDATE lane.dedup_owners SET job_key = -1, job_id = 'gone' WHERE queue = $1", queue_name
    )
    assert await conn.fetchval("SELECT lane.get_deduplication_job_id($1, 'm')", queue_name) is None
    assert (
        await conn.fetchval("SELECT count(*) FROM lane.dedup_owners WHERE queue = $1", queue_name)
        == 0
    )
    # A row naming a real job that carries another id is as stale: the add takes it over.
    other = await conn.fetchrow(
        "SELECT id, key FROM lane.add_job($1, 'n', 'null', '{}')", queue_name
    )
    await conn.execute(
        "INSERT INTO lane.dedup_owners (queue, dedup_id, job_id, job_key) VALUES ($1, 'm', $2, $3)",
        queue_name,
        other["id"],
        other["key"],
    )
    taker = await conn.fetchrow(
        "SELECT id FROM lane.add_job($1, 'n', 'null', $2::jsonb)", queue_name, _options("m")
    )
    assert taker["id"] not in (job["id"], other["id"])
    assert (
        await conn.fetchval(
            "SELECT job_id FROM lane.dedup_owners WHERE queue = $1 AND dedup_id = 'm'", queue_name
        )
        == taker["id"]
    )


async def test_bad_deduplication_document_refused_in_sql_DEDUP_1(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    message = await refused(
        conn,
        "LN003",
        "SELECT lane.add_job($1, 'n', 'null', $2::jsonb)",
        queue_name,
        '{"deduplication": {"id": "x", "extend_ttl": true}}',
    )
    assert "extend_ttl needs ttl_ms" in message
    assert await conn.fetchval("SELECT count(*) FROM lane.jobs WHERE queue = $1", queue_name) == 0


async def test_concurrent_adds_of_one_custom_id_keep_one_job_ADD_3(
    connections: list[asyncpg.Connection], queue_name: str
) -> None:
    """lane.add_job takes a custom id itself (no per-spec path): 8 connections add the same
    custom id at once, 40 % rolling back, over 30 rounds. Every committed add returns the
    one stored job, and none raises: a loser of the insert race waits for the winner's
    commit and returns its job (ON CONFLICT), or inserts its own when the winner rolled
    back."""
    rng = random.Random(3)
    adders = connections[:ADDERS]
    for round_no in range(30):
        custom = f"order-{round_no}"
        start = asyncio.Event()

        async def add(
            conn: asyncpg.Connection, custom: str = custom, start: asyncio.Event = start
        ) -> str | None:
            await start.wait()
            transaction = conn.transaction()
            await transaction.start()
            job_id = await conn.fetchval(
                "SELECT id FROM lane.add_job($1, 'n', 'null', $2::jsonb)",
                queue_name,
                json.dumps({"job_id": custom}),
            )
            await asyncio.sleep(rng.random() * 0.003)
            if rng.random() < 0.4:
                await transaction.rollback()
                return None
            await transaction.commit()
            return str(job_id)

        tasks = [asyncio.ensure_future(add(conn)) for conn in adders]
        start.set()
        committed = {job_id for job_id in await asyncio.gather(*tasks) if job_id is not None}
        stored = await connections[ADDERS].fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND id = $2", queue_name, custom
        )
        assert committed in (set(), {custom}), round_no
        assert stored == (1 if committed else 0), round_no
