"""The facade's drivers (CONN-1, CONN-9, CONN-14, DRV-3..5, A16): each shipped driver
against one protocol, then what each one does of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.facade import (
    SETTLED,
    STALE,
    Ack,
    BackendDriver,
    DriverBase,
    FailoverDriver,
    Job,
    JobProcessed,
    JobRegistry,
    Nack,
    NullDriver,
    QueueDriver,
    QueueFacade,
    Release,
    Reservation,
    SyncDriver,
    current_context,
)
from lane_pg.facade.envelope import Envelope
from lane_pg.memory import MemoryBackend
from lane_pg.memory.local import LocalBackend
from lane_pg.types import JSON
from lane_pg.types.flows import FlowJob

RUNS: list[int] = []


@pytest.fixture(autouse=True)
def _fresh_runs() -> None:
    RUNS.clear()


@dataclass
class Ping(Job):
    job_name = "Ping"
    n: int = 0

    async def handle(self) -> JSON:
        RUNS.append(self.n)
        await current_context().log(f"ping {self.n}")
        return {"pong": self.n}


@dataclass
class Broken(Job):
    job_name = "Broken"

    async def handle(self) -> None:
        raise RuntimeError("broken on purpose")


DURABLE = ("backend", "failover")
SHIPPED = ("backend", "failover", "local", "sync", "null")


def _facade(driver: QueueDriver) -> QueueFacade:
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(driver)
    return facade


@pytest_asyncio.fixture(params=SHIPPED)
async def shipped(
    request: pytest.FixtureRequest, backend: JobQueueBackend, backend_kind: str, tmp_path: Path
) -> AsyncIterator[QueueDriver]:
    """Every shipped driver; the durable ones over the test's backend (memory, postgres)."""
    kind: str = request.param
    if kind == "backend":
        yield BackendDriver(backend, backend_kind)
    elif kind == "failover":
        spare = MemoryBackend()
        yield FailoverDriver(
            [
                ("primary", BackendDriver(backend, backend_kind)),
                ("spare", BackendDriver(spare, "memory")),
            ]
        )
        await spare.close()
    elif kind == "local":
        local = BackendDriver.opened_by(lambda: LocalBackend.open(tmp_path / "local.json"), "local")
        yield local
        await local.close()
    elif kind == "sync":
        yield SyncDriver()
    else:
        yield NullDriver()


def _durable(driver: QueueDriver) -> bool:
    return driver.driver_name not in ("sync", "null")


async def test_every_shipped_driver_follows_the_protocol_DRV_5_CONN_1(
    shipped: QueueDriver, queue_name: str
) -> None:
    assert isinstance(shipped, QueueDriver)
    facade = _facade(shipped)
    job_id = await _push(facade, queue_name)
    assert isinstance(job_id, str) and job_id
    durable = _durable(shipped)
    counts = (
        await shipped.size(queue_name),
        await shipped.pending_size(queue_name),
        await shipped.delayed_size(queue_name),
        await shipped.reserved_size(queue_name),
    )
    assert counts == ((1, 1, 0, 0) if durable else (0, 0, 0, 0))
    pending = await shipped.pending_jobs(queue_name)
    assert [job.id for job in pending] == ([job_id] if durable else [])
    assert await shipped.delayed_jobs(queue_name) == []
    reservation = await shipped.pop_from([queue_name])
    if not durable:
        assert reservation is None
        assert await shipped.reserved_jobs(queue_name) == []
        assert await shipped.clear(queue_name) == 0
        return
    assert isinstance(reservation, Reservation)
    assert (reservation.job.id, reservation.job.state) == (job_id, "active")
    assert [job.id for job in await shipped.reserved_jobs(queue_name)] == [job_id]
    assert await shipped.reserved_size(queue_name) == 1
    assert await shipped.ack(reservation, {"ok": True}) == SETTLED
    assert await shipped.ack(reservation) == STALE  # settled once: the lease is gone
    assert await shipped.size(queue_name) == 0
    assert await shipped.pop_from([queue_name]) is None


async def _push(facade: QueueFacade, queue: str) -> str:
    facade.route(Ping, queue=queue)
    return await facade.push(Ping(n=1))


@pytest.mark.parametrize("kind", DURABLE)
async def test_nack_and_release_settle_through_the_backend_DRV_5(
    kind: str, backend: JobQueueBackend, backend_kind: str, queue_name: str
) -> None:
    inner = BackendDriver(backend, backend_kind)
    driver: QueueDriver = inner if kind == "backend" else FailoverDriver([("only", inner)])
    facade = _facade(driver)
    job_id = await _push(facade, queue_name)
    first = await driver.pop_from([queue_name])
    assert first is not None
    assert await driver.release(first) == SETTLED
    released = await backend.get_job(queue_name, job_id)
    assert released is not None
    assert (released.state, released.attempts_started) == ("waiting", 0)  # not charged (A2)
    second = await driver.pop_from([queue_name])
    assert second is not None
    assert await driver.settle(second, Release(timedelta(minutes=5))) == SETTLED
    delayed = await backend.get_job(queue_name, job_id)
    assert delayed is not None and (delayed.state, delayed.attempts_started) == ("delayed", 0)
    assert await driver.delayed_size(queue_name) == 1
    assert [job.id for job in await driver.delayed_jobs(queue_name)] == [job_id]
    await backend.promote_job(queue_name, job_id)
    third = await driver.pop_from([queue_name])
    assert third is not None
    assert await driver.nack(third, "no", retry=False) == SETTLED
    stored = await backend.get_job(queue_name, job_id)
    assert stored is not None and (stored.state, stored.failed_reason) == ("failed", "no")
    assert await driver.settle(third, Nack("again")) == STALE
    assert await driver.settle(third, Ack()) == STALE


async def test_pop_without_queues_covers_every_queue_DRV_5(queue_name: str) -> None:
    driver = BackendDriver(MemoryBackend(), "memory")
    facade = _facade(driver)
    await _push(facade, queue_name)
    assert await driver.pop() is not None
    assert await driver.pop() is None
    with pytest.raises(ConfigurationError, match="at least one queue"):
        await driver.pop_from([])


async def test_clear_keeps_validly_leased_jobs_A16_INSP_1(
    backend: JobQueueBackend, backend_kind: str, queue_name: str
) -> None:
    driver = BackendDriver(backend, backend_kind, visibility_timeout=60)
    facade = _facade(driver)
    facade.route(Ping, queue=queue_name)
    leased = await facade.push(Ping(n=3))
    expired = await facade.push(Ping(n=4))
    done = await facade.push(Ping(n=5))
    now = datetime.now(UTC)
    # Claim three: one keeps a valid lease, one's lease is already over, one completes.
    ours = await backend.claim_jobs("w", [_demand(queue_name, 3)], timedelta(seconds=60), now=now)
    by_id = {job.id: job for job in ours}
    assert set(by_id) == {leased, expired, done}
    await facade.push(Ping(n=1))
    await facade.later(timedelta(hours=1), Ping(n=2))
    flow = await backend.add_flow(
        FlowJob("Ping", {"n": 6}, queue=queue_name, children=[FlowJob("Ping", {"n": 7})])
    )
    await backend.complete_job(queue_name, done, by_id[done].lock_token)
    await backend.renew_leases(
        [_lease(queue_name, expired, by_id[expired].lock_token)],
        timedelta(milliseconds=1),
        now=now - timedelta(minutes=5),
    )
    assert (await facade.size(queue_name), await facade.reserved_size(queue_name)) == (6, 2)
    # waiting (with the flow's child) + delayed + waiting-children + the expired active
    # go; the leased one and the completed stay.
    assert await facade.clear(queue_name) == 5
    assert await backend.get_job(queue_name, flow.job.id) is None
    left = {job.id: job.state for job in (await backend.list_jobs(queue_name, [], limit=10)).items}
    assert left == {leased: "active", done: "completed"}
    assert await backend.complete_job(queue_name, leased, by_id[leased].lock_token)


def _demand(queue: str, limit: int) -> Any:
    from lane_pg.types import QueueDemand

    return QueueDemand(queue, limit)


def _lease(queue: str, job_id: str, token: str) -> Any:
    from lane_pg.types import LeaseRef

    return LeaseRef(queue, job_id, token)


async def test_facade_reads_use_the_default_connection_CONN_9(queue_name: str) -> None:
    default, reports = (
        BackendDriver(MemoryBackend(), "memory"),
        BackendDriver(MemoryBackend(), "memory"),
    )
    facade = _facade(default)
    facade.register_connection("reports", reports)
    facade.route(Ping, connection="reports", queue=queue_name)
    pushed = [await facade.push(Ping(n=n)) for n in range(2)]
    assert (await facade.size(), await facade.pending_size(queue_name)) == (0, 0)
    assert await facade.pending_jobs() == []
    assert await facade.connection("reports").size() == 2
    assert [job.id for job in await facade.connection("reports").pending_jobs(queue_name)] == pushed
    assert await facade.clear(queue_name) == 0
    assert await facade.connection("reports").clear() == 2


async def test_listings_are_bounded_and_queue_filtered_INSP_2(
    queue_name: str, queue_b: str
) -> None:
    driver = BackendDriver(MemoryBackend(), "memory")
    facade = _facade(driver)
    facade.route(Ping, queue=queue_name)
    ours = [await facade.push(Ping(n=n)) for n in range(3)]
    facade.route(Ping, queue=queue_b)
    theirs = await facade.push(Ping(n=9))
    assert [job.id for job in await facade.pending_jobs(queue_name)] == ours
    assert [job.id for job in await facade.pending_jobs(queue_name, limit=2)] == ours[:2]
    assert {job.id for job in await facade.pending_jobs()} == {*ours, theirs}
    assert len(await facade.pending_jobs(limit=3)) == 3
    with pytest.raises(ConfigurationError, match="negative"):
        await facade.pending_jobs(limit=-1)


async def test_the_sync_driver_runs_the_handler_at_push_DRV_3(queue_name: str) -> None:
    facade = _facade(SyncDriver())
    processed: list[JobProcessed] = []
    facade.events.listen(JobProcessed, processed.append)
    facade.route(Ping, queue=queue_name)
    job_id = await facade.push(Ping(n=7))
    assert RUNS == [7]  # visible as soon as push returns
    assert [(event.job_id, event.connection) for event in processed] == [(job_id, "sync")]
    await facade.later(timedelta(hours=1), Ping(n=8))  # delays are ignored: it runs now
    assert RUNS == [7, 8]
    assert (await facade.size(), await facade.pending_jobs(), await facade.reserved_jobs()) == (
        0,
        [],
        [],
    )


async def test_the_sync_driver_raises_the_handlers_error_once_DRV_3() -> None:
    facade = _facade(SyncDriver())
    with pytest.raises(RuntimeError, match="broken on purpose"):
        await facade.push(Broken())
    with pytest.raises(ConfigurationError, match="transaction"):
        await facade.push(Ping(), conn=object())


async def test_the_null_driver_discards_DRV_4() -> None:
    facade = _facade(NullDriver())
    job_id = await facade.push(Ping(n=1))
    assert job_id
    assert RUNS == []
    assert (await facade.size(), await facade.pending_jobs(), await facade.clear()) == (0, [], 0)
    assert await NullDriver().pop() is None


class PushOnly(DriverBase):
    """A minimal third-party driver: it stores pushes and implements nothing else."""

    def __init__(self) -> None:
        self.pushed: list[Envelope] = []

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        self.pushed.append(envelope)
        return f"custom-{len(self.pushed)}"


async def test_a_driver_without_inspection_raises_CONN_14() -> None:
    driver = PushOnly()
    facade = _facade(driver)
    assert await facade.push(Ping(n=1)) == "custom-1"
    assert facade.driver_name() == "PushOnly"
    with pytest.raises(
        NotImplementedError, match="PushOnly driver does not implement pending_jobs"
    ):
        await facade.pending_jobs()
    for read in (facade.size, facade.reserved_size, facade.clear, facade.delayed_jobs):
        with pytest.raises(NotImplementedError):
            await read()
    with pytest.raises(NotImplementedError, match="pop_from"):
        await driver.pop_from(["default"])
    assert await NullDriver().pending_jobs() == []  # null answers: empty is literally true
