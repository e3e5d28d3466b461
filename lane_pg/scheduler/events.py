"""The lane scheduler's event stream (LEVT): events, a bounded emitter, subscriber streams.

``EventEmitter.emit`` never blocks and never awaits: each subscriber has its own buffer of
``capacity`` events; when a slow subscriber's buffer is full the oldest event is dropped
and counted, and the subscriber's next read returns a ``queue.events.lagged`` notice
carrying ``missed`` before the buffered events (LEVT-4).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from lane_pg.scheduler.errors import EventStreamClosed, InvalidLaneConfig
from lane_pg.types import JSON

logger = logging.getLogger("lane_pg.scheduler")

COMMAND_SUBMITTED: Final = "queue.command.submitted"
COMMAND_STARTED: Final = "queue.command.started"
COMMAND_COMPLETED: Final = "queue.command.completed"
COMMAND_RETRY: Final = "queue.command.retry"
COMMAND_DEAD_LETTERED: Final = "queue.command.dead_lettered"
COMMAND_FAILED: Final = "queue.command.failed"
COMMAND_TIMEOUT: Final = "queue.command.timeout"
SHUTDOWN_STARTED: Final = "queue.shutdown.started"
LANE_PRESSURE: Final = "queue.lane.pressure"
LANE_IDLE: Final = "queue.lane.idle"
EVENTS_LAGGED: Final = "queue.events.lagged"
"""Not emitted by the manager: a subscriber's notice that it missed ``missed`` events."""

DEFAULT_EVENT_CAPACITY: Final = 1024


@dataclass(frozen=True, slots=True)
class LaneEvent:
    """One event (LEVT-1). Fields an event key does not carry are None."""

    key: str
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    lane_id: str | None = None
    command_id: str | None = None
    command_type: str | None = None
    attempt: int | None = None
    error: str | None = None
    missed: int | None = None

    def fields(self) -> dict[str, JSON]:
        """The event's payload fields (those that are set), e.g. ``{"lane_id": "query"}``."""
        values = {
            "lane_id": self.lane_id,
            "command_id": self.command_id,
            "command_type": self.command_type,
            "attempt": self.attempt,
            "error": self.error,
            "missed": self.missed,
        }
        return {name: value for name, value in values.items() if value is not None}


EventFilter = Callable[[LaneEvent], bool]


class EventStream:
    """One subscriber: ``async for event in stream`` or ``await stream.recv()`` (LEVT-2).

    Iteration ends (and ``recv`` raises ``EventStreamClosed``) once the stream or its
    emitter is closed and the buffer is empty.
    """

    def __init__(self, emitter: EventEmitter, capacity: int, pred: EventFilter | None) -> None:
        self._emitter = emitter
        self._buffer: deque[LaneEvent] = deque()
        self._capacity = capacity
        self._pred = pred
        self._missed = 0
        self._closed = False
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def closed(self) -> bool:
        return self._closed

    def _push(self, event: LaneEvent) -> None:
        if self._closed:
            return
        if self._pred is not None:
            try:
                wanted = self._pred(event)
            except Exception:
                # A broken filter must not break the scheduler that emits.
                logger.exception("lane events: subscriber filter raised on %s", event.key)
                return
            if not wanted:
                return
        if len(self._buffer) >= self._capacity:
            self._buffer.popleft()
            self._missed += 1
        self._buffer.append(event)
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def try_recv(self) -> LaneEvent | None:
        """The next event (or lag notice) if one is buffered, else None; never waits."""
        if self._missed:
            missed, self._missed = self._missed, 0
            return LaneEvent(EVENTS_LAGGED, missed=missed)
        if self._buffer:
            return self._buffer.popleft()
        return None

    async def recv(self) -> LaneEvent:
        """The next event, waiting for one; a lag notice comes first after drops."""
        while True:
            event = self.try_recv()
            if event is not None:
                return event
            if self._closed:
                raise EventStreamClosed("the event stream is closed")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def drain_nowait(self) -> list[LaneEvent]:
        """Every buffered event (and lag notice) at once, without waiting."""
        events: list[LaneEvent] = []
        while (event := self.try_recv()) is not None:
            events.append(event)
        return events

    def close(self) -> None:
        """Unsubscribe; what is already buffered can still be read."""
        if not self._closed:
            self._closed = True
            self._emitter._unsubscribe(self)
            self._wake()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> LaneEvent:
        try:
            return await self.recv()
        except EventStreamClosed:
            raise StopAsyncIteration from None

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class EventEmitter:
    """Broadcasts events to every subscriber, ``capacity`` buffered per subscriber."""

    def __init__(self, capacity: int = DEFAULT_EVENT_CAPACITY) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise InvalidLaneConfig(f"event capacity must be a positive integer: {capacity!r}")
        self._capacity = capacity
        self._streams: list[EventStream] = []
        self._closed = False

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def subscriber_count(self) -> int:
        return len(self._streams)

    def subscribe(self) -> EventStream:
        return self.subscribe_filtered(None)

    def subscribe_filtered(self, pred: EventFilter | None) -> EventStream:
        """A stream of the events for which ``pred(event)`` is true (LEVT-3).

        The filter runs at emit time, so filtered-out events never take buffer space.
        """
        stream = EventStream(self, self._capacity, pred)
        if self._closed:
            stream.close()
        else:
            self._streams.append(stream)
        return stream

    def emit(self, event: LaneEvent) -> None:
        """Deliver ``event`` to every subscriber without blocking."""
        for stream in tuple(self._streams):
            stream._push(event)

    def close(self) -> None:
        """Close every stream; later subscriptions start closed."""
        self._closed = True
        for stream in tuple(self._streams):
            stream.close()

    def _unsubscribe(self, stream: EventStream) -> None:
        if stream in self._streams:
            self._streams.remove(stream)
