"""What the failed-job commands (``failed``, ``retry``, ``forget``, ``flush``; CLI-8..11)
share: the facade and store they work on, and their common options.

``open_failed_jobs`` is the one place that decides which store and which connections the
commands use. The facade is wired from the boot configuration, as the app's is
(``bootstrap_from_env``: ``LANE_PG_DRIVER``, ``LANE_PG_CONNECTIONS``, the failover list;
``--dsn``/``--schema`` stand for ``LANE_PG_DSN``/``LANE_PG_SCHEMA``), so a retry pushes a
record's job into the store of the connection the record names, under the same names the
app's workers used (``postgres``; ``postgresql``, the name earlier versions of
``lane_pg.App`` gave its database, is an alias of the default here, so their records still
retry). The records read are those of ``--connection`` (default: the default
connection): PostgreSQL's database store (FAIL-8). A connection with no store (memory,
sync, null) exits 1 saying so; a store a memory app binds itself lives in that app's
process, and a retry from this process would land in this process's own memory (CLI-11).
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

from lane_pg.backend import backend_kind, resolve_url
from lane_pg.backend.failed import FailedJobStore
from lane_pg.cli.common import (
    CommandError,
    add_connection_arguments,
    connection_env,
    parse_duration,
)
from lane_pg.cli.pause import open_backend
from lane_pg.errors import ConfigurationError
from lane_pg.facade import (
    BackendDriver,
    FailoverDriver,
    JobRegistry,
    QueueFacade,
    bootstrap_from_env,
)
from lane_pg.facade.failed import default_failed_store

APP_NAME = "postgresql"
"""The connection name earlier versions of ``lane_pg.App`` wrote on failed-job records
(now ``postgres``, as everywhere): accepted as an alias, never written."""

NO_STORE = (
    "no failed-job store is bound: the {driver} driver binds none (only the postgres"
    " driver does; an app on another driver binds its own with Q.set_failed_store, in"
    " its own process)"
)


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dsn``, ``--schema`` and ``--connection``."""
    add_connection_arguments(parser)
    parser.add_argument(
        "--connection",
        default=None,
        metavar="NAME",
        help="the connection whose failed-job records to use, as the boot configuration"
        " names it (LANE_PG_DRIVER, LANE_PG_CONNECTIONS; default: the default connection)",
    )


@asynccontextmanager
async def open_failed_jobs(
    dsn_option: str | None, schema: str, connection: str | None
) -> AsyncIterator[tuple[QueueFacade, FailedJobStore]]:
    """The facade wired from the boot configuration and the failed-job store of
    ``connection``; ``CommandError`` when that connection binds none (CLI-8)."""
    args = argparse.Namespace(dsn=dsn_option, schema=schema)
    facade = QueueFacade(registry=JobRegistry())
    bootstrap_from_env(facade, connection_env(args))
    driver = _store_driver(facade, connection)
    # A retry into a memory connection would land in this process's memory, and be lost
    # when it exits (CLI-11): refused with a message instead.
    facade.refuse_process_local_retries()
    if driver.driver_name != "postgres":  # memory, local: no store outside their process
        raise CommandError(NO_STORE.format(driver=driver.driver_name))
    try:
        async with open_backend(driver.url, driver.schema) as backend:
            store = default_failed_store(backend)
            if store is None:
                raise CommandError(NO_STORE.format(driver=backend_kind(resolve_url(driver.url))))
            facade.set_failed_store(store)
            default = facade.driver()
            if APP_NAME not in facade.connection_names() and default.driver_name == "postgres":
                facade.register_connection(APP_NAME, default)  # an alias (CONN-11)
            yield facade, store
    finally:
        await facade.close()


def _store_driver(facade: QueueFacade, connection: str | None) -> BackendDriver:
    """The driver whose store holds the records ``--connection`` names: a connection, or
    one connection of a failover list by its label (each keeps its own records)."""
    name = connection or facade.connection_name()
    members = {
        label: inner
        for known in facade.connection_names()
        if isinstance(bound := facade.connection(known), FailoverDriver)
        for label, inner in bound.connections
    }
    if name in facade.connection_names():
        driver = facade.connection(name)
    elif name in members:
        driver = members[name]
    else:
        known = ", ".join([*facade.connection_names(), *members]) or "none"
        raise ConfigurationError(
            f"--connection {name!r}: unknown queue connection (known: {known})"
        )
    if isinstance(driver, FailoverDriver):
        raise CommandError(
            f"connection {name!r} is a failover list: each of its connections keeps its own"
            f" failed jobs; give --connection {' or '.join(driver.labels)}"
        )
    if not isinstance(driver, BackendDriver):
        raise CommandError(NO_STORE.format(driver=driver.driver_name))
    return driver


def cutoff(duration: str | None, option: str) -> datetime | None:
    """``now - duration`` for ``--before 7d`` style options (None: no cut-off)."""
    if duration is None:
        return None
    return before_now(parse_duration(duration, option), option)


def before_now(age: timedelta, option: str) -> datetime:
    try:
        return datetime.now(UTC) - age
    except OverflowError:
        raise CommandError(f"{option}: {age} reaches before the year 1") from None
