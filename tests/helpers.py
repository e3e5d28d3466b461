"""Small helpers shared by the test suites: deadline-based waiting and event shorthands."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
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


_REDIS_PROBES: dict[str, str | None] = {}
"""Per URL, why the test server cannot be used (None: it answered PING), probed once per
process: a blackholed address costs one connect timeout per session, not one per test."""


async def require_test_redis(url: str) -> None:
    """Skip the test, saying why, unless the test Redis server answers (TEST-8: an
    unreachable server never hangs the suite). The server is probed once per process
    with short timeouts (``probe_redis``); after a failed probe every test skips at once."""
    import pytest

    if url not in _REDIS_PROBES:
        _REDIS_PROBES[url] = await probe_redis(url)
    why = _REDIS_PROBES[url]
    if why is not None:
        pytest.skip(f"no usable Redis at {url} ({why}); set LANE_PG_TEST_REDIS")


async def open_test_redis(url: str) -> Any:
    """A client of the test Redis server, or a skip saying why (``require_test_redis``).
    ``LANE_PG_TEST_REDIS=redis+cluster://...`` runs on a cluster: a cluster client."""
    await require_test_redis(url)
    return _test_client(url, socket_connect_timeout=1.0, socket_timeout=10.0)


def _test_client(url: str, **options: Any) -> Any:
    from redis.asyncio import Redis

    from lane_pg.backend.url import redis_cluster_url

    cluster = redis_cluster_url(url)
    if cluster is not None:
        from redis.asyncio.cluster import RedisCluster

        return RedisCluster.from_url(cluster, **options)
    return Redis.from_url(url, **options)


async def probe_redis(url: str) -> str | None:
    """Why ``url`` is no usable Redis server, or None when it answers PING, within about
    two seconds whatever is (or is not) there: nothing listening, an address that drops
    packets, a server that accepts and never answers, or something that is not Redis."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import RedisClusterException, RedisError

    client = None
    try:
        async with asyncio.timeout(2.0):  # a bound on top of the socket timeouts
            client = _test_client(
                url, socket_connect_timeout=1.0, socket_timeout=1.0, retry=Retry(NoBackoff(), 0)
            )
            await client.ping()
    except (RedisError, RedisClusterException, OSError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        if client is not None:
            await client.aclose()
    return None


async def delete_prefix(client: Any, prefix: str) -> None:
    """Delete every key of a Redis key prefix: its queues' ``{prefix:queue}:...`` and the
    connection-wide ``{prefix}:...`` (never FLUSHDB: the test server is shared)."""
    async for key in client.scan_iter(match=f"{{{prefix}[:}}]*", count=1000):
        await client.delete(key)


def precondition_named(check: Callable[[Any], object]) -> Callable[[Any], object]:
    """A Hypothesis ``@precondition`` lambda under a name of its own (its line).

    Hypothesis names each precondition on every check of it, and a lambda's name comes from
    parsing its source (``ast.parse``) each time: once, in a full run, CPython 3.11.7 raised
    ``SystemError: AST constructor recursion depth mismatch`` there (its AST depth counter
    is shared by the whole process) and failed a state machine that had found nothing. A
    function with a name is described by the name."""
    check.__name__ = check.__qualname__ = f"precondition_line_{check.__code__.co_firstlineno}"
    return check


def stop_process(popen: subprocess.Popen[bytes]) -> None:
    """SIGTERM, up to 10 s to exit, then SIGKILL: a server or process a test started."""
    popen.terminate()
    try:
        popen.wait(10)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait()
