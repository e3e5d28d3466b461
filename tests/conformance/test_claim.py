"""CLAIM: claims across queues, leases and renewal (CLAIM-1, 2, 4..6, 15, STATE-3, PAUSE-12)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.types import ClaimedJob, JobRow, LeaseRef, QueueDemand
from tests.helpers import Clock, job_event_list, queue_snapshot


async def test_claim_sets_lease_fields_CLAIM_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", {"a": 1}, now=clock.at(0))

    claimed = await backend.claim_jobs(
        "worker-1", [QueueDemand(queue_name, 1)], timedelta(seconds=30), now=clock.at(2)
    )

    assert len(claimed) == 1
    active = claimed[0]
    assert active.id == job.id
    assert active.state == "active"
    assert isinstance(active.lock_token, str)
    assert active.lock_token
    assert active.worker_id == "worker-1"
    assert active.processed_at == clock.at(2)
    assert active.lease_expires_at == clock.at(32)
    assert active.attempts_started == 1
    assert active.attempts_made == 0
    assert active.data == {"a": 1}
    job_events = await job_event_list(backend, queue_name, job.id)
    assert [name for name, _ in job_events] == ["added", "waiting", "active"]
    assert job_events[-1] == ("active", {"prev": "waiting"})


async def test_a_claim_returns_claimed_jobs_whose_token_is_set_CLAIM_1_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """``claim_jobs`` returns ``ClaimedJob``s: ``JobRow``s whose ``lock_token`` is the str of
    this claim (a type without None), equal to the snapshot ``get_job`` reads."""
    waiting = await backend.add_job(queue_name, "n", now=clock.at(0))
    with pytest.raises(ValueError, match="no lock token"):
        ClaimedJob.from_job(waiting)
    await backend.add_job(queue_b, "n", now=clock.at(0))
    claimed = await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 5), QueueDemand(queue_b, 5)], 30, now=clock.at(1)
    )
    assert [type(job) for job in claimed] == [ClaimedJob, ClaimedJob]
    assert all(isinstance(job, JobRow) for job in claimed)
    assert len({job.lock_token for job in claimed}) == 2
    for job in claimed:
        fetched = await backend.get_job(job.queue, job.id)
        assert fetched is not None and type(fetched) is JobRow
        assert fetched == job and job == fetched
        assert ClaimedJob.from_job(fetched) == job


async def test_active_snapshot_exposes_lease_STATE_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    [claimed] = await backend.claim_jobs("w7", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))

    fetched = await backend.get_job(queue_name, claimed.id)
    assert fetched == claimed
    assert fetched.lock_token == claimed.lock_token
    assert fetched.worker_id == "w7"
    assert fetched.lease_expires_at == clock.at(31)
    assert await backend.get_job_state(queue_name, claimed.id) == "active"


async def test_lease_in_float_seconds_CLAIM_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 2.5, now=clock.at(1))
    assert claimed.lease_expires_at == clock.at(3.5)


async def test_each_claim_mints_a_fresh_token_CLAIM_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    [first] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))
    assert first.lock_token is not None
    await backend.release_job(queue_name, first.id, first.lock_token, now=clock.at(2))
    [second] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(3))

    assert second.id == first.id
    assert second.lock_token
    assert second.lock_token != first.lock_token
    assert second.attempts_started == 2  # release kept 1; the new claim counts again


async def test_claim_from_empty_or_unknown_queue_returns_nothing_CLAIM_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    assert await backend.claim_jobs("w", [QueueDemand(queue_name, 5)], 30, now=clock.at()) == []
    assert await backend.claim_jobs("w", [], 30, now=clock.at()) == []


async def test_claim_limit_caps_per_queue_CLAIM_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    a = [await backend.add_job(queue_name, f"a{i}", now=clock.at(i)) for i in range(3)]
    b = [await backend.add_job(queue_b, f"b{i}", now=clock.at(i)) for i in range(3)]

    claimed = await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 1), QueueDemand(queue_b, 2)], 30, now=clock.at(10)
    )

    assert [(job.queue, job.id) for job in claimed] == [
        (queue_name, a[0].id),
        (queue_b, b[0].id),
        (queue_b, b[1].id),
    ]
    assert (await backend.get_job_counts(queue_name, ["waiting", "active"])) == {
        "waiting": 2,
        "active": 1,
    }
    assert (await backend.get_job_counts(queue_b, ["waiting", "active"])) == {
        "waiting": 1,
        "active": 2,
    }


async def test_zero_limit_takes_nothing_from_that_queue_CLAIM_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    skipped = await backend.add_job(queue_name, "a", now=clock.at(0))
    served = await backend.add_job(queue_b, "b", now=clock.at(0))
    claimed = await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 0), QueueDemand(queue_b, 1)], 30, now=clock.at(1)
    )
    assert [job.id for job in claimed] == [served.id]
    assert await backend.get_job_state(queue_name, skipped.id) == "waiting"


async def test_total_serves_earlier_queue_first_CLAIM_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """Demands [control, prompt] with total 1: control goes first."""
    control, prompt = queue_name, queue_b
    prompt_job = await backend.add_job(prompt, "p", now=clock.at(0))
    control_job = await backend.add_job(control, "c", now=clock.at(1))
    demands = [QueueDemand(control, 1), QueueDemand(prompt, 1)]

    first = await backend.claim_jobs("w", demands, 30, total=1, now=clock.at(2))
    assert [(job.queue, job.id) for job in first] == [(control, control_job.id)]
    assert await backend.get_job_state(prompt, prompt_job.id) == "waiting"

    second = await backend.claim_jobs("w", demands, 30, total=1, now=clock.at(3))
    assert [(job.queue, job.id) for job in second] == [(prompt, prompt_job.id)]


async def test_total_spills_over_to_later_queues_CLAIM_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    a = [await backend.add_job(queue_name, f"a{i}", now=clock.at(i)) for i in range(2)]
    b = [await backend.add_job(queue_b, f"b{i}", now=clock.at(i)) for i in range(2)]
    demands = [QueueDemand(queue_name, 5), QueueDemand(queue_b, 5)]

    claimed = await backend.claim_jobs("w", demands, 30, total=3, now=clock.at(5))

    assert [job.id for job in claimed] == [a[0].id, a[1].id, b[0].id]
    assert await backend.get_job_state(queue_b, b[1].id) == "waiting"


async def test_claim_only_named_queues_CLAIM_15(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    other = await backend.add_job(queue_b, "exports", now=clock.at(0))
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 5)], 30, now=clock.at(1))
    assert claimed == []
    assert await backend.get_job_state(queue_b, other.id) == "waiting"


async def test_claim_promotes_due_delayed_jobs_CLAIM_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "d", None, {"delay_ms": 5000}, now=clock.at(0))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(6))
    assert claimed.id == job.id
    names = await job_event_list(backend, queue_name, job.id)
    assert [name for name, _ in names] == ["added", "delayed", "waiting", "active"]
    assert names[2][1].get("prev") == "delayed"
    assert names[3][1] == {"prev": "waiting"}


async def test_claim_promotes_while_paused_but_claims_nothing_CLAIM_2_PAUSE_12(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "d", None, {"delay_ms": 5000}, now=clock.at(0))
    await backend.pause_queue(queue_name)

    assert await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(5)) == []

    assert await backend.get_job_state(queue_name, job.id) == "waiting"
    events = await job_event_list(backend, queue_name, job.id)
    assert events[-1] == ("waiting", {"prev": "delayed"})
    await backend.resume_queue(queue_name)
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(6))
    assert [c.id for c in claimed] == [job.id]


async def test_paused_queue_gives_nothing_and_changes_nothing_PAUSE_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    other = await backend.add_job(queue_b, "m", now=clock.at(0))
    await backend.pause_queue(queue_name)
    before = await queue_snapshot(backend, queue_name)

    claimed = await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 1), QueueDemand(queue_b, 1)], 30, total=1, now=clock.at(1)
    )

    assert [(job.queue, job.id) for job in claimed] == [(queue_b, other.id)]
    assert await queue_snapshot(backend, queue_name) == before


async def test_renew_leases_returns_failures_and_extends_valid_CLAIM_5_CLAIM_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", now=clock.at(0))
    await backend.add_job(queue_name, "b", now=clock.at(0))
    a, b = await backend.claim_jobs("w", [QueueDemand(queue_name, 2)], 10, now=clock.at(1))
    assert a.lock_token is not None
    assert b.lock_token is not None
    valid = LeaseRef(queue_name, a.id, a.lock_token)
    wrong_token = LeaseRef(queue_name, b.id, a.lock_token)
    missing = LeaseRef(queue_name, "no-such-job", a.lock_token)

    failures = await backend.renew_leases([valid, wrong_token, missing], 60, now=clock.at(5))

    assert set(failures) == {wrong_token, missing}
    assert len(failures) == 2
    renewed = await backend.get_job(queue_name, a.id)
    assert renewed is not None
    assert renewed.lease_expires_at == clock.at(65)
    assert renewed.lock_token == a.lock_token
    untouched = await backend.get_job(queue_name, b.id)
    assert untouched is not None
    assert untouched.lease_expires_at == clock.at(11)

    # past the original expiry only the job that was not renewed is recovered
    outcomes = await backend.recover_stalled([queue_name], now=clock.at(30))
    assert [(o.id, o.state) for o in outcomes] == [(b.id, "waiting")]
    assert await backend.get_job_state(queue_name, a.id) == "active"


async def test_renew_all_valid_returns_empty_CLAIM_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", now=clock.at(0))
    [a] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 10, now=clock.at(0))
    assert a.lock_token is not None
    ref = LeaseRef(queue_name, a.id, a.lock_token)
    assert await backend.renew_leases([ref], timedelta(seconds=20), now=clock.at(8)) == []
    job = await backend.get_job(queue_name, a.id)
    assert job is not None
    assert job.lease_expires_at == clock.at(28)
    assert await backend.renew_leases([], 20, now=clock.at(8)) == []


async def test_renew_finished_or_stale_lease_fails_CLAIM_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", now=clock.at(0))
    [a] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 10, now=clock.at(0))
    assert a.lock_token is not None
    ref = LeaseRef(queue_name, a.id, a.lock_token)
    await backend.complete_job(queue_name, a.id, a.lock_token, None, now=clock.at(1))

    assert await backend.renew_leases([ref], 10, now=clock.at(2)) == [ref]
    job = await backend.get_job(queue_name, a.id)
    assert job is not None
    assert job.state == "completed"


async def test_renew_after_expiry_before_recovery_keeps_job_CLAIM_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The lock is the token: an expired but unrecovered lease can still be renewed."""
    await backend.add_job(queue_name, "a", now=clock.at(0))
    [a] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 10, now=clock.at(0))
    assert a.lock_token is not None
    ref = LeaseRef(queue_name, a.id, a.lock_token)
    assert await backend.renew_leases([ref], 10, now=clock.at(15)) == []
    assert await backend.recover_stalled([queue_name], now=clock.at(20)) == []
    job = await backend.get_job(queue_name, a.id)
    assert job is not None
    assert job.lease_expires_at == clock.at(25)
