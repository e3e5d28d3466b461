"""The reads a worker relies on: queue list, next due time, event trimming."""

from __future__ import annotations

from datetime import timedelta

from lane_pg.backend import JobQueueBackend
from tests.helpers import Clock


async def test_list_queues_includes_added_and_paused_queues(
    backend: JobQueueBackend, queue_name: str, queue_b: str
) -> None:
    await backend.add_job(queue_name, "n")
    await backend.pause_queue(queue_b)
    names = await backend.list_queues()
    assert {queue_name, queue_b} <= set(names)
    assert names == sorted(names)


async def test_next_due_in_reports_the_earliest_delayed_job_CLAIM_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    assert await backend.next_due_in([queue_name]) is None
    await backend.add_job(queue_name, "later", None, {"delay_ms": 3_600_000})
    await backend.add_job(queue_name, "sooner", None, {"delay_ms": 600_000})
    due = await backend.next_due_in([queue_name])
    assert due is not None
    assert timedelta(minutes=9) < due <= timedelta(minutes=10)
    await backend.add_job(queue_name, "overdue", None, {"delay_ms": 1000}, now=clock.at(-3600))
    assert await backend.next_due_in([queue_name]) == timedelta(0)


async def test_trim_events_keeps_the_newest_max_events_EVS_3(
    backend: JobQueueBackend, queue_name: str
) -> None:
    job = await backend.add_job(queue_name, "n")
    for step in range(10):
        await backend.update_job_progress(queue_name, job.id, step)
    before = await backend.read_events(queue_name, "-", "+", 1000)
    assert len(before) == 12
    # Nothing to trim below the default limit of 10,000 events per queue.
    assert await backend.trim_events([queue_name]) == 0
    assert len(await backend.read_events(queue_name, "-", "+", 1000)) == 12
