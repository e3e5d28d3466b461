"""MGMT: promote, reschedule, retry, remove and updates (MGMT-3..5, MGMT-8..12, MGMT-16,
STATE-5)."""

from __future__ import annotations

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import (
    InvalidPayload,
    InvalidPriority,
    JobLocked,
    JobNotFound,
    JobStateConflict,
    ValidationError,
)
from lane_pg.types import DeduplicationOptions, JobOptions, JobRow, QueueDemand
from tests.helpers import Clock, epoch_ms, job_event_list, queue_snapshot


async def claim(backend: JobQueueBackend, queue: str, clock: Clock, at: float) -> JobRow:
    claimed = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(at))
    assert len(claimed) == 1
    assert claimed[0].lock_token is not None
    return claimed[0]


async def completed_job(
    backend: JobQueueBackend, queue: str, clock: Clock, result: object = "done"
) -> JobRow:
    await backend.add_job(queue, "n", {"d": 1}, {"attempts": 2}, now=clock.at(0))
    active = await claim(backend, queue, clock, 1)
    assert active.lock_token is not None
    return await backend.complete_job(queue, active.id, active.lock_token, result, now=clock.at(2))


async def failed_job(
    backend: JobQueueBackend, queue: str, clock: Clock, stacktrace: str | None = None
) -> JobRow:
    await backend.add_job(queue, "n", {"d": 1}, now=clock.at(0))
    active = await claim(backend, queue, clock, 1)
    assert active.lock_token is not None
    return await backend.fail_job(
        queue, active.id, active.lock_token, "bad", stacktrace=stacktrace, now=clock.at(2)
    )


async def job_in_state(backend: JobQueueBackend, queue: str, clock: Clock, state: str) -> JobRow:
    """One job of the queue in ``state`` (waiting, delayed, active, completed or failed)."""
    if state == "completed":
        return await completed_job(backend, queue, clock)
    if state == "failed":
        return await failed_job(backend, queue, clock)
    options = {"delay_ms": 60_000} if state == "delayed" else None
    job = await backend.add_job(queue, "n", None, options, now=clock.at(0))
    if state == "active":
        job = await claim(backend, queue, clock, 1)
    assert job.state == state
    return job


# ----------------------------------------------------------------------------- promote


async def test_promote_delayed_job_MGMT_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"delay_ms": 60_000}, now=clock.at(0))
    promoted = await backend.promote_job(queue_name, added.id, now=clock.at(1))

    assert promoted.state == "waiting"
    assert await backend.get_job(queue_name, added.id) == promoted
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "waiting",
        {"prev": "delayed"},
    )
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(2))
    assert [c.id for c in claimed] == [added.id]


@pytest.mark.parametrize("state", ["waiting", "active", "completed", "failed"])
async def test_promote_non_delayed_job_conflicts_MGMT_3_STATE_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock, state: str
) -> None:
    job = await job_in_state(backend, queue_name, clock, state)
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(JobStateConflict):
        await backend.promote_job(queue_name, job.id, now=clock.at(5))
    assert await backend.get_job(queue_name, job.id) == job
    assert await queue_snapshot(backend, queue_name) == before


async def test_promote_missing_job_MGMT_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(JobNotFound):
        await backend.promote_job(queue_name, "missing", now=clock.at(0))


async def test_promote_due_counts_due_jobs_only_MGMT_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    due1 = await backend.add_job(queue_name, "a", None, {"delay_ms": 1000}, now=clock.at(0))
    due2 = await backend.add_job(queue_name, "b", None, {"delay_ms": 2000}, now=clock.at(0))
    future = await backend.add_job(queue_name, "c", None, {"delay_ms": 60_000}, now=clock.at(0))

    assert await backend.promote_due_jobs([queue_name], now=clock.at(2)) == 2

    assert await backend.get_job_state(queue_name, due1.id) == "waiting"
    assert await backend.get_job_state(queue_name, due2.id) == "waiting"
    assert await backend.get_job_state(queue_name, future.id) == "delayed"
    assert (await job_event_list(backend, queue_name, due2.id))[-1] == (
        "waiting",
        {"prev": "delayed"},
    )
    assert await backend.promote_due_jobs([queue_name], now=clock.at(3)) == 0


async def test_promote_due_all_queues_MGMT_4(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """``queues=None``: every queue. ``now`` stays at the real time so concurrent runs'
    future jobs are not touched."""
    a = await backend.add_job(queue_name, "a", None, {"delay_ms": 1}, now=clock.at(0))
    b = await backend.add_job(queue_b, "b", None, {"delay_ms": 1}, now=clock.at(0))
    assert await backend.promote_due_jobs(None, now=clock.at(0.001)) >= 2
    assert await backend.get_job_state(queue_name, a.id) == "waiting"
    assert await backend.get_job_state(queue_b, b.id) == "waiting"


# ----------------------------------------------------------------------------- reschedule


async def test_reschedule_delayed_job_MGMT_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"delay_ms": 5000}, now=clock.at(0))
    moved = await backend.reschedule_job(queue_name, added.id, 600, now=clock.at(1))

    assert moved.state == "delayed"
    assert moved.available_at == clock.at(601)
    assert moved.options["delay_ms"] == 600_000  # the stored delay follows
    assert (await backend.get_job(queue_name, added.id)) == moved
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "delayed",
        {"delay": epoch_ms(clock.at(601))},
    )
    demand = [QueueDemand(queue_name, 1)]
    assert await backend.claim_jobs("w", demand, 30, now=clock.at(10)) == []
    assert len(await backend.claim_jobs("w", demand, 30, now=clock.at(601))) == 1


async def test_reschedule_keeps_a_repeat_occurrences_options_MGMT_5_REP_14(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    # Its schedule is its delay; its options are its series' template (no delay_ms there).
    cron = {"repeat": {"pattern": "0 0 3 * * *", "key": "nightly"}}
    added = await backend.add_job(queue_name, "n", None, cron, now=clock.at(0))
    moved = await backend.reschedule_job(queue_name, added.id, 60, now=clock.at(1))
    assert moved.available_at == clock.at(61)
    assert moved.options == added.options
    repeat = await backend.get_repeat(queue_name, "nightly")
    assert repeat is not None and repeat.next_at == clock.at(61)


async def test_reschedule_earlier_MGMT_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"delay_ms": 600_000}, now=clock.at(0))
    moved = await backend.reschedule_job(queue_name, added.id, 2, now=clock.at(1))
    assert moved.available_at == clock.at(3)


@pytest.mark.parametrize("state", ["waiting", "active", "completed"])
async def test_reschedule_non_delayed_job_conflicts_MGMT_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock, state: str
) -> None:
    job = await job_in_state(backend, queue_name, clock, state)
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(JobStateConflict):
        await backend.reschedule_job(queue_name, job.id, 10, now=clock.at(5))
    assert await backend.get_job(queue_name, job.id) == job
    assert await queue_snapshot(backend, queue_name) == before


async def test_reschedule_missing_job_MGMT_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(JobNotFound):
        await backend.reschedule_job(queue_name, "missing", 10, now=clock.at(0))


# ----------------------------------------------------------------------------- retry


async def test_retry_completed_job_MGMT_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    done = await completed_job(backend, queue_name, clock, {"r": 1})
    retried = await backend.retry_job(queue_name, done.id, now=clock.at(5))

    assert retried.state == "waiting"
    assert retried.return_value is None
    assert retried.finished_at is None
    assert retried.processed_at is None
    assert retried.attempts_made == 0
    assert retried.attempts_started == 0
    assert retried.stalled_count == 0
    assert retried.data == {"d": 1}
    assert await backend.get_job(queue_name, done.id) == retried
    assert (await job_event_list(backend, queue_name, done.id))[-1] == (
        "waiting",
        {"prev": "completed"},
    )
    again = await claim(backend, queue_name, clock, 6)
    assert again.id == done.id
    assert again.attempts_started == 1


async def test_retry_failed_job_MGMT_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    failed = await failed_job(backend, queue_name, clock, stacktrace="tb")
    assert failed.state == "failed"
    assert failed.stacktrace == ["tb"]
    retried = await backend.retry_job(queue_name, failed.id, now=clock.at(5))

    assert retried.state == "waiting"
    assert retried.failed_reason is None
    assert retried.stacktrace == []
    assert retried.finished_at is None
    assert retried.attempts_made == 0
    assert retried.attempts_started == 0
    assert (await job_event_list(backend, queue_name, failed.id))[-1] == (
        "waiting",
        {"prev": "failed"},
    )


async def test_retry_resets_stalled_count_MGMT_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    await claim(backend, queue_name, clock, 0)
    await backend.recover_stalled([queue_name], max_stalled_count=0, now=clock.at(31))
    assert await backend.get_job_state(queue_name, added.id) == "failed"
    retried = await backend.retry_job(queue_name, added.id, now=clock.at(40))
    assert retried.stalled_count == 0
    assert retried.state == "waiting"


@pytest.mark.parametrize("state", ["waiting", "delayed", "active"])
async def test_retry_unfinished_job_conflicts_MGMT_8_STATE_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock, state: str
) -> None:
    job = await job_in_state(backend, queue_name, clock, state)
    before = await queue_snapshot(backend, queue_name)

    with pytest.raises(JobStateConflict):
        await backend.retry_job(queue_name, job.id, now=clock.at(2))

    assert await backend.get_job(queue_name, job.id) == job
    assert await queue_snapshot(backend, queue_name) == before


async def test_retry_missing_job_MGMT_8(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(JobNotFound):
        await backend.retry_job(queue_name, "missing", now=clock.at(0))


# ----------------------------------------------------------------------------- remove


async def test_remove_waiting_job_and_its_logs_MGMT_16(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"job_id": "rm-me"}, now=clock.at(0))
    await backend.add_job_log(queue_name, added.id, "line", now=clock.at(1))

    assert await backend.remove_job(queue_name, added.id, now=clock.at(2)) is True

    assert await backend.get_job(queue_name, added.id) is None
    assert await backend.get_job_state(queue_name, added.id) is None
    assert (await backend.get_job_logs(queue_name, added.id)).count == 0
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "removed",
        {"prev": "waiting"},
    )
    assert (await backend.get_job_counts(queue_name))["waiting"] == 0
    # the id is free again and the new job starts with an empty log
    again = await backend.add_job(queue_name, "n2", None, {"job_id": "rm-me"}, now=clock.at(3))
    assert again.name == "n2"
    assert (await backend.get_job_logs(queue_name, again.id)).count == 0


async def test_remove_active_with_live_lease_is_locked_MGMT_16(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    active = await claim(backend, queue_name, clock, 1)  # lease until +31
    before = await queue_snapshot(backend, queue_name)

    with pytest.raises(JobLocked):
        await backend.remove_job(queue_name, added.id, now=clock.at(10))

    assert await backend.get_job(queue_name, added.id) == active
    assert await queue_snapshot(backend, queue_name) == before


async def test_remove_active_after_lease_expiry_MGMT_16(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    await claim(backend, queue_name, clock, 1)
    assert await backend.remove_job(queue_name, added.id, now=clock.at(40)) is True
    assert await backend.get_job(queue_name, added.id) is None
    assert (await job_event_list(backend, queue_name, added.id))[-1] == (
        "removed",
        {"prev": "active"},
    )


@pytest.mark.parametrize("state", ["delayed", "completed", "failed"])
async def test_remove_in_other_states_MGMT_16(
    backend: JobQueueBackend, queue_name: str, clock: Clock, state: str
) -> None:
    job = await job_in_state(backend, queue_name, clock, state)
    assert await backend.remove_job(queue_name, job.id, now=clock.at(5)) is True
    assert await backend.get_job_state(queue_name, job.id) is None
    assert (await job_event_list(backend, queue_name, job.id))[-1] == (
        "removed",
        {"prev": state},
    )


async def test_remove_missing_returns_false_MGMT_16(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    assert await backend.remove_job(queue_name, "missing", now=clock.at(0)) is False
    assert await backend.read_events(queue_name) == []


async def test_remove_missing_cleans_the_dedup_owner_left_naming_it_MGMT_16(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A TTL owner outlives the job retention deleted (DEDUP-5): removing that job's id
    afterwards still releases the owner row naming it, and returns False."""
    options = JobOptions(deduplication=DeduplicationOptions("ttl", ttl=60), remove_on_complete=True)
    added = await backend.add_job(queue_name, "n", None, options, now=clock.at(0))
    [job] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))
    assert job.lock_token is not None
    await backend.complete_job(queue_name, job.id, job.lock_token, now=clock.at(2))
    assert await backend.get_job(queue_name, added.id) is None
    before = len(await backend.read_events(queue_name))

    assert await backend.remove_job(queue_name, added.id, now=clock.at(3)) is False
    # The row is gone already: nothing left for the administrator's release to free.
    assert await backend.remove_deduplication_key(queue_name, "ttl") is False
    assert len(await backend.read_events(queue_name)) == before


# ----------------------------------------------------------------------------- updates


async def test_save_stacktrace_replaces_list_and_reason_together_MGMT_12(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    failed = await failed_job(backend, queue_name, clock, stacktrace="Traceback one")
    assert (failed.stacktrace, failed.failed_reason) == (["Traceback one"], "bad")
    before = await queue_snapshot(backend, queue_name)

    saved = await backend.save_job_stacktrace(queue_name, failed.id, ["t1", "t2"], "worse")

    assert (saved.stacktrace, saved.failed_reason, saved.state) == (["t1", "t2"], "worse", "failed")
    assert await backend.get_job(queue_name, failed.id) == saved
    assert await queue_snapshot(backend, queue_name) == before  # no event
    waiting = await backend.add_job(queue_name, "w", now=clock.at(3))
    cleared = await backend.save_job_stacktrace(queue_name, waiting.id, [], None)
    assert (cleared.stacktrace, cleared.failed_reason) == ([], None)


async def test_save_stacktrace_refusals_change_nothing_MGMT_12(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    failed = await failed_job(backend, queue_name, clock, stacktrace="t")
    with pytest.raises(JobNotFound):
        await backend.save_job_stacktrace(queue_name, "missing", ["t"], "r")
    for bad in ("not a list", ["ok", 3]):
        with pytest.raises(ValidationError):
            await backend.save_job_stacktrace(queue_name, failed.id, bad, "r")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await backend.save_job_stacktrace(queue_name, failed.id, [], 7)  # type: ignore[arg-type]
    assert await backend.get_job(queue_name, failed.id) == failed


async def test_update_data_replaces_payload_MGMT_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", {"v": 1}, now=clock.at(0))
    updated = await backend.update_job_data(queue_name, added.id, {"v": 2, "list": [1, 2]})
    assert updated.data == {"v": 2, "list": [1, 2]}
    assert updated.state == "waiting"
    fetched = await backend.get_job(queue_name, added.id)
    assert fetched is not None
    assert fetched.data == {"v": 2, "list": [1, 2]}


async def test_update_data_active_and_completed_MGMT_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", {"v": 1}, now=clock.at(0))
    active = await claim(backend, queue_name, clock, 1)
    updated = await backend.update_job_data(queue_name, active.id, "during")
    assert (updated.state, updated.data, updated.lock_token) == (
        "active",
        "during",
        active.lock_token,
    )
    assert active.lock_token is not None
    await backend.complete_job(queue_name, active.id, active.lock_token, now=clock.at(2))
    after = await backend.update_job_data(queue_name, active.id, None)
    assert (after.state, after.data) == ("completed", None)


async def test_update_data_missing_and_invalid_MGMT_10(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(JobNotFound):
        await backend.update_job_data(queue_name, "missing", {"v": 1})
    added = await backend.add_job(queue_name, "n", {"v": 1}, now=clock.at(0))
    with pytest.raises(InvalidPayload):
        await backend.update_job_data(queue_name, added.id, {"x": object()})
    assert await backend.get_job(queue_name, added.id) == added


async def test_update_progress_stores_and_emits_MGMT_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    updated = await backend.update_job_progress(queue_name, added.id, 42, now=clock.at(1))
    assert updated.progress == 42
    again = await backend.update_job_progress(
        queue_name, added.id, {"step": 2, "of": 3}, now=clock.at(2)
    )
    assert again.progress == {"step": 2, "of": 3}
    fetched = await backend.get_job(queue_name, added.id)
    assert fetched is not None
    assert fetched.progress == {"step": 2, "of": 3}
    progress = [
        data
        for name, data in await job_event_list(backend, queue_name, added.id)
        if name == "progress"
    ]
    assert progress == [{"data": 42}, {"data": {"step": 2, "of": 3}}]


async def test_update_progress_on_completed_job_MGMT_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    done = await completed_job(backend, queue_name, clock)
    updated = await backend.update_job_progress(queue_name, done.id, 100, now=clock.at(5))
    assert (updated.state, updated.progress) == ("completed", 100)
    assert (await job_event_list(backend, queue_name, done.id))[-1] == ("progress", {"data": 100})


async def test_update_progress_missing_and_invalid_MGMT_11(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(JobNotFound):
        await backend.update_job_progress(queue_name, "missing", 1, now=clock.at(0))
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(InvalidPayload):
        await backend.update_job_progress(queue_name, added.id, {"x": object()}, now=clock.at(1))
    assert await queue_snapshot(backend, queue_name) == before


async def test_update_priority_requeues_waiting_job_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    a = await backend.add_job(queue_name, "a", None, {"priority": 5}, now=clock.at(0))
    b = await backend.add_job(queue_name, "b", None, {"priority": 5}, now=clock.at(1))
    c = await backend.add_job(queue_name, "c", None, {"priority": 5}, now=clock.at(2))
    d = await backend.add_job(queue_name, "d", None, {"priority": 5}, now=clock.at(3))

    raised = await backend.update_job_priority(queue_name, d.id, 0, now=clock.at(4))
    # same priority: a fresh sequence moves b behind the other FIFO jobs
    same = await backend.update_job_priority(queue_name, b.id, 5, now=clock.at(5))

    assert raised.priority == 0
    assert raised.state == "waiting"
    assert same.priority == 5
    assert b.enqueued_seq is not None
    assert same.enqueued_seq is not None
    assert same.enqueued_seq > b.enqueued_seq
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 4)], 30, now=clock.at(6))
    assert [job.id for job in claimed] == [d.id, a.id, c.id, b.id]


async def test_update_priority_with_lifo_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "first", None, {"priority": 5}, now=clock.at(0))
    moved = await backend.add_job(queue_name, "moved", None, {"priority": 1}, now=clock.at(1))
    updated = await backend.update_job_priority(queue_name, moved.id, 5, lifo=True, now=clock.at(2))
    assert (updated.priority, updated.lifo) == (5, True)
    fetched = await backend.get_job(queue_name, moved.id)
    assert fetched is not None
    assert fetched.lifo is True
    assert fetched.options["lifo"] is True  # stored on the options too
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 2)], 30, now=clock.at(3))
    assert [job.id for job in claimed] == [moved.id, first.id]


@pytest.mark.parametrize("priority", [2**21 + 1, -1])
async def test_update_priority_out_of_range_changes_nothing_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock, priority: int
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"priority": 3}, now=clock.at(0))
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(InvalidPriority):
        await backend.update_job_priority(queue_name, added.id, priority, now=clock.at(1))
    assert await backend.get_job(queue_name, added.id) == added
    assert await queue_snapshot(backend, queue_name) == before


async def test_update_priority_upper_bound_accepted_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    updated = await backend.update_job_priority(queue_name, added.id, 2**21, now=clock.at(1))
    assert updated.priority == 2**21


async def test_update_priority_of_finished_job_only_stores_it_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    done = await completed_job(backend, queue_name, clock)
    updated = await backend.update_job_priority(queue_name, done.id, 7, now=clock.at(5))
    assert (updated.state, updated.priority) == ("completed", 7)
    assert updated.finished_at == done.finished_at
    assert updated.return_value == done.return_value


async def test_update_priority_of_delayed_job_applies_after_promotion_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    waiting = await backend.add_job(queue_name, "w", None, {"priority": 5}, now=clock.at(0))
    delayed = await backend.add_job(
        queue_name, "d", None, {"priority": 9, "delay_ms": 1000}, now=clock.at(0)
    )
    updated = await backend.update_job_priority(queue_name, delayed.id, 1, now=clock.at(0.5))
    assert (updated.state, updated.priority, updated.available_at) == (
        "delayed",
        1,
        clock.at(1),
    )
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 2)], 30, now=clock.at(2))
    assert [job.id for job in claimed] == [delayed.id, waiting.id]


async def test_update_priority_out_of_waiting_keeps_the_order_key_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Only a move into waiting builds the order key: a delayed or active job keeps the
    one it has (the priority it was built with) until then."""
    delayed = await backend.add_job(
        queue_name, "d", None, {"priority": 9, "delay_ms": 1000}, now=clock.at(0)
    )
    await backend.add_job(queue_name, "a", None, {"priority": 4}, now=clock.at(0))
    active = await claim(backend, queue_name, clock, 0.5)
    for job in (delayed, active):
        await backend.update_job_priority(queue_name, job.id, 2, now=clock.at(0.6))
        changed = await backend.update_job_priority(queue_name, job.id, 1, now=clock.at(0.7))
        assert (changed.priority, changed.order_key) == (1, job.order_key)
    promoted = await backend.promote_job(queue_name, delayed.id, now=clock.at(0.8))
    assert promoted.priority == 1 and promoted.order_key != delayed.order_key
    requeued = await backend.update_job_priority(queue_name, delayed.id, 9, now=clock.at(0.9))
    claimed = await claim(backend, queue_name, clock, 1)
    assert (claimed.id, claimed.order_key) == (delayed.id, requeued.order_key)


async def test_update_priority_missing_job_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(JobNotFound):
        await backend.update_job_priority(queue_name, "missing", 1, now=clock.at(0))


async def test_update_priority_can_clear_lifo_MGMT_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    fifo = await backend.add_job(queue_name, "F", now=clock.at(0))
    was_lifo = await backend.add_job(queue_name, "L", None, {"lifo": True}, now=clock.at(1))
    updated = await backend.update_job_priority(
        queue_name, was_lifo.id, 0, lifo=False, now=clock.at(2)
    )
    assert updated.lifo is False
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 2)], 30, now=clock.at(3))
    assert [job.id for job in claimed] == [fifo.id, was_lifo.id]


async def test_reschedule_negative_delay_rejected_MGMT_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, {"delay_ms": 5000}, now=clock.at(0))
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(ValidationError):
        await backend.reschedule_job(queue_name, added.id, -1, now=clock.at(1))
    assert await backend.get_job(queue_name, added.id) == added
    assert await queue_snapshot(backend, queue_name) == before
