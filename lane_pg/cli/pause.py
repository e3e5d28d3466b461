"""``python -m lane_pg pause QUEUE``: stop workers claiming from one queue (PAUSE-1, CLI-7).

``lane.pause_queue`` sets the queue's ``paused`` flag and writes a ``paused`` event; jobs
already claimed run to the end, nothing new is claimed. ``python -m lane_pg resume QUEUE``
(module ``lane_pg.cli.resume``) calls ``lane.resume_queue``, which clears the flag and wakes
the workers. Both are idempotent; an unknown queue is created (as ``lane.add_job`` would).

This module also holds ``open_backend``, the connection step shared by the commands that
talk to the database through ``PostgresBackend`` (pause, resume, stats).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from lane_pg.cli.common import (
    CommandError,
    add_connection_arguments,
    describe_error,
    redact,
    sqlalchemy_url,
)
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.schema import validate_schema_name
from lane_pg.types import validate_queue_name

HELP = "pause a queue: workers finish what they hold and claim nothing more from it"

CONNECT_TIMEOUT_SECONDS = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="queue name")
    add_connection_arguments(parser)


@asynccontextmanager
async def open_backend(dsn_option: str | None, schema: str) -> AsyncIterator[PostgresBackend]:
    """A one-connection ``PostgresBackend`` for ``--dsn``/``--schema``, closed on exit.

    A malformed DSN is a ``ConfigurationError`` (usage, exit 2); an unreachable server or
    a missing schema a ``CommandError`` or ``SchemaVersionMismatch`` (exit 1, one line).
    """
    from lane_pg.postgres.embedded import resolve_dsn

    schema = validate_schema_name(schema)
    dsn = resolve_dsn(dsn_option)
    sqlalchemy_url(dsn)  # the same DSN check as `migrate`: a postgresql:// URL
    try:
        backend = await asyncio.wait_for(
            PostgresBackend.connect(dsn, schema=schema, min_size=1, max_size=1),
            CONNECT_TIMEOUT_SECONDS,
        )
    except TimeoutError as exc:
        raise CommandError(
            f"cannot connect to {redact(dsn)}: no answer within {CONNECT_TIMEOUT_SECONDS:.0f}s"
        ) from exc
    except (OSError, ValueError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        # refused, unknown host, bad URL parts, authentication, unknown database, ...
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
    print(asyncio.run(set_paused(args.queue, args.dsn, args.schema, paused=True)))
    return 0
