"""Writes from a run are fenced by its claim's lock token (WORK-9, CLAIM-4, MGMT-10/11/13).

``update_job_data``, ``update_job_progress`` and ``add_job_log`` take an optional ``token``:
with it the job must be active under exactly that token, else ``LockMismatch`` (or
``JobNotFound``) and nothing changes; without it the call is an administrator's, as before.
``JobContext`` passes its claim's token, so a run whose lease was taken over gets
``LeaseLost`` from every context write and its context counts as lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import JobNotFound, LeaseLost, LockMismatch
from lane_pg.types import ClaimedJob, JobOptions, QueueDemand
from lane_pg.worker import JobContext
from tests.helpers import Clock, events


async def _taken_over(
    backend: JobQueueBackend, queue: str, clock: Clock
) -> tuple[ClaimedJob, ClaimedJob]:
    """A job claimed by ``old``, recovered after its 1 s lease lapsed and claimed again by
    ``new``: (old claim, new claim)."""
    await backend.add_job(queue, "n", {"v": "added"}, JobOptions(attempts=3), now=clock.at(0))
    [old] = await backend.claim_jobs("old", [QueueDemand(queue, 1)], 1, now=clock.at(1))
    await backend.recover_stalled([queue], now=clock.at(3))
    [new] = await backend.claim_jobs("new", [QueueDemand(queue, 1)], 60, now=clock.at(4))
    assert (new.id, new.worker_id) == (old.id, "new") and new.lock_token != old.lock_token
    return old, new


async def _everything(backend: JobQueueBackend, queue: str, job_id: str) -> object:
    """All a write could have changed: the job, its logs and the queue's events."""
    job = await backend.get_job(queue, job_id)
    logs = await backend.get_job_logs(queue, job_id)
    return job, logs, await events(backend, queue)


async def test_stale_token_writes_are_refused_and_change_nothing_WORK_9_CLAIM_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    old, new = await _taken_over(backend, queue_name, clock)
    await backend.update_job_data(queue_name, new.id, {"v": "new"}, token=new.lock_token)
    await backend.add_job_log(queue_name, new.id, "new", token=new.lock_token, now=clock.at(5))
    await backend.update_job_progress(
        queue_name, new.id, {"by": "new"}, token=new.lock_token, now=clock.at(5)
    )
    before = await _everything(backend, queue_name, new.id)
    writes: dict[str, Callable[[], Awaitable[object]]] = {
        "data": lambda: backend.update_job_data(
            queue_name, old.id, {"v": "old"}, token=old.lock_token
        ),
        "progress": lambda: backend.update_job_progress(
            queue_name, old.id, {"by": "old"}, token=old.lock_token, now=clock.at(6)
        ),
        "log": lambda: backend.add_job_log(
            queue_name, old.id, "old", token=old.lock_token, now=clock.at(6)
        ),
        "log_keep": lambda: backend.add_job_log(
            queue_name, old.id, "old", keep=0, token=old.lock_token, now=clock.at(6)
        ),
        "not_a_uuid": lambda: backend.update_job_data(
            queue_name, old.id, {"v": "old"}, token="not-a-token"
        ),
    }
    for name, write in writes.items():
        with pytest.raises(LockMismatch):
            await write()
        assert await _everything(backend, queue_name, new.id) == before, name
    job = await backend.get_job(queue_name, new.id)
    assert job is not None
    assert (job.data, job.progress, job.worker_id) == ({"v": "new"}, {"by": "new"}, "new")
    assert [entry.message for entry in (await backend.get_job_logs(queue_name, new.id)).logs] == [
        "new"
    ]


async def test_token_of_a_job_that_is_not_active_is_refused_WORK_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 60, now=clock.at(1))
    await backend.complete_job(queue_name, claimed.id, claimed.lock_token, "r", now=clock.at(2))
    before = await _everything(backend, queue_name, claimed.id)
    with pytest.raises(LockMismatch):
        await backend.update_job_progress(
            queue_name, claimed.id, 1, token=claimed.lock_token, now=clock.at(3)
        )
    with pytest.raises(LockMismatch):
        await backend.add_job_log(
            queue_name, claimed.id, "late", token=claimed.lock_token, now=clock.at(3)
        )
    with pytest.raises(LockMismatch):
        await backend.update_job_data(queue_name, claimed.id, 1, token=claimed.lock_token)
    assert await _everything(backend, queue_name, claimed.id) == before
    with pytest.raises(JobNotFound):
        await backend.update_job_data(queue_name, "missing", 1, token=claimed.lock_token)
    with pytest.raises(JobNotFound):
        await backend.add_job_log(queue_name, "missing", "x", token=claimed.lock_token)


async def test_current_token_and_tokenless_admin_writes_work_MGMT_10_MGMT_11_MGMT_13(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    _, new = await _taken_over(backend, queue_name, clock)
    held = await backend.update_job_data(queue_name, new.id, {"v": 1}, token=new.lock_token)
    assert held.data == {"v": 1}
    assert (
        await backend.add_job_log(queue_name, new.id, "a", token=new.lock_token, now=clock.at(5))
        == 1
    )
    moved = await backend.update_job_progress(
        queue_name, new.id, 50, token=new.lock_token, now=clock.at(5)
    )
    assert moved.progress == 50
    # An administrator (no token) may still write to any retained job, held or not.
    assert (await backend.update_job_data(queue_name, new.id, {"v": 2})).data == {"v": 2}
    assert (
        await backend.update_job_progress(queue_name, new.id, 60, now=clock.at(6))
    ).progress == 60
    assert await backend.add_job_log(queue_name, new.id, "b", now=clock.at(6)) == 2
    await backend.complete_job(queue_name, new.id, new.lock_token, None, now=clock.at(7))
    assert (await backend.update_job_data(queue_name, new.id, {"v": 3})).data == {"v": 3}
    assert (
        await backend.update_job_progress(queue_name, new.id, 70, now=clock.at(8))
    ).progress == 70
    assert await backend.add_job_log(queue_name, new.id, "c", keep=2, now=clock.at(8)) == 2
    names = [event.event for event in await events(backend, queue_name) if event.job_id == new.id]
    assert names.count("progress") == 3


async def test_context_of_a_taken_over_run_gets_lease_lost_and_is_marked_lost_WORK_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """The run has not been told (no renewal ran): its first write is refused by the
    backend, not by the context's flag, and from then on the context says it is lost."""
    old, new = await _taken_over(backend, queue_name, clock)
    context = JobContext(backend, old, "old")
    before = await _everything(backend, queue_name, new.id)
    assert not context.has_lost_lease()
    with pytest.raises(LeaseLost) as refused:
        await context.update_progress({"by": "old"})
    assert isinstance(refused.value.__cause__, LockMismatch)
    assert context.has_lost_lease()
    with pytest.raises(LeaseLost):
        context.ensure_lease()
    with pytest.raises(LeaseLost):
        await context.log("old")
    with pytest.raises(LeaseLost):
        await context.update_data({"v": "old"})
    assert await _everything(backend, queue_name, new.id) == before


async def test_context_of_the_current_run_writes_with_its_token_WORK_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    _, new = await _taken_over(backend, queue_name, clock)
    context = JobContext(backend, new, "new")
    await context.update_data({"v": "ctx"})
    await context.update_progress(7)
    await context.log("from the context")
    job = await backend.get_job(queue_name, new.id)
    assert job is not None and (job.data, job.progress) == ({"v": "ctx"}, 7)
    logs = await backend.get_job_logs(queue_name, new.id)
    assert [entry.message for entry in logs.logs] == ["from the context"]
    assert not context.has_lost_lease()


async def test_a_removed_job_counts_as_lost_for_its_context_WORK_9(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 1, now=clock.at(1))
    assert await backend.remove_job(queue_name, claimed.id, now=clock.at(5))  # lease lapsed
    context = JobContext(backend, claimed, "w")
    with pytest.raises(LeaseLost) as refused:
        await context.log("gone")
    assert isinstance(refused.value.__cause__, JobNotFound)
    assert context.has_lost_lease()
