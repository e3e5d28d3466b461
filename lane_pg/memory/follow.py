"""Live event subscription (EVS-7): an async iterator over a queue's event list, woken by
``_Store._emit``."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import replace

from lane_pg.backend.events import DEFAULT_EVENT_POLL_INTERVAL, subscription_arguments
from lane_pg.memory._store import _Store
from lane_pg.types import QueueEvent


class _Following(_Store):
    """``subscribe_events`` over the store's event lists."""

    def subscribe_events(
        self,
        queue: str,
        from_id: str | int = "$",
        *,
        poll_interval: float = DEFAULT_EVENT_POLL_INTERVAL,
    ) -> AsyncIterator[QueueEvent]:
        # The memory backend is woken by its writes: it never polls.
        after, _ = subscription_arguments(queue, from_id, poll_interval)
        return self._follow(queue, after)

    async def _follow(self, queue: str, after: int | None) -> AsyncIterator[QueueEvent]:
        if after is None:  # "$": the end of the stream as iteration starts, as in SQL
            after = self._last_event_id
        while True:
            q = self._queues.get(queue)
            events = [] if q is None else q.events
            # Ids increase along the list (trimming only cuts its head).
            fresh = events[bisect.bisect_right(events, after, key=lambda e: e.id) :]
            if not fresh:
                waiter = asyncio.get_running_loop().create_future()
                self._event_waiters.append(waiter)
                try:
                    await waiter
                finally:
                    with contextlib.suppress(ValueError):
                        self._event_waiters.remove(waiter)
                continue
            for event in fresh:
                after = event.id
                yield replace(event, data=copy.deepcopy(event.data))
