"""LANE-1..8: lanes, commands, submit futures, priority and concurrency, start, validation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from lane_pg.errors import LaneError
from lane_pg.scheduler import (
    COMMAND_STARTED,
    COMMAND_TIMEOUT,
    CommandFailed,
    FunctionCommand,
    LaneConfig,
    LaneManager,
    LaneTimeout,
    ManualClock,
    UnknownLane,
)
from lane_pg.types import DEFAULT_LANES, JSON

DEADLINE = 5.0


@dataclass
class FetchCommand:
    url: str
    command_type: str = "fetch"

    async def execute(self) -> JSON:
        return {"url": self.url}


def recording(
    order: list[str],
    name: str,
    gate: asyncio.Event | None = None,
    running: asyncio.Event | None = None,
) -> FunctionCommand:
    async def run() -> JSON:
        order.append(name)
        if running is not None:
            running.set()
        if gate is not None:
            await gate.wait()
        return name

    return FunctionCommand(run, "record")


async def test_lane_1_default_lanes() -> None:
    manager = LaneManager.builder().with_default_lanes().build()
    lanes = [(info.name, info.priority, info.config.max_concurrency) for info in manager.lanes()]
    assert lanes == [
        ("system", 0, 5),
        ("control", 1, 3),
        ("query", 2, 10),
        ("session", 3, 5),
        ("skill", 4, 3),
        ("prompt", 5, 2),
    ]
    # One definition: the worker's DEFAULT_LANES.
    assert lanes == [(lane.name, lane.priority, lane.max_concurrency) for lane in DEFAULT_LANES]
    assert all(info.config.min_concurrency == 1 for info in manager.lanes())


async def test_lane_2_custom_lanes_only() -> None:
    manager = (
        LaneManager.builder()
        .with_lane("high", LaneConfig(1, 1), 0)
        .with_lane("high", LaneConfig(1, 4), 0)  # same name: replaces
        .with_lane("low", LaneConfig(1, 2), 1)
        .build()
    )
    assert [(i.name, i.priority, i.config.max_concurrency) for i in manager.lanes()] == [
        ("high", 0, 4),
        ("low", 1, 2),
    ]
    async with manager:
        with pytest.raises(UnknownLane):
            await manager.submit("query", FetchCommand("u"))
        fut = await manager.submit("high", FetchCommand("u"))
        assert await asyncio.wait_for(fut, DEADLINE) == {"url": "u"}


async def test_lane_3_command_object_and_callable() -> None:
    manager = LaneManager.builder().with_default_lanes().build()
    started = manager.subscribe_filtered(lambda e: e.key == COMMAND_STARTED)
    async with manager:
        fut = await manager.submit("query", FetchCommand("https://example.org"))
        assert await asyncio.wait_for(fut, DEADLINE) == {"url": "https://example.org"}
        event = await asyncio.wait_for(started.recv(), DEADLINE)
        assert event.command_type == "fetch"
        assert event.command_id == fut.command_id
        assert event.lane_id == "query"

        async def ping() -> JSON:
            return "pong"

        fut = await manager.submit("query", ping)
        assert await asyncio.wait_for(fut, DEADLINE) == "pong"
        event = await asyncio.wait_for(started.recv(), DEADLINE)
        assert event.command_type == "ping"  # a bare callable's type is its name
        with pytest.raises(TypeError):
            await manager.submit("query", object())  # type: ignore[arg-type]


async def test_lane_4_future_resolves_or_wraps_the_error() -> None:
    async def boom() -> JSON:
        raise ValueError("bad input")

    async with LaneManager.builder().with_lane("work", LaneConfig(1, 2)).build() as manager:
        ok = await manager.submit("work", FetchCommand("x"))
        assert isinstance(ok, asyncio.Future)
        assert await asyncio.wait_for(ok, DEADLINE) == {"url": "x"}

        bad = await manager.submit("work", boom)
        with pytest.raises(CommandFailed) as info:
            await asyncio.wait_for(bad, DEADLINE)
        assert isinstance(info.value.cause, ValueError)
        assert info.value.__cause__ is info.value.cause
        assert info.value.attempts == 1
        assert info.value.command_id == bad.command_id
        assert "ValueError: bad input" in str(info.value)

        async def gives_up() -> JSON:
            raise asyncio.CancelledError  # a command cancelling itself fails, not hangs

        quit_ = await manager.submit("work", gives_up)
        with pytest.raises(CommandFailed) as info:
            await asyncio.wait_for(quit_, DEADLINE)
        assert isinstance(info.value.cause, asyncio.CancelledError)


async def test_lane_5_priority_beats_arrival_order() -> None:
    order: list[str] = []
    gate, running = asyncio.Event(), asyncio.Event()
    manager = LaneManager.builder().with_default_lanes().with_global_concurrency(1).build()
    async with manager:
        futures = [await manager.submit("prompt", recording(order, "prompt-0", gate, running))]
        await asyncio.wait_for(running.wait(), DEADLINE)  # the first prompt is running
        for i in range(1, 5):
            futures.append(await manager.submit("prompt", recording(order, f"prompt-{i}")))
        futures.append(await manager.submit("control", recording(order, "control")))
        assert order == ["prompt-0"]  # one global slot, still taken
        gate.set()
        await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
    assert order == ["prompt-0", "control", "prompt-1", "prompt-2", "prompt-3", "prompt-4"]


async def test_lane_6_lane_max_concurrency_and_fifo() -> None:
    running = 0
    peak = 0
    order: list[int] = []

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

    manager = LaneManager.builder().with_lane("work", LaneConfig(1, 3)).build()
    futures = [await manager.submit("work", sleeper(i)) for i in range(10)]
    async with manager:
        assert manager.lane_stats("work").running == 3
        assert await asyncio.wait_for(asyncio.gather(*futures), DEADLINE) == list(range(10))
    assert peak == 3
    assert order == list(range(10))


async def test_lane_6_a_timed_out_command_keeps_its_slot_until_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Maximum 1, a 1 s timeout, and commands that swallow their cancellation and go on
    until a gate opens: each keeps the slot until it has actually ended, so they never
    run together; the timeout is reported when it expires, the overrun when it ends."""
    clock = ManualClock()
    gate = asyncio.Event()
    swallowed = [asyncio.Event() for _ in range(3)]
    running = 0
    peak = 0

    def stubborn(i: int) -> Callable[[], Awaitable[JSON]]:
        async def run() -> JSON:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            try:
                try:
                    await asyncio.Event().wait()  # until cancelled
                except asyncio.CancelledError:
                    swallowed[i].set()
                await gate.wait()
                return i
            finally:
                running -= 1

        return run

    config = LaneConfig(1, 1, timeout=1)
    manager = LaneManager.builder().with_lane("work", config).with_clock(clock).build()
    timeouts = manager.subscribe_filtered(lambda e: e.key == COMMAND_TIMEOUT)
    caplog.set_level(logging.WARNING, logger="lane_pg.scheduler")
    async with manager:
        futures = [await manager.submit("work", stubborn(i)) for i in range(3)]
        clock.advance_to(await asyncio.wait_for(clock.next_deadline(), DEADLINE))
        await asyncio.wait_for(swallowed[0].wait(), DEADLINE)
        stats = manager.lane_stats("work")
        assert (stats.running, stats.pending) == (1, 2)  # the slot is still the first's
        event = await asyncio.wait_for(timeouts.recv(), DEADLINE)
        assert event.command_id == futures[0].command_id
        assert not futures[0].done()

        gate.set()
        outcomes = await clock.run_until(asyncio.gather(*futures, return_exceptions=True))
    assert all(isinstance(outcome, LaneTimeout) for outcome in outcomes)
    assert peak == 1
    assert all(flag.is_set() for flag in swallowed)
    messages = [record.getMessage() for record in caplog.records]
    overruns = [message for message in messages if "ignored its cancellation" in message]
    assert len(overruns) == 3
    assert futures[0].command_id in overruns[0]
    assert "timed out after 1s" in overruns[0]


async def test_lane_7_nothing_runs_before_start() -> None:
    order: list[str] = []
    manager = LaneManager.builder().with_default_lanes().build()
    try:
        fut = await manager.submit("query", recording(order, "early"))
        # Asserting an absence needs some elapsed time; 20 ms of loop turns is plenty.
        await asyncio.sleep(0.02)
        assert order == []
        assert not fut.done()
        assert manager.lane_stats("query").pending == 1
        await manager.start()
        assert await asyncio.wait_for(fut, DEADLINE) == "early"
        assert order == ["early"]
    finally:
        await manager.stop()


async def test_lane_8_validation() -> None:
    with pytest.raises(ValueError):
        LaneConfig(3, 2)
    with pytest.raises(ValueError):
        LaneConfig(0, 0)
    with pytest.raises(ValueError):
        LaneConfig(-1, 2)
    with pytest.raises(ValueError):
        LaneManager.builder().with_lane("x", LaneConfig(1, 1), priority=-1)
    async with LaneManager.builder().with_lane("only", LaneConfig(1, 1)).build() as manager:
        with pytest.raises(UnknownLane) as info:
            await manager.submit("nope", FetchCommand("x"))
        assert isinstance(info.value, LaneError)
        assert isinstance(info.value, LookupError)
        assert info.value.lane_id == "nope"
