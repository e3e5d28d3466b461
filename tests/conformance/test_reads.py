"""Reads: job state, counts and listings (STATE-2, STATE-3, MGMT-1, MGMT-2, MGMT-23)."""

from __future__ import annotations

from lane_pg.backend import JobQueueBackend
from lane_pg.facade import BackendDriver
from lane_pg.types import ALL_STATES, JobRow, JobSpec, JobState, QueueDemand
from tests.helpers import Clock


async def test_state_through_a_lifecycle_STATE_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    assert await backend.get_job_state(queue_name, added.id) == "waiting"
    [active] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))
    assert await backend.get_job_state(queue_name, added.id) == "active"
    assert active.lock_token is not None
    await backend.complete_job(queue_name, added.id, active.lock_token, now=clock.at(2))
    assert await backend.get_job_state(queue_name, added.id) == "completed"
    assert await backend.remove_job(queue_name, added.id, now=clock.at(3)) is True
    assert await backend.get_job_state(queue_name, added.id) is None


async def test_missing_job_reads_none_STATE_2_MGMT_1(
    backend: JobQueueBackend, queue_name: str
) -> None:
    assert await backend.get_job(queue_name, "missing") is None
    assert await backend.get_job_state(queue_name, "missing") is None
    assert await backend.get_job(queue_name, "12345678901234") is None


async def test_job_is_scoped_to_its_queue_MGMT_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    assert await backend.get_job(queue_b, added.id) is None
    assert await backend.get_job_state(queue_b, added.id) is None


async def mixed_queue(backend: JobQueueBackend, queue: str, clock: Clock) -> None:
    """2 waiting, 1 delayed, 1 active, 1 completed, 1 failed."""
    for name in ("active", "completed", "failed"):
        await backend.add_job(queue, name, now=clock.at(0))
    _a, c, f = await backend.claim_jobs("w", [QueueDemand(queue, 3)], 30, now=clock.at(1))
    assert c.lock_token is not None
    assert f.lock_token is not None
    await backend.complete_job(queue, c.id, c.lock_token, now=clock.at(2))
    await backend.fail_job(queue, f.id, f.lock_token, "x", now=clock.at(2))
    await backend.add_job(queue, "w1", now=clock.at(3))
    await backend.add_job(queue, "w2", now=clock.at(3))
    await backend.add_job(queue, "d", None, {"delay_ms": 60_000}, now=clock.at(3))


async def test_counts_all_states_in_order_MGMT_23(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await mixed_queue(backend, queue_name, clock)
    expected = {
        "waiting": 2,
        "delayed": 1,
        "active": 1,
        "waiting-children": 0,
        "completed": 1,
        "failed": 1,
    }
    no_states: list[JobState] = []
    for states in (None, no_states):
        counts = await backend.get_job_counts(queue_name, states)
        assert counts == expected
        assert list(counts) == list(ALL_STATES)


async def test_counts_unknown_queue_is_all_zero_MGMT_23(
    backend: JobQueueBackend, queue_name: str
) -> None:
    counts = await backend.get_job_counts(queue_name)
    assert list(counts) == list(ALL_STATES)
    assert set(counts.values()) == {0}


async def test_counts_duplicates_and_order_MGMT_23(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await mixed_queue(backend, queue_name, clock)
    assert await backend.get_job_counts(queue_name, ["waiting", "waiting"]) == {"waiting": 2}
    counts = await backend.get_job_counts(
        queue_name, ["failed", "waiting-children", "failed", "waiting"]
    )
    assert counts == {"failed": 1, "waiting-children": 0, "waiting": 2}
    assert list(counts) == ["failed", "waiting-children", "waiting"]


async def test_list_jobs_pages_without_overlap_MGMT_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    waiting = await backend.add_jobs(
        queue_name, [JobSpec(f"w{i}") for i in range(20)], now=clock.at(0)
    )
    delayed = await backend.add_jobs(
        queue_name,
        [JobSpec(f"d{i}", None, {"delay_ms": 60_000}) for i in range(10)],
        now=clock.at(0),
    )
    expected = [job.id for job in waiting] + [job.id for job in delayed]

    first = await backend.list_jobs(queue_name, ["waiting", "delayed"], offset=0, limit=20)
    second = await backend.list_jobs(queue_name, ["waiting", "delayed"], offset=20, limit=20)

    assert (first.total, first.offset, first.limit, len(first.items)) == (30, 0, 20, 20)
    assert (second.total, second.offset, second.limit, len(second.items)) == (30, 20, 20, 10)
    ids = [job.id for job in first.items + second.items]
    assert ids == expected
    assert len(set(ids)) == 30


async def test_list_jobs_descending_reverses_whole_order_MGMT_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    delayed = await backend.add_job(queue_name, "d", None, {"delay_ms": 60_000}, now=clock.at(0))
    waiting = await backend.add_jobs(
        queue_name,
        [JobSpec("a"), JobSpec("b"), JobSpec("c", None, {"lifo": True})],
        now=clock.at(1),
    )
    # the listing order follows ALL_STATES, not the order of this list
    states: list[JobState] = ["delayed", "waiting"]

    ascending = await backend.list_jobs(queue_name, states, limit=100)
    descending = await backend.list_jobs(queue_name, states, descending=True, limit=100)

    asc_ids = [job.id for job in ascending.items]
    assert asc_ids == [job.id for job in waiting] + [delayed.id]
    assert [job.id for job in descending.items] == list(reversed(asc_ids))
    assert ascending.total == descending.total == 4
    top2 = await backend.list_jobs(queue_name, states, descending=True, offset=0, limit=2)
    assert [job.id for job in top2.items] == list(reversed(asc_ids))[:2]


async def test_list_jobs_single_state_and_snapshots_MGMT_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await mixed_queue(backend, queue_name, clock)
    page = await backend.list_jobs(queue_name, ["active"])
    assert page.total == 1
    [item] = page.items
    assert isinstance(item, JobRow)
    assert item.state == "active"
    assert item.lock_token is not None
    assert await backend.get_job(queue_name, item.id) == item


async def test_list_jobs_offset_past_end_MGMT_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    page = await backend.list_jobs(queue_name, ["waiting"], offset=5, limit=10)
    assert (page.items, page.total) == ([], 1)
    empty = await backend.list_jobs(queue_name, ["failed"])
    assert (empty.items, empty.total) == ([], 0)


# ----------------------------------------------------------------------------- INSP-1, INSP-5


async def due_and_not_due(backend: JobQueueBackend, queue: str, clock: Clock) -> list[str]:
    """One job of each kind the facade counts, in insertion order: active (leased for an
    hour), waiting, delayed and due since -9 s (not promoted: nothing claimed since), and
    delayed for an hour. Times are relative to ``clock`` (about now), so the backend's own
    clock sees the same."""
    active = await backend.add_job(queue, "n", now=clock.at(-30))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 3600, now=clock.at(-30))
    assert claimed.id == active.id
    waiting = await backend.add_job(queue, "n", now=clock.at(-20))
    due = await backend.add_job(queue, "n", None, {"delay_ms": 1000}, now=clock.at(-10))
    later = await backend.add_job(queue, "n", None, {"delay_ms": 3_600_000}, now=clock.at(0))
    assert due.state == later.state == "delayed"
    return [active.id, waiting.id, due.id, later.id]


async def test_a_due_delayed_job_is_ready_not_scheduled_INSP_1_INSP_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    _, waiting, due, later = await due_and_not_due(backend, queue_name, clock)
    now = clock.at(0)
    assert await backend.count_ready_jobs(queue_name, now=now) == 2
    assert await backend.count_scheduled_jobs(queue_name, now=now) == 1
    ready = await backend.list_ready_jobs(queue_name, now=now)
    assert ([job.id for job in ready.items], ready.total) == ([waiting, due], 2)
    scheduled = await backend.list_scheduled_jobs(queue_name, now=now)
    assert ([job.id for job in scheduled.items], scheduled.total) == ([later], 1)
    page = await backend.list_ready_jobs(queue_name, offset=1, limit=5, now=now)
    assert ([job.id for job in page.items], page.total) == ([due], 2)
    empty = await backend.list_scheduled_jobs(queue_name, offset=3, now=now)
    assert (empty.items, empty.total) == ([], 1)
    # Past the due time of the second one as well: both are ready.
    assert await backend.count_scheduled_jobs(queue_name, now=clock.at(3601)) == 0
    assert await backend.count_ready_jobs(queue_name, now=clock.at(3601)) == 3


async def test_facade_counts_and_listings_agree_on_a_due_delayed_job_INSP_1_INSP_5(
    backend: JobQueueBackend, backend_kind: str, queue_name: str, clock: Clock
) -> None:
    """A due delayed job is pending (claimable) and listed with the pending jobs, never
    also delayed: pending + delayed + reserved == size (no job waits for children here)."""
    active, waiting, due, later = await due_and_not_due(backend, queue_name, clock)
    driver = BackendDriver(backend, backend_kind)
    sizes = [
        await driver.pending_size(queue_name),
        await driver.delayed_size(queue_name),
        await driver.reserved_size(queue_name),
    ]
    assert sizes == [2, 1, 1]
    assert sum(sizes) == await driver.size(queue_name)
    assert [job.id for job in await driver.pending_jobs(queue_name)] == [waiting, due]
    assert [job.id for job in await driver.delayed_jobs(queue_name)] == [later]
    assert [job.id for job in await driver.reserved_jobs(queue_name)] == [active]
