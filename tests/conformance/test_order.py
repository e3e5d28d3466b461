"""ORD: the waiting order (ORD-1..4, ADD-6)."""

from __future__ import annotations

from lane_pg.backend import JobQueueBackend
from lane_pg.types import JobOptions, QueueDemand
from tests.helpers import Clock


async def claim_ids(backend: JobQueueBackend, queue: str, clock: Clock, n: int = 10) -> list[str]:
    claimed = await backend.claim_jobs("w", [QueueDemand(queue, n)], 60, now=clock.at(100))
    return [job.id for job in claimed]


async def test_lifo_before_fifo_within_priority_ORD_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    f1 = await backend.add_job(queue_name, "F1", now=clock.at(0))
    f2 = await backend.add_job(queue_name, "F2", now=clock.at(1))
    l1 = await backend.add_job(queue_name, "L1", None, JobOptions(lifo=True), now=clock.at(2))
    l2 = await backend.add_job(queue_name, "L2", None, JobOptions(lifo=True), now=clock.at(3))

    assert await claim_ids(backend, queue_name, clock) == [l2.id, l1.id, f1.id, f2.id]


async def test_one_at_a_time_claims_follow_the_same_order_ORD_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    f1 = await backend.add_job(queue_name, "F1", now=clock.at(0))
    l1 = await backend.add_job(queue_name, "L1", None, {"lifo": True}, now=clock.at(1))
    f2 = await backend.add_job(queue_name, "F2", now=clock.at(2))
    l2 = await backend.add_job(queue_name, "L2", None, {"lifo": True}, now=clock.at(3))

    order: list[str] = []
    for step in range(4):
        claimed = await backend.claim_jobs(
            "w", [QueueDemand(queue_name, 1)], 60, now=clock.at(10 + step)
        )
        order.extend(job.id for job in claimed)
    assert order == [l2.id, l1.id, f1.id, f2.id]


async def test_priority_before_lifo_ORD_1_ADD_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    p10 = await backend.add_job(queue_name, "p10", None, {"priority": 10}, now=clock.at())
    p1 = await backend.add_job(queue_name, "p1", None, {"priority": 1}, now=clock.at())
    p5_lifo = await backend.add_job(
        queue_name, "p5", None, {"priority": 5, "lifo": True}, now=clock.at()
    )
    p0 = await backend.add_job(queue_name, "p0", now=clock.at())
    p5 = await backend.add_job(queue_name, "p5b", None, {"priority": 5}, now=clock.at())
    top = await backend.add_job(queue_name, "max", None, {"priority": 2**21}, now=clock.at())

    assert await claim_ids(backend, queue_name, clock) == [
        p0.id,
        p1.id,
        p5_lifo.id,
        p5.id,
        p10.id,
        top.id,
    ]


async def test_promoted_jobs_take_a_fresh_sequence_ORD_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """B was added first, but A is promoted first, so A is claimed first."""
    b = await backend.add_job(queue_name, "B", None, {"delay_ms": 60_000}, now=clock.at(0))
    a = await backend.add_job(queue_name, "A", None, {"delay_ms": 60_000}, now=clock.at(1))

    a_promoted = await backend.promote_job(queue_name, a.id, now=clock.at(2))
    b_promoted = await backend.promote_job(queue_name, b.id, now=clock.at(3))

    assert a_promoted.enqueued_seq is not None
    assert b_promoted.enqueued_seq is not None
    assert a_promoted.enqueued_seq < b_promoted.enqueued_seq
    assert await claim_ids(backend, queue_name, clock) == [a.id, b.id]


async def test_due_jobs_promoted_in_available_at_order_ORD_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    late = await backend.add_job(queue_name, "late", None, {"delay_ms": 3000}, now=clock.at(0))
    early = await backend.add_job(queue_name, "early", None, {"delay_ms": 1000}, now=clock.at(1))
    waiting = await backend.add_job(queue_name, "w", now=clock.at(2))

    assert await backend.promote_due_jobs([queue_name], now=clock.at(10)) == 2
    early_job = await backend.get_job(queue_name, early.id)
    late_job = await backend.get_job(queue_name, late.id)
    assert early_job is not None
    assert late_job is not None
    assert early_job.enqueued_seq is not None
    assert late_job.enqueued_seq is not None
    assert early_job.enqueued_seq < late_job.enqueued_seq
    assert await claim_ids(backend, queue_name, clock) == [waiting.id, early.id, late.id]


async def test_promotion_inside_claim_keeps_available_at_order_ORD_2_CLAIM_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    late = await backend.add_job(queue_name, "late", None, {"delay_ms": 3000}, now=clock.at(0))
    early = await backend.add_job(queue_name, "early", None, {"delay_ms": 1000}, now=clock.at(1))
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 5)], 60, now=clock.at(10))
    assert [job.id for job in claimed] == [early.id, late.id]


async def test_released_job_goes_to_front_of_its_priority_ORD_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    r = await backend.add_job(queue_name, "R", None, {"priority": 5}, now=clock.at(0))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 60, now=clock.at(1))
    assert claimed.id == r.id
    x = await backend.add_job(queue_name, "X", None, {"priority": 5}, now=clock.at(2))
    y = await backend.add_job(queue_name, "Y", None, {"priority": 5, "lifo": True}, now=clock.at(3))
    z = await backend.add_job(queue_name, "Z", None, {"priority": 1}, now=clock.at(4))

    assert claimed.lock_token is not None
    await backend.release_job(queue_name, r.id, claimed.lock_token, now=clock.at(5))

    assert await claim_ids(backend, queue_name, clock) == [z.id, r.id, y.id, x.id]


async def test_two_released_jobs_both_ahead_of_waiting_ORD_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    r1 = await backend.add_job(queue_name, "R1", now=clock.at(0))
    r2 = await backend.add_job(queue_name, "R2", now=clock.at(0))
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 2)], 60, now=clock.at(1))
    assert [job.id for job in claimed] == [r1.id, r2.id]
    x = await backend.add_job(queue_name, "X", None, {"lifo": True}, now=clock.at(2))
    for job in claimed:
        assert job.lock_token is not None
        await backend.release_job(queue_name, job.id, job.lock_token, now=clock.at(3))

    order = await claim_ids(backend, queue_name, clock)
    assert sorted(order[:2]) == sorted([r1.id, r2.id])
    assert order[2:] == [x.id]


async def test_zero_backoff_retry_lands_after_existing_fifo_ORD_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    j = await backend.add_job(queue_name, "J", None, {"attempts": 2}, now=clock.at(0))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 60, now=clock.at(1))
    f1 = await backend.add_job(queue_name, "F1", now=clock.at(2))
    f2 = await backend.add_job(queue_name, "F2", now=clock.at(3))
    assert claimed.lock_token is not None
    failed = await backend.fail_job(queue_name, j.id, claimed.lock_token, "boom", now=clock.at(4))
    assert failed.state == "waiting"

    assert await claim_ids(backend, queue_name, clock) == [f1.id, f2.id, j.id]


async def test_manual_retry_lands_after_existing_fifo_ORD_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    k = await backend.add_job(queue_name, "K", now=clock.at(0))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 60, now=clock.at(1))
    assert claimed.lock_token is not None
    await backend.complete_job(queue_name, k.id, claimed.lock_token, "done", now=clock.at(2))
    f1 = await backend.add_job(queue_name, "F1", now=clock.at(3))
    retried = await backend.retry_job(queue_name, k.id, now=clock.at(4))
    f2 = await backend.add_job(queue_name, "F2", now=clock.at(5))
    assert retried.state == "waiting"

    assert await claim_ids(backend, queue_name, clock) == [f1.id, k.id, f2.id]


async def test_every_move_into_waiting_takes_a_fresh_sequence_ORD_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "J", None, {"attempts": 3}, now=clock.at(0))
    seqs: list[int | None] = [job.enqueued_seq]
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 60, now=clock.at(1))
    assert claimed.lock_token is not None
    released = await backend.release_job(queue_name, job.id, claimed.lock_token, now=clock.at(2))
    seqs.append(released.enqueued_seq)
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 60, now=clock.at(3))
    assert claimed.lock_token is not None
    failed = await backend.fail_job(queue_name, job.id, claimed.lock_token, "x", now=clock.at(4))
    assert failed.state == "waiting"
    seqs.append(failed.enqueued_seq)

    numbers = [seq for seq in seqs if seq is not None]
    assert len(numbers) == 3
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == 3


async def test_stalled_requeue_takes_normal_position_ORD_4_STALL_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    a = await backend.add_job(queue_name, "A", now=clock.at(0))
    await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 10, now=clock.at(0))
    b = await backend.add_job(queue_name, "B", now=clock.at(1))
    assert await backend.recover_stalled([queue_name], now=clock.at(11)) != []
    assert await claim_ids(backend, queue_name, clock) == [b.id, a.id]


async def test_promoted_lifo_job_is_newest_lifo_ORD_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    d = await backend.add_job(
        queue_name, "D", None, {"lifo": True, "delay_ms": 1000}, now=clock.at(0)
    )
    lifo = await backend.add_job(queue_name, "L", None, {"lifo": True}, now=clock.at(1))
    fifo = await backend.add_job(queue_name, "F", now=clock.at(1))
    assert await backend.promote_due_jobs([queue_name], now=clock.at(2)) == 1
    assert await claim_ids(backend, queue_name, clock) == [d.id, lifo.id, fifo.id]


async def test_priority_of_active_job_applies_on_release_ORD_3_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    r = await backend.add_job(queue_name, "R", None, {"priority": 9}, now=clock.at(0))
    [active] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 60, now=clock.at(1))
    x = await backend.add_job(queue_name, "X", None, {"priority": 2}, now=clock.at(2))
    y = await backend.add_job(queue_name, "Y", None, {"priority": 1}, now=clock.at(2))

    stored = await backend.update_job_priority(queue_name, r.id, 2, now=clock.at(3))
    assert (stored.state, stored.priority, stored.lock_token) == ("active", 2, active.lock_token)
    assert active.lock_token is not None
    await backend.release_job(queue_name, r.id, active.lock_token, now=clock.at(4))

    assert await claim_ids(backend, queue_name, clock) == [y.id, r.id, x.id]
