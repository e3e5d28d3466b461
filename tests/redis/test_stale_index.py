"""Stale state-index members on Redis: a member whose job hash is gone, or whose job is now
in another state, written by hand as an interrupted writer or an operator's edit could
leave it. Claim, promotion, stalled recovery, drain/clean and listing skip such a member
and drop it; none revives the job it names or fails on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.types import ALL_STATES, JobOptions, JobRow, QueueDemand

START = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
MS = int(START.timestamp() * 1000)
Q = "q"


KEYS: dict[str, int] = {}


def _member(job: JobRow) -> str:
    """A non-waiting index's member for the job (lua/includes/job.lua)."""
    return f"{KEYS[job.id]:016d}:{job.id}"


async def _add(backend: RedisBackend, options: JobOptions | None = None) -> JobRow:
    job = await backend.add_job(Q, "n", None, options, now=START)
    raw = await backend.client.hget(backend.keys(Q).job(job.id), "key")
    KEYS[job.id] = int(raw)
    return job


async def _wm(client: Redis, backend: RedisBackend, job_id: str) -> str:
    raw = await client.hget(backend.keys(Q).job(job_id), "wm")
    assert raw is not None
    return str(raw.decode())


async def _members(client: Redis, backend: RedisBackend, state: str) -> list[str]:
    return [m.decode() for m in await client.zrange(backend.keys(Q).key(state), 0, -1)]


async def _completed(backend: RedisBackend, job_id: str) -> JobRow:
    [run] = await backend.claim_jobs("w", [QueueDemand(Q, 1)], 30, now=START)
    assert run.id == job_id and run.lock_token is not None
    await backend.complete_job(Q, run.id, run.lock_token, None, now=START)
    row = await backend.get_job(Q, job_id)
    assert row is not None and row.state == "completed"
    return row


async def test_claim_skips_and_drops_stale_waiting_members(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    done = await _add(backend)
    stale_wm = await _wm(redis_client, backend, done.id)
    done = await _completed(backend, done.id)
    gone = await _add(backend)
    gone_wm = await _wm(redis_client, backend, gone.id)
    live = await _add(backend)
    await redis_client.delete(backend.keys(Q).job(gone.id))  # the hash vanished
    await redis_client.zadd(backend.keys(Q).waiting, {stale_wm: 0})  # ahead of everything

    claimed = await backend.claim_jobs("w", [QueueDemand(Q, 3)], 30, now=START)

    assert [job.id for job in claimed] == [live.id]  # the demand is met by live jobs only
    row = await backend.get_job(Q, done.id)
    assert row is not None and row.state == "completed" and row.attempts_started == 1
    assert await _members(redis_client, backend, "waiting") == []
    assert gone_wm not in await _members(redis_client, backend, "waiting")
    assert await _members(redis_client, backend, "completed") == [_member(done)]


async def test_claim_and_promotion_skip_stale_delayed_members(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    keys = backend.keys(Q)
    for promote in (False, True):
        done = await _completed(backend, (await _add(backend)).id)
        gone = await _add(backend, JobOptions(delay=1))
        await redis_client.delete(keys.job(gone.id))
        await redis_client.zadd(keys.delayed, {_member(done): MS})  # due, stale

        if promote:
            assert await backend.promote_due_jobs([Q], now=START + timedelta(seconds=2)) == 0
        else:
            later = START + timedelta(seconds=2)
            assert await backend.claim_jobs("w", [QueueDemand(Q, 2)], 30, now=later) == []

        row = await backend.get_job(Q, done.id)
        assert row is not None and row.state == "completed"
        assert await _members(redis_client, backend, "delayed") == []
        assert await _members(redis_client, backend, "waiting") == []
        assert _member(done) in await _members(redis_client, backend, "completed")


async def test_stalled_recovery_leaves_a_job_that_moved_on(
    redis_client: Redis, prefix: str
) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    done = await _completed(backend, (await _add(backend)).id)
    # An expired lease's entry left behind in the active index.
    await redis_client.zadd(backend.keys(Q).key("active"), {_member(done): MS - 1})

    later = START + timedelta(minutes=5)
    assert await backend.recover_stalled([Q], max_stalled_count=1, now=later) == []

    row = await backend.get_job(Q, done.id)
    assert row is not None and (row.state, row.stalled_count) == ("completed", 0)
    assert await _members(redis_client, backend, "active") == []
    assert await _members(redis_client, backend, "waiting") == []


async def test_clean_and_drain_leave_a_job_that_moved_on(redis_client: Redis, prefix: str) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    keys = backend.keys(Q)
    done = await _completed(backend, (await _add(backend)).id)
    waiting = await _add(backend)
    wm = await _wm(redis_client, backend, waiting.id)
    # The waiting job also named by a stale `completed` entry: a clean of completed jobs
    # must not remove it.
    await redis_client.zadd(keys.key("completed"), {_member(waiting): MS - 1})
    # And the completed job named by a stale waiting entry: a drain must not remove it.
    await redis_client.zadd(keys.waiting, {wm.replace(waiting.id, done.id)[:20] + _member(done): 0})

    later = START + timedelta(minutes=5)
    cleaned = await backend.clean_jobs(Q, "completed", timedelta(0), now=later)
    assert [row.id for row in cleaned] == [done.id]
    row = await backend.get_job(Q, waiting.id)
    assert row is not None and row.state == "waiting"

    await redis_client.zadd(keys.key("completed"), {_member(waiting): MS - 1})
    await redis_client.zadd(keys.waiting, {"0000000" + "0" * 13 + _member(done): 0})
    assert await backend.drain_jobs(Q, now=later) == 1  # the waiting job only
    assert await backend.get_job(Q, waiting.id) is None
    assert await backend.clean_jobs(Q, "completed", timedelta(0), now=later) == []
    for state in ALL_STATES:
        assert await _members(redis_client, backend, state) == [], state


async def test_listing_skips_and_drops_stale_members(redis_client: Redis, prefix: str) -> None:
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    keys = backend.keys(Q)
    done = await _completed(backend, (await _add(backend)).id)
    waiting = await _add(backend)
    gone = await _add(backend, JobOptions(delay=60))
    await redis_client.delete(keys.job(gone.id))
    await redis_client.zadd(keys.key("active"), {_member(done): MS + 30_000})

    page = await backend.list_jobs(Q, ["active", "waiting", "delayed"], limit=10)
    assert [(row.id, row.state) for row in page.items] == [(waiting.id, "waiting")]
    assert page.total == 1
    everything = await backend.list_jobs(Q, ALL_STATES, limit=10)
    assert sorted((row.id, row.state) for row in everything.items) == sorted(
        [(waiting.id, "waiting"), (done.id, "completed")]
    )
    assert everything.total == 2
    assert await _members(redis_client, backend, "active") == []
    assert await _members(redis_client, backend, "delayed") == []
    counts = await backend.get_job_counts(Q)
    assert (counts["active"], counts["delayed"]) == (0, 0)


async def test_retention_deletes_no_job_a_stale_finished_member_names(
    redis_client: Redis, prefix: str
) -> None:
    """A completion's retention (keep 1) and the maintenance prune (keep 1) take the oldest
    members of the completed index: a stale one naming a waiting job goes from the index
    only, and the waiting job stays."""
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    keys = backend.keys(Q)
    for prune in (False, True):
        retention = None if prune else JobOptions(remove_on_complete=1)
        done = await _add(backend, retention)
        waiting = await _add(backend)
        await redis_client.zadd(keys.key("completed"), {_member(waiting): MS - 1})  # oldest
        if prune:
            await backend.set_queue_retention(Q, keep_completed=1, keep_failed=None)
            await _completed(backend, done.id)
            assert await backend.prune_finished([Q]) == 0
        else:
            await _completed(backend, done.id)

        row = await backend.get_job(Q, waiting.id)
        assert row is not None and row.state == "waiting", prune
        assert await _members(redis_client, backend, "completed") == [_member(done)]
        [run] = await backend.claim_jobs("w", [QueueDemand(Q, 1)], 30, now=START)
        assert run.id == waiting.id and run.lock_token is not None
        await backend.complete_job(Q, run.id, run.lock_token, None, now=START)
        await backend.remove_job(Q, run.id)
        await backend.remove_job(Q, done.id)


async def test_a_stale_active_entry_holds_no_slot_under_max_active(
    redis_client: Redis, prefix: str
) -> None:
    """Under max_active 1, a stale active entry (its job completed, its lease-expiry
    score a year ahead: stalled recovery would not meet it) is dropped by the claim it
    would have blocked, and the waiting job is claimed."""
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    done = await _completed(backend, (await _add(backend)).id)
    waiting = await _add(backend)
    await backend.set_max_active_jobs(Q, 1)
    year = 365 * 24 * 3600 * 1000
    await redis_client.zadd(backend.keys(Q).key("active"), {_member(done): MS + year})

    [run] = await backend.claim_jobs("w", [QueueDemand(Q, 1)], 30, now=START)

    assert run.id == waiting.id
    assert await _members(redis_client, backend, "active") == [_member(waiting)]
    row = await backend.get_job(Q, done.id)
    assert row is not None and row.state == "completed"


async def test_clearing_a_queue_keeps_a_finished_job_a_stale_entry_names(
    redis_client: Redis, prefix: str
) -> None:
    """``clear_queues`` never removes a finished job: a stale waiting-children entry
    naming a completed one is dropped, and the completed job stays."""
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    done = await _completed(backend, (await _add(backend)).id)
    waiting = await _add(backend)
    await redis_client.zadd(backend.keys(Q).key("waiting-children"), {_member(done): 0})

    assert await backend.clear_queues([Q], now=START) == 1  # the waiting job

    row = await backend.get_job(Q, done.id)
    assert row is not None and row.state == "completed"
    assert await backend.get_job(Q, waiting.id) is None
    assert await _members(redis_client, backend, "waiting-children") == []


async def test_search_shows_a_job_its_index_names_twice_once(
    redis_client: Redis, prefix: str
) -> None:
    """A waiting job with a second, stale waiting entry (ahead of its own) comes up once
    in a search of waiting jobs."""
    backend = RedisBackend(redis_client, prefix=prefix, owns_client=False)
    waiting = await _add(backend)
    other = await _add(backend)
    stale = "0" * 20 + _member(waiting)
    await redis_client.zadd(backend.keys(Q).waiting, {stale: 0})

    page = await backend.search_jobs(Q, "waiting", limit=10)

    assert [row.id for row in page.items] == [waiting.id, other.id]
