"""LCFG-1..8: timeout, retry policies and events, pressure, rate limit, boost, keyword config.

Timings the spec states are checked on a ``ManualClock`` (exact virtual time) where the
property is about the schedule, and on the real clock with generous bounds where the
point is that the default clock works.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from lane_pg.scheduler import (
    COMMAND_RETRY,
    COMMAND_TIMEOUT,
    LANE_IDLE,
    LANE_PRESSURE,
    CommandFailed,
    FunctionCommand,
    LaneConfig,
    LaneManager,
    LaneTimeout,
    ManualClock,
    PriorityBoostConfig,
    RateLimitConfig,
    RetryPolicy,
)
from lane_pg.types import JSON

DEADLINE = 5.0


def failing(times: list[float], now: Callable[[], float]) -> FunctionCommand:
    async def run() -> JSON:
        times.append(now())
        raise RuntimeError("always fails")

    return FunctionCommand(run, "fail")


async def test_lcfg_1_timeout_cancels_emits_and_fails() -> None:
    cancelled = asyncio.Event()

    async def slow() -> JSON:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    config = LaneConfig(1, 2, timeout=0.05)
    manager = LaneManager.builder().with_lane("work", config).build()
    timeouts = manager.subscribe_filtered(lambda e: e.key == COMMAND_TIMEOUT)
    async with manager:
        began = time.monotonic()
        fut = await manager.submit("work", slow)
        event = await asyncio.wait_for(timeouts.recv(), DEADLINE)
        elapsed = time.monotonic() - began
        assert 0.045 <= elapsed < 1.0
        assert event.lane_id == "work"
        assert event.command_id == fut.command_id
        assert event.error == "TimeoutError: command timed out after 0.05s"
        with pytest.raises(LaneTimeout) as info:
            await asyncio.wait_for(fut, DEADLINE)
        assert isinstance(info.value, TimeoutError)
        assert isinstance(info.value, CommandFailed)
        await asyncio.wait_for(cancelled.wait(), DEADLINE)


async def test_lcfg_1_timeout_is_a_failed_attempt_that_retries() -> None:
    attempts = 0

    async def slow_then_fast() -> JSON:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await asyncio.sleep(5)
        return attempts

    config = LaneConfig(1, 1, timeout=0.05, retry_policy=RetryPolicy.fixed(1, 0))
    manager = LaneManager.builder().with_lane("work", config).build()
    keys = manager.subscribe_filtered(lambda e: e.key in {COMMAND_TIMEOUT, COMMAND_RETRY})
    async with manager:
        fut = await manager.submit("work", slow_then_fast)
        assert await asyncio.wait_for(fut, DEADLINE) == 2
    assert [e.key for e in keys.drain_nowait()] == [COMMAND_TIMEOUT, COMMAND_RETRY]


async def test_lcfg_2_exponential_retry_gaps() -> None:
    assert RetryPolicy.exponential(10).delay_for(1) == pytest.approx(0.1)
    assert RetryPolicy.exponential(10).delay_for(9) == pytest.approx(25.6)
    assert RetryPolicy.exponential(10).delay_for(10) == pytest.approx(30.0)  # capped

    clock = ManualClock()
    times: list[float] = []
    config = LaneConfig(1, 1, retry_policy=RetryPolicy.exponential(3))
    manager = LaneManager.builder().with_lane("work", config).with_clock(clock).build()
    async with manager:
        fut = await manager.submit("work", failing(times, clock.monotonic))
        with pytest.raises(CommandFailed) as info:
            await clock.run_until(fut)
    assert info.value.attempts == 4
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([0.1, 0.2, 0.4])


async def test_lcfg_3_fixed_and_none_retry_policies() -> None:
    times: list[float] = []
    fixed = LaneConfig(1, 1, retry_policy=RetryPolicy.fixed(2, timedelta(milliseconds=50)))
    none = LaneConfig(1, 1, retry_policy=RetryPolicy.none())
    manager = LaneManager.builder().with_lane("fixed", fixed).with_lane("none", none).build()
    async with manager:
        fut = await manager.submit("fixed", failing(times, time.monotonic))
        with pytest.raises(CommandFailed):
            await asyncio.wait_for(fut, DEADLINE)
        assert len(times) == 3
        for gap in (b - a for a, b in itertools.pairwise(times)):
            assert 0.045 <= gap < 0.5

        once: list[float] = []
        fut = await manager.submit("none", failing(once, time.monotonic))
        with pytest.raises(CommandFailed) as info:
            await asyncio.wait_for(fut, DEADLINE)
        assert len(once) == 1
        assert info.value.attempts == 1


async def test_lcfg_4_retry_events_carry_the_retry_number() -> None:
    clock = ManualClock()
    times: list[float] = []
    config = LaneConfig(1, 1, retry_policy=RetryPolicy.exponential(2))
    manager = LaneManager.builder().with_lane("work", config).with_clock(clock).build()
    retries = manager.subscribe_filtered(lambda e: e.key == COMMAND_RETRY)
    async with manager:
        fut = await manager.submit("work", failing(times, clock.monotonic))
        with pytest.raises(CommandFailed):
            await clock.run_until(fut)
    events = retries.drain_nowait()
    assert [e.attempt for e in events] == [1, 2]
    assert {(e.lane_id, e.command_id) for e in events} == {("work", fut.command_id)}


async def test_lcfg_5_pressure_and_idle_events() -> None:
    gate = asyncio.Event()

    async def blocked() -> JSON:
        await gate.wait()
        return None

    config = LaneConfig(1, 1, pressure_threshold=3)
    manager = (
        LaneManager.builder()
        .with_lane("work", config)
        .with_lane("plain", LaneConfig(1, 1))  # no threshold: never reports
        .build()
    )
    stream = manager.subscribe_filtered(lambda e: e.key in {LANE_PRESSURE, LANE_IDLE})
    async with manager:
        for _round in range(2):
            gate.clear()
            futures = [await manager.submit("work", blocked) for _ in range(5)]
            futures += [await manager.submit("plain", blocked) for _ in range(5)]
            assert [(e.key, e.lane_id) for e in stream.drain_nowait()] == [(LANE_PRESSURE, "work")]
            gate.set()
            await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
            assert [(e.key, e.lane_id) for e in stream.drain_nowait()] == [(LANE_IDLE, "work")]


async def test_lcfg_6_rate_limit_at_dequeue() -> None:
    assert RateLimitConfig.per_minute(7) == RateLimitConfig(7, 60)
    assert RateLimitConfig.per_hour(7) == RateLimitConfig(7, timedelta(hours=1))
    assert RateLimitConfig.unlimited().max_starts is None

    clock = ManualClock()
    starts: list[float] = []

    async def instant() -> JSON:
        starts.append(clock.monotonic())
        return None

    config = LaneConfig(1, 20, rate_limit=RateLimitConfig.per_second(5))
    manager = LaneManager.builder().with_lane("work", config).with_clock(clock).build()
    async with manager:
        futures = [await manager.submit("work", instant) for _ in range(20)]
        assert clock.monotonic() == 0.0  # every submit returned without time passing
        await clock.run_until(asyncio.gather(*futures))
    assert len(starts) == 20
    for start in starts:
        assert sum(1 for s in starts if start <= s < start + 1.0) <= 5
    assert max(starts) - min(starts) == pytest.approx(3.0)  # four windows of five


async def test_lcfg_6_rate_limit_on_the_real_clock() -> None:
    config = LaneConfig(1, 10, rate_limit=RateLimitConfig(2, timedelta(milliseconds=50)))
    manager = LaneManager.builder().with_lane("work", config).build()

    async def instant() -> JSON:
        return None

    async with manager:
        began = time.monotonic()
        futures = [await manager.submit("work", instant) for _ in range(6)]
        assert time.monotonic() - began < 0.04
        await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
        assert 0.09 <= time.monotonic() - began < 2.0  # three windows of two


async def _boost_order(boost: PriorityBoostConfig) -> list[str]:
    clock = ManualClock()
    gate = asyncio.Event()
    order: list[str] = []

    def record(name: str, wait: bool = False) -> FunctionCommand:
        async def run() -> JSON:
            order.append(name)
            if wait:
                await gate.wait()
            return name

        return FunctionCommand(run, name)

    manager = (
        LaneManager.builder()
        .with_lane("high", LaneConfig(1, 4), 0)
        .with_lane("low", LaneConfig(1, 4, priority_boost=boost), 1)
        .with_global_concurrency(1)
        .with_clock(clock)
        .build()
    )
    async with manager:
        futures = [await manager.submit("high", record("blocker", wait=True))]
        futures.append(await manager.submit("low", record("low")))
        clock.advance(3.1)
        futures.append(await manager.submit("high", record("high")))
        gate.set()
        await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
    return order


async def test_lcfg_7_priority_boost_standard_and_disabled() -> None:
    assert await _boost_order(PriorityBoostConfig.standard(4.0)) == ["blocker", "low", "high"]
    assert await _boost_order(PriorityBoostConfig.disabled()) == ["blocker", "high", "low"]


async def test_lcfg_7_boost_curves_a15() -> None:
    standard = PriorityBoostConfig.standard(timedelta(seconds=100))
    aggressive = PriorityBoostConfig.aggressive(100)
    waited = [0, 5, 10, 25, 50, 75, 99, 150]
    assert [standard.boost_for(w) for w in waited] == [0, 0, 0, 1, 2, 3, 3, 3]
    assert [aggressive.boost_for(w) for w in waited] == [0, 0, 2, 4, 6, 8, 8, 8]
    assert PriorityBoostConfig.disabled().boost_for(1e9) == 0


async def test_lcfg_8_keywords_equal_chained_and_frozen() -> None:
    retry = RetryPolicy.exponential(3)
    rate = RateLimitConfig.per_second(100)
    boost = PriorityBoostConfig.standard(300)
    by_keywords = LaneConfig(
        1,
        10,
        timeout=timedelta(seconds=30),
        retry_policy=retry,
        pressure_threshold=50,
        rate_limit=rate,
        priority_boost=boost,
    )
    chained = (
        LaneConfig(1, 10)
        .with_timeout(30)
        .with_retry_policy(retry)
        .with_pressure_threshold(50)
        .with_rate_limit(rate)
        .with_priority_boost(boost)
    )
    assert by_keywords == chained
    assert hash(by_keywords) == hash(chained)
    assert by_keywords.timeout_seconds == 30.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        by_keywords.max_concurrency = 3  # type: ignore[misc]
    with pytest.raises(ValueError):
        LaneConfig(1, 10).with_timeout(-1)
