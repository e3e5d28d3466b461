"""Queue-level settings: listing, retention bounds, event recording, pause."""

from __future__ import annotations

from collections.abc import Sequence

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

    async def list_queues(self) -> list[str]:
        return sorted(self._store._queues)

    async def set_queue_retention(
        self, queue: str, *, keep_completed: int | None, keep_failed: int | None
    ) -> None:
        validate_queue_name(queue)
        retention = QueueRetention(keep_completed, keep_failed)
        q = self._store._queue(queue)
        q.keep_completed = retention.keep_completed
        q.keep_failed = retention.keep_failed

    async def get_queue_retention(self, queue: str) -> QueueRetention:
        validate_queue_name(queue)
        q = self._store._queues.get(queue)
        if q is None:
            return QueueRetention.default()
        return QueueRetention(q.keep_completed, q.keep_failed)

    async def set_queue_events(self, queue: str, *, record: bool) -> None:
        validate_queue_name(queue)
        validate_record_events(record)  # before the queue is created
        self._store._queue(queue).record_events = record

    async def get_queue_events(self, queue: str) -> bool:
        validate_queue_name(queue)
        q = self._store._queues.get(queue)
        return True if q is None else q.record_events

    async def pause_queue(self, queue: str) -> None:
        validate_queue_name(queue)
        q = self._store._queue(queue)
        q.paused = True
        self._store._emit(q, "paused", None, {}, self._store._now(None))

    async def resume_queue(self, queue: str) -> None:
        validate_queue_name(queue)
        q = self._store._queue(queue)
        q.paused = False
        self._store._emit(q, "resumed", None, {}, self._store._now(None))

    async def is_queue_paused(self, queue: str) -> bool:
        q = self._store._queues.get(queue)
        return q is not None and q.paused

    async def pause_all(self) -> None:
        self._store._all_paused = True

    async def resume_all(self) -> None:
        self._store._all_paused = False

    async def signal_restart(self) -> int:
        signal = self._store._restart_at_ms = _epoch_ms(self._store._now(None))
        return signal

    async def get_pause_status(self, queues: Sequence[str] | None = ()) -> PauseStatus:
        if queues is None:
            paused = frozenset(name for name, q in self._store._queues.items() if q.paused)
            return PauseStatus(self._store._all_paused, paused, self._store._restart_at_ms)
        for name in queues:
            validate_queue_name(name)
        paused = frozenset(
            name for name in queues if (q := self._store._queues.get(name)) is not None and q.paused
        )
        return PauseStatus(self._store._all_paused, paused, self._store._restart_at_ms)
