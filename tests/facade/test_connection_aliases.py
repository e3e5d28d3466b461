"""CONN-11: an alias is one connection under two names, and two connections over one store
are refused, by boot and by code alike (``lane_pg.facade.stores``).

The alias tests boot the facade from the environment (``LANE_PG_CONNECTIONS`` naming the
default's driver) on memory and on the test database, and run a real worker on the default
connection; the refusals build drivers without I/O, or over real open backends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import pytest_asyncio

from lane_pg.errors import ConfigurationError
from lane_pg.facade import (
    BackendDriver,
    EnvelopeOverrides,
    Job,
    JobRegistry,
    QueueFacade,
    bootstrap_from_env,
)
from lane_pg.facade.bootstrap import driver_from_env
from lane_pg.facade.events import WorkerQueuePaused
from lane_pg.facade.failover import FailoverDriver
from lane_pg.facade.pausing import FacadeWorkerHooks
from lane_pg.facade.runner import typed_processors
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import Lane
from lane_pg.worker import Worker, WorkerConfig
from tests.helpers import eventually

RUNS: list[int] = []
DSN = "postgresql://postgres@127.0.0.1:1/orders"  # never opened: the refusals do no I/O


@dataclass
class Invoice(Job):
    job_name: ClassVar[str] = "aliases.invoice"
    n: int = 0

    async def handle(self) -> None:
        RUNS.append(self.n)


@pytest.fixture(params=["memory", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest_asyncio.fixture
async def aliased(kind: str, request: pytest.FixtureRequest) -> AsyncIterator[QueueFacade]:
    """Booted with ``LANE_PG_CONNECTIONS`` naming the default's driver, the default then
    named ``main``: ``kind`` is an alias of ``main``."""
    env = {"LANE_PG_DRIVER": kind, "LANE_PG_CONNECTIONS": f"{kind},null"}
    if kind == "postgres":
        env["LANE_PG_DSN"] = request.getfixturevalue("pg_dsn")
    facade = bootstrap_from_env(QueueFacade(registry=JobRegistry()), env)
    facade.set_connection_name("main")
    facade.registry.register(Invoice)
    RUNS.clear()
    try:
        yield facade
    finally:
        await facade.close()


async def test_a_pause_under_the_alias_stops_a_worker_of_the_default_CONN_11(
    aliased: QueueFacade, kind: str, queue_name: str
) -> None:
    facade = aliased
    assert facade.connection_names() == ["main", kind, "null"]
    assert facade.connection(kind) is facade.driver()
    driver = facade.driver()
    assert isinstance(driver, BackendDriver)
    seen: list[WorkerQueuePaused] = []
    facade.events.listen(WorkerQueuePaused, seen.append)
    processors = typed_processors(facade.registry, facade.events, "main")
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.02)
    hooks = FacadeWorkerHooks(facade.events, "main")
    worker = Worker(await driver.backend(), processors, config, hooks=hooks)
    task = worker.start()
    try:
        await facade.pause(kind, queue_name)  # under the alias
        assert await facade.is_paused(None, queue_name)  # the default sees it
        await eventually(lambda: seen == [WorkerQueuePaused("main", queue_name)])
        await facade.push_with(Invoice(1), EnvelopeOverrides(queue=queue_name))
        reads = worker.signals.reads
        await eventually(lambda: worker.signals.reads >= reads + 5)  # looks, claims nothing
        assert RUNS == []
        await facade.resume(None, queue_name)  # and the other way round
        assert not await facade.is_paused(kind, queue_name)
        await eventually(lambda: RUNS == [1], timeout=10)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)


async def test_forward_on_either_name_reaches_the_queue_CONN_11_ROUTE_6(
    aliased: QueueFacade, kind: str, queue_name: str
) -> None:
    facade = aliased
    driver = facade.driver()
    backend = await driver.backend() if isinstance(driver, BackendDriver) else None
    assert backend is not None
    a, b = f"{queue_name}_a", f"{queue_name}_b"
    facade.forward_on(a, f"{a}.to", kind)  # gated on the alias, pushed on main
    facade.forward_on(b, f"{b}.to", "main")  # gated on main, pushed under the alias
    first = await facade.push_with(Invoice(1), EnvelopeOverrides(queue=a))
    second = await facade.push_with(Invoice(2), EnvelopeOverrides(queue=b, connection=kind))
    assert await backend.get_job(f"{a}.to", first) is not None
    assert await backend.get_job(f"{b}.to", second) is not None
    assert facade.routing.claim_queues([a, b], "main") == [a, b, f"{a}.to", f"{b}.to"]
    facade.forward_on(a, f"{a}.null", "null")  # another connection: not ours
    third = await facade.push_with(Invoice(3), EnvelopeOverrides(queue=a))
    assert await backend.get_job(a, third) is not None


# -- one store, one connection -----------------------------------------------------------


def test_two_drivers_over_one_database_are_refused_in_code_CONN_11() -> None:
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver.lazy(DSN, "postgres"), name="orders")
    twin = BackendDriver.lazy(DSN.replace("postgresql://", "postgres://"), "postgres")
    with pytest.raises(ConfigurationError, match=r"'orders' and 'reports' are the same store"):
        facade.register_connection("reports", twin)
    assert facade.connection_names() == ["orders"]  # nothing registered
    other_schema = BackendDriver.lazy(DSN, "postgres", schema="lane_reports")
    facade.register_connection("reports", other_schema)  # another store: fine
    facade.register_connection("orders-alias", facade.driver())  # one driver: an alias
    with pytest.raises(ConfigurationError, match="same store"):
        facade.set_driver(BackendDriver.lazy(DSN, "postgres", schema="lane_reports"))
    assert facade.connection_names() == ["orders", "reports", "orders-alias"]


async def test_two_open_backends_over_one_database_are_refused_CONN_11(pg_dsn: str) -> None:
    first = await PostgresBackend.connect(pg_dsn, max_size=1)
    second = await PostgresBackend.connect(pg_dsn, max_size=1)
    try:
        facade = QueueFacade(registry=JobRegistry())
        facade.set_driver(BackendDriver(first, "postgres"))
        with pytest.raises(ConfigurationError, match="same store"):
            facade.register_connection("again", BackendDriver(second, "postgres"))
        # The lazy spelling of the same database is the same store too.
        with pytest.raises(ConfigurationError, match="same store"):
            facade.register_connection("lazy", BackendDriver.lazy(pg_dsn, "postgres"))
        facade.register_connection("memory", BackendDriver(MemoryBackend(), "memory"))
        assert facade.connection_names() == ["postgres", "memory"]
    finally:
        await first.close()
        await second.close()


def test_two_drivers_over_one_snapshot_are_refused_in_code_CONN_11(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(driver_from_env("local", {"LANE_PG_LOCAL_PATH": str(path)}))
    with pytest.raises(ConfigurationError, match=r"the snapshot .*queue\.json"):
        facade.register_connection(
            "copy",
            driver_from_env("local", {"LANE_PG_LOCAL_PATH": str(tmp_path / "." / "queue.json")}),
        )
    facade.register_connection(
        "other", driver_from_env("local", {"LANE_PG_LOCAL_PATH": str(tmp_path / "other.json")})
    )


def test_failover_entries_over_one_store_are_refused_in_code_CONN_11_FOV_3() -> None:
    primary = BackendDriver.lazy(DSN, "postgres")
    with pytest.raises(ConfigurationError, match=r"'pg-a' and 'pg-b' are the same store"):
        FailoverDriver([("pg-a", primary), ("pg-b", BackendDriver.lazy(DSN, "postgres"))])
    with pytest.raises(ConfigurationError, match="same store"):
        FailoverDriver([("pg-a", primary), ("pg-b", primary)])  # no failover to itself
    # A failover entry sharing the default's own driver is that connection (boot does it).
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(primary)
    spare = BackendDriver(MemoryBackend(), "memory")
    facade.register_connection("failover", FailoverDriver([("pg", primary), ("spare", spare)]))
    twin = FailoverDriver([("pg", BackendDriver.lazy(DSN, "postgres")), ("spare", spare)])
    with pytest.raises(ConfigurationError, match="same store"):
        facade.register_connection("failover-2", twin)


def test_boot_and_code_refuse_with_one_rule_CONN_11() -> None:
    """The env path reaches the same check: two failover entries over one store."""
    env = {
        "LANE_PG_DRIVER": "failover",
        "LANE_PG_FAILOVER_CONNECTIONS": "pg-a:postgres,pg-b:postgres",
        "LANE_PG_FAILOVER_PG_A_DSN": DSN,
        "LANE_PG_FAILOVER_PG_B_DSN": DSN,
    }
    with pytest.raises(ConfigurationError, match=r"'pg-a' and 'pg-b' are the same store") as boot:
        bootstrap_from_env(QueueFacade(registry=JobRegistry()), env)
    assert "LANE_PG_FAILOVER_PG_B_DSN" in str(boot.value)
