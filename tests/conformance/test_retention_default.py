"""Bounded default retention per queue (queue retention): each queue keeps its newest
``keep_completed`` completed and ``keep_failed`` failed jobs, ``prune_finished`` deletes
the older ones in batches, and ``None`` keeps all (RET-1, which it bounds by default;
RET-2..5 per-job options still apply first; EVS-5: no events for retention removal).

Every test names the queues it prunes: the PostgreSQL test database is shared.
"""

from __future__ import annotations

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions, InvalidQueueName
from lane_pg.types import (
    DEFAULT_KEEP_COMPLETED,
    DEFAULT_KEEP_FAILED,
    Completion,
    JobRow,
    QueueDemand,
    QueueRetention,
)
from lane_pg.worker import WorkerConfig
from tests.helpers import Clock, events


async def finish(
    backend: JobQueueBackend,
    queue: str,
    clock: Clock,
    count: int,
    *,
    start: float,
    failed: bool = False,
) -> list[str]:
    """Add ``count`` jobs and finish them one by one, one second apart from ``start``
    (oldest first); returns their ids in finishing order."""
    added = [
        await backend.add_job(queue, f"j{i}", {"i": i}, now=clock.at(start)) for i in range(count)
    ]
    claimed = await backend.claim_jobs("w", [QueueDemand(queue, count)], 600, now=clock.at(start))
    assert [job.id for job in claimed] == [job.id for job in added]
    for i, job in enumerate(claimed):
        moment = clock.at(start + 1 + i)
        if failed:
            await backend.fail_job(queue, job.id, token(job), "boom", now=moment)
        else:
            await backend.complete_job(queue, job.id, token(job), i, now=moment)
    return [job.id for job in added]


def token(job: JobRow) -> str:
    assert job.lock_token is not None
    return job.lock_token


async def kept(backend: JobQueueBackend, queue: str, ids: list[str]) -> list[str]:
    """The ids (of ``ids``, in that order) whose job still exists."""
    return [job_id for job_id in ids if await backend.get_job(queue, job_id) is not None]


async def test_new_queue_reports_the_default_bounds_RET_1(
    backend: JobQueueBackend, queue_name: str
) -> None:
    default = QueueRetention(DEFAULT_KEEP_COMPLETED, DEFAULT_KEEP_FAILED)
    assert default == QueueRetention.default() == QueueRetention(10_000, 100_000)
    assert await backend.get_queue_retention(queue_name) == default  # queue not created yet
    assert queue_name not in await backend.list_queues()
    await backend.add_job(queue_name, "n")
    assert await backend.get_queue_retention(queue_name) == default


async def test_set_queue_retention_creates_the_queue_and_reads_back_RET_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str
) -> None:
    await backend.set_queue_retention(queue_name, keep_completed=5, keep_failed=None)
    assert queue_name in await backend.list_queues()
    assert await backend.get_queue_retention(queue_name) == QueueRetention(5, None)
    await backend.set_queue_retention(queue_name, keep_completed=None, keep_failed=0)
    assert await backend.get_queue_retention(queue_name) == QueueRetention(None, 0)
    # Other queues keep the defaults.
    assert await backend.get_queue_retention(queue_b) == QueueRetention.default()


async def test_prune_keeps_the_newest_keep_completed_RET_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    ids = await finish(backend, queue_name, clock, 12, start=0)
    await backend.set_queue_retention(queue_name, keep_completed=5, keep_failed=None)

    assert await backend.prune_finished([queue_name]) == 7
    assert await kept(backend, queue_name, ids) == ids[-5:]
    assert (await backend.get_job_counts(queue_name, ["completed"]))["completed"] == 5
    assert await backend.prune_finished([queue_name]) == 0  # within the bound now


async def test_prune_orders_ties_in_finished_at_by_creation_RET_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """One ``complete_many`` batch gives its jobs the same ``finished_at``: the older
    ones by creation go first, whatever order the batch listed them in."""
    early = await finish(backend, queue_name, clock, 2, start=0)
    batch = [await backend.add_job(queue_name, f"b{i}", now=clock.at(10)) for i in range(4)]
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 4)], 600, now=clock.at(10))
    assert [job.id for job in claimed] == [job.id for job in batch]
    outcomes = await backend.complete_jobs(
        [Completion(queue_name, job.id, token(job)) for job in reversed(claimed)],
        now=clock.at(20),
    )
    assert [outcome.status for outcome in outcomes] == ["ok"] * 4
    ids = early + [job.id for job in batch]
    await backend.set_queue_retention(queue_name, keep_completed=3, keep_failed=None)

    # The cut-off falls inside the tie: both early jobs and the first-created of the batch.
    assert await backend.prune_finished([queue_name]) == 3
    assert await kept(backend, queue_name, ids) == ids[3:]
    await backend.set_queue_retention(queue_name, keep_completed=1, keep_failed=None)
    assert await backend.prune_finished([queue_name]) == 2
    assert await kept(backend, queue_name, ids) == ids[-1:]


async def test_none_keeps_every_finished_job_RET_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    completed = await finish(backend, queue_name, clock, 6, start=0)
    failed = await finish(backend, queue_name, clock, 4, start=100, failed=True)
    await backend.set_queue_retention(queue_name, keep_completed=None, keep_failed=None)
    assert await backend.get_queue_retention(queue_name) == QueueRetention(None, None)

    assert await backend.prune_finished([queue_name], batch=1) == 0
    assert await kept(backend, queue_name, completed + failed) == completed + failed


async def test_completed_and_failed_bounds_are_independent_RET_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    completed = await finish(backend, queue_name, clock, 5, start=0)
    failed = await finish(backend, queue_name, clock, 5, start=100, failed=True)

    await backend.set_queue_retention(queue_name, keep_completed=2, keep_failed=None)
    assert await backend.prune_finished([queue_name]) == 3
    assert await kept(backend, queue_name, completed) == completed[-2:]
    assert await kept(backend, queue_name, failed) == failed

    await backend.set_queue_retention(queue_name, keep_completed=None, keep_failed=1)
    assert await backend.prune_finished([queue_name]) == 4
    assert await kept(backend, queue_name, completed) == completed[-2:]
    assert await kept(backend, queue_name, failed) == failed[-1:]

    await backend.set_queue_retention(queue_name, keep_completed=0, keep_failed=0)
    assert await backend.prune_finished([queue_name]) == 3
    assert await backend.get_job_counts(queue_name, ["completed", "failed"]) == {
        "completed": 0,
        "failed": 0,
    }


async def test_batch_limits_each_queue_and_state_RET_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    completed = await finish(backend, queue_name, clock, 7, start=0)
    failed = await finish(backend, queue_name, clock, 5, start=100, failed=True)
    other = await finish(backend, queue_b, clock, 4, start=0)
    await backend.set_queue_retention(queue_name, keep_completed=1, keep_failed=0)
    await backend.set_queue_retention(queue_b, keep_completed=0, keep_failed=0)
    queues = [queue_name, queue_b]

    # At most 3 per queue and state, oldest first: 3 + 3 + 3.
    assert await backend.prune_finished(queues, batch=3) == 9
    assert await kept(backend, queue_name, completed) == completed[3:]
    assert await kept(backend, queue_name, failed) == failed[3:]
    assert await kept(backend, queue_b, other) == other[3:]
    # The second call finishes the job: 3 + 2 + 1.
    assert await backend.prune_finished(queues, batch=3) == 6
    assert await kept(backend, queue_name, completed) == completed[-1:]
    assert await kept(backend, queue_name, failed) == []
    assert await kept(backend, queue_b, other) == []
    assert await backend.prune_finished(queues, batch=3) == 0


async def test_queue_within_its_bound_is_untouched_RET_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    small = await finish(backend, queue_name, clock, 4, start=0)
    large = await finish(backend, queue_b, clock, 4, start=0)
    await backend.set_queue_retention(queue_name, keep_completed=4, keep_failed=4)
    await backend.set_queue_retention(queue_b, keep_completed=1, keep_failed=4)
    before = [await backend.get_job(queue_name, job_id) for job_id in small]

    assert await backend.prune_finished([queue_name, queue_b]) == 3
    assert [await backend.get_job(queue_name, job_id) for job_id in small] == before
    assert await kept(backend, queue_b, large) == large[-1:]
    # A queue that does not exist, or is not named, is left alone.
    assert await backend.prune_finished([f"{queue_name}_missing"]) == 0


async def test_negative_bounds_are_refused_and_change_nothing_RET_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str
) -> None:
    await backend.set_queue_retention(queue_name, keep_completed=5, keep_failed=7)
    for completed, failed in ((-1, 3), (3, -1), (-1, None), (None, -5)):
        with pytest.raises(InvalidOptions):
            await backend.set_queue_retention(
                queue_name, keep_completed=completed, keep_failed=failed
            )
    assert await backend.get_queue_retention(queue_name) == QueueRetention(5, 7)
    # Refused for a new queue: it is not created either.
    with pytest.raises(InvalidOptions):
        await backend.set_queue_retention(queue_b, keep_completed=-1, keep_failed=1)
    assert queue_b not in await backend.list_queues()
    with pytest.raises(InvalidOptions):
        await backend.set_queue_retention(
            queue_name,
            keep_completed=True,  # type: ignore[arg-type]
            keep_failed=1,
        )
    with pytest.raises(InvalidOptions):
        await backend.set_queue_retention(queue_name, keep_completed=2**31, keep_failed=1)
    assert await backend.get_queue_retention(queue_name) == QueueRetention(5, 7)
    with pytest.raises(InvalidQueueName):
        await backend.set_queue_retention("bad name!", keep_completed=1, keep_failed=1)
    with pytest.raises(InvalidQueueName):
        await backend.get_queue_retention("bad name!")
    with pytest.raises(InvalidOptions):
        await backend.prune_finished([queue_name], batch=0)
    with pytest.raises(InvalidQueueName):
        await backend.prune_finished(["bad name!"])


async def test_pruned_jobs_lose_their_logs_RET_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    ids = await finish(backend, queue_name, clock, 4, start=0)
    for job_id in ids:
        await backend.add_job_log(queue_name, job_id, f"log of {job_id}", now=clock.at(50))
    await backend.set_queue_retention(queue_name, keep_completed=1, keep_failed=None)

    assert await backend.prune_finished([queue_name]) == 3
    for job_id in ids[:-1]:
        assert await backend.get_job(queue_name, job_id) is None
        assert (await backend.get_job_logs(queue_name, job_id)).count == 0
    page = await backend.get_job_logs(queue_name, ids[-1])
    assert [entry.message for entry in page.logs] == [f"log of {ids[-1]}"]


async def test_unfinished_jobs_are_never_pruned_RET_1(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    finished = await finish(backend, queue_name, clock, 3, start=0)
    failed = await finish(backend, queue_name, clock, 2, start=100, failed=True)
    active = await backend.add_job(queue_name, "active", now=clock.at(200))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 600, now=clock.at(200))
    assert claimed.id == active.id
    waiting = await backend.add_job(queue_name, "waiting", now=clock.at(201))
    delayed = await backend.add_job(queue_name, "delayed", None, {"delay_ms": 3_600_000})
    await backend.set_queue_retention(queue_name, keep_completed=0, keep_failed=0)

    assert await backend.prune_finished([queue_name]) == 5
    assert await kept(backend, queue_name, finished + failed) == []
    assert await backend.get_job_counts(queue_name) == {
        "waiting": 1,
        "delayed": 1,
        "active": 1,
        "waiting-children": 0,
        "completed": 0,
        "failed": 0,
    }
    for job, state in ((active, "active"), (waiting, "waiting"), (delayed, "delayed")):
        assert await backend.get_job_state(queue_name, job.id) == state


async def test_pruning_writes_no_events_RET_1_EVS_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await finish(backend, queue_name, clock, 4, start=0)
    await backend.set_queue_retention(queue_name, keep_completed=1, keep_failed=None)
    before = await events(backend, queue_name)
    assert await backend.prune_finished([queue_name]) == 3
    assert await events(backend, queue_name) == before


async def test_per_job_retention_applies_first_then_the_queue_bound_RET_2_RET_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """``remove_on_complete`` works as before at finish time; the queue bound is an extra
    cap applied later by the prune."""
    ids = [
        (
            await backend.add_job(
                queue_name, f"j{i}", None, {"remove_on_complete": 3}, now=clock.at(0)
            )
        ).id
        for i in range(6)
    ]
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 6)], 600, now=clock.at(0))
    await backend.set_queue_retention(queue_name, keep_completed=1, keep_failed=None)
    for i, job in enumerate(claimed):
        await backend.complete_job(queue_name, job.id, token(job), now=clock.at(1 + i))
    assert await kept(backend, queue_name, ids) == ids[-3:]  # RET-2: newest 3 at finish time

    assert await backend.prune_finished([queue_name]) == 2
    assert await kept(backend, queue_name, ids) == ids[-1:]

    # A looser queue bound does not keep what the job's own option removed.
    await backend.set_queue_retention(queue_name, keep_completed=100, keep_failed=None)
    assert await backend.prune_finished([queue_name]) == 0
    assert await kept(backend, queue_name, ids) == ids[-1:]


def test_worker_prune_interval_must_be_positive_RET_1() -> None:
    assert WorkerConfig().prune_interval == 1.0
    assert WorkerConfig(prune_interval=0.25).prune_interval == 0.25
    for bad in (0.0, -1.0):
        with pytest.raises(InvalidOptions, match="prune_interval"):
            WorkerConfig(prune_interval=bad)
