"""LANE-9: the partitioned distributed queue and the lane manager running through one."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from lane_pg.errors import InvalidPayload
from lane_pg.scheduler import (
    CommandFailed,
    DistributedItem,
    DistributedQueue,
    FunctionCommand,
    LaneConfig,
    LaneManager,
    LocalDistributedQueue,
    RetryPolicy,
    partition_for,
)
from lane_pg.types import JSON

DEADLINE = 5.0


@dataclass
class Job:
    """A command with a JSON payload, which its distributed item carries."""

    payload: JSON
    fail: bool = False
    command_type: str = "job"

    async def execute(self) -> JSON:
        if self.fail:
            raise RuntimeError(f"failed {self.payload}")
        return self.payload


class RecordingQueue:
    """A ``DistributedQueue`` of its own (not a LocalDistributedQueue) recording every call
    that does something; ``dequeue`` calls that find nothing are only counted."""

    def __init__(self, partitions: int = 3) -> None:
        self.partitions = partitions
        self.items: list[list[DistributedItem]] = [[] for _ in range(partitions)]
        self.calls: list[tuple[object, ...]] = []
        self.empty_dequeues = 0
        self.fail_enqueue: set[str] = set()  # command types whose enqueue raises
        self.fail_complete = False

    async def enqueue(self, item: DistributedItem) -> None:
        self.calls.append(("enqueue", item))
        if item.command_type in self.fail_enqueue:
            raise ConnectionError("broker unreachable")
        self.items[item.partition].append(item)

    async def dequeue(self, partition: int) -> DistributedItem | None:
        if not self.items[partition]:
            self.empty_dequeues += 1
            return None
        item = self.items[partition].pop(0)
        self.calls.append(("dequeue", partition, item.command_id))
        return item

    async def complete(self, command_id: str, *, success: bool, error: str | None) -> None:
        self.calls.append(("complete", command_id, success, error))
        if self.fail_complete:
            raise ConnectionError("ack lost")

    def num_partitions(self) -> int:
        return self.partitions

    def worker_id(self) -> str:
        return "recording-1"

    def of(self, command_id: str) -> list[tuple[object, ...]]:
        """This command's calls, the item standing for itself in ``enqueue``."""
        mine = []
        for call in self.calls:
            if call[0] == "enqueue":
                item = call[1]
                assert isinstance(item, DistributedItem)
                if item.command_id == command_id:
                    mine.append(call)
            elif command_id in call:
                mine.append(call)
        return mine


def runner_tasks() -> set[asyncio.Task[object]]:
    return {
        task
        for task in asyncio.all_tasks()
        if task.get_name().startswith("lane-distributed-runner-") and not task.done()
    }


# -- the queue ---------------------------------------------------------------------------


def test_lane_9_auto_has_one_partition_per_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = LocalDistributedQueue.auto()
    assert queue.num_partitions() == os.cpu_count()
    assert isinstance(queue, DistributedQueue)
    assert queue.worker_id() != LocalDistributedQueue.auto().worker_id()
    assert LocalDistributedQueue.auto("node-a").worker_id() == "node-a"
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert LocalDistributedQueue.auto().num_partitions() == 1


def test_lane_9_partitions_are_validated() -> None:
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="partitions"):
            LocalDistributedQueue(bad)  # type: ignore[arg-type]
    assert LocalDistributedQueue(1).num_partitions() == 1


def test_lane_9_partition_hash_spreads_and_is_stable() -> None:
    ids = [uuid.UUID(int=n * 7919 + 1).hex for n in range(4000)]
    counts = Counter(partition_for(command_id, 8) for command_id in ids)
    assert sorted(counts) == list(range(8))
    assert min(counts.values()) > 4000 / 8 * 0.8
    assert max(counts.values()) < 4000 / 8 * 1.2
    # CRC32, fixed: the same in every process, whatever PYTHONHASHSEED says.
    expected = [partition_for(f"command-{n}", 7) for n in range(20)]
    assert expected == [3, 2, 3, 1, 1, 6, 1, 3, 4, 2, 5, 0, 0, 2, 2, 3, 5, 4, 4, 4]
    code = (
        "from lane_pg.scheduler import partition_for;"
        "print([partition_for(f'command-{n}', 7) for n in range(20)])"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out.strip() == str(expected)
    assert LocalDistributedQueue(7).partition_for("command-3") == 1


async def test_lane_9_local_queue_fifo_per_partition_and_in_flight() -> None:
    queue = LocalDistributedQueue(2, "w")

    def item(command_id: str, partition: int) -> DistributedItem:
        return DistributedItem(command_id, "lane", 0, "t", None, partition)

    for command_id, partition in (("a", 0), ("b", 1), ("c", 0)):
        await queue.enqueue(item(command_id, partition))
    assert (queue.pending(), queue.pending(0), queue.pending(1)) == (3, 2, 1)
    with pytest.raises(ValueError, match="already queued"):
        await queue.enqueue(item("a", 1))
    with pytest.raises(ValueError, match="out of range"):
        await queue.enqueue(item("d", 2))
    with pytest.raises(ValueError, match="out of range"):
        await queue.dequeue(-1)
    first = await queue.dequeue(0)
    assert first is not None and first.command_id == "a"
    second = await queue.dequeue(0)
    assert second is not None and second.command_id == "c"
    assert await queue.dequeue(0) is None  # at once, nothing there
    assert queue.in_flight() == 2
    with pytest.raises(ValueError, match="in flight"):
        await queue.enqueue(item("a", 0))
    await queue.complete("a", success=True, error=None)
    with pytest.raises(KeyError, match="not in flight"):
        await queue.complete("a", success=True, error=None)  # already completed
    with pytest.raises(KeyError, match="not in flight"):
        await queue.complete("b", success=False, error="x")  # never dequeued
    assert queue.in_flight() == 1
    await queue.enqueue(item("a", 1))  # completed: may come again (a retry)


# -- the manager -------------------------------------------------------------------------


async def test_lane_9_a_custom_queue_gets_every_call() -> None:
    queue = RecordingQueue()
    manager = (
        LaneManager.builder()
        .with_lane("query", LaneConfig(1, 2), 2)
        .with_lane("control", LaneConfig(1, 1), 1)
        .with_distributed_queue(queue)
        .build()
    )
    assert manager.distributed_queue is queue
    async with manager:
        ok = await manager.submit("query", Job({"n": 1}))
        bad = await manager.submit("control", Job({"n": 2}, fail=True))
        assert await asyncio.wait_for(ok, DEADLINE) == {"n": 1}
        with pytest.raises(CommandFailed) as info:
            await asyncio.wait_for(bad, DEADLINE)
        assert isinstance(info.value.cause, RuntimeError)

    enqueued, dequeued, completed = queue.of(ok.command_id)
    assert enqueued == (
        "enqueue",
        DistributedItem(
            command_id=ok.command_id,
            lane_id="query",
            priority=2,
            command_type="job",
            payload={"n": 1},
            partition=partition_for(ok.command_id, 3),
            attempt=1,
        ),
    )
    assert dequeued == ("dequeue", partition_for(ok.command_id, 3), ok.command_id)
    assert completed == ("complete", ok.command_id, True, None)

    enqueued, dequeued, completed = queue.of(bad.command_id)
    item = enqueued[1]
    assert isinstance(item, DistributedItem)
    assert (item.lane_id, item.priority, item.payload) == ("control", 1, {"n": 2})
    assert dequeued == ("dequeue", item.partition, bad.command_id)
    assert completed == ("complete", bad.command_id, False, "RuntimeError: failed {'n': 2}")


async def test_lane_9_a_retry_is_a_new_cycle_and_a_raising_complete_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = RecordingQueue(partitions=1)
    queue.fail_complete = True
    attempts = 0

    async def flaky() -> JSON:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ValueError("first try")
        return attempts

    config = LaneConfig(1, 1, retry_policy=RetryPolicy.fixed(1, 0))
    manager = LaneManager.builder().with_lane("w", config).with_distributed_queue(queue).build()
    caplog.set_level(logging.ERROR, logger="lane_pg.scheduler")
    async with manager:
        fut = await manager.submit("w", FunctionCommand(flaky, "flaky"))
        assert await asyncio.wait_for(fut, DEADLINE) == 2
    calls = queue.of(fut.command_id)
    assert [call[0] for call in calls] == ["enqueue", "dequeue", "complete"] * 2
    assert [call[1].attempt for call in calls if call[0] == "enqueue"] == [1, 2]  # type: ignore[attr-defined]
    assert calls[2] == ("complete", fut.command_id, False, "ValueError: first try")
    assert calls[5] == ("complete", fut.command_id, True, None)
    logged = [r.getMessage() for r in caplog.records if "could not complete" in r.getMessage()]
    assert len(logged) == 2
    assert fut.command_id in logged[0]


async def test_lane_9_priority_holds_with_a_distributed_queue() -> None:
    order: list[str] = []
    gate, running = asyncio.Event(), asyncio.Event()

    def recording(name: str, wait: bool = False) -> FunctionCommand:
        async def run() -> JSON:
            order.append(name)
            if wait:
                running.set()
                await gate.wait()
            return name

        return FunctionCommand(run, "record")

    manager = (
        LaneManager.builder()
        .with_default_lanes()
        .with_global_concurrency(1)
        .with_distributed_queue(LocalDistributedQueue(4))
        .build()
    )
    async with manager:
        futures = [await manager.submit("prompt", recording("prompt-0", wait=True))]
        await asyncio.wait_for(running.wait(), DEADLINE)
        for i in range(1, 5):
            futures.append(await manager.submit("prompt", recording(f"prompt-{i}")))
        futures.append(await manager.submit("control", recording("control")))
        assert order == ["prompt-0"]
        gate.set()
        await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
    assert order == ["prompt-0", "control", "prompt-1", "prompt-2", "prompt-3", "prompt-4"]


async def test_lane_9_lane_concurrency_holds_with_a_distributed_queue() -> None:
    running = 0
    peak = 0
    order: list[int] = []
    queue = LocalDistributedQueue(4)

    def sleeper(i: int) -> Callable[[], Awaitable[JSON]]:
        async def run() -> JSON:
            nonlocal running, peak
            order.append(i)
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.001)
            running -= 1
            return i

        return run

    manager = (
        LaneManager.builder()
        .with_lane("work", LaneConfig(1, 3))
        .with_distributed_queue(queue, poll_interval=None)  # woken by its own enqueues only
        .build()
    )
    futures = [await manager.submit("work", sleeper(i)) for i in range(12)]
    async with manager:
        assert manager.lane_stats("work").running == 3
        assert await asyncio.wait_for(asyncio.gather(*futures), DEADLINE) == list(range(12))
    assert peak == 3
    # Started in submission order; the partitions' runners may reorder within the three.
    assert sorted(order[:3]) == [0, 1, 2]
    assert (queue.pending(), queue.in_flight()) == (0, 0)


async def test_lane_9_a_failing_enqueue_fails_the_command_and_frees_the_slot(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = RecordingQueue(partitions=2)
    queue.fail_enqueue.add("doomed")
    manager = (
        LaneManager.builder().with_lane("w", LaneConfig(1, 1)).with_distributed_queue(queue).build()
    )
    caplog.set_level(logging.ERROR, logger="lane_pg.scheduler")
    async with manager:
        doomed = await manager.submit("w", FunctionCommand(lambda: asyncio.sleep(0), "doomed"))
        with pytest.raises(CommandFailed) as info:
            await asyncio.wait_for(doomed, DEADLINE)
        assert isinstance(info.value.cause, ConnectionError)
        assert info.value.command_id == doomed.command_id
        assert manager.lane_stats("w").running == 0
        after = await manager.submit("w", Job("next"))  # the one slot is free again
        assert await asyncio.wait_for(after, DEADLINE) == "next"
    assert [call[0] for call in queue.of(doomed.command_id)] == ["enqueue"]
    logged = [r.getMessage() for r in caplog.records if "could not enqueue" in r.getMessage()]
    assert len(logged) == 1
    assert doomed.command_id in logged[0]


async def test_lane_9_runners_poll_a_queue_fed_by_someone_else(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Items the manager did not enqueue are completed as failed; an empty queue is asked
    about once per poll interval, not in a busy loop."""
    queue = RecordingQueue(partitions=2)
    manager = (
        LaneManager.builder()
        .with_lane("w", LaneConfig(1, 1))
        .with_distributed_queue(queue, poll_interval=0.02)
        .build()
    )
    caplog.set_level(logging.WARNING, logger="lane_pg.scheduler")
    async with manager:
        await asyncio.sleep(0.2)
        assert queue.empty_dequeues <= 2 * (0.2 / 0.02 + 3)  # not a busy loop
        queue.items[1].append(DistributedItem("stranger", "w", 0, "t", None, 1))
        for _ in range(100):
            if any(call[0] == "complete" for call in queue.calls):
                break
            await asyncio.sleep(0.01)
    assert queue.calls == [
        ("dequeue", 1, "stranger"),
        ("complete", "stranger", False, "LookupError: command stranger is unknown to this manager"),
    ]
    assert any("not waiting for" in r.getMessage() for r in caplog.records)


async def test_lane_9_stop_stops_the_runners() -> None:
    queue = LocalDistributedQueue(3)
    manager = LaneManager.builder().with_lane("w").with_distributed_queue(queue).build()
    before = runner_tasks()
    await manager.start()
    assert len(runner_tasks() - before) == 3
    fut = await manager.submit("w", Job(1))
    assert await asyncio.wait_for(fut, DEADLINE) == 1
    await manager.shutdown()
    assert len(runner_tasks() - before) == 3  # shutdown: accepted commands still run
    await manager.stop()
    assert runner_tasks() - before == set()


async def test_lane_9_invalid_queues_are_refused() -> None:
    with pytest.raises(TypeError, match="not a distributed queue"):
        LaneManager.builder().with_lane("w").with_distributed_queue(object()).build()  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="poll interval"):
        LaneManager.builder().with_lane("w").with_distributed_queue(
            LocalDistributedQueue(1), poll_interval=0
        ).build()
    queue = RecordingQueue(partitions=0)
    manager = LaneManager.builder().with_lane("w").with_distributed_queue(queue).build()
    with pytest.raises(ValueError, match="num_partitions"):
        await manager.start()
    assert not manager.started


async def test_lane_9_a_payload_that_is_not_json_is_refused_at_submit() -> None:
    manager = (
        LaneManager.builder()
        .with_lane("w")
        .with_distributed_queue(LocalDistributedQueue(1))
        .build()
    )
    async with manager:
        with pytest.raises(InvalidPayload):
            await manager.submit("w", Job({"when": object()}))
        assert manager.outstanding == 0
