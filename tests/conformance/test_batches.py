"""BATCH: batches stored with their jobs, settled on every path that ends a job, counts
derived from the settlements, callbacks enqueued as jobs (BATCH-1, -3, -5..7, -9, -10)."""

from __future__ import annotations

import uuid

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import BatchNotFound, InvalidOptions, JobStateConflict, ValidationError
from lane_pg.types import (
    BATCH_CALLBACK_JOB,
    CHAIN_CATCH_RETRY,
    Batch,
    JobRow,
    QueueDemand,
    QueuedSpec,
)
from tests.helpers import Clock

CALLBACKS = {"then": "on-then", "catch": "on-catch", "finally": "on-finally"}


def specs(queue: str, n: int, **options: object) -> list[QueuedSpec]:
    return [QueuedSpec(queue, "part", {"n": i}, dict(options) or None) for i in range(n)]


async def dispatch(
    backend: JobQueueBackend,
    queue: str,
    clock: Clock,
    n: int = 3,
    options: dict[str, object] | None = None,
    **job_options: object,
) -> tuple[str, list[str]]:
    batch_id = str(uuid.uuid4())
    ids = await backend.batches.add_batch(
        batch_id,
        "import",
        specs(queue, n, **job_options),
        {**CALLBACKS, **(options or {})},  # type: ignore[dict-item]
        now=clock.at(0),
    )
    return batch_id, ids


async def claim(
    backend: JobQueueBackend, queue: str, clock: Clock, at: float, n: int = 1
) -> list[JobRow]:
    return await backend.runs.claim_jobs("w", [QueueDemand(queue, n)], 30, now=clock.at(at))


async def find(backend: JobQueueBackend, batch_id: str) -> Batch:
    batch = await backend.batches.find_batch(batch_id)
    assert batch is not None
    return batch


async def callbacks(backend: JobQueueBackend, queue: str, batch_id: str) -> dict[str, JobRow]:
    """The batch's callback jobs on ``queue``, by kind."""
    found = {}
    for kind in ("then", "catch", "finally"):
        job = await backend.jobs.get_job(queue, f"batch-{batch_id}-{kind}")
        if job is not None:
            found[kind] = job
    return found


async def complete_all(backend: JobQueueBackend, queue: str, clock: Clock, at: float) -> None:
    for job in await claim(backend, queue, clock, at, 100):
        if job.name == "part":
            await backend.runs.complete_job(
                queue, job.id, job.lock_token or "", None, now=clock.at(at)
            )


async def test_add_batch_stamps_every_job_BATCH_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    batch_id = str(uuid.uuid4())
    jobs = [
        QueuedSpec(queue_name, "a", 1),
        QueuedSpec(queue_b, "b", 2),
        QueuedSpec(queue_name, "c", 3),
    ]
    ids = await backend.batches.add_batch(batch_id, "import", jobs, now=clock.at(0))

    stored = [
        await backend.jobs.get_job(q, i)
        for q, i in zip([queue_name, queue_b, queue_name], ids, strict=True)
    ]
    assert [job.name for job in stored if job] == ["a", "b", "c"]
    assert all(job and job.options["meta"] == {"batch_id": batch_id} for job in stored)
    assert all(job and job.state == "waiting" for job in stored)
    batch = await find(backend, batch_id)
    assert (batch.name, batch.total_jobs, batch.pending_jobs, batch.failed_jobs) == (
        "import",
        3,
        3,
        0,
    )
    assert batch.options["callback_queue"] == queue_name
    assert batch.created_at == clock.at(0)
    assert not batch.finished and not batch.cancelled and batch.progress() == 0


async def test_counts_derive_from_settlements_BATCH_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id, _ = await dispatch(backend, queue_name, clock)
    [job] = await claim(backend, queue_name, clock, 1)
    await backend.runs.complete_job(queue_name, job.id, job.lock_token or "", None, now=clock.at(2))

    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.processed_jobs(), batch.progress()) == (2, 1, 33)
    assert await callbacks(backend, queue_name, batch_id) == {}


async def test_last_settlement_enqueues_then_and_finally_once_BATCH_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id, _ = await dispatch(backend, queue_name, clock)
    await complete_all(backend, queue_name, clock, 1)

    batch = await find(backend, batch_id)
    assert batch.finished_at == clock.at(1) and batch.pending_jobs == 0 and batch.progress() == 100
    found = await callbacks(backend, queue_name, batch_id)
    assert sorted(found) == ["finally", "then"]
    assert found["then"].name == BATCH_CALLBACK_JOB
    assert found["then"].data == {
        "batch_id": batch_id,
        "kind": "then",
        "callback": "on-then",
        "error": None,
    }
    assert found["finally"].state == "waiting"


async def test_callbacks_are_retried_unless_the_batch_says_otherwise(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """Without ``callback_options`` a callback job gets a chain catch job's retries: with
    one attempt, a worker that died running it would have spent it and the callback never
    run. The batch's own ``callback_options`` replace them."""
    plain, _ = await dispatch(backend, queue_name, clock, n=1)
    own, _ = await dispatch(
        backend, queue_name, clock, n=1, options={"callback_options": {"attempts": 7}}
    )
    await complete_all(backend, queue_name, clock, 1)

    for kind, job in (await callbacks(backend, queue_name, plain)).items():
        assert job.max_attempts == CHAIN_CATCH_RETRY["attempts"], kind
        assert job.backoff is not None and job.backoff.to_json() == CHAIN_CATCH_RETRY["backoff"]
    for kind, job in (await callbacks(backend, queue_name, own)).items():
        assert (job.max_attempts, job.backoff) == (7, None), kind


async def test_first_failure_cancels_and_enqueues_catch_BATCH_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id, _ids = await dispatch(backend, queue_name, clock, attempts=1)
    [first, second] = await claim(backend, queue_name, clock, 1, 2)
    await backend.runs.fail_job(
        queue_name, first.id, first.lock_token or "", "boom", now=clock.at(2)
    )
    await backend.runs.fail_job(
        queue_name, second.id, second.lock_token or "", "bang", now=clock.at(3)
    )

    batch = await find(backend, batch_id)
    assert batch.cancelled_at == clock.at(2)
    assert (batch.pending_jobs, batch.failed_jobs, batch.failed_job_ids) == (
        1,
        2,
        (first.id, second.id),
    )
    found = await callbacks(backend, queue_name, batch_id)
    assert sorted(found) == ["catch"]
    assert found["catch"].data == {
        "batch_id": batch_id,
        "kind": "catch",
        "callback": "on-catch",
        "error": "boom",
    }

    await complete_all(backend, queue_name, clock, 4)
    found = await callbacks(backend, queue_name, batch_id)
    assert sorted(found) == ["catch", "finally"]  # no then: a job failed
    assert found["finally"].data["error"] == "boom"  # type: ignore[index]


async def test_allow_failures_keeps_the_batch_running_BATCH_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id, _ = await dispatch(
        backend, queue_name, clock, options={"allow_failures": True}, attempts=1
    )
    [job] = await claim(backend, queue_name, clock, 1)
    await backend.runs.fail_job(queue_name, job.id, job.lock_token or "", "boom", now=clock.at(2))

    batch = await find(backend, batch_id)
    assert batch.cancelled_at is None and batch.failed_jobs == 1
    assert sorted(await callbacks(backend, queue_name, batch_id)) == ["catch"]


async def test_a_retried_attempt_settles_nothing_BATCH_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id, _ = await dispatch(backend, queue_name, clock, n=1, attempts=2)
    [job] = await claim(backend, queue_name, clock, 1)
    await backend.runs.fail_job(queue_name, job.id, job.lock_token or "", "once", now=clock.at(2))

    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.failed_jobs) == (1, 0)
    await complete_all(backend, queue_name, clock, 10)
    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.failed_jobs, batch.finished) == (0, 0, True)


async def test_a_job_settles_once_BATCH_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id, _ids = await dispatch(backend, queue_name, clock, n=2, attempts=1)
    [job, other] = await claim(backend, queue_name, clock, 1, 2)
    await backend.runs.fail_job(queue_name, job.id, job.lock_token or "", "boom", now=clock.at(2))
    await backend.jobs.retry_job(queue_name, job.id, now=clock.at(3))
    [again] = [c for c in await claim(backend, queue_name, clock, 4, 5) if c.id == job.id]
    await backend.runs.complete_job(
        queue_name, job.id, again.lock_token or "", None, now=clock.at(5)
    )

    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.failed_jobs) == (1, 1)  # its first settlement stays
    await backend.runs.complete_job(
        queue_name, other.id, other.lock_token or "", None, now=clock.at(6)
    )
    found = await callbacks(backend, queue_name, batch_id)
    assert sorted(found) == ["catch", "finally"]


async def test_removed_jobs_settle_as_deleted_BATCH_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id, ids = await dispatch(backend, queue_name, clock, n=2)
    for job_id in ids:
        assert await backend.jobs.remove_job(queue_name, job_id, now=clock.at(1))

    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.failed_jobs, batch.finished_at) == (0, 0, clock.at(1))
    assert sorted(await callbacks(backend, queue_name, batch_id)) == ["finally", "then"]


async def test_discarded_and_obliterated_jobs_settle(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    batch_id = str(uuid.uuid4())
    jobs = [QueuedSpec(queue_name, "part", 1), QueuedSpec(queue_b, "part", 2)]
    await backend.batches.add_batch(batch_id, "mixed", jobs, {"finally": "f"}, now=clock.at(0))
    [job] = await claim(backend, queue_name, clock, 1)
    await backend.runs.fail_job(
        queue_name, job.id, job.lock_token or "", "no", discard_retry=True, now=clock.at(2)
    )
    await backend.cleanup.obliterate_queue(queue_b, now=clock.at(3))

    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.failed_jobs, batch.finished_at) == (0, 1, clock.at(3))
    assert await backend.jobs.get_job(queue_name, f"batch-{batch_id}-finally") is not None


async def test_an_empty_batch_finishes_at_dispatch(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id = str(uuid.uuid4())
    assert (
        await backend.batches.add_batch(
            batch_id, "none", [], {**CALLBACKS, "callback_queue": queue_name}, now=clock.at(0)
        )
        == []
    )
    batch = await find(backend, batch_id)
    assert (batch.total_jobs, batch.finished_at) == (0, clock.at(0))
    assert sorted(await callbacks(backend, queue_name, batch_id)) == ["finally", "then"]


@pytest.mark.parametrize(
    ("options", "job_options"),
    [
        ({"then": 5}, {}),
        ({"unknown": True}, {}),
        ({"allow_failures": "yes"}, {}),
        ({"callback_queue": "bad queue"}, {}),
        ({"callback_options": {"job_id": "x"}}, {}),
        ({}, {"job_id": "custom"}),
        ({}, {"deduplication": {"id": "d"}}),
        ({}, {"attempts": 0}),
    ],
)
async def test_a_refused_batch_stores_nothing(
    backend: JobQueueBackend,
    queue_name: str,
    clock: Clock,
    options: dict[str, object],
    job_options: dict[str, object],
) -> None:
    batch_id = str(uuid.uuid4())
    jobs = [QueuedSpec(queue_name, "ok", 1), QueuedSpec(queue_name, "part", 2, job_options or None)]
    with pytest.raises(ValidationError):
        await backend.batches.add_batch(batch_id, "bad", jobs, options, now=clock.at(0))  # type: ignore[arg-type]
    assert await backend.batches.find_batch(batch_id) is None
    assert await backend.reads.get_job_count(queue_name) == 0


async def test_batch_ids_are_uuids_and_unique(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    with pytest.raises(InvalidOptions):
        await backend.batches.add_batch("not-a-uuid", "x", [], now=clock.at(0))
    batch_id, _ = await dispatch(backend, queue_name, clock, n=1)
    with pytest.raises(JobStateConflict):
        await backend.batches.add_batch(batch_id, "again", specs(queue_name, 1), now=clock.at(1))
    assert (await find(backend, batch_id)).total_jobs == 1
    assert await backend.batches.find_batch("not-a-uuid") is None


async def test_add_to_batch_until_it_finishes(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id, _ = await dispatch(backend, queue_name, clock, n=1)
    [job] = await claim(backend, queue_name, clock, 1)
    more = await backend.batches.add_to_batch(batch_id, specs(queue_name, 2), now=clock.at(2))
    assert len(more) == 2
    await backend.runs.complete_job(queue_name, job.id, job.lock_token or "", None, now=clock.at(3))
    assert (await find(backend, batch_id)).pending_jobs == 2  # not finished: two were added

    await complete_all(backend, queue_name, clock, 4)
    assert (await find(backend, batch_id)).finished
    with pytest.raises(JobStateConflict):  # a then callback adding to its own batch
        await backend.batches.add_to_batch(batch_id, specs(queue_name, 1), now=clock.at(5))
    with pytest.raises(BatchNotFound):
        await backend.batches.add_to_batch(str(uuid.uuid4()), specs(queue_name, 1))
    assert (await find(backend, batch_id)).total_jobs == 3


async def test_cancel_marks_and_can_remove_waiting_jobs(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    batch_id, _ids = await dispatch(backend, queue_name, clock, n=3)
    [running] = await claim(backend, queue_name, clock, 1)
    assert await backend.batches.cancel_batch(batch_id, now=clock.at(2))
    assert not await backend.batches.cancel_batch(batch_id, now=clock.at(3))
    assert (await find(backend, batch_id)).cancelled_at == clock.at(2)
    assert (await find(backend, batch_id)).pending_jobs == 3  # marked only

    await backend.batches.cancel_batch(batch_id, remove_waiting=True, now=clock.at(4))
    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.finished) == (1, False)  # the running one is left
    assert await backend.jobs.get_job(queue_name, running.id) is not None
    await backend.runs.complete_job(
        queue_name, running.id, running.lock_token or "", None, now=clock.at(5)
    )
    assert (await find(backend, batch_id)).finished_at == clock.at(5)
    with pytest.raises(BatchNotFound):
        await backend.batches.cancel_batch(str(uuid.uuid4()))


async def test_list_and_prune_batches(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    done, _ = await dispatch(backend, queue_name, clock, n=1)
    await complete_all(backend, queue_name, clock, 1)
    pending, _ = await dispatch(backend, queue_name, clock, n=1)

    listed = [b.id for b in await backend.batches.list_batches(1000)]
    assert {done, pending} <= set(listed)
    assert pending in [b.id for b in await backend.batches.list_batches(1000, "pending")]
    assert done not in [b.id for b in await backend.batches.list_batches(1000, "pending")]
    assert done in [b.id for b in await backend.batches.list_batches(1000, "finished")]
    with pytest.raises(InvalidOptions):
        await backend.batches.list_batches(10, "sideways")

    assert await backend.batches.prune_batches(3600, now=clock.at(60)) == 0  # too young
    pruned = await backend.batches.prune_batches(30, now=clock.at(60))
    assert pruned >= 1
    assert await backend.batches.find_batch(done) is None
    assert await backend.batches.find_batch(pending) is not None
    await backend.batches.prune_batches(30, unfinished_older_than=30, now=clock.at(3600))
    assert await backend.batches.find_batch(pending) is None


async def test_stalled_drained_and_cleaned_jobs_settle_BATCH_5_BATCH_9(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    batch_id = str(uuid.uuid4())
    jobs = [QueuedSpec(queue_name, "part", 1), QueuedSpec(queue_b, "part", 2),
            QueuedSpec(queue_b, "part", 3, {"delay_ms": 60_000})]  # fmt: skip
    options = {"catch": "c", "finally": "f", "callback_queue": queue_b}
    await backend.batches.add_batch(batch_id, "ends", jobs, options, now=clock.at(0))
    [job] = await claim(backend, queue_name, clock, 1)
    outcomes = await backend.maintenance.recover_stalled(
        [queue_name], max_stalled_count=0, now=clock.at(40)
    )
    assert [outcome.state for outcome in outcomes] == ["failed"]  # stalled out: failed for good
    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.failed_job_ids, batch.cancelled_at) == (
        2,
        (job.id,),
        clock.at(40),
    )
    catch = await backend.jobs.get_job(queue_b, f"batch-{batch_id}-catch")
    assert catch is not None and catch.data["error"] == "job stalled more than allowable limit"  # type: ignore[index]

    assert await backend.cleanup.drain_jobs(queue_b, now=clock.at(41)) == 2  # part 2 and catch
    assert (await find(backend, batch_id)).pending_jobs == 1
    [cleaned] = await backend.cleanup.clean_jobs(queue_b, "delayed", 0, now=clock.at(42))
    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.failed_jobs, batch.finished_at) == (0, 1, clock.at(42))
    assert cleaned.data == 3
    assert await backend.jobs.get_job(queue_b, f"batch-{batch_id}-finally") is not None


async def test_cancel_removes_the_waiting_jobs_of_every_queue_of_the_batch(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    batch_id = str(uuid.uuid4())
    jobs = [QueuedSpec(queue_name, "part", 1), QueuedSpec(queue_b, "part", 2),
            QueuedSpec(queue_b, "part", 3, {"delay_ms": 60_000})]  # fmt: skip
    ids = await backend.batches.add_batch(batch_id, "x", jobs, {"finally": "f"}, now=clock.at(0))
    await backend.jobs.add_job(queue_b, "other", now=clock.at(0))  # of no batch: it stays

    assert await backend.batches.cancel_batch(batch_id, remove_waiting=True, now=clock.at(1))
    assert [
        await backend.jobs.get_job(q, i)
        for q, i in zip([queue_name, queue_b, queue_b], ids, strict=True)
    ] == [None, None, None]
    batch = await find(backend, batch_id)
    assert (batch.pending_jobs, batch.failed_jobs, batch.finished_at) == (0, 0, clock.at(1))
    assert await backend.reads.get_job_count(queue_b) == 1
    assert await backend.jobs.get_job(queue_name, f"batch-{batch_id}-finally") is not None
