"""The batch model (``tests/batch_model.py``) on PostgreSQL: every example has queues of its
own on one shared PostgresBackend, deleted in its teardown."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lane_pg.postgres.backend import PostgresBackend
from tests.batch_model import BatchMachine
from tests.state_machine import run_machine


class OnPostgres(BatchMachine):
    real: PostgresBackend

    def teardown(self) -> None:
        async def cleanup() -> None:
            async with self.real.pool.acquire() as conn:
                for queue in (self.queue, self.callback_queue):
                    await conn.execute(
                        "DELETE FROM lane.batch_settlements WHERE job_queue = $1", queue
                    )
                    await conn.execute("DELETE FROM lane.jobs WHERE queue = $1", queue)
                    await conn.execute("DELETE FROM lane.events WHERE queue = $1", queue)
                    await conn.execute("DELETE FROM lane.claim_log WHERE queue = $1", queue)
                    await conn.execute("DELETE FROM lane.queues WHERE name = $1", queue)
                await conn.execute("DELETE FROM lane.batches WHERE id = $1", self.batch_id)

        if self.ids:
            self.run(cleanup())


@contextmanager
def connected(dsn: str) -> Iterator[None]:
    OnPostgres.loop = asyncio.new_event_loop()
    try:
        OnPostgres.real = OnPostgres.loop.run_until_complete(
            PostgresBackend.connect(dsn, min_size=1, max_size=2)
        )
        try:
            yield
        finally:
            OnPostgres.loop.run_until_complete(OnPostgres.real.close())
    finally:
        OnPostgres.loop.close()


@pytest.mark.timeout(600)
def test_batch_counts_and_callbacks_follow_the_model_on_both_backends(pg_dsn: str) -> None:
    with connected(pg_dsn):
        run_machine(OnPostgres, examples=40, steps=20)
