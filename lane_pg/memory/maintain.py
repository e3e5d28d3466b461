"""Upkeep the workers' leader runs: stalled recovery, promotion, trimming, pruning."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from lane_pg.memory._store import _Store


class _Maintaining(_Store):
    """Upkeep the workers' leader runs: stalled recovery, promotion, trimming, pruning."""

    async def next_due_in(self, queues: Sequence[str] | None = None) -> timedelta | None:
        due = [
            job.available_at
            for q in self._selected(queues)
            for job in q.by_state["delayed"].values()
        ]
        if not due:
            return None
        return max(min(due) - self._now(None), timedelta(0))
