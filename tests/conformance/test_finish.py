"""FIN: completion, batched finalisation, retention, release and delay of active jobs
(FIN-1, FIN-7, FIN-9, CLAIM-4, RET-1..3, MGMT-6, MGMT-7)."""

from __future__ import annotations

import uuid

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidPayload, JobNotFound, LockMismatch, ValidationError
from lane_pg.types import Completion, Failure, JobRetention, JobRow, QueueDemand
from tests.helpers import Clock, epoch_ms, job_event_list, queue_level_events, queue_snapshot


async def claim_all(
    backend: JobQueueBackend, queue: str, clock: Clock, at: float, n: int = 1, lease: float = 30
) -> list[JobRow]:
    claimed = await backend.claim_jobs("w", [QueueDemand(queue, n)], lease, now=clock.at(at))
    assert len(claimed) == n
    return claimed


def token(job: JobRow) -> str:
    assert job.lock_token is not None
    return job.lock_token


def other_token() -> str:
    return str(uuid.uuid4())


# ----------------------------------------------------------------------------- complete


async def test_complete_moves_to_completed_FIN_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", {"in": 1}, now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)

    done = await backend.complete_job(
        queue_name, added.id, token(active), {"ok": True}, now=clock.at(3)
    )

    assert done.state == "completed"
    assert done.return_value == {"ok": True}
    assert done.finished_at == clock.at(3)
    assert done.processed_at == clock.at(1)
    assert done.lock_token is None
    assert done.attempts_started == 1
    assert done.attempts_made == 0
    assert done.data == {"in": 1}
    assert await backend.get_job(queue_name, added.id) == done
    job_events = await job_event_list(backend, queue_name, added.id)
    assert job_events[-1] == ("completed", {"prev": "active", "returnvalue": {"ok": True}})


async def test_complete_with_null_result_FIN_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    done = await backend.complete_job(queue_name, added.id, token(active), now=clock.at(2))
    assert done.state == "completed"
    assert done.return_value is None
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "completed",
        {"prev": "active", "returnvalue": None},
    )


async def test_complete_wrong_token_changes_nothing_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    before = await queue_snapshot(backend, queue_name)

    with pytest.raises(LockMismatch):
        await backend.complete_job(queue_name, added.id, other_token(), "x", now=clock.at(2))

    assert await backend.get_job(queue_name, added.id) == active
    assert await queue_snapshot(backend, queue_name) == before


async def test_complete_job_that_is_not_active_raises_lock_mismatch_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(LockMismatch):
        await backend.complete_job(queue_name, added.id, other_token(), now=clock.at(1))
    assert await backend.get_job(queue_name, added.id) == added
    assert await queue_snapshot(backend, queue_name) == before


async def test_complete_twice_raises_lock_mismatch_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    done = await backend.complete_job(queue_name, added.id, token(active), 1, now=clock.at(2))
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(LockMismatch):
        await backend.complete_job(queue_name, added.id, token(active), 2, now=clock.at(3))
    assert await backend.get_job(queue_name, added.id) == done
    assert await queue_snapshot(backend, queue_name) == before


async def test_complete_missing_job_raises_not_found_FIN_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(JobNotFound):
        await backend.complete_job(queue_name, "missing", other_token(), now=clock.at(0))


async def test_complete_only_job_writes_drained_FIN_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    await backend.complete_job(queue_name, added.id, token(active), now=clock.at(2))

    drained = await queue_level_events(backend, queue_name)
    assert [(e.event, e.job_id, e.data) for e in drained] == [("drained", None, {})]
    names = [e.event for e in await backend.read_events(queue_name)]
    assert names[-2:] == ["completed", "drained"]


async def test_complete_with_work_left_writes_no_drained_FIN_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "a", now=clock.at(0))
    await backend.add_job(queue_name, "b", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    assert active.id == first.id
    await backend.complete_job(queue_name, first.id, token(active), now=clock.at(2))
    assert await queue_level_events(backend, queue_name) == []


async def test_complete_with_other_active_job_writes_no_drained_FIN_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", now=clock.at(0))
    await backend.add_job(queue_name, "b", now=clock.at(0))
    a, b = await claim_all(backend, queue_name, clock, 1, n=2)
    await backend.complete_job(queue_name, a.id, token(a), now=clock.at(2))
    assert await queue_level_events(backend, queue_name) == []
    await backend.complete_job(queue_name, b.id, token(b), now=clock.at(3))
    assert [e.event for e in await queue_level_events(backend, queue_name)] == ["drained"]


async def test_delayed_jobs_do_not_prevent_drained_FIN_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "a", now=clock.at(0))
    await backend.add_job(queue_name, "later", None, {"delay_ms": 600_000}, now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    await backend.complete_job(queue_name, added.id, token(active), now=clock.at(2))
    assert [e.event for e in await queue_level_events(backend, queue_name)] == ["drained"]


async def test_complete_after_lease_expiry_with_current_token_FIN_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 0, lease=10)
    done = await backend.complete_job(queue_name, added.id, token(active), "late", now=clock.at(60))
    assert done.state == "completed"
    assert done.return_value == "late"


async def test_old_token_after_recovery_and_reclaim_FIN_9_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [first] = await backend.claim_jobs("w1", [QueueDemand(queue_name, 1)], 10, now=clock.at(0))
    await backend.recover_stalled([queue_name], now=clock.at(11))
    [second] = await backend.claim_jobs("w2", [QueueDemand(queue_name, 1)], 10, now=clock.at(12))
    assert second.id == added.id
    assert second.lock_token != first.lock_token
    before = await queue_snapshot(backend, queue_name)

    with pytest.raises(LockMismatch):
        await backend.complete_job(queue_name, added.id, token(first), "stale", now=clock.at(13))
    with pytest.raises(LockMismatch):
        await backend.fail_job(queue_name, added.id, token(first), "stale", now=clock.at(13))

    current = await backend.get_job(queue_name, added.id)
    assert current == second
    assert current.state == "active"
    assert current.worker_id == "w2"
    assert await queue_snapshot(backend, queue_name) == before
    done = await backend.complete_job(queue_name, added.id, token(second), "ok", now=clock.at(14))
    assert done.state == "completed"


async def test_old_token_after_recovery_before_reclaim_FIN_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [first] = await claim_all(backend, queue_name, clock, 0, lease=10)
    await backend.recover_stalled([queue_name], now=clock.at(11))
    with pytest.raises(LockMismatch):
        await backend.complete_job(queue_name, added.id, token(first), now=clock.at(12))
    assert await backend.get_job_state(queue_name, added.id) == "waiting"


# ----------------------------------------------------------------------------- batches


async def test_complete_many_mixed_outcomes_in_input_order_FIN_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    for name in ("a", "b", "c"):
        await backend.add_job(queue_name, name, now=clock.at(0))
    a, b, c = await claim_all(backend, queue_name, clock, 1, n=3)

    outcomes = await backend.complete_jobs(
        [
            Completion(queue_name, c.id, token(c), "C"),
            Completion(queue_name, b.id, other_token(), "B"),
            Completion(queue_name, "missing", other_token()),
            Completion(queue_name, a.id, token(a), {"r": "A"}),
        ],
        now=clock.at(2),
    )

    assert [(o.queue, o.id, o.status) for o in outcomes] == [
        (queue_name, c.id, "ok"),
        (queue_name, b.id, "lock_mismatch"),
        (queue_name, "missing", "not_found"),
        (queue_name, a.id, "ok"),
    ]
    assert outcomes[0].state == "completed"
    assert outcomes[3].state == "completed"
    done_c = await backend.get_job(queue_name, c.id)
    assert done_c is not None
    assert done_c.return_value == "C"
    assert done_c.state == "completed"
    done_a = await backend.get_job(queue_name, a.id)
    assert done_a is not None
    assert done_a.return_value == {"r": "A"}
    assert await backend.get_job(queue_name, b.id) == b
    assert await queue_level_events(backend, queue_name) == []  # b is still active


async def test_complete_many_empty_FIN_1(backend: JobQueueBackend, clock: Clock) -> None:
    assert await backend.complete_jobs([], now=clock.at()) == []


async def test_complete_many_across_queues_FIN_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", now=clock.at(0))
    await backend.add_job(queue_b, "b", now=clock.at(0))
    a, b = await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 1), QueueDemand(queue_b, 1)], 30, now=clock.at(1)
    )
    outcomes = await backend.complete_jobs(
        [Completion(queue_b, b.id, token(b)), Completion(queue_name, a.id, token(a))],
        now=clock.at(2),
    )
    assert [(o.queue, o.status, o.state) for o in outcomes] == [
        (queue_b, "ok", "completed"),
        (queue_name, "ok", "completed"),
    ]


async def test_fail_many_mixed_outcomes_in_input_order_FIN_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "retry", None, {"attempts": 2}, now=clock.at(0))
    await backend.add_job(queue_name, "final", now=clock.at(0))
    await backend.add_job(queue_name, "discard", None, {"attempts": 5}, now=clock.at(0))
    await backend.add_job(queue_name, "kept", now=clock.at(0))
    retry, final, discard, kept = await claim_all(backend, queue_name, clock, 1, n=4)

    outcomes = await backend.fail_jobs(
        [
            Failure(queue_name, retry.id, token(retry), "r1"),
            Failure(queue_name, kept.id, other_token(), "nope"),
            Failure(queue_name, final.id, token(final), "r2", stacktrace="Traceback: r2"),
            Failure(queue_name, "missing", other_token(), "r3"),
            Failure(queue_name, discard.id, token(discard), "r4", discard_retry=True),
        ],
        now=clock.at(2),
    )

    assert [(o.id, o.status) for o in outcomes] == [
        (retry.id, "ok"),
        (kept.id, "lock_mismatch"),
        (final.id, "ok"),
        ("missing", "not_found"),
        (discard.id, "ok"),
    ]
    assert [outcomes[i].state for i in (0, 2, 4)] == ["waiting", "failed", "failed"]
    assert await backend.get_job(queue_name, kept.id) == kept
    failed_final = await backend.get_job(queue_name, final.id)
    assert failed_final is not None
    assert failed_final.failed_reason == "r2"
    assert failed_final.stacktrace == ["Traceback: r2"]
    retried = await backend.get_job(queue_name, retry.id)
    assert retried is not None
    assert retried.attempts_made == 1
    assert retried.failed_reason == "r1"


# ----------------------------------------------------------------------------- retention


async def test_finished_jobs_retained_by_default_RET_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    for i in range(5):
        await backend.add_job(queue_name, f"j{i}", now=clock.at(0))
    jobs = await claim_all(backend, queue_name, clock, 1, n=5)
    for i, job in enumerate(jobs):
        await backend.complete_job(queue_name, job.id, token(job), now=clock.at(2 + i))
    assert (await backend.get_job_counts(queue_name, ["completed"]))["completed"] == 5


async def test_remove_on_complete_true_RET_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(
        queue_name, "n", None, {"remove_on_complete": True}, now=clock.at(0)
    )
    [active] = await claim_all(backend, queue_name, clock, 1)
    await backend.add_job_log(queue_name, added.id, "line", now=clock.at(1))
    await backend.complete_job(queue_name, added.id, token(active), "r", now=clock.at(2))

    assert await backend.get_job(queue_name, added.id) is None
    assert await backend.get_job_state(queue_name, added.id) is None
    assert (await backend.get_job_counts(queue_name, ["completed"]))["completed"] == 0
    assert (await backend.get_job_logs(queue_name, added.id)).count == 0
    names = [name for name, _ in await job_event_list(backend, queue_name, added.id)]
    assert "completed" in names


async def test_remove_on_complete_count_keeps_newest_RET_2_RET_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    ids = [
        (
            await backend.add_job(
                queue_name, f"j{i}", None, {"remove_on_complete": 2}, now=clock.at(0)
            )
        ).id
        for i in range(4)
    ]
    jobs = await claim_all(backend, queue_name, clock, 1, n=4)
    for i, job in enumerate(jobs):
        await backend.complete_job(queue_name, job.id, token(job), now=clock.at(10 + i))

    remaining = [job_id for job_id in ids if await backend.get_job(queue_name, job_id) is not None]
    assert remaining == ids[2:]
    assert (await backend.get_job_counts(queue_name, ["completed"]))["completed"] == 2


async def test_remove_on_complete_age_RET_2_RET_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    retention = JobRetention(age_ms=10_000).to_json()
    old = await backend.add_job(
        queue_name, "old", None, {"remove_on_complete": retention}, now=clock.at(0)
    )
    mid = await backend.add_job(
        queue_name, "mid", None, {"remove_on_complete": retention}, now=clock.at(0)
    )
    new = await backend.add_job(
        queue_name, "new", None, {"remove_on_complete": retention}, now=clock.at(0)
    )
    j_old, j_mid, j_new = await claim_all(backend, queue_name, clock, 0, n=3, lease=600)

    await backend.complete_job(queue_name, old.id, token(j_old), now=clock.at(1))
    await backend.complete_job(queue_name, mid.id, token(j_mid), now=clock.at(9))
    assert await backend.get_job_state(queue_name, old.id) == "completed"  # 8 s old, age 10 s
    await backend.complete_job(queue_name, new.id, token(j_new), now=clock.at(15))

    assert await backend.get_job_state(queue_name, old.id) is None  # finished 14 s before
    assert await backend.get_job_state(queue_name, mid.id) == "completed"  # finished 6 s before
    assert await backend.get_job_state(queue_name, new.id) == "completed"


async def test_remove_on_fail_true_RET_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"remove_on_fail": True}, now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    await backend.fail_job(queue_name, added.id, token(active), "boom", now=clock.at(2))
    assert await backend.get_job(queue_name, added.id) is None
    assert (await backend.get_job_counts(queue_name, ["failed"]))["failed"] == 0


async def test_remove_on_complete_does_not_touch_failed_RET_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    opts = {"remove_on_complete": True}
    fails = await backend.add_job(queue_name, "f", None, opts, now=clock.at(0))
    ok = await backend.add_job(queue_name, "c", None, opts, now=clock.at(0))
    a, b = await claim_all(backend, queue_name, clock, 1, n=2)
    await backend.fail_job(queue_name, fails.id, token(a), "boom", now=clock.at(2))
    await backend.complete_job(queue_name, ok.id, token(b), now=clock.at(3))
    assert await backend.get_job_state(queue_name, fails.id) == "failed"
    assert await backend.get_job_state(queue_name, ok.id) is None


# ----------------------------------------------------------------------------- release / delay


async def test_release_active_to_waiting_MGMT_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)

    released = await backend.release_job(queue_name, added.id, token(active), now=clock.at(2))

    assert released.state == "waiting"
    assert released.lock_token is None
    assert released.lease_expires_at is None
    assert released.processed_at is None
    assert released.attempts_started == 1
    assert released.attempts_made == 0
    assert await backend.get_job(queue_name, added.id) == released
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "waiting",
        {"prev": "active"},
    )
    [again] = await claim_all(backend, queue_name, clock, 3)
    assert again.id == added.id
    assert again.attempts_started == 2


async def test_release_active_wrong_token_MGMT_7_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(LockMismatch):
        await backend.release_job(queue_name, added.id, other_token(), now=clock.at(2))
    assert await backend.get_job(queue_name, added.id) == active
    assert await queue_snapshot(backend, queue_name) == before


async def test_delay_active_MGMT_6(backend: JobQueueBackend, queue_name: str, clock: Clock) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)

    delayed = await backend.delay_job(queue_name, added.id, token(active), 30, now=clock.at(2))

    assert delayed.state == "delayed"
    assert delayed.available_at == clock.at(32)
    assert delayed.lock_token is None
    assert await backend.get_job(queue_name, added.id) == delayed
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "delayed",
        {"delay": epoch_ms(clock.at(32)), "prev": "active"},
    )
    demand = [QueueDemand(queue_name, 1)]
    assert await backend.claim_jobs("w", demand, 30, now=clock.at(31)) == []
    assert [j.id for j in await backend.claim_jobs("w", demand, 30, now=clock.at(32))] == [added.id]


async def test_delay_active_wrong_token_MGMT_6_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(LockMismatch):
        await backend.delay_job(queue_name, added.id, other_token(), 30, now=clock.at(2))
    assert await backend.get_job(queue_name, added.id) == active
    assert await queue_snapshot(backend, queue_name) == before


async def test_delay_active_on_waiting_job_refused_STATE_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Token-checked calls on a job that is not active raise ``LockMismatch``."""
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(LockMismatch):
        await backend.delay_job(queue_name, added.id, other_token(), 30, now=clock.at(1))
    with pytest.raises(LockMismatch):
        await backend.release_job(queue_name, added.id, other_token(), now=clock.at(1))
    assert await backend.get_job(queue_name, added.id) == added
    assert await queue_snapshot(backend, queue_name) == before


async def test_complete_non_json_result_rejected_SCH_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(InvalidPayload):
        await backend.complete_job(
            queue_name, added.id, token(active), {"x": object()}, now=clock.at(2)
        )
    assert await backend.get_job(queue_name, added.id) == active
    assert await queue_snapshot(backend, queue_name) == before


async def test_complete_many_same_job_twice_FIN_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    outcomes = await backend.complete_jobs(
        [
            Completion(queue_name, added.id, token(active), "first"),
            Completion(queue_name, added.id, token(active), "second"),
        ],
        now=clock.at(2),
    )
    assert [o.status for o in outcomes] == ["ok", "lock_mismatch"]
    done = await backend.get_job(queue_name, added.id)
    assert done is not None
    assert done.return_value == "first"


async def test_complete_many_writes_one_drained_after_last_FIN_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", now=clock.at(0))
    await backend.add_job(queue_name, "b", now=clock.at(0))
    a, b = await claim_all(backend, queue_name, clock, 1, n=2)
    await backend.complete_jobs(
        [Completion(queue_name, a.id, token(a)), Completion(queue_name, b.id, token(b))],
        now=clock.at(2),
    )
    names = [e.event for e in await backend.read_events(queue_name)]
    assert names[-3:] == ["completed", "completed", "drained"]
    assert names.count("drained") == 1


async def test_retention_age_limit_caps_removals_per_finalisation_RET_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    retention = JobRetention(age_ms=1000, limit=1).to_json()
    opts = {"remove_on_complete": retention}
    ids = [
        (await backend.add_job(queue_name, f"j{i}", None, opts, now=clock.at(0))).id
        for i in range(4)
    ]
    jobs = await claim_all(backend, queue_name, clock, 0, n=4, lease=600)
    for job in jobs[:3]:
        await backend.complete_job(queue_name, job.id, token(job), now=clock.at(1))
    # three jobs finished at +1 s are over age at +10 s, but one pass removes only one
    await backend.complete_job(queue_name, jobs[3].id, token(jobs[3]), now=clock.at(10))

    states = [await backend.get_job_state(queue_name, job_id) for job_id in ids]
    assert states.count(None) == 1
    assert states[3] == "completed"
    assert states[0] is None  # the oldest goes first


async def test_stalled_terminal_failure_applies_retention_STALL_3_RET_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"remove_on_fail": True}, now=clock.at(0))
    await claim_all(backend, queue_name, clock, 0, lease=10)
    outcomes = await backend.recover_stalled([queue_name], max_stalled_count=0, now=clock.at(11))
    assert [(o.id, o.state) for o in outcomes] == [(added.id, "failed")]
    assert await backend.get_job(queue_name, added.id) is None


async def test_complete_many_wrong_then_right_token_same_job_FIN_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    outcomes = await backend.complete_jobs(
        [
            Completion(queue_name, added.id, other_token(), "stale"),
            Completion(queue_name, added.id, token(active), "current"),
        ],
        now=clock.at(2),
    )
    assert [(o.status, o.state) for o in outcomes][1] == ("ok", "completed")
    assert outcomes[0].status == "lock_mismatch"
    done = await backend.get_job(queue_name, added.id)
    assert done is not None
    assert done.return_value == "current"


async def test_fail_many_same_job_twice_FIN_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"attempts": 3}, now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    outcomes = await backend.fail_jobs(
        [
            Failure(queue_name, added.id, token(active), "first"),
            Failure(queue_name, added.id, token(active), "second"),
        ],
        now=clock.at(2),
    )
    assert [o.status for o in outcomes] == ["ok", "lock_mismatch"]
    assert outcomes[0].state == "waiting"
    job = await backend.get_job(queue_name, added.id)
    assert job is not None
    assert (job.state, job.attempts_made, job.failed_reason) == ("waiting", 1, "first")


async def test_delay_active_zero_delay_is_due_now_MGMT_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    delayed = await backend.delay_job(queue_name, added.id, token(active), 0, now=clock.at(2))
    assert (delayed.state, delayed.available_at) == ("delayed", clock.at(2))
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(2))
    assert [job.id for job in claimed] == [added.id]


async def test_delay_active_negative_delay_rejected_MGMT_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(ValidationError):
        await backend.delay_job(queue_name, added.id, token(active), -5, now=clock.at(2))
    assert await backend.get_job(queue_name, added.id) == active
    assert await queue_snapshot(backend, queue_name) == before
