"""The rows an add returns are built by the client from what it sent and the few fields
the script assigned (``add_jobs.lua``, ``lane_pg.redis.rows.added_row``): each must equal
the row read back from the job's hash, whatever the options. A claim's tokens, made by the
script from one seed (``claim_jobs.lua``), are distinct UUIDs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.types import JobSpec, QueueDemand

OPTIONS: list[dict[str, object] | None] = [
    None,
    {"priority": 7},
    {"lifo": True},
    {"priority": 3, "lifo": True, "delay_ms": 60_000},
    {"delay_ms": 1},
    {"attempts": 5, "backoff": {"type": "exponential", "base_ms": 10, "cap_ms": 100}},
    {"attempts": 2, "backoff": {"type": "fixed", "delay_ms": 250}},
    {"timeout_ms": 1500},
    {"remove_on_complete": True, "remove_on_fail": {"count": 3}},
    {"job_id": "custom-1"},
    {"deduplication": {"id": "d1", "ttl_ms": 10_000}},
    {"repeat": {"every_ms": 60_000}},
    {"meta": {"k": ["ü", 1.5, None]}},
]
DATA: list[object] = [None, 0, "ünï ✓", [1, [], {}], {"n": 2**60, "f": 0.1, "e": {}}]


async def test_every_added_row_equals_its_stored_row(redis_client: Redis, prefix: str) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    specs = [
        JobSpec(f"job{i}", DATA[i % len(DATA)], options)  # type: ignore[arg-type]
        for i, options in enumerate(OPTIONS)
    ]
    rows = await backend.jobs.add_jobs("q", specs)
    one = await backend.jobs.add_job("q", "single", {"x": 1}, {"priority": 1})
    later = datetime(2030, 1, 1, tzinfo=UTC)
    at = await backend.jobs.add_job("q", "at", [1], {"delay_ms": 5}, now=later)
    # a duplicate custom id within the call and one of a stored job: both the first job
    again = await backend.jobs.add_jobs(
        "q", [JobSpec("dup", 1, {"job_id": "custom-2"}), JobSpec("dup", 2, {"job_id": "custom-2"})]
    )
    stored = await backend.jobs.add_job("q", "dup", 3, {"job_id": "custom-1"})
    assert again[0] == again[1] and stored == rows[OPTIONS.index({"job_id": "custom-1"})]
    assert at.created_at == later
    for row in [*rows, one, at, *again]:
        assert row == await backend.jobs.get_job("q", row.id), row.id
    assert len({row.id for row in rows}) == len(rows)


async def test_the_jobs_of_one_claim_and_of_two_get_distinct_uuid_tokens(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    await backend.jobs.add_jobs("q", [JobSpec("n", i) for i in range(8)])
    first = await backend.runs.claim_jobs("w", [QueueDemand("q", 5)], 30.0)
    second = await backend.runs.claim_jobs("w", [QueueDemand("q", 5)], 30.0)
    tokens = [job.lock_token for job in (*first, *second)]
    assert len(first) == 5 and len(second) == 3
    assert len(set(tokens)) == 8
    assert all(str(uuid.UUID(token)) == token for token in tokens)
    for job in first:  # each job's token is its own fence
        await backend.runs.complete_job("q", job.id, job.lock_token, None)


async def test_plain_adds_store_what_the_add_path_stores(redis_client: Redis, prefix: str) -> None:
    """``add_plain_jobs.lua`` (no custom id, dedup or repeat: the batched script) leaves
    the same hashes, indexes, counters, events and answer as ``add_jobs.lua`` given the
    same specs at the same moment."""
    from lane_pg.redis.jobs import checked_specs

    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    options: list[dict[str, object] | None] = [
        None,
        {"delay_ms": 500},
        {"priority": 4, "lifo": True},
        {"attempts": 3, "backoff": {"type": "fixed", "delay_ms": 5}, "timeout_ms": 9},
        {"delay_ms": 100, "remove_on_complete": {"count": 2}},
        {"lifo": True},
    ]
    specs = [(f"n{i}", {"i": i, "s": "ü"}, o) for i, o in enumerate(options * 3)]
    fields = [spec.fields for spec in checked_specs(specs)]
    now = 1_800_000_000_000
    answers = {}
    for script, queue in (("add_jobs", "general"), ("add_plain_jobs", "plain")):
        for _ in range(2):  # twice: the second call continues the counters
            answers[queue] = await backend.call(
                script, queue, {"now": now, "specs": fields, "cron": {}}
            )

    async def dump_queue(queue: str) -> dict[str, object]:
        keys = backend.keys(queue)
        tag = keys.meta[: -len(":meta")]
        out: dict[str, object] = {}
        async for key in redis_client.scan_iter(match=f"{tag}:*"):
            name = key.decode()[len(tag) :]
            kind = (await redis_client.type(key)).decode()
            if kind == "hash":
                out[name] = await redis_client.hgetall(key)
            elif kind == "zset":
                out[name] = await redis_client.zrange(key, 0, -1, withscores=True)
            elif kind == "stream":
                out[name] = await redis_client.xrange(key)
            else:
                out[name] = await redis_client.get(key)
        return out

    assert answers["plain"] == answers["general"]
    general, plain = await dump_queue("general"), await dump_queue("plain")
    assert len(general) > 20 and plain == general
