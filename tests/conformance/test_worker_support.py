"""The reads a worker relies on: queue list, next due time, event trimming."""

from __future__ import annotations

from datetime import timedelta

from lane_pg.backend import JobQueueBackend
from lane_pg.types import JobSpec
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
    """The spec's check: 12,000 events over the default bound of 10,000; trimming keeps
    about the newest 10,000 (PostgreSQL trims whole batch rows of up to 1,024 events, so up
    to 1,023 more may stay) and the oldest go."""
    oldest = await backend.add_job(queue_name, "n")  # `added` and `waiting`: the two oldest
    await backend.add_jobs(queue_name, [JobSpec("n", i) for i in range(6_000)])
    before = await backend.read_events(queue_name, "-", "+", 20_000)
    assert len(before) == 12_002

    trimmed = await backend.trim_events([queue_name])
    after = await backend.read_events(queue_name, "-", "+", 20_000)
    assert trimmed == len(before) - len(after)
    assert 10_000 <= len(after) <= 10_000 + 1_023
    assert all(event.job_id != oldest.id for event in after)
    assert after == before[-len(after) :]  # the newest, untouched
    # Within the bound now: nothing more to trim.
    assert await backend.trim_events([queue_name]) == 0
