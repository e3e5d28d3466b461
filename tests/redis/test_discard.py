"""discard_job on Redis (MW-2) goes through the removal path: the discarded job's
deduplication owner and repeat series are released, as a removed job's are."""

from __future__ import annotations

from datetime import UTC, datetime

from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.types import QueueDemand

START = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)


async def test_a_discarded_job_releases_its_dedup_id_and_its_series(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    options = {"deduplication": {"id": "d"}, "repeat": {"every_ms": 60_000, "key": "beat"}}
    added = await backend.add_job("q", "n", None, options, now=START)
    [job] = await backend.claim_jobs("w", [QueueDemand("q", 1)], 30, now=START)
    assert job.id == added.id and job.lock_token is not None
    assert await backend.get_deduplication_job_id("q", "d") == job.id
    assert await backend.get_repeat("q", "beat") is not None

    await backend.discard_job("q", job.id, job.lock_token, now=START)

    assert await backend.get_job("q", job.id) is None
    assert await backend.get_deduplication_job_id("q", "d") is None
    assert await backend.get_repeat("q", "beat") is None
    events = [(e.event, e.data) for e in await backend.read_events("q") if e.job_id == job.id]
    assert events[-1] == ("removed", {"prev": "active"})
