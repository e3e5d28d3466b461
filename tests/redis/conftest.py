"""Fixtures of the Redis tests: a client of the test server (``LANE_PG_TEST_REDIS``), a
key prefix of each test's own, and the keys it wrote deleted afterwards (never FLUSHDB:
the server is shared). An unreachable server skips these tests within a second, saying
why, rather than hanging them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest_asyncio
from redis.asyncio import Redis

from tests.helpers import delete_prefix, open_test_redis


@pytest_asyncio.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Redis]:
    client: Redis = await open_test_redis(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest_asyncio.fixture
async def prefix(redis_client: Redis) -> AsyncIterator[str]:
    """A key prefix no other test uses; its keys (the queues' ``{name:queue}:...`` and the
    connection-wide ``{name}:...``) are deleted at the end."""
    name = f"t{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        await delete_prefix(redis_client, name)
