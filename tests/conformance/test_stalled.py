"""STALL: lease-based recovery of stalled jobs (STALL-1..3, STALL-5, STALL-6, STALL-9, STALL-10)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lane_pg.backend import JobQueueBackend
from lane_pg.types import JobRow, LeaseRef, QueueDemand, StalledOutcome
from tests.helpers import Clock, job_event_list, queue_level_events

STALLED_REASON = "job stalled more than allowable limit"


async def claim_one(backend: JobQueueBackend, queue: str, now_s: float, clock: Clock) -> JobRow:
    claimed = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 10, now=clock.at(now_s))
    assert len(claimed) == 1
    return claimed[0]


async def test_unexpired_lease_is_never_recovered_STALL_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    job = await claim_one(backend, queue_name, 0, clock)  # lease until +10

    assert await backend.recover_stalled([queue_name], now=clock.at(5)) == []
    # "expired before now": a lease ending exactly now is still valid
    assert await backend.recover_stalled([queue_name], now=clock.at(10)) == []
    after = await backend.get_job(queue_name, job.id)
    assert after == job


async def test_expired_lease_stays_active_until_recovery_STALL_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    job = await claim_one(backend, queue_name, 0, clock)

    # time passes (later calls use later `now`), nothing recovers: still active
    assert await backend.claim_jobs("w2", [QueueDemand(queue_name, 1)], 10, now=clock.at(60)) == []
    assert await backend.get_job_state(queue_name, job.id) == "active"
    snapshot = await backend.get_job(queue_name, job.id)
    assert snapshot is not None
    assert snapshot.lock_token == job.lock_token
    assert (await backend.get_job_counts(queue_name, ["active"]))["active"] == 1


async def test_expired_lease_requeued_STALL_1_STALL_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    job = await claim_one(backend, queue_name, 0, clock)

    outcomes = await backend.recover_stalled([queue_name], now=clock.at(10.001))

    assert outcomes == [StalledOutcome(queue_name, job.id, "waiting")]
    recovered = await backend.get_job(queue_name, job.id)
    assert recovered is not None
    assert recovered.state == "waiting"
    assert recovered.stalled_count == 1
    assert recovered.lock_token is None
    assert recovered.attempts_started == 1  # STALL-6: the lost run stays counted
    assert recovered.attempts_made == 0
    job_events = await job_event_list(backend, queue_name, job.id)
    assert [name for name, _ in job_events[-2:]] == ["stalled", "waiting"]
    assert isinstance(job_events[-2][1].get("reason"), str)
    assert job_events[-1][1] == {"prev": "active"}
    # a second pass finds nothing more
    assert await backend.recover_stalled([queue_name], now=clock.at(11)) == []


async def test_second_stall_fails_terminally_STALL_3_STALL_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"attempts": 2}, now=clock.at(0))
    await claim_one(backend, queue_name, 0, clock)
    first = await backend.recover_stalled([queue_name], max_stalled_count=1, now=clock.at(11))
    assert first == [StalledOutcome(queue_name, added.id, "waiting")]

    reclaimed = await claim_one(backend, queue_name, 12, clock)
    assert reclaimed.attempts_started == 2  # STALL-6
    second = await backend.recover_stalled([queue_name], max_stalled_count=1, now=clock.at(30))

    assert second == [StalledOutcome(queue_name, added.id, "failed")]
    failed = await backend.get_job(queue_name, added.id)
    assert failed is not None
    assert failed.state == "failed"
    assert failed.stalled_count == 2
    assert failed.failed_reason == STALLED_REASON
    assert failed.finished_at == clock.at(30)
    assert failed.lock_token is None
    assert failed.attempts_started == 2
    job_events = await job_event_list(backend, queue_name, added.id)
    assert [name for name, _ in job_events] == [
        "added",
        "waiting",
        "active",
        "stalled",
        "waiting",
        "active",
        "stalled",
        "failed",
    ]
    assert job_events[-1][1] == {"prev": "active", "failedReason": STALLED_REASON}
    assert [e.event for e in await queue_level_events(backend, queue_name)] == ["drained"]


async def test_max_stalled_count_zero_fails_on_first_stall_STALL_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    await claim_one(backend, queue_name, 0, clock)
    outcomes = await backend.recover_stalled([queue_name], max_stalled_count=0, now=clock.at(11))
    assert outcomes == [StalledOutcome(queue_name, added.id, "failed")]
    assert await backend.get_job_state(queue_name, added.id) == "failed"


async def test_higher_max_stalled_count_requeues_again_STALL_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    for round_ in range(3):
        start = round_ * 100
        await claim_one(backend, queue_name, start, clock)
        outcomes = await backend.recover_stalled(
            [queue_name], max_stalled_count=3, now=clock.at(start + 50)
        )
        assert outcomes == [StalledOutcome(queue_name, added.id, "waiting")]
    job = await backend.get_job(queue_name, added.id)
    assert job is not None
    assert job.stalled_count == 3
    assert job.attempts_started == 3


async def test_recovery_only_touches_named_queues_STALL_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", now=clock.at(0))
    other = await backend.add_job(queue_b, "b", now=clock.at(0))
    await claim_one(backend, queue_name, 0, clock)
    await claim_one(backend, queue_b, 0, clock)

    outcomes = await backend.recover_stalled([queue_name], now=clock.at(20))

    assert [o.queue for o in outcomes] == [queue_name]
    assert await backend.get_job_state(queue_b, other.id) == "active"


async def test_recovery_of_all_queues_STALL_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """``queues=None`` covers every queue. Leases of 1 ms at the real current time keep
    this from recovering live work of concurrent test runs on a shared database."""
    a = await backend.add_job(queue_name, "a", now=clock.at(0))
    b = await backend.add_job(queue_b, "b", now=clock.at(0))
    lease = timedelta(milliseconds=1)
    await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 1), QueueDemand(queue_b, 1)], lease, now=clock.at(0)
    )

    outcomes = await backend.recover_stalled(None, now=clock.at(0.002))

    ours = {(o.queue, o.id, o.state) for o in outcomes if o.queue in (queue_name, queue_b)}
    assert ours == {(queue_name, a.id, "waiting"), (queue_b, b.id, "waiting")}


async def test_stall_preserves_delivery_count_across_reclaims_STALL_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"attempts": 2}, now=clock.at(0))
    await claim_one(backend, queue_name, 0, clock)
    await backend.recover_stalled([queue_name], max_stalled_count=5, now=clock.at(11))
    await claim_one(backend, queue_name, 12, clock)
    await backend.recover_stalled([queue_name], max_stalled_count=5, now=clock.at(23))
    third = await claim_one(backend, queue_name, 24, clock)
    assert third.id == added.id
    assert third.attempts_started == 3
    assert third.attempts_made == 0
    assert third.stalled_count == 2


async def test_a_renewed_lease_is_never_recovered_STALL_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Renewed every 0.3 s with a 1 s lease for 5 s while recovery runs every 0.5 s: never
    recovered; once renewal stops, the next pass past the lease recovers it."""
    await backend.add_job(queue_name, "long", now=clock.at(0))
    [job] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 1, now=clock.at(0))
    assert job.lock_token is not None
    ref = LeaseRef(queue_name, job.id, job.lock_token)
    for tenth in range(1, 51):
        at = tenth / 10
        if tenth % 3 == 0:
            assert await backend.renew_leases([ref], 1, now=clock.at(at)) == []
        if tenth % 5 == 0:
            assert await backend.recover_stalled([queue_name], now=clock.at(at)) == []
    assert await backend.get_job_state(queue_name, job.id) == "active"
    [outcome] = await backend.recover_stalled([queue_name], now=clock.at(6.1))
    assert (outcome.id, outcome.state) == (job.id, "waiting")


async def test_repeat_owner_is_requeued_past_the_stall_limit_STALL_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Stalled three times with a limit of 1, the series' owner is waiting each time and
    keeps the series; a plain job beside it fails on its second stall."""
    owner = await backend.add_job(
        queue_name, "beat", None, {"repeat": {"every_ms": 60_000, "key": "beat"}}, now=clock.at(0)
    )
    plain = await backend.add_job(queue_name, "plain", now=clock.at(0))
    expected_plain = {0: "waiting", 1: "failed"}
    for round_ in range(3):
        start = round_ * 100
        claimed = await backend.claim_jobs(
            "w", [QueueDemand(queue_name, 2)], 10, now=clock.at(start)
        )
        assert {job.id for job in claimed} == {owner.id} | (
            {plain.id} if round_ in expected_plain else set()
        )
        outcomes = await backend.recover_stalled(
            [queue_name], max_stalled_count=1, now=clock.at(start + 50)
        )
        assert StalledOutcome(queue_name, owner.id, "waiting") in outcomes
        if round_ in expected_plain:
            assert StalledOutcome(queue_name, plain.id, expected_plain[round_]) in outcomes
        assert await backend.get_job_state(queue_name, owner.id) == "waiting"
        series = await backend.get_repeat(queue_name, "beat")
        assert series is not None
        assert series.job_id == owner.id
    recovered = await backend.get_job(queue_name, owner.id)
    assert recovered is not None
    assert recovered.stalled_count == 3
    assert await backend.get_job_state(queue_name, plain.id) == "failed"


async def test_reads_never_charge_attempts_of_an_expired_lease_STALL_9_STALL_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Ten rounds of every read and listing on a job whose lease expired (on the backend's
    own clock: claimed a minute ago with a 10 s lease) change neither its attempt counts nor
    its state; only recovery and a new claim do."""
    added = await backend.add_job(queue_name, "n", None, {"attempts": 3}, now=clock.at(-60))
    claimed = await claim_one(backend, queue_name, -60, clock)
    assert (claimed.attempts_started, claimed.attempts_made) == (1, 0)
    assert claimed.lease_expires_at is not None
    assert claimed.lease_expires_at < datetime.now(UTC)  # expired on every clock
    for _ in range(10):
        page = await backend.list_jobs(queue_name, ["active", "waiting"])
        assert [job.id for job in page.items] == [added.id]
        assert (page.items[0].attempts_started, page.items[0].attempts_made) == (1, 0)
        assert await backend.get_job_state(queue_name, added.id) == "active"
        assert (await backend.get_job_counts(queue_name))["active"] == 1
        assert await backend.get_job_count(queue_name, ["waiting"]) == 0
        assert await backend.count_pending_jobs(queue_name) == 0
        assert (await backend.get_queue_stats(queue_name)).active == 1
        assert await backend.get_counts_per_priority(queue_name, [0]) == {0: 0}
        await backend.get_job_finished_result(queue_name, added.id)
        await backend.get_job_logs(queue_name, added.id)
        await backend.next_due_in([queue_name])
        snapshot = await backend.get_job(queue_name, added.id)
        assert snapshot is not None
        assert (snapshot.state, snapshot.lock_token) == ("active", claimed.lock_token)
        assert (snapshot.attempts_started, snapshot.attempts_made) == (1, 0)

    await backend.recover_stalled([queue_name], now=clock.at(-40))
    reclaimed = await claim_one(backend, queue_name, -39, clock)
    assert (reclaimed.attempts_started, reclaimed.attempts_made) == (2, 0)
