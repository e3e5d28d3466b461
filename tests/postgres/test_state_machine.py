"""The Hypothesis state machine of jobs (``tests/state_machine.py``) on PostgreSQL: every
example has a queue of its own on one shared PostgresBackend, deleted in its teardown."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg
import pytest

from lane_pg.postgres.backend import PostgresBackend
from tests.state_machine import FlowStateMachine, JobStateMachine, run_machine


class OnPostgres(JobStateMachine):
    real: PostgresBackend

    def teardown(self) -> None:
        async def cleanup() -> None:
            async with self.real.pool.acquire() as conn:
                await conn.execute(
                    "DELETE FROM lane.job_logs WHERE job_key IN"
                    " (SELECT key FROM lane.jobs WHERE queue = $1)",
                    self.queue,
                )
                await conn.execute(
                    "DELETE FROM lane.flow_deps WHERE parent_key IN"
                    " (SELECT key FROM lane.jobs WHERE queue = $1)",
                    self.queue,
                )
                await conn.execute("DELETE FROM lane.jobs WHERE queue = $1", self.queue)
                await conn.execute("DELETE FROM lane.dedup_owners WHERE queue = $1", self.queue)
                await conn.execute(
                    "DELETE FROM lane.repeat_schedulers WHERE queue = $1", self.queue
                )
                await conn.execute("DELETE FROM lane.events WHERE queue = $1", self.queue)
                await conn.execute("DELETE FROM lane.claim_log WHERE queue = $1", self.queue)
                await conn.execute("DELETE FROM lane.queues WHERE name = $1", self.queue)

        self.run(cleanup())


class PostgresFlows(OnPostgres, FlowStateMachine):
    pass


@contextmanager
def connected(machine: type[JobStateMachine], dsn: str) -> Iterator[None]:
    """The loop and the PostgresBackend the examples of ``machine`` share."""
    machine.loop = asyncio.new_event_loop()
    try:
        machine.real = machine.loop.run_until_complete(
            PostgresBackend.connect(dsn, min_size=1, max_size=2)
        )
        try:
            yield
        finally:
            machine.loop.run_until_complete(machine.real.close())
    finally:
        machine.loop.close()


@pytest.mark.timeout(600)  # ~20 examples of 30 steps, two backends each step
def test_postgres_follows_the_memory_model_in_flows(pg_dsn: str) -> None:
    with connected(PostgresFlows, pg_dsn):
        run_machine(PostgresFlows, examples=20)


@pytest.mark.timeout(600)
def test_postgres_follows_the_memory_model(pg_dsn: str) -> None:
    with connected(OnPostgres, pg_dsn):
        run_machine(OnPostgres, examples=40)


@pytest.fixture(autouse=True)
def _no_leftover_queues(pg_dsn: str) -> Any:
    yield
    # Each example cleans up after itself; this double-checks it from outside.

    async def leftovers() -> int:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return int(
                await conn.fetchval("SELECT count(*) FROM lane.jobs WHERE queue LIKE 'sm\\_%'")
            )
        finally:
            await conn.close()

    assert asyncio.run(leftovers()) == 0
