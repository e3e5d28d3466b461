"""Repeat series on PostgreSQL under real concurrency: quick repeated upserts of one
series from several connections at once (BullMQ #2988, #2876) never leave two unfinished
occurrences, and the series row always names the one that is left."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio

CONNECTIONS = 8


@pytest_asyncio.fixture
async def connections(pg_dsn: str) -> AsyncIterator[list[asyncpg.Connection]]:
    opened = [await asyncpg.connect(pg_dsn) for _ in range(CONNECTIONS + 1)]
    try:
        yield opened
    finally:
        for connection in opened:
            await connection.close()


async def test_concurrent_upserts_and_adds_keep_one_occurrence_REP_8_REP_6(
    connections: list[asyncpg.Connection], queue_name: str
) -> None:
    rng = random.Random(2988)
    upserters, observer = connections[:CONNECTIONS], connections[CONNECTIONS]
    options = json.dumps({"repeat": {"every_ms": 1000, "key": "k"}})
    failures: list[BaseException] = []

    async def churn(conn: asyncpg.Connection) -> None:
        for n in range(25):
            call = "upsert_repeat" if rng.random() < 0.6 else "add_job"
            try:
                async with conn.transaction():
                    await conn.fetchval(
                        f"SELECT id FROM lane.{call}($1, 'n', $2::jsonb, $3::jsonb)",
                        queue_name,
                        json.dumps(n),
                        options,
                    )
                    if rng.random() < 0.3:
                        raise _RollBack
            except _RollBack:
                pass
            except asyncpg.PostgresError as exc:  # none is expected: recorded, asserted below
                failures.append(exc)

    tasks = [asyncio.ensure_future(churn(conn)) for conn in upserters]
    while not all(task.done() for task in tasks):
        live = await observer.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND repeat_key = 'k'"
            " AND state NOT IN ('completed', 'failed')",
            queue_name,
        )
        assert live <= 1
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert failures == []
    live_ids = [
        row["id"]
        for row in await observer.fetch(
            "SELECT id FROM lane.jobs WHERE queue = $1 AND state NOT IN ('completed', 'failed')",
            queue_name,
        )
    ]
    owner = await observer.fetchval(
        "SELECT job_id FROM lane.repeat_schedulers WHERE queue = $1 AND key = 'k'", queue_name
    )
    assert live_ids == [owner]


class _RollBack(Exception):
    """Leaves the transaction by rolling it back."""
