"""``python -m lane_pg limits QUEUE``: show or set a queue's claim limits (RATE-2, RATE-7).

``--rate N/DURATION`` stores the queue's shared claim rate limit: at most N jobs claimed
in any window of DURATION, over every worker (``100/1s``, ``5/500ms``, ``60/1m``; ``1h``,
``1d`` too; a duration without a number means one unit, ``10/s``). ``--max-active N``
caps the jobs of the queue active at once over every worker. ``none`` removes one of
them; ``--clear`` removes both. Without options the command prints the queue's limits.
Setting creates the queue when it is missing, as ``lane.set_claim_rate_limit`` does. Bad
input is refused before connecting, and nothing changes.
"""

from __future__ import annotations

import argparse
import asyncio
import re

from lane_pg.cli.common import (
    DURATION_PATTERN,
    CommandError,
    add_connection_arguments,
    duration_of,
    warn_if_new_queue,
)
from lane_pg.cli.pause import open_backend
from lane_pg.errors import InvalidOptions
from lane_pg.types import JobRateLimit, validate_queue_name

HELP = "show or set a queue's claim rate limit and max active jobs"

NONE = "none"
MAX_COUNT = 2**31 - 1  # integer columns
_RATE = re.compile(r"(?P<max>[0-9]+)/" + DURATION_PATTERN)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="queue name")
    parser.add_argument(
        "--rate",
        default=None,
        metavar="N/DURATION|none",
        help="at most N claims in any window of DURATION (ms, s, m, h or d), e.g. 100/1s or"
        " 5/500ms; none removes the limit",
    )
    parser.add_argument(
        "--max-active",
        default=None,
        metavar="N|none",
        help="at most N jobs of the queue active at once; none removes the cap",
    )
    parser.add_argument("--clear", action="store_true", help="remove both limits")
    add_connection_arguments(parser)


def parse_rate(text: str, option: str = "--rate") -> JobRateLimit | None:
    """``N/DURATION`` (a ``JobRateLimit``) or ``none`` (None: no limit); errors name
    ``option``."""
    value = text.strip()
    if value.lower() == NONE:
        return None
    match = _RATE.fullmatch(value)
    if match is None:
        raise CommandError(
            f"{option} {text!r}: expected N/DURATION such as 100/1s, 5/500ms or 60/1m, or {NONE!r}"
        )
    duration = duration_of(match, option, text)
    try:
        return JobRateLimit(int(match["max"]), duration)
    except InvalidOptions as exc:
        raise CommandError(f"{option} {text!r}: {exc}") from exc


def parse_max_active(text: str) -> int | None:
    """``N`` (1 and up) or ``none``."""
    value = text.strip()
    if value.lower() == NONE:
        return None
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_COUNT:
        raise CommandError(
            f"--max-active {text!r}: expected a count (1 to {MAX_COUNT}) or {NONE!r}"
        )
    return int(value)


def describe(queue: str, rate: JobRateLimit | None, max_active: int | None) -> str:
    """``queue 'q': rate 100/1s, max active 5`` (``none`` for a missing limit)."""
    shown_rate = NONE if rate is None else str(rate)
    shown_max = NONE if max_active is None else str(max_active)
    return f"queue {queue!r}: rate {shown_rate}, max active {shown_max}"


async def show_or_set(
    queue: str,
    dsn: str | None,
    schema: str,
    rate: str | None = None,
    max_active: str | None = None,
    clear: bool = False,
) -> str:
    """Apply the given changes (if any) and return the line describing the queue's limits."""
    validate_queue_name(queue)
    if clear and (rate is not None or max_active is not None):
        raise CommandError("--clear removes both limits: give it without --rate or --max-active")
    # Everything is parsed before connecting, so bad input changes nothing.
    wanted_rate = None if rate is None else parse_rate(rate)
    wanted_max = None if max_active is None else parse_max_active(max_active)
    changing = clear or rate is not None or max_active is not None
    async with open_backend(dsn, schema) as backend:
        if changing:
            await warn_if_new_queue(backend, queue, "limits set ahead of time")
        if clear or (rate is not None and wanted_rate is None):
            await backend.limits.clear_claim_rate_limit(queue)
        elif wanted_rate is not None:
            await backend.limits.set_claim_rate_limit(queue, wanted_rate)
        if clear or (max_active is not None and wanted_max is None):
            await backend.limits.clear_max_active_jobs(queue)
        elif wanted_max is not None:
            await backend.limits.set_max_active_jobs(queue, wanted_max)
        line = describe(
            queue,
            await backend.limits.get_claim_rate_limit(queue),
            await backend.limits.get_max_active_jobs(queue),
        )
    return f"lane_pg: set {line}" if changing else f"lane_pg: {line}"


def run(args: argparse.Namespace) -> int:
    print(
        asyncio.run(
            show_or_set(args.queue, args.dsn, args.schema, args.rate, args.max_active, args.clear)
        )
    )
    return 0
