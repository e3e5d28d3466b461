"""``FailoverDriver`` (FOV-1, FOV-4..10, A17): connections tried in order, its own
reservation tokens, aggregated reads.

Refusals are real: a PostgreSQL DSN to a closed port (the connect is refused by the
kernel), or a driver class whose push raises the ``OSError`` a dropped connection raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from lane_pg.errors import ConfigurationError, InvalidOptions
from lane_pg.facade import (
    SETTLED,
    STALE,
    BackendDriver,
    ConnectionUnavailable,
    DriverBase,
    EnvelopeOverrides,
    FailoverDriver,
    Job,
    JobRegistry,
    QueueDriver,
    QueueFacade,
    QueueFailedOver,
    Reservation,
    SyncDriver,
)
from lane_pg.facade.connection import Settlement, SettleResult
from lane_pg.facade.envelope import Envelope
from lane_pg.facade.failover import is_unavailable
from lane_pg.memory import MemoryBackend
from lane_pg.types import JobRow

CLOSED_PORT_DSN = "postgresql://postgres@127.0.0.1:1/nowhere"
OTHER_CLOSED_PORT_DSN = "postgresql://postgres@127.0.0.1:2/nowhere"


@dataclass
class Task(Job):
    job_name = "Task"
    queue = "fov"
    n: int = 0


@dataclass
class Later(Job):
    job_name = "Later"
    queue = "fov"
    delay = timedelta(minutes=10)
    n: int = 0


def refusing(dsn: str = CLOSED_PORT_DSN) -> BackendDriver:
    """A PostgreSQL connection nobody answers: every push's connect is refused."""
    return BackendDriver.lazy(dsn, "postgres")


def memory() -> BackendDriver:
    return BackendDriver(MemoryBackend(), "memory")


class Flaky(BackendDriver):
    """A memory connection that can be taken down: while ``down``, a push or a settle
    raises what a dropped connection raises."""

    def __init__(self) -> None:
        super().__init__(MemoryBackend(), "memory")
        self.down = False

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        if self.down:
            raise ConnectionRefusedError(111, "connection refused (outage)")
        return await super().push(envelope, conn=conn)

    async def settle(self, reservation: Reservation, outcome: Settlement) -> SettleResult:
        if self.down:
            raise ConnectionResetError(104, "connection reset (outage)")
        return await super().settle(reservation, outcome)


def _facade(driver: QueueDriver) -> QueueFacade:
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(driver)
    return facade


async def _jobs(driver: QueueDriver) -> list[JobRow]:
    assert isinstance(driver, BackendDriver)
    backend = await driver.backend()
    return (await backend.list_jobs("fov", [], limit=100)).items


async def test_the_first_connection_that_accepts_wins_FOV_1() -> None:
    spare = memory()
    facade = _facade(FailoverDriver([("primary", refusing()), ("spare", spare)]))
    job_id = await facade.push(Task(n=1))
    assert [job.id for job in await _jobs(spare)] == [job_id]


async def test_when_all_refuse_the_last_error_is_raised_FOV_1() -> None:
    facade = _facade(FailoverDriver([("a", refusing()), ("b", refusing(OTHER_CLOSED_PORT_DSN))]))
    with pytest.raises(OSError, match=r"'127\.0\.0\.1', 2\)"):
        await facade.push(Task())


async def test_a_validation_error_does_not_fall_through_A17() -> None:
    primary, spare = memory(), memory()
    facade = _facade(FailoverDriver([("primary", primary), ("spare", spare)]))
    with pytest.raises(InvalidOptions):
        await facade.push_with(Task(), EnvelopeOverrides(max_tries=0))
    assert (await _jobs(primary), await _jobs(spare)) == ([], [])


async def test_an_in_transaction_push_never_fails_over_A17() -> None:
    spare = memory()
    facade = _facade(FailoverDriver([("primary", refusing()), ("spare", spare)]))
    with pytest.raises(ConnectionRefusedError):
        await facade.push(Task(), conn=object())
    with pytest.raises(ConnectionRefusedError):
        await facade.bulk([Task(n=1), Task(n=2)], conn=object())
    assert await _jobs(spare) == []


def test_availability_errors_are_told_from_the_rest_A17() -> None:
    assert is_unavailable(ConnectionRefusedError(111, "refused"))
    assert is_unavailable(TimeoutError())
    assert is_unavailable(ConnectionUnavailable("maintenance"))
    wrapped = RuntimeError("pool")
    wrapped.__cause__ = OSError("network unreachable")
    assert is_unavailable(wrapped)

    class ServerError(Exception):
        def __init__(self, sqlstate: str) -> None:
            super().__init__(sqlstate)
            self.sqlstate = sqlstate

    assert is_unavailable(ServerError("57P01"))  # admin shutdown
    assert is_unavailable(ServerError("08006"))  # connection failure
    assert not is_unavailable(ServerError("23505"))  # a constraint: the same everywhere
    assert not is_unavailable(InvalidOptions("attempts must be >= 1"))
    assert not is_unavailable(ValueError("bug"))


async def test_queue_failed_over_once_per_transition_FOV_4() -> None:
    primary, spare = Flaky(), memory()
    facade = _facade(FailoverDriver([("primary", primary), ("spare", spare)]))
    events: list[QueueFailedOver] = []
    facade.events.listen(QueueFailedOver, events.append)
    primary.down = True
    for n in range(100):
        await facade.push(Task(n=n))
    assert len(await _jobs(spare)) == 100
    assert [(event.connection, event.job_name) for event in events] == [("primary", "Task")]
    assert isinstance(events[0].exception, ConnectionRefusedError)
    primary.down = False
    await facade.push(Task(n=100))  # accepted by the primary: re-armed
    assert len(await _jobs(primary)) == 1
    assert len(events) == 1
    primary.down = True
    await facade.push(Task(n=101))
    assert [event.connection for event in events] == ["primary", "primary"]


async def test_pop_rotates_its_starting_connection_FOV_5() -> None:
    first, second = memory(), memory()
    driver = FailoverDriver([("first", first), ("second", second)])
    for target in (first, second):
        target_facade = _facade(target)
        for n in range(3):
            await target_facade.push(Task(n=n))
    origins: list[str] = []
    while (reservation := await driver.pop_from(["fov"])) is not None:
        origins.append(reservation.connection)
        assert await driver.ack(reservation) == SETTLED
    # A recovered primary with a backlog does not starve the fallback's jobs.
    assert origins == ["first", "second"] * 3
    assert await driver.pop() is None


class FixedTokens(DriverBase):
    """A connection that issues the same inner token for every reservation (as two
    independent stores may) and records what it is asked to settle."""

    filters_queues = True

    def __init__(self, name: str, job: JobRow) -> None:
        self.name = name
        self.job = job
        self.settled: list[tuple[str, str, Settlement]] = []

    @property
    def driver_name(self) -> str:
        return self.name

    async def pop_from(self, queues: Sequence[str]) -> Reservation | None:
        expires = datetime.now(UTC) + timedelta(minutes=1)
        return Reservation("inner-token-1", self.job, self.name, expires)

    async def settle(self, reservation: Reservation, outcome: Settlement) -> SettleResult:
        self.settled.append((reservation.token, reservation.job.id, outcome))
        return SETTLED


async def _row(n: int) -> JobRow:
    return await MemoryBackend().add_job("fov", "Task", {"n": n})


async def test_settles_reach_the_issuing_connection_FOV_6() -> None:
    a, b = FixedTokens("a", await _row(1)), FixedTokens("b", await _row(2))
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    driver = FailoverDriver([("a", a), ("b", b)], visibility_timeout=30, clock=lambda: now[0])
    from_a, from_b = await driver.pop_from(["fov"]), await driver.pop_from(["fov"])
    assert from_a is not None and from_b is not None
    assert (from_a.connection, from_b.connection) == ("a", "b")
    assert from_a.token != from_b.token  # the failover driver's own tokens
    assert await driver.ack(from_b, "b done") == SETTLED
    assert (a.settled, [(token, job) for token, job, _ in b.settled]) == (
        [],
        [("inner-token-1", from_b.job.id)],
    )
    assert await driver.ack(from_b) == STALE  # settled: the token is gone
    now[0] += timedelta(seconds=30)  # the visibility timeout is over
    assert await driver.ack(from_a) == STALE
    unknown = Reservation("never-issued", from_a.job, "a", now[0])
    assert await driver.ack(unknown) == STALE
    assert a.settled == [] and len(b.settled) == 1  # stale tokens reached no connection
    assert driver.held() == 0


async def test_identical_job_ids_on_two_stores_settle_apart_FOV_6() -> None:
    a, b = memory(), memory()
    for target in (a, b):
        await _facade(target).push(Task())  # both fresh stores: job id "1" on each
    driver = FailoverDriver([("a", a), ("b", b)])
    from_a, from_b = await driver.pop_from(["fov"]), await driver.pop_from(["fov"])
    assert from_a is not None and from_b is not None
    assert from_a.job.id == from_b.job.id == "1"
    assert await driver.ack(from_b, "b") == SETTLED
    assert [(job.state, job.return_value) for job in await _jobs(b)] == [("completed", "b")]
    assert [job.state for job in await _jobs(a)] == ["active"]


async def test_a_settle_that_fails_keeps_the_reservation_FOV_11() -> None:
    primary = Flaky()
    await _facade(primary).push(Task())
    driver = FailoverDriver([("primary", primary)])
    reservation = await driver.pop_from(["fov"])
    assert reservation is not None
    primary.down = True
    with pytest.raises(ConnectionResetError):
        await driver.ack(reservation)
    assert driver.held() == 1
    primary.down = False
    assert await driver.ack(reservation) == SETTLED


async def test_counts_and_listings_aggregate_in_list_order_FOV_7() -> None:
    a, b = memory(), memory()
    for target, count in ((a, 2), (b, 3)):
        for n in range(count):
            await _facade(target).push(Task(n=n + 10 * (target is b)))
    facade = _facade(FailoverDriver([("a", a), ("b", b)]))
    assert (await facade.size(), await facade.pending_size("fov")) == (5, 5)
    assert (await facade.delayed_size(), await facade.reserved_size()) == (0, 0)
    listed = await facade.pending_jobs("fov")
    assert [job.payload for job in listed] == [{"n": n} for n in (0, 1, 10, 11, 12)]
    assert [job.payload for job in await facade.pending_jobs(limit=3)] == [
        {"n": n} for n in (0, 1, 10)
    ]
    assert await facade.delayed_jobs() == [] and await facade.reserved_jobs() == []
    assert await facade.clear() == 5
    assert await facade.size() == 0


class NoFilter(DriverBase):
    """A connection that can only pop from every queue at once."""

    def __init__(self) -> None:
        self.pops = 0

    async def pop(self) -> Reservation | None:
        self.pops += 1
        return None


async def test_pop_from_needs_every_connection_to_filter_FOV_8() -> None:
    a, stub = memory(), NoFilter()
    await _facade(a).push(Task())
    driver = FailoverDriver([("a", a), ("legacy", stub)])
    assert not driver.filters_queues
    with pytest.raises(ConfigurationError, match=r"'legacy'.*queue filtering"):
        await driver.pop_from(["fov"])
    assert [job.state for job in await _jobs(a)] == ["waiting"]  # nothing was claimed
    assert stub.pops == 0


class RefusesJob(BackendDriver):
    """A memory connection that refuses one job (by its ``n``) as unreachable."""

    def __init__(self, refused: int) -> None:
        super().__init__(MemoryBackend(), "memory")
        self.refused = refused

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        if envelope.data.get("n") == self.refused:
            raise ConnectionUnavailable(f"refusing job n={self.refused}")
        return await super().push(envelope, conn=conn)


async def test_bulk_falls_through_per_job_FOV_9() -> None:
    a, b = RefusesJob(3), RefusesJob(3)
    facade = _facade(FailoverDriver([("a", a), ("b", b)]))
    with pytest.raises(ConnectionUnavailable) as raised:
        await facade.bulk([Task(n=n) for n in range(1, 6)])
    assert any("job 3 of 5" in note for note in raised.value.__notes__)
    assert [job.data for job in await _jobs(a)] == [{"n": 1}, {"n": 2}]  # not rolled back
    assert await _jobs(b) == []


async def test_bulk_jobs_keep_their_available_at_across_connections_FOV_9() -> None:
    a, b = RefusesJob(2), memory()
    # The batch's moment, pinned once: an hour ahead, so a delay counted again from the
    # moment of each attempt (10 minutes from then) cannot pass for it.
    pinned_at = datetime.now(UTC) + timedelta(hours=1)
    facade = _facade(FailoverDriver([("a", a), ("b", b)], clock=lambda: pinned_at))
    ids = await facade.bulk([Later(n=n) for n in range(1, 4)])
    on_a, on_b = await _jobs(a), await _jobs(b)
    assert ([job.id for job in on_a + on_b], [job.data for job in on_b]) == (
        [ids[0], ids[2], ids[1]],
        [{"n": 2}],
    )
    for job in on_a + on_b:
        assert job.state == "delayed"
        assert job.available_at - job.created_at > timedelta(hours=1)


class WritesThenFails(BackendDriver):
    """A connection that stores the job and then loses the connection before answering."""

    def __init__(self) -> None:
        super().__init__(MemoryBackend(), "memory")

    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        await super().push(envelope, conn=conn)
        raise ConnectionResetError(104, "connection reset before the reply")


async def test_a_lost_reply_leaves_a_duplicate_with_the_same_id_FOV_10() -> None:
    a, b = WritesThenFails(), memory()
    facade = _facade(FailoverDriver([("a", a), ("b", b)]))
    job_id = await facade.push(Task(n=1))
    assert [job.id for job in await _jobs(a)] == [job_id]
    assert [job.id for job in await _jobs(b)] == [job_id]  # at-least-once, not dedup


def test_constructor_refuses_bad_lists_FOV_1() -> None:
    with pytest.raises(Exception, match="at least one"):
        FailoverDriver([])
    with pytest.raises(Exception, match="twice"):
        FailoverDriver([("a", memory()), ("a", memory())])
    with pytest.raises(TypeError):
        FailoverDriver([("a", object())])  # type: ignore[list-item]
    assert FailoverDriver([("pg-a", memory()), ("pg-b", memory())]).labels == ["pg-a", "pg-b"]


@dataclass
class Unreachable(Job):
    job_name = "Unreachable"
    queue = "fov"

    async def handle(self) -> None:
        RAN.append("unreachable")
        raise ConnectionRefusedError(111, "the handler's own HTTP call was refused")


RAN: list[str] = []


async def test_a_sync_handlers_os_error_is_not_a_failover_DRV_3_A17() -> None:
    RAN.clear()
    spare = memory()
    facade = _facade(FailoverDriver([("inline", SyncDriver()), ("spare", spare)]))
    with pytest.raises(ConnectionRefusedError, match="handler's own"):
        await facade.push(Unreachable())
    assert RAN == ["unreachable"]  # ran once, not pushed again to the spare
    assert await _jobs(spare) == []


async def test_a_read_over_a_down_store_raises_FOV_7() -> None:
    spare = memory()
    facade = _facade(FailoverDriver([("primary", refusing()), ("spare", spare)]))
    await facade.push(Task())
    assert await spare.size() == 1
    with pytest.raises(ConnectionRefusedError):
        await facade.size()  # never a total that silently leaves a store out
