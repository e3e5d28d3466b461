"""``python -m lane_pg pause QUEUE``: stop workers claiming from one queue (PAUSE-1, CLI-7).

``lane.pause_queue`` sets the queue's ``paused`` flag and writes a ``paused`` event; jobs
already claimed run to the end, nothing new is claimed. ``python -m lane_pg resume QUEUE``
(module ``lane_pg.cli.resume``) calls ``lane.resume_queue``, which clears the flag and wakes
the workers. Both are idempotent; an unknown queue is created (as ``lane.add_job`` would).
With ``LANE_PG_PAUSABLE=false`` (workers ignore pauses, PAUSE-10) ``pause`` refuses to run
and exits 1; ``resume`` still works, so a queue paused before can be let go.

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
from lane_pg.cli.common import CommandError, add_connection_arguments, describe_error, redact
from lane_pg.errors import ConfigurationError, LaneError
from lane_pg.postgres.schema import validate_schema_name
from lane_pg.types import validate_queue_name
from lane_pg.worker.config import PAUSABLE_ENV, pausing_enabled

HELP = "pause a queue: workers finish what they hold and claim nothing more from it"

CONNECT_TIMEOUT_SECONDS = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="queue name")
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
async def open_backend(dsn_option: str | None, schema: str) -> AsyncIterator[JobQueueBackend]:
    """A one-connection backend for ``--dsn``/``--schema`` (``lane_pg.backend.connect``),
    closed on exit.

    A URL no backend opens, or one whose parts the driver cannot read, is a
    ``ConfigurationError`` (usage, exit 2); an unreachable server or a missing schema a
    ``CommandError`` or ``SchemaVersionMismatch`` (exit 1, one line).
    """
    schema = validate_schema_name(schema)
    dsn = resolve_url(dsn_option)
    backend_kind(dsn)  # before connecting
    try:
        backend = await asyncio.wait_for(
            connect(dsn, schema=schema, min_size=1, max_size=1), CONNECT_TIMEOUT_SECONDS
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


async def set_paused(queue: str, dsn: str | None, schema: str, paused: bool) -> str:
    """Pause or resume ``queue``; returns the confirmation line."""
    validate_queue_name(queue)
    async with open_backend(dsn, schema) as backend:
        was_paused = await backend.is_queue_paused(queue)
        if paused:
            await backend.pause_queue(queue)
        else:
            await backend.resume_queue(queue)
    verb = "paused" if paused else "resumed"
    note = ""
    if was_paused == paused:
        note = " (it was already paused)" if paused else " (it was not paused)"
    return f"lane_pg: queue {queue!r} {verb}{note}"


def run(args: argparse.Namespace) -> int:
    if not pausing_enabled():
        # PAUSE-10: say so instead of setting a flag every worker here ignores.
        raise CommandError(
            f"pausing is disabled ({PAUSABLE_ENV}=false): workers of this environment ignore"
            f" pauses, so {args.queue!r} is not paused; unset {PAUSABLE_ENV} to pause"
        )
    print(asyncio.run(set_paused(args.queue, args.dsn, args.schema, paused=True)))
    return 0
