"""``PostgresLeader``: the workers' maintenance leader as a lease in ``lane.leaders``.

Each call is one ``SELECT lane.acquire_leadership(...)`` / ``lane.resign_leadership(...)``
(the rules are in sql/functions/55_leader.sql). The leader used to be the holder of a
session advisory lock on its LISTEN connection: a process frozen by SIGSTOP keeps its
session and so its lock, and nobody recovered stalled jobs. A lease lapses when its holder
stops renewing it, whatever became of the holder's connections.
"""

from __future__ import annotations

import json
from typing import Any

from lane_pg.backend.leader import Leader
from lane_pg.postgres.calls import Entity, Rows, nothing, statement, value
from lane_pg.types import WorkerInfo, to_millis


def _workers(rows: Rows) -> list[WorkerInfo]:
    return [
        WorkerInfo(
            id=row["id"],
            hostname=row["hostname"],
            pid=row["pid"],
            queues=tuple(row["queues"]),
            started_at=row["started_at"],
            heartbeat_at=row["heartbeat_at"],
            leader=row["leader"],
            meta=json.loads(row["meta"]),
        )
        for row in rows
    ]


def _meta(meta: dict[str, Any] | None) -> str | None:
    return None if meta is None else json.dumps(meta)


class PostgresLeader(Entity, serves=Leader):
    acquire_leadership = statement(
        "SELECT lane.acquire_leadership($1, $2, $3, $4)",
        result=value,
        lease=lambda lease: to_millis(lease, "lease"),
    )
    resign_leadership = statement("SELECT lane.resign_leadership($1, $2)", result=value)
    worker_heartbeat = statement(
        "SELECT lane.worker_heartbeat($1, $2, $3, $4, $5::jsonb, $6)",
        result=nothing,
        meta=_meta,
    )
    forget_worker = statement("SELECT lane.forget_worker($1)", result=value)
    list_workers = statement(
        "SELECT id, hostname, pid, queues, started_at, heartbeat_at, leader, meta::text AS meta"
        " FROM lane.list_workers($1, $2, $3)",
        result=_workers,
        stale_after=lambda stale_after: to_millis(stale_after, "stale_after"),
    )
