"""What a backend knows of the worker processes serving it (``Leader.list_workers``)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime

from lane_pg.types.base import JSON

LIVE_AFTER = 15.0
"""Seconds since a worker's last heartbeat within which it counts as live (three of the
worker's 5 s heartbeats): the dashboard and the Prometheus gauges use it."""

ALL_QUEUES_META = "all_queues"
"""The ``meta`` key a worker of every queue (``WorkerConfig.all_queues``) sets to true."""


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One live worker: who and where, the queues it claims from, when it started and last
    said it was alive, and whether it holds the maintenance role now."""

    id: str
    hostname: str
    pid: int | None
    queues: tuple[str, ...]
    started_at: datetime
    heartbeat_at: datetime
    leader: bool = False
    meta: dict[str, JSON] = field(default_factory=dict)

    @property
    def all_queues(self) -> bool:
        """It serves every queue of the database (its ``queues`` are then empty)."""
        return self.meta.get(ALL_QUEUES_META) is True


def workers_per_queue(workers: list[WorkerInfo], queues: list[str]) -> dict[str, int]:
    """How many of ``workers`` serve each of ``queues`` (a worker of every queue counts for
    each), zero included."""
    served: dict[str, int] = dict.fromkeys(queues, 0)
    for worker in workers:
        for queue in queues if worker.all_queues else worker.queues:
            if queue in served:
                served[queue] += 1
    return served


def backed_off(interval: float, failures: int, cap: float) -> float:
    """The wait before the next attempt of something that runs every ``interval`` seconds
    and failed ``failures`` times in a row: ``interval`` doubled per failure up to ``cap``,
    jittered. A fixed cadence kept every worker connecting several times a second while the
    database restarted (``make soak-storm``: 249 refused leadership checks from 20 workers
    in a 4 s outage)."""
    if failures <= 0:
        return interval
    return jittered(min(interval * 2.0**failures, max(cap, interval)))


def jittered(seconds: float) -> float:
    """A retry wait spread over [seconds / 2, seconds]: processes that lost the database at
    one moment (a restart) retry at different moments, not in one burst of connects."""
    return seconds * random.uniform(0.5, 1.0)
