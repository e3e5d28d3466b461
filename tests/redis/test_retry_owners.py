"""retry_job on Redis for a unique job (A9): the client sends the options text it read and
that text without the owner token; a script that finds other options stored answers
`stale` and writes nothing, and the client's retry reads again."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.redis.rows import epoch_ms
from lane_pg.types import QueueDemand

START = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
UNIQUE = {"deduplication": {"id": "u", "ttl_ms": 10_000, "kind": "unique", "token": "a"}}


async def test_a_retry_against_changed_options_writes_nothing(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    added = await backend.add_job("q", "n", None, {**UNIQUE, "attempts": 1}, now=START)
    [job] = await backend.claim_jobs("w", [QueueDemand("q", 1)], 30, now=START)
    assert job.lock_token is not None
    await backend.fail_job("q", job.id, job.lock_token, "x", now=START)
    key = backend.keys("q").job(added.id)
    before = await redis_client.hgetall(key)
    later = START + timedelta(seconds=1)

    answer = await backend.call(
        "retry_job",
        "q",
        {"id": added.id, "now": epoch_ms(later), "options_was": "{}", "options": "{}"},
    )
    assert answer == ["stale"]
    assert await redis_client.hgetall(key) == before

    retried = await backend.retry_job("q", added.id, now=later)
    assert retried.state == "waiting"
    assert "token" not in retried.options["deduplication"]
    spec = json.loads((await redis_client.hget(key, "dedup_spec")).decode())
    assert "token" not in spec and spec["kind"] == "unique"
