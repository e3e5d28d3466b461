"""A worker whose store stops answering claims (WORK-16's connection loss, FOV-5's
"retried with backoff"): it keeps running, retries with backoff, logs one warning for the
outage and one line when claims work again, and then claims as before.

The store is a memory backend whose ``claim_jobs`` raises what a dropped connection raises
while ``down`` (an operation hook that raises instead of proceeding to the call)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from lane_pg.backend import OperationCall
from lane_pg.memory import MemoryBackend
from lane_pg.types import JSON, JobRow, Lane
from lane_pg.worker import JobContext, Worker, WorkerConfig
from tests.helpers import eventually


class Unreachable(MemoryBackend):
    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.refused = 0
        self.hooks.add(self._outage)

    async def _outage(self, call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        if call.operation.name == "claim_jobs" and self.down:
            self.refused += 1
            raise ConnectionResetError(104, "connection reset (outage)")
        return await proceed()


async def test_claims_back_off_and_log_once_per_outage_WORK_16(
    queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="lane_pg.worker")
    backend = Unreachable()
    done: list[str] = []

    async def record(job: JobRow, ctx: JobContext) -> JSON:
        done.append(job.id)
        return None

    worker = Worker(
        backend, {"n": record}, WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05)
    )
    backend.down = True
    task = worker.start()
    try:
        await eventually(lambda: backend.refused >= 4, timeout=20)  # 0.05, 0.1, 0.2 s, ...
        job = await backend.add_job(queue_name, "n")
        backend.down = False
        await eventually(lambda: done == [job.id], timeout=20)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
    lines = [r.getMessage() for r in caplog.records if "claims" in r.getMessage()]
    failing = [line for line in lines if "claims failing" in line]
    assert len(failing) == 1 and "ConnectionResetError" in failing[0], lines
    assert len([line for line in lines if "claims working again" in line]) == 1, lines
