"""Fixtures of the Redis tests: a client of the test server (``LANE_PG_TEST_REDIS``), a
key prefix of each test's own, and the keys it wrote deleted afterwards (never FLUSHDB:
the server is shared). An unreachable server skips these tests within a second, saying
why, rather than hanging them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


@pytest_asyncio.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, socket_connect_timeout=1.0, socket_timeout=5.0)
    try:
        await client.ping()
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        await client.aclose()
        pytest.skip(f"no Redis at {redis_url} ({exc}); set LANE_PG_TEST_REDIS")
    try:
        yield client
    finally:
        await client.aclose()


@pytest_asyncio.fixture
async def prefix(redis_client: Redis) -> AsyncIterator[str]:
    """A key prefix no other test uses; its keys are deleted at the end."""
    name = f"t{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        async for key in redis_client.scan_iter(match=f"{{{name}:*", count=500):
            await redis_client.delete(key)
