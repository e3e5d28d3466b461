"""Small helpers shared by the test suites: deadline-based waiting and event shorthands."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from lane_pg.backend import JobQueueBackend
from lane_pg.types import JSON, JobState, QueueEvent

T = TypeVar("T")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Clock:
    """A fixed base instant and offsets from it (the ``clock`` fixture)."""

    base: datetime

    def at(self, seconds: float = 0.0) -> datetime:
        """``base + seconds``; millisecond fractions stay exact on every backend."""
        return self.base + timedelta(seconds=seconds)


async def eventually(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 5.0,  # noqa: ASYNC109 - a polling deadline, not a cancellation scope
    interval: float = 0.01,
) -> T:
    """Poll ``predicate`` (sync or async) until it returns a truthy value and return it.

    Raises ``AssertionError`` when ``timeout`` seconds pass first. This is the only way
    tests wait for asynchronous outcomes: never a fixed sleep.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        last = result
        if loop.time() >= deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value {last!r})")
        await asyncio.sleep(interval)


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the Unix epoch, as carried by ``delayed`` events."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


async def events(backend: JobQueueBackend, queue: str, limit: int = 1000) -> list[QueueEvent]:
    """Every retained event of the queue, in id order."""
    return await backend.read_events(queue, "-", "+", limit)


async def queue_level_events(backend: JobQueueBackend, queue: str) -> list[QueueEvent]:
    """The events that carry no job id (``drained``, ``paused``, ``resumed``)."""
    return [event for event in await events(backend, queue) if event.job_id is None]


async def event_names(backend: JobQueueBackend, queue: str) -> list[str]:
    return [event.event for event in await events(backend, queue)]


async def job_event_list(
    backend: JobQueueBackend, queue: str, job_id: str
) -> list[tuple[str, dict[str, JSON]]]:
    """``(name, data)`` of every event of one job, in id order."""
    return [
        (event.event, event.data)
        for event in await events(backend, queue)
        if event.job_id == job_id
    ]


async def queue_snapshot(
    backend: JobQueueBackend, queue: str
) -> tuple[dict[JobState, int], list[tuple[int, str, str | None]]]:
    """Counts plus the event list: compared before and after a refused call."""
    counts = await backend.get_job_counts(queue)
    seen = [(event.id, event.event, event.job_id) for event in await events(backend, queue)]
    return counts, seen


async def open_test_redis(url: str) -> Any:
    """A client of the test Redis server, or a skip saying why within a second when it
    cannot be reached (TEST-8: an unreachable server never hangs the suite)."""
    import pytest
    from redis.asyncio import Redis
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    client = Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=10.0)
    try:
        await client.ping()
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        await client.aclose()
        pytest.skip(f"no Redis at {url} ({exc}); set LANE_PG_TEST_REDIS")
    return client


async def delete_prefix(client: Any, prefix: str) -> None:
    """Delete every key of a Redis key prefix: its queues' ``{prefix:queue}:...`` and the
    connection-wide ``{prefix}:...`` (never FLUSHDB: the test server is shared)."""
    async for key in client.scan_iter(match=f"{{{prefix}[:}}]*", count=1000):
        await client.delete(key)
