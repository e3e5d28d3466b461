"""``python -m lane_pg stats``: jobs per queue and state, from the ``lane.queue_stats`` view
(on Redis, from each queue's counts through the backend contract).

One row per queue known to the schema (a queue exists once a job was added to it or it was
paused), sorted by name. ``--queue NAME`` (repeatable) limits the output to those queues;
a named queue the schema does not know shows as all zeros. ``--json`` prints one JSON
object per queue and line instead of the table, with the view's column names.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from lane_pg.backend import JobQueueBackend
from lane_pg.cli.common import add_connection_arguments
from lane_pg.cli.pause import open_backend
from lane_pg.postgres.schema import render_sql
from lane_pg.types import validate_queue_name

HELP = "show how many jobs each queue has in each state"

# (view column, table heading); the headings use the state names.
COUNT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("waiting", "waiting"),
    ("delayed", "delayed"),
    ("active", "active"),
    ("waiting_children", "waiting-children"),
    ("completed", "completed"),
    ("failed", "failed"),
)

_ALL_SQL = "SELECT * FROM lane.queue_stats"
_SOME_SQL = "SELECT * FROM lane.queue_stats WHERE queue = ANY($1::text[])"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--queue",
        action="append",
        default=None,
        metavar="NAME",
        help="only this queue (repeat for several); default: every queue",
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per queue and line, no table"
    )
    add_connection_arguments(parser)


async def fetch_stats(
    dsn: str | None, schema: str, queues: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The rows of ``<schema>.queue_stats`` (only ``queues`` when given), sorted by queue.

    Each row has ``queue``, ``paused`` and the six counts as Python values.
    """
    wanted = None if queues is None else sorted({validate_queue_name(q) for q in queues})
    async with open_backend(dsn, schema) as opened:
        if opened.kind == "postgres":
            from lane_pg.postgres.backend import PostgresBackend  # connect() loaded it

            assert isinstance(opened, PostgresBackend)
            sql, args = (_ALL_SQL, ()) if wanted is None else (_SOME_SQL, (wanted,))
            records: Sequence[Mapping[str, Any]] = await opened.pool.fetch(
                render_sql(sql, opened.schema), *args
            )
        else:
            records = await _contract_stats(opened, wanted)
    rows = {
        record["queue"]: {
            "queue": record["queue"],
            "paused": bool(record["paused"]),
            **{column: int(record[column]) for column, _ in COUNT_COLUMNS},
        }
        for record in records
    }
    for queue in wanted or ():
        rows.setdefault(
            queue,
            {"queue": queue, "paused": False, **{column: 0 for column, _ in COUNT_COLUMNS}},
        )
    return [rows[name] for name in sorted(rows)]


async def _contract_stats(
    backend: JobQueueBackend, wanted: Sequence[str] | None
) -> list[dict[str, Any]]:
    """The view's rows read through the contract, on a backend without SQL (Redis): one
    queue at a time, so not one snapshot of every queue."""
    names = sorted(await backend.queues.list_queues()) if wanted is None else wanted
    records = []
    for queue in names:
        stats = await backend.reads.get_queue_stats(queue)
        counts = {state.replace("-", "_"): n for state, n in stats.counts.items()}
        records.append(
            {
                "queue": queue,
                "paused": stats.paused,
                **{column: counts.get(column, 0) for column, _ in COUNT_COLUMNS},
            }
        )
    return records


def format_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The aligned table: queue names left-aligned, everything else right-aligned."""
    headings = ["queue", "paused", *(heading for _, heading in COUNT_COLUMNS)]
    cells = [
        [
            str(row["queue"]),
            "yes" if row["paused"] else "no",
            *(str(row[column]) for column, _ in COUNT_COLUMNS),
        ]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [headings, *cells]) for i in range(len(headings))]

    def line(values: Sequence[str]) -> str:
        first = values[0].ljust(widths[0])
        rest = (value.rjust(width) for value, width in zip(values[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    return [line(headings), *(line(values) for values in cells)]


def run(args: argparse.Namespace) -> int:
    rows = asyncio.run(fetch_stats(args.dsn, args.schema, args.queue))
    if args.json:
        for row in rows:
            print(json.dumps(row, separators=(", ", ": ")))
    else:
        print("\n".join(format_table(rows)))
    return 0
