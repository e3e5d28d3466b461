"""The Redis parts of pausing and claim limits the conformance suite cannot see: the
connection-wide pause across processes (two backends on one prefix) and against a
registration racing a flip, the claim log's bound, and who gets woken."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest_asyncio
from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.types import JobRateLimit, QueueDemand

START = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


@pytest_asyncio.fixture
async def two(redis_client: Redis, prefix: str) -> AsyncIterator[tuple[RedisBackend, RedisBackend]]:
    """Two backends on one prefix: two processes of one deployment."""
    yield (
        RedisBackend(redis_client, prefix=prefix, owns_client=False),
        RedisBackend(redis_client, prefix=prefix, owns_client=False),
    )


async def claim_ids(backend: RedisBackend, queue: str, seconds: float) -> list[str]:
    claimed = await backend.claim_jobs("w", [QueueDemand(queue, 5)], 30, now=at(seconds))
    return [job.id for job in claimed]


async def test_a_queue_another_process_creates_during_pause_all_is_paused_PAUSE_4(
    two: tuple[RedisBackend, RedisBackend],
) -> None:
    first, second = two
    await first.add_job("old", "a", now=at(0))
    await first.pause_all()
    job = await second.add_job("new", "b", now=at(0))  # registered while the switch is on
    assert await first.claim_jobs("w", [QueueDemand("new", 1)], 30, now=at(1)) == []
    assert (await second.get_pause_status(["new"])).all_paused is True
    await first.resume_all()
    assert await claim_ids(second, "new", 2) == [job.id]


async def test_a_registration_that_read_the_switch_before_a_flip_cannot_undo_it_PAUSE_4(
    two: tuple[RedisBackend, RedisBackend],
) -> None:
    """The registration reads "paused" (MULTI), resume_all flips and tells every queue,
    the other process adds a job, then the registration's write arrives: the queue stays
    resumed."""
    first, second = two
    await first.pause_all()
    stale = await second.enlist("late")
    assert stale is not None and stale[0] is True
    await first.resume_all()
    job = await first.add_job("late", "n", now=at(0))
    await second.take_switch("late", stale)
    assert await claim_ids(first, "late", 1) == [job.id]

    # And the other way round: read "resumed", then a pause lands first.
    stale = await second.enlist("later")
    assert stale is not None and stale[0] is False
    await first.pause_all()
    await first.add_job("later", "n", now=at(0))
    await second.take_switch("later", stale)
    assert await claim_ids(first, "later", 1) == []
    await first.resume_all()
    assert len(await claim_ids(first, "later", 2)) == 1


async def test_resume_all_wakes_only_the_queues_it_held_back(
    two: tuple[RedisBackend, RedisBackend], redis_client: Redis
) -> None:
    backend, _ = two
    await backend.add_job("held", "n", now=at(0))
    await backend.pause_all()
    await redis_client.delete(backend.keys("held").marker)
    await backend.resume_all()
    assert await redis_client.zcard(backend.keys("held").marker) == 1
    await redis_client.delete(backend.keys("held").marker)
    await backend.resume_all()  # not held back this time
    assert await redis_client.zcard(backend.keys("held").marker) == 0


async def test_signal_restart_wakes_every_queue_CLI_6(
    two: tuple[RedisBackend, RedisBackend], redis_client: Redis
) -> None:
    backend, other = two
    for queue in ("a", "b"):
        await backend.add_job(queue, "n", now=at(0))
        await redis_client.delete(backend.keys(queue).marker)
    stored = await backend.signal_restart()
    assert (await other.get_pause_status()).restart_at_ms == stored
    for queue in ("a", "b"):
        assert await redis_client.zcard(backend.keys(queue).marker) == 1


async def test_the_claim_log_holds_about_one_window_RATE_1(
    two: tuple[RedisBackend, RedisBackend], redis_client: Redis
) -> None:
    """200 claims of one job, 100 ms apart, under 3 per second: the log never holds more
    than the claims of the last window."""
    backend, _ = two
    for i in range(200):
        await backend.add_job("log", "n", {"i": i}, now=at(0))
    await backend.set_claim_rate_limit("log", JobRateLimit(3, 1))
    largest = 0
    for step in range(200):
        await backend.claim_jobs("w", [QueueDemand("log", 1)], 30, now=at(step / 10))
        largest = max(largest, await redis_client.zcard(backend.keys("log").key("claims")))
    assert largest <= 3


async def test_a_finish_wakes_claimers_a_ceiling_held_back_CLAIM_9(
    two: tuple[RedisBackend, RedisBackend], redis_client: Redis
) -> None:
    backend, _ = two
    marker = backend.keys("capped").marker
    for i in range(3):
        await backend.add_job("capped", "n", {"i": i}, now=at(0))
    await backend.set_max_active_jobs("capped", 1)
    [job] = await backend.claim_jobs("w", [QueueDemand("capped", 5)], 30, now=at(1))
    # The claim stopped at the ceiling: it does not wake the next claimer for nothing.
    await redis_client.delete(marker)
    assert await backend.claim_jobs("w2", [QueueDemand("capped", 5)], 30, now=at(1)) == []
    assert await redis_client.zcard(marker) == 0
    assert job.lock_token is not None
    await backend.complete_job("capped", job.id, job.lock_token, now=at(2))
    assert await redis_client.zcard(marker) == 1  # a slot is free and jobs wait

    # Without a ceiling a completion wakes no one (nothing was held back).
    await backend.clear_max_active_jobs("capped")
    [running] = await backend.claim_jobs("w", [QueueDemand("capped", 1)], 30, now=at(3))
    await redis_client.delete(marker)
    assert running.lock_token is not None
    await backend.complete_job("capped", running.id, running.lock_token, now=at(4))
    assert await redis_client.zcard(marker) == 0


async def test_retention_bounds_of_none_are_stored_as_keep_all_RET_1(
    two: tuple[RedisBackend, RedisBackend], redis_client: Redis
) -> None:
    """The encoding prune_finished reads: a count, ``all`` for None, absent for the
    default."""
    backend, _ = two
    meta = backend.keys("kept").meta
    await backend.add_job("kept", "n", now=at(0))
    assert await redis_client.hmget(meta, ["keep_completed", "keep_failed"]) == [None, None]
    await backend.set_queue_retention("kept", keep_completed=None, keep_failed=7)
    assert await redis_client.hmget(meta, ["keep_completed", "keep_failed"]) == [b"all", b"7"]


async def _marker(redis_client: Redis, backend: RedisBackend, queue: str) -> dict[str, float]:
    pairs = await redis_client.zrange(backend.keys(queue).marker, 0, -1, withscores=True)
    return {member.decode(): score for member, score in pairs}


async def test_the_marker_holds_a_base_member_and_the_earliest_due_time_REDIS_3(
    two: tuple[RedisBackend, RedisBackend], redis_client: Redis
) -> None:
    backend, _ = two
    due = [int(at(s).timestamp() * 1000) for s in (60, 30, 90)]
    await backend.add_job("m", "n", None, {"delay_ms": 60_000}, now=at(0))
    assert await _marker(redis_client, backend, "m") == {"1": due[0]}
    await backend.add_job("m", "n", None, {"delay_ms": 30_000}, now=at(0))
    assert await _marker(redis_client, backend, "m") == {"1": due[1]}  # the earliest
    await backend.add_job("m", "n", None, {"delay_ms": 90_000}, now=at(0))
    assert await _marker(redis_client, backend, "m") == {"1": due[1]}
    await backend.add_job("m", "n", now=at(0))
    assert await _marker(redis_client, backend, "m") == {"0": 0, "1": due[1]}


async def test_a_paused_or_capped_queue_gets_no_base_marker_until_a_claim_can_succeed_REDIS_3(
    two: tuple[RedisBackend, RedisBackend], redis_client: Redis
) -> None:
    backend, _ = two
    marker = backend.keys("h").marker
    await backend.pause_queue("h")
    await redis_client.delete(marker)
    await backend.add_job("h", "n", now=at(0))
    assert await _marker(redis_client, backend, "h") == {}  # paused: nobody woken for it
    await backend.resume_queue("h")
    assert await _marker(redis_client, backend, "h") == {"0": 0}

    await backend.set_max_active_jobs("h", 1)
    [job] = await backend.claim_jobs("w", [QueueDemand("h", 1)], 30, now=at(1))
    await redis_client.delete(marker)
    await backend.add_job("h", "n", now=at(2))
    assert await _marker(redis_client, backend, "h") == {}  # at its ceiling
    assert job.lock_token is not None
    await backend.complete_job("h", job.id, job.lock_token, now=at(3))
    assert await _marker(redis_client, backend, "h") == {"0": 0}  # a slot is free

    await backend.pause_all()
    await redis_client.delete(marker)
    await backend.add_job("h", "n", now=at(4))
    assert await _marker(redis_client, backend, "h") == {}
    await backend.resume_all()
    assert await _marker(redis_client, backend, "h") == {"0": 0}


async def test_resume_deletes_the_flag_and_a_legacy_zero_reads_as_resumed_REDIS_8(
    two: tuple[RedisBackend, RedisBackend], redis_client: Redis
) -> None:
    backend, _ = two
    meta = backend.keys("legacy").meta
    await backend.pause_queue("legacy")
    assert await redis_client.hget(meta, "paused") == b"1"
    await backend.resume_queue("legacy")
    assert not await redis_client.hexists(meta, "paused")

    await redis_client.hset(meta, "paused", "0")  # what earlier versions wrote on resume
    assert await backend.is_queue_paused("legacy") is False
    assert not await redis_client.hexists(meta, "paused")
    await backend.add_job("legacy", "n", now=at(0))
    await redis_client.hset(meta, "paused", "0")
    assert len(await claim_ids(backend, "legacy", 1)) == 1
