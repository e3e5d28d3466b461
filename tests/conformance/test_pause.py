"""PAUSE: pausing and resuming a queue (PAUSE-1, PAUSE-2, PAUSE-12)."""

from __future__ import annotations

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidQueueName
from lane_pg.types import QueueDemand
from tests.helpers import Clock, queue_level_events


async def test_pause_blocks_claims_resume_allows_PAUSE_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "n", now=clock.at(0))
    assert await backend.is_queue_paused(queue_name) is False

    await backend.pause_queue(queue_name)
    assert await backend.is_queue_paused(queue_name) is True
    demand = [QueueDemand(queue_name, 1)]
    assert await backend.claim_jobs("w", demand, 30, now=clock.at(1)) == []
    assert await backend.get_job_state(queue_name, job.id) == "waiting"

    await backend.resume_queue(queue_name)
    assert await backend.is_queue_paused(queue_name) is False
    claimed = await backend.claim_jobs("w", demand, 30, now=clock.at(2))
    assert [c.id for c in claimed] == [job.id]


async def test_pause_and_resume_write_queue_events_PAUSE_1(
    backend: JobQueueBackend, queue_name: str
) -> None:
    await backend.pause_queue(queue_name)
    await backend.resume_queue(queue_name)
    found = await queue_level_events(backend, queue_name)
    assert [(e.event, e.job_id, e.data) for e in found] == [
        ("paused", None, {}),
        ("resumed", None, {}),
    ]
    assert all(e.queue == queue_name for e in found)


async def test_unknown_queue_is_not_paused_PAUSE_1(
    backend: JobQueueBackend, queue_name: str
) -> None:
    assert await backend.is_queue_paused(queue_name) is False


async def test_pause_creates_queue_before_first_add_PAUSE_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.pause_queue(queue_name)
    job = await backend.add_job(queue_name, "n", now=clock.at(0))  # adds go on while paused
    assert job.state == "waiting"
    assert await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1)) == []
    assert await backend.is_queue_paused(queue_name) is True


async def test_pause_is_per_queue_PAUSE_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    await backend.pause_queue(queue_name)
    other = await backend.add_job(queue_b, "n", now=clock.at(0))
    assert await backend.is_queue_paused(queue_b) is False
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_b, 1)], 30, now=clock.at(1))
    assert [c.id for c in claimed] == [other.id]


async def test_in_flight_job_finishes_while_paused_PAUSE_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "a", now=clock.at(0))
    await backend.add_job(queue_name, "b", now=clock.at(0))
    [active] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))
    await backend.pause_queue(queue_name)
    assert active.lock_token is not None

    done = await backend.complete_job(queue_name, first.id, active.lock_token, now=clock.at(2))

    assert done.state == "completed"
    assert await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(3)) == []


async def test_delayed_promotion_goes_on_while_paused_PAUSE_12(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    job = await backend.add_job(queue_name, "d", None, {"delay_ms": 1000}, now=clock.at(0))
    await backend.pause_queue(queue_name)
    assert await backend.promote_due_jobs([queue_name], now=clock.at(2)) == 1
    assert await backend.get_job_state(queue_name, job.id) == "waiting"


async def test_pause_bad_queue_name_rejected_PAUSE_1(backend: JobQueueBackend) -> None:
    with pytest.raises(InvalidQueueName):
        await backend.pause_queue("bad name")


async def test_one_claim_over_every_queue_skips_the_paused_one_PAUSE_9(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """An unfiltered worker claims over every queue in one call: a paused queue's jobs
    stay waiting while the others are handed out."""
    await backend.add_job(queue_name, "billing", now=clock.at(0))
    other = await backend.add_job(queue_b, "export", now=clock.at(0))
    await backend.pause_queue(queue_name)
    claimed = await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 5), QueueDemand(queue_b, 5)], 30, now=clock.at(1)
    )
    assert [(job.queue, job.id) for job in claimed] == [(queue_b, other.id)]
    assert (await backend.get_job_counts(queue_name))["waiting"] == 1
