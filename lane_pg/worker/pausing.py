"""Pause state read outside the claim (PAUSE-10, PAUSE-11).

On PostgreSQL and memory a queue's pause is checked inside the claim (``claim_jobs`` skips
paused queues), so the worker reads nothing. A driver whose pauses live elsewhere (a
settings store, a cache: seed 003's pause keys) gives the worker a ``PauseState``, which it
asks before each claim; the queues it names paused are left out of that claim.

Fail open (PAUSE-11): when the store cannot be read, the worker claims as if nothing were
paused and logs a warning, once per outage: a broken store must not stop the fleet.
With pausing disabled (``WorkerConfig.pausable`` false, ``LANE_PG_PAUSABLE=false``) the
store is never read (PAUSE-10).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from lane_pg.types import QueueDemand

log = logging.getLogger("lane_pg.worker")


@runtime_checkable
class PauseState(Protocol):
    """Where a driver keeps its queue pauses, when they are not in the claim."""

    async def paused_queues(self, queues: Sequence[str]) -> Collection[str]:
        """The paused ones among ``queues``."""
        ...


class PauseFilter:
    """Drops the paused queues from a claim's demands; fails open."""

    def __init__(self, state: PauseState) -> None:
        self._state = state
        self._failing = False

    async def unpaused(self, demands: list[QueueDemand]) -> list[QueueDemand]:
        try:
            paused = await self._state.paused_queues([demand.queue for demand in demands])
        except Exception as exc:
            if not self._failing:
                log.warning(
                    "pause state unreadable (%s: %s): claiming as if no queue were paused",
                    type(exc).__name__,
                    exc,
                )
            self._failing = True
            return demands
        if self._failing:
            log.warning("pause state readable again")
            self._failing = False
        if not paused:
            return demands
        return [demand for demand in demands if demand.queue not in paused]
