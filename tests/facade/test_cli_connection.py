"""``resolve_connection``: the one way a command turns ``--connection NAME`` into a driver."""

from __future__ import annotations

import pytest

from lane_pg.cli.common import resolve_connection
from lane_pg.errors import ConfigurationError
from lane_pg.facade import BackendDriver, JobRegistry, QueueFacade
from lane_pg.memory import MemoryBackend


def _facade() -> QueueFacade:
    return QueueFacade(registry=JobRegistry())


def test_no_name_is_the_default_connection() -> None:
    facade, name, driver = resolve_connection(
        None, env={"LANE_PG_DRIVER": "memory"}, facade=_facade()
    )
    assert (name, driver.driver_name) == ("memory", "memory")
    assert driver is facade.driver()


def test_the_default_is_postgres_and_opens_nothing() -> None:
    # A DSN to a closed port: resolving must not connect (no I/O before the command runs).
    env = {"LANE_PG_DSN": "postgresql://postgres@127.0.0.1:1/nowhere"}
    _, name, driver = resolve_connection("postgres", env=env, facade=_facade())
    assert name == "postgres"
    assert isinstance(driver, BackendDriver)
    assert driver.url == env["LANE_PG_DSN"]


def test_a_registered_connection_by_name() -> None:
    facade = _facade()
    reports = BackendDriver(MemoryBackend(), "memory")
    facade.register_connection("reports", reports)
    _, name, driver = resolve_connection("reports", env={"LANE_PG_DRIVER": "memory"}, facade=facade)
    assert (name, driver) == ("reports", reports)
    assert driver is not facade.driver()


def test_an_unknown_name_is_a_command_error() -> None:
    with pytest.raises(ConfigurationError, match=r"'nope'.*known: memory"):
        resolve_connection("nope", env={"LANE_PG_DRIVER": "memory"}, facade=_facade())
