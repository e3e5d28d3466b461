"""Flows on Redis beyond the conformance suite: a parent's dependency rows are keys of its
queue that go with it, and a flow across queues is refused on a Redis Cluster unless its
queues' tags share a slot (a cluster of one node of the test's own)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import pytest_asyncio
from redis.asyncio import Redis
from redis.crc import key_slot

from lane_pg.errors import InvalidOptions
from lane_pg.redis.backend import RedisBackend
from lane_pg.types import QueueDemand
from lane_pg.types.flows import FlowJob
from tests.helpers import Clock
from tests.redis.conftest import same_slot_queue

QUEUE = "reports"


@pytest_asyncio.fixture
async def backend(redis_client: Redis, prefix: str) -> AsyncIterator[RedisBackend]:
    yield RedisBackend(redis_client, prefix=prefix, owns_client=False)


@pytest.fixture
def clock() -> Clock:
    now = datetime.now(UTC)
    return Clock(now.replace(microsecond=now.microsecond // 1000 * 1000))


async def deps_keys(client: Redis, backend: RedisBackend, queue: str = QUEUE) -> list[bytes]:
    tag = backend.keys(queue).tag
    return sorted([key async for key in client.scan_iter(match=f"{tag}:deps:*", count=500)])


async def run_all(backend: RedisBackend, clock: Clock, at: float, queue: str = QUEUE) -> None:
    """Claims and completes every job of ``queue`` that is waiting, until none is."""
    while claimed := await backend.claim_jobs("w", [QueueDemand(queue, 10)], 30, now=clock.at(at)):
        for job in claimed:
            assert job.lock_token is not None
            await backend.complete_job(queue, job.id, job.lock_token, "ok", now=clock.at(at))


async def test_a_parents_dependency_rows_go_with_it(
    backend: RedisBackend, redis_client: Redis, clock: Clock
) -> None:
    flow = await backend.add_flow(
        FlowJob("p", queue=QUEUE, children=[FlowJob("a"), FlowJob("b")]), now=clock.at(0)
    )
    await run_all(backend, clock, 1)
    assert (await backend.get_job_state(QUEUE, flow.job.id)) == "completed"
    assert await deps_keys(redis_client, backend)  # the rows, values and buckets

    assert await backend.remove_job(QUEUE, flow.job.id, now=clock.at(2))
    assert await deps_keys(redis_client, backend) == []


async def test_retention_deletes_a_parents_rows_with_it(
    backend: RedisBackend, redis_client: Redis, clock: Clock
) -> None:
    await backend.add_flow(
        FlowJob("p", queue=QUEUE, options={"remove_on_complete": True}, children=[FlowJob("a")]),
        now=clock.at(0),
    )
    await run_all(backend, clock, 1)
    assert await backend.get_job_count(QUEUE) == 1  # the child, kept
    assert await deps_keys(redis_client, backend) == []


async def test_obliterating_a_flows_queue_leaves_no_key_and_tells_the_other_parent(
    backend: RedisBackend, redis_client: Redis, clock: Clock
) -> None:
    other = "archive"
    flow = await backend.add_flow(
        FlowJob("p", queue=other, children=[FlowJob("a", queue=QUEUE), FlowJob("b")]),
        now=clock.at(0),
    )
    await backend.obliterate_queue(QUEUE, force=True, now=clock.at(1))

    tag = backend.keys(QUEUE).tag
    left = [key async for key in redis_client.scan_iter(match=f"{tag}:*")]
    assert all(key.endswith((b":ids", b":event_id")) for key in left), left
    counts = await backend.get_flow_dependency_counts(other, flow.job.id)
    assert counts is not None
    assert (counts.unprocessed, counts.missing) == (1, 1)  # a went: its row says removed


# ------------------------------------------------------------------------- cluster mode


async def test_a_flow_across_slots_is_refused_on_a_cluster_and_one_slot_runs(
    cluster_node: Redis, clock: Clock
) -> None:
    backend = RedisBackend(cluster_node, prefix="lane", owns_client=False)
    other = "b" if key_slot(b"{lane:b}") != key_slot(b"{lane:a}") else "c"

    with pytest.raises(InvalidOptions, match=r"slots \(a, b|slots \(a, c"):
        await backend.add_flow(
            FlowJob("p", queue="a", children=[FlowJob("x", queue=other)]), now=clock.at(0)
        )
    assert await cluster_node.dbsize() == 0  # nothing written

    near = same_slot_queue("a", "lane")
    flow = await backend.add_flow(
        FlowJob("p", queue="a", children=[FlowJob("x", queue=near)]), now=clock.at(0)
    )
    await run_all(backend, clock, 1, near)
    assert await backend.get_job_state("a", flow.job.id) == "waiting"
