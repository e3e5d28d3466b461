"""Partitioned distributed queue for the lane scheduler (LANE-9).

With a distributed queue (``LaneManagerBuilder.with_distributed_queue``) the manager still
decides *what* starts and *when* (lane priority, lane and global concurrency, rate limits,
priority boost), but a started attempt travels through the queue: the manager enqueues a
``DistributedItem``, one runner per partition dequeues it and runs the command, then
reports the attempt's outcome with ``complete``. A queue is any object with the five
methods of ``DistributedQueue``; ``LocalDistributedQueue`` is the in-process one.

Partitions: ``partition_for(command_id, partitions)`` is CRC32 (``zlib.crc32``) of the
command id's UTF-8 bytes modulo the partition count: the same in every process and Python
version (unlike ``hash()``, which is salted per process). The manager stamps it on the item,
so every queue, the manager's wake-ups and other processes agree on an item's partition.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
import zlib
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from lane_pg.scheduler.errors import InvalidLaneConfig
from lane_pg.types import JSON


@dataclass(frozen=True, slots=True)
class DistributedItem:
    """One attempt of a command, as it travels through a distributed queue.

    ``priority`` is the lane's priority (lower runs first); ``payload`` is the command's JSON
    ``payload`` attribute (None when it has none); ``partition`` is
    ``partition_for(command_id, num_partitions)``; ``attempt`` counts from 1 (a retry is
    a new item with the same ``command_id`` and the next attempt).
    """

    command_id: str
    lane_id: str
    priority: int
    command_type: str
    payload: JSON
    partition: int
    attempt: int = 1


@runtime_checkable
class DistributedQueue(Protocol):
    """What the lane manager needs of a distributed queue.

    ``enqueue`` accepts an item (raising fails its command); ``dequeue(partition)`` returns
    the next item of that partition or None when it has none now (it must not wait long:
    the manager wakes its runners itself, and polls); ``complete`` is told the outcome of
    every item ``dequeue`` returned, once; ``num_partitions`` (>= 1) is read once, at
    ``start()``; ``worker_id`` names this instance in logs.
    """

    async def enqueue(self, item: DistributedItem) -> None: ...

    async def dequeue(self, partition: int) -> DistributedItem | None: ...

    async def complete(self, command_id: str, *, success: bool, error: str | None) -> None: ...

    def num_partitions(self) -> int: ...

    def worker_id(self) -> str: ...


def partition_for(command_id: str, partitions: int) -> int:
    """The partition of ``command_id`` among ``partitions``: CRC32 of its UTF-8, modulo."""
    return zlib.crc32(command_id.encode("utf-8")) % partitions


def _check_partitions(partitions: object) -> int:
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise InvalidLaneConfig(f"a distributed queue needs >= 1 partitions: {partitions!r}")
    return partitions


class LocalDistributedQueue:
    """The in-process distributed queue: one FIFO per partition, items in flight tracked.

    ``enqueue`` files an item under its ``partition`` (ValueError when out of range, or when
    its command is already queued or in flight); ``dequeue`` returns at once (None when the
    partition is empty); ``complete`` of a command that is not in flight raises KeyError.
    """

    def __init__(self, partitions: int, worker_id: str | None = None) -> None:
        self._partitions = _check_partitions(partitions)
        if worker_id is not None and (not isinstance(worker_id, str) or not worker_id):
            raise InvalidLaneConfig(f"worker_id must be a non-empty string: {worker_id!r}")
        self._worker_id = worker_id if worker_id is not None else f"local-{uuid.uuid4().hex}"
        self._queues: list[deque[DistributedItem]] = [deque() for _ in range(partitions)]
        self._queued: set[str] = set()
        self._in_flight: dict[str, DistributedItem] = {}

    @classmethod
    def auto(cls, worker_id: str | None = None) -> LocalDistributedQueue:
        """One partition per CPU core (``os.cpu_count()``, 1 when it is unknown)."""
        return cls(os.cpu_count() or 1, worker_id)

    def num_partitions(self) -> int:
        return self._partitions

    def worker_id(self) -> str:
        return self._worker_id

    def partition_for(self, command_id: str) -> int:
        return partition_for(command_id, self._partitions)

    def pending(self, partition: int | None = None) -> int:
        """Items waiting to be dequeued, in ``partition`` or in all of them."""
        if partition is None:
            return len(self._queued)
        return len(self._queues[self._index(partition)])

    def in_flight(self) -> int:
        """Items dequeued and not yet completed."""
        return len(self._in_flight)

    async def enqueue(self, item: DistributedItem) -> None:
        if not isinstance(item, DistributedItem):
            raise TypeError(f"not a DistributedItem: {item!r}")
        queue = self._queues[self._index(item.partition)]
        command_id = item.command_id
        if command_id in self._queued or command_id in self._in_flight:
            raise ValueError(
                f"command {command_id!r} is already queued or in flight on {self._worker_id}"
            )
        self._queued.add(command_id)
        queue.append(item)

    async def dequeue(self, partition: int) -> DistributedItem | None:
        queue = self._queues[self._index(partition)]
        if not queue:
            return None
        item = queue.popleft()
        self._queued.discard(item.command_id)
        self._in_flight[item.command_id] = item
        return item

    async def complete(self, command_id: str, *, success: bool, error: str | None = None) -> None:
        if self._in_flight.pop(command_id, None) is None:
            raise KeyError(
                f"command {command_id!r} is not in flight on {self._worker_id}"
                " (never dequeued, or already completed)"
            )

    def _index(self, partition: int) -> int:
        if (
            isinstance(partition, bool)
            or not isinstance(partition, int)
            or not 0 <= partition < self._partitions
        ):
            raise ValueError(
                f"partition {partition!r} out of range: {self._worker_id} has"
                f" {self._partitions} (0..{self._partitions - 1})"
            )
        return partition

    def __repr__(self) -> str:
        return (
            f"LocalDistributedQueue(partitions={self._partitions}, worker_id={self._worker_id!r})"
        )


__all__ = [
    "DistributedItem",
    "DistributedQueue",
    "LocalDistributedQueue",
    "partition_for",
]


# -- the manager's side (lane_pg.scheduler.manager) -------------------------------------

logger = logging.getLogger("lane_pg.scheduler")

DEFAULT_POLL_INTERVAL = 0.05
"""Seconds a partition runner waits on an empty partition before it asks again (a queue
fed by someone else than this manager wakes no runner)."""

Entry = TypeVar("Entry")


def queue_name(queue: DistributedQueue) -> str:
    try:
        return repr(queue.worker_id())
    except Exception:
        return repr(queue)


class PartitionRunners(Generic[Entry]):
    """A manager's traffic through its distributed queue: ``dispatch`` hands a started
    attempt (its lane slot taken) to the queue; one runner task per partition dequeues and
    hands each item back to the manager (``run``); ``complete`` tells the queue the
    outcome. The manager keeps deciding what starts and when; this class only moves it."""

    def __init__(
        self,
        queue: DistributedQueue,
        poll_interval: float | None,
        *,
        run: Callable[[Entry, DistributedItem], Coroutine[Any, Any, None]],
        refused: Callable[[Entry, BaseException], Awaitable[None]],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.queue = queue
        self._poll_interval = poll_interval
        self._run = run
        self._refused = refused
        self._spawn = spawn
        self.partitions = 0
        self._dispatched: dict[str, Entry] = {}  # enqueued, not yet dequeued
        self._wakeups: list[asyncio.Event] = []
        self._runners: list[asyncio.Task[None]] = []

    def start(self) -> None:
        partitions = self.queue.num_partitions()
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise InvalidLaneConfig(
                f"distributed queue {self.queue!r}: num_partitions() must be >= 1,"
                f" got {partitions!r}"
            )
        self.partitions = partitions
        self._wakeups = [asyncio.Event() for _ in range(partitions)]
        loop = asyncio.get_running_loop()
        self._runners = [
            loop.create_task(self._runner(partition), name=f"lane-distributed-runner-{partition}")
            for partition in range(partitions)
        ]

    async def stop(self) -> None:
        """Cancel the runners (first, so none hands a dequeued item to a new task)."""
        runners, self._runners = self._runners, []
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        self._dispatched.clear()

    async def dispatch(self, entry: Entry, item: DistributedItem) -> None:
        """Enqueue ``item``, the attempt of ``entry``; a refused enqueue is ``refused``."""
        # Registered first: a queue may hand the item to a runner before enqueue returns.
        self._dispatched[item.command_id] = entry
        try:
            await self.queue.enqueue(item)
        except Exception as exc:
            if self._dispatched.get(item.command_id) is not entry:
                logger.exception(
                    "lane %s: distributed queue %s raised on enqueue of command %s (%s),"
                    " which it delivered all the same: it runs",
                    item.lane_id,
                    queue_name(self.queue),
                    item.command_id,
                    item.command_type,
                )
                return
            del self._dispatched[item.command_id]
            logger.exception(
                "lane %s: distributed queue %s could not enqueue command %s (%s): it fails",
                item.lane_id,
                queue_name(self.queue),
                item.command_id,
                item.command_type,
            )
            await self._refused(entry, exc)
            return
        self._wakeups[item.partition].set()

    async def _runner(self, partition: int) -> None:
        """Dequeue ``partition`` until ``stop()``; each item runs as a task of its own."""
        queue, wakeup = self.queue, self._wakeups[partition]
        failures = 0
        while True:
            wakeup.clear()  # before dequeue: an enqueue from now on wakes the wait below
            try:
                item = await queue.dequeue(partition)
            except Exception:
                failures += 1
                if failures == 1:
                    logger.exception(
                        "distributed queue %s: dequeue(%d) raised; retrying",
                        queue_name(queue),
                        partition,
                    )
                await _idle(wakeup, self._poll_interval or DEFAULT_POLL_INTERVAL)
                continue
            if failures:
                logger.warning(
                    "distributed queue %s: dequeue(%d) works again after %d failure(s)",
                    queue_name(queue),
                    partition,
                    failures,
                )
                failures = 0
            if item is None:
                await _idle(wakeup, self._poll_interval)
                continue
            entry = self._dispatched.pop(item.command_id, None)
            if entry is None:
                logger.warning(
                    "distributed queue %s: partition %d returned command %s (%s, lane %s),"
                    " which this manager is not waiting for: completing it as failed",
                    queue_name(queue),
                    partition,
                    item.command_id,
                    item.command_type,
                    item.lane_id,
                )
                await self.complete(
                    item, f"LookupError: command {item.command_id} is unknown to this manager"
                )
                continue
            self._spawn(self._run(entry, item))

    async def complete(self, item: DistributedItem, error: str | None) -> None:
        """Tell the queue how the attempt ended (``error`` None: it succeeded); logged,
        never raised, when the queue fails."""
        try:
            await self.queue.complete(item.command_id, success=error is None, error=error)
        except Exception:
            logger.exception(
                "lane %s: distributed queue %s could not complete command %s (%s)",
                item.lane_id,
                queue_name(self.queue),
                item.command_id,
                item.command_type,
            )


async def _idle(wakeup: asyncio.Event, seconds: float | None) -> None:
    """Until ``wakeup`` is set, or ``seconds`` (None: no limit)."""
    if seconds is None:
        await wakeup.wait()
        return
    try:
        async with asyncio.timeout(seconds):
            await wakeup.wait()
    except TimeoutError:
        pass
