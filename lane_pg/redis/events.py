"""A queue's event stream on Redis (EVS-2, EVS-7): the stream ``<tag>:events``, whose entry
ids are ``0-<n>`` for event id n (``lua/includes/events.lua``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from lane_pg.backend.events import (
    MAX_EVENT_ID,
    ReadEvents,
    RecordAction,
    SubscribeEvents,
    action_event_data,
    event_bound,
    subscription_arguments,
)
from lane_pg.redis.backend import RedisEntity
from lane_pg.redis.rows import dump, from_ms
from lane_pg.types import QueueEvent


def _events(queue: str, entries: list[Any], after: int = 0) -> list[QueueEvent]:
    """The events of stream entries whose id is above ``after``. An entry with field ``w``
    holds two: its ``added`` (id n) and the job's ``waiting`` (id n + 1, no data), which
    a one-job add writes as one entry (lane_emit_added_waiting)."""
    events = []
    for entry_id, fields in entries:
        n = int(entry_id.decode().split("-")[1])
        job = fields[b"j"].decode() or None
        created_at = from_ms(fields[b"t"].decode())
        if n > after:
            data = json.loads(fields[b"d"])
            events.append(QueueEvent(n, queue, fields[b"e"].decode(), job, data, created_at))
        if b"w" in fields and n + 1 > after:
            events.append(QueueEvent(n + 1, queue, "waiting", job, {}, created_at))
    return events


class RedisEvents(RedisEntity):
    """The ``events`` handle on Redis."""

    async def read_events(self, args: ReadEvents) -> list[QueueEvent]:
        low, high = event_bound(args.start), event_bound(args.end)
        if args.limit <= 0 or high < max(low, 1) or low > MAX_EVENT_ID:
            return []
        key = self._backend.keys(args.queue).events
        low = max(low, 1)
        # From the entry before `low`: a two-event entry there may hold event `low`; one
        # entry more than the limit, since an entry may hold two.
        entries: Any = await self._backend.client.xrange(
            key, f"0-{low - 1}", f"0-{min(high, MAX_EVENT_ID)}", count=args.limit + 1
        )
        events = [e for e in _events(args.queue, entries, low - 1) if e.id <= high]
        return events[: args.limit]

    async def record_action(self, args: RecordAction) -> int | None:
        data = action_event_data(args)
        answer = await self._backend.call(
            "record_action", args.queue, {"job_id": args.job_id, "data": dump(data)}
        )
        return None if answer is None else int(answer)

    def subscribe_events(self, args: SubscribeEvents) -> AsyncIterator[QueueEvent]:
        after, interval = subscription_arguments(args.queue, args.from_id, args.poll_interval)
        return self._follow(args.queue, after, interval)

    async def _follow(
        self, queue: str, after: int | None, interval: float
    ) -> AsyncIterator[QueueEvent]:
        client = self._backend.client
        key = self._backend.keys(queue).events
        if after is None:  # "$": the end of the stream as iteration starts
            last: Any = await client.xrevrange(key, count=1)
            after = _events(queue, last)[-1].id if last else 0
        after = min(after, MAX_EVENT_ID)  # no event id is larger (nor is a stream id)
        while True:
            # From entry `after` itself: a two-event entry there may hold event after + 1.
            entries: Any = await client.xrange(key, f"0-{after}" if after else "-", "+", count=500)
            events = _events(queue, entries, after)
            if not events:
                await asyncio.sleep(interval)
                continue
            for event in events:
                after = event.id
                yield event
