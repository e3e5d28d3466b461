"""Terminal metrics on every backend (OBS-6, MGMT-28): completions and terminal failures
count per queue into one-minute buckets; ``get_metrics`` answers in BullMQ's shape."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions
from lane_pg.types import Completion, JobRow, JobSpec, QueueDemand
from lane_pg.types.metrics import DEFAULT_JOB_METRICS_RETENTION, JobMetrics
from tests.helpers import Clock, epoch_ms


def minute(clock: Clock, n: int, second: float = 0.0) -> datetime:
    """``second`` seconds into the n-th whole minute after the clock's base."""
    start = clock.base.replace(second=0, microsecond=0) + timedelta(minutes=n)
    return start + timedelta(seconds=second)


async def complete(backend: JobQueueBackend, queue: str, n: int, at: datetime) -> None:
    """Adds, claims and completes n jobs of ``queue`` in one batch at ``at``."""
    await backend.add_jobs(queue, [JobSpec("m")] * n, now=at)
    jobs = await backend.claim_jobs("w", [QueueDemand(queue, n)], 30, now=at)
    assert len(jobs) == n
    outcomes = await backend.complete_jobs(
        [Completion(queue, job.id, token(job)) for job in jobs], now=at
    )
    assert {outcome.status for outcome in outcomes} == {"ok"}


def token(job: JobRow) -> str:
    assert job.lock_token is not None
    return job.lock_token


async def test_completed_per_minute_newest_first_OBS_6_MGMT_28(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await complete(backend, queue_name, 2, minute(clock, 1, 1))
    await complete(backend, queue_name, 1, minute(clock, 1, 59.5))
    await complete(backend, queue_name, 2, minute(clock, 2, 3))
    metrics = await backend.get_metrics(queue_name, "completed", 0, -1)
    assert metrics == JobMetrics(
        count=5,
        prev_ts=epoch_ms(minute(clock, 2)),
        prev_count=3,
        data=[2, 3],
        data_points=2,
    )
    assert (await backend.get_metrics(queue_name, "failed")).count == 0


async def test_quiet_minutes_are_zero_and_slices_index_like_lrange_OBS_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await complete(backend, queue_name, 1, minute(clock, 0, 10))
    await complete(backend, queue_name, 4, minute(clock, 3, 10))
    whole = await backend.get_metrics(queue_name, "completed")
    assert (whole.data, whole.data_points, whole.count) == ([4, 0, 0, 1], 4, 5)
    assert (await backend.get_metrics(queue_name, "completed", 1, 2)).data == [0, 0]
    assert (await backend.get_metrics(queue_name, "completed", -2, -1)).data == [0, 1]
    assert (await backend.get_metrics(queue_name, "completed", 3, 99)).data == [1]
    assert (await backend.get_metrics(queue_name, "completed", 2, 1)).data == []
    assert (await backend.get_metrics(queue_name, "completed", 9, -1)).data == []
    # The list's length and the count do not depend on the slice.
    assert (await backend.get_metrics(queue_name, "completed", 1, 1)).data_points == 4


async def test_unknown_queue_has_empty_metrics_OBS_6(
    backend: JobQueueBackend, queue_name: str
) -> None:
    assert await backend.get_metrics(queue_name, "completed") == JobMetrics(0, 0, 0, [], 0)


async def test_terminal_failures_count_retries_do_not_OBS_6_FIN_6_STALL_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    at = minute(clock, 1, 5)
    retried, discarded, stalled = await backend.add_jobs(
        queue_name,
        [JobSpec("r", None, {"attempts": 2}), JobSpec("d", None, {"attempts": 5}), JobSpec("s")],
        now=at,
    )
    jobs = {
        job.id: job
        for job in await backend.claim_jobs("w", [QueueDemand(queue_name, 3)], 30, now=at)
    }
    await backend.fail_job(queue_name, retried.id, token(jobs[retried.id]), "once", now=at)
    assert (await backend.get_metrics(queue_name, "failed")).count == 0  # a retry
    await backend.fail_job(
        queue_name, discarded.id, token(jobs[discarded.id]), "no", discard_retry=True, now=at
    )
    # The stalled job's lease ran out: recovery past max_stalled_count fails it terminally.
    await backend.recover_stalled([queue_name], max_stalled_count=0, now=minute(clock, 2, 1))
    assert (await backend.get_job_state(queue_name, stalled.id)) == "failed"
    metrics = await backend.get_metrics(queue_name, "failed")
    assert (metrics.count, metrics.data) == (2, [1, 1])
    assert (await backend.get_metrics(queue_name, "completed")).count == 0


async def test_batches_count_per_queue_OBS_6(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    at = minute(clock, 1, 1)
    await backend.add_jobs(queue_name, [JobSpec("a")] * 2, now=at)
    await backend.add_job(queue_b, "b", now=at)
    jobs = await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 2), QueueDemand(queue_b, 1)], 30, now=at
    )
    await backend.complete_jobs([Completion(j.queue, j.id, token(j)) for j in jobs], now=at)
    assert (await backend.get_metrics(queue_name, "completed")).data == [2]
    assert (await backend.get_metrics(queue_b, "completed")).data == [1]


async def test_removed_on_complete_still_counts_OBS_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    at = minute(clock, 1, 1)
    await backend.add_job(queue_name, "gone", None, {"remove_on_complete": True}, now=at)
    [job] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=at)
    await backend.complete_job(queue_name, job.id, token(job), now=at)
    assert await backend.get_job(queue_name, job.id) is None
    assert (await backend.get_metrics(queue_name, "completed")).count == 1


async def test_data_points_are_bounded_and_compaction_keeps_answers_OBS_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    for n, count in enumerate([1, 2, 3, 4]):
        await complete(backend, queue_name, count, minute(clock, n, 7))
    bounded = await backend.get_metrics(queue_name, "completed", max_data_points=2)
    assert (bounded.count, bounded.data, bounded.data_points) == (10, [4, 3], 2)
    assert bounded.prev_count == 6
    before = await backend.get_metrics(queue_name, "completed")
    assert before.data == [4, 3, 2, 1]
    await backend.compact_metrics(now=minute(clock, 9))
    assert await backend.get_metrics(queue_name, "completed") == before
    await backend.compact_metrics(max_data_points=2, now=minute(clock, 9))
    assert await backend.get_metrics(queue_name, "completed", max_data_points=2) == bounded
    after = await backend.get_metrics(queue_name, "completed")
    assert (after.count, after.data) == (10, [4, 3])  # the folded minutes stay counted
    assert DEFAULT_JOB_METRICS_RETENTION == 20_160


@pytest.mark.parametrize(
    ("state", "start", "end", "points"),
    [
        ("waiting", 0, -1, 10),
        (None, 0, -1, 10),
        ("completed", "0", -1, 10),
        ("completed", 0, 1.5, 10),
        ("completed", True, -1, 10),
        ("completed", 0, -1, 0),
        ("completed", 0, -1, -3),
    ],
)
async def test_bad_arguments_are_refused_OBS_6(
    backend: JobQueueBackend,
    queue_name: str,
    state: object,
    start: object,
    end: object,
    points: int,
) -> None:
    with pytest.raises(InvalidOptions):
        await backend.get_metrics(queue_name, state, start, end, max_data_points=points)  # type: ignore[arg-type]


async def test_bad_compaction_bound_is_refused_OBS_6(backend: JobQueueBackend) -> None:
    with pytest.raises(InvalidOptions):
        await backend.compact_metrics(max_data_points=0)
