"""The Redis side of upkeep and of the backend-wide keys, on a real Redis: the meta fields
retention and event trimming read (written directly here: they are the agreed layout that
``set_queue_retention`` and ``set_queue_events`` write), metrics compaction of a long
history, and a lock whose holder's run ended taken by exactly one of many racers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest_asyncio
from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.redis.queues import KEEP_ALL
from lane_pg.types import JobRow, JobSpec, QueueDemand
from tests.helpers import Clock


@pytest_asyncio.fixture
async def backend(redis_client: Redis, prefix: str) -> AsyncIterator[RedisBackend]:
    yield RedisBackend(redis_client, prefix=prefix, owns_client=False)


def _clock() -> Clock:
    now = datetime.now(UTC)
    return Clock(now.replace(microsecond=now.microsecond // 1000 * 1000))


def _token(job: JobRow) -> str:
    assert job.lock_token is not None
    return job.lock_token


async def _finish(backend: RedisBackend, queue: str, n: int, clock: Clock) -> list[str]:
    """n jobs added, claimed and completed one second apart; their ids, oldest first."""
    ids = []
    for i in range(n):
        await backend.add_job(queue, "j", now=clock.at(i))
        [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 60, now=clock.at(i))
        await backend.complete_job(queue, job.id, _token(job), now=clock.at(i + 0.5))
        ids.append(job.id)
    return ids


async def test_prune_finished_reads_the_retention_meta_fields(
    backend: RedisBackend, redis_client: Redis
) -> None:
    clock, queue = _clock(), "pruned"
    keys = backend.keys(queue)
    ids = await _finish(backend, queue, 5, clock)
    await redis_client.rpush(keys.key(f"logs:{ids[0]}"), "a line")
    assert await backend.prune_finished([queue]) == 0  # absent: the default bound (10,000)

    await redis_client.hset(keys.meta, "keep_completed", "2")
    assert await backend.prune_finished([queue], batch=2) == 2  # oldest first, one batch
    assert await backend.prune_finished([queue], batch=2) == 1
    assert [job.id for job in (await backend.list_jobs(queue, ["completed"])).items] == ids[3:]
    assert not await redis_client.exists(keys.job(ids[0]), keys.key(f"logs:{ids[0]}"))

    await redis_client.hset(keys.meta, "keep_completed", KEEP_ALL)  # keep all
    await _finish(backend, queue, 2, clock)
    assert await backend.prune_finished(None) == 0
    await redis_client.hset(keys.meta, "keep_completed", "0")
    assert await backend.prune_finished(None) == 4


async def test_trim_events_keeps_exactly_the_newest_events_max(
    backend: RedisBackend, redis_client: Redis
) -> None:
    clock, queue = _clock(), "trimmed"
    keys = backend.keys(queue)
    await backend.add_jobs(queue, [JobSpec("j")] * 10, now=clock.at(0))  # 20 events
    newest = (await backend.read_events(queue))[-3:]
    await redis_client.hset(keys.meta, "events_max", "3")
    assert await backend.trim_events([queue]) == 17
    assert await backend.read_events(queue) == newest
    assert await backend.trim_events(None) == 0


async def test_compaction_folds_a_long_history_and_answers_the_same(
    backend: RedisBackend, redis_client: Redis
) -> None:
    """2,500 minutes of counts (more than one HDEL slice of the script) fold into one field."""
    clock, queue = _clock(), "metered"
    await _finish(backend, queue, 1, clock)  # the queue exists, with its newest minute
    key = backend.keys(queue).key("metrics:completed")
    newest = int(next(iter(await redis_client.hkeys(key))))
    await redis_client.hset(
        key, mapping={str(newest - minute * 60_000): 2 for minute in range(1, 2_501)}
    )
    before = await backend.get_metrics(queue, "completed", 0, 9, max_data_points=10)
    assert before.count == 5_001 and before.data == [1] + [2] * 9

    assert await backend.compact_metrics(max_data_points=10) == 2_491
    assert await redis_client.hlen(key) == 11  # ten minutes and the folded count
    assert await backend.get_metrics(queue, "completed", 0, 9, max_data_points=10) == before
    assert await backend.compact_metrics(max_data_points=10) == 0


async def test_a_lock_whose_holder_ended_goes_to_exactly_one_racer(
    backend: RedisBackend,
) -> None:
    """The holder's run (in another queue, so another slot) completed: every racer finds it
    over, and only the first script call takes the lock; the others then find a live
    holder."""
    clock = _clock()
    await backend.add_job("holder", "j", now=clock.at(0))
    [over] = await backend.claim_jobs("w", [QueueDemand("holder", 1)], 60, now=clock.at(0))
    assert await backend.locks.acquire_lock("k", "holder", over.id, _token(over), 3600)
    await backend.complete_job("holder", over.id, _token(over))

    await backend.add_jobs("racers", [JobSpec("j")] * 12, now=clock.at(0))
    runs = await backend.claim_jobs("w", [QueueDemand("racers", 12)], 60, now=clock.at(0))
    taken = await asyncio.gather(
        *(backend.locks.acquire_lock("k", "racers", run.id, _token(run), 60) for run in runs)
    )
    assert sum(taken) == 1
    winner = runs[taken.index(True)]
    assert await backend.locks.release_lock("k", "racers", winner.id, _token(winner))
    assert not await backend.locks.release_lock("k", "holder", over.id, _token(over))
