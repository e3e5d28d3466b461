"""Counts, listings and ``clear`` of the facade (INSP-1..5, INSP-7), on memory and
PostgreSQL: listings answer ``InspectedJob`` values, list undecodable rows as unparseable,
and never change a job."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from lane_pg.backend import JobQueueBackend
from lane_pg.facade import Job, QueueFacade
from lane_pg.facade.reads import InspectedJob


@dataclass
class Invoice(Job):
    job_name = "InspInvoice"
    amount: int = 0
    note: str | None = None

    async def handle(self) -> None:
        return None


@dataclass
class Other(Job):
    job_name = "InspOther"

    async def handle(self) -> None:
        return None


async def test_counts_and_clear_of_waiting_delayed_and_active_INSP_1(
    facade: QueueFacade, queue_name: str
) -> None:
    facade.route(Invoice, queue=queue_name)
    await facade.push(Invoice(amount=1))
    await facade.push(Invoice(amount=2))
    await facade.later(timedelta(hours=1), Invoice(amount=3))
    reservation = await facade.driver().pop_from([queue_name])  # one active, validly leased
    assert reservation is not None
    counts = (
        await facade.size(queue_name),
        await facade.pending_size(queue_name),
        await facade.delayed_size(queue_name),
        await facade.reserved_size(queue_name),
    )
    assert counts == (3, 1, 1, 1)
    assert await facade.clear(queue_name) == 2  # A16: the validly leased job stays
    assert (await facade.size(queue_name), await facade.reserved_size(queue_name)) == (1, 1)


async def test_listings_answer_inspected_jobs_of_the_queue_asked_INSP_2(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str, queue_b: str
) -> None:
    facade.registry.register(Invoice)
    facade.route(Invoice, queue=queue_name)
    billing = await facade.push(Invoice(amount=7))
    later = await facade.later(timedelta(hours=1), Invoice(amount=8))
    facade.route(Invoice, queue=queue_b)
    await facade.push(Invoice(amount=9))

    [pending] = await facade.pending_jobs(queue_name)
    row = await backend.get_job(queue_name, billing)
    assert row is not None
    assert pending == InspectedJob(
        billing, queue_name, "InspInvoice", 0, {"amount": 7, "note": None}, row.created_at
    )
    assert [job.id for job in await facade.delayed_jobs(queue_name)] == [later]
    assert await facade.reserved_jobs(queue_name) == []
    # Every queue's, in queue-name order: the shared test database holds other tests'
    # pending jobs, which the default limit may stop at before these queues.
    everywhere = {job.queue for job in await facade.pending_jobs(limit=1_000_000)}
    assert {queue_name, queue_b} <= everywhere
    reservation = await facade.driver().pop_from([queue_b])
    assert reservation is not None
    [reserved] = await facade.reserved_jobs(queue_b)
    assert (reserved.id, reserved.attempts) == (reservation.job.id, 1)


async def test_an_undecodable_row_is_listed_as_unparseable_INSP_3(
    facade: QueueFacade, queue_name: str
) -> None:
    facade.registry.register(Invoice)
    facade.route(Invoice, queue=queue_name)
    facade.route(Other, queue=queue_name)  # not registered: its payload is not checked
    good = await facade.push(Invoice(amount=1))
    for corrupt in ({"amount": "one"}, {"amount": 1, "renamed": True}, {"note": 5}):
        envelope = facade.envelope(Invoice())
        envelope.data = corrupt
        await facade.dispatch(envelope)
    foreign = await facade.push(Other())

    listed = await facade.pending_jobs(queue_name)
    assert [(job.id, job.payload) for job in listed] == [
        (good, {"amount": 1, "note": None}),
        (None, {"unparseable": True}),
        (None, {"unparseable": True}),
        (None, {"unparseable": True}),
        (foreign, {}),
    ]
    assert all(job.name == "InspInvoice" for job in listed[:4])
    assert await facade.size(queue_name) == 5  # never hidden, never removed


async def test_listings_never_change_state_INSP_4(
    facade: QueueFacade, backend: JobQueueBackend, queue_name: str
) -> None:
    facade.route(Invoice, queue=queue_name)
    await facade.push(Invoice(amount=1))
    delayed = await facade.later(timedelta(hours=1), Invoice(amount=2))
    reservation = await facade.driver().pop_from([queue_name])
    assert reservation is not None
    before = await backend.get_job(queue_name, reservation.job.id)
    for _ in range(10):
        await facade.pending_jobs(queue_name)
        await facade.delayed_jobs(queue_name)
        await facade.reserved_jobs(queue_name)
    after = await backend.get_job(queue_name, reservation.job.id)
    assert before is not None and after is not None
    assert (after.state, after.attempts_started, after.attempts_made, after.lock_token) == (
        before.state,
        before.attempts_started,
        before.attempts_made,
        before.lock_token,
    )
    assert await backend.get_job_state(queue_name, delayed) == "delayed"


async def test_listings_read_the_queue_named_not_its_forward_INSP_7(
    facade: QueueFacade, queue_name: str, queue_b: str
) -> None:
    facade.route(Invoice, queue=queue_name)
    backlog = await facade.push(Invoice(amount=1))
    facade.forward(queue_name, queue_b)
    moved = await facade.push(Invoice(amount=2))
    assert [job.id for job in await facade.pending_jobs(queue_name)] == [backlog]
    assert [job.id for job in await facade.pending_jobs(queue_b)] == [moved]
