"""``python -m lane_pg pause QUEUE | --all [--connection NAME]``: stop workers claiming
from one queue, or from every queue of the connection (PAUSE-1, PAUSE-4, CLI-7).

``lane.pause_queue`` sets the queue's ``paused`` flag and writes a ``paused`` event; jobs
already claimed run to the end, nothing new is claimed. ``--all`` is ``lane.pause_all``, the
connection-wide switch. ``python -m lane_pg resume QUEUE | --all`` (alias ``continue``;
module ``lane_pg.cli.resume``) lifts them; ``resume --all`` leaves queues paused one by one
paused. All are idempotent; an unknown queue is created (as ``lane.add_job`` would). An
unknown ``--connection`` exits 2 before anything is opened. With
``LANE_PG_PAUSABLE=false`` (workers ignore pauses, PAUSE-10) ``pause`` refuses to run and
exits 1; ``resume`` still works, so a queue paused before can be let go.

This module also holds ``open_backend``, the connection step shared by the commands that
talk to a backend (pause, resume, stats, retention, events, limits): ``lane_pg.backend.connect``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from lane_pg.backend import JobQueueBackend, backend_kind, connect, resolve_url
from lane_pg.cli.common import (
    CommandError,
    add_connection_arguments,
    add_connection_name_argument,
    connection_env,
    describe_error,
    redact,
    resolve_connection,
    warn_if_new_queue,
)
from lane_pg.errors import ConfigurationError, LaneError
from lane_pg.postgres.schema import validate_schema_name
from lane_pg.types import validate_queue_name
from lane_pg.worker.config import PAUSABLE_ENV, pausing_enabled

HELP = "pause a queue (or --all): workers finish what they hold and claim nothing more from it"

CONNECT_TIMEOUT_SECONDS = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", nargs="?", help="queue name")
    parser.add_argument(
        "--all", action="store_true", help="every queue of the connection (the global switch)"
    )
    add_connection_name_argument(parser)
    add_connection_arguments(parser)


def _cannot_connect(exc: BaseException) -> bool:
    """A refused, unreachable or misnamed server, authentication, an unknown database:
    the driver's errors, whose classes are looked up only if the driver was loaded (no
    import here)."""
    if isinstance(exc, OSError):
        return True
    asyncpg = sys.modules.get("asyncpg")
    return asyncpg is not None and isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError)


@asynccontextmanager
async def open_backend(
    dsn_option: str | None, schema: str, *, max_size: int = 1
) -> AsyncIterator[JobQueueBackend]:
    """A backend of ``max_size`` connections (one by default) for ``--dsn``/``--schema``
    (``lane_pg.backend.connect``), closed on exit.

    A URL no backend opens, or one whose parts the driver cannot read, is a
    ``ConfigurationError`` (usage, exit 2); an unreachable server or a missing schema a
    ``CommandError`` or ``SchemaVersionMismatch`` (exit 1, one line).
    """
    schema = validate_schema_name(schema)
    dsn = resolve_url(dsn_option)
    backend_kind(dsn)  # before connecting
    try:
        backend = await asyncio.wait_for(
            connect(dsn, schema=schema, min_size=1, max_size=max_size), CONNECT_TIMEOUT_SECONDS
        )
    except TimeoutError as exc:
        raise CommandError(
            f"cannot connect to {redact(dsn)}: no answer within {CONNECT_TIMEOUT_SECONDS:.0f}s"
        ) from exc
    except ValueError as exc:
        if isinstance(exc, LaneError):
            raise
        # The driver could not parse the URL's parts (a port that is not a number, ...).
        raise ConfigurationError(f"invalid DSN {redact(dsn)!r}: {exc}") from exc
    except Exception as exc:
        if not _cannot_connect(exc):
            raise
        raise CommandError(f"cannot connect to {redact(dsn)}: {describe_error(exc)}") from exc
    try:
        yield backend
    finally:
        await backend.close()


@asynccontextmanager
async def connection_backend(args: argparse.Namespace) -> AsyncIterator[JobQueueBackend]:
    """The backend of ``--connection`` (default: the default connection), opened for this
    command and closed on exit: PostgreSQL through ``open_backend`` (its timeout and
    one-line errors), any other backend-backed driver as it is."""
    _, name, driver = resolve_connection(args.connection, env=connection_env(args))
    from lane_pg.facade import BackendDriver

    if not isinstance(driver, BackendDriver):
        raise CommandError(f"connection {name!r} ({driver.driver_name}) has no queues to pause")
    if driver.driver_name == "postgres":
        async with open_backend(driver.url, driver.schema) as backend:
            yield backend
        return
    try:
        yield await driver.backend()
    finally:
        await driver.close()


async def set_paused_for(args: argparse.Namespace, paused: bool) -> str:
    """Pause or resume ``args.queue`` or, with ``args.all``, the whole connection; returns
    the confirmation line."""
    if args.all == (args.queue is not None):
        raise CommandError("give one QUEUE or --all")
    if args.queue is not None:
        validate_queue_name(args.queue)
    where = "" if args.connection is None else f" on connection {args.connection!r}"
    verb = "paused" if paused else "resumed"
    async with connection_backend(args) as backend:
        if args.all:
            status = await backend.queues.get_pause_status()
            await (backend.queues.pause_all() if paused else backend.queues.resume_all())
            note = ""
            if status.all_paused == paused:
                note = " (they were already paused)" if paused else " (they were not paused)"
            if not paused:
                note += "; queues paused one by one stay paused"
            return f"lane_pg: all queues {verb}{where}{note}"
        queue = args.queue
        was_paused = await backend.queues.is_queue_paused(queue)
        if paused:
            await warn_if_new_queue(backend, queue, "paused ahead of time")
            await backend.queues.pause_queue(queue)
        else:
            await backend.queues.resume_queue(queue)
    note = ""
    if was_paused == paused:
        note = " (it was already paused)" if paused else " (it was not paused)"
    return f"lane_pg: queue {queue!r} {verb}{where}{note}"


def run(args: argparse.Namespace) -> int:
    if not pausing_enabled():
        # PAUSE-10: say so instead of setting a flag every worker here ignores.
        what = "every queue" if args.all else repr(args.queue)
        raise CommandError(
            f"pausing is disabled ({PAUSABLE_ENV}=false): workers of this environment ignore"
            f" pauses, so {what} is not paused; unset {PAUSABLE_ENV} to pause"
        )
    print(asyncio.run(set_paused_for(args, paused=True)))
    return 0
