"""What the failed-job commands (``failed``, ``retry``, ``forget``, ``flush``; CLI-8..11)
share: the facade and store they work on, and their common options.

``open_failed_jobs`` is the one place that decides which store and which connection the
commands use: the backend of ``--dsn``/``--schema`` (``$LANE_PG_DSN``), made the default
connection of a fresh facade under ``--connection`` (default: both names the database gets,
``postgres`` from ``bootstrap_from_env`` and ``postgresql`` from ``lane_pg.App``), with the
failed-job store that driver binds at boot (FAIL-8: PostgreSQL's database store). A retry therefore
pushes to the database the command was pointed at; a record that failed on another
connection name is refused. With the memory driver (``memory://``) no store is bound and
the commands exit 1 saying so; a store a memory app binds itself lives in that app's
process, and a retry from this process would land in this process's own memory (CLI-11),
never in the workers'.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

from lane_pg.backend import backend_kind, resolve_url
from lane_pg.cli.common import CommandError, add_connection_arguments, parse_duration
from lane_pg.cli.pause import open_backend
from lane_pg.facade import BackendDriver, JobRegistry, QueueFacade
from lane_pg.facade.failed import default_failed_store
from lane_pg.failed import FailedJobStore

DRIVER_NAME = "postgres"

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
        help="the name your app gives this database's connection, when it is not the"
        " default one: a failed record remembers the connection its job was pushed on, and"
        " a retry pushes only records of this name (default: postgres and postgresql, the"
        " names lane_pg gives a database connection)",
    )


@asynccontextmanager
async def open_failed_jobs(
    dsn_option: str | None, schema: str, connection: str | None
) -> AsyncIterator[tuple[QueueFacade, FailedJobStore]]:
    """The facade (default connection: the ``--dsn`` backend) and its failed-job store;
    ``CommandError`` when the driver binds none (CLI-8)."""
    dsn = resolve_url(dsn_option)
    kind = backend_kind(dsn)
    async with open_backend(dsn, schema) as backend:
        store = default_failed_store(backend)
        if store is None:
            raise CommandError(NO_STORE.format(driver=kind))
        facade = QueueFacade(registry=JobRegistry())
        driver = BackendDriver(backend, DRIVER_NAME)
        facade.set_driver(driver, name=connection or DRIVER_NAME)
        if connection is None:
            # The other label the same database gets: lane_pg.App names its connection by
            # the URL's kind ("postgresql"), bootstrap_from_env by the driver ("postgres").
            facade.register_connection(kind, driver)
        facade.set_failed_store(store)
        yield facade, store


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
