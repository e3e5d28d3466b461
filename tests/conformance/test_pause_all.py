"""PAUSE-4, PAUSE-5, PAUSE-8: the connection-wide pause, pause reads and claims paused as
another queue, on every backend.

On PostgreSQL the switch is database-wide (the shared test schema), so every test here
lifts it again in its teardown (``paused_all``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidQueueName
from lane_pg.types import QueueDemand
from tests.helpers import Clock


@pytest_asyncio.fixture
async def switch(backend: JobQueueBackend) -> AsyncIterator[JobQueueBackend]:
    """The backend, with the global pause lifted after the test whatever happened."""
    try:
        yield backend
    finally:
        await backend.resume_all()


async def test_pause_all_stops_claims_of_every_queue_and_resume_all_lifts_it_PAUSE_4(
    switch: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    backend = switch
    first = await backend.add_job(queue_name, "a", now=clock.at(0))
    second = await backend.add_job(queue_b, "b", now=clock.at(0))
    demands = [QueueDemand(queue_name, 5), QueueDemand(queue_b, 5)]

    await backend.pause_all()
    assert await backend.claim_jobs("w", demands, 30, now=clock.at(1)) == []
    assert (await backend.get_pause_status([queue_name])).all_paused is True
    # The queue flags are not what changed (resume_all must not have to clear them).
    assert await backend.is_queue_paused(queue_name) is False

    await backend.resume_all()
    claimed = await backend.claim_jobs("w", demands, 30, now=clock.at(2))
    assert sorted(job.id for job in claimed) == sorted([first.id, second.id])


async def test_resume_all_keeps_queue_pauses_PAUSE_4(
    switch: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    backend = switch
    await backend.add_job(queue_name, "billing", now=clock.at(0))
    other = await backend.add_job(queue_b, "export", now=clock.at(0))
    await backend.pause_queue(queue_name)
    await backend.pause_all()
    await backend.resume_all()
    demands = [QueueDemand(queue_name, 5), QueueDemand(queue_b, 5)]
    claimed = await backend.claim_jobs("w", demands, 30, now=clock.at(1))
    assert [job.id for job in claimed] == [other.id]
    assert await backend.is_queue_paused(queue_name) is True

    await backend.resume_queue(queue_name)
    assert len(await backend.claim_jobs("w", demands, 30, now=clock.at(2))) == 1


async def test_a_queue_created_during_a_global_pause_is_paused_PAUSE_4(
    switch: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    backend = switch
    await backend.pause_all()
    job = await backend.add_job(queue_name, "new", now=clock.at(0))  # adds go on
    assert job.state == "waiting"
    assert await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1)) == []
    await backend.resume_all()
    claimed = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(2))
    assert [c.id for c in claimed] == [job.id]


async def test_delayed_jobs_are_promoted_during_a_global_pause_PAUSE_12(
    switch: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    backend = switch
    job = await backend.add_job(queue_name, "d", None, {"delay_ms": 1000}, now=clock.at(0))
    await backend.pause_all()
    assert await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(2)) == []
    assert await backend.get_job_state(queue_name, job.id) == "waiting"


async def test_ignore_pause_claims_during_a_global_pause_PAUSE_10(
    switch: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    backend = switch
    job = await backend.add_job(queue_name, "n", now=clock.at(0))
    await backend.pause_all()
    claimed = await backend.claim_jobs(
        "w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1), ignore_pause=True
    )
    assert [c.id for c in claimed] == [job.id]


async def test_pause_status_reads_both_flags_PAUSE_5(
    switch: JobQueueBackend, queue_name: str, queue_b: str
) -> None:
    backend = switch
    await backend.pause_queue(queue_name)
    status = await backend.get_pause_status([queue_name, queue_b, f"{queue_name}.missing"])
    assert status.all_paused is False
    assert status.paused == frozenset({queue_name})
    assert status.is_paused(queue_name) and not status.is_paused(queue_b)

    await backend.pause_all()
    status = await backend.get_pause_status([queue_b])
    assert status.all_paused is True
    assert status.paused == frozenset()
    assert status.is_paused(queue_b) and status.is_paused("any-queue-at-all")
    with pytest.raises(InvalidQueueName):
        await backend.get_pause_status(["bad name"])


async def test_pause_status_of_every_queue_PAUSE_5_PAUSE_7(
    backend: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """``None`` asks for every queue whose own flag is set (a worker of every queue reports
    their transitions); ``()`` for none."""
    await backend.add_job(queue_b, "b", now=clock.at(0))
    await backend.pause_queue(queue_name)
    try:
        everything = await backend.get_pause_status(None)
        assert queue_name in everything.paused and queue_b not in everything.paused
        assert (await backend.get_pause_status()).paused == frozenset()
    finally:
        await backend.resume_queue(queue_name)
    assert queue_name not in (await backend.get_pause_status(None)).paused


async def test_a_demand_paused_as_its_source_follows_the_source_PAUSE_8(
    switch: JobQueueBackend, queue_name: str, queue_b: str, clock: Clock
) -> None:
    """A worker started on ``queue_name`` whose pushes are forwarded to ``queue_b`` claims
    ``queue_b`` under ``queue_name``'s pause: the destination's own pause does not stop
    it, the source's does, and so does the global one."""
    backend = switch
    source, destination = queue_name, queue_b
    await backend.add_job(source, "s", now=clock.at(0))  # the source queue row exists
    jobs = [await backend.add_job(destination, f"j{i}", now=clock.at(0)) for i in range(3)]
    demand = [QueueDemand(destination, 1, pause_as=source)]

    await backend.pause_queue(destination)
    assert [c.id for c in await backend.claim_jobs("w", demand, 30, now=clock.at(1))] == [
        jobs[0].id
    ]
    await backend.pause_queue(source)
    assert await backend.claim_jobs("w", demand, 30, now=clock.at(2)) == []
    await backend.resume_queue(source)
    await backend.pause_all()
    assert await backend.claim_jobs("w", demand, 30, now=clock.at(3)) == []
    await backend.resume_all()
    assert [c.id for c in await backend.claim_jobs("w", demand, 30, now=clock.at(4))] == [
        jobs[1].id
    ]
    # A source queue that does not exist is not paused.
    missing = [QueueDemand(destination, 1, pause_as=f"{source}.missing")]
    assert [c.id for c in await backend.claim_jobs("w", missing, 30, now=clock.at(5))] == [
        jobs[2].id
    ]


async def test_restart_signal_is_stored_in_milliseconds_CLI_6(
    backend: JobQueueBackend,
) -> None:
    before = (await backend.get_pause_status()).restart_at_ms
    stored = await backend.signal_restart()
    assert isinstance(stored, int)
    assert before is None or stored >= before
    assert (await backend.get_pause_status()).restart_at_ms == stored
