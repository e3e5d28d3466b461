"""The Hypothesis state machine of jobs (``tests/state_machine.py``) on Redis: the rules
and invariants PostgreSQL runs, each example under a key prefix of its own (its keys
deleted in its teardown; the server is shared, never flushed)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import pytest
from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from tests.helpers import delete_prefix, open_test_redis
from tests.state_machine import FlowStateMachine, JobStateMachine, run_machine


class OnRedis(JobStateMachine):
    client: ClassVar[Redis]
    prefixes: ClassVar[list[str]] = []
    """Every example's prefix, checked empty after the test."""

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"sm{uuid.uuid4().hex[:12]}"
        self.prefixes.append(self.prefix)
        self.real = RedisBackend(self.client, prefix=self.prefix, owns_client=False)

    def teardown(self) -> None:
        self.run(delete_prefix(self.client, self.prefix))


class RedisFlows(OnRedis, FlowStateMachine):
    pass


@contextmanager
def connected(url: str) -> Iterator[None]:
    """The loop and the client the examples share (each its own RedisBackend)."""
    OnRedis.loop = asyncio.new_event_loop()
    try:
        OnRedis.client = OnRedis.loop.run_until_complete(open_test_redis(url))
        try:
            yield
        finally:
            OnRedis.loop.run_until_complete(OnRedis.client.aclose())
    finally:
        OnRedis.loop.close()


def follow(machine: type[OnRedis], url: str, examples: int) -> None:
    with connected(url):
        run_machine(machine, examples=examples)
        leftovers = [
            prefix
            for prefix in OnRedis.prefixes
            if OnRedis.loop.run_until_complete(has_keys(OnRedis.client, prefix))
        ]
    assert leftovers == []


@pytest.mark.timeout(600)
def test_redis_follows_the_memory_model(redis_url: str) -> None:
    # 15 examples of 30 steps: 3.0-4.0 s measured on the 2-core test machine (shared, under
    # load); 400 examples took 226 s.
    follow(OnRedis, redis_url, examples=15)


@pytest.mark.timeout(600)
def test_redis_follows_the_memory_model_in_flows(redis_url: str) -> None:
    # Flows drawn far more often: 8 examples, 2.6-3.0 s measured as above.
    follow(RedisFlows, redis_url, examples=8)


async def has_keys(client: Redis, prefix: str) -> bool:
    async for _ in client.scan_iter(match=f"{{{prefix}[:}}]*", count=1000):
        return True
    return False
