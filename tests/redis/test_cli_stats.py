"""``python -m lane_pg stats`` on Redis: the counts of every state per queue, read through
the backend contract, as the PostgreSQL view gives them."""

from __future__ import annotations

import asyncio
import json
import sys

from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.types import JobOptions, QueueDemand


async def test_stats_counts_each_state_of_each_queue(
    redis_client: Redis, redis_url: str, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    for n in range(3):
        await backend.jobs.add_job("mail", "send", {"n": n})
    await backend.jobs.add_job("mail", "later", None, JobOptions(delay=600))
    [claimed] = await backend.runs.claim_jobs("w", [QueueDemand("mail", 1)], 30)
    await backend.runs.complete_job("mail", claimed.id, claimed.lock_token, None)
    await backend.jobs.add_job("sms", "send", None)
    await backend.queues.pause_queue("sms")
    url = f"{redis_url.split('?')[0]}?prefix={prefix}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lane_pg", "stats", "--json", "--dsn", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    rows = [json.loads(line) for line in out.decode().splitlines()]
    zero = {"active": 0, "waiting_children": 0, "failed": 0}
    assert rows == [
        {"queue": "mail", "paused": False, **zero, "waiting": 2, "delayed": 1, "completed": 1},
        {"queue": "sms", "paused": True, **zero, "waiting": 1, "delayed": 0, "completed": 0},
    ]
