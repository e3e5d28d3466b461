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


def _event(queue: str, entry_id: bytes, fields: dict[bytes, bytes]) -> QueueEvent:
    job = fields[b"j"].decode()
    return QueueEvent(
        id=int(entry_id.decode().split("-")[1]),
        queue=queue,
        event=fields[b"e"].decode(),
        job_id=job or None,
        data=json.loads(fields[b"d"]),
        created_at=from_ms(fields[b"t"].decode()),
    )


class RedisEvents(RedisEntity):
    """The ``events`` handle on Redis."""

    async def read_events(self, args: ReadEvents) -> list[QueueEvent]:
        low, high = event_bound(args.start), event_bound(args.end)
        if args.limit <= 0 or high < max(low, 1) or low > MAX_EVENT_ID:
            return []
        key = self._backend.keys(args.queue).events
        entries: Any = await self._backend.client.xrange(
            key, f"0-{max(low, 1)}", f"0-{min(high, MAX_EVENT_ID)}", count=args.limit
        )
        return [_event(args.queue, entry_id, fields) for entry_id, fields in entries]

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
            after = int(last[0][0].decode().split("-")[1]) if last else 0
        after = min(after, MAX_EVENT_ID)  # no event id is larger (nor is a stream id)
        while True:
            entries: Any = await client.xrange(key, f"(0-{after}" if after else "-", "+", count=500)
            if not entries:
                await asyncio.sleep(interval)
                continue
            for entry_id, fields in entries:
                event = _event(queue, entry_id, fields)
                after = event.id
                yield event
