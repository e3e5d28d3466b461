"""Live event subscription on every backend (EVS-7): ``subscribe_events`` yields committed
events in id order, each once, from the stream's end or after a given id.

Bounds are generous (a 5 s deadline for an event to arrive): the machine is shared, and
the latency itself is measured in docs/decisions.md, not asserted here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions
from lane_pg.types import JobSpec, QueueDemand, QueueEvent
from tests.helpers import Clock

DEADLINE = 5.0


async def take(events: AsyncIterator[QueueEvent], n: int) -> list[QueueEvent]:
    taken: list[QueueEvent] = []
    async with asyncio.timeout(DEADLINE):
        async for event in events:
            taken.append(event)
            if len(taken) == n:
                break
    return taken


async def test_subscriber_receives_completed_after_commit_EVS_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    old = await backend.add_job(queue_name, "old", now=clock.at(0))
    last_old = (await backend.read_events(queue_name))[-1].id
    events = backend.subscribe_events(queue_name, "$", poll_interval=0.05)
    first = asyncio.ensure_future(anext(events))  # starts the subscription at "$"
    await asyncio.sleep(0.3)
    [job] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(1))
    assert job.id == old.id and job.lock_token is not None
    await backend.complete_job(queue_name, job.id, job.lock_token, "done", now=clock.at(2))
    async with asyncio.timeout(DEADLINE):
        active = await first
    assert active.id > last_old and active.event == "active"
    [completed] = await take(events, 1)
    assert (completed.event, completed.job_id) == ("completed", job.id)
    assert completed.data["returnvalue"] == "done"


async def test_a_thousand_adds_arrive_in_id_order_none_missing_EVS_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "before", now=clock.at(0))
    start = (await backend.read_events(queue_name))[-1].id
    events = backend.subscribe_events(queue_name, start, poll_interval=0.05)
    pending = asyncio.ensure_future(take(events, 2000 + 200))
    for n in range(0, 1000, 100):  # batch rows and single rows alike
        await backend.add_jobs(queue_name, [JobSpec("bulk", {"n": k}) for k in range(n, n + 99)])
        await backend.add_job(queue_name, "single", {"n": n + 99})
    for _ in range(100):
        await backend.add_job(queue_name, "tail")
    received = await pending
    stored = await backend.read_events(queue_name, start + 1, "+", 10_000)
    assert [e.id for e in received] == [e.id for e in stored]
    assert [e.id for e in received] == sorted({e.id for e in received})
    assert sum(e.event == "added" for e in received) == 1100


async def test_resume_after_an_id_EVS_7(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    for n in range(3):
        await backend.add_job(queue_name, f"j{n}", now=clock.at(n))
    stored = await backend.read_events(queue_name)
    for n in range(len(stored) - 1):  # after an added as after a waiting
        resumed = await take(backend.subscribe_events(queue_name, str(stored[n].id)), 5 - n)
        assert resumed == stored[n + 1 :]
    everything = await take(backend.subscribe_events(queue_name, 0), 6)
    assert everything == stored


@pytest.mark.parametrize("from_id", ["-", "x1", -1, 1.5, None, True])
async def test_bad_from_id_is_refused_at_the_call_EVS_7(
    backend: JobQueueBackend, queue_name: str, from_id: object
) -> None:
    with pytest.raises(InvalidOptions):
        backend.subscribe_events(queue_name, from_id)  # type: ignore[arg-type]


@pytest.mark.parametrize("interval", [0, -1, 61, "fast"])
async def test_bad_poll_interval_is_refused_EVS_7(
    backend: JobQueueBackend, queue_name: str, interval: object
) -> None:
    with pytest.raises(InvalidOptions):
        backend.subscribe_events(queue_name, poll_interval=interval)  # type: ignore[arg-type]
