"""``python -m lane_pg events QUEUE``: show or set whether a queue records events.

Every queue records an event row (``lane.events``) for each job transition by default
(ADD-9, CLAIM-1, FIN-1, ...). ``--record off`` stops that for the queue: adds, claims and
completions skip one INSERT each, and nothing reading the stream (``read_events``) sees
the queue's later transitions; the rows written before stay. ``--record on`` turns it
back on. Without ``--record`` the command prints the setting (``on`` for a queue that does
not exist yet). Setting creates the queue when it is missing, as ``lane.set_queue_events``
does.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.common import CommandError, add_connection_arguments
from lane_pg.cli.pause import open_backend
from lane_pg.types import validate_queue_name

HELP = "show or set whether a queue records an event row for each job transition"

CHOICES = {"on": True, "off": False}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="queue name")
    parser.add_argument(
        "--record",
        default=None,
        metavar="on|off",
        help="record the queue's events (on, the default for a queue) or not (off)",
    )
    add_connection_arguments(parser)


def parse_record(text: str) -> bool:
    """``on`` or ``off`` (any case)."""
    value = CHOICES.get(text.strip().lower())
    if value is None:
        raise CommandError(f"--record {text!r}: expected 'on' or 'off'")
    return value


def describe(queue: str, record: bool) -> str:
    """``queue 'q': record events on``."""
    return f"queue {queue!r}: record events {'on' if record else 'off'}"


async def show_or_set(queue: str, dsn: str | None, schema: str, record: str | None = None) -> str:
    """Set the flag (when ``record`` is given) and return the line describing it."""
    validate_queue_name(queue)
    wanted = None if record is None else parse_record(record)  # before connecting
    async with open_backend(dsn, schema) as backend:
        if wanted is None:
            return f"lane_pg: {describe(queue, await backend.queues.get_queue_events(queue))}"
        await backend.queues.set_queue_events(queue, record=wanted)
        stored = await backend.queues.get_queue_events(queue)
    return f"lane_pg: set {describe(queue, stored)}"


def run(args: argparse.Namespace) -> int:
    print(asyncio.run(show_or_set(args.queue, args.dsn, args.schema, args.record)))
    return 0
