"""A queue's event stream: ``read_events`` (EVS-2) and the live subscription (EVS-7), an
async iterator over the queue's event list woken by ``_Store._emit``."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import replace

from lane_pg.backend.events import (
    ReadEvents,
    RecordAction,
    SubscribeEvents,
    action_event_data,
    event_bound,
    subscription_arguments,
)
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import QueueEvent


class MemoryEvents(MemoryEntity):
    """``read_events`` and ``subscribe_events`` over the store's event lists."""

    async def read_events(self, args: ReadEvents) -> list[QueueEvent]:
        low, high = event_bound(args.start), event_bound(args.end)
        q = self._store._queues.get(args.queue)
        if q is None or args.limit <= 0:
            return []
        selected = [event for event in q.events if low <= event.id <= high][: args.limit]
        return [replace(event, data=copy.deepcopy(event.data)) for event in selected]

    async def record_action(self, args: RecordAction) -> int | None:
        data = action_event_data(args)
        q = self._store._queues.get(args.queue)
        if q is None or not q.record_events:
            return None
        self._store._emit(q, "action", args.job_id, data, self._store._now(None))
        return q.events[-1].id

    def subscribe_events(self, args: SubscribeEvents) -> AsyncIterator[QueueEvent]:
        after, _ = subscription_arguments(args.queue, args.from_id, args.poll_interval)
        return self._follow(args.queue, after)

    async def _follow(self, queue: str, after: int | None) -> AsyncIterator[QueueEvent]:
        if after is None:  # "$": the end of the stream as iteration starts, as in SQL
            after = self._store._last_event_id
        while True:
            q = self._store._queues.get(queue)
            events = [] if q is None else q.events
            # Ids increase along the list (trimming only cuts its head).
            fresh = events[bisect.bisect_right(events, after, key=lambda e: e.id) :]
            if not fresh:
                waiter = asyncio.get_running_loop().create_future()
                self._store._event_waiters.append(waiter)
                try:
                    await waiter
                finally:
                    with contextlib.suppress(ValueError):
                        self._store._event_waiters.remove(waiter)
                continue
            for event in fresh:
                after = event.id
                yield replace(event, data=copy.deepcopy(event.data))
