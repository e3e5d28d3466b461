"""Unique and debounced pushes on the null and failover connections (UNIQ-1, UNIQ-9, DRV-4,
FOV-1): null discards them as it discards any push; failover falls through its list and
takes the lock (or keeps the window) on the store that accepts the job. The failover list
is a PostgreSQL server nobody answers, then the test database."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import asyncpg
import pytest

import lane_pg
from lane_pg.facade import (
    BackendDriver,
    DebounceOptions,
    FailoverDriver,
    Job,
    JobDebounced,
    JobQueued,
    JobQueueing,
    JobRegistry,
    NullDriver,
    QueueFacade,
    QueueFailedOver,
    UniqueJobSkipped,
)
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import ALL_STATES, JobRow

CLOSED_PORT_DSN = "postgresql://postgres@127.0.0.1:1/nowhere"
SCOPE = {"queue": "default"}


@dataclass
class Report(Job):
    job_name = "DriversReport"
    account: str = "a"

    def unique_id(self) -> str | None:
        return f"{self.account}@{SCOPE['queue']}"  # a lock is one per connection


@dataclass
class DeferredReport(Report):
    job_name = "DriversDeferredReport"
    after_commit = True


@dataclass
class Search(Job):
    job_name = "DriversSearch"
    debounce_for = timedelta(seconds=60)
    term: str = ""


@pytest.fixture(autouse=True)
def _scope(queue_name: str) -> None:
    SCOPE["queue"] = queue_name


def _facade(driver: object, queue: str) -> tuple[QueueFacade, list[object]]:
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(driver)  # type: ignore[arg-type]
    for cls in (Report, DeferredReport, Search):
        facade.route(cls, queue=queue)
    seen: list[object] = []
    for kind in (JobQueueing, JobQueued, UniqueJobSkipped, JobDebounced, QueueFailedOver):
        facade.events.listen(kind, seen.append)
    return facade, seen


def names(events: list[object]) -> list[str]:
    return [type(event).__name__ for event in events]


async def rows(backend: PostgresBackend, queue: str) -> list[JobRow]:
    return list((await backend.list_jobs(queue, ALL_STATES, limit=100)).items)


async def test_null_discards_unique_and_debounced_pushes_as_a_plain_push_DRV_4() -> None:
    facade, seen = _facade(NullDriver(), "nulled")
    plain = await facade.push(Report())
    assert isinstance(plain, str) and plain
    assert await facade.push_unique(Report()) is True  # accepted, as a plain push is
    assert await facade.push_unique(Report()) is True  # nothing was kept to hold a lock
    assert await facade.later_unique(timedelta(hours=1), Report()) is True
    debounced = await facade.push(Search("x"))  # a class that declares debounce_for
    explicit = await facade.push_debounced(Report(), DebounceOptions(5))
    assert all(isinstance(job_id, str) and job_id for job_id in (debounced, explicit))
    assert names(seen) == ["JobQueueing", "JobQueued"] * 6
    assert await facade.size() == 0


async def test_failover_unique_push_locks_on_the_store_that_takes_the_job_FOV_1(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    driver = FailoverDriver(
        [
            ("down", BackendDriver.lazy(CLOSED_PORT_DSN, "postgres")),
            ("pg", BackendDriver(pg_backend, "postgres")),
        ]
    )
    facade, seen = _facade(driver, queue_name)
    assert await facade.push_unique(Report("a")) is True
    assert await facade.push_unique(Report("a")) is False  # the lock is on "pg"
    assert await facade.push_unique(Report("b")) is True
    [first, second] = sorted(
        await rows(pg_backend, queue_name), key=lambda row: row.data["account"]
    )
    assert (first.data, second.data) == ({"account": "a"}, {"account": "b"})
    assert names(seen) == [
        "JobQueueing",  # once per push, however many connections it tried
        "QueueFailedOver",  # "down" moved into failure on the first push only
        "JobQueued",
        "JobQueueing",
        "UniqueJobSkipped",
        "JobQueueing",
        "JobQueued",
    ]
    assert driver.failing == frozenset({"down"})


async def test_failover_debounced_push_keeps_its_window_on_the_store_that_takes_it_FOV_1(
    pg_backend: PostgresBackend, queue_name: str
) -> None:
    driver = FailoverDriver(
        [
            ("down", BackendDriver.lazy(CLOSED_PORT_DSN, "postgres")),
            ("pg", BackendDriver(pg_backend, "postgres")),
        ]
    )
    facade, seen = _facade(driver, queue_name)
    first = await facade.push(Search("one"))
    second = await facade.push(Search("two"))  # replaces the first, still delayed
    [row] = await rows(pg_backend, queue_name)
    assert (row.id, row.state, row.data) == (second, "delayed", {"term": "two"})
    debounced = [event for event in seen if isinstance(event, JobDebounced)]
    assert [event.job_id for event in debounced] == [first]
    assert names(seen).count("QueueFailedOver") == 1
    assert names(seen).count("JobQueueing") == 2


class Rollback(Exception):
    pass


async def test_failover_unique_push_inside_a_transaction_FOV_1_TX_10(
    pg_backend: PostgresBackend, pg_dsn: str, queue_name: str
) -> None:
    """A deferred unique push falls through too: the lock is taken on the store that
    accepts it (here the transaction's own database: written inside it)."""
    driver = FailoverDriver(
        [
            ("down", BackendDriver.lazy(CLOSED_PORT_DSN, "postgres")),
            ("pg", BackendDriver(pg_backend, "postgres")),
        ]
    )
    facade, _ = _facade(driver, queue_name)
    conn = await asyncpg.connect(pg_dsn)
    try:
        with pytest.raises(Rollback):
            async with lane_pg.transaction(conn):
                assert await facade.push_unique(DeferredReport("t")) is True
                raise Rollback
        assert await rows(pg_backend, queue_name) == []
        async with lane_pg.transaction(conn):
            assert await facade.push_unique(DeferredReport("t")) is True
            assert await facade.push_unique(DeferredReport("t")) is False
            assert await rows(pg_backend, queue_name) == []  # not committed yet
    finally:
        await conn.close()
    [row] = await rows(pg_backend, queue_name)
    assert (row.name, row.data) == ("DriversDeferredReport", {"account": "t"})
