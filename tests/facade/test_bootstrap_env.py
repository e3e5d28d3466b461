"""Booting connections from the environment (CONN-1..3, CONN-10, CONN-11, CONN-15, FOV-2,
FOV-3): every accepted configuration, and every misconfiguration failing boot with
nothing changed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

import pytest

from lane_pg.cli.common import resolve_connection
from lane_pg.errors import ConfigurationError
from lane_pg.facade import (
    BackendDriver,
    FailoverDriver,
    Job,
    JobRegistry,
    NullDriver,
    QueueFacade,
    SyncDriver,
    bootstrap_from_env,
)

DSN_A = "postgresql://postgres@127.0.0.1:1/a"
DSN_B = "postgresql://postgres@127.0.0.1:1/b"
RUNS: list[int] = []


@dataclass
class Hello(Job):
    job_name = "Hello"
    queue = "boot"
    n: int = 0

    async def handle(self) -> None:
        RUNS.append(self.n)


def _facade() -> QueueFacade:
    return QueueFacade(registry=JobRegistry())


def _boot(env: dict[str, str], **options: bool) -> QueueFacade:
    return bootstrap_from_env(_facade(), env, **options)


def _refused(env: dict[str, str], match: str, **options: bool) -> None:
    facade = _facade()
    with pytest.raises(ConfigurationError, match=match):
        bootstrap_from_env(facade, env, **options)
    assert facade.connection_names() == []  # a boot error changes nothing


@pytest.mark.parametrize(
    ("driver", "kind", "cls"),
    [
        ("postgres", "postgres", BackendDriver),
        ("database", "postgres", BackendDriver),
        ("memory", "memory", BackendDriver),
        ("local", "local", BackendDriver),
        ("sync", "sync", SyncDriver),
        ("null", "null", NullDriver),
        ("failover", "failover", FailoverDriver),
        (" Memory ", "memory", BackendDriver),
    ],
)
def test_each_driver_name_CONN_2(driver: str, kind: str, cls: type) -> None:
    facade = _boot({"LANE_PG_DRIVER": driver, "LANE_PG_FAILOVER_CONNECTIONS": "memory"})
    assert (facade.driver_name(), type(facade.driver())) == (kind, cls)
    assert facade.connection_name() == kind


async def test_each_booted_driver_accepts_a_push_CONN_1(pg_dsn: str, queue_name: str) -> None:
    RUNS.clear()
    for driver in ("memory", "sync", "null", "failover", "postgres"):
        facade = _boot(
            {
                "LANE_PG_DRIVER": driver,
                "LANE_PG_DSN": pg_dsn,
                "LANE_PG_FAILOVER_CONNECTIONS": "down:postgres,memory",
                "LANE_PG_FAILOVER_DOWN_DSN": DSN_A,  # refused: the push falls to memory
            }
        )
        facade.route(Hello, queue=queue_name)
        try:
            job_id = await facade.push(Hello(n=1))
            assert job_id, driver
            read = facade.driver()
            if isinstance(read, FailoverDriver):  # its down entry cannot be counted
                read = read.connections[1][1]
            stored = 0 if driver in ("sync", "null") else 1
            assert await read.size(queue_name) == stored, driver
            assert await read.clear(queue_name) == stored, driver
        finally:
            await facade.close()
    assert RUNS == [1]  # the sync push ran its handler


def test_nothing_set_is_postgres_A12() -> None:
    facade = _boot({})
    driver = facade.driver()
    assert isinstance(driver, BackendDriver)
    assert (facade.driver_name(), driver.url, driver.schema) == ("postgres", None, "lane")
    assert driver.visibility_timeout == timedelta(seconds=60)


def test_an_unknown_driver_warns_and_uses_memory_CONN_2(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lane_pg.facade"):
        facade = _boot({"LANE_PG_DRIVER": "rabbit"})
    assert facade.driver_name() == "memory"
    assert "'rabbit'" in caplog.text
    assert "postgres, database, redis, memory, local, sync, null, failover" in caplog.text


def test_an_unknown_driver_fails_boot_in_production_CONN_2() -> None:
    _refused(
        {"LANE_PG_DRIVER": "rabbit", "LANE_PG_ENV": "production"},
        r"'rabbit'.*production.*postgres, database",
    )


def test_a_worker_never_falls_back_to_memory_A12() -> None:
    _refused({"LANE_PG_DRIVER": "rabbit"}, "a worker never runs on memory", for_worker=True)
    with pytest.raises(ConfigurationError, match="worker"):
        resolve_connection(
            None, env={"LANE_PG_DRIVER": "rabbit"}, facade=_facade(), for_worker=True
        )


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"LANE_PG_DRIVER": "redis", "LANE_PG_REDIS_URL": "postgresql://x/y"}, "redis:// URL"),
        ({"LANE_PG_SCHEMA": "bad-name"}, "schema"),
        ({"LANE_PG_DSN": "mysql://x@y/z"}, "invalid DSN"),
        ({"LANE_PG_VISIBILITY_TIMEOUT_SECS": "soon"}, "VISIBILITY_TIMEOUT"),
        ({"LANE_PG_VISIBILITY_TIMEOUT_SECS": "0"}, "VISIBILITY_TIMEOUT"),
        ({"LANE_PG_VISIBILITY_TIMEOUT_SECS": "-5"}, "VISIBILITY_TIMEOUT"),
        ({"LANE_PG_VISIBILITY_TIMEOUT_SECS": "nan"}, "VISIBILITY_TIMEOUT"),
    ],
)
def test_driver_settings_fail_boot_CONN_3(env: dict[str, str], match: str) -> None:
    _refused(env, match)


def test_the_visibility_timeout_reaches_every_driver_CONN_3() -> None:
    facade = _boot(
        {
            "LANE_PG_DRIVER": "failover",
            "LANE_PG_FAILOVER_CONNECTIONS": "postgres,memory",
            "LANE_PG_VISIBILITY_TIMEOUT_SECS": "12.5",
            "LANE_PG_SCHEMA": "lane_x",
        }
    )
    failover = facade.driver()
    assert isinstance(failover, FailoverDriver)
    assert failover.visibility_timeout == timedelta(seconds=12.5)
    for _, driver in failover.connections:
        assert isinstance(driver, BackendDriver)
        assert driver.visibility_timeout == timedelta(seconds=12.5)
    assert failover.connections[0][1].schema == "lane_x"  # type: ignore[attr-defined]


def test_connections_register_one_per_entry_CONN_10_CONN_11() -> None:
    facade = _boot({"LANE_PG_DSN": DSN_A, "LANE_PG_CONNECTIONS": "memory, database,null,sync"})
    assert facade.connection_names() == ["postgres", "memory", "null", "sync"]
    assert facade.connection("postgres") is facade.driver()  # the alias of the default
    assert facade.connection("memory").driver_name == "memory"
    assert isinstance(facade.connection("null"), NullDriver)
    with pytest.raises(ConfigurationError, match="'nope'"):
        resolve_connection(
            "nope", env={"LANE_PG_DSN": DSN_A, "LANE_PG_CONNECTIONS": "memory"}, facade=_facade()
        )
    _, name, driver = resolve_connection(
        "memory", env={"LANE_PG_CONNECTIONS": "memory"}, facade=_facade()
    )
    assert (name, driver.driver_name) == ("memory", "memory")


async def test_an_alias_reaches_the_same_store_CONN_11() -> None:
    facade = _boot({"LANE_PG_DRIVER": "memory", "LANE_PG_CONNECTIONS": "memory,null"})
    facade.route(Hello, connection="memory")
    await facade.push(Hello())
    assert await facade.connection("memory").size("boot") == 1
    assert await facade.size("boot") == 1  # pushed under the alias, seen on the default


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ("memory,rabbit", "unknown driver 'rabbit'"),
        ("memory,,null", "none empty"),
        (",", "none empty"),
        ("memory,memory", "'memory' is given twice"),
        ("postgres,database", "'postgres' is given twice"),
    ],
)
def test_a_bad_connection_entry_fails_boot_everywhere_CONN_10(entries: str, match: str) -> None:
    _refused({"LANE_PG_CONNECTIONS": entries}, match)  # not production: still an error


def test_failover_labels_and_their_own_variables_FOV_2_FOV_3() -> None:
    facade = _boot(
        {
            "LANE_PG_DRIVER": "failover",
            "LANE_PG_FAILOVER_CONNECTIONS": "pg-a:postgres, pg-b:database, spare:memory",
            "LANE_PG_FAILOVER_PG_A_DSN": DSN_A,
            "LANE_PG_FAILOVER_PG_B_DSN": DSN_B,
            "LANE_PG_FAILOVER_PG_B_SCHEMA": "lane_b",
        }
    )
    failover = facade.driver()
    assert isinstance(failover, FailoverDriver)
    assert failover.labels == ["pg-a", "pg-b", "spare"]
    stores = [
        (driver.url, driver.schema)
        for _, driver in failover.connections
        if isinstance(driver, BackendDriver) and driver.driver_name == "postgres"
    ]
    assert stores == [(DSN_A, "lane"), (DSN_B, "lane_b")]


def test_a_failover_entry_shares_the_store_of_another_connection_CONN_11() -> None:
    facade = _boot(
        {
            "LANE_PG_DSN": DSN_A,
            "LANE_PG_CONNECTIONS": "failover",
            "LANE_PG_FAILOVER_CONNECTIONS": "postgres,memory",
        }
    )
    failover = facade.connection("failover")
    assert isinstance(failover, FailoverDriver)
    assert failover.connections[0][1] is facade.driver()  # one binding per store


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({}, "needs LANE_PG_FAILOVER_CONNECTIONS"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": " "}, "needs LANE_PG_FAILOVER_CONNECTIONS"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": "memory,failover"}, "cannot contain failover"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": "memory,rabbit"}, "unknown driver 'rabbit'"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": "memory,x:rabbit"}, "unknown driver 'rabbit'"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": "a:redis,b:redis"}, "are the same store"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": "memory,,null"}, "none empty"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": ":memory"}, "has no label"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": "a:memory,a:null"}, "'a' and 'a' read the same"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": "pg-a:memory,pg_a:null"}, "read the same variables"),
        ({"LANE_PG_FAILOVER_CONNECTIONS": "a:local,b:local"}, "'a' and 'b' are the same store"),
        (
            {"LANE_PG_FAILOVER_CONNECTIONS": "pg-a:postgres,pg-b:postgres"},
            "'pg-a' and 'pg-b' are the same store",
        ),
        (
            {
                "LANE_PG_FAILOVER_CONNECTIONS": "pg-a:postgres,pg-b:postgres",
                "LANE_PG_FAILOVER_PG_A_DSN": DSN_A,
                "LANE_PG_FAILOVER_PG_B_DSN": DSN_A.replace("postgresql", "postgres"),
            },
            "same store",
        ),
        (
            {
                "LANE_PG_FAILOVER_CONNECTIONS": "pg-a:postgres,pg-b:postgres",
                "LANE_PG_FAILOVER_PG_A_DSN": DSN_A,
                "LANE_PG_FAILOVER_PG_B_SCHEMA": "bad-name",
            },
            "schema",
        ),
    ],
)
def test_each_failover_misconfiguration_fails_boot_FOV_2_CONN_11(
    env: dict[str, str], match: str
) -> None:
    _refused({"LANE_PG_DRIVER": "failover", **env}, match)


def test_the_redis_driver_names_its_server_and_prefix_CONN_2() -> None:
    facade = _boot(
        {"LANE_PG_DRIVER": "redis", "LANE_PG_REDIS_URL": "redis://cache:6379/1?prefix=jobs"}
    )
    driver = facade.driver()
    assert driver.driver_name == "redis"
    assert driver.store_key == ("redis", "redis://cache:6379/1", "jobs")


def test_the_redis_namespace_variable_sets_the_key_prefix_CONN_3() -> None:
    facade = _boot(
        {
            "LANE_PG_DRIVER": "redis",
            "LANE_PG_REDIS_URL": "redis://cache:6379/1?prefix=jobs",
            "LANE_PG_REDIS_NAMESPACE": "billing",
        }
    )
    assert facade.driver().store_key == ("redis", "redis://cache:6379/1", "billing")


def test_the_redis_driver_takes_a_cluster_url() -> None:
    facade = _boot(
        {
            "LANE_PG_DRIVER": "redis",
            "LANE_PG_REDIS_URL": "redis+cluster://node1:7000",
            "LANE_PG_REDIS_NAMESPACE": "billing",
        }
    )
    assert facade.driver().store_key == ("redis", "redis+cluster://node1:7000", "billing")
