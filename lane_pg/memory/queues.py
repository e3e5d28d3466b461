"""Queue-level settings: listing, retention bounds, event recording, pause."""

from __future__ import annotations

from lane_pg.backend.queues import (
    GetPauseStatus,
    GetQueueEvents,
    GetQueueRetention,
    IsQueuePaused,
    ListQueues,
    PauseAll,
    PauseQueue,
    ResumeAll,
    ResumeQueue,
    SetQueueEvents,
    SetQueueRetention,
    SignalRestart,
)
from lane_pg.memory._records import _epoch_ms
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import (
    PauseStatus,
    QueueRetention,
    validate_queue_name,
    validate_record_events,
)


class MemoryQueues(MemoryEntity):
    """Queue-level settings: listing, retention bounds, event recording, pause."""

    async def list_queues(self, args: ListQueues) -> list[str]:
        return sorted(self._store._queues)

    async def set_queue_retention(self, args: SetQueueRetention) -> None:
        validate_queue_name(args.queue)
        retention = QueueRetention(args.keep_completed, args.keep_failed)
        q = self._store._queue(args.queue)
        q.keep_completed = retention.keep_completed
        q.keep_failed = retention.keep_failed

    async def get_queue_retention(self, args: GetQueueRetention) -> QueueRetention:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        if q is None:
            return QueueRetention.default()
        return QueueRetention(q.keep_completed, q.keep_failed)

    async def set_queue_events(self, args: SetQueueEvents) -> None:
        validate_queue_name(args.queue)
        validate_record_events(args.record)  # before the queue is created
        self._store._queue(args.queue).record_events = args.record

    async def get_queue_events(self, args: GetQueueEvents) -> bool:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        return True if q is None else q.record_events

    async def pause_queue(self, args: PauseQueue) -> None:
        validate_queue_name(args.queue)
        q = self._store._queue(args.queue)
        q.paused = True
        self._store._emit(q, "paused", None, {}, self._store._now(None))

    async def resume_queue(self, args: ResumeQueue) -> None:
        validate_queue_name(args.queue)
        q = self._store._queue(args.queue)
        q.paused = False
        self._store._emit(q, "resumed", None, {}, self._store._now(None))

    async def is_queue_paused(self, args: IsQueuePaused) -> bool:
        q = self._store._queues.get(args.queue)
        return q is not None and q.paused

    async def pause_all(self, args: PauseAll) -> None:
        self._store._all_paused = True

    async def resume_all(self, args: ResumeAll) -> None:
        self._store._all_paused = False

    async def signal_restart(self, args: SignalRestart) -> int:
        signal = self._store._restart_at_ms = _epoch_ms(self._store._now(None))
        return signal

    async def get_pause_status(self, args: GetPauseStatus) -> PauseStatus:
        if args.queues is None:
            paused = frozenset(name for name, q in self._store._queues.items() if q.paused)
            return PauseStatus(self._store._all_paused, paused, self._store._restart_at_ms)
        for name in args.queues:
            validate_queue_name(name)
        paused = frozenset(
            name
            for name in args.queues
            if (q := self._store._queues.get(name)) is not None and q.paused
        )
        return PauseStatus(self._store._all_paused, paused, self._store._restart_at_ms)
