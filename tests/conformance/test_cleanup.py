"""Removing many jobs and the counting reads: drain, clean, obliterate, orphans, counts,
stats and finished results (MGMT-17..27, REP-16, PAUSE-13, ORD-5, STATE-4, EVS-4
``cleaned``), on every backend. ``mixed_queue`` has no waiting-children job; the tests
that count one add a flow of their own (tests/conformance/test_flow.py covers removing
flows)."""

from __future__ import annotations

from typing import Any

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions, InvalidPriority, InvalidQueueName, JobStateConflict
from lane_pg.types import (
    ALL_STATES,
    Completed,
    DeduplicationOptions,
    Failed,
    JobOptions,
    JobRetention,
    JobRow,
    JobState,
    NotFinished,
    QueueDemand,
    QueueStats,
)
from lane_pg.types.flows import FlowJob
from tests.helpers import Clock, events, job_event_list, queue_level_events, queue_snapshot

CRON_AT_3 = {"repeat": {"pattern": "0 0 3 * * *", "key": "nightly"}}
"""A series whose owner is delayed from its add (the next 03:00)."""
EVERY_MINUTE = {"repeat": {"every_ms": 60_000, "key": "minutely"}}
"""A series whose first owner is waiting at once."""


async def claim(backend: JobQueueBackend, queue: str, clock: Clock, at: float) -> JobRow:
    [job] = await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=clock.at(at))
    return job


async def finish(
    backend: JobQueueBackend, queue: str, clock: Clock, at: float, *, fail: bool = False
) -> JobRow:
    """Add a job at ``at``, claim it and complete (or fail) it at ``at``: finished_at = at."""
    await backend.add_job(queue, "f" if fail else "c", None, now=clock.at(at))
    job = await claim(backend, queue, clock, at)
    assert job.lock_token is not None
    if fail:
        return await backend.fail_job(queue, job.id, job.lock_token, "bad", now=clock.at(at))
    return await backend.complete_job(queue, job.id, job.lock_token, "ok", now=clock.at(at))


async def mixed_queue(backend: JobQueueBackend, queue: str, clock: Clock) -> dict[str, JobRow]:
    """One job of each state but waiting-children, two waiting ones, and the two owners of
    a repeat series each: a delayed one (cron) and a waiting one (interval)."""
    jobs = {
        "active": await backend.add_job(queue, "a", None, {"job_id": "act"}, now=clock.at(0)),
    }
    jobs["active"] = await claim(backend, queue, clock, 1)
    jobs["completed"] = await finish(backend, queue, clock, 2)
    jobs["failed"] = await finish(backend, queue, clock, 3, fail=True)
    jobs["waiting"] = await backend.add_job(
        queue, "w", None, JobOptions(deduplication="dd"), now=clock.at(4)
    )
    await backend.add_job_log(queue, jobs["waiting"].id, "line", now=clock.at(4))
    jobs["waiting2"] = await backend.add_job(queue, "w2", None, now=clock.at(4))
    jobs["delayed"] = await backend.add_job(
        queue, "d", None, {"delay_ms": 600_000}, now=clock.at(4)
    )
    jobs["delayed_owner"] = await backend.add_job(queue, "r", None, CRON_AT_3, now=clock.at(4))
    jobs["waiting_owner"] = await backend.add_job(queue, "m", None, EVERY_MINUTE, now=clock.at(4))
    assert jobs["delayed_owner"].state == "delayed"
    assert jobs["waiting_owner"].state == "waiting"
    return jobs


async def states(backend: JobQueueBackend, queue: str) -> dict[str, JobState]:
    page = await backend.list_jobs(queue, ALL_STATES, limit=100)
    return {job.id: job.state for job in page.items}


# ----------------------------------------------------------------------------- drain


async def test_drain_removes_waiting_jobs_only_MGMT_17(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    jobs = await mixed_queue(backend, queue_name, clock)

    assert await backend.drain_jobs(queue_name, now=clock.at(5)) == 2

    left = await states(backend, queue_name)
    kept = ["active", "completed", "failed", "delayed", "delayed_owner", "waiting_owner"]
    assert left == {jobs[name].id: jobs[name].state for name in kept}
    for name in ("waiting", "waiting2"):
        assert (await job_event_list(backend, queue_name, jobs[name].id))[-1] == (
            "removed",
            {"prev": "waiting"},
        )
    # The removal is remove_job's: logs gone, the dedup id free again.
    assert (await backend.get_job_logs(queue_name, jobs["waiting"].id)).count == 0
    assert await backend.get_deduplication_job_id(queue_name, "dd") is None
    again = await backend.add_job(queue_name, "w", None, JobOptions(deduplication="dd"))
    assert again.id != jobs["waiting"].id


async def test_drain_with_delayed_keeps_the_repeat_owners_MGMT_17_REP_16(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    jobs = await mixed_queue(backend, queue_name, clock)

    assert await backend.drain_jobs(queue_name, delayed=True, now=clock.at(5)) == 3

    kept = ["active", "completed", "failed", "delayed_owner", "waiting_owner"]
    assert await states(backend, queue_name) == {jobs[n].id: jobs[n].state for n in kept}
    assert (await job_event_list(backend, queue_name, jobs["delayed"].id))[-1] == (
        "removed",
        {"prev": "delayed"},
    )
    for key, name in (("nightly", "delayed_owner"), ("minutely", "waiting_owner")):
        repeat = await backend.get_repeat(queue_name, key)
        assert repeat is not None and repeat.job_id == jobs[name].id


async def test_drain_of_an_unknown_queue_MGMT_17(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    assert await backend.drain_jobs(queue_name, delayed=True, now=clock.at(0)) == 0
    assert await backend.read_events(queue_name) == []
    with pytest.raises(InvalidOptions):
        await backend.drain_jobs(queue_name, delayed=1, now=clock.at(0))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- clean


async def test_clean_finished_jobs_older_than_the_grace_MGMT_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    done = [await finish(backend, queue_name, clock, at) for at in (2, 3, 4, 5, 6)]
    failed = await finish(backend, queue_name, clock, 2, fail=True)

    # Finished before 7 - 2 = 5: the jobs of 2, 3 and 4, oldest first, at most 2.
    cleaned = await backend.clean_jobs(queue_name, "completed", 2, limit=2, now=clock.at(7))
    assert [job.id for job in cleaned] == [done[0].id, done[1].id]
    assert cleaned[0] == done[0]  # the snapshots as they were
    assert await queue_level_events(backend, queue_name) != []
    assert (await queue_level_events(backend, queue_name))[-1].event == "cleaned"
    assert (await queue_level_events(backend, queue_name))[-1].data == {"count": 2}
    for job in cleaned:
        assert (await job_event_list(backend, queue_name, job.id))[-1] == (
            "removed",
            {"prev": "completed"},
        )

    cleaned = await backend.clean_jobs(queue_name, "completed", 2, now=clock.at(7))
    assert [job.id for job in cleaned] == [done[2].id]
    counts = await backend.get_job_counts(queue_name, ["completed", "failed"])
    assert counts == {"completed": 2, "failed": 1}
    assert await backend.get_job_state(queue_name, failed.id) == "failed"

    cleaned = await backend.clean_jobs(queue_name, "failed", 0, now=clock.at(7))
    assert [job.id for job in cleaned] == [failed.id]
    assert cleaned[0].failed_reason == "bad"


async def test_clean_with_nothing_to_remove_still_reports_EVS_4_MGMT_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await finish(backend, queue_name, clock, 2)
    assert await backend.clean_jobs(queue_name, "completed", 3600, now=clock.at(3)) == []
    [cleaned] = [e for e in await events(backend, queue_name) if e.event == "cleaned"]
    assert (cleaned.job_id, cleaned.data) == (None, {"count": 0})


async def test_clean_active_takes_only_expired_leases_MGMT_19(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", None, now=clock.at(0))
    await backend.add_job(queue_name, "b", None, now=clock.at(0))
    expired = await claim(backend, queue_name, clock, 1)  # lease until 31
    live = await claim(backend, queue_name, clock, 20)  # lease until 50

    cleaned = await backend.clean_jobs(queue_name, "active", 0, now=clock.at(40))

    assert [job.id for job in cleaned] == [expired.id]
    assert await backend.get_job_state(queue_name, expired.id) is None
    assert await backend.get_job(queue_name, live.id) == live
    assert (await job_event_list(backend, queue_name, expired.id))[-1] == (
        "removed",
        {"prev": "active"},
    )


async def test_clean_waiting_and_delayed_by_their_add_time_MGMT_18(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    old = await backend.add_job(queue_name, "old", None, now=clock.at(0))
    await backend.add_job(queue_name, "new", None, now=clock.at(10))
    old_delayed = await backend.add_job(
        queue_name, "d", None, {"delay_ms": 99_000}, now=clock.at(0)
    )
    await backend.add_job(queue_name, "d2", None, {"delay_ms": 99_000}, now=clock.at(10))

    waiting = await backend.clean_jobs(queue_name, "waiting", 5, now=clock.at(12))
    delayed = await backend.clean_jobs(queue_name, "delayed", 5, now=clock.at(12))

    assert [job.id for job in waiting] == [old.id]
    assert [job.id for job in delayed] == [old_delayed.id]
    assert await backend.get_job_counts(queue_name, ["waiting", "delayed"]) == {
        "waiting": 1,
        "delayed": 1,
    }


@pytest.mark.parametrize("state", ["delayed", "waiting"])
async def test_clean_keeps_the_repeat_owner_MGMT_20_REP_16(
    backend: JobQueueBackend, queue_name: str, clock: Clock, state: str
) -> None:
    series = CRON_AT_3 if state == "delayed" else EVERY_MINUTE
    owner = await backend.add_job(queue_name, "r", None, series, now=clock.at(0))
    extra: dict[str, Any] = {"delay_ms": 99_000} if state == "delayed" else {}
    plain = await backend.add_job(queue_name, "p", None, extra, now=clock.at(0))

    cleaned = await backend.clean_jobs(queue_name, state, 0, now=clock.at(5))  # type: ignore[arg-type]

    assert [job.id for job in cleaned] == [plain.id]
    assert await backend.get_job_state(queue_name, owner.id) == state
    assert await backend.count_repeats(queue_name) == 1


@pytest.mark.parametrize(
    ("state", "grace", "limit"),
    [
        ("waiting-children", 0, 0),
        ("paused", 0, 0),
        ("completed", -1, 0),
        ("completed", 0, -1),
        ("completed", "1h", 0),
    ],
)
async def test_clean_refuses_bad_input_and_changes_nothing_MGMT_18(
    backend: JobQueueBackend,
    queue_name: str,
    clock: Clock,
    state: Any,
    grace: Any,
    limit: Any,
) -> None:
    await finish(backend, queue_name, clock, 2)
    before = await queue_snapshot(backend, queue_name)
    with pytest.raises(InvalidOptions):
        await backend.clean_jobs(queue_name, state, grace, limit=limit, now=clock.at(9))
    assert await queue_snapshot(backend, queue_name) == before


# ----------------------------------------------------------------------------- clear


async def test_clear_queues_empties_them_in_one_call_A16(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    jobs = await mixed_queue(backend, queue_name, clock)  # its active lease lasts to 31
    flow = await backend.add_flow(
        FlowJob("parent", None, queue=queue_b, children=[FlowJob("child", None)]),
        now=clock.at(5),
    )
    await backend.add_job(queue_b, "x", None, now=clock.at(5))
    expired = await claim(backend, queue_b, clock, 6)  # the child first: lease until 36
    assert expired.id == flow.children[0].job.id
    await backend.add_job(queue_b, "late", None, now=clock.at(7))

    removed = await backend.clear_queues([queue_b, queue_name], now=clock.at(40))

    # queue_name: its two waiting jobs and its delayed one; the series owners (REP-16),
    # the finished jobs and the active one (expired at 31: cleaned) go or stay as A16 says
    assert await states(backend, queue_name) == {
        jobs["completed"].id: "completed",
        jobs["failed"].id: "failed",
        jobs["delayed_owner"].id: "delayed",
        jobs["waiting_owner"].id: "waiting",
    }
    assert await states(backend, queue_b) == {}  # the parent, the expired child, two waiting
    assert removed == 4 + 4
    for queue, count in ((queue_name, 1), (queue_b, 1)):
        [cleaned] = [e for e in await events(backend, queue) if e.event == "cleaned"]
        assert cleaned.data == {"count": count}
    assert (await job_event_list(backend, queue_b, flow.job.id))[-1] == (
        "removed",
        {"prev": "waiting-children"},
    )


async def test_clear_queues_keeps_live_leases_and_checks_every_name_first_A16(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "a", None, now=clock.at(0))
    live = await claim(backend, queue_name, clock, 1)  # lease until 31
    await backend.add_job(queue_b, "w", None, now=clock.at(2))
    before = (await states(backend, queue_name), await states(backend, queue_b))

    with pytest.raises(InvalidQueueName):
        await backend.clear_queues([queue_b, "no spaces"], now=clock.at(3))
    with pytest.raises(TypeError):
        await backend.clear_queues(queue_b, now=clock.at(3))  # a name, not a list of them
    assert (await states(backend, queue_name), await states(backend, queue_b)) == before

    assert await backend.clear_queues([queue_name, queue_name], now=clock.at(3)) == 0
    assert await backend.get_job(queue_name, live.id) == live  # validly leased: kept
    assert await backend.clear_queues([], now=clock.at(3)) == 0
    assert await states(backend, queue_b) == before[1]


# ----------------------------------------------------------------------------- obliterate


async def test_obliterate_refuses_active_jobs_and_stays_paused_MGMT_21(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    jobs = await mixed_queue(backend, queue_name, clock)
    before = await states(backend, queue_name)

    with pytest.raises(JobStateConflict):
        await backend.obliterate_queue(queue_name, now=clock.at(5))

    assert await backend.is_queue_paused(queue_name) is True
    assert await states(backend, queue_name) == before
    assert await backend.get_job(queue_name, jobs["active"].id) == jobs["active"]


async def test_obliterate_forced_deletes_everything_of_the_queue_MGMT_21(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    jobs = await mixed_queue(backend, queue_name, clock)
    await backend.set_queue_retention(queue_name, keep_completed=5, keep_failed=5)
    other = await backend.add_job(queue_b, "o", None, JobOptions(deduplication="dd"))
    with pytest.raises(JobStateConflict):
        await backend.obliterate_queue(queue_name, now=clock.at(5))

    assert await backend.obliterate_queue(queue_name, force=True, now=clock.at(6)) == len(jobs)

    assert await backend.is_queue_paused(queue_name) is False
    assert await backend.get_job_count(queue_name) == 0
    assert await backend.read_events(queue_name) == []
    assert await backend.count_repeats(queue_name) == 0
    assert await backend.get_deduplication_job_id(queue_name, "dd") is None
    assert queue_name not in await backend.list_queues()
    retention = await backend.get_queue_retention(queue_name)
    assert (retention.keep_completed, retention.keep_failed) == (10_000, 100_000)
    # Fresh adds own their ids and series again; the other queue is untouched.
    fresh = await backend.add_job(queue_name, "w", None, JobOptions(deduplication="dd"))
    assert await backend.get_deduplication_job_id(queue_name, "dd") == fresh.id
    owner = await backend.add_job(queue_name, "r", None, CRON_AT_3, now=clock.at(7))
    repeat = await backend.get_repeat(queue_name, "nightly")
    assert repeat is not None and repeat.job_id == owner.id
    assert await backend.get_job(queue_b, other.id) == other


async def test_obliterate_without_active_jobs_MGMT_21(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "w", None, now=clock.at(0))
    await finish(backend, queue_name, clock, 1)
    assert await backend.obliterate_queue(queue_name, now=clock.at(2)) == 2
    assert await backend.is_queue_paused(queue_name) is False
    assert await backend.get_job_count(queue_name) == 0
    assert await backend.obliterate_queue(queue_name, now=clock.at(3)) == 0


# ----------------------------------------------------------------------------- orphans


async def test_remove_orphaned_owner_rows_MGMT_22(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    # A TTL owner whose job retention deleted keeps its row until the TTL runs out
    # (DEDUP-5); then it is an orphan. This test makes two. (The database is shared: other
    # tests may leave orphans too, so a count says only that the limit holds; whether this
    # test's rows went is read back. tests/postgres/test_cleanup_sql.py checks every kind.)
    for at, dedup_id in ((0, "ttl-1"), (1, "ttl-2")):
        options = JobOptions(
            deduplication=DeduplicationOptions(dedup_id, ttl=10), remove_on_complete=True
        )
        await backend.add_job(queue_name, "n", None, options, now=clock.at(at))
        job = await claim(backend, queue_name, clock, at)
        assert job.lock_token is not None
        await backend.complete_job(queue_name, job.id, job.lock_token, now=clock.at(at))
        assert await backend.get_job(queue_name, job.id) is None

    assert await backend.remove_orphaned(limit=1, now=clock.at(12)) == 1
    assert await backend.remove_orphaned(now=clock.at(12)) >= 1
    # Both rows are gone: nothing is left for the administrator's release to free.
    assert await backend.remove_deduplication_key(queue_name, "ttl-1") is False
    assert await backend.remove_deduplication_key(queue_name, "ttl-2") is False
    for count, limit in ((-1, 0), (0, -1)):
        with pytest.raises(InvalidOptions):
            await backend.remove_orphaned(count, limit)


# ----------------------------------------------------------------------------- counts


async def test_job_count_sums_the_counts_MGMT_24(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await mixed_queue(backend, queue_name, clock)
    counts = await backend.get_job_counts(queue_name)
    assert await backend.get_job_count(queue_name) == sum(counts.values()) == 8
    assert await backend.get_job_count(queue_name, []) == 8
    assert await backend.get_job_count(queue_name, ["waiting", "waiting"]) == counts["waiting"]
    assert await backend.get_job_count(queue_name, ["failed", "delayed"]) == 1 + 2
    with pytest.raises(InvalidOptions):
        await backend.get_job_count(queue_name, ["paused"])  # type: ignore[list-item]


async def test_count_pending_jobs_MGMT_25(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await mixed_queue(backend, queue_name, clock)
    flow = await backend.add_flow(
        FlowJob("parent", None, queue=queue_name, children=[FlowJob("child", None)]),
        now=clock.at(5),
    )
    assert flow.job.state == "waiting-children"
    # waiting 4 (two plain, one series owner, the child) + delayed 2 (one plain, one series
    # owner) + waiting-children 1 (the parent); active, completed and failed not counted
    assert await backend.count_pending_jobs(queue_name) == 7
    assert await backend.count_pending_jobs(f"{queue_name}_none") == 0


async def test_count_ready_jobs_counts_due_delayed_ones_A16(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Waiting plus the delayed jobs whose time has come, at the given instant (the
    facade's pending_size)."""
    await backend.add_job(queue_name, "w", None, now=clock.at(0))
    await backend.add_job(queue_name, "soon", None, {"delay_ms": 1_000}, now=clock.at(0))
    await backend.add_job(queue_name, "later", None, {"delay_ms": 60_000}, now=clock.at(0))
    assert await backend.count_ready_jobs(queue_name, now=clock.at(0.5)) == 1
    assert await backend.count_ready_jobs(queue_name, now=clock.at(1)) == 2
    assert await backend.count_ready_jobs(queue_name, now=clock.at(61)) == 3
    assert await backend.count_ready_jobs(f"{queue_name}_none", now=clock.at(61)) == 0


async def test_counts_per_priority_follow_the_buckets_MGMT_26_ORD_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    for priority, lifo in ((1, False), (1, True), (5, False), (0, False)):
        await backend.add_job(queue_name, "n", None, {"priority": priority, "lifo": lifo})
    await backend.add_job(queue_name, "d", None, {"priority": 1, "delay_ms": 60_000})
    # A job released to the front of priority 5 sits at the bucket's first key.
    await backend.add_job(queue_name, "r", None, {"priority": 5, "job_id": "released"})
    # Claims take priority 0 first, then 1, 1, then 5 (FIFO), then "released".
    for _ in range(5):
        job = await claim(backend, queue_name, clock, 1)
        assert job.lock_token is not None
        if job.id == "released":
            await backend.release_job(queue_name, job.id, job.lock_token, now=clock.at(2))
            break
        await backend.complete_job(queue_name, job.id, job.lock_token, now=clock.at(2))
    await backend.add_job(queue_name, "n", None, {"priority": 1})
    await backend.add_job(queue_name, "n", None, {"priority": 5})

    counts = await backend.get_counts_per_priority(queue_name, [5, 1, 5, 7, 0])

    assert counts == {5: 2, 1: 1, 7: 0, 0: 0}
    assert list(counts) == [5, 1, 7, 0]
    assert await backend.get_counts_per_priority(queue_name, []) == {}
    with pytest.raises(InvalidPriority):
        await backend.get_counts_per_priority(queue_name, [1, 2**21 + 1])


async def test_counts_per_priority_spec_example_MGMT_26(
    backend: JobQueueBackend, queue_name: str
) -> None:
    for priority in (1, 1, 5):
        await backend.add_job(queue_name, "n", None, {"priority": priority})
    await backend.add_job(queue_name, "d", None, {"priority": 1, "delay_ms": 60_000})
    assert await backend.get_counts_per_priority(queue_name, [1, 5, 1]) == {1: 2, 5: 1}


async def test_stats_show_the_pause_flag_with_the_counts_PAUSE_13_MGMT_27(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await mixed_queue(backend, queue_name, clock)
    await backend.pause_queue(queue_name)

    stats = await backend.get_queue_stats(queue_name)

    assert stats == QueueStats(
        paused=True,
        waiting=3,
        delayed=2,
        active=1,
        waiting_children=0,
        completed=1,
        failed=1,
    )
    assert stats.counts == await backend.get_job_counts(queue_name)
    await backend.resume_queue(queue_name)
    assert (await backend.get_queue_stats(queue_name)).paused is False
    empty = await backend.get_queue_stats(f"{queue_name}_none")
    assert empty == QueueStats(False, 0, 0, 0, 0, 0, 0)


async def test_finished_result_by_state_STATE_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    waiting = await backend.add_job(queue_name, "w", None, now=clock.at(0))
    assert await backend.get_job_finished_result(queue_name, waiting.id) == NotFinished("waiting")
    assert await backend.get_job_finished_result(queue_name, "missing") is None

    # A completed job whose earlier attempt failed: its state wins over the old reason.
    await backend.add_job(queue_name, "c", None, {"attempts": 2, "priority": 1}, now=clock.at(0))
    await backend.add_job(queue_name, "n", None, {"priority": 2}, now=clock.at(0))
    first = await claim(backend, queue_name, clock, 1)
    assert first.id == waiting.id and first.lock_token is not None
    assert await backend.get_job_finished_result(queue_name, first.id) == NotFinished("active")
    await backend.complete_job(queue_name, first.id, first.lock_token, None, now=clock.at(2))
    assert await backend.get_job_finished_result(queue_name, first.id) == Completed(None)

    retried = await claim(backend, queue_name, clock, 3)
    assert retried.lock_token is not None
    await backend.fail_job(queue_name, retried.id, retried.lock_token, "once", now=clock.at(4))
    retried = await claim(backend, queue_name, clock, 5)
    assert retried.lock_token is not None
    await backend.complete_job(
        queue_name, retried.id, retried.lock_token, {"a": 1}, now=clock.at(6)
    )
    snapshot = await backend.get_job(queue_name, retried.id)
    assert snapshot is not None and snapshot.failed_reason == "once"
    assert await backend.get_job_finished_result(queue_name, retried.id) == Completed({"a": 1})

    failing = await claim(backend, queue_name, clock, 7)
    assert failing.lock_token is not None
    await backend.fail_job(queue_name, failing.id, failing.lock_token, "bad", now=clock.at(8))
    assert await backend.get_job_finished_result(queue_name, failing.id) == Failed("bad")


async def test_retention_builders_keep_the_newest_RET_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    retention = JobRetention.age_and_count(3600, 2).with_limit(10)
    assert retention == JobRetention(age_ms=3_600_000, count=2, limit=10)
    options = JobOptions(remove_on_complete=retention)
    ids = [
        (await backend.add_job(queue_name, "n", None, options, now=clock.at(0))).id for _ in "abc"
    ]
    for at in (1, 2, 3):
        job = await claim(backend, queue_name, clock, at)
        assert job.lock_token is not None
        await backend.complete_job(queue_name, job.id, job.lock_token, now=clock.at(at))
    assert [job.id for job in (await backend.list_jobs(queue_name, ["completed"])).items] == ids[1:]


async def test_age_retention_is_applied_only_when_a_later_job_finishes_RET_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    options = JobOptions(remove_on_complete=JobRetention.age(1))
    first = await backend.add_job(queue_name, "a", None, options, now=clock.at(0))
    await backend.add_job(queue_name, "b", None, options, now=clock.at(0))
    job = await claim(backend, queue_name, clock, 0)
    assert job.lock_token is not None and job.id == first.id
    await backend.complete_job(queue_name, job.id, job.lock_token, now=clock.at(0))
    # Past its age, with no other activity, nothing removes it: there is no timer.
    await backend.promote_due_jobs([queue_name], now=clock.at(5))
    assert await backend.get_job_state(queue_name, first.id) == "completed"

    later = await claim(backend, queue_name, clock, 5)
    assert later.lock_token is not None
    await backend.complete_job(queue_name, later.id, later.lock_token, now=clock.at(5))
    assert await backend.get_job(queue_name, first.id) is None
    assert await backend.get_job_state(queue_name, later.id) == "completed"
