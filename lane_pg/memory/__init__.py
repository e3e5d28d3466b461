"""``MemoryBackend``: the in-process reference model of ``JobQueueBackend``.

It re-implements the rules of the ``lane.*`` stored functions in plain Python. A Hypothesis
stateful test drives it side by side with the PostgreSQL backend and compares everything
observable, so it is deterministic: time comes from the injected clock (or ``now=``) and
randomness (backoff jitter only) from the injected ``random.Random``.

Every public method runs without awaiting anything, so on one event loop each call is
atomic, like one stored-function transaction. Each validates all of its input before it
changes anything.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime

from lane_pg.backend import JobQueueBackend
from lane_pg.memory._store import _Store
from lane_pg.memory.batches import MemoryBatches
from lane_pg.memory.cleanup import MemoryCleanup
from lane_pg.memory.dedup import MemoryDedup
from lane_pg.memory.events import MemoryEvents
from lane_pg.memory.flows import MemoryFlows
from lane_pg.memory.jobs import MemoryJobs
from lane_pg.memory.leader import MemoryLeader
from lane_pg.memory.limits import MemoryLimits
from lane_pg.memory.locks import MemoryLocks
from lane_pg.memory.logs import MemoryLogs
from lane_pg.memory.maintenance import MemoryMaintenance
from lane_pg.memory.metrics import MemoryMetrics
from lane_pg.memory.queues import MemoryQueues
from lane_pg.memory.reads import MemoryReads
from lane_pg.memory.repeats import MemoryRepeats
from lane_pg.memory.runs import MemoryRuns

__all__ = ["MemoryBackend", "MemoryLeader", "open_memory"]


class MemoryBackend(_Store, JobQueueBackend):
    """Reference implementation of ``JobQueueBackend`` kept entirely in memory: the store
    (its records and shared transitions, ``_Store``) and one entity object per handle over
    it, as sql/functions/ has one file per entity."""

    kind = "memory"

    def __init__(
        self, clock: Callable[[], datetime] | None = None, rng: random.Random | None = None
    ) -> None:
        super().__init__(clock, rng)
        self._serve(
            {
                "jobs": MemoryJobs(self),
                "runs": MemoryRuns(self),
                "limits": MemoryLimits(self),
                "leader": MemoryLeader(self),
                "batches": MemoryBatches(self),
                "locks": MemoryLocks(self),
                "logs": MemoryLogs(self),
                "cleanup": MemoryCleanup(self),
                "dedup": MemoryDedup(self),
                "repeats": MemoryRepeats(self),
                "flows": MemoryFlows(self),
                "maintenance": MemoryMaintenance(self),
                "queues": MemoryQueues(self),
                "reads": MemoryReads(self),
                "events": MemoryEvents(self),
                "metrics": MemoryMetrics(self),
            },
        )

    async def close(self) -> None:
        return None


async def open_memory(url: str, **options: object) -> MemoryBackend:
    """A new, empty ``MemoryBackend`` for ``memory://`` (``lane_pg.backend.url.BACKENDS``);
    the PostgreSQL options ``connect`` passes (schema, pool size) do not apply."""
    return MemoryBackend()
