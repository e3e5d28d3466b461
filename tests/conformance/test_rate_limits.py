"""RATE: claim rate limits and max active jobs (RATE-1..9, CLAIM-11's wait), on every backend.

Time comes from ``now=`` (the ``clock`` fixture) wherever the API takes it; the limiter is a
sliding log, so "at most N per D" holds in every window of length D, which the tests probe
at window edges a fixed window would get wrong.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions
from lane_pg.types import JobRateLimit, QueueDemand
from tests.helpers import Clock

LEASE = 30


async def add(backend: JobQueueBackend, queue: str, n: int, clock: Clock) -> list[str]:
    jobs = [await backend.add_job(queue, "n", {"i": i}, now=clock.at(0)) for i in range(n)]
    return [job.id for job in jobs]


async def claim(
    backend: JobQueueBackend,
    queue: str,
    want: int,
    at: float,
    clock: Clock,
    rate_limit: JobRateLimit | None = None,
) -> list[str]:
    claimed = await backend.claim_jobs(
        "w", [QueueDemand(queue, want)], LEASE, now=clock.at(at), rate_limit=rate_limit
    )
    return [job.id for job in claimed]


# ------------------------------------------------------------------ configuration


async def test_shared_limit_set_get_clear_RATE_2(backend: JobQueueBackend, queue_name: str) -> None:
    assert await backend.get_claim_rate_limit(queue_name) is None
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(5, timedelta(milliseconds=500)))
    got = await backend.get_claim_rate_limit(queue_name)
    assert got == JobRateLimit(5, 0.5)
    assert got is not None and got.duration_ms == 500 and str(got) == "5/500ms"
    await backend.clear_claim_rate_limit(queue_name)
    assert await backend.get_claim_rate_limit(queue_name) is None


@pytest.mark.parametrize(
    ("max_jobs", "duration"),
    [(0, 1), (-1, 1), (True, 1), (1.5, 1), (1, 0), (1, -1), (1, 0.0004), (2**31, 1), (1, 2**31)],
)
def test_bad_rate_limits_are_refused_RATE_2(max_jobs: int, duration: float) -> None:
    with pytest.raises(InvalidOptions):
        JobRateLimit(max_jobs, duration)


async def test_max_active_set_get_clear_RATE_7(backend: JobQueueBackend, queue_name: str) -> None:
    assert await backend.get_max_active_jobs(queue_name) is None
    await backend.set_max_active_jobs(queue_name, 32)
    assert await backend.get_max_active_jobs(queue_name) == 32
    for bad in (0, -3, True, 2**31):
        with pytest.raises(InvalidOptions):
            await backend.set_max_active_jobs(queue_name, bad)
    assert await backend.get_max_active_jobs(queue_name) == 32  # refused: nothing changed
    await backend.clear_max_active_jobs(queue_name)
    assert await backend.get_max_active_jobs(queue_name) is None


async def test_limits_of_a_missing_queue_read_as_none_RATE_2_RATE_7(
    backend: JobQueueBackend, queue_name: str
) -> None:
    assert await backend.get_claim_rate_limit(queue_name) is None
    assert await backend.get_max_active_jobs(queue_name) is None
    assert await backend.is_maxed(queue_name) is False
    assert await backend.get_claim_rate_limit_ttl(queue_name) == -2
    assert await backend.get_claim_rate_limit_ttl(queue_name, 3) == 0
    await backend.clear_claim_rate_limit(queue_name)  # no error, nothing to clear
    await backend.clear_max_active_jobs(queue_name)
    await backend.clear_claim_rate_limit_key(queue_name)


# ------------------------------------------------------------------ the rate limit


async def test_exhausted_window_claims_nothing_and_the_job_waits_RATE_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first, second = await add(backend, queue_name, 2, clock)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(1, 10))
    assert await claim(backend, queue_name, 1, 1, clock) == [first]
    assert await claim(backend, queue_name, 1, 2, clock) == []
    job = await backend.get_job(queue_name, second)
    assert job is not None and job.state == "waiting"
    assert job.attempts_started == 0  # a throttled claim spends no attempt
    assert await claim(backend, queue_name, 1, 11, clock) == [second]  # the window moved on


async def test_a_claim_takes_only_what_the_window_has_left_RATE_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 10, clock)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(5, 1))
    assert len(await claim(backend, queue_name, 3, 0, clock)) == 3
    assert len(await claim(backend, queue_name, 10, 0.6, clock)) == 2
    # At 1.0 the 3 jobs of 0.0 left the window (0.0, 1.0]; the 2 of 0.6 are still in it.
    assert len(await claim(backend, queue_name, 10, 1.0, clock)) == 3
    # A fixed window starting at 1.0 would admit 2 more here; the window (0.5, 1.5] holds
    # 2 + 3 = 5 already.
    assert await claim(backend, queue_name, 10, 1.5, clock) == []
    assert len(await claim(backend, queue_name, 10, 1.6, clock)) == 2


async def test_every_window_holds_at_most_the_limit_RATE_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Claims every 50 ms for 3 s under 4 per 700 ms; no window of 700 ms, wherever it
    starts, holds more than 4 claimed jobs (checked at every claim time)."""
    await add(backend, queue_name, 40, clock)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(4, 0.7))
    times: list[float] = []
    for step in range(60):
        at = step * 0.05
        times += [at] * len(await claim(backend, queue_name, 3, at, clock))
    assert len(times) >= 16  # it claimed throughout, not just once
    for start in times:
        assert sum(1 for t in times if start <= t < start + 0.7 - 1e-9) <= 4, (start, times)


async def test_local_limit_wins_over_the_shared_one_RATE_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 12, clock)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(1, 1))
    local = JobRateLimit(5, 1)
    assert len(await claim(backend, queue_name, 10, 0, clock, local)) == 5
    assert await claim(backend, queue_name, 10, 0.5, clock, local) == []
    assert await claim(backend, queue_name, 10, 0.5, clock) == []  # shared: 5 counted > 1
    assert len(await claim(backend, queue_name, 10, 1.0, clock, local)) == 5


async def test_local_limit_counts_every_worker_of_the_queue_RATE_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 6, clock)
    local = JobRateLimit(2, 1)
    demand = [QueueDemand(queue_name, 5)]
    a = await backend.claim_jobs("a", demand, LEASE, now=clock.at(0), rate_limit=local)
    b = await backend.claim_jobs("b", demand, LEASE, now=clock.at(0.1), rate_limit=local)
    assert (len(a), len(b)) == (2, 0)
    b = await backend.claim_jobs("b", demand, LEASE, now=clock.at(1.0), rate_limit=local)
    assert len(b) == 2


async def test_a_bad_local_limit_is_refused_RATE_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 1, clock)
    with pytest.raises(InvalidOptions):
        await backend.claim_jobs(
            "w",
            [QueueDemand(queue_name, 1)],
            LEASE,
            now=clock.at(0),
            rate_limit=(5, 1),  # type: ignore[arg-type]
        )
    assert await backend.get_job_counts(queue_name, ["waiting"]) == {"waiting": 1}


async def test_a_limited_queue_leaves_the_next_queue_served(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    await add(backend, queue_name, 3, clock)
    await add(backend, queue_b, 3, clock)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(1, 10))
    demands = [QueueDemand(queue_name, 3), QueueDemand(queue_b, 3)]
    claimed = await backend.claim_jobs("w", demands, LEASE, total=3, now=clock.at(0))
    assert [job.queue for job in claimed] == [queue_name, queue_b, queue_b]


async def test_ttl_with_and_without_max_RATE_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 3, clock)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(2, 1))
    assert await backend.get_claim_rate_limit_ttl(queue_name, 2, now=clock.at(0)) == 0
    await claim(backend, queue_name, 1, 0, clock)
    assert await backend.get_claim_rate_limit_ttl(queue_name, 2, now=clock.at(0.1)) == 0
    await claim(backend, queue_name, 1, 0.2, clock)
    # Two claims of the last second: one more is admitted when the first leaves (at 1.0).
    assert await backend.get_claim_rate_limit_ttl(queue_name, 2, now=clock.at(0.3)) == 700
    assert await backend.get_claim_rate_limit_ttl(queue_name, now=clock.at(0.3)) == 700  # shared
    assert await backend.get_claim_rate_limit_ttl(queue_name, 1, now=clock.at(0.3)) == 900
    assert await backend.get_claim_rate_limit_ttl(queue_name, 3, now=clock.at(0.3)) == 0
    await backend.clear_claim_rate_limit(queue_name)
    # No max at all: the raw time-to-live, until the last logged claim leaves its window.
    assert await backend.get_claim_rate_limit_ttl(queue_name, now=clock.at(0.3)) == 900
    assert await backend.get_claim_rate_limit_ttl(queue_name, now=clock.at(1.2)) == -2
    with pytest.raises(InvalidOptions):
        await backend.get_claim_rate_limit_ttl(queue_name, 0)


async def test_manual_rate_limit_and_clearing_the_key_RATE_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 4, clock)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(1, 60))
    await backend.rate_limit_claims_for(queue_name, timedelta(milliseconds=500), now=clock.at(0))
    assert await claim(backend, queue_name, 1, 0.1, clock) == []
    assert await backend.get_claim_rate_limit_ttl(queue_name, now=clock.at(0.1)) == 400
    assert len(await claim(backend, queue_name, 1, 0.5, clock)) == 1  # the block ended
    assert await claim(backend, queue_name, 1, 0.6, clock) == []  # 1 per minute
    await backend.clear_claim_rate_limit_key(queue_name)
    assert len(await claim(backend, queue_name, 1, 0.7, clock)) == 1  # the counter is gone
    assert await backend.get_claim_rate_limit(queue_name) == JobRateLimit(1, 60)  # config kept
    await backend.rate_limit_claims_for(queue_name, 30, now=clock.at(0.8))
    await backend.clear_claim_rate_limit_key(queue_name)  # clears the block too
    assert len(await claim(backend, queue_name, 1, 0.9, clock)) == 1
    for bad in (0, -1, "1s"):
        with pytest.raises(InvalidOptions):
            await backend.rate_limit_claims_for(queue_name, bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ max active


async def test_is_maxed_RATE_8(backend: JobQueueBackend, queue_name: str, clock: Clock) -> None:
    await add(backend, queue_name, 2, clock)
    await backend.set_max_active_jobs(queue_name, 1)
    assert await backend.is_maxed(queue_name) is False
    (job,) = await backend.claim_jobs("w", [QueueDemand(queue_name, 5)], LEASE, now=clock.at(0))
    assert await backend.is_maxed(queue_name) is True
    await backend.complete_job(queue_name, job.id, job.lock_token, now=clock.at(1))
    assert await backend.is_maxed(queue_name) is False


async def test_max_active_caps_every_claim_RATE_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 5, clock)
    await backend.set_max_active_jobs(queue_name, 2)
    a = await backend.claim_jobs("a", [QueueDemand(queue_name, 5)], LEASE, now=clock.at(0))
    b = await backend.claim_jobs("b", [QueueDemand(queue_name, 5)], LEASE, now=clock.at(0.1))
    assert (len(a), len(b)) == (2, 0)
    await backend.complete_job(queue_name, a[0].id, a[0].lock_token, now=clock.at(0.2))
    b = await backend.claim_jobs("b", [QueueDemand(queue_name, 5)], LEASE, now=clock.at(0.3))
    assert len(b) == 1
    counts = await backend.get_job_counts(queue_name, ["waiting", "active"])
    assert counts == {"waiting": 2, "active": 2}


async def test_maxed_claims_move_nothing_and_use_no_rate_capacity_RATE_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    ids = await add(backend, queue_name, 3, clock)
    await backend.set_max_active_jobs(queue_name, 1)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(2, 1))
    (job,) = await backend.claim_jobs("w", [QueueDemand(queue_name, 3)], LEASE, now=clock.at(0))
    for at in (0.1, 0.2, 0.3):
        assert await claim(backend, queue_name, 3, at, clock) == []
    # The limiter still counts one claim: one more job is admitted now, a second is not.
    assert await backend.get_claim_rate_limit_ttl(queue_name, 2, now=clock.at(0.4)) == 0
    assert await backend.get_claim_rate_limit_ttl(queue_name, 1, now=clock.at(0.4)) == 600
    for job_id in ids[1:]:
        waiting = await backend.get_job(queue_name, job_id)
        assert waiting is not None and waiting.state == "waiting"
        assert waiting.attempts_started == 0
    await backend.complete_job(queue_name, job.id, job.lock_token, now=clock.at(0.5))
    assert len(await claim(backend, queue_name, 3, 0.6, clock)) == 1


async def test_claims_take_the_least_of_slots_rate_and_demand_RATE_7_RATE_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 8, clock)
    await backend.set_max_active_jobs(queue_name, 3)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(2, 1))
    assert len(await claim(backend, queue_name, 5, 0, clock)) == 2  # the rate
    assert len(await claim(backend, queue_name, 5, 1.0, clock)) == 1  # the free slots
    assert len(await claim(backend, queue_name, 5, 2.0, clock)) == 0  # maxed


async def test_paused_and_maxed_promote_due_jobs_anyway_CLAIM_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 1, clock)
    delayed = await backend.add_job(queue_name, "d", options={"delay_ms": 1000}, now=clock.at(0))
    await backend.set_max_active_jobs(queue_name, 1)
    assert len(await claim(backend, queue_name, 2, 0.5, clock)) == 1
    assert await claim(backend, queue_name, 2, 1.5, clock) == []  # maxed
    assert await backend.get_job_state(queue_name, delayed.id) == "waiting"


# ------------------------------------------------------------------ worker waits


async def test_next_claim_in_says_when_the_window_frees_CLAIM_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The claims use the current time (``clock`` is now), since ``next_claim_in`` reads
    the backend's clock: the wait is in (0, 60 s]."""
    await add(backend, queue_name, 3, clock)
    assert await backend.next_claim_in([queue_name]) is None  # waiting work, no limit
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(1, 60))
    # Admitted now (the window may have freed since the caller's claim): claim again.
    assert await backend.next_claim_in([queue_name]) == timedelta(0)
    assert len(await claim(backend, queue_name, 3, 0, clock)) == 1
    wait = await backend.next_claim_in([queue_name])
    assert wait is not None and timedelta(0) < wait <= timedelta(seconds=60)
    local = JobRateLimit(5, 60)
    assert await backend.next_claim_in([queue_name], local) == timedelta(0)  # local wins


async def test_next_claim_in_does_not_time_a_maxed_queue_CLAIM_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await add(backend, queue_name, 2, clock)
    await backend.set_max_active_jobs(queue_name, 1)
    assert len(await claim(backend, queue_name, 2, 0, clock)) == 1
    # Maxed: woken by the finish that frees the slot (a NOTIFY), not by a timer, even
    # where the limiter would admit a claim now.
    assert await backend.next_claim_in([queue_name]) is None
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(5, 60))
    assert await backend.next_claim_in([queue_name]) is None


async def test_next_claim_in_keeps_the_next_due_delayed_job_CLAIM_7(
    backend: JobQueueBackend, queue_name: str
) -> None:
    await backend.add_job(queue_name, "d", options={"delay_ms": 30_000})
    wait = await backend.next_claim_in([queue_name])
    assert wait is not None and timedelta(seconds=25) < wait <= timedelta(seconds=30)
    assert await backend.next_claim_in([queue_name], delayed=False) is None  # burst's question


async def test_a_throttled_queue_leaves_no_log_for_the_next_queue_RATE_4(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """The exhausted queue's window must not be logged against the plain queue after it:
    the plain queue then keeps no limiter state (ttl -2)."""
    await add(backend, queue_name, 3, clock)
    await add(backend, queue_b, 3, clock)
    await backend.set_claim_rate_limit(queue_name, JobRateLimit(1, 10))
    assert len(await claim(backend, queue_name, 1, 0, clock)) == 1
    demands = [QueueDemand(queue_name, 3), QueueDemand(queue_b, 3)]
    claimed = await backend.claim_jobs("w", demands, LEASE, now=clock.at(1))
    assert [job.queue for job in claimed] == [queue_b] * 3
    assert await backend.get_claim_rate_limit_ttl(queue_b, now=clock.at(1)) == -2
    assert all(job.processed_at == clock.at(1) for job in claimed)
