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
from lane_pg.memory.cleanup import _Cleaning
from lane_pg.memory.dedup import _Deduplicating
from lane_pg.memory.events import MemoryEvents
from lane_pg.memory.flow import _Flowing
from lane_pg.memory.jobs import MemoryJobs
from lane_pg.memory.leader import MemoryLeader
from lane_pg.memory.logs import MemoryLogs
from lane_pg.memory.maintain import _Maintaining
from lane_pg.memory.metrics import MemoryMetrics
from lane_pg.memory.queues import MemoryQueues
from lane_pg.memory.reads import MemoryReads
from lane_pg.memory.repeat import _Repeating
from lane_pg.memory.settle import _Settling

__all__ = ["MemoryBackend", "MemoryLeader", "open_memory"]


class MemoryBackend(
    _Deduplicating,
    _Repeating,
    _Flowing,
    _Settling,
    _Maintaining,
    _Cleaning,
    JobQueueBackend,
):
    """Reference implementation of ``JobQueueBackend`` kept entirely in memory: the shared
    store (``_store``) plus one mixin per entity, as sql/functions/ has one file each."""

    kind = "memory"

    def __init__(
        self, clock: Callable[[], datetime] | None = None, rng: random.Random | None = None
    ) -> None:
        super().__init__(clock, rng)
        self._serve(
            self,
            {
                "jobs": MemoryJobs(self),
                "leader": self._leader_implementation(),
                "logs": MemoryLogs(self),
                "queues": MemoryQueues(self),
                "reads": MemoryReads(self),
                "events": MemoryEvents(self),
                "metrics": MemoryMetrics(self),
            },
        )

    def _leader_implementation(self) -> MemoryLeader:
        """What the ``leader`` handle calls: the workers of this backend elect their
        maintenance leader with it."""
        return MemoryLeader(self)

    async def close(self) -> None:
        return None


async def open_memory(url: str, **options: object) -> MemoryBackend:
    """A new, empty ``MemoryBackend`` for ``memory://`` (``lane_pg.backend.url.BACKENDS``);
    the PostgreSQL options ``connect`` passes (schema, pool size) do not apply."""
    return MemoryBackend()
