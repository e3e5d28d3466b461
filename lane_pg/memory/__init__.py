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
from lane_pg.memory.add import _Adding
from lane_pg.memory.cleanup import _Cleaning
from lane_pg.memory.dedup import _Deduplicating
from lane_pg.memory.flow import _Flowing
from lane_pg.memory.follow import _Following
from lane_pg.memory.leader import MemoryLeader
from lane_pg.memory.limits import MemoryLimits
from lane_pg.memory.logs import MemoryLogs
from lane_pg.memory.maintain import _Maintaining
from lane_pg.memory.manage import _Managing
from lane_pg.memory.metrics import _Metrics
from lane_pg.memory.queue import _QueueSettings
from lane_pg.memory.read import _Reading
from lane_pg.memory.repeat import _Repeating
from lane_pg.memory.runs import MemoryRuns

__all__ = ["MemoryBackend", "MemoryLeader", "open_memory"]


class MemoryBackend(
    _Adding,
    _Deduplicating,
    _Repeating,
    _Flowing,
    _Maintaining,
    _QueueSettings,
    _Managing,
    _Cleaning,
    _Reading,
    _Metrics,
    _Following,
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
                "leader": self._leader_implementation(),
                "logs": MemoryLogs(self),
                "runs": MemoryRuns(self),
                "limits": MemoryLimits(self),
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
