"""Removing many jobs on Redis (MGMT-17..22), where the conformance suite cannot look yet:
its cleanup tests build queues with deduplication ids, repeat series and flows, which
Redis does not hold yet. Here: drains, clears and obliterates of plain jobs, the keys an
obliterate leaves (none but the two id counters), its bounded steps, the refusal of a job
whose removal Redis cannot do whole, and orphaned log lines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import pytest_asyncio
from redis.asyncio import Redis

from lane_pg.errors import JobStateConflict
from lane_pg.redis import cleanup
from lane_pg.redis.backend import RedisBackend
from lane_pg.types import (
    DeduplicationOptions,
    JobOptions,
    JobRateLimit,
    JobRow,
    JobSpec,
    QueueDemand,
    RepeatOptions,
)
from tests.helpers import Clock

QUEUE = "emails"


@pytest_asyncio.fixture
async def backend(redis_client: Redis, prefix: str) -> AsyncIterator[RedisBackend]:
    yield RedisBackend(redis_client, prefix=prefix, owns_client=False)


@pytest.fixture
def clock() -> Clock:
    now = datetime.now(UTC)
    return Clock(now.replace(microsecond=now.microsecond // 1000 * 1000))


async def claim(backend: RedisBackend, clock: Clock, at: float, queue: str = QUEUE) -> JobRow:
    [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(at))
    return job


async def one_of_each(backend: RedisBackend, clock: Clock, queue: str = QUEUE) -> dict[str, str]:
    """The ids of an active job (lease to 31), a completed and a failed one, two waiting
    and one delayed job."""
    ids = {"active": (await backend.add_job(queue, "a", None, now=clock.at(0))).id}
    await claim(backend, clock, 1, queue)
    for state in ("completed", "failed"):
        job = await backend.add_job(queue, state, None, now=clock.at(2))
        run = await claim(backend, clock, 2, queue)
        assert run.lock_token is not None
        if state == "completed":
            await backend.complete_job(queue, job.id, run.lock_token, now=clock.at(2))
        else:
            await backend.fail_job(queue, job.id, run.lock_token, "bad", now=clock.at(2))
        ids[state] = job.id
    for name in ("waiting", "waiting2"):
        ids[name] = (await backend.add_job(queue, name, None, now=clock.at(3))).id
    delayed = await backend.add_job(queue, "d", None, {"delay_ms": 600_000}, now=clock.at(3))
    ids["delayed"] = delayed.id
    return ids


async def states(backend: RedisBackend, queue: str = QUEUE) -> dict[str, str]:
    page = await backend.list_jobs(queue, None, limit=100)
    return {job.id: job.state for job in page.items}


async def removed_events(backend: RedisBackend, queue: str = QUEUE) -> list[tuple[str, str]]:
    return [
        (event.job_id or "", event.data["prev"])
        for event in await backend.read_events(queue, limit=1000)
        if event.event == "removed"
    ]


async def queue_keys(client: Redis, backend: RedisBackend, queue: str = QUEUE) -> set[str]:
    tag = backend.keys(queue).tag
    return {key.decode() async for key in client.scan_iter(match=f"{tag}:*", count=1000)}


async def test_a_drain_removes_waiting_jobs_and_their_logs_MGMT_17(
    backend: RedisBackend, redis_client: Redis, clock: Clock
) -> None:
    ids = await one_of_each(backend, clock)
    logs = backend.keys(QUEUE).key(f"logs:{ids['waiting']}")
    await redis_client.rpush(logs, "line")  # as add_job_log stores a line

    assert await backend.drain_jobs(QUEUE, now=clock.at(4)) == 2

    assert await redis_client.exists(logs) == 0
    assert await removed_events(backend) == [
        (ids["waiting"], "waiting"),
        (ids["waiting2"], "waiting"),
    ]
    kept = {ids[name]: name for name in ("active", "completed", "failed", "delayed")}
    assert await states(backend) == kept
    assert await backend.drain_jobs(QUEUE, delayed=True, now=clock.at(5)) == 1
    assert (await removed_events(backend))[-1] == (ids["delayed"], "delayed")
    assert await backend.get_job_counts(QUEUE, ["waiting", "delayed"]) == {
        "waiting": 0,
        "delayed": 0,
    }


async def test_clear_queues_of_every_queue_keeps_live_leases_A16(
    backend: RedisBackend, clock: Clock
) -> None:
    first = await one_of_each(backend, clock)  # its active lease lasts to 31
    await backend.add_job("other", "x", None, now=clock.at(20))
    live = await claim(backend, clock, 20, "other")  # lease to 50
    await backend.add_job("other", "y", None, now=clock.at(21))

    assert await backend.clear_queues(None, now=clock.at(40)) == 4 + 1

    assert await states(backend) == {first["completed"]: "completed", first["failed"]: "failed"}
    assert await states(backend, "other") == {live.id: "active"}
    for queue, count in ((QUEUE, 1), ("other", 0)):
        cleaned = [
            e.data for e in await backend.read_events(queue, limit=100) if e.event == "cleaned"
        ]
        assert cleaned == [{"count": count}]


async def test_obliterate_refuses_active_jobs_after_pausing_then_deletes_every_key_MGMT_21(
    backend: RedisBackend, redis_client: Redis, clock: Clock
) -> None:
    ids = await one_of_each(backend, clock)
    await redis_client.rpush(backend.keys(QUEUE).key(f"logs:{ids['failed']}"), "line")
    before = await states(backend)
    last_event = (await backend.read_events(QUEUE, limit=1000))[-1].id

    with pytest.raises(JobStateConflict):
        await backend.obliterate_queue(QUEUE, now=clock.at(4))

    assert await redis_client.hget(backend.keys(QUEUE).meta, "paused") == b"1"
    assert [e.event for e in await backend.read_events(QUEUE, last_event + 1)] == ["paused"]
    assert await states(backend) == before

    # Owner rows and series go too: a plain owner, a TTL owner, a reservation, a series.
    await backend.add_job(QUEUE, "o", None, JobOptions(deduplication="plain"), now=clock.at(4))
    ttl = JobOptions(deduplication=DeduplicationOptions("ttl", ttl=60))
    await backend.add_job(QUEUE, "t", None, ttl, now=clock.at(4))
    assert await backend.reserve_deduplication_key(QUEUE, "held", "t1", 60, now=clock.at(4))
    series = JobOptions(repeat=RepeatOptions.every(60, key="beat"))
    await backend.add_job(QUEUE, "r", None, series, now=clock.at(4))
    # And the claim log a rate-limited claim writes.
    await backend.set_claim_rate_limit(QUEUE, JobRateLimit(100, 60_000))
    claimed = await backend.claim_jobs(
        "w", [QueueDemand(QUEUE, 1)], 30, now=clock.at(4), ignore_pause=True
    )
    assert claimed  # the queue is paused by the refused obliterate above
    assert await redis_client.exists(backend.keys(QUEUE).key("claims"))

    assert await backend.obliterate_queue(QUEUE, force=True, now=clock.at(5)) == len(ids) + 3

    # The two counters stay, so ids are never reused (PostgreSQL's sequences are global).
    assert await queue_keys(redis_client, backend) == {
        backend.keys(QUEUE).key("ids"),
        backend.keys(QUEUE).key("event_id"),
    }
    assert QUEUE.encode() not in await redis_client.smembers(backend.queues_key)
    assert await backend.read_events(QUEUE) == []
    fresh = await backend.add_job(QUEUE, "n", None, now=clock.at(6))
    assert int(fresh.id) > max(int(job_id) for job_id in ids.values())
    assert (await backend.read_events(QUEUE))[0].id > last_event
    assert QUEUE.encode() in await redis_client.smembers(backend.queues_key)
    assert await redis_client.hget(backend.keys(QUEUE).meta, "paused") is None


async def test_obliterate_goes_in_bounded_steps_MGMT_21(
    backend: RedisBackend, redis_client: Redis, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cleanup, "OBLITERATE_CHUNK", 3)
    await backend.add_jobs(QUEUE, [JobSpec("n")] * 7, now=clock.at(0))
    await backend.add_jobs(QUEUE, [JobSpec("d", None, {"delay_ms": 5000})] * 2, now=clock.at(0))
    calls: list[object] = []
    call = backend.call

    async def counted(script: str, queue: str, arguments: object) -> object:
        answer = await call(script, queue, arguments)  # type: ignore[arg-type]
        calls.append(answer)
        return answer

    monkeypatch.setattr(backend, "call", counted)

    assert await backend.obliterate_queue(QUEUE, now=clock.at(1)) == 9

    assert calls == [["more", 3], ["more", 3], ["done", 3]]
    assert await backend.get_job_count(QUEUE) == 0
    assert await redis_client.exists(backend.keys(QUEUE).meta) == 0


async def test_orphaned_log_lines_go_oldest_first_up_to_the_limit_MGMT_22(
    backend: RedisBackend, redis_client: Redis, clock: Clock
) -> None:
    kept = await backend.add_job(QUEUE, "k", None, now=clock.at(0))
    keys = backend.keys(QUEUE)
    await redis_client.rpush(keys.key(f"logs:{kept.id}"), "mine")
    await redis_client.rpush(keys.key("logs:gone"), "1", "2", "3")  # a job deleted by hand

    assert await backend.remove_orphaned(limit=2) == 2
    assert await redis_client.lrange(keys.key("logs:gone"), 0, -1) == [b"3"]
    await redis_client.rpush(backend.keys("other").key("logs:x:y}z"), "1")  # any id
    assert await backend.remove_orphaned(count=1) == 2
    assert await backend.remove_orphaned() == 0
    assert await redis_client.lrange(keys.key(f"logs:{kept.id}"), 0, -1) == [b"mine"]
    assert await redis_client.exists(backend.keys("other").key("logs:x:y}z")) == 0
