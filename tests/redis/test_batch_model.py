"""The batch model (``tests/batch_model.py``) on Redis: each example under a key prefix of
its own (its keys deleted in its teardown; the server is shared, never flushed)."""

from __future__ import annotations

import uuid
from typing import ClassVar

import pytest

from lane_pg.redis.backend import RedisBackend
from tests.batch_model import BatchMachine
from tests.helpers import delete_prefix
from tests.redis.test_state_machine import OnRedis, connected, has_keys
from tests.state_machine import run_machine


class BatchesOnRedis(BatchMachine):
    prefixes: ClassVar[list[str]] = []

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"bm{uuid.uuid4().hex[:12]}"
        self.prefixes.append(self.prefix)
        self.real = RedisBackend(OnRedis.client, prefix=self.prefix, owns_client=False)

    def teardown(self) -> None:
        self.run(delete_prefix(OnRedis.client, self.prefix))


@pytest.mark.timeout(600)
def test_batch_counts_and_callbacks_follow_the_model_on_redis(redis_url: str) -> None:
    # 20 examples of 20 steps: 1.4-1.8 s measured on the 2-core test machine.
    with connected(redis_url):
        BatchesOnRedis.loop = OnRedis.loop
        run_machine(BatchesOnRedis, examples=20, steps=20)
        leftovers = [
            prefix
            for prefix in BatchesOnRedis.prefixes
            if OnRedis.loop.run_until_complete(has_keys(OnRedis.client, prefix))
        ]
    assert leftovers == []
