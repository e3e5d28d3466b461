"""``search_jobs`` on Redis where the conformance suite cannot look yet (its order test
needs flows for waiting-children): the order of every other state's index, pages whose
matches span several batches of job hashes, ties of one score longer than a batch, and a
walk that jobs leave while it reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest_asyncio
from redis.asyncio import Redis

from lane_pg.backend.reads import MAX_SEARCH_LIMIT, SearchJobs, search_filter
from lane_pg.redis.backend import RedisBackend
from lane_pg.redis.reads import RedisReads
from lane_pg.types import Completion, JobSpec, LeaseRef, QueueDemand
from tests.helpers import Clock

QUEUE = "search"


@pytest_asyncio.fixture
async def backend(redis_client: Redis, prefix: str) -> AsyncIterator[RedisBackend]:
    yield RedisBackend(redis_client, prefix=prefix, owns_client=False)


async def search(backend: RedisBackend, queue: str, state: str) -> list[str]:
    page = await backend.search_jobs(queue, state, limit=MAX_SEARCH_LIMIT)  # type: ignore[arg-type]
    assert not page.has_more
    return [job.id for job in page.items]


async def test_each_state_in_the_order_of_its_index(backend: RedisBackend) -> None:
    now = datetime.now(UTC)
    clock = Clock(now.replace(microsecond=now.microsecond // 1000 * 1000))
    for job_id, options in (
        ("low", {"priority": 5}),
        ("fifo", {"priority": 1}),
        ("lifo", {"priority": 1, "lifo": True}),
        ("fifo2", {"priority": 1}),
        ("late", {"delay_ms": 60_000}),
        ("soon", {"delay_ms": 30_000}),
        ("soon2", {"delay_ms": 30_000}),
    ):
        await backend.add_job(QUEUE, "n", None, {"job_id": job_id, **options}, now=clock.at(0))
    run = "run"
    names = ["x1", "x2", "x3", "x4", "y1", "y2", "y3", "a1", "a2", "a3"]
    await backend.add_jobs(run, [JobSpec("n", None, {"job_id": n}) for n in names], now=clock.at(1))
    claimed = {
        job.id: job.lock_token
        for job in await backend.claim_jobs("w", [QueueDemand(run, 10)], 30, now=clock.at(2))
    }
    # a1's lease renewed: the active index (by lease expiry) reads a2, a3, a1; the search
    # still gives them oldest first
    await backend.renew_leases([LeaseRef(run, "a1", claimed["a1"] or "")], 60, now=clock.at(3))
    for job_id, at in (("x1", 5), ("x2", 7), ("x3", 7), ("x4", 6)):
        await backend.complete_job(run, job_id, claimed[job_id] or "", now=clock.at(at))
    for job_id, at in (("y1", 9), ("y2", 8), ("y3", 9)):
        await backend.fail_job(run, job_id, claimed[job_id] or "", "no", now=clock.at(at))

    assert await search(backend, QUEUE, "waiting") == ["lifo", "fifo", "fifo2", "low"]
    assert await search(backend, QUEUE, "delayed") == ["soon", "soon2", "late"]
    assert await search(backend, run, "active") == ["a1", "a2", "a3"]
    assert await search(backend, run, "completed") == ["x3", "x2", "x4", "x1"]
    assert await search(backend, run, "failed") == ["y3", "y1", "y2"]


async def test_pages_across_batches_of_hashes(backend: RedisBackend) -> None:
    # 700 jobs, every third a match: the matches run through several 200-job batches.
    await backend.add_jobs(QUEUE, [JobSpec("n", {"n": n, "pick": n % 3 == 0}) for n in range(700)])
    matching = [str(n + 1) for n in range(700) if n % 3 == 0]
    wanted = {"data_path": ["pick"], "data_value": True}

    page = await backend.search_jobs(QUEUE, "waiting", offset=100, limit=50, **wanted)
    assert ([job.id for job in page.items], page.has_more) == (matching[100:150], True)
    last = await backend.search_jobs(QUEUE, "waiting", offset=200, limit=50, **wanted)
    assert ([job.id for job in last.items], last.has_more) == (matching[200:], False)
    everything = await backend.search_jobs(QUEUE, "waiting", limit=MAX_SEARCH_LIMIT)
    assert len(everything.items) == MAX_SEARCH_LIMIT and everything.has_more


async def test_ties_of_one_score_longer_than_a_batch_are_read_once_each(
    backend: RedisBackend,
) -> None:
    """Jobs due, or finished, at one instant share one score: batches go on within it."""
    now = datetime.now(UTC)
    clock = Clock(now.replace(microsecond=now.microsecond // 1000 * 1000))
    delayed = await backend.add_jobs(
        QUEUE, [JobSpec("d", None, {"delay_ms": 60_000})] * 450, now=clock.at(0)
    )
    assert await search(backend, QUEUE, "delayed") == [job.id for job in delayed]

    await backend.add_jobs("run", [JobSpec("n")] * 450, now=clock.at(0))
    claimed = await backend.claim_jobs("w", [QueueDemand("run", 450)], 30, now=clock.at(1))
    await backend.complete_jobs(
        [Completion("run", job.id, job.lock_token or "") for job in claimed], now=clock.at(2)
    )
    newest_first = sorted((job.id for job in claimed), key=int, reverse=True)
    assert await search(backend, "run", "completed") == newest_first
    page = await backend.search_jobs("run", "completed", offset=190, limit=30)
    assert [job.id for job in page.items] == newest_first[190:220]


async def test_jobs_leaving_the_head_while_a_search_reads_skip_no_job(
    backend: RedisBackend,
) -> None:
    """Claims take jobs from the head of waiting while a search walks it: the next batch
    starts after the last member read, where a rank would now skip as many jobs."""
    added = await backend.add_jobs(QUEUE, [JobSpec("n")] * 450)
    batches = RedisReads(backend)._search_batches(
        QUEUE, search_filter(SearchJobs(QUEUE, "waiting"))
    )
    first = await anext(batches)
    await backend.claim_jobs("w", [QueueDemand(QUEUE, 100)], 30)
    rest = [job_id async for batch in batches for job_id in batch]
    assert first + rest == [job.id for job in added]
