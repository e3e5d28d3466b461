"""Idle workers on Redis block in BZPOPMIN on their queues' markers: a job made ready
wakes one, a claim that leaves jobs behind wakes the next, a marker popped when nobody
waits any more goes back for another worker, and a killed blocking connection is replaced
(and the worker woken once to cover the gap)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.redis.wakeups import RedisWakeups
from lane_pg.types import JobSpec, QueueDemand
from tests.helpers import eventually


@pytest_asyncio.fixture
async def backend(redis_client: Redis, prefix: str) -> AsyncIterator[RedisBackend]:
    yield RedisBackend(redis_client, prefix=prefix, owns_client=False)


async def _wakeups(backend: RedisBackend, queue: str, name: str) -> RedisWakeups:
    await backend.client.delete(backend.keys(queue).marker)  # the set-up's own wake-up
    wakeups = RedisWakeups(backend, [queue], name=name, block=2.0)
    await wakeups.start()
    return wakeups


async def test_an_add_wakes_a_blocked_worker(backend: RedisBackend) -> None:
    await backend.add_job("q", "x", None, {"delay_ms": 3_600_000})  # the queue exists
    wakeups = await _wakeups(backend, "q", "w1")
    try:
        waiting = asyncio.create_task(wakeups.wait(10.0))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await backend.add_job("q", "x")
        assert await asyncio.wait_for(waiting, 5.0) is True
    finally:
        await wakeups.close()


async def test_a_claim_that_leaves_jobs_wakes_the_next_idle_worker(backend: RedisBackend) -> None:
    await backend.add_job("q", "x", None, {"delay_ms": 3_600_000})
    first = await _wakeups(backend, "q", "w1")
    second = await _wakeups(backend, "q", "w2")
    try:
        waits = [asyncio.create_task(w.wait(10.0)) for w in (first, second)]
        await asyncio.sleep(0.1)
        await backend.add_jobs("q", [JobSpec("x", 1), JobSpec("x", 2)])  # one marker for both
        done, _ = await asyncio.wait(waits, timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1
        claimed = await backend.claim_jobs("w", [QueueDemand("q", 1)], 30)
        assert len(claimed) == 1
        # One job is left: the claim put the marker back, and the other worker wakes.
        done, _ = await asyncio.wait(waits, timeout=5.0)
        assert all(task.done() and task.result() for task in waits)
    finally:
        await first.close()
        await second.close()


async def test_a_marker_popped_when_nobody_waits_goes_back(
    backend: RedisBackend, redis_client: Redis
) -> None:
    await backend.add_job("q", "x", None, {"delay_ms": 3_600_000})
    wakeups = await _wakeups(backend, "q", "w1")
    try:
        assert await wakeups.wait(0.2) is False  # its BZPOPMIN is still blocked
        await backend.add_job("q", "x")
        marker = backend.keys("q").marker
        # Popped by the blocked call with no waiter left, then put back.
        await eventually(lambda: redis_client.zcard(marker), timeout=5.0)
        assert await redis_client.zrange(marker, 0, -1) == [b"0"]
    finally:
        await wakeups.close()


async def test_a_killed_blocking_connection_is_replaced(
    backend: RedisBackend, redis_client: Redis
) -> None:
    await backend.add_job("q", "x", None, {"delay_ms": 3_600_000})
    wakeups = await _wakeups(backend, "q", "lane_pg listener killed")
    # On a cluster (LANE_PG_TEST_REDIS=redis+cluster://...), the node of q's marker.
    node: dict[str, Any] = (
        {"target_nodes": redis_client.get_node_from_key(backend.keys("q").marker)}
        if backend.cluster
        else {}
    )
    try:
        waiting = asyncio.create_task(wakeups.wait(10.0))

        async def blocked() -> bool:
            clients = await redis_client.client_list(**node)
            return any(
                c["name"] == "lane_pg_listener_killed" and c["cmd"] == "bzpopmin" for c in clients
            )

        await eventually(blocked, timeout=5.0)
        for client in await redis_client.client_list(**node):
            if client["name"] == "lane_pg_listener_killed":
                await redis_client.client_kill_filter(_id=client["id"], **node)
        # Woken once for the gap, on a new connection that blocks again and wakes for adds.
        assert await asyncio.wait_for(waiting, 5.0) is True
        assert wakeups.reconnects == 1
        again = asyncio.create_task(wakeups.wait(10.0))
        await eventually(blocked, timeout=5.0)
        await backend.add_job("q", "x")
        assert await asyncio.wait_for(again, 5.0) is True
    finally:
        await wakeups.close()
