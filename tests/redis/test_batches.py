"""Batches and chains on Redis: a settlement or a chain's next link written in another
queue's keys keeps that queue's settings, a later link's payload passes through the
scripts untouched, the client's directory of batches survives a batch that was never
stored, and Redis Cluster refuses a batch or chain across slots at add, naming the queues."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from lane_pg.errors import InvalidOptions
from lane_pg.redis.backend import RedisBackend
from lane_pg.types import QueueDemand, QueuedSpec
from tests.redis.conftest import same_slot_queue

START = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)


async def complete_one(backend: RedisBackend, queue: str) -> None:
    [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=START)
    await backend.complete_job(queue, job.id, job.lock_token or "", None, now=START)


async def test_a_callback_in_another_queue_follows_that_queue_s_event_setting(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    await backend.set_queue_events("quiet", record=False)  # the job's queue records nothing
    batch_id = str(uuid.uuid4())
    options = {"then": "done", "callback_queue": "loud"}
    await backend.add_batch(batch_id, "b", [QueuedSpec("quiet", "part")], options, now=START)
    await complete_one(backend, "quiet")

    assert await backend.get_job("loud", f"batch-{batch_id}-then") is not None
    added = [e for e in await backend.read_events("loud") if e.event == "added"]
    assert [e.job_id for e in added] == [f"batch-{batch_id}-then"]
    assert await redis_client.xlen(backend.keys("quiet").events) == 0


async def test_a_later_link_keeps_its_payload_and_options_exactly(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    payload = {"big": 2**60 + 1, "empty": [], "nested": {"x": 0.1}, "text": "a/b\u00e9"}
    links = [
        QueuedSpec("a", "one"),
        QueuedSpec("b", "two"),
        QueuedSpec("a", "three", payload, {"meta": {"n": 2**55 + 3, "list": []}}),
    ]
    await backend.add_chain("c1", links, now=START)
    await complete_one(backend, "a")
    await complete_one(backend, "b")

    third = await backend.get_job("a", "c1-2")
    assert third is not None and third.data == payload
    assert third.options["meta"] == {"n": 2**55 + 3, "list": []}
    assert third.options["chain"] == {"id": "c1", "index": 2, "links": [], "catch_queue": "a"}


async def test_a_directory_entry_without_its_batch_reads_as_none_and_is_pruned(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    stored = str(uuid.uuid4())
    await backend.add_batch(stored, "kept", [QueuedSpec("q", "part")], now=START)
    lost = str(uuid.uuid4())  # a client that died between the directory and the script
    await redis_client.hset(f"{{{prefix}}}:batch-homes", lost, "q")
    await redis_client.zadd(f"{{{prefix}}}:batches", {lost: 0})

    assert await backend.find_batch(lost) is None
    assert [b.id for b in await backend.list_batches(10)] == [stored]
    assert await backend.prune_batches(3600, now=START) == 0  # nothing of age went
    assert await redis_client.zscore(f"{{{prefix}}}:batches", lost) is None
    assert await redis_client.hget(f"{{{prefix}}}:batch-homes", lost) is None
    assert await backend.find_batch(stored) is not None


# ------------------------------------------------------------------------ Redis Cluster


async def test_on_cluster_a_batch_or_chain_across_slots_is_refused_naming_the_queues(
    cluster_node: Redis,
) -> None:
    backend = RedisBackend(cluster_node, prefix="lane", owns_client=False)
    assert await backend.is_cluster()
    batch_id = str(uuid.uuid4())
    jobs = [QueuedSpec("q0", "part"), QueuedSpec("other", "part")]
    with pytest.raises(InvalidOptions, match=r"q0, other"):
        await backend.add_batch(batch_id, "b", jobs, now=START)
    with pytest.raises(InvalidOptions, match=r"q0, elsewhere"):
        await backend.add_batch(batch_id, "b", jobs[:1], {"callback_queue": "elsewhere"}, now=START)
    with pytest.raises(InvalidOptions, match=r"q0, other"):
        await backend.add_chain("c", jobs, now=START)
    with pytest.raises(InvalidOptions, match=r"q0, alerts"):
        await backend.add_chain("c", jobs[:1], catch="alert", catch_queue="alerts", now=START)
    assert await backend.find_batch(batch_id) is None
    assert await cluster_node.dbsize() == 0  # nothing written, not even the directory


async def test_on_cluster_queues_of_one_slot_settle_and_chain_across_them(
    cluster_node: Redis,
) -> None:
    backend = RedisBackend(cluster_node, prefix="lane", owns_client=False)
    twin = same_slot_queue("q0", "lane")
    batch_id = str(uuid.uuid4())
    jobs = [QueuedSpec("q0", "part"), QueuedSpec(twin, "part")]
    await backend.add_batch(batch_id, "b", jobs, {"finally": "f"}, now=START)
    await complete_one(backend, "q0")
    await complete_one(backend, twin)
    batch = await backend.find_batch(batch_id)
    assert batch is not None and batch.finished_at == START
    assert await backend.get_job("q0", f"batch-{batch_id}-finally") is not None

    await backend.add_chain("c", [QueuedSpec(twin, "a"), QueuedSpec("q0", "b")], now=START)
    await complete_one(backend, twin)
    assert await backend.get_job("q0", "c-1") is not None
