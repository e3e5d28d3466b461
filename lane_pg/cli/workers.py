"""``python -m lane_pg workers [--stale-after 15s] [--json]``: the live workers of a
database, oldest first.

One tab-separated line per worker under a header: id, hostname, pid, the queues it claims
from (``*`` for a worker of every queue), when it started, how long ago it last sent a
heartbeat, and ``leader`` for the one running the maintenance (stalled recovery,
promotion, pruning). A worker sends a heartbeat every few seconds
(``WorkerConfig.heartbeat_interval``) and leaves the list when it stops; one killed
without a word drops out once its heartbeat is older than ``--stale-after``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime

from lane_pg.cli.common import add_connection_arguments, parse_duration
from lane_pg.cli.pause import open_backend
from lane_pg.types import WorkerInfo

HELP = "list the live workers: host, pid, queues, start, last heartbeat, the leader"

HEADER = "id\thostname\tpid\tqueues\tstarted_at\theartbeat\trole"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stale-after",
        default="15s",
        metavar="DURATION",
        help="a worker silent longer than this is left out (default 15s: three heartbeats)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per worker and line")
    add_connection_arguments(parser)


def queues_of(worker: WorkerInfo) -> str:
    if worker.all_queues:
        return "*"
    return ",".join(worker.queues) or "-"


def line_of(worker: WorkerInfo, now: datetime) -> str:
    age = max((now - worker.heartbeat_at).total_seconds(), 0.0)
    return (
        f"{worker.id}\t{worker.hostname or '-'}\t{worker.pid if worker.pid is not None else '-'}"
        f"\t{queues_of(worker)}\t{worker.started_at.isoformat()}\t{age:.1f}s ago"
        f"\t{'leader' if worker.leader else '-'}"
    )


def document_of(worker: WorkerInfo) -> dict[str, object]:
    return {
        "id": worker.id,
        "hostname": worker.hostname,
        "pid": worker.pid,
        "queues": list(worker.queues),
        "started_at": worker.started_at.isoformat(),
        "heartbeat_at": worker.heartbeat_at.isoformat(),
        "leader": worker.leader,
        "meta": worker.meta,
    }


async def listing(args: argparse.Namespace) -> list[str]:
    stale_after = parse_duration(args.stale_after, "--stale-after")
    async with open_backend(args.dsn, args.schema) as backend:
        workers = await backend.leader.list_workers(stale_after)
    if args.json:
        return [json.dumps(document_of(worker)) for worker in workers]
    if not workers:
        return [f"lane_pg: no worker has sent a heartbeat in the last {args.stale_after}"]
    # Ages are counted on this machine's clock against the database's heartbeat times.
    now = datetime.now(UTC)
    return [HEADER, *(line_of(worker, now) for worker in workers)]


def run(args: argparse.Namespace) -> int:
    for line in asyncio.run(listing(args)):
        print(line)
    return 0
