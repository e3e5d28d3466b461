"""LEVT-1..4: the event catalogue, subscriptions, filters and the bounded emitter."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from lane_pg.scheduler import (
    COMMAND_COMPLETED,
    COMMAND_DEAD_LETTERED,
    COMMAND_FAILED,
    COMMAND_STARTED,
    COMMAND_SUBMITTED,
    COMMAND_TIMEOUT,
    EVENTS_LAGGED,
    SHUTDOWN_STARTED,
    CommandFailed,
    DeadLetterQueue,
    EventEmitter,
    EventStreamClosed,
    FunctionCommand,
    LaneConfig,
    LaneEvent,
    LaneManager,
)
from lane_pg.types import JSON

DEADLINE = 5.0


async def ok() -> JSON:
    return "ok"


async def boom() -> JSON:
    raise ValueError("boom")


async def test_levt_1_catalogue_in_causal_order() -> None:
    manager = (
        LaneManager.builder()
        .with_lane("work", LaneConfig(1, 1))
        .with_dlq(DeadLetterQueue(10))
        .build()
    )
    stream = manager.subscribe()
    async with manager:
        good = await manager.submit("work", FunctionCommand(ok, "good"))
        await asyncio.wait_for(good, DEADLINE)
        bad = await manager.submit("work", FunctionCommand(boom, "bad"))
        with pytest.raises(CommandFailed):
            await asyncio.wait_for(bad, DEADLINE)
        events = stream.drain_nowait()  # read before leaving: stop() emits shutdown.started
    assert [e.key for e in events] == [
        COMMAND_SUBMITTED,
        COMMAND_STARTED,
        COMMAND_COMPLETED,
        COMMAND_SUBMITTED,
        COMMAND_STARTED,
        COMMAND_FAILED,
        COMMAND_DEAD_LETTERED,
    ]
    assert all(isinstance(e.timestamp, datetime) and e.timestamp.tzinfo for e in events)
    assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)
    g, b = good.command_id, bad.command_id
    assert [e.fields() for e in events] == [
        {"lane_id": "work"},
        {"lane_id": "work", "command_id": g, "command_type": "good"},
        {"lane_id": "work", "command_id": g},
        {"lane_id": "work"},
        {"lane_id": "work", "command_id": b, "command_type": "bad"},
        {"lane_id": "work", "command_id": b, "error": "ValueError: boom"},
        {"lane_id": "work", "command_id": b, "command_type": "bad"},
    ]


async def test_levt_2_every_subscriber_gets_every_event() -> None:
    manager = LaneManager.builder().with_lane("work", LaneConfig(1, 1)).build()
    first, second = manager.subscribe(), manager.subscribe()
    async with manager:
        fut = await manager.submit("work", ok)
        one = await asyncio.wait_for(first.recv(), DEADLINE)
        two = await asyncio.wait_for(second.recv(), DEADLINE)
        assert one.key == COMMAND_SUBMITTED
        assert one == two
        await asyncio.wait_for(fut, DEADLINE)

        async def keys_until_completed() -> list[str]:
            seen = []
            async for event in second:
                seen.append(event.key)
                if event.key == COMMAND_COMPLETED:
                    break
            return seen

        assert await asyncio.wait_for(keys_until_completed(), DEADLINE) == [
            COMMAND_STARTED,
            COMMAND_COMPLETED,
        ]
        second.close()
    assert [e async for e in second] == []  # a closed, empty stream ends iteration
    with pytest.raises(EventStreamClosed):
        await second.recv()


async def test_levt_3_filtered_subscription() -> None:
    manager = LaneManager.builder().with_lane("work", LaneConfig(1, 2)).build()
    failures = manager.subscribe_filtered(lambda e: e.key in {COMMAND_FAILED, COMMAND_TIMEOUT})
    async with manager:
        for _ in range(3):
            await asyncio.wait_for(await manager.submit("work", ok), DEADLINE)
        assert failures.try_recv() is None
        bad = await manager.submit("work", boom)
        with pytest.raises(CommandFailed):
            await asyncio.wait_for(bad, DEADLINE)
        events = failures.drain_nowait()
    assert [(e.key, e.command_id) for e in events] == [(COMMAND_FAILED, bad.command_id)]


async def test_levt_4_bounded_emitter_drops_oldest_and_reports_lag() -> None:
    emitter = EventEmitter(100)
    stream = emitter.subscribe()
    for i in range(150):
        emitter.emit(LaneEvent(COMMAND_SUBMITTED, lane_id=f"lane-{i}"))  # never blocks
    notice = await asyncio.wait_for(stream.recv(), DEADLINE)
    assert notice.key == EVENTS_LAGGED
    assert notice.missed == 50
    rest = stream.drain_nowait()
    assert [e.lane_id for e in rest] == [f"lane-{i}" for i in range(50, 150)]

    # Through a manager: an unread subscriber does not hold the scheduler back.
    manager = LaneManager.builder(EventEmitter(10)).with_lane("work", LaneConfig(1, 4)).build()
    slow = manager.subscribe()
    async with manager:
        futures = [await manager.submit("work", ok) for _ in range(30)]
        await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
    events = slow.drain_nowait()
    assert events[0].key == EVENTS_LAGGED
    assert events[0].missed == 30 * 3 + 1 - 10  # 3 per command, plus shutdown.started
    assert len(events) == 11
    assert events[-1].key == SHUTDOWN_STARTED
