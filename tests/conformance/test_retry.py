"""FIN/RETRY: failure finalisation, backoff and attempts (FIN-3..5, FIN-7, RETRY-1, RETRY-5)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import JobNotFound, LockMismatch
from lane_pg.types import Backoff, JobOptions, JobRow, QueueDemand
from tests.helpers import Clock, epoch_ms, job_event_list, queue_level_events, queue_snapshot


async def claim(backend: JobQueueBackend, queue: str, clock: Clock, at: float) -> JobRow:
    claimed = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(at))
    assert len(claimed) == 1, f"nothing to claim at +{at}s"
    assert claimed[0].lock_token is not None
    return claimed[0]


async def fail_once(
    backend: JobQueueBackend, queue: str, clock: Clock, at: float, **kwargs: Any
) -> JobRow:
    active = await claim(backend, queue, clock, at)
    assert active.lock_token is not None
    return await backend.fail_job(
        queue, active.id, active.lock_token, f"boom@{at}", now=clock.at(at), **kwargs
    )


async def test_fixed_backoff_delayed_delayed_failed_FIN_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(
        queue_name, "n", None, JobOptions(attempts=3, backoff=Backoff.fixed(1)), now=clock.at(0)
    )

    first = await fail_once(backend, queue_name, clock, 0)
    assert (first.state, first.attempts_made, first.available_at) == ("delayed", 1, clock.at(1))
    assert first.failed_reason == "boom@0"
    assert first.lock_token is None
    second = await fail_once(backend, queue_name, clock, 1)
    assert (second.state, second.attempts_made, second.available_at) == ("delayed", 2, clock.at(2))
    third = await fail_once(backend, queue_name, clock, 2)
    assert (third.state, third.attempts_made) == ("failed", 3)
    assert third.finished_at == clock.at(2)
    assert third.failed_reason == "boom@2"
    assert third.attempts_started == 3
    assert await backend.get_job(queue_name, added.id) == third

    job_events = await job_event_list(backend, queue_name, added.id)
    delayed = [data for name, data in job_events if name == "delayed"]
    assert delayed == [
        {"delay": epoch_ms(clock.at(1)), "prev": "active", "failedReason": "boom@0"},
        {"delay": epoch_ms(clock.at(2)), "prev": "active", "failedReason": "boom@1"},
    ]
    # FIN-4: failed, then retries-exhausted, as the job's last two events
    assert job_events[-2:] == [
        ("failed", {"prev": "active", "failedReason": "boom@2"}),
        ("retries-exhausted", {"attemptsMade": 3}),
    ]
    assert [e.event for e in await queue_level_events(backend, queue_name)] == ["drained"]


async def test_delayed_retry_not_claimable_before_backoff_FIN_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(
        queue_name,
        "n",
        None,
        {"attempts": 2, "backoff": {"type": "fixed", "delay_ms": 5000}},
        now=clock.at(0),
    )
    await fail_once(backend, queue_name, clock, 0)
    demand = [QueueDemand(queue_name, 1)]
    assert await backend.claim_jobs("w", demand, 30, now=clock.at(4.999)) == []
    assert len(await backend.claim_jobs("w", demand, 30, now=clock.at(5))) == 1


async def test_zero_backoff_goes_back_to_waiting_FIN_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"attempts": 2}, now=clock.at(0))
    failed = await fail_once(backend, queue_name, clock, 1)

    assert failed.state == "waiting"
    assert failed.attempts_made == 1
    assert failed.failed_reason == "boom@1"
    assert failed.lock_token is None
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "waiting",
        {"prev": "active"},
    )
    assert await queue_level_events(backend, queue_name) == []  # waiting work remains


async def test_explicit_zero_fixed_backoff_goes_back_to_waiting_FIN_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(
        queue_name, "n", None, JobOptions(attempts=2, backoff=Backoff.fixed(0)), now=clock.at(0)
    )
    assert (await fail_once(backend, queue_name, clock, 1)).state == "waiting"


async def test_single_attempt_fails_with_retries_exhausted_FIN_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    failed = await fail_once(backend, queue_name, clock, 1)

    assert failed.state == "failed"
    assert failed.attempts_made == 1
    assert failed.finished_at == clock.at(1)
    job_events = await job_event_list(backend, queue_name, added.id)
    assert [name for name, _ in job_events] == [
        "added",
        "waiting",
        "active",
        "failed",
        "retries-exhausted",
    ]
    assert job_events[-2:] == [
        ("failed", {"prev": "active", "failedReason": "boom@1"}),
        ("retries-exhausted", {"attemptsMade": 1}),
    ]
    names = [e.event for e in await backend.read_events(queue_name)]
    assert names[-3:] == ["failed", "retries-exhausted", "drained"]


async def test_discard_retry_on_first_of_three_FIN_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"attempts": 3}, now=clock.at(0))
    failed = await fail_once(backend, queue_name, clock, 1, discard_retry=True)

    assert failed.state == "failed"
    assert failed.attempts_made == 1
    names = [name for name, _ in await job_event_list(backend, queue_name, added.id)]
    assert names[-1] == "failed"
    assert "retries-exhausted" not in names


async def test_discard_retry_on_last_attempt_writes_both_FIN_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"attempts": 3}, now=clock.at(0))
    assert (await fail_once(backend, queue_name, clock, 1)).state == "waiting"
    assert (await fail_once(backend, queue_name, clock, 2)).state == "waiting"
    failed = await fail_once(backend, queue_name, clock, 3, discard_retry=True)
    assert (failed.state, failed.attempts_made) == ("failed", 3)
    names = [name for name, _ in await job_event_list(backend, queue_name, added.id)]
    assert names[-2:] == ["failed", "retries-exhausted"]


async def test_exponential_backoff_delays_RETRY_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """base 1 s, cap 3 s, no jitter: 1 s, 2 s, then capped at 3 s."""
    await backend.add_job(
        queue_name,
        "n",
        None,
        JobOptions(attempts=4, backoff=Backoff.exponential(1, cap=3)),
        now=clock.at(0),
    )
    first = await fail_once(backend, queue_name, clock, 0)
    assert first.available_at == clock.at(1)
    second = await fail_once(backend, queue_name, clock, 10)
    assert second.available_at == clock.at(12)
    third = await fail_once(backend, queue_name, clock, 20)
    assert third.available_at == clock.at(23)
    assert third.state == "delayed"
    assert (await fail_once(backend, queue_name, clock, 30)).state == "failed"


async def test_exponential_backoff_without_cap_RETRY_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(
        queue_name,
        "n",
        None,
        {"attempts": 4, "backoff": {"type": "exponential", "base_ms": 250}},
        now=clock.at(0),
    )
    delays = []
    for start in (0, 10, 20):
        failed = await fail_once(backend, queue_name, clock, start)
        delays.append(failed.available_at - clock.at(start))
    assert [d.total_seconds() for d in delays] == [0.25, 0.5, 1.0]


async def test_exponential_backoff_jitter_within_bounds_RETRY_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(
        queue_name,
        "n",
        None,
        JobOptions(attempts=2, backoff=Backoff.exponential(10, jitter=0.5)),
        now=clock.at(0),
    )
    failed = await fail_once(backend, queue_name, clock, 0)
    assert failed.state == "delayed"
    assert clock.at(5) <= failed.available_at <= clock.at(15)


async def test_sequence_backoff_last_delay_repeats_RETRY_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Sequence [5, 15] gives 5, 15, 15."""
    await backend.add_job(
        queue_name,
        "n",
        None,
        JobOptions(attempts=4, backoff=Backoff.sequence([5, 15])),
        now=clock.at(0),
    )
    first = await fail_once(backend, queue_name, clock, 0)
    assert first.available_at == clock.at(5)
    second = await fail_once(backend, queue_name, clock, 100)
    assert second.available_at == clock.at(115)
    third = await fail_once(backend, queue_name, clock, 200)
    assert third.available_at == clock.at(215)


async def test_attempt_counters_RETRY_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """One crash (lease lost, recovered) plus one handler error."""
    added = await backend.add_job(queue_name, "n", None, {"attempts": 3}, now=clock.at(0))
    await claim(backend, queue_name, clock, 0)
    await backend.recover_stalled([queue_name], max_stalled_count=5, now=clock.at(31))
    failed = await fail_once(backend, queue_name, clock, 40)
    assert failed.id == added.id
    assert failed.attempts_started == 2
    assert failed.attempts_made == 1


async def test_stacktrace_is_appended_as_one_entry_per_failure_FIN_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", None, {"attempts": 3}, now=clock.at(0))
    first = await fail_once(backend, queue_name, clock, 0, stacktrace="trace one\nline 2")
    assert first.stacktrace == ["trace one\nline 2"]
    second = await fail_once(backend, queue_name, clock, 1)  # no trace: nothing appended
    assert second.stacktrace == ["trace one\nline 2"]
    third = await fail_once(backend, queue_name, clock, 2, stacktrace="trace three")
    assert third.state == "failed"
    assert third.stacktrace == ["trace one\nline 2", "trace three"]
    fetched = await backend.get_job(queue_name, third.id)
    assert fetched is not None
    assert fetched.stacktrace == third.stacktrace


async def test_fail_wrong_token_changes_nothing_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"attempts": 3}, now=clock.at(0))
    active = await claim(backend, queue_name, clock, 1)
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(LockMismatch):
        await backend.fail_job(queue_name, added.id, str(uuid.uuid4()), "x", now=clock.at(2))
    assert await backend.get_job(queue_name, added.id) == active
    assert await queue_snapshot(backend, queue_name) == before


async def test_fail_missing_job_FIN_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(JobNotFound):
        await backend.fail_job(queue_name, "missing", str(uuid.uuid4()), "x", now=clock.at(0))


async def test_uncapped_exponential_backoff_stays_bounded_RETRY_1_FIN_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """An exponential backoff without a cap doubles past every date a database can store:
    from about the 44th failure of a 1 s base the failure could not be written (interval
    and then bigint overflow), leaving the job active until its lease ran out. The delay is
    bounded like every stored duration (MAX_DURATION_MS, ~292 years), on both backends."""
    from lane_pg.options import MAX_DURATION_MS

    added = await backend.add_job(
        queue_name,
        "n",
        None,
        JobOptions(attempts=80, backoff=Backoff.exponential(1.0)),
        now=clock.at(0),
    )
    delays = []
    for attempt in range(1, 66):
        failed = await fail_once(backend, queue_name, clock, 0)
        assert (failed.state, failed.attempts_made) == ("delayed", attempt)
        assert failed.available_at is not None
        delays.append(int((failed.available_at - clock.at(0)).total_seconds() * 1000))
        await backend.promote_job(queue_name, added.id, now=clock.at(0))
    assert delays[:3] == [1000, 2000, 4000]
    assert delays[-1] == MAX_DURATION_MS
    assert delays == sorted(delays)
