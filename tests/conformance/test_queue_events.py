"""Event recording per queue: on by default (ADD-9, CLAIM-1, FIN-1, EVS-4 unchanged), off
through ``set_queue_events(queue, record=False)``, after which no transition of that queue
writes an event while other queues go on recording; the events written before stay
readable (EVS-2) and trimmable (EVS-3).
"""

from __future__ import annotations

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions, InvalidQueueName
from lane_pg.types import Completion, Failure, JobRow, JobSpec, QueueDemand
from tests.helpers import Clock, event_names, events

EVERY_EVENT = {
    "added",
    "waiting",
    "delayed",
    "active",
    "progress",
    "completed",
    "failed",
    "retries-exhausted",
    "stalled",
    "removed",
    "drained",
    "paused",
    "resumed",
}


def token(job: JobRow) -> str:
    assert job.lock_token is not None
    return job.lock_token


async def claim(
    backend: JobQueueBackend, queue: str, count: int, at: float, clock: Clock
) -> list[JobRow]:
    jobs = await backend.claim_jobs("w", [QueueDemand(queue, count)], 10, now=clock.at(at))
    assert len(jobs) == count
    return jobs


async def scenario(backend: JobQueueBackend, q: str, clock: Clock) -> dict[str, int]:
    """One pass through every transition that writes an event (EVS-4) on queue ``q``;
    returns the queue's counts at the end."""
    # ADD-9 / ADD-11: a plain add, and a bulk add with a delayed job and a custom id.
    a = await backend.add_job(q, "a", {"n": 1}, now=clock.at(0))
    b, c, d = await backend.add_jobs(
        q,
        [
            JobSpec("b"),
            JobSpec("c", None, {"delay_ms": 5000}),
            JobSpec(
                "d",
                None,
                {"job_id": "d1", "attempts": 3, "backoff": {"type": "fixed", "delay_ms": 1000}},
            ),
        ],
        now=clock.at(0),
    )
    # CLAIM-1, MGMT-11, FIN-1.
    [ja] = await claim(backend, q, 1, 1, clock)
    assert ja.id == a.id
    await backend.update_job_progress(q, a.id, 50, now=clock.at(1))
    await backend.complete_job(q, a.id, token(ja), "ok", now=clock.at(2))
    # MGMT-6 delay of an active job; MGMT-5 reschedule.
    [jb] = await claim(backend, q, 1, 3, clock)
    assert jb.id == b.id
    await backend.delay_job(q, b.id, token(jb), 60, now=clock.at(3))
    await backend.reschedule_job(q, b.id, 100, now=clock.at(3))
    # FIN-3: a failure with attempts left waits out its backoff.
    [jd] = await claim(backend, q, 1, 4, clock)
    assert jd.id == d.id
    assert (await backend.fail_job(q, d.id, token(jd), "first", now=clock.at(4))).state == "delayed"
    # MGMT-3 promote one delayed job; MGMT-4 promote the due ones.
    await backend.promote_job(q, c.id, now=clock.at(4))
    assert await backend.promote_due_jobs([q], now=clock.at(6)) == 1
    # MGMT-7 release; a terminal failure through the batch path; MGMT-8 retry.
    jc, jd = await claim(backend, q, 2, 7, clock)
    assert (jc.id, jd.id) == (c.id, d.id)
    await backend.release_job(q, c.id, token(jc), now=clock.at(7))
    [outcome] = await backend.fail_jobs(
        [Failure(q, d.id, token(jd), "second", discard_retry=True)], now=clock.at(7)
    )
    assert outcome.state == "failed"
    await backend.retry_job(q, d.id, now=clock.at(8))
    # STALL-1: expired leases go back to waiting.
    await claim(backend, q, 2, 9, clock)
    assert len(await backend.recover_stalled([q], now=clock.at(20))) == 2
    # FIN-1 in a batch, then FIN-7 drained (b is delayed, nothing waits or runs).
    jc, jd = await claim(backend, q, 2, 21, clock)
    outcomes = await backend.complete_jobs(
        [Completion(q, jc.id, token(jc), 1), Completion(q, jd.id, token(jd), 2)], now=clock.at(22)
    )
    assert [o.status for o in outcomes] == ["ok", "ok"]
    # FIN-4: the last attempt fails (retries-exhausted); MGMT-16 remove; PAUSE-1.
    e = await backend.add_job(q, "e", now=clock.at(30))
    [je] = await claim(backend, q, 1, 31, clock)
    await backend.fail_job(q, e.id, token(je), "boom", now=clock.at(31))
    assert await backend.remove_job(q, b.id, now=clock.at(32))
    await backend.pause_queue(q)
    await backend.resume_queue(q)
    return await backend.get_job_counts(q)


async def test_a_new_queue_records_events_ADD_9_EVS_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    assert await backend.get_queue_events(queue_name) is True  # not created by asking
    assert queue_name not in await backend.list_queues()
    job = await backend.add_job(queue_name, "n", now=clock.at(0))
    assert await backend.get_queue_events(queue_name) is True
    found = await events(backend, queue_name)
    assert [(e.event, e.job_id) for e in found] == [("added", job.id), ("waiting", job.id)]


async def test_set_queue_events_creates_the_queue_and_reads_back(
    backend: JobQueueBackend, queue_name: str, queue_b: str
) -> None:
    await backend.set_queue_events(queue_name, record=False)
    assert queue_name in await backend.list_queues()
    assert await backend.get_queue_events(queue_name) is False
    assert await backend.get_queue_events(queue_b) is True  # other queues unchanged
    await backend.set_queue_events(queue_name, record=False)  # idempotent
    assert await backend.get_queue_events(queue_name) is False
    await backend.set_queue_events(queue_name, record=True)
    assert await backend.get_queue_events(queue_name) is True
    assert await events(backend, queue_name) == []  # the setting writes no event


async def test_recording_off_writes_no_events_while_another_queue_records_EVS_4(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """The same operations on two queues: the jobs end up alike, only the queue that
    records has events, and it has every kind."""
    await backend.set_queue_events(queue_name, record=False)
    off = await scenario(backend, queue_name, clock)
    on = await scenario(backend, queue_b, clock)

    assert (
        off
        == on
        == {
            "waiting": 0,
            "delayed": 0,
            "active": 0,
            "waiting-children": 0,
            "completed": 3,
            "failed": 1,
        }
    )
    assert await events(backend, queue_name) == []
    assert set(await event_names(backend, queue_b)) == EVERY_EVENT


async def test_batches_spanning_queues_record_only_where_on_CLAIM_1_FIN_1(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """One claim and one completion batch over both queues (the multi-queue SQL paths)."""
    await backend.set_queue_events(queue_name, record=False)
    for q in (queue_name, queue_b):
        await backend.add_jobs(q, [JobSpec("x"), JobSpec("y")], now=clock.at(0))
    claimed = await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 2), QueueDemand(queue_b, 2)], 10, now=clock.at(1)
    )
    assert len(claimed) == 4
    outcomes = await backend.complete_jobs(
        [Completion(job.queue, job.id, token(job)) for job in reversed(claimed)],
        now=clock.at(2),
    )
    assert [o.status for o in outcomes] == ["ok"] * 4

    assert await events(backend, queue_name) == []
    on_jobs = [job.id for job in claimed if job.queue == queue_b]
    got = [(e.event, e.job_id) for e in await events(backend, queue_b)]
    assert got[4:] == [
        ("active", on_jobs[0]),
        ("active", on_jobs[1]),
        ("completed", on_jobs[1]),  # batch order
        ("completed", on_jobs[0]),
        ("drained", None),
    ]


async def test_turning_recording_off_keeps_what_was_written_and_on_records_again_EVS_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first = await backend.add_job(queue_name, "first", now=clock.at(0))
    before = await events(backend, queue_name)
    assert [e.event for e in before] == ["added", "waiting"]

    await backend.set_queue_events(queue_name, record=False)
    await backend.add_job(queue_name, "quiet", now=clock.at(1))
    [job] = await claim(backend, queue_name, 1, 2, clock)
    assert job.id == first.id
    await backend.complete_job(queue_name, job.id, token(job), now=clock.at(3))
    assert await events(backend, queue_name) == before  # still readable, nothing added
    assert await backend.trim_events([queue_name]) == 0  # trimmed as before (within bound)

    await backend.set_queue_events(queue_name, record=True)
    again = await backend.add_job(queue_name, "again", now=clock.at(4))
    after = await events(backend, queue_name)
    assert after[:2] == before
    assert [(e.event, e.job_id) for e in after[2:]] == [("added", again.id), ("waiting", again.id)]
    assert after[2].id > before[-1].id


@pytest.mark.parametrize("bad", [None, 0, 1, "off", "false"])
async def test_record_must_be_a_bool_and_a_refusal_changes_nothing(
    backend: JobQueueBackend, queue_name: str, queue_b: str, bad: object
) -> None:
    await backend.set_queue_events(queue_name, record=False)
    with pytest.raises(InvalidOptions):
        await backend.set_queue_events(queue_name, record=bad)  # type: ignore[arg-type]
    assert await backend.get_queue_events(queue_name) is False
    with pytest.raises(InvalidOptions):  # a new queue is not created either
        await backend.set_queue_events(queue_b, record=bad)  # type: ignore[arg-type]
    assert queue_b not in await backend.list_queues()


async def test_queue_names_are_checked(backend: JobQueueBackend) -> None:
    with pytest.raises(InvalidQueueName):
        await backend.set_queue_events("bad name!", record=False)
    with pytest.raises(InvalidQueueName):
        await backend.get_queue_events("bad name!")
