"""What a backend knows of the worker processes serving it (``Leader.list_workers``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from lane_pg.types.base import JSON


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
